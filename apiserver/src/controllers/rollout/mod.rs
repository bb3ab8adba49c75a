//! OCM's rollout library (sdk-go `pkg/apis/cluster/v1alpha1/rollout.go`, ocm-wave2.md §1) as a
//! pure function: which clusters of a placement take a new desired state now, which are past
//! their deadline, which left the placement, and when to look again.
//!
//! The caller (the ManifestWorkReplicaSet controller, later the add-on manager) supplies the
//! placement's decision groups ([`Groups`]), a [`ClusterStatus`] for every cluster that already
//! carries the *current* desired state (a cluster without one is new), the strategy and the time;
//! [`plan`] answers a [`Plan`]. No IO, no clock: `now` is an argument, so a condition's
//! `lastTransitionTime.0` goes in as it is.
//!
//! Files: `decided` reads a placement's decisions from the cache, `parse` reads the strategy's durations and sizes, `groups` holds the decision groups
//! the way sdk-go's decision tracker selects them, `strategy` classifies clusters and runs `All`,
//! `Progressive` and `ProgressivePerGroup`.
//!
//! What a plan means (ocm-wave2.md §1.3–§1.4):
//! - A status that names a cluster outside every decision group is *removed* (its work goes).
//! - `ToApply` is rolled. `Succeeded` stays in the rollout set while it soaks
//!   (`lastTransitionTime + minSuccessTime` still ahead). `Progressing`, `Failed` and anything
//!   else stay in it until `lastTransitionTime + progressDeadline`, then turn `TimeOut` and are
//!   reported in [`Plan::timed_out`]. `TimeOut` and `Skip` are left alone.
//! - `All` rolls every cluster at once. `Progressive` rolls the mandatory decision groups first
//!   (no failure tolerated; while anything is still rolling or timed out there, nothing else
//!   starts), then a window of `maxConcurrency` clusters in name order, and adds no new cluster
//!   once more than `maxFailures` clusters failed or timed out. `ProgressivePerGroup` rolls the
//!   mandatory groups the same way, then one group at a time in index order, `maxFailures` per
//!   group.
//! - [`Plan::recheck_after`] is the nearest future soak end or deadline of the rollout set.
//!
//! Deviation from OCM (the one the project asks for, ocm-wave2.md §7): sdk-go turns a
//! `maxFailures` that is larger than the population it is measured against into **0**, so
//! `maxFailures: 5` over 3 clusters tolerates no failure at all. Here `maxFailures` means what it
//! says: a value above the population tolerates every failure (it is clamped to the population),
//! and 0 (or a negative value, or `0%`) stays 0. `maxConcurrency` keeps OCM's rule: 0, negative
//! or above the population means all at once.
//!
//! Where sdk-go reads a Go map in random order, this module picks one order and keeps it: a
//! cluster listed in two decision groups belongs to the one of lowest index; of two groups
//! sharing an index, the one whose name sorts last names the index. `minSuccessTime` is a Go
//! duration string here; sdk-go never sees a bad one (decoding fails first), so a bad one is an
//! error of [`plan`] for `Progressive` and `ProgressivePerGroup` (`All` ignores the field, as
//! OCM does). Everything else follows sdk-go, quirks included (see [`Groups`] for the decision
//! tracker's).

mod decided;
mod groups;
mod parse;
mod strategy;
#[cfg(test)]
mod tests;

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::cluster::v1alpha1::{
    ROLLOUT_ALL, ROLLOUT_PROGRESSIVE, ROLLOUT_PROGRESSIVE_PER_GROUP, RolloutStrategy,
};

pub use decided::{Decisions, decided};
pub use groups::Groups;
pub use parse::{DurationError, SizeError};

/// Where one cluster stands in a rollout (sdk-go's `RolloutStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// The desired state is not applied yet.
    ToApply,
    /// Applied, not yet done.
    Progressing,
    /// Applied and done.
    Succeeded,
    /// Applied and failing.
    Failed,
    /// Progressing or failing for longer than `progressDeadline`; counts as a failure.
    TimeOut,
    /// Left out of the rollout.
    Skip,
}

/// A decision group: the `decision-group-name` and `decision-group-index` labels of its
/// PlacementDecisions (`""` names an unnamed group).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    pub name: String,
    pub index: i32,
}

impl GroupKey {
    /// The key of group `index` named `name`.
    pub fn new(name: impl Into<String>, index: i32) -> GroupKey {
        GroupKey { name: name.into(), index }
    }
}

/// One cluster's place in a rollout (sdk-go's `ClusterRolloutStatus`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterStatus {
    pub cluster: String,
    pub group: GroupKey,
    pub status: Status,
    /// When `status` last changed: the start of a soak, or of the wait for a deadline; `None`
    /// counts from `now`.
    pub last_transition: Option<Timestamp>,
    /// In a plan: when this cluster's soak ends or its deadline passes (`None`: never).
    pub recheck: Option<Timestamp>,
}

impl ClusterStatus {
    /// The status of `cluster` in `group`, changed last at `last_transition`; no recheck time.
    pub fn new(
        cluster: impl Into<String>,
        group: GroupKey,
        status: Status,
        last_transition: Option<Timestamp>,
    ) -> ClusterStatus {
        ClusterStatus { cluster: cluster.into(), group, status, last_transition, recheck: None }
    }
}

/// What to do now (sdk-go's `RolloutResult`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The rollout set: clusters to apply the desired state to (`ToApply`) and clusters that
    /// still hold a slot (`Progressing`, `Failed` within the deadline, `Succeeded` soaking),
    /// each with its `recheck` time.
    pub to_rollout: Vec<ClusterStatus>,
    /// Clusters past their deadline, now `TimeOut`, with the deadline as `recheck`.
    pub timed_out: Vec<ClusterStatus>,
    /// Statuses of clusters no longer in any decision group, as they came in.
    pub removed: Vec<ClusterStatus>,
    /// More clusters failed than the strategy tolerates: the plan adds no new cluster.
    pub max_failure_breach: bool,
    /// The nearest `recheck` of the rollout set that is still ahead, as a delay from `now`.
    pub recheck_after: Option<Duration>,
}

/// Why a strategy cannot be planned; the MWRS controller reports it as
/// `PlacementVerified=False/NotAsExpected`. Messages follow sdk-go's where it has one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RolloutError {
    /// `type` is none of `All`, `Progressive`, `ProgressivePerGroup` (absent counts as `""`).
    #[error("incorrect rollout strategy type {0}")]
    UnknownType(String),
    /// `progressDeadline` does not match `^(([0-9])+[h|m|s])|None$`.
    #[error("invalid timeout format")]
    DeadlineFormat(String),
    /// `progressDeadline` matches the pattern but is no Go duration.
    #[error("{0}")]
    Deadline(#[source] DurationError),
    /// `minSuccessTime` is no Go duration.
    #[error("invalid minSuccessTime: {0}")]
    MinSuccessTime(#[source] DurationError),
    /// `maxFailures` is neither an integer nor a percentage.
    #[error("failed to parse the provided maxFailures: {0}")]
    MaxFailures(#[source] SizeError),
    /// `maxConcurrency` is neither an integer nor a percentage.
    #[error("failed to parse the provided maxConcurrency: {0}")]
    MaxConcurrency(#[source] SizeError),
    /// A PlacementDecision's `decision-group-index` label is missing or not an integer.
    #[error("incorrect group index {value:?} on PlacementDecision {decision}")]
    GroupIndex { decision: String, value: String },
}

/// Plans one round of `strategy` over `groups` at `now`. `existing` holds a status for every
/// cluster that already carries the current desired state, in any order; a cluster of `groups`
/// without one is new (sdk-go's `RolloutHandler.GetRolloutCluster`).
pub fn plan(
    strategy: &RolloutStrategy,
    groups: &Groups,
    existing: &[ClusterStatus],
    now: Timestamp,
) -> Result<Plan, RolloutError> {
    match strategy.type_.as_deref().unwrap_or_default() {
        ROLLOUT_ALL => strategy::all(strategy.all.as_ref(), groups, existing, now),
        ROLLOUT_PROGRESSIVE => {
            strategy::progressive(strategy.progressive.as_ref(), groups, existing, now)
        }
        ROLLOUT_PROGRESSIVE_PER_GROUP => strategy::progressive_per_group(
            strategy.progressive_per_group.as_ref(),
            groups,
            existing,
            now,
        ),
        other => Err(RolloutError::UnknownType(other.to_string())),
    }
}

/// The nearer of two recheck delays (a plan's `recheck_after` folded over several plans).
pub fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The failures `strategy` tolerates over `total` clusters (its type's `maxFailures`, read as
/// [`plan`] reads it: a value above `total` tolerates every failure).
pub fn max_failures(strategy: &RolloutStrategy, total: usize) -> Result<usize, RolloutError> {
    use ocm_proto::api::cluster::v1alpha1::{ROLLOUT_PROGRESSIVE, ROLLOUT_PROGRESSIVE_PER_GROUP};
    let value = match strategy.type_.as_deref().unwrap_or_default() {
        ROLLOUT_PROGRESSIVE => strategy.progressive.as_ref().and_then(|p| p.max_failures.as_ref()),
        ROLLOUT_PROGRESSIVE_PER_GROUP => {
            strategy.progressive_per_group.as_ref().and_then(|p| p.max_failures.as_ref())
        }
        _ => strategy.all.as_ref().and_then(|p| p.max_failures.as_ref()),
    };
    Ok(parse::Size::parse(value).map_err(RolloutError::MaxFailures)?.tolerance(total))
}
