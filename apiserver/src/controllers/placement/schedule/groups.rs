//! Decision groups and their PlacementDecision objects: each `decisionGroups` entry takes its
//! members, the rest follow, every group is chunked by `clustersPerDecisionGroup`, and each group
//! is written as PlacementDecisions of at most [`DECISIONS_PER_OBJECT`] decisions.

use ocm_proto::api::cluster::v1beta1::GroupStrategy;
use ocm_proto::api::meta::IntOrString;

use super::predicate::{Selector, claim_selector, label_selector};
use super::world::ClusterFacts;

/// Decisions per PlacementDecision object.
pub const DECISIONS_PER_OBJECT: usize = 100;

/// One group of decisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub index: usize,
    pub name: String,
    /// The group's clusters, by name.
    pub clusters: Vec<String>,
}

impl Group {
    /// The one group of a pass that selected nothing.
    pub(super) fn empty() -> Group {
        Group { index: 0, name: String::new(), clusters: Vec::new() }
    }
}

/// How many clusters one decision group holds (OCM's `calculateLength`: a percentage is
/// `ceil(p / 100 × selected)` in floating point; out of range means all).
fn group_length(spec: Option<&IntOrString>, selected: usize) -> Result<usize, String> {
    let n: i64 = match spec {
        None => i64::try_from(selected).unwrap_or(i64::MAX),
        Some(IntOrString::Int(n)) => i64::from(*n),
        Some(IntOrString::String(s)) => {
            // OCM prints the IntOrString struct itself (`{Type IntVal StrVal}`).
            let bad = || format!("{{1 0 {s}}} invalid type: string is not a percentage");
            let pct: f64 = s.strip_suffix('%').and_then(|p| p.parse().ok()).ok_or_else(bad)?;
            (pct / 100.0 * selected as f64).ceil() as i64
        }
    };
    let selected_i = i64::try_from(selected).unwrap_or(i64::MAX);
    Ok(if n <= 0 || n > selected_i { selected } else { usize::try_from(n).unwrap_or(selected) })
}

/// The decision groups of the selected clusters: each `decisionGroups` entry's members by name,
/// then the rest, chunked by the group length; one empty group when nothing is selected.
pub(super) fn groups_of(
    strategy: Option<&GroupStrategy>,
    selected: &[&ClusterFacts],
) -> Result<Vec<Group>, String> {
    let count = selected.len();
    let length =
        group_length(strategy.and_then(|g| g.clusters_per_decision_group.as_ref()), count)?.max(1);
    let mut rest: Vec<&ClusterFacts> = selected.to_vec();
    rest.sort_by(|a, b| a.name.cmp(&b.name));
    let mut groups: Vec<Group> = Vec::new();
    let mut push = |name: &str, clusters: Vec<String>| {
        for chunk in clusters.chunks(length) {
            groups.push(Group {
                index: groups.len(),
                name: name.to_owned(),
                clusters: chunk.to_vec(),
            });
        }
    };
    for g in strategy.map(|g| g.decision_groups.as_slice()).unwrap_or_default() {
        let sel = &g.group_cluster_selector;
        let sel = match (
            label_selector(sel.label_selector.as_ref()),
            claim_selector(sel.claim_selector.as_ref()),
        ) {
            // Group selectors have no CEL (ocm.md §2.4).
            (Ok(labels), Ok(claims)) => Selector { labels, claims, cel: None },
            (Err(e), _) | (_, Err(e)) => return Err(e),
        };
        let (members, others): (Vec<&ClusterFacts>, Vec<&ClusterFacts>) =
            rest.into_iter().partition(|c| sel.matches(c));
        rest = others;
        push(&g.group_name, members.into_iter().map(|c| c.name.clone()).collect());
    }
    push("", rest.into_iter().map(|c| c.name.clone()).collect());
    if groups.is_empty() {
        groups.push(Group::empty());
    }
    Ok(groups)
}

/// The PlacementDecision objects of an outcome: (name, group, decisions), at most
/// [`DECISIONS_PER_OBJECT`] each, numbered from 1 across the groups; an empty group still has one.
pub fn slices<'a>(placement: &str, groups: &'a [Group]) -> Vec<(String, &'a Group, &'a [String])> {
    let mut out = Vec::new();
    for g in groups {
        if g.clusters.is_empty() {
            out.push((format!("{placement}-decision-{}", out.len() + 1), g, &g.clusters[..]));
            continue;
        }
        for chunk in g.clusters.chunks(DECISIONS_PER_OBJECT) {
            out.push((format!("{placement}-decision-{}", out.len() + 1), g, chunk));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::placement::schedule::test_util::*;

    #[test]
    fn decision_groups_take_their_members_by_name_then_the_rest() {
        let clusters =
            vec![c("d").label("canary", "true"), c("b").label("canary", "true"), c("c"), c("a")];
        let o = world(clusters).run(json!({"decisionStrategy": {"groupStrategy": {"decisionGroups": [
            {"groupName": "canary", "groupClusterSelector": {"labelSelector": {"matchLabels": {"canary": "true"}}}}]}}}));
        assert_eq!(decided(&o), vec![vec!["b", "d"], vec!["a", "c"]]);
        let names: Vec<(&str, usize)> =
            o.groups.iter().map(|g| (g.name.as_str(), g.index)).collect();
        assert_eq!(names, [("canary", 0), ("", 1)]);
    }

    #[test]
    fn a_percentage_per_group_rounds_up() {
        let clusters: Vec<C> = (0..5).map(|i| c(&format!("c{i}"))).collect();
        let o = world(clusters).run(
            json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "25%"}}}),
        );
        // ceil(25% of 5) = 2 per group.
        assert_eq!(decided(&o), vec![vec!["c0", "c1"], vec!["c2", "c3"], vec!["c4"]]);
        // In floating point, as OCM: 7 / 100 × 100 = 7.000000000000001, so groups of 8.
        let clusters: Vec<C> = (0..100).map(|i| c(&format!("c{i:03}"))).collect();
        let o = world(clusters).run(
            json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "7%"}}}),
        );
        assert_eq!(o.groups[0].clusters.len(), 8);
        assert_eq!(o.groups.len(), 13);
    }

    #[test]
    fn a_number_per_group_chunks_every_group() {
        let clusters =
            vec![c("a").label("g", "1"), c("b").label("g", "1"), c("c").label("g", "1"), c("d")];
        let o = world(clusters).run(json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": 2,
            "decisionGroups": [{"groupName": "one", "groupClusterSelector": {"labelSelector": {"matchLabels": {"g": "1"}}}}]}}}));
        assert_eq!(decided(&o), vec![vec!["a", "b"], vec!["c"], vec!["d"]]);
        let names: Vec<&str> = o.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["one", "one", ""]);
    }

    #[test]
    fn a_per_group_count_beyond_the_selection_is_one_group() {
        let o = world(abc())
            .run(json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": 10}}}));
        assert_eq!(decided(&o), vec![vec!["a", "b", "c"]]);
    }

    #[test]
    fn a_non_percentage_string_per_group_is_misconfigured() {
        let o = world(abc()).run(
            json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "ten"}}}),
        );
        assert_eq!(
            o.misconfigured.as_deref(),
            Some(":{1 0 ten} invalid type: string is not a percentage")
        );
        assert!(o.groups.is_empty(), "OCM writes no decision object then");
    }

    #[test]
    fn decisions_are_sliced_by_a_hundred_across_groups() {
        let clusters: Vec<C> = (0..250)
            .map(|i| {
                let cl = c(&format!("c{i:03}"));
                if i < 120 { cl.label("first", "yes") } else { cl }
            })
            .collect();
        let o = world(clusters).run(json!({"decisionStrategy": {"groupStrategy": {"decisionGroups": [
            {"groupName": "first", "groupClusterSelector": {"labelSelector": {"matchLabels": {"first": "yes"}}}}]}}}));
        let s = slices("p", &o.groups);
        let shape: Vec<(&str, usize, usize)> =
            s.iter().map(|(name, g, cl)| (name.as_str(), g.index, cl.len())).collect();
        assert_eq!(
            shape,
            [
                ("p-decision-1", 0, 100),
                ("p-decision-2", 0, 20),
                ("p-decision-3", 1, 100),
                ("p-decision-4", 1, 30)
            ]
        );
        assert_eq!(s[2].2[0], "c120", "each group's clusters in name order");
    }

    #[test]
    fn nothing_selected_is_one_empty_decision() {
        let o = world(abc()).run(json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"x": "y"}}}}]}));
        let s = slices("p", &o.groups);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].0.as_str(), s[0].2.len()), ("p-decision-1", 0));
    }
}
