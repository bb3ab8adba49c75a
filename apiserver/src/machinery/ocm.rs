//! The OCM kinds as rows of the scheme, built from the real OCM CRDs (`ocm_proto::crd`): names,
//! scope, versions, subresources and selectable fields from the CRD, validation, defaulting and
//! pruning from its structural schema, plus the few rules OCM's webhooks add on top.

use std::sync::Arc;

use ocm_proto::crd::{Crd, ocm_crds};
use ocm_proto::schema::Schema;
use ocm_proto::validation::FieldError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::machinery::error::{ApiError, Subject};
use crate::machinery::merge::shape::Shape;
use crate::machinery::requester::Attributes;
use crate::machinery::requester::Requester;
use crate::machinery::scheme::{ResourceType, Subresource, prefix_of, version_priority};
use crate::machinery::strategy::{NameRule, OpenApiSchema, Strategy};

/// The OCM kinds a profile serves: the hub every kind but the spoke-only ones (ClusterClaim,
/// AppliedManifestWork), a managed cluster just those, and both ConfigurationPolicy (the hub
/// validates templates with it; a managed cluster holds its evaluated templates, as OCM's
/// policy add-ons install its CRD there).
pub fn ocm_types(profile: crate::machinery::scheme::Profile) -> Vec<ResourceType> {
    let hub = profile == crate::machinery::scheme::Profile::Hub;
    ocm_crds()
        .iter()
        .filter(|crd| {
            let spoke_only = matches!(crd.kind.as_str(), "ClusterClaim" | "AppliedManifestWork");
            spoke_only != hub || crd.kind == "ConfigurationPolicy"
        })
        .map(resource_type)
        .collect()
}

fn resource_type(crd: &'static Crd) -> ResourceType {
    let storage = crd.storage_version();
    let mut versions: Vec<String> = crd
        .versions
        .iter()
        .filter(|v| v.served && (v.storage || conversion(&crd.kind).is_some()))
        .map(|v| v.name.clone())
        .collect();
    versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    let mut subresources = Vec::new();
    if storage.status_subresource {
        subresources.push(Subresource::part("status", &["status"]));
    }
    if crd.kind == "Placement" {
        // Beyond OCM: why the scheduler decided as it did (placement/mod.rs).
        let action = Some(crate::machinery::scheme::Action::ExplainPlacement);
        subresources.push(Subresource { name: "explain", owns: &[], action });
    }
    if crd.kind == "ManifestWorkReplicaSet" {
        // Beyond OCM: the work one cluster gets (manifestworkreplicaset/mod.rs).
        let action = Some(crate::machinery::scheme::Action::RenderWork);
        subresources.push(Subresource { name: "render", owns: &[], action });
    }
    ResourceType {
        group: crd.group.clone(),
        kind: crd.kind.clone(),
        list_kind: crd.list_kind.clone(),
        plural: crd.plural.clone(),
        singular: crd.singular.clone(),
        short_names: crd.short_names.clone(),
        categories: crd.categories.clone(),
        namespaced: crd.namespaced,
        versions,
        storage_version: storage.name.clone(),
        stored_as: None,
        subresources,
        selectable_fields: storage
            .selectable_fields
            .iter()
            .map(|p| p.trim_start_matches('.').to_owned())
            .collect(),
        strategy: Arc::new(CrdStrategy {
            crd,
            schema: &storage.schema,
            conversion: conversion(&crd.kind),
            columns: crd
                .versions
                .iter()
                .map(|v| (v.name.clone(), crate::machinery::table::crd_columns(&v.printer_columns)))
                .collect(),
        }),
        prefix: prefix_of(&crd.group, &crd.plural),
        shapes: crd
            .versions
            .iter()
            .map(|v| (v.name.clone(), Arc::new(Shape::from_crd(&v.schema))))
            .collect(),
        review: None,
    }
}

/// How a kind served at two versions converts between its storage version and the other one
/// (OCM does this in a conversion webhook; the hub does it in-process with the typed structs of
/// `ocm_proto::api`).
#[derive(Clone, Copy)]
struct Conversion {
    to_other: fn(Value) -> Result<Value, String>,
    to_storage: fn(Value) -> Result<Value, String>,
}

fn convert<A, B>(v: Value) -> Result<Value, String>
where
    A: DeserializeOwned,
    B: Serialize + From<A>,
{
    let a: A = serde_json::from_value(v).map_err(|e| e.to_string())?;
    serde_json::to_value(B::from(a)).map_err(|e| e.to_string())
}

/// The kinds whose versions differ in shape: the add-on kinds, stored at v1alpha1 and also
/// served at v1beta1.
fn conversion(kind: &str) -> Option<Conversion> {
    use ocm_proto::api::addon::{v1alpha1 as a, v1beta1 as b};
    Some(match kind {
        "ClusterManagementAddOn" => Conversion {
            to_other: convert::<a::ClusterManagementAddOn, b::ClusterManagementAddOn>,
            to_storage: convert::<b::ClusterManagementAddOn, a::ClusterManagementAddOn>,
        },
        "ManagedClusterAddOn" => Conversion {
            to_other: convert::<a::ManagedClusterAddOn, b::ManagedClusterAddOn>,
            to_storage: convert::<b::ManagedClusterAddOn, a::ManagedClusterAddOn>,
        },
        "AddOnDeploymentConfig" => Conversion {
            to_other: convert::<a::AddOnDeploymentConfig, b::AddOnDeploymentConfig>,
            to_storage: convert::<b::AddOnDeploymentConfig, a::AddOnDeploymentConfig>,
        },
        _ => return None,
    })
}

/// An OCM kind: the CRD's structural schema prunes, defaults and validates; OCM's webhook rules
/// come on top.
struct CrdStrategy {
    crd: &'static Crd,
    schema: &'static Schema,
    conversion: Option<Conversion>,
    /// Table columns per version, from the CRD's printer columns.
    columns: std::collections::HashMap<String, Arc<[crate::machinery::table::Column]>>,
}

impl CrdStrategy {
    fn converted(
        &self,
        f: fn(Value) -> Result<Value, String>,
        obj: Value,
    ) -> Result<Value, ApiError> {
        f(obj).map_err(|e| {
            ApiError::bad_request(format!(
                "{kind} cannot be converted between versions: {e}",
                kind = self.crd.kind
            ))
        })
    }
}

impl Strategy for CrdStrategy {
    fn openapi_schema(&self, version: &str) -> Option<OpenApiSchema> {
        let api_version = format!("{}/{version}", self.crd.group);
        if let Some(f) = ocm_proto::api::json_schema(&api_version, &self.crd.kind) {
            return Some(OpenApiSchema::Derived(f));
        }
        // No Rust type for this version: publish the CRD's schema as written.
        let v = self.crd.versions.iter().find(|v| v.name == version)?;
        Some(OpenApiSchema::Crd(&v.openapi_schema))
    }

    fn columns(&self, version: &str) -> Arc<[crate::machinery::table::Column]> {
        self.columns
            .get(version)
            .cloned()
            .unwrap_or_else(|| crate::machinery::table::crd_columns(&[]))
    }

    fn prune(&self, obj: &mut Value) -> Vec<String> {
        self.schema.prune(obj)
    }

    fn default(&self, obj: &mut Value) {
        self.schema.apply_defaults(obj);
    }

    fn validate(&self, obj: &Value) -> Result<Vec<FieldError>, ApiError> {
        let mut errs = self.schema.validate(obj);
        errs.extend(webhook_rules(&self.crd.kind, obj));
        Ok(errs)
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn admit(
        &self,
        obj: &mut Value,
        old: Option<&Value>,
        sub: Option<&str>,
        who: Option<&Requester>,
    ) -> Result<(), ApiError> {
        match self.crd.kind.as_str() {
            "ManagedCluster" if sub.is_none() => admit_managed_cluster(obj, old, who),
            "ManagedClusterSetBinding" if old.is_none() => match who {
                Some(who) => admit_binding(obj, who),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn storage_to_version(&self, obj: Value, api_version: &str) -> Result<Value, ApiError> {
        match self.conversion {
            Some(c) => self.converted(c.to_other, obj),
            None => {
                let mut obj = obj;
                crate::machinery::strategy::set_api_version(&mut obj, api_version);
                Ok(obj)
            }
        }
    }

    fn version_to_storage(&self, obj: Value, storage_api_version: &str) -> Result<Value, ApiError> {
        let stored_already =
            obj.get("apiVersion").and_then(Value::as_str) == Some(storage_api_version);
        match self.conversion {
            Some(c) if !stored_already => self.converted(c.to_storage, obj),
            _ => {
                let mut obj = obj;
                crate::machinery::strategy::set_api_version(&mut obj, storage_api_version);
                Ok(obj)
            }
        }
    }

    fn name_rule(&self) -> NameRule {
        // A cluster name is also its namespace's name (OCM's webhook enforces a DNS label).
        if self.crd.kind == "ManagedCluster" { NameRule::Label } else { NameRule::Subdomain }
    }
}

fn forbidden(resource: &str, name: &str, why: String) -> ApiError {
    let subject = Subject {
        group: ocm_proto::api::cluster::GROUP.to_owned(),
        kind: resource.to_owned(),
        name: name.to_owned(),
    };
    ApiError::forbidden(subject, why)
}

/// OCM's ManagedCluster webhooks (ocm.md §3.10): the `default` cluster set label on create,
/// `managedclustersets/join` for the old and the new set when the label changes,
/// `managedclusters/accept` to set `hubAcceptsClient`, and the taints' `timeAdded` (stamped by
/// the server, never by a client).
fn admit_managed_cluster(
    obj: &mut Value,
    old: Option<&Value>,
    who: Option<&Requester>,
) -> Result<(), ApiError> {
    use ocm_proto::api::cluster::{CLUSTER_SET_DEFAULT, LABEL_CLUSTER_SET};
    let name = crate::machinery::object::name(obj).to_owned();
    if old.is_none() {
        let labels = crate::machinery::object::meta_mut(obj)
            .entry("labels")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(labels) = labels.as_object_mut() {
            labels
                .entry(LABEL_CLUSTER_SET)
                .or_insert_with(|| Value::String(CLUSTER_SET_DEFAULT.to_owned()));
        }
    }
    if let (Some(old), Some(_)) = (old, who) {
        keep_automatic_taints(obj, old);
    }
    stamp_taints(obj, old, who.is_some())?;
    let Some(who) = who else { return Ok(()) };
    let accepts = |v: &Value| v.pointer("/spec/hubAcceptsClient") == Some(&Value::Bool(true));
    if accepts(obj) && !old.is_some_and(accepts) {
        let attrs = Attributes::resource(
            "update",
            "register.open-cluster-management.io",
            "managedclusters",
            "",
            &name,
        )
        .with_subresource("accept");
        if !who.can(&attrs) {
            return Err(forbidden(
                "managedclusters",
                &name,
                format!("user {:?} cannot update the HubAcceptsClient field", who.user.name),
            ));
        }
    }
    let set_of =
        |v: &Value| crate::machinery::object::label(v, LABEL_CLUSTER_SET).unwrap_or("").to_owned();
    let new_set = set_of(obj);
    let old_set = old.map(set_of).unwrap_or_default();
    if new_set != old_set {
        for set in [&old_set, &new_set].into_iter().filter(|s| !s.is_empty()) {
            let attrs = set_right(set, "join");
            if !who.can(&attrs) {
                return Err(forbidden(
                    "managedclusters",
                    &name,
                    format!(
                        "user {:?} cannot add/remove a ManagedCluster to/from ManagedClusterSet {set:?}",
                        who.user.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The `unreachable` and `unavailable` taints are the hub's (ocm.md §2.1): a client's update
/// keeps them as they were, whatever it sent, so an agent cannot clear them (nor restart a
/// toleration's clock by having them re-added).
fn keep_automatic_taints(obj: &mut Value, old: &Value) {
    use ocm_proto::api::cluster::{TAINT_UNAVAILABLE, TAINT_UNREACHABLE};
    let automatic = |t: &Value| {
        matches!(t.get("key").and_then(Value::as_str), Some(TAINT_UNREACHABLE | TAINT_UNAVAILABLE))
    };
    let kept: Vec<Value> = old
        .pointer("/spec/taints")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter(|t| automatic(t)).cloned().collect())
        .unwrap_or_default();
    let given = obj.pointer("/spec/taints").and_then(Value::as_array);
    let mut taints: Vec<Value> =
        given.map(|l| l.iter().filter(|t| !automatic(t)).cloned().collect()).unwrap_or_default();
    if kept.is_empty() && given.is_none_or(|l| !l.iter().any(automatic)) {
        return;
    }
    taints.extend(kept);
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("taints".into(), Value::Array(taints));
    }
}

/// Stamps `timeAdded` on new and changed taints; a client may not set it on them, nor change
/// it on a taint it keeps.
fn stamp_taints(obj: &mut Value, old: Option<&Value>, client: bool) -> Result<(), ApiError> {
    let old_taints: Vec<Value> = old
        .and_then(|o| o.pointer("/spec/taints"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let now = Value::String(crate::machinery::object::now_rfc3339());
    let Some(taints) = obj.pointer_mut("/spec/taints").and_then(Value::as_array_mut) else {
        return Ok(());
    };
    let mut errs = Vec::new();
    for (i, taint) in taints.iter_mut().enumerate() {
        let same = |o: &&Value| {
            o.get("key") == taint.get("key")
                && o.get("effect") == taint.get("effect")
                && o.get("value").and_then(Value::as_str).unwrap_or("")
                    == taint.get("value").and_then(Value::as_str).unwrap_or("")
        };
        let kept = old_taints.iter().find(same).cloned();
        let given = taint.get("timeAdded").filter(|v| !v.is_null()).cloned();
        let Some(map) = taint.as_object_mut() else { continue };
        match kept {
            Some(o) => {
                let original = o.get("timeAdded").cloned().unwrap_or(Value::Null);
                match given {
                    Some(t) if client && t != original => errs.push(FieldError::forbidden(
                        format!("spec.taints[{i}].timeAdded"),
                        "the timeAdded of a taint is set by the hub and may not change",
                    )),
                    _ => {
                        map.insert("timeAdded".into(), original);
                    }
                }
            }
            None if client && old.is_some() && given.is_some() => errs.push(FieldError::forbidden(
                format!("spec.taints[{i}].timeAdded"),
                "the timeAdded of a new or changed taint is set by the hub",
            )),
            None => {
                map.insert("timeAdded".into(), now.clone());
            }
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        let name = crate::machinery::object::name(obj).to_owned();
        Err(ApiError::invalid(ocm_proto::api::cluster::GROUP, "ManagedCluster", &name, &errs))
    }
}

/// The right OCM's webhooks ask for on a cluster set: `create managedclustersets/<sub>`
/// (`join` to put a cluster in it, `bind` to bind it to a namespace).
fn set_right(set: &str, sub: &'static str) -> Attributes {
    Attributes::resource("create", ocm_proto::api::cluster::GROUP, "managedclustersets", "", set)
        .with_subresource(sub)
}

/// A ManagedClusterSetBinding may be created only by who may bind its set
/// (`managedclustersets/bind`).
fn admit_binding(obj: &Value, who: &Requester) -> Result<(), ApiError> {
    let name = crate::machinery::object::name(obj);
    let set = obj.pointer("/spec/clusterSet").and_then(Value::as_str).unwrap_or(name);
    let attrs = set_right(set, "bind");
    if who.can(&attrs) {
        return Ok(());
    }
    Err(forbidden(
        "managedclustersetbindings",
        name,
        format!("user {:?} is not allowed to bind cluster set {set:?}", who.user.name),
    ))
}

/// The largest total size of a ManifestWork's manifests (OCM's webhook limit).
pub const MAX_MANIFESTS_BYTES: usize = 500 * 1024;

/// OCM's ManifestWork manifest checks (sdk-go's `ManifestValidator`): at least one manifest, at
/// most 500 KiB of them, each naming its `apiVersion`, `kind` and `metadata.name` (never a
/// `generateName`: the agent must know what it applied), and no object twice.
/// OCM's ManifestWorkReplicaSet webhook (the template's manifests as a ManifestWork's) and the
/// hub's per-cluster values: every `{{ … }}` of the template and the overrides well-formed.
fn replica_set_rules(obj: &Value) -> Vec<FieldError> {
    use crate::machinery::template::{TEMPLATE_FIELD, check_override, check_template};
    let template = obj.pointer("/spec/manifestWorkTemplate").cloned().unwrap_or(Value::Null);
    let mut errs: Vec<FieldError> = manifest_rules(&serde_json::json!({"spec": template}))
        .into_iter()
        .map(|mut e| {
            e.field = e.field.replacen("spec.", &format!("{TEMPLATE_FIELD}."), 1);
            e
        })
        .collect();
    let invalid = |e: crate::machinery::template::RenderError| {
        FieldError::invalid(e.field, Value::Null, e.detail)
    };
    errs.extend(check_template(&template, TEMPLATE_FIELD).into_iter().map(invalid));
    let overrides = obj.pointer("/spec/overrides").and_then(Value::as_array);
    for (i, o) in overrides.into_iter().flatten().enumerate() {
        let field = format!("spec.overrides[{i}]");
        match serde_json::from_value::<ocm_proto::api::work::v1alpha1::Override>(o.clone()) {
            Ok(o) => errs.extend(check_override(&o, &field).into_iter().map(invalid)),
            Err(e) => errs.push(FieldError::invalid(field, Value::Null, e.to_string())),
        }
    }
    errs
}

fn manifest_rules(obj: &Value) -> Vec<FieldError> {
    use ocm_proto::validation::FieldErrorKind;
    let path = "spec.workload.manifests";
    let manifests = obj.pointer("/spec/workload/manifests").and_then(Value::as_array);
    let Some(manifests) = manifests.filter(|m| !m.is_empty()) else {
        return vec![FieldError::required(path, "Workload manifests should not be empty")];
    };
    let size =
        obj.pointer("/spec/workload/manifests").map_or(0, crate::machinery::object::json_len);
    if size > MAX_MANIFESTS_BYTES {
        return vec![FieldError::new(
            FieldErrorKind::TooLong,
            path,
            None,
            format!(
                "the size of manifests is {size} bytes which exceeds the {MAX_MANIFESTS_BYTES} limit"
            ),
        )];
    }
    let mut errs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (i, m) in manifests.iter().enumerate() {
        let at = |field: &str| format!("{path}[{i}].{field}");
        let text = |p: &str| m.pointer(p).and_then(Value::as_str).unwrap_or("");
        for (field, pointer) in [("apiVersion", "/apiVersion"), ("kind", "/kind")] {
            if text(pointer).is_empty() {
                errs.push(FieldError::required(
                    at(field),
                    format!("{field} must be set in manifest"),
                ));
            }
        }
        if text("/metadata/name").is_empty() {
            errs.push(FieldError::required(at("metadata.name"), "name must be set in manifest"));
        }
        if !text("/metadata/generateName").is_empty() {
            errs.push(FieldError::forbidden(
                at("metadata.generateName"),
                "generateName must not be set in manifest",
            ));
        }
        let (api_version, kind) = (text("/apiVersion"), text("/kind"));
        let (namespace, name) = (text("/metadata/namespace"), text("/metadata/name"));
        if !seen.insert((api_version, kind, namespace, name)) {
            errs.push(FieldError::new(
                FieldErrorKind::Duplicate,
                path.to_owned() + &format!("[{i}]"),
                None,
                format!("duplicate manifest for resource {namespace}/{name} with resource type {api_version}.{kind}"),
            ));
        }
    }
    errs
}

/// The checks OCM's validating webhooks make that the schema cannot express.
fn webhook_rules(kind: &str, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match kind {
        "ManagedClusterSetBinding" => {
            let name = crate::machinery::object::name(obj);
            let set = obj.pointer("/spec/clusterSet").and_then(Value::as_str).unwrap_or("");
            if !set.is_empty() && set != name {
                errs.push(FieldError::invalid(
                    "spec.clusterSet",
                    set,
                    "must match the ManagedClusterSetBinding's name",
                ));
            }
        }
        "ManifestWork" => errs.extend(manifest_rules(obj)),
        "ManifestWorkReplicaSet" => errs.extend(replica_set_rules(obj)),
        "Policy" => errs.extend(crate::machinery::policy::policy_rules(obj)),
        _ => {}
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hub serves ManagedServiceAccount at its storage version only (the deprecated v1alpha1
    /// has no conversion), with status as a subresource; a managed cluster does not serve it.
    #[test]
    fn managed_service_accounts_are_served_by_the_hub_only() {
        use crate::machinery::scheme::Profile;
        let msa =
            |profile| ocm_types(profile).into_iter().find(|rt| rt.kind == "ManagedServiceAccount");
        let rt = msa(Profile::Hub).expect("the hub serves ManagedServiceAccount");
        assert_eq!(rt.group, ocm_proto::api::authentication::GROUP);
        assert_eq!(
            (rt.plural.as_str(), rt.singular.as_str()),
            ("managedserviceaccounts", "managedserviceaccount")
        );
        assert_eq!(rt.versions, ["v1beta1"]);
        assert_eq!(rt.storage_version, "v1beta1");
        assert!(rt.namespaced && rt.has_status());
        // The CRD's defaults apply on write.
        let mut obj = serde_json::json!({"spec": {"rotation": {}}});
        rt.strategy.default(&mut obj);
        assert_eq!(
            obj["spec"]["rotation"],
            serde_json::json!({"enabled": true, "validity": "8640h0m0s"})
        );
        assert!(msa(Profile::Cluster).is_none());
    }

    /// The hub serves SIG-multicluster's ClusterProfile at v1alpha1, namespaced, with status as
    /// a subresource and its CRD's schema; a managed cluster does not serve it.
    #[test]
    fn cluster_profiles_are_served_by_the_hub_only() {
        use crate::machinery::scheme::Profile;
        let profile =
            |profile| ocm_types(profile).into_iter().find(|rt| rt.kind == "ClusterProfile");
        let rt = profile(Profile::Hub).expect("the hub serves ClusterProfile");
        assert_eq!(rt.group, ocm_proto::api::multicluster::GROUP);
        assert_eq!(
            (rt.plural.as_str(), rt.singular.as_str()),
            ("clusterprofiles", "clusterprofile")
        );
        assert_eq!(rt.versions, ["v1alpha1"]);
        assert!(rt.namespaced && rt.has_status());
        // `spec.clusterManager` is required.
        let errs = rt.strategy.validate(&serde_json::json!({"spec": {}})).expect("validates");
        assert!(errs.iter().any(|e| e.field.contains("clusterManager")), "{errs:?}");
        assert!(profile(Profile::Cluster).is_none());
    }

    /// The limit holds to the byte: manifests serializing to exactly 500 KiB pass, one byte more
    /// (an escaped quote counts two) fails.
    #[test]
    fn the_manifest_limit_is_exact() {
        let work = |fill: usize| {
            let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a"}, "data": {"k": "\""}});
            let overhead = serde_json::to_vec(&serde_json::json!([cm])).unwrap().len();
            let mut cm = cm;
            cm["data"]["k"] = Value::String(format!("\"{}", "x".repeat(fill - overhead)));
            serde_json::json!({"spec": {"workload": {"manifests": [cm]}}})
        };
        let size =
            |w: &Value| serde_json::to_vec(&w["spec"]["workload"]["manifests"]).unwrap().len();
        let at_limit = work(MAX_MANIFESTS_BYTES);
        assert_eq!(size(&at_limit), MAX_MANIFESTS_BYTES);
        assert!(manifest_rules(&at_limit).is_empty());
        let over = work(MAX_MANIFESTS_BYTES + 1);
        assert_eq!(size(&over), MAX_MANIFESTS_BYTES + 1);
        let errs = manifest_rules(&over);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].detail.contains("512001 bytes"), "{errs:?}");
    }
}
