use super::*;

fn queuing(queues: u32, hand_size: u32, queue_length_limit: u32) -> Mode {
    let config = Queuing {
        queues,
        hand_size,
        queue_length_limit,
    };
    Mode::Queue(config, Dealer::new(queues, hand_size).unwrap())
}

fn run(start: Start) -> Grant {
    match start {
        Start::Run(grant) => grant,
        other => panic!("expected to run, got {other:?}"),
    }
}

fn wait(start: Start) -> Ticket {
    match start {
        Start::Wait(ticket) => ticket,
        other => panic!("expected to wait, got {other:?}"),
    }
}

/// Finishes the running request, then returns which ticket ran next.
fn next_of(
    set: &mut QueueSet,
    now: Instant,
    running: Grant,
    tickets: &mut [(char, Ticket)],
) -> Option<(char, Grant)> {
    set.finish(now, running);
    for (name, ticket) in tickets.iter_mut() {
        if let Ok(grant) = ticket.grant.try_recv() {
            return Some((*name, grant));
        }
    }
    None
}

#[test]
fn a_busy_flow_and_a_quiet_one_take_turns() {
    let now = Instant::now();
    let mut set = QueueSet::new(queuing(2, 1, 50), 1, now);
    // Hash 0 deals queue 0, hash 1 queue 1.
    let mut running = run(set.start(now, 0, 1));
    let mut tickets: Vec<(char, Ticket)> =
        (0..6).map(|_| ('e', wait(set.start(now, 0, 1)))).collect();
    tickets.extend((0..2).map(|_| ('m', wait(set.start(now, 1, 1)))));
    let mut order = String::new();
    let mut clock = now;
    while let Some((name, grant)) = {
        clock += Duration::from_millis(3);
        next_of(&mut set, clock, running, &mut tickets)
    } {
        order.push(name);
        running = grant;
    }
    // The mouse's two requests are served among the elephant's first
    // ones, not after all six.
    assert_eq!(order.len(), 8);
    let last_mouse = order.rfind('m').unwrap();
    assert!(last_mouse <= 4, "{order}");
    assert!(set.is_idle() || set.executing == 1);
}

#[test]
fn a_full_queue_rejects_while_seats_are_taken() {
    let now = Instant::now();
    let mut set = QueueSet::new(queuing(1, 1, 2), 1, now);
    let running = run(set.start(now, 7, 1));
    let _a = wait(set.start(now, 7, 1));
    let _b = wait(set.start(now, 7, 1));
    assert!(matches!(
        set.start(now, 7, 1),
        Start::Rejected(RejectReason::QueueFull)
    ));
    set.finish(now, running);
    assert!(matches!(set.start(now, 7, 1), Start::Wait(_)));
}

#[test]
fn a_level_that_does_not_queue_rejects_over_its_limit() {
    let now = Instant::now();
    let mut set = QueueSet::new(Mode::Reject, 2, now);
    let a = run(set.start(now, 0, 1));
    let _b = run(set.start(now, 0, 1));
    assert!(matches!(
        set.start(now, 0, 1),
        Start::Rejected(RejectReason::ConcurrencyLimit)
    ));
    set.finish(now, a);
    run(set.start(now, 0, 1));
    // Exempt: never limited, but counted.
    let mut exempt = QueueSet::new(Mode::Exempt, 0, now);
    for _ in 0..100 {
        run(exempt.start(now, 0, 1));
    }
    assert_eq!(exempt.seats_in_use(), 100);
}

#[test]
fn cancelling_takes_a_waiting_request_out_but_not_a_dispatched_one() {
    let now = Instant::now();
    let mut set = QueueSet::new(queuing(4, 2, 10), 1, now);
    let running = run(set.start(now, 1, 1));
    let first = wait(set.start(now, 2, 1));
    let second = wait(set.start(now, 3, 1));
    assert!(set.cancel(now, &second));
    assert!(!set.cancel(now, &second));
    set.finish(now, running);
    // The first one was dispatched, so it can no longer be cancelled.
    assert!(!set.cancel(now, &first));
    assert_eq!(set.seats_waiting, 0);
    assert_eq!(set.executing, 1);
}

#[test]
fn a_request_wider_than_the_limit_runs_alone() {
    let now = Instant::now();
    let mut set = QueueSet::new(queuing(8, 2, 10), 4, now);
    let narrow = run(set.start(now, 1, 1));
    let mut wide = wait(set.start(now, 2, 10));
    // Nor does a narrow one overtake it... the wide one is first in
    // virtual time once the queue is clear.
    set.finish(now, narrow);
    let grant = wide.grant.try_recv().expect("runs once nothing else does");
    assert_eq!(grant.seats, 10);
    let mut after = wait(set.start(now, 3, 1));
    set.finish(now, grant);
    assert!(after.grant.try_recv().is_ok());
}

#[test]
fn a_raised_limit_dispatches_at_once() {
    let now = Instant::now();
    let mut set = QueueSet::new(queuing(8, 2, 10), 1, now);
    let _running = run(set.start(now, 1, 1));
    let mut tickets: Vec<Ticket> = (0..3).map(|h| wait(set.start(now, h, 1))).collect();
    set.set_limit(now, 4);
    assert!(tickets.iter_mut().all(|t| t.grant.try_recv().is_ok()));
    assert_eq!(set.seats_in_use(), 4);
    assert_eq!(set.limit(), 4);
}

#[test]
fn the_time_a_request_really_took_is_charged_to_its_queue() {
    let now = Instant::now();
    let mut set = QueueSet::new(queuing(2, 1, 50), 1, now);
    let running = run(set.start(now, 0, 1));
    let _next = wait(set.start(now, 0, 1));
    let before = set.queues[&0].next_dispatch_r;
    // It was charged the estimated 3 ms; it took a second, and the next
    // one is charged its 3 ms on dispatch.
    set.finish(now + Duration::from_secs(1), running);
    let after = set.queues[&0].next_dispatch_r;
    assert!((after - before - 1.0).abs() < 1e-9, "{before} -> {after}");
    assert!(set.virtual_time() > 0.0);
}
