//! A placement's decisions as the rollout reads them: the one reader of PlacementDecisions for
//! the controllers that roll out over placements (ManifestWorkReplicaSets, add-ons).

use std::collections::BTreeMap;

use ocm_proto::api::cluster::{
    LABEL_DECISION_GROUP_INDEX, LABEL_DECISION_GROUP_NAME, LABEL_PLACEMENT,
};
use serde_json::Value;

use super::GroupKey;
use crate::machinery::scheme::ResourceType;
use crate::store::registry::Registry;

/// A placement's decisions: its groups in index order, each with its clusters.
pub struct Decisions {
    pub groups: Vec<(GroupKey, Vec<String>)>,
    /// The placement's `numberOfSelectedClusters` (the decided count when it has none yet).
    pub selected: i64,
}

impl Decisions {
    /// Every decided cluster, group by group.
    pub fn clusters(&self) -> impl Iterator<Item = &String> {
        self.groups.iter().flat_map(|(_, cs)| cs)
    }
}

/// The decisions of placement `name` in `ns` (from the watch cache), or `None` when the
/// Placement does not exist.
pub fn decided(
    registry: &Registry,
    placements: &ResourceType,
    decisions: &ResourceType,
    ns: &str,
    name: &str,
) -> Option<Decisions> {
    let placement = registry.cached(placements, ns, name)?;
    let selected =
        placement.value().pointer("/status/numberOfSelectedClusters").and_then(Value::as_i64);
    let mut by_group: BTreeMap<(i32, String), Vec<String>> = BTreeMap::new();
    for d in registry.cached_list(decisions, ns) {
        if d.label(LABEL_PLACEMENT) != Some(name) {
            continue;
        }
        let index = d.label(LABEL_DECISION_GROUP_INDEX).and_then(|i| i.parse().ok()).unwrap_or(0);
        let group = d.label(LABEL_DECISION_GROUP_NAME).unwrap_or_default().to_owned();
        let v = d.value();
        let clusters = v.pointer("/status/decisions").and_then(Value::as_array);
        let entry = by_group.entry((index, group)).or_default();
        for cluster in clusters.into_iter().flatten() {
            match cluster.get("clusterName").and_then(Value::as_str) {
                Some(n) if !n.is_empty() => entry.push(n.to_owned()),
                _ => {}
            }
        }
    }
    let groups: Vec<(GroupKey, Vec<String>)> = by_group
        .into_iter()
        .map(|((index, name), clusters)| (GroupKey { name, index }, clusters))
        .collect();
    let decided = groups.iter().map(|(_, cs)| cs.len()).sum::<usize>();
    Some(Decisions { groups, selected: selected.unwrap_or(i64::try_from(decided).unwrap_or(0)) })
}
