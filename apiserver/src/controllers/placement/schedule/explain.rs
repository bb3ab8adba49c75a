//! The verdicts of a pass: which step dropped each cluster, or that it was selected, and why;
//! always counted by step, kept one by one when the caller asks for an explanation.

use std::collections::BTreeMap;

use super::world::ClusterFacts;

/// Which step dropped a cluster, or that it was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// Not a member of any set bound to the namespace and named by the placement.
    ClusterSet,
    /// Being deleted.
    Deleting,
    Predicate,
    TaintToleration,
    /// Feasible, but scored below the `numberOfClusters` cut.
    Count,
    /// Selected.
    Selected,
}

impl Step {
    /// The step's name in explanations.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::ClusterSet => "ClusterSet",
            Step::Deleting => "Deleting",
            Step::Predicate => "Predicate",
            Step::TaintToleration => "TaintToleration",
            Step::Count => "NumberOfClusters",
            Step::Selected => "Selected",
        }
    }
}

/// Why one cluster ended where it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub cluster: String,
    pub step: Step,
    pub reason: String,
    /// Each prioritizer's score (before weighting), for feasible clusters.
    pub scores: Vec<(String, i64)>,
    /// The weighted total, for feasible clusters.
    pub total: Option<i64>,
}

/// The verdicts of a pass: always counted by step, kept one by one when explaining.
pub(super) struct Tally {
    explain: bool,
    verdicts: Vec<Verdict>,
    counts: BTreeMap<Step, usize>,
}

impl Tally {
    pub(super) fn new(explain: bool) -> Tally {
        Tally { explain, verdicts: Vec::new(), counts: BTreeMap::new() }
    }

    /// Whether verdicts are kept one by one (and scores broken down by prioritizer).
    pub(super) fn explaining(&self) -> bool {
        self.explain
    }

    /// A cluster a filter dropped at `step`.
    pub(super) fn drop(&mut self, c: &ClusterFacts, step: Step, reason: &str) {
        *self.counts.entry(step).or_default() += 1;
        if self.explain {
            self.verdicts.push(Verdict {
                cluster: c.name.clone(),
                step,
                reason: reason.to_owned(),
                scores: Vec::new(),
                total: None,
            });
        }
    }

    /// A feasible cluster, selected or cut at `step`, with its scores; `reason` is only made
    /// when explaining.
    pub(super) fn rank(
        &mut self,
        c: &ClusterFacts,
        step: Step,
        reason: impl FnOnce() -> String,
        scores: Vec<(String, i64)>,
        total: i64,
    ) {
        *self.counts.entry(step).or_default() += 1;
        if self.explain {
            self.verdicts.push(Verdict {
                cluster: c.name.clone(),
                step,
                reason: reason(),
                scores,
                total: Some(total),
            });
        }
    }

    /// The verdicts (selected first, then by the step that dropped them, latest step first;
    /// each step's clusters by name) and the count per step.
    pub(super) fn finish(mut self) -> (Vec<Verdict>, BTreeMap<Step, usize>) {
        if self.explain {
            self.verdicts.sort_by(|a, b| {
                a.step.cmp(&b.step).reverse().then_with(|| a.cluster.cmp(&b.cluster))
            });
        }
        (self.verdicts, self.counts)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::placement::schedule::test_util::*;

    #[test]
    fn every_cluster_is_explained() {
        let clusters = vec![
            c("a"),
            c("p").label("cluster.open-cluster-management.io/clusterset", "prod"),
            c("t").taint("x", "", "NoSelect", None),
        ];
        let o = world(clusters).run(json!({}));
        let steps: Vec<(&str, Step)> =
            o.verdicts.iter().map(|v| (v.cluster.as_str(), v.step)).collect();
        assert_eq!(
            steps,
            [("a", Step::Selected), ("t", Step::TaintToleration), ("p", Step::ClusterSet)]
        );
    }

    /// A decision's reason is the verdict of a selected cluster without what other clusters
    /// move (rank, scores): the same for every selected cluster of the pass.
    #[test]
    fn the_decision_reason_is_the_stable_part_of_the_verdict() {
        let o = world(vec![c("a"), c("b")]).run(json!({}));
        assert_eq!(o.reason, "Selected: feasible");
        let a = o.verdicts.iter().find(|v| v.cluster == "a").unwrap();
        assert!(a.reason.starts_with("feasible; rank "), "{}", a.reason);
        let o = world(vec![c("a"), c("b")]).run(json!({"numberOfClusters": 1}));
        assert_eq!(o.reason, "Selected: among the 1 best scores");
        let chosen = o.verdicts.iter().find(|v| v.step == Step::Selected).unwrap();
        assert!(
            chosen.reason.starts_with("among the 1 best scores; rank 1 of 2"),
            "{}",
            chosen.reason
        );
    }
}
