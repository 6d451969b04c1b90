//! Checks after each workload: what the clients were told agrees with
//! itself and with the server's state afterwards.

use etcd_client::{GetOptions, KvClient};

use crate::checks::Checks;
use crate::client::{header_revision, within};
use crate::run_spec::{ClientResult, RunSpec};

/// After a put run: the store holds exactly the acknowledged keys, and the
/// acknowledged revisions are unique, increasing per client, and exactly
/// the revisions after the start (nothing else writes meanwhile).
pub(crate) async fn puts(
    spec: &RunSpec,
    admin: &mut KvClient,
    prefix: &str,
    start_revision: i64,
    results: &[ClientResult],
    checks: &mut Checks,
) {
    let label = spec.label();
    let acked: u64 = results.iter().map(|r| r.ok).sum();
    let put_prefix = format!("{prefix}put/");
    let counted = within(
        spec.request_timeout,
        admin.get(
            put_prefix.clone(),
            Some(GetOptions::new().with_prefix().with_count_only()),
        ),
    )
    .await;
    let (count_ok, count_detail, end_revision) = match counted {
        Ok(resp) => (
            u64::try_from(resp.count()).ok() == Some(acked),
            format!(
                "{} keys under {put_prefix}, {acked} puts acknowledged",
                resp.count()
            ),
            Some(header_revision(resp.header())),
        ),
        Err(err) => (false, format!("count range failed: {err}"), None),
    };
    checks.record(
        format!("{label}: key count equals acknowledged puts"),
        count_ok,
        count_detail,
    );

    revisions(&label, start_revision, end_revision, results, checks);
}

/// The revisions acknowledged to writers are unique, increase per client,
/// and are exactly the ones after `start_revision` (nothing else writes).
pub(crate) fn revisions(
    label: &str,
    start_revision: i64,
    end_revision: Option<i64>,
    results: &[ClientResult],
    checks: &mut Checks,
) {
    let acked: u64 = results.iter().map(|r| r.ok).sum();
    let per_client: Vec<&[i64]> = results.iter().map(|r| r.revisions.as_slice()).collect();
    let duplicates = repeated_revisions(&per_client);
    checks.record(
        format!("{label}: write revisions are unique"),
        duplicates.is_none() && acked > 0,
        duplicates.unwrap_or_else(|| format!("{acked} distinct revisions")),
    );

    let disorder = first_disorder(&per_client);
    checks.record(
        format!("{label}: each client's write revisions increase"),
        disorder.is_none(),
        disorder.unwrap_or_else(|| format!("{} clients in order", results.len())),
    );

    let expected_last = start_revision + acked as i64;
    let gap = revision_gap(&per_client, start_revision, end_revision);
    checks.record(
        format!(
            "{label}: write revisions are exactly {}..={expected_last}",
            start_revision + 1
        ),
        gap.is_none(),
        gap.unwrap_or_else(|| format!("store revision afterwards {expected_last}")),
    );
}

/// After a get run: every read returned the value written before the run,
/// at a revision no older than that write, never going back per client.
pub(crate) fn gets(
    spec: &RunSpec,
    write_revision: i64,
    results: &[ClientResult],
    checks: &mut Checks,
) {
    let label = spec.label();
    let wrong: u64 = results.iter().map(|r| r.wrong_reads).sum();
    let reads: u64 = results.iter().map(|r| r.ok).sum();
    let sample = results.iter().flat_map(|r| r.wrong_samples.iter()).next();
    checks.record(
        format!("{label}: every read returned the written value"),
        wrong == 0 && reads > 0,
        match sample {
            None => format!("{reads} reads"),
            Some(sample) => format!("{wrong} of {reads} reads wrong, e.g. {sample}"),
        },
    );

    let per_client: Vec<&[i64]> = results.iter().map(|r| r.revisions.as_slice()).collect();
    let problem = read_regression(&per_client, write_revision);
    checks.record(
        format!("{label}: read revisions never go back"),
        problem.is_none(),
        problem.unwrap_or_else(|| format!("all reads at revision >= {write_revision}")),
    );
}

/// Revisions acknowledged more than once, described; None if all differ.
fn repeated_revisions(per_client: &[&[i64]]) -> Option<String> {
    let mut all: Vec<i64> = per_client.iter().flat_map(|r| r.iter().copied()).collect();
    all.sort_unstable();
    let repeats: Vec<i64> = all
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    (!repeats.is_empty()).then(|| {
        format!(
            "{} of {} acknowledgements repeat a revision, e.g. {:?}",
            repeats.len(),
            all.len(),
            &repeats[..repeats.len().min(5)]
        )
    })
}

/// The first place a client's acknowledged put revisions fail to increase.
fn first_disorder(per_client: &[&[i64]]) -> Option<String> {
    per_client
        .iter()
        .enumerate()
        .find_map(|(client, revisions)| {
            revisions
                .windows(2)
                .find(|w| w[1] <= w[0])
                .map(|w| format!("client {client}: revision {} after {}", w[1], w[0]))
        })
}

/// With nothing else writing, N acknowledged puts after `start` must hold
/// exactly revisions start+1..=start+N, and the store must be at start+N.
fn revision_gap(per_client: &[&[i64]], start: i64, end: Option<i64>) -> Option<String> {
    let mut all: Vec<i64> = per_client.iter().flat_map(|r| r.iter().copied()).collect();
    all.sort_unstable();
    all.dedup();
    let acked: usize = per_client.iter().map(|r| r.len()).sum();
    let expected_last = start + acked as i64;
    let exact = all.len() == acked
        && all.first().is_none_or(|&first| first == start + 1)
        && all.last().is_none_or(|&last| last == expected_last);
    let store_ok = end.is_none_or(|end| end == expected_last);
    if exact && store_ok {
        return None;
    }
    Some(format!(
        "start revision {start}, {acked} acknowledged puts with {} distinct revisions {:?}..={:?}, \
         store revision afterwards {}",
        all.len(),
        all.first(),
        all.last(),
        end.map_or("unknown".into(), |r| r.to_string())
    ))
}

/// The first read whose revision is below the write it must see or below
/// the same client's previous read.
fn read_regression(per_client: &[&[i64]], write_revision: i64) -> Option<String> {
    for (client, revisions) in per_client.iter().enumerate() {
        let mut previous = write_revision;
        for &revision in revisions.iter() {
            if revision < previous {
                return Some(format!(
                    "client {client}: read at revision {revision} after {previous} \
                     (the key was written at {write_revision})"
                ));
            }
            previous = revision;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_revisions_are_found() {
        assert!(repeated_revisions(&[&[2, 4], &[3, 5]]).is_none());
        let found = repeated_revisions(&[&[2, 4], &[4, 5]]).unwrap();
        assert!(found.contains("[4]"), "{found}");
    }

    #[test]
    fn per_client_order() {
        assert!(first_disorder(&[&[2, 4, 9], &[3]]).is_none());
        let found = first_disorder(&[&[2, 4], &[5, 3]]).unwrap();
        assert!(found.starts_with("client 1"), "{found}");
        assert!(first_disorder(&[&[2, 2]]).is_some());
    }

    #[test]
    fn revisions_must_follow_the_start_without_gaps() {
        assert!(revision_gap(&[&[11, 13], &[12]], 10, Some(13)).is_none());
        assert!(revision_gap(&[&[11, 14], &[12]], 10, Some(14)).is_some()); // gap at 13
        assert!(revision_gap(&[&[11, 13], &[12]], 10, Some(14)).is_some()); // store moved on
        assert!(revision_gap(&[&[11, 12], &[12]], 10, Some(13)).is_some()); // repeat
        assert!(revision_gap(&[&[], &[]], 10, Some(10)).is_none());
    }

    #[test]
    fn reads_never_go_back() {
        assert!(read_regression(&[&[5, 5, 7], &[6]], 5).is_none());
        assert!(read_regression(&[&[4]], 5).is_some()); // older than the write
        assert!(read_regression(&[&[6], &[7, 6]], 5).is_some()); // went back
    }
}
