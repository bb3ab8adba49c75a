//! A placement's decision groups as sdk-go's `PlacementDecisionClustersTracker` holds and
//! selects them: by key, by mandatory entry (a name matches every group of that name, otherwise
//! the index), and "every group besides these".

use std::collections::{BTreeMap, BTreeSet};

use ocm_proto::api::cluster::v1alpha1::MandatoryDecisionGroup;
use ocm_proto::api::cluster::v1beta1::PlacementDecision;
use ocm_proto::api::cluster::{LABEL_DECISION_GROUP_INDEX, LABEL_DECISION_GROUP_NAME};

use super::{GroupKey, RolloutError};

/// The placement's current decision groups, each with its cluster names.
///
/// Kept from sdk-go's tracker: the groups a rollout counts as *the placement* ("every group
/// besides …") are found by walking indexes `0, 1, …` up to the number of distinct indexes, so a
/// group whose index is negative or beyond that count (a gap in the numbering) is left out of
/// it, and statuses of its clusters come back as removed. The placement controller numbers
/// groups from 0 without gaps, so this matters only for hand-made PlacementDecisions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Groups {
    members: BTreeMap<GroupKey, BTreeSet<String>>,
    /// The name of each index (of two names, the one that sorts last).
    index_names: BTreeMap<i32, String>,
    /// The indexes of each name, ascending.
    name_indexes: BTreeMap<String, Vec<i32>>,
}

impl Groups {
    /// The groups from `(key, clusters)` pairs; pairs with equal keys (one group written as
    /// several PlacementDecisions) are merged.
    pub fn new<I, C, S>(groups: I) -> Groups
    where
        I: IntoIterator<Item = (GroupKey, C)>,
        C: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut members: BTreeMap<GroupKey, BTreeSet<String>> = BTreeMap::new();
        for (key, clusters) in groups {
            members.entry(key).or_default().extend(clusters.into_iter().map(Into::into));
        }
        let mut index_names = BTreeMap::new();
        let mut name_indexes: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for key in members.keys() {
            index_names.insert(key.index, key.name.clone());
            name_indexes.entry(key.name.clone()).or_default().push(key.index);
        }
        Groups { members, index_names, name_indexes }
    }

    /// The groups of a placement's PlacementDecisions, keyed by their decision-group labels
    /// (sdk-go's `Refresh`): a missing name is `""`; a missing or non-integer index fails, as
    /// Go's `strconv.Atoi` does.
    pub fn from_decisions(decisions: &[PlacementDecision]) -> Result<Groups, RolloutError> {
        let mut pairs = Vec::with_capacity(decisions.len());
        for decision in decisions {
            let labels = decision.metadata.labels.as_ref();
            let label = |name: &str| labels.and_then(|l| l.get(name)).cloned().unwrap_or_default();
            let index_text = label(LABEL_DECISION_GROUP_INDEX);
            let index: i64 = index_text.parse().map_err(|_| RolloutError::GroupIndex {
                decision: decision.metadata.name.clone().unwrap_or_default(),
                value: index_text.clone(),
            })?;
            // Go converts with `int32(...)`, keeping the low 32 bits.
            let key = GroupKey::new(label(LABEL_DECISION_GROUP_NAME), index as i32);
            let clusters = decision.status.iter().flat_map(|s| &s.decisions);
            pairs.push((key, clusters.map(|d| d.cluster_name.clone()).collect::<Vec<_>>()));
        }
        Ok(Groups::new(pairs))
    }

    /// How many distinct groups there are.
    pub fn group_count(&self) -> usize {
        self.members.len()
    }

    /// The placement's clusters as a rollout counts them, by name.
    pub fn clusters(&self) -> BTreeSet<&str> {
        self.besides(&[]).clusters().into_keys().collect()
    }

    /// The group a cluster of [`Groups::clusters`] belongs to (the lowest index if several).
    /// One lookup builds the whole map: for many clusters, use [`Groups::membership`].
    pub fn group_of(&self, cluster: &str) -> Option<&GroupKey> {
        self.membership().get(cluster).copied()
    }

    /// Every cluster of [`Groups::clusters`] with the group it belongs to.
    pub fn membership(&self) -> BTreeMap<&str, &GroupKey> {
        self.besides(&[]).clusters()
    }

    /// The groups the picks name that exist (sdk-go's `ExistingClusterGroups`).
    pub(super) fn only(&self, picks: &[Pick]) -> View<'_> {
        let keys = self.resolve(picks);
        View::new(keys.iter().filter_map(|k| self.members.get_key_value(k)))
    }

    /// Every group of indexes `0..n` (n the number of distinct indexes) that the picks do not
    /// name (sdk-go's `ExistingClusterGroupsBesides`).
    pub(super) fn besides(&self, picks: &[Pick]) -> View<'_> {
        let excluded = self.resolve(picks);
        let count = i32::try_from(self.index_names.len()).unwrap_or(i32::MAX);
        let keys = (0..count).map(|index| {
            GroupKey::new(self.index_names.get(&index).cloned().unwrap_or_default(), index)
        });
        let kept: Vec<GroupKey> = keys.filter(|k| !excluded.contains(k)).collect();
        View::new(kept.iter().filter_map(|k| self.members.get_key_value(k)))
    }

    /// The keys the picks name: every group of a name, or the group of an index (sdk-go's
    /// `fulfillGroupKeys`).
    fn resolve(&self, picks: &[Pick]) -> Vec<GroupKey> {
        let mut keys = Vec::new();
        for pick in picks {
            match pick {
                Pick::Name(name) => {
                    let indexes = self.name_indexes.get(name).into_iter().flatten();
                    keys.extend(indexes.map(|i| GroupKey::new(name.clone(), *i)));
                }
                Pick::Index(index) => {
                    if let Some(name) = self.index_names.get(index) {
                        keys.push(GroupKey::new(name.clone(), *index));
                    }
                }
            }
        }
        keys
    }
}

/// One `mandatoryDecisionGroups` entry: a non-empty name is used, otherwise the index (0 when
/// absent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Pick {
    Name(String),
    Index(i32),
}

impl Pick {
    /// The picks of a strategy's mandatory decision groups.
    pub(super) fn of(groups: &[MandatoryDecisionGroup]) -> Vec<Pick> {
        let pick = |g: &MandatoryDecisionGroup| match g.group_name.as_deref() {
            Some(name) if !name.is_empty() => Pick::Name(name.to_string()),
            _ => Pick::Index(g.group_index.unwrap_or_default()),
        };
        groups.iter().map(pick).collect()
    }
}

/// Some of the groups, in index order, each once.
pub(super) struct View<'g> {
    groups: Vec<(&'g GroupKey, &'g BTreeSet<String>)>,
}

impl<'g> View<'g> {
    fn new(groups: impl Iterator<Item = (&'g GroupKey, &'g BTreeSet<String>)>) -> View<'g> {
        let mut groups: Vec<_> = groups.collect();
        groups.sort_by(|a, b| (a.0.index, &a.0.name).cmp(&(b.0.index, &b.0.name)));
        groups.dedup_by(|a, b| a.0 == b.0);
        View { groups }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The groups with their clusters (sorted by name), by index.
    pub(super) fn groups(&self) -> &[(&'g GroupKey, &'g BTreeSet<String>)] {
        &self.groups
    }

    /// Every cluster once, by name, with its group (the first by index).
    pub(super) fn clusters(&self) -> BTreeMap<&'g str, &'g GroupKey> {
        let mut clusters = BTreeMap::new();
        for (key, members) in &self.groups {
            for cluster in members.iter() {
                clusters.entry(cluster.as_str()).or_insert(*key);
            }
        }
        clusters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_proto::api::cluster::v1beta1::{ClusterDecision, PlacementDecisionStatus};
    use ocm_proto::api::meta::ObjectMeta;

    fn sample() -> Groups {
        Groups::new([
            (GroupKey::new("canary", 0), vec!["c1", "c2"]),
            (GroupKey::new("", 1), vec!["c3"]),
            (GroupKey::new("canary", 2), vec!["c4"]),
            (GroupKey::new("", 1), vec!["c5"]),
        ])
    }

    fn names(view: &View<'_>) -> Vec<(String, i32)> {
        view.groups().iter().map(|(k, _)| (k.name.clone(), k.index)).collect()
    }

    #[test]
    fn equal_keys_merge_and_views_run_by_index() {
        let groups = sample();
        assert_eq!(groups.group_count(), 3);
        assert_eq!(
            groups.clusters().into_iter().collect::<Vec<_>>(),
            ["c1", "c2", "c3", "c4", "c5"]
        );
        let all = groups.besides(&[]);
        assert_eq!(names(&all), [("canary".into(), 0), (String::new(), 1), ("canary".into(), 2)]);
        assert_eq!(groups.group_of("c5"), Some(&GroupKey::new("", 1)));
        assert_eq!(groups.group_of("nope"), None);
    }

    #[test]
    fn a_name_picks_every_group_of_that_name_and_an_index_one_group() {
        let groups = sample();
        let by_name = groups.only(&[Pick::Name("canary".into())]);
        assert_eq!(names(&by_name), [("canary".into(), 0), ("canary".into(), 2)]);
        assert_eq!(names(&groups.only(&[Pick::Index(1)])), [(String::new(), 1)]);
        assert!(groups.only(&[Pick::Name("nope".into()), Pick::Index(7)]).is_empty());
        let rest = groups.besides(&[Pick::Name("canary".into())]);
        assert_eq!(names(&rest), [(String::new(), 1)]);
        assert_eq!(rest.clusters().into_keys().collect::<Vec<_>>(), ["c3", "c5"]);
    }

    #[test]
    fn mandatory_entries_prefer_the_name() {
        let entry = |name: Option<&str>, index: Option<i32>| MandatoryDecisionGroup {
            group_name: name.map(str::to_string),
            group_index: index,
        };
        let picks = Pick::of(&[
            entry(Some("a"), Some(3)),
            entry(Some(""), Some(2)),
            entry(None, Some(1)),
            entry(None, None),
        ]);
        assert_eq!(picks, [Pick::Name("a".into()), Pick::Index(2), Pick::Index(1), Pick::Index(0)]);
    }

    #[test]
    fn groups_past_the_index_count_are_not_the_placement() {
        // As sdk-go's tracker: indexes 0 and 5 are two indexes, so only 0 and 1 are walked.
        let groups = Groups::new([
            (GroupKey::new("", 0), vec!["a"]),
            (GroupKey::new("", 5), vec!["b"]),
            (GroupKey::new("", -1), vec!["c"]),
        ]);
        assert_eq!(groups.clusters().into_iter().collect::<Vec<_>>(), ["a"]);
        assert_eq!(names(&groups.only(&[Pick::Index(5)])), [(String::new(), 5)]);
    }

    fn decision(name: &str, labels: &[(&str, &str)], clusters: &[&str]) -> PlacementDecision {
        let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let decisions = clusters
            .iter()
            .map(|c| ClusterDecision { cluster_name: c.to_string(), ..Default::default() })
            .collect();
        PlacementDecision {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels),
                ..Default::default()
            },
            status: Some(PlacementDecisionStatus { decisions }),
            ..Default::default()
        }
    }

    #[test]
    fn decisions_are_read_by_their_group_labels() {
        let idx = LABEL_DECISION_GROUP_INDEX;
        let name = LABEL_DECISION_GROUP_NAME;
        let groups = Groups::from_decisions(&[
            decision("p-decision-1", &[(idx, "0"), (name, "canary")], &["c1", "c2"]),
            decision("p-decision-2", &[(idx, "0"), (name, "canary")], &["c3"]),
            decision("p-decision-3", &[(idx, "1")], &["c4"]),
        ])
        .unwrap();
        assert_eq!(groups.group_count(), 2);
        assert_eq!(groups.group_of("c3"), Some(&GroupKey::new("canary", 0)));
        assert_eq!(groups.group_of("c4"), Some(&GroupKey::new("", 1)));

        for bad in ["", "one", "1.0"] {
            let err = Groups::from_decisions(&[decision("d", &[(idx, bad)], &[])]).unwrap_err();
            assert_eq!(err, RolloutError::GroupIndex { decision: "d".into(), value: bad.into() });
        }
        let unlabelled = decision("d", &[], &[]);
        assert!(Groups::from_decisions(&[unlabelled]).is_err());
    }
}
