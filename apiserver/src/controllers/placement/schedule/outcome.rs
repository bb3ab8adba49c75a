//! What a pass answers: the decision groups, the `PlacementSatisfied` condition, a requeue for
//! `tolerationSeconds`, the scores and the verdicts.

use std::collections::BTreeMap;
use std::time::Duration;

use super::explain::{Step, Verdict};
use super::groups::Group;

/// The `PlacementSatisfied` condition's status, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Satisfied {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// What the scheduler decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Set when the pass could not run now (a resource of this process was missing, not the
    /// placement at fault): the caller writes nothing and tries again; the rest is empty.
    pub unavailable: Option<String>,
    /// `<plugin>:<message>` when the placement cannot be scheduled as written; the previous
    /// decisions are then kept.
    pub misconfigured: Option<String>,
    pub satisfied: Satisfied,
    /// The selected clusters, in decision order.
    pub groups: Vec<Group>,
    /// Why each selected cluster is chosen, as its PlacementDecision says (`reason`): the
    /// verdict explain shows for it (`Selected: ` and the stable part of its reason).
    pub reason: String,
    pub selected: usize,
    /// When a toleration runs out: schedule again then.
    pub requeue_after: Option<Duration>,
    /// The weighted totals of the feasible clusters, best first (the `ScoreUpdate` event).
    pub totals: Vec<(String, i64)>,
    /// Per cluster (every cluster of the hub), when asked for.
    pub verdicts: Vec<Verdict>,
    /// How many clusters each step dropped (or selected), always.
    pub counts: BTreeMap<Step, usize>,
}

impl Outcome {
    /// The outcome of a pass that could not run now: nothing decided, nothing to write.
    pub(super) fn unavailable(why: String) -> Outcome {
        Outcome {
            unavailable: Some(why),
            misconfigured: None,
            satisfied: Satisfied { status: "Unknown", reason: "", message: String::new() },
            groups: Vec::new(),
            reason: String::new(),
            selected: 0,
            requeue_after: None,
            totals: Vec::new(),
            verdicts: Vec::new(),
            counts: BTreeMap::new(),
        }
    }
}

/// The `PlacementSatisfied` condition, first matching row of ocm.md §5.6.
pub(super) fn satisfied(
    spec_sets: &[String],
    valid: usize,
    eligible: &[&String],
    candidates: usize,
    selected: usize,
    unscheduled: usize,
) -> Satisfied {
    let no = |reason, message: String| Satisfied { status: "False", reason, message };
    if valid == 0 {
        no(
            "NoManagedClusterSetBindings",
            "No valid ManagedClusterSetBindings found in placement namespace".into(),
        )
    } else if eligible.is_empty() {
        no(
            "NoIntersection",
            format!(
                "None of ManagedClusterSets [{}] is bound to placement namespace",
                spec_sets.join(",")
            ),
        )
    } else if candidates == 0 {
        let names: Vec<&str> = eligible.iter().map(|s| s.as_str()).collect();
        no(
            "AllManagedClusterSetsEmpty",
            format!("All ManagedClusterSets [{}] have no member ManagedCluster", names.join(",")),
        )
    } else if selected == 0 {
        no(
            "NoManagedClusterMatched",
            "No ManagedCluster matches any of the cluster predicate".into(),
        )
    } else if unscheduled == 0 {
        Satisfied {
            status: "True",
            reason: "AllDecisionsScheduled",
            message: "All cluster decisions scheduled".into(),
        }
    } else {
        no("NotAllDecisionsScheduled", format!("{unscheduled} cluster decisions unscheduled"))
    }
}
