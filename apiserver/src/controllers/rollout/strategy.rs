//! The three rollout types over the per-cluster classification (ocm-wave2.md §1.3–§1.4): the
//! sliding window of `All` and `Progressive` (sdk-go's `progressivePerCluster`), the group by
//! group walk of mandatory groups and `ProgressivePerGroup` (`progressivePerGroup`), and the
//! removed-cluster split every type starts with.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::cluster::v1alpha1::{
    RolloutConfig, RolloutProgressive, RolloutProgressivePerGroup,
};

use super::groups::{Groups, Pick, View};
use super::parse::{self, GoDuration, Size};
use super::{ClusterStatus, Plan, RolloutError, Status};

/// How long a success soaks and a rollout may take, and the time now.
#[derive(Clone, Copy)]
struct Clock {
    soak: GoDuration,
    deadline: GoDuration,
    now: Timestamp,
}

/// What one routine collected; becomes a [`Plan`] once the removed clusters are added.
#[derive(Default)]
struct Outcome {
    to_rollout: Vec<ClusterStatus>,
    timed_out: Vec<ClusterStatus>,
    breach: bool,
}

impl Outcome {
    /// Classifies one existing status (sdk-go's `determineRolloutStatus`), files it, and
    /// answers the status it ends with.
    fn classify(&mut self, status: &ClusterStatus, clock: Clock) -> Status {
        match status.status {
            Status::ToApply => self.to_rollout.push(status.clone()),
            Status::Succeeded => {
                let soak_end = clock.soak.after(status.last_transition, clock.now);
                if let Some(end) = soak_end.filter(|end| clock.now < *end) {
                    self.to_rollout.push(ClusterStatus { recheck: Some(end), ..status.clone() });
                }
            }
            Status::TimeOut | Status::Skip => {}
            Status::Progressing | Status::Failed => {
                let deadline = clock.deadline.after(status.last_transition, clock.now);
                let mut status = ClusterStatus { recheck: deadline, ..status.clone() };
                if deadline.is_some_and(|d| clock.now >= d) {
                    status.status = Status::TimeOut;
                    self.timed_out.push(status);
                    return Status::TimeOut;
                }
                self.to_rollout.push(status);
            }
        }
        status.status
    }

    fn into_plan(self, removed: Vec<ClusterStatus>, now: Timestamp) -> Plan {
        let recheck_after = recheck_after(&self.to_rollout, now);
        Plan {
            to_rollout: self.to_rollout,
            timed_out: self.timed_out,
            removed,
            max_failure_breach: self.breach,
            recheck_after,
        }
    }
}

/// The smallest recheck time still ahead of `now` in the rollout set, as a delay.
fn recheck_after(to_rollout: &[ClusterStatus], now: Timestamp) -> Option<Duration> {
    let ahead = to_rollout.iter().filter_map(|s| s.recheck).map(|t| {
        let nanos = t.as_nanosecond() - now.as_nanosecond();
        u64::try_from(nanos).unwrap_or(if nanos > 0 { u64::MAX } else { 0 })
    });
    ahead.filter(|n| *n > 0).min().map(Duration::from_nanos)
}

fn counts_as_failure(status: Status) -> bool {
    matches!(status, Status::Failed | Status::TimeOut)
}

/// Splits the statuses into those of the placement's clusters and the removed rest, both in
/// input order (sdk-go's `getRemovedClusters`).
fn split_removed<'e>(
    clusters: &BTreeSet<&str>,
    existing: &'e [ClusterStatus],
) -> (Vec<&'e ClusterStatus>, Vec<ClusterStatus>) {
    let (current, removed): (Vec<_>, Vec<_>) =
        existing.iter().partition(|s| clusters.contains(s.cluster.as_str()));
    (current, removed.into_iter().cloned().collect())
}

/// A window of `window` clusters: existing statuses by name first, then new clusters of `view`
/// by name; no new cluster once more than `max_failures` failed (sdk-go's
/// `progressivePerCluster`).
fn per_cluster(
    view: &View<'_>,
    window: usize,
    max_failures: usize,
    clock: Clock,
    current: &[&ClusterStatus],
) -> Outcome {
    let mut sorted = current.to_vec();
    sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    let mut out = Outcome::default();
    let mut seen = HashSet::new();
    let mut failures = 0;
    for status in sorted.into_iter().filter(|s| !s.cluster.is_empty()) {
        seen.insert(status.cluster.as_str());
        // After a breach only clusters already carrying the desired state are looked at.
        let ends_as = if out.breach && status.status == Status::ToApply {
            status.status
        } else {
            out.classify(status, clock)
        };
        if counts_as_failure(ends_as) {
            failures += 1;
            out.breach = failures > max_failures;
        }
        if out.to_rollout.len() >= window {
            return out;
        }
    }
    if out.breach {
        return out;
    }
    for (cluster, group) in view.clusters() {
        if seen.contains(cluster) {
            continue;
        }
        out.to_rollout.push(ClusterStatus::new(cluster, group.clone(), Status::ToApply, None));
        if out.to_rollout.len() >= window {
            break;
        }
    }
    out
}

/// Group by group in index order, `max_failures` measured against each group: every existing
/// status is classified first; a group's clusters without a status (or `ToApply`) are added;
/// the walk stops at the first group after which something other than failures is rolling, or
/// whose failures exceed its tolerance (sdk-go's `progressivePerGroup`).
fn per_group(
    view: &View<'_>,
    max_failures: Size,
    clock: Clock,
    current: &[&ClusterStatus],
) -> Outcome {
    let mut out = Outcome::default();
    let mut known: HashMap<&str, Status> = HashMap::new();
    for status in current.iter().filter(|s| !s.cluster.is_empty()) {
        // `ToApply` is rolled with its group below, as if new.
        if status.status != Status::ToApply {
            known.insert(status.cluster.as_str(), out.classify(status, clock));
        }
    }
    let mut total_failures = 0;
    for (group, members) in view.groups() {
        let tolerated = max_failures.tolerance(members.len());
        let mut group_failures = 0;
        for cluster in members.iter() {
            match known.get(cluster.as_str()) {
                Some(status) => {
                    if counts_as_failure(*status) {
                        group_failures += 1;
                        out.breach = group_failures > tolerated;
                    }
                }
                None => out.to_rollout.push(ClusterStatus::new(
                    cluster.as_str(),
                    (*group).clone(),
                    Status::ToApply,
                    None,
                )),
            }
        }
        total_failures += group_failures;
        if out.to_rollout.len() > total_failures || out.breach {
            return out;
        }
    }
    out
}

/// Rolls the mandatory groups, if any exist, with no failure tolerated; answers the outcome when
/// something there (or anywhere, as sdk-go classifies every status) is still rolling or timed
/// out, and `None` when the rest may start.
fn mandatory_first(
    groups: &Groups,
    picks: &[Pick],
    clock: Clock,
    current: &[&ClusterStatus],
) -> Option<Outcome> {
    let mandatory = groups.only(picks);
    if mandatory.is_empty() {
        return None;
    }
    let out = per_group(&mandatory, Size::Count(0), clock, current);
    (!out.to_rollout.is_empty() || !out.timed_out.is_empty()).then_some(out)
}

/// `All`: every cluster at once; `progressDeadline` only decides what timed out.
pub(super) fn all(
    config: Option<&RolloutConfig>,
    groups: &Groups,
    existing: &[ClusterStatus],
    now: Timestamp,
) -> Result<Plan, RolloutError> {
    let deadline = parse::progress_deadline(config.and_then(|c| c.progress_deadline.as_deref()))?;
    let clock = Clock { soak: GoDuration(0), deadline, now };
    let everything = groups.besides(&[]);
    let clusters: BTreeSet<&str> = everything.clusters().into_keys().collect();
    let (current, removed) = split_removed(&clusters, existing);
    let total = clusters.len();
    let out = per_cluster(&everything, total, total, clock, &current);
    Ok(out.into_plan(removed, now))
}

/// The soak and deadline of `Progressive` and `ProgressivePerGroup`.
fn phased_clock(
    min_success_time: Option<&String>,
    progress_deadline: Option<&String>,
    now: Timestamp,
) -> Result<Clock, RolloutError> {
    let soak = parse::min_success_time(min_success_time.map(String::as_str))?;
    let deadline = parse::progress_deadline(progress_deadline.map(String::as_str))?;
    Ok(Clock { soak, deadline, now })
}

/// `Progressive`: mandatory groups first, then a window of `maxConcurrency` over the other
/// clusters, `maxFailures` measured against every cluster of the placement.
pub(super) fn progressive(
    config: Option<&RolloutProgressive>,
    groups: &Groups,
    existing: &[ClusterStatus],
    now: Timestamp,
) -> Result<Plan, RolloutError> {
    let default = RolloutProgressive::default();
    let config = config.unwrap_or(&default);
    let clock =
        phased_clock(config.min_success_time.as_ref(), config.progress_deadline.as_ref(), now)?;
    let clusters = groups.clusters();
    let (current, removed) = split_removed(&clusters, existing);
    let max_failures =
        Size::parse(config.max_failures.as_ref()).map_err(RolloutError::MaxFailures)?;
    let max_failures = max_failures.tolerance(clusters.len());

    let picks = Pick::of(&config.mandatory_decision_groups);
    if let Some(out) = mandatory_first(groups, &picks, clock, &current) {
        return Ok(out.into_plan(removed, now));
    }
    let rest = groups.besides(&picks);
    let rest_count = rest.clusters().len();
    let window = Size::parse(config.max_concurrency.as_ref())
        .map_err(RolloutError::MaxConcurrency)?
        .window(rest_count);
    let out = per_cluster(&rest, window, max_failures, clock, &current);
    Ok(out.into_plan(removed, now))
}

/// `ProgressivePerGroup`: mandatory groups first, then the other groups one at a time,
/// `maxFailures` measured against each group.
pub(super) fn progressive_per_group(
    config: Option<&RolloutProgressivePerGroup>,
    groups: &Groups,
    existing: &[ClusterStatus],
    now: Timestamp,
) -> Result<Plan, RolloutError> {
    let default = RolloutProgressivePerGroup::default();
    let config = config.unwrap_or(&default);
    let clock =
        phased_clock(config.min_success_time.as_ref(), config.progress_deadline.as_ref(), now)?;
    let max_failures =
        Size::parse(config.max_failures.as_ref()).map_err(RolloutError::MaxFailures)?;
    let clusters = groups.clusters();
    let (current, removed) = split_removed(&clusters, existing);

    let picks = Pick::of(&config.mandatory_decision_groups);
    if let Some(out) = mandatory_first(groups, &picks, clock, &current) {
        return Ok(out.into_plan(removed, now));
    }
    let out = per_group(&groups.besides(&picks), max_failures, clock, &current);
    Ok(out.into_plan(removed, now))
}

#[cfg(test)]
mod tests {
    use super::Status::{Failed, Progressing, Skip, Succeeded, TimeOut, ToApply};
    use super::*;
    use crate::controllers::rollout::GroupKey;

    const MINUTE: i64 = 60_000_000_000;

    fn at(offset: i64) -> Timestamp {
        Timestamp::from_second(1_640_995_200 + offset).unwrap()
    }

    fn status(status: Status, since: Option<i64>, recheck: Option<i64>) -> ClusterStatus {
        ClusterStatus {
            recheck: recheck.map(at),
            ..ClusterStatus::new("cluster1", GroupKey::default(), status, since.map(at))
        }
    }

    /// One classification: soak and deadline (ns), the status, what is rolled, what timed out.
    struct Row {
        name: &'static str,
        soak: i64,
        deadline: i64,
        input: ClusterStatus,
        rolled: Vec<ClusterStatus>,
        timed_out: Vec<ClusterStatus>,
    }

    fn row(name: &'static str, soak: i64, deadline: i64, input: ClusterStatus) -> Row {
        Row { name, soak, deadline, input, rolled: vec![], timed_out: vec![] }
    }

    /// sdk-go's `TestDetermineRolloutStatus` (its two rows of numeric statuses outside the enum
    /// have no equivalent here).
    #[test]
    fn classification_matches_sdk_go() {
        let rows = [
            Row {
                rolled: vec![status(ToApply, None, None)],
                ..row("ToApply", 0, MINUTE, status(ToApply, None, None))
            },
            row("Skip", 0, MINUTE, status(Skip, None, None)),
            row("Succeeded", 0, MINUTE, status(Succeeded, None, None)),
            Row {
                rolled: vec![status(Succeeded, None, Some(60))],
                ..row("Succeeded within minSuccessTime", MINUTE, 0, status(Succeeded, None, None))
            },
            row("Succeeded past minSuccessTime", MINUTE, 0, status(Succeeded, Some(-120), None)),
            row("TimeOut", 0, MINUTE, status(TimeOut, None, None)),
            Row {
                rolled: vec![status(Progressing, Some(-30), Some(30))],
                ..row(
                    "Progressing within the deadline",
                    0,
                    MINUTE,
                    status(Progressing, Some(-30), None),
                )
            },
            Row {
                timed_out: vec![status(TimeOut, Some(-60), Some(0))],
                ..row("Failed exactly at the deadline", 0, MINUTE, status(Failed, Some(-60), None))
            },
            Row {
                rolled: vec![status(Succeeded, None, Some(120))],
                ..row(
                    "Succeeded, no transition time, soak 2m",
                    2 * MINUTE,
                    0,
                    status(Succeeded, None, None),
                )
            },
        ];
        for r in rows {
            let clock =
                Clock { soak: GoDuration(r.soak), deadline: GoDuration(r.deadline), now: at(0) };
            let mut out = Outcome::default();
            let ends_as = out.classify(&r.input, clock);
            assert_eq!(out.to_rollout, r.rolled, "{}", r.name);
            assert_eq!(out.timed_out, r.timed_out, "{}", r.name);
            let expected_end = r.timed_out.first().map_or(r.input.status, |s| s.status);
            assert_eq!(ends_as, expected_end, "{}", r.name);
        }
    }

    /// sdk-go's `TestMinRecheckAfter`: the nearest recheck still ahead.
    #[test]
    fn recheck_after_matches_sdk_go() {
        let secs = |s: u64| Some(Duration::from_secs(s));
        let rows: Vec<(Vec<ClusterStatus>, Option<Duration>)> = vec![
            (vec![status(Progressing, None, Some(30))], secs(30)),
            (
                vec![
                    status(Succeeded, None, Some(60)),
                    status(Progressing, None, Some(30)),
                    status(Progressing, None, Some(60)),
                ],
                secs(30),
            ),
            (vec![status(ToApply, None, None), status(ToApply, None, None)], None),
            (vec![], None),
            (
                vec![
                    status(ToApply, None, None),
                    status(Progressing, None, Some(60)),
                    status(ToApply, None, None),
                ],
                secs(60),
            ),
            // Past and present recheck times are not waited for.
            (vec![status(Progressing, None, Some(-5)), status(Progressing, None, Some(0))], None),
        ];
        for (set, expected) in rows {
            assert_eq!(recheck_after(&set, at(0)), expected, "{set:?}");
        }
    }
}
