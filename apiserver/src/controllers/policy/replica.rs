//! The replicated policy a cluster gets from a root policy (ocm-wave2.md §3.2): named
//! `<root namespace>.<root name>` in the cluster's namespace, the root's spec (remediation
//! overridden to `enforce` where a binding says so), its labels and annotations (only the
//! `policy.open-cluster-management.io/` ones with `copyPolicyMetadata: false`, never the
//! trigger-update annotation) and OCM's three labels.

use ocm_proto::api::policy::{
    ANNOTATION_ARGOCD_COMPARE, ANNOTATION_TRIGGER_UPDATE, ARGOCD_IGNORE_EXTRANEOUS, ENFORCE,
    LABEL_CLUSTER_NAME, LABEL_CLUSTER_NAMESPACE, LABEL_ROOT_POLICY, METADATA_PREFIX, is_enforce,
    replica_name,
};
use serde_json::{Map, Value, json};

use crate::machinery::object;

/// The root's labels or annotations (`part`) a replica carries.
fn copied(root: &Value, part: &str, all: bool) -> Map<String, Value> {
    let from = root["metadata"].get(part).and_then(Value::as_object);
    from.into_iter()
        .flatten()
        .filter(|(k, _)| all || k.starts_with(METADATA_PREFIX))
        .filter(|(k, _)| k.as_str() != ANNOTATION_TRIGGER_UPDATE)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The replica of `root` for `cluster`; `enforce` when a binding overrides remediation there.
pub(super) fn replica(root: &Value, cluster: &str, enforce: bool) -> Value {
    let (ns, name) = (object::namespace(root), object::name(root));
    let all = root.pointer("/spec/copyPolicyMetadata").and_then(Value::as_bool) != Some(false);
    let mut labels = copied(root, "labels", all);
    let root_name = replica_name(ns, name);
    labels.insert(LABEL_ROOT_POLICY.into(), json!(root_name));
    labels.insert(LABEL_CLUSTER_NAME.into(), json!(cluster));
    labels.insert(LABEL_CLUSTER_NAMESPACE.into(), json!(cluster));
    let mut annotations = copied(root, "annotations", all);
    annotations.insert(ANNOTATION_ARGOCD_COMPARE.into(), json!(ARGOCD_IGNORE_EXTRANEOUS));
    let mut spec = root.get("spec").cloned().unwrap_or_else(|| json!({}));
    let root_action = spec.get("remediationAction").and_then(Value::as_str).unwrap_or("");
    if enforce && !is_enforce(root_action) {
        spec["remediationAction"] = json!(ENFORCE);
    }
    json!({
        "apiVersion": root["apiVersion"],
        "kind": "Policy",
        "metadata": {
            "name": root_name,
            "namespace": cluster,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    })
}

/// Whether the stored policy `obj` is the replica of root `root_name` (`<ns>.<name>`) this
/// controller keeps: its name and label say so, in the namespace its cluster label names (a
/// user's look-alike elsewhere is not the controller's to touch).
pub(super) fn is_replica_of(obj: &Value, root_name: &str) -> bool {
    object::name(obj) == root_name
        && object::label(obj, LABEL_ROOT_POLICY) == Some(root_name)
        && object::label(obj, LABEL_CLUSTER_NAME) == Some(object::namespace(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> Value {
        json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "Policy",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5",
                "labels": {"team": "a", "policy.open-cluster-management.io/standard": "x"},
                "annotations": {ANNOTATION_TRIGGER_UPDATE: "1", "note": "n"}},
            "spec": {"disabled": false, "remediationAction": "inform", "policy-templates": []},
            "status": {"compliant": "Compliant"}})
    }

    #[test]
    fn a_replica_carries_the_spec_labels_and_ocm_labels() {
        let r = replica(&root(), "c1", false);
        assert_eq!(r["metadata"]["name"], "ns.p");
        assert_eq!(r["metadata"]["namespace"], "c1");
        assert_eq!(r["metadata"]["labels"][LABEL_ROOT_POLICY], "ns.p");
        assert_eq!(r["metadata"]["labels"][LABEL_CLUSTER_NAME], "c1");
        assert_eq!(r["metadata"]["labels"]["team"], "a");
        assert!(r["metadata"]["annotations"].get(ANNOTATION_TRIGGER_UPDATE).is_none());
        assert_eq!(r["metadata"]["annotations"][ANNOTATION_ARGOCD_COMPARE], "IgnoreExtraneous");
        assert!(r.get("status").is_none() && r["metadata"].get("uid").is_none());
        assert_eq!(r["spec"]["remediationAction"], "inform");
        assert!(is_replica_of(&r, "ns.p"));
    }

    #[test]
    fn overrides_and_copy_policy_metadata() {
        assert_eq!(replica(&root(), "c1", true)["spec"]["remediationAction"], "enforce");
        let mut quiet = root();
        quiet["spec"]["copyPolicyMetadata"] = json!(false);
        let r = replica(&quiet, "c1", false);
        assert!(r["metadata"]["labels"].get("team").is_none());
        assert_eq!(r["metadata"]["labels"]["policy.open-cluster-management.io/standard"], "x");
    }

    #[test]
    fn a_look_alike_in_another_namespace_is_not_a_replica() {
        let mut fake = replica(&root(), "c1", false);
        fake["metadata"]["namespace"] = json!("team-b");
        assert!(!is_replica_of(&fake, "ns.p"));
    }
}
