//! A set's revisions (OCM enhancement 229): every template it has had is a ControllerRevision
//! `<set>-<hash>` in its namespace, owned by the set (so the garbage collector removes them with
//! it), labelled with the set's name and the hash, numbered in the order the templates were
//! last used, and pruned to `revisionHistoryLimit` beyond the ones in use.
//!
//! The hash is Kubernetes' pod-template-hash recipe: FNV-32a over the revision's content (the
//! template and the overrides, object keys in sorted order so a re-ordered apply is the same
//! revision), then the collision count's little-endian bytes when set, the decimal digits
//! encoded with `rand.SafeEncodeString`'s alphabet. Overrides are part of a revision because
//! they change what clusters run, and rolling back must restore them too.

use std::collections::HashMap;

use ocm_proto::api::work::v1alpha1::{
    DEFAULT_REVISION_HISTORY_LIMIT, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec,
    ManifestWorkReplicaSetStatus,
};
use ocm_proto::api::work::{LABEL_CONTROLLER_HASH, LABEL_MANIFEST_WORK_REPLICA_SET_NAME};
use serde_json::{Map, Value, json};

use super::Controller;
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::store::registry::DeleteOptions;

/// What a revision holds: the template and overrides, as the spec has them.
pub(super) fn content(spec: &ManifestWorkReplicaSetSpec) -> Value {
    json!({
        "manifestWorkTemplate": spec.manifest_work_template.clone().unwrap_or_default(),
        "overrides": spec.overrides,
    })
}

/// `v` with every object's keys in sorted order.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter().map(|k| (k.clone(), canonical(&m[k]))).collect::<Map<_, _>>(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// FNV-32a.
fn fnv32a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

/// `rand.SafeEncodeString`: each character mapped into an alphabet without vowels or
/// look-alikes, so a hash never spells a word.
fn safe_encode(s: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes().map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char).collect()
}

/// The revision hash of `content` with a collision count.
fn hash(content: &Value, collisions: Option<i32>) -> String {
    let mut bytes = serde_json::to_vec(&canonical(content)).unwrap_or_default();
    if let Some(n) = collisions {
        bytes.extend_from_slice(&n.to_le_bytes());
    }
    safe_encode(&fnv32a(&bytes).to_string())
}

/// The update revision of a spec, with the collision count the status holds.
pub(super) fn hash_of(
    spec: &ManifestWorkReplicaSetSpec,
    status: Option<&ManifestWorkReplicaSetStatus>,
) -> String {
    hash(&content(spec), status.and_then(|s| s.collision_count))
}

/// The set's revisions as the run needs them.
#[derive(Debug, Clone, Default)]
pub(super) struct Revisions {
    /// The revision of the current template.
    pub update: String,
    /// The revision every selected cluster last ran successfully, if any.
    pub current: Option<String>,
    /// Each stored revision's content, by hash.
    pub contents: HashMap<String, Value>,
    /// Each stored revision's number, by hash.
    pub numbers: HashMap<String, i64>,
}

impl Revisions {
    /// The spec a revision holds: `spec` with that revision's template and overrides.
    pub(super) fn spec_at(
        &self,
        spec: &ManifestWorkReplicaSetSpec,
        revision: &str,
    ) -> Option<ManifestWorkReplicaSetSpec> {
        let c = self.contents.get(revision)?;
        let mut at = spec.clone();
        at.manifest_work_template = serde_json::from_value(c["manifestWorkTemplate"].clone()).ok();
        at.overrides = serde_json::from_value(c["overrides"].clone()).unwrap_or_default();
        Some(at)
    }
}

/// The revision's object name.
fn name_of(set: &str, hash: &str) -> String {
    format!("{set}-{hash}")
}

/// Makes sure the current template is a stored revision, numbered newest, and prunes the
/// history; a name taken by other content raises the collision count (the status write runs
/// the set again).
pub(super) async fn ensure(
    c: &Controller,
    raw: &Value,
    set: &ManifestWorkReplicaSet,
    spec: &ManifestWorkReplicaSetSpec,
) -> Result<Revisions, ApiError> {
    let (ns, name) = (object::namespace(raw), object::name(raw));
    let status = set.status.clone().unwrap_or_default();
    let content = content(spec);
    let update = hash(&content, status.collision_count);
    let mut revs = stored(c, ns, name);
    let newest = revs.numbers.values().copied().max().unwrap_or(0);
    match revs.contents.get(&update) {
        Some(held) if *held != canonical(&content) => {
            let next = status.collision_count.unwrap_or(0) + 1;
            let body = json!({"status": {"collisionCount": next}});
            c.patch(&c.kinds.sets, ns, name, body, Some("status")).await?;
            let subject =
                crate::store::registry::subject(&c.kinds.revisions, &name_of(name, &update));
            return Err(ApiError::conflict(
                subject,
                "it holds another template; collision count raised",
            ));
        }
        Some(_) if revs.numbers.get(&update) != Some(&newest) => {
            // An older template is back (an undo): it becomes the newest revision.
            let body = json!({"revision": newest + 1});
            let rev_name = name_of(name, &update);
            c.patch(&c.kinds.revisions, ns, &rev_name, body, None).await?;
            revs.numbers.insert(update.clone(), newest + 1);
        }
        Some(_) => {}
        None => {
            create(c, raw, &update, &content, newest + 1).await?;
            revs.contents.insert(update.clone(), canonical(&content));
            revs.numbers.insert(update.clone(), newest + 1);
        }
    }
    revs.update = update;
    revs.current = status.current_revision.filter(|r| revs.contents.contains_key(r));
    prune(c, ns, name, spec, &revs).await?;
    Ok(revs)
}

/// The set's stored revisions.
fn stored(c: &Controller, ns: &str, set: &str) -> Revisions {
    let mut revs = Revisions::default();
    for r in c.registry.cached_list(&c.kinds.revisions, ns) {
        if r.label(LABEL_MANIFEST_WORK_REPLICA_SET_NAME) != Some(set) {
            continue;
        }
        let Some(h) = r.label(LABEL_CONTROLLER_HASH).map(str::to_owned) else { continue };
        let v = r.value();
        revs.contents.insert(h.clone(), canonical(&v["data"]));
        revs.numbers.insert(h, v["revision"].as_i64().unwrap_or(0));
    }
    revs
}

/// Stores a new revision, owned by the set.
async fn create(
    c: &Controller,
    raw: &Value,
    hash: &str,
    content: &Value,
    number: i64,
) -> Result<(), ApiError> {
    let (ns, name) = (object::namespace(raw), object::name(raw));
    let rt = &c.kinds.revisions;
    let rev = json!({
        "apiVersion": rt.storage_api_version(), "kind": rt.kind,
        "metadata": {
            "name": name_of(name, hash), "namespace": ns,
            "labels": {LABEL_MANIFEST_WORK_REPLICA_SET_NAME: name, LABEL_CONTROLLER_HASH: hash},
            "ownerReferences": [object::controller_ref(raw)],
        },
        "data": canonical(content),
        "revision": number,
    });
    c.registry.create_if_absent(rt, rev, &Controller::opts()).await
}

/// Deletes the oldest revisions beyond `revisionHistoryLimit`, never the update or current one.
async fn prune(
    c: &Controller,
    ns: &str,
    set: &str,
    spec: &ManifestWorkReplicaSetSpec,
    revs: &Revisions,
) -> Result<(), ApiError> {
    let limit = spec.revision_history_limit.unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT).max(0);
    let mut old: Vec<(&String, i64)> = revs
        .numbers
        .iter()
        .filter(|(h, _)| **h != revs.update && Some(*h) != revs.current.as_ref())
        .map(|(h, n)| (h, *n))
        .collect();
    old.sort_by_key(|(_, n)| *n);
    let excess = old.len().saturating_sub(usize::try_from(limit).unwrap_or(0));
    for (h, _) in old.into_iter().take(excess) {
        let opts = DeleteOptions::default();
        match c.registry.delete(&c.kinds.revisions, ns, &name_of(set, h), &opts).await {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv32a_matches_the_reference_values() {
        assert_eq!(fnv32a(b""), 0x811c_9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c_292c);
        assert_eq!(fnv32a(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn the_hash_ignores_key_order_and_follows_content_and_collisions() {
        let a = json!({"x": 1, "y": {"b": 2, "a": 3}});
        let b: Value = serde_json::from_str(r#"{"y": {"a": 3, "b": 2}, "x": 1}"#).unwrap();
        assert_eq!(hash(&a, None), hash(&b, None));
        assert_ne!(hash(&a, None), hash(&json!({"x": 2}), None));
        assert_ne!(hash(&a, None), hash(&a, Some(1)));
        let h = hash(&a, None);
        assert!(h.bytes().all(|c| b"bcdfghjklmnpqrstvwxz2456789".contains(&c)), "{h}");
    }
}
