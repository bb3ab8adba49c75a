//! The status step of a set's run (ocm.md §4.6, enhancement 229): the summaries, OCM's three
//! conditions with OCM's reasons, the revisions (`updateRevision`, `currentRevision` once every
//! selected cluster succeeded on it, `abortedTime` while a failed rollout stays stopped) and
//! which revision each cluster runs. Written only when it changes.
//!
//! `PlacementVerified` counts decided clusters, not works of the current template as OCM does,
//! so a template change does not read as an empty placement while its new works are written.

use ocm_proto::api::meta::{
    CONDITION_FALSE, CONDITION_TRUE, Condition, Time, condition, set_condition,
};
use ocm_proto::api::work::v1alpha1::{
    CONDITION_MANIFESTWORK_APPLIED, CONDITION_PLACEMENT_ROLLED_OUT, CONDITION_PLACEMENT_VERIFIED,
    CONDITION_PROGRESSING, ClusterRevisions, FAILURE_STRATEGY_ROLLBACK_ALL, ManifestWorkReplicaSet,
    ManifestWorkReplicaSetStatus, ManifestWorkReplicaSetSummary, PlacementSummary,
    REASON_AS_EXPECTED, REASON_COMPLETE, REASON_INVALID_MANIFEST_WORK_NAME,
    REASON_NEW_MANIFEST_WORK_AVAILABLE, REASON_NEW_REVISION_CREATED, REASON_NOT_AS_EXPECTED,
    REASON_PLACEMENT_DECISION_EMPTY, REASON_PLACEMENT_DECISION_NOT_FOUND, REASON_PROCESSING,
    REASON_PROGRESSING, REASON_RENDER_FAILED, REASON_ROLLED_BACK, REASON_ROLLOUT_ABORTED,
    REASON_ROLLOUT_DEGRADED, REASON_ROLLOUT_PAUSED,
};
use serde_json::Value;

use super::Controller;
use super::deploy::{Outcome, PlacementOutcome};
use super::revisions::Revisions;
use crate::machinery::error::ApiError;
use crate::machinery::object;

/// The status of a set whose owner label value is not a valid label value.
pub(super) async fn write_invalid_name(
    c: &Controller,
    raw: &Value,
    set: &ManifestWorkReplicaSet,
    owner: &str,
) -> Result<(), ApiError> {
    let mut status = set.status.clone().unwrap_or_default();
    let msg = format!("the label value {owner:?} (<namespace>.<name>) is not a valid label value");
    let c_ = condition(
        CONDITION_MANIFESTWORK_APPLIED,
        CONDITION_FALSE,
        REASON_INVALID_MANIFEST_WORK_NAME,
        msg,
    );
    set_condition(&mut status.conditions, c_, now());
    store(c, raw, set, status).await
}

fn now() -> Time {
    Time(crate::machinery::clock::timestamp())
}

/// Sums placement figures.
fn summary(ps: &[&PlacementOutcome]) -> ManifestWorkReplicaSetSummary {
    let sum = |f: fn(&PlacementOutcome) -> i64| Some(ps.iter().map(|p| f(p)).sum::<i64>());
    ManifestWorkReplicaSetSummary {
        total: sum(|p| p.total),
        progressing: sum(|p| p.progressing),
        available: sum(|p| p.available),
        degraded: sum(|p| p.degraded),
        applied: sum(|p| p.applied),
        desired_total: sum(|p| p.selected),
        updated: sum(|p| p.succeeded),
    }
}

/// Writes the status a run concluded.
pub(super) async fn write(
    c: &Controller,
    raw: &Value,
    set: &ManifestWorkReplicaSet,
    revs: &Revisions,
    outcome: &Outcome,
) -> Result<(), ApiError> {
    let old = set.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let found: Vec<&PlacementOutcome> = outcome.placements.iter().filter(|p| p.found).collect();
    let total = summary(&found);
    status.summary = Some(total.clone());
    status.placement_summary = outcome
        .placements
        .iter()
        .map(|p| PlacementSummary {
            name: Some(p.name.clone()),
            available_decision_groups: Some(format!(
                "{} ({} / {} clusters applied)",
                p.groups, p.total, p.selected
            )),
            summary: Some(summary(&[p])),
        })
        .collect();
    let selected: i64 = found.iter().map(|p| p.selected).sum();
    let succeeded: i64 = found.iter().map(|p| p.succeeded).sum();
    let complete = found.len() == outcome.placements.len() && selected > 0 && succeeded == selected;
    let same_revision = old.update_revision.as_deref() == Some(revs.update.as_str());
    let mut aborted = same_revision && old.aborted_time.is_some();
    if !same_revision {
        status.aborted_time = None;
    }
    if outcome.breached && !aborted && !complete {
        status.aborted_time = Some(now());
        aborted = true;
    }
    status.update_revision = Some(revs.update.clone());
    if complete && !aborted {
        status.current_revision = Some(revs.update.clone());
    }
    status.cluster_revisions = outcome
        .cluster_revisions
        .iter()
        .map(|(revision, clusters)| {
            let mut clusters = clusters.clone();
            clusters.sort();
            ClusterRevisions { revision: revision.clone(), clusters }
        })
        .collect();
    let conds = Conditions { outcome, total: &total, selected, complete, aborted };
    let generation = set.metadata.generation;
    for new in conds.all(set) {
        let new = Condition { observed_generation: generation, ..new };
        set_condition(&mut status.conditions, new, now());
    }
    if status == old {
        return Ok(());
    }
    store(c, raw, set, status).await
}

/// What the conditions are computed from.
struct Conditions<'a> {
    outcome: &'a Outcome,
    total: &'a ManifestWorkReplicaSetSummary,
    selected: i64,
    complete: bool,
    aborted: bool,
}

impl Conditions<'_> {
    fn all(&self, set: &ManifestWorkReplicaSet) -> Vec<Condition> {
        vec![self.verified(), self.rolled_out(), self.applied(), self.progressing(set)]
    }

    fn verified(&self) -> Condition {
        let t = CONDITION_PLACEMENT_VERIFIED;
        if let Some(p) = self.outcome.placements.iter().find(|p| !p.found) {
            let msg = format!("Placement {:?} is not found", p.name);
            return condition(t, CONDITION_FALSE, REASON_PLACEMENT_DECISION_NOT_FOUND, msg);
        }
        if self.selected == 0 {
            return condition(t, CONDITION_FALSE, REASON_PLACEMENT_DECISION_EMPTY, "");
        }
        condition(t, CONDITION_TRUE, REASON_AS_EXPECTED, "")
    }

    fn rolled_out(&self) -> Condition {
        let t = CONDITION_PLACEMENT_ROLLED_OUT;
        if self.complete {
            return condition(t, CONDITION_TRUE, REASON_COMPLETE, "");
        }
        if self.aborted {
            let msg = "failures exceeded maxFailures; the rollout stopped";
            return condition(t, CONDITION_FALSE, REASON_ROLLOUT_DEGRADED, msg);
        }
        condition(t, CONDITION_FALSE, REASON_PROGRESSING, "")
    }

    fn applied(&self) -> Condition {
        let t = CONDITION_MANIFESTWORK_APPLIED;
        if let Some(e) = self.outcome.render_errors.first() {
            let who =
                e.cluster.as_deref().map(|c| format!(" for cluster {c:?}")).unwrap_or_default();
            let msg = format!("the work cannot be rendered{who}: {e}");
            return condition(t, CONDITION_FALSE, REASON_RENDER_FAILED, msg);
        }
        let s = self.total;
        let (total, available) = (s.total.unwrap_or(0), s.available.unwrap_or(0));
        let (progressing, degraded) = (s.progressing.unwrap_or(0), s.degraded.unwrap_or(0));
        if total == 0 {
            return condition(t, CONDITION_FALSE, REASON_PLACEMENT_DECISION_EMPTY, "");
        }
        if available == total && progressing == 0 && degraded == 0 {
            return condition(t, CONDITION_TRUE, REASON_AS_EXPECTED, "");
        }
        if progressing > 0 && degraded == 0 {
            return condition(t, CONDITION_FALSE, REASON_PROCESSING, "");
        }
        condition(t, CONDITION_FALSE, REASON_NOT_AS_EXPECTED, "")
    }

    fn progressing(&self, set: &ManifestWorkReplicaSet) -> Condition {
        let t = CONDITION_PROGRESSING;
        let spec = set.spec.clone().unwrap_or_default();
        if spec.paused == Some(true) {
            return condition(t, CONDITION_FALSE, REASON_ROLLOUT_PAUSED, "the set is paused");
        }
        if self.aborted {
            let rollback = spec.placement_refs.iter().any(|p| {
                p.rollout_strategy.as_ref().and_then(|s| s.failure_strategy.as_deref())
                    == Some(FAILURE_STRATEGY_ROLLBACK_ALL)
            });
            return if rollback {
                let msg = "failures exceeded maxFailures; updated clusters returned to the current revision";
                condition(t, CONDITION_FALSE, REASON_ROLLED_BACK, msg)
            } else {
                let msg = "failures exceeded maxFailures; the rollout stopped";
                condition(t, CONDITION_FALSE, REASON_ROLLOUT_ABORTED, msg)
            };
        }
        if self.complete {
            return condition(t, CONDITION_TRUE, REASON_NEW_MANIFEST_WORK_AVAILABLE, "");
        }
        condition(t, CONDITION_TRUE, REASON_NEW_REVISION_CREATED, "")
    }
}

/// Replaces the stored status (a conflict reruns the set).
async fn store(
    c: &Controller,
    raw: &Value,
    _set: &ManifestWorkReplicaSet,
    status: ManifestWorkReplicaSetStatus,
) -> Result<(), ApiError> {
    let mut updated = raw.clone();
    updated["status"] = serde_json::to_value(&status).map_err(ApiError::internal)?;
    let rt = &c.kinds.sets;
    let (ns, name) = (object::namespace(raw), object::name(raw));
    let sub = rt.subresource("status");
    c.registry.update(rt, ns, name, updated, sub, &Controller::opts()).await.map(drop)
}
