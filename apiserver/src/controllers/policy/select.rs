//! Which clusters a root policy goes to, as a pure function of the bindings that reach it
//! (ocm-wave2.md §3.2): the clusters of its non-restricted bindings, less a PolicySet's
//! exclusions for the bindings of that set; a `bindingOverrides.remediationAction: enforce`
//! enforces on the clusters its binding decides, restricted bindings only overriding clusters
//! another binding selects; `status.placement[]` per binding.

use std::collections::{BTreeMap, BTreeSet};

use ocm_proto::api::policy::v1::{ClusterExclusion, PlacementDecision, PolicyPlacement};

/// One binding that reaches the policy, directly or through a PolicySet, with what its
/// placement decides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Reach {
    /// The PlacementBinding's name.
    pub(super) binding: String,
    /// The Placement's name.
    pub(super) placement: String,
    /// The PolicySet the binding names, when it reaches the policy through one.
    pub(super) policy_set: Option<String>,
    /// `subFilter: restricted`.
    pub(super) restricted: bool,
    /// `bindingOverrides.remediationAction: enforce`.
    pub(super) enforce: bool,
    /// The clusters the placement decides.
    pub(super) decided: Vec<String>,
    /// The clusters the PolicySet excludes for this policy.
    pub(super) excluded: Vec<String>,
}

/// Where the policy goes: each cluster with whether a binding enforces it there, and the
/// root's `status.placement[]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Selection {
    pub(super) clusters: BTreeMap<String, bool>,
    pub(super) placements: Vec<PolicyPlacement>,
}

/// The clusters `reach` selects (not restricted), less its exclusions.
fn selected_by(reach: &Reach) -> BTreeSet<&str> {
    let excluded: BTreeSet<&str> = reach.excluded.iter().map(String::as_str).collect();
    reach.decided.iter().map(String::as_str).filter(|c| !excluded.contains(c)).collect()
}

/// The selection of a policy reached by `reaches` (none when it is disabled).
pub(super) fn select(reaches: &[Reach], disabled: bool) -> Selection {
    let mut clusters: BTreeMap<String, bool> = BTreeMap::new();
    if !disabled {
        for r in reaches.iter().filter(|r| !r.restricted) {
            for c in selected_by(r) {
                let enforce = clusters.entry(c.to_owned()).or_default();
                *enforce |= r.enforce;
            }
        }
        for r in reaches.iter().filter(|r| r.restricted && r.enforce) {
            for c in selected_by(r) {
                if let Some(enforce) = clusters.get_mut(c) {
                    *enforce = true;
                }
            }
        }
    }
    let mut placements: Vec<PolicyPlacement> = reaches
        .iter()
        .map(|r| {
            let mut decisions: Vec<PlacementDecision> = if disabled {
                Vec::new()
            } else {
                selected_by(r)
                    .into_iter()
                    .filter(|c| clusters.contains_key(*c))
                    .map(|c| PlacementDecision {
                        cluster_name: Some(c.to_owned()),
                        cluster_namespace: Some(c.to_owned()),
                    })
                    .collect()
            };
            decisions.sort();
            let mut excluded = r.excluded.clone();
            excluded.sort();
            excluded.dedup();
            PolicyPlacement {
                decisions,
                exclusions: excluded
                    .into_iter()
                    .map(|c| ClusterExclusion { cluster_name: Some(c) })
                    .collect(),
                placement: Some(r.placement.clone()),
                placement_binding: Some(r.binding.clone()),
                placement_rule: None,
                policy_set: r.policy_set.clone(),
            }
        })
        .collect();
    // OCM's order: by "binding placement placementRule policySet".
    let sort_key = |p: &PolicyPlacement| {
        let s = |o: &Option<String>| o.clone().unwrap_or_default();
        format!(
            "{} {} {} {}",
            s(&p.placement_binding),
            s(&p.placement),
            s(&p.placement_rule),
            s(&p.policy_set)
        )
    };
    placements.sort_by_key(sort_key);
    placements.dedup();
    Selection { clusters, placements }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reach(binding: &str, decided: &[&str]) -> Reach {
        Reach {
            binding: binding.into(),
            placement: format!("{binding}-placement"),
            decided: decided.iter().map(|c| (*c).to_owned()).collect(),
            ..Reach::default()
        }
    }

    #[test]
    fn bindings_union_their_decisions_and_sets_exclude() {
        let mut via_set = reach("b2", &["c2", "c3"]);
        via_set.policy_set = Some("set".into());
        via_set.excluded = vec!["c3".into()];
        let s = select(&[reach("b1", &["c1"]), via_set], false);
        assert_eq!(s.clusters.keys().collect::<Vec<_>>(), ["c1", "c2"]);
        assert_eq!(s.placements.len(), 2);
        assert_eq!(s.placements[1].policy_set.as_deref(), Some("set"));
        assert_eq!(s.placements[1].exclusions[0].cluster_name.as_deref(), Some("c3"));
    }

    #[test]
    fn restricted_bindings_only_override_what_others_select() {
        let mut restricted = reach("r", &["c1", "c9"]);
        restricted.restricted = true;
        restricted.enforce = true;
        let s = select(&[reach("b", &["c1", "c2"]), restricted], false);
        assert_eq!(s.clusters, BTreeMap::from([("c1".into(), true), ("c2".into(), false)]));
    }

    #[test]
    fn a_disabled_policy_goes_nowhere() {
        let s = select(&[reach("b", &["c1"])], true);
        assert!(s.clusters.is_empty());
        assert!(s.placements[0].decisions.is_empty());
    }
}
