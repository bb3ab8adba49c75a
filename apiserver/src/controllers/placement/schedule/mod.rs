//! OCM's placement scheduler (ocm.md §5) as a pure function of a placement and the world it sees:
//! candidates from the bound sets, the predicate and taint filters, the prioritizers, the count
//! and the decision groups, plus, on request, what each step kept or dropped and why.
//!
//! One file per step, in the order a pass runs them: `candidates` (the bound sets and deleting
//! clusters), `predicate` (label, claim and CEL selectors), `taint` (taints and tolerations),
//! `prioritize` (prioritizers, scores and the `numberOfClusters` cut), `groups` (decision groups
//! and their PlacementDecision slices). `world` is what a pass reads, `outcome` what it answers,
//! `explain` the verdict each cluster gets; this file runs the steps.

mod candidates;
mod explain;
mod groups;
mod outcome;
mod predicate;
mod prioritize;
mod taint;
#[cfg(test)]
mod test_util;
mod world;

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::cluster::v1beta1::{Placement, PlacementSpec};

use super::cel;
use explain::Tally;
pub use explain::{Step, Verdict};
pub use groups::{DECISIONS_PER_OBJECT, Group, slices};
pub use outcome::{Outcome, Satisfied};
pub use world::{ClusterFacts, ScoreLookup, ScoreObject, World};

/// Why a pass selected nothing.
#[derive(Debug)]
enum Refusal {
    /// `<plugin>:<message>`: the placement cannot be scheduled as written.
    Misconfigured(String),
    /// The pass could not run now (no thread to evaluate CEL on): nothing is to be written,
    /// the pass is tried again.
    Unavailable(String),
}

impl From<String> for Refusal {
    fn from(m: String) -> Refusal {
        Refusal::Misconfigured(m)
    }
}

/// The clusters a pass selected, best first, with what came with them.
struct Selection<'c> {
    selected: Vec<&'c ClusterFacts>,
    totals: Vec<(String, i64)>,
    requeue: Option<Timestamp>,
}

/// Decides where `placement` goes in `world`; `explain` also fills [`Outcome::verdicts`].
///
/// As OCM: a misconfiguration (`<plugin>:<message>`; prioritizer and group errors have no plugin
/// name) stops the pass with nothing selected, and the placement's decisions are emptied. The
/// predicates are checked only when there are candidates, the tolerations only when clusters
/// passed the predicates, prioritizers of weight 0 not at all.
pub fn schedule(placement: &Placement, world: &World<'_>, explain: bool) -> Outcome {
    let spec = &placement.spec;
    let mut tally = Tally::new(explain);
    let candidates = candidates::candidates(spec, world, &mut tally);
    let candidate_count = candidates.clusters.len();

    let group_strategy = spec.decision_strategy.as_ref().and_then(|d| d.group_strategy.as_ref());
    let (selection, groups, misconfigured) =
        match select(spec, world, candidates.clusters, &mut tally) {
            Err(Refusal::Unavailable(why)) => return Outcome::unavailable(why),
            Err(Refusal::Misconfigured(m)) => (None, vec![Group::empty()], Some(m)),
            Ok(sel) => match groups::groups_of(group_strategy, &sel.selected) {
                Ok(groups) => (Some(sel), groups, None),
                // OCM writes no decision object at all then.
                Err(m) => (None, Vec::new(), Some(format!(":{m}"))),
            },
        };
    let (count, totals, requeue) = match selection {
        Some(sel) => (sel.selected.len(), sel.totals, sel.requeue),
        None => (0, Vec::new(), None),
    };
    let (verdicts, counts) = tally.finish();
    let wanted = spec.number_of_clusters.map(|n| usize::try_from(n).unwrap_or(0));
    let unscheduled = wanted.map_or(0, |n| n.saturating_sub(count));
    let reason = format!("{}: {}", Step::Selected.as_str(), prioritize::selected_reason(wanted));
    let satisfied = outcome::satisfied(
        &spec.cluster_sets,
        candidates.valid.len(),
        &candidates.eligible,
        candidate_count,
        count,
        unscheduled,
    );
    let requeue_after = requeue.map(|at| {
        let secs = at.duration_since(world.now).as_secs_f64().max(0.0);
        Duration::from_secs_f64(secs)
    });
    Outcome {
        unavailable: None,
        misconfigured,
        satisfied,
        groups,
        reason,
        selected: count,
        requeue_after,
        totals,
        verdicts,
        counts,
    }
}

/// The filters and prioritizers over the candidates: the clusters selected, best first.
fn select<'c>(
    spec: &PlacementSpec,
    world: &World<'_>,
    candidates: Vec<&'c ClusterFacts>,
    tally: &mut Tally,
) -> Result<Selection<'c>, Refusal> {
    // Predicate (OCM returns before reading its selectors when there is nothing to filter).
    let passed = if candidates.is_empty() {
        Vec::new()
    } else if predicate::uses_cel(spec) {
        cel::on_cel_stack(|| predicate::filter(spec, world, candidates, tally))
            .map_err(Refusal::Unavailable)??
    } else {
        predicate::filter(spec, world, candidates, tally)?
    };
    // TaintToleration (likewise only with clusters to filter).
    let (feasible, requeue) = taint::filter(&spec.tolerations, world, passed, tally)?;
    // Prioritizers (always checked).
    let prioritizers =
        prioritize::prioritizers(spec.prioritizer_policy.as_ref()).map_err(|e| format!(":{e}"))?;
    let scored = prioritize::score(&prioritizers, &feasible, world, tally.explaining());
    let wanted = spec.number_of_clusters.map(|n| usize::try_from(n).unwrap_or(0));
    let (selected, totals) = prioritize::cut(wanted, scored, tally);
    Ok(Selection { selected, totals, requeue })
}
