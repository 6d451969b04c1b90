//! Concurrency limits. The server's limit (`--max-requests-inflight` +
//! `--max-mutating-requests-inflight`) is shared among the levels by
//! their nominalConcurrencyShares; each level may lend
//! `lendablePercent` of its nominal limit and borrow up to
//! `borrowingLimitPercent` of it (unbounded when unset). Periodically the
//! current limits are re-divided so that each level gets seats in
//! proportion to its recent demand, within those bounds.

/// The seat limits a level's configuration implies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub nominal: u32,
    /// The nominal limit less what may be lent.
    pub lower: u32,
    /// The nominal limit plus what may be borrowed.
    pub upper: u32,
    /// The largest width a single request may be given: for a queuing
    /// level 15% of the nominal limit, at most nominal/handSize, at
    /// least 1, so that one wide request cannot take a level over.
    pub max_seats: u32,
}

/// Share of the nominal limit a single request may take.
const MAX_SEATS_FRACTION: f64 = 0.15;

impl Limits {
    pub fn new(
        server_limit: u32,
        shares: u32,
        share_sum: u32,
        lendable_percent: u32,
        borrowing: Option<u32>,
        hand_size: Option<u32>,
    ) -> Limits {
        let nominal = if share_sum == 0 {
            0
        } else {
            (server_limit as f64 * shares as f64 / share_sum as f64).ceil() as u32
        };
        let lendable = (nominal as f64 * lendable_percent as f64 / 100.0).round() as u32;
        let borrowable = match borrowing {
            Some(percent) => (nominal as f64 * percent as f64 / 100.0).round() as u32,
            None => server_limit,
        };
        let max_seats = match hand_size {
            Some(hand) => {
                let by_share = (nominal as f64 * MAX_SEATS_FRACTION).ceil() as u32;
                by_share.min(nominal / hand.max(1)).max(1)
            }
            // A level that does not queue bounds nothing beyond the work
            // estimator's own maximum.
            None => u32::MAX,
        };
        Limits {
            nominal,
            lower: nominal - lendable.min(nominal),
            upper: nominal.saturating_add(borrowable),
            max_seats,
        }
    }

    /// Where a new level starts: half of what it may lend, lent.
    pub fn initial(&self) -> u32 {
        self.nominal - (self.nominal - self.lower) / 2
    }
}

/// One level's part in the division: it gets at least `lower`, at most
/// `upper`, and otherwise a share in proportion to `target`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Claim {
    pub lower: f64,
    pub upper: f64,
    pub target: f64,
}

/// Targets are floored so a level with no demand still has a direction.
const MIN_TARGET: f64 = 0.001;

/// Divides `total` among the claims: each gets `fair * target` clamped to
/// its bounds, with the one `fair` ratio that makes them sum to `total`.
/// Where the bounds cannot sum to `total` every claim gets the bound on
/// that side. Returns the allocations and the ratio.
pub fn divide(total: u32, claims: &[Claim]) -> (Vec<f64>, f64) {
    let total = total as f64;
    let lows: f64 = claims.iter().map(|c| c.lower).sum();
    let highs: f64 = claims.iter().map(|c| c.upper).sum();
    if claims.is_empty() || total <= lows {
        return (claims.iter().map(|c| c.lower).collect(), 0.0);
    }
    if total >= highs {
        return (claims.iter().map(|c| c.upper).collect(), f64::INFINITY);
    }
    let share = |fair: f64, c: &Claim| (fair * c.target.max(MIN_TARGET)).clamp(c.lower, c.upper);
    let sum = |fair: f64| claims.iter().map(|c| share(fair, c)).sum::<f64>();
    // The sum grows with the ratio: find the crossing by bisection, from
    // a ratio every bound is below to one every bound is above.
    let (mut low, mut high) = (0.0, 1.0);
    while sum(high) < total {
        high *= 2.0;
    }
    for _ in 0..100 {
        let middle = (low + high) / 2.0;
        if sum(middle) < total {
            low = middle;
        } else {
            high = middle;
        }
    }
    (claims.iter().map(|c| share(high, c)).collect(), high)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_defaults_divide_six_hundred_seats() {
        // The suggested and mandatory shares: 30+40+10+40+100+20+5 = 245.
        let limits = |shares, lendable| Limits::new(600, shares, 245, lendable, None, Some(6));
        let workload_low = limits(100, 90);
        assert_eq!(workload_low.nominal, 245);
        assert_eq!(workload_low.lower, 24);
        assert_eq!(workload_low.upper, 845);
        assert_eq!(workload_low.max_seats, 37);
        let leader = Limits::new(600, 10, 245, 0, None, Some(4));
        assert_eq!(
            (leader.nominal, leader.lower, leader.max_seats),
            (25, 25, 4)
        );
        let catch_all = Limits::new(600, 5, 245, 0, None, None);
        assert_eq!((catch_all.nominal, catch_all.max_seats), (13, u32::MAX));
        let exempt = Limits::new(600, 0, 245, 0, None, None);
        assert_eq!((exempt.nominal, exempt.lower, exempt.upper), (0, 0, 600));
        assert_eq!(workload_low.initial(), 245 - 110);
    }

    #[test]
    fn borrowing_limit_bounds_the_upper_limit() {
        let limits = Limits::new(100, 1, 2, 50, Some(20), Some(1));
        assert_eq!((limits.nominal, limits.lower, limits.upper), (50, 25, 60));
        assert_eq!(limits.max_seats, 8);
    }

    #[test]
    fn idle_levels_lend_to_busy_ones() {
        // Two levels of 10 seats, each lending half: one is idle, the
        // other wants 30.
        let claims = [
            Claim {
                lower: 5.0,
                upper: 30.0,
                target: 5.0,
            },
            Claim {
                lower: 5.0,
                upper: 30.0,
                target: 30.0,
            },
        ];
        let (shares, _) = divide(20, &claims);
        assert!((shares[0] - 5.0).abs() < 1e-6, "{shares:?}");
        assert!((shares[1] - 15.0).abs() < 1e-6, "{shares:?}");
    }

    #[test]
    fn equal_demand_divides_in_proportion() {
        let claims = [
            Claim {
                lower: 0.0,
                upper: 100.0,
                target: 10.0,
            },
            Claim {
                lower: 0.0,
                upper: 100.0,
                target: 30.0,
            },
        ];
        let (shares, fair) = divide(20, &claims);
        assert!((shares[0] - 5.0).abs() < 1e-6 && (shares[1] - 15.0).abs() < 1e-6);
        assert!((fair - 0.5).abs() < 1e-6);
    }

    #[test]
    fn bounds_win_when_they_cannot_sum_to_the_total() {
        let claims = [
            Claim {
                lower: 4.0,
                upper: 6.0,
                target: 1.0,
            },
            Claim {
                lower: 4.0,
                upper: 6.0,
                target: 9.0,
            },
        ];
        assert_eq!(divide(20, &claims).0, [6.0, 6.0]);
        assert_eq!(divide(5, &claims).0, [4.0, 4.0]);
        assert_eq!(divide(5, &[]).0, Vec::<f64>::new());
    }
}
