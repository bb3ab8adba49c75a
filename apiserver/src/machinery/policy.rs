//! OCM's Policy webhook rules on top of the CRD's schema (ocm-wave2.md §3.1): a root policy's
//! namespace and name together fit the replica's label value, and each ConfigurationPolicy
//! template validates against the ConfigurationPolicy CRD (defaults applied first), its errors
//! named at their path inside the policy.

use ocm_proto::api::policy::{GROUP, KIND_CONFIGURATION_POLICY, LABEL_ROOT_POLICY, MAX_ROOT_NAME};
use ocm_proto::validation::FieldError;
use serde_json::Value;

use crate::machinery::object;

/// The rule violations of the Policy `obj`.
pub fn policy_rules(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let (ns, name) = (object::namespace(obj), object::name(obj));
    let replica = object::label(obj, LABEL_ROOT_POLICY).is_some();
    if !replica && ns.chars().count() + name.chars().count() > MAX_ROOT_NAME {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            "the combined length of the policy namespace and name cannot exceed 62 characters",
        ));
    }
    let templates = obj.pointer("/spec/policy-templates").and_then(Value::as_array);
    for (i, template) in templates.into_iter().flatten().enumerate() {
        let Some(def) = template.get("objectDefinition") else { continue };
        errs.extend(template_rules(def, &format!("spec.policy-templates[{i}].objectDefinition")));
    }
    errs
}

/// A ConfigurationPolicy template checked against its CRD; other kinds are left to the
/// clusters that evaluate them.
fn template_rules(def: &Value, at: &str) -> Vec<FieldError> {
    let api_version = def.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = def.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != KIND_CONFIGURATION_POLICY || api_version != format!("{GROUP}/v1") {
        return Vec::new();
    }
    let Some(schema) = ocm_proto::crd::find_kind(GROUP, KIND_CONFIGURATION_POLICY)
        .and_then(|crd| crd.version("v1"))
        .map(|v| &v.schema)
    else {
        return Vec::new();
    };
    let mut defaulted = def.clone();
    schema.apply_defaults(&mut defaulted);
    let mut errs = schema.validate(&defaulted);
    if object::name(def).is_empty() {
        errs.push(FieldError::required("metadata.name", "a template needs a name"));
    }
    for e in &mut errs {
        e.field = format!("{at}.{}", e.field);
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(ns: &str, name: &str, template: Value) -> Value {
        json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "Policy",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"disabled": false, "policy-templates": [{"objectDefinition": template}]}})
    }

    fn config(spec: Value) -> Value {
        json!({"apiVersion": "policy.open-cluster-management.io/v1",
            "kind": "ConfigurationPolicy", "metadata": {"name": "c"}, "spec": spec})
    }

    #[test]
    fn long_root_names_are_refused_and_replicas_exempt() {
        let long = "p".repeat(61);
        let errs = policy_rules(&policy("ns", &long, json!({})));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.name");
        let mut replica = policy("cluster1", &format!("ns.{long}"), json!({}));
        replica["metadata"]["labels"] = json!({LABEL_ROOT_POLICY: format!("ns.{long}")});
        assert!(policy_rules(&replica).is_empty());
    }

    #[test]
    fn configuration_policy_templates_are_checked_at_their_path() {
        let good = config(json!({"object-templates": [{"complianceType": "musthave",
            "objectDefinition": {"apiVersion": "v1", "kind": "ConfigMap"}}]}));
        assert!(policy_rules(&policy("ns", "p", good)).is_empty());
        let bad = config(json!({"object-templates": [{"complianceType": "mustbe",
            "objectDefinition": {}}]}));
        let errs = policy_rules(&policy("ns", "p", bad));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(
            errs[0].field,
            "spec.policy-templates[0].objectDefinition.spec.object-templates[0].complianceType"
        );
        // Other template kinds are not this hub's to judge.
        let other = json!({"apiVersion": "constraints.gatekeeper.sh/v1beta1", "kind": "K8sX"});
        assert!(policy_rules(&policy("ns", "p", other)).is_empty());
    }
}
