//! The ClusterSet and Deleting steps: the candidates are the clusters of the sets both bound to
//! the placement's namespace and named by `spec.clusterSets` (every bound set when it names
//! none), less the clusters being deleted.

use ocm_proto::api::cluster::v1beta1::PlacementSpec;
use ocm_proto::selector::LabelSelector;

use super::explain::{Step, Tally};
use super::world::{ClusterFacts, World};

/// The sets a placement may use and the clusters they hold.
pub(super) struct Candidates<'a> {
    /// The bindings in the namespace that name an existing set.
    pub(super) valid: Vec<&'a String>,
    /// The valid sets the placement names (all of them when it names none).
    pub(super) eligible: Vec<&'a String>,
    /// The clusters of the eligible sets that are not being deleted, in the world's order.
    pub(super) clusters: Vec<&'a ClusterFacts>,
}

/// The candidates of a placement; every other cluster is dropped at the ClusterSet or Deleting
/// step.
pub(super) fn candidates<'a>(
    spec: &PlacementSpec,
    world: &World<'a>,
    tally: &mut Tally,
) -> Candidates<'a> {
    let valid: Vec<&String> =
        world.bindings.iter().filter(|b| world.sets.contains_key(*b)).collect();
    let eligible: Vec<&String> = if spec.cluster_sets.is_empty() {
        valid.clone()
    } else {
        valid.iter().copied().filter(|s| spec.cluster_sets.contains(s)).collect()
    };
    let selectors: Vec<&LabelSelector> =
        eligible.iter().filter_map(|s| world.sets.get(*s).and_then(|r| r.as_ref().ok())).collect();
    let mut clusters = Vec::new();
    for c in world.clusters {
        if valid.is_empty() {
            tally.drop(c, Step::ClusterSet, "no ManagedClusterSetBinding in the namespace");
        } else if eligible.is_empty() {
            tally.drop(c, Step::ClusterSet, "no set both bound and named by spec.clusterSets");
        } else if !selectors.iter().any(|s| s.matches(|k| c.labels.get(k).map(String::as_str))) {
            tally.drop(c, Step::ClusterSet, "in none of the eligible sets");
        } else if c.deleting {
            tally.drop(c, Step::Deleting, "being deleted");
        } else {
            clusters.push(&**c);
        }
    }
    Candidates { valid, eligible, clusters }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::controllers::placement::schedule::Step;
    use crate::controllers::placement::schedule::test_util::*;

    #[test]
    fn no_binding_in_the_namespace() {
        let o = world(abc()).bind(&[]).run(json!({}));
        assert_eq!(reason(&o), "NoManagedClusterSetBindings");
        assert_eq!(
            o.satisfied.message,
            "No valid ManagedClusterSetBindings found in placement namespace"
        );
        assert_eq!(decided(&o), vec![Vec::<&str>::new()], "one empty group");
    }

    #[test]
    fn a_binding_naming_no_set_is_not_valid() {
        let o = world(abc()).bind(&["nope"]).run(json!({}));
        assert_eq!(reason(&o), "NoManagedClusterSetBindings");
    }

    #[test]
    fn cluster_sets_must_intersect_the_bound_ones() {
        let o = world(abc()).run(json!({"clusterSets": ["prod", "qa"]}));
        assert_eq!(reason(&o), "NoIntersection");
        assert_eq!(
            o.satisfied.message,
            "None of ManagedClusterSets [prod,qa] is bound to placement namespace"
        );
    }

    #[test]
    fn bound_sets_without_members() {
        let o = world(abc()).bind(&["prod"]).run(json!({}));
        assert_eq!(reason(&o), "AllManagedClusterSetsEmpty");
        assert_eq!(
            o.satisfied.message,
            "All ManagedClusterSets [prod] have no member ManagedCluster"
        );
    }

    #[test]
    fn an_empty_spec_selects_every_member_of_the_bound_sets() {
        let clusters = vec![
            c("b"),
            c("a"),
            c("p").label("cluster.open-cluster-management.io/clusterset", "prod"),
        ];
        let o = world(clusters).run(json!({}));
        assert_eq!(flat(&o), ["a", "b"]);
        assert_eq!((o.satisfied.status, reason(&o)), ("True", "AllDecisionsScheduled"));
        assert_eq!(o.satisfied.message, "All cluster decisions scheduled");
        assert_eq!(o.selected, 2);
    }

    #[test]
    fn cluster_sets_narrow_the_bound_ones() {
        let clusters =
            vec![c("a"), c("p").label("cluster.open-cluster-management.io/clusterset", "prod")];
        let o = world(clusters).bind(&["default", "prod"]).run(json!({"clusterSets": ["prod"]}));
        assert_eq!(flat(&o), ["p"]);
    }

    #[test]
    fn a_label_selector_set_selects_across_exclusive_sets() {
        let clusters =
            vec![c("a"), c("p").label("cluster.open-cluster-management.io/clusterset", "prod")];
        let o = world(clusters).bind(&["global"]).run(json!({}));
        assert_eq!(flat(&o), ["a", "p"]);
    }

    #[test]
    fn deleting_clusters_are_not_candidates() {
        let o = world(vec![c("a"), c("b").deleting()]).run(json!({}));
        assert_eq!(flat(&o), ["a"]);
        let v = o.verdicts.iter().find(|v| v.cluster == "b").unwrap();
        assert_eq!(v.step, Step::Deleting);
    }
}
