//! What a placement's pass writes: its PlacementDecisions, exactly the slices of the pass
//! (missing ones created with their decisions, changed ones updated, extra ones deleted), and
//! then its status, all as one registry commit: a watcher sees the placement's old slices and
//! status or its new ones, never a cluster missing from every slice while it stays selected.

use std::collections::HashMap;
use std::sync::Arc;

use ocm_proto::api::cluster::v1beta1::Placement;
use ocm_proto::api::cluster::{self as api};
use ocm_proto::api::meta::{Time, condition, set_condition};
use ocm_storage::{MAX_COMMIT_BYTES, MAX_COMMIT_KEYS};
use serde_json::{Value, json};

use super::Scheduler;
use super::schedule::{self, Outcome};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::store::cache::CachedObject;
use crate::store::registry::{Change, DeleteOptions, Parts, Patch};

/// One slice of a pass: the PlacementDecision's name, its group and its clusters.
pub(super) type Slice<'a> = (String, &'a schedule::Group, &'a [String]);

/// What a pass did to its decisions: (event reason, decision name).
pub(super) type Done = Vec<(&'static str, String)>;

/// Bytes a stored decision or placement carries beyond what a pass writes into it
/// (managedFields, labels, owner, system metadata), as commits are cut.
const METADATA_BYTES: usize = 1024;

/// What one commit of a pass is filled to: under the store's limit by a margin for what the
/// reckoning of [`Scheduler::reckoned`] leaves out.
const COMMIT_BYTES: usize = MAX_COMMIT_BYTES / 4 * 3;

impl Scheduler {
    /// Writes the pass's decisions, then the placement's status, as one commit (several, in
    /// that order, for a placement of more slices or bytes than one commit holds: past 127
    /// slices, or about 1.1 MiB of decisions). A 409 means another writer changed something
    /// the pass read: the caller reads again and runs the pass again.
    pub(super) async fn write_pass(
        &self,
        ns: &str,
        name: &str,
        raw: &Value,
        placement: &Placement,
        outcome: &Outcome,
        slices: &[Slice<'_>],
    ) -> Result<Done, ApiError> {
        let (mut changes, done) = self.decision_changes(ns, name, raw, &outcome.reason, slices);
        if let Some(status) = status_patch(raw, placement, outcome, slices) {
            let rt = &self.kinds.placements;
            let parts = vec![(status, rt.subresource("status"))];
            changes.push(Change::Patch { rt, namespace: ns, name: name.to_owned(), parts });
        }
        for commit in cut(changes, |c| self.reckoned(c)) {
            self.registry.commit(commit, &Self::opts()).await?;
        }
        Ok(done)
    }

    /// What a change is reckoned to store: its patches' JSON, or the object as cached when
    /// that is larger (a label patch stores the decisions already there), and the metadata.
    fn reckoned(&self, change: &Change<'_>) -> usize {
        let patches = |parts: &Parts<'_>| -> usize {
            parts
                .iter()
                .map(|(p, _)| match p {
                    Patch::Merge(v) => object::json_len(v),
                    _ => 0,
                })
                .sum()
        };
        match change {
            Change::Create { object, parts, .. } => {
                object::json_len(object) + patches(parts) + METADATA_BYTES
            }
            Change::Patch { rt, namespace, name, parts } => {
                let cached = self.registry.cached(rt, namespace, name);
                let now = cached.map_or(0, |o| o.json_len());
                now.max(patches(parts)) + METADATA_BYTES
            }
            Change::Delete { name, .. } => name.len(),
        }
    }

    /// The changes that bring the placement's PlacementDecisions to `slices` (a same-named
    /// object without its label is taken over), and what they do.
    fn decision_changes<'a>(
        &'a self,
        ns: &'a str,
        name: &str,
        placement: &Value,
        reason: &str,
        slices: &'a [Slice<'_>],
    ) -> (Vec<Change<'a>>, Done) {
        let rt = &self.kinds.decisions;
        let reg = &self.registry;
        let mut existing: HashMap<String, Arc<CachedObject>> = reg
            .cached_list(rt, ns)
            .into_iter()
            .filter(|d| d.label(api::LABEL_PLACEMENT) == Some(name))
            .map(|d| (d.namespace_name().1.to_owned(), d))
            .collect();
        let owner = json!([object::controller_ref(placement)]);
        let status = rt.subresource("status");
        let mut changes = Vec::new();
        let mut done = Vec::new();
        for (decision, group, clusters) in slices {
            let labels = json!({
                api::LABEL_PLACEMENT: name,
                api::LABEL_DECISION_GROUP_NAME: group.name,
                api::LABEL_DECISION_GROUP_INDEX: group.index.to_string(),
            });
            let decisions: Vec<Value> =
                clusters.iter().map(|c| decision_entry(c, reason)).collect();
            let current =
                existing.remove(decision.as_str()).or_else(|| reg.cached(rt, ns, decision));
            let Some(current) = current else {
                let object = json!({
                    "apiVersion": rt.storage_api_version(), "kind": rt.kind,
                    "metadata": {
                        "name": decision, "namespace": ns,
                        "labels": labels, "ownerReferences": owner,
                    },
                });
                let parts = vec![(status_of(decisions), status)];
                changes.push(Change::Create { rt, namespace: ns, object, parts });
                done.push(("DecisionCreate", decision.clone()));
                continue;
            };
            let current = current.value();
            let mut parts = Vec::new();
            if current.pointer("/metadata/labels") != Some(&labels) {
                parts.push((Patch::Merge(json!({"metadata": {"labels": labels}})), None));
            }
            let have = current.pointer("/status/decisions").and_then(Value::as_array);
            if have.map(Vec::as_slice) != Some(&decisions[..]) {
                parts.push((status_of(decisions), status));
                done.push(("DecisionUpdate", decision.clone()));
            }
            if !parts.is_empty() {
                changes.push(Change::Patch { rt, namespace: ns, name: decision.clone(), parts });
            }
        }
        let mut stale: Vec<String> = existing.into_keys().collect();
        stale.sort();
        for decision in stale {
            let options = DeleteOptions::default();
            changes.push(Change::Delete { rt, namespace: ns, name: decision.clone(), options });
            done.push(("DecisionDelete", decision));
        }
        (changes, done)
    }
}

/// One cluster's entry in a decision's `status.decisions`.
fn decision_entry(cluster: &str, reason: &str) -> Value {
    let mut entry = serde_json::Map::with_capacity(2);
    entry.insert("clusterName".to_owned(), Value::String(cluster.to_owned()));
    entry.insert("reason".to_owned(), Value::String(reason.to_owned()));
    Value::Object(entry)
}

/// The status patch of a decision holding `decisions` (moved in: `json!` would copy them).
fn status_of(decisions: Vec<Value>) -> Patch {
    let mut patch = json!({"status": {}});
    patch["status"]["decisions"] = Value::Array(decisions);
    Patch::Merge(patch)
}

/// `items` in order, cut into commits of at most [`MAX_COMMIT_KEYS`] items and
/// [`COMMIT_BYTES`] as `size` reckons them (an item larger than that alone in its commit): one
/// commit for any pass within those.
fn cut<T>(items: Vec<T>, size: impl Fn(&T) -> usize) -> Vec<Vec<T>> {
    let mut commits: Vec<Vec<T>> = Vec::new();
    let mut bytes = 0;
    for item in items {
        let n = size(&item);
        match commits.last_mut() {
            Some(last) if last.len() < MAX_COMMIT_KEYS && bytes + n <= COMMIT_BYTES => {
                bytes += n;
                last.push(item);
            }
            _ => {
                bytes = n;
                commits.push(vec![item]);
            }
        }
    }
    commits
}

/// The status patch of a pass (conditions, selected count, decision groups naming their
/// slices), pinned to the placement's revision as read; `None` when nothing in it changes.
fn status_patch(
    raw: &Value,
    placement: &Placement,
    outcome: &Outcome,
    slices: &[Slice<'_>],
) -> Option<Patch> {
    let status = placement.status.clone().unwrap_or_default();
    let mut conditions = status.conditions.clone();
    let now = Time(crate::machinery::clock::timestamp());
    let misconfigured = match &outcome.misconfigured {
        Some(m) => condition("PlacementMisconfigured", "True", "Misconfigured", m.clone()),
        None => condition(
            "PlacementMisconfigured",
            "False",
            "Succeedconfigured",
            "Placement configurations check pass",
        ),
    };
    let s = &outcome.satisfied;
    let satisfied = condition("PlacementSatisfied", s.status, s.reason, s.message.clone());
    let mut changed = set_condition(&mut conditions, misconfigured, now.clone());
    changed |= set_condition(&mut conditions, satisfied, now);
    let groups: Vec<Value> = outcome
        .groups
        .iter()
        .map(|g| {
            let names: Vec<&str> = slices
                .iter()
                .filter(|(_, sg, _)| sg.index == g.index)
                .map(|(n, _, _)| n.as_str())
                .collect();
            json!({
                "decisionGroupIndex": g.index,
                "decisionGroupName": g.name,
                "decisions": names,
                "clusterCount": g.clusters.len(),
            })
        })
        .collect();
    let selected = i32::try_from(outcome.selected).unwrap_or(i32::MAX);
    let old_groups = serde_json::to_value(&status.decision_groups).unwrap_or_default();
    changed |= status.number_of_selected_clusters != Some(selected)
        || old_groups != Value::Array(groups.clone());
    changed.then(|| {
        Patch::Merge(json!({
            "metadata": {"resourceVersion": object::meta_str(raw, "resourceVersion")},
            "status": {
                "conditions": conditions,
                "numberOfSelectedClusters": selected,
                "decisionGroups": groups,
            },
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pass within one commit's room is one commit; past it, commits fill in order up to the
    /// count or the bytes, whichever comes first.
    #[test]
    fn commits_are_cut_by_count_and_bytes_in_order() {
        let sizes = |v: &[Vec<usize>]| v.iter().map(Vec::len).collect::<Vec<_>>();
        assert_eq!(sizes(&cut((0..101).collect(), |_| 9 << 10)), [101]);
        let by_count = cut((0..300).collect(), |_| 100);
        assert_eq!(sizes(&by_count), [128, 128, 44]);
        assert_eq!(by_count.concat(), (0..300).collect::<Vec<_>>(), "in order, none lost");
        let per_commit = COMMIT_BYTES / (20 << 10);
        let by_bytes = cut((0..100).collect(), |_| 20 << 10);
        assert_eq!(by_bytes[0].len(), per_commit);
        assert_eq!(sizes(&cut(vec![1, 2], |_| COMMIT_BYTES + 1)), [1, 1]);
        assert!(cut(Vec::<u8>::new(), |_| 1).is_empty());
    }
}
