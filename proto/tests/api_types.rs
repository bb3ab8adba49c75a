//! Tests of the typed OCM API objects (`ocm_proto::api`) against the copied CRDs: every kind at
//! every version the hub serves round-trips a fully populated example (`tests/golden/*.json`) whose
//! property paths match the CRD schema in both directions, minimal objects stay minimal, the
//! `Resource` constants agree with the CRDs, and the addon conversions round-trip.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ocm_proto::api::addon::{self, v1alpha1 as addon_v1alpha1, v1beta1 as addon_v1beta1};
use ocm_proto::api::authentication::v1beta1 as authentication_v1beta1;
use ocm_proto::api::cluster::{v1 as cluster_v1, v1alpha1 as cluster_v1alpha1};
use ocm_proto::api::cluster::{v1beta1 as cluster_v1beta1, v1beta2 as cluster_v1beta2};
use ocm_proto::api::multicluster::v1alpha1 as multicluster_v1alpha1;
use ocm_proto::api::policy::{v1 as policy_v1, v1beta1 as policy_v1beta1};
use ocm_proto::api::work::{v1 as work_v1, v1alpha1 as work_v1alpha1};
use ocm_proto::api::{ObjectList, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

// ---- helpers --------------------------------------------------------------------------------

fn crd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crds")
}

/// The CRD (as JSON) that defines `T`: the file named `*_<plural>.crd.yaml` whose group is
/// `T::GROUP`.
fn crd_of<T: Resource>() -> Value {
    let suffix = format!("_{}.crd.yaml", T::PLURAL);
    for entry in std::fs::read_dir(crd_dir()).expect("crds dir") {
        let path = entry.expect("dir entry").path();
        if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(&suffix)) {
            let text = std::fs::read_to_string(&path).expect("read crd");
            let crd: Value = serde_saphyr::from_str(&text).expect("parse crd yaml");
            assert_eq!(crd["spec"]["group"], T::GROUP, "{}", path.display());
            return crd;
        }
    }
    panic!("no CRD for {}", T::PLURAL)
}

/// The `spec.versions[]` entry of `T::VERSION`.
fn crd_version<T: Resource>(crd: &Value) -> Value {
    crd["spec"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .find(|v| v["name"] == T::VERSION)
        .unwrap_or_else(|| panic!("{} has no version {}", T::KIND, T::VERSION))
        .clone()
}

/// Schema property paths (`.spec.taints[].key`) and the paths below which anything goes
/// (metadata, preserve-unknown-fields, additionalProperties maps).
#[derive(Default)]
struct SchemaPaths {
    known: BTreeSet<String>,
    opaque: BTreeSet<String>,
}

fn walk_schema(schema: &Value, path: &str, out: &mut SchemaPaths) {
    if schema["x-kubernetes-preserve-unknown-fields"] == true
        || schema["additionalProperties"].is_object()
    {
        out.opaque.insert(path.to_owned());
        return;
    }
    if let Some(props) = schema["properties"].as_object() {
        for (name, sub) in props {
            let p = format!("{path}.{name}");
            out.known.insert(p.clone());
            if p == ".metadata" {
                out.opaque.insert(p);
                continue;
            }
            walk_schema(sub, &p, out);
        }
    }
    if schema["items"].is_object() {
        let p = format!("{path}[]");
        out.known.insert(p.clone());
        walk_schema(&schema["items"], &p, out);
    }
}

fn schema_paths<T: Resource>() -> SchemaPaths {
    let crd = crd_of::<T>();
    let version = crd_version::<T>(&crd);
    let mut out = SchemaPaths::default();
    walk_schema(&version["schema"]["openAPIV3Schema"], "", &mut out);
    out
}

fn value_paths(value: &Value, path: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let p = format!("{path}.{k}");
                out.insert(p.clone());
                value_paths(v, &p, out);
            }
        }
        Value::Array(items) => {
            let p = format!("{path}[]");
            out.insert(p.clone());
            for item in items {
                value_paths(item, &p, out);
            }
        }
        _ => {}
    }
}

fn under_opaque(path: &str, opaque: &BTreeSet<String>) -> bool {
    opaque.iter().any(|o| {
        path.len() > o.len()
            && path.starts_with(o.as_str())
            && matches!(path.as_bytes()[o.len()], b'.' | b'[')
    })
}

fn golden(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("golden json")
}

fn to_value<T: Serialize>(object: &T) -> Value {
    serde_json::to_value(object).expect("serialize")
}

fn from_value<T: DeserializeOwned>(value: &Value) -> T {
    serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("deserialize: {e}"))
}

/// The full check of one kind/version: the golden example deserializes, re-serializes to the
/// same JSON, covers every schema property and uses no property the schema lacks.
fn check_kind<T: Resource + Serialize + DeserializeOwned>(golden_name: &str) {
    check_examples::<T>(&[golden_name]);
}

/// [`check_kind`] over several examples whose property paths together cover the schema (a
/// kind whose schema says `oneOf` cannot show every property in one object).
fn check_examples<T: Resource + Serialize + DeserializeOwned>(golden_names: &[&str]) {
    let mut seen = BTreeSet::new();
    for golden_name in golden_names {
        let expected = golden(golden_name);
        assert_eq!(expected["apiVersion"], T::API_VERSION, "{golden_name}");
        assert_eq!(expected["kind"], T::KIND, "{golden_name}");
        let typed: T = from_value(&expected);
        let actual = to_value(&typed);
        assert_eq!(actual, expected, "{golden_name}: round trip changed the object");
        value_paths(&actual, "", &mut seen);
    }
    let golden_name = golden_names.join(", ");
    let schema = schema_paths::<T>();
    let missing: Vec<_> = schema
        .known
        .iter()
        .filter(|p| !under_opaque(p, &schema.opaque) && !seen.contains(*p))
        .collect();
    assert!(
        missing.is_empty(),
        "{golden_name}: schema properties not in the example: {missing:#?}"
    );
    let unknown: Vec<_> = seen
        .iter()
        .filter(|p| !schema.known.contains(*p) && !under_opaque(p, &schema.opaque))
        .collect();
    assert!(
        unknown.is_empty(),
        "{golden_name}: example properties not in the schema: {unknown:#?}"
    );
}

/// A minimal object (only what the schema requires) reads and writes back unchanged.
fn check_minimal<T: Serialize + DeserializeOwned>(minimal: Value) {
    let typed: T = from_value(&minimal);
    assert_eq!(to_value(&typed), minimal);
}

/// The `Resource` constants agree with the CRD.
fn check_resource<T: Resource>() {
    let crd = crd_of::<T>();
    let names = &crd["spec"]["names"];
    assert_eq!(names["kind"], T::KIND);
    assert_eq!(names["listKind"], T::LIST_KIND);
    assert_eq!(names["plural"], T::PLURAL);
    assert_eq!(names["singular"], T::SINGULAR);
    let short: Vec<&str> = names["shortNames"]
        .as_array()
        .map(|a| a.iter().map(|s| s.as_str().expect("short name")).collect())
        .unwrap_or_default();
    assert_eq!(short, T::SHORT_NAMES, "{}", T::KIND);
    assert_eq!(crd["spec"]["scope"] == "Namespaced", T::NAMESPACED, "{}", T::KIND);
    let version = crd_version::<T>(&crd);
    assert_eq!(version["served"], true);
    assert_eq!(version["storage"] == true, T::STORAGE_VERSION, "{}", T::KIND);
    assert_eq!(version["subresources"]["status"].is_object(), T::STATUS_SUBRESOURCE, "{}", T::KIND);
    assert_eq!(T::API_VERSION, format!("{}/{}", T::GROUP, T::VERSION));
}

/// Versions a CRD serves that the hub does not: a kind's non-storage version is served only
/// when the hub converts between it and the storage version, and ManagedServiceAccount's
/// deprecated v1alpha1 has no conversion.
const NOT_SERVED_BY_THE_HUB: &[(&str, &str)] = &[("ManagedServiceAccount", "v1alpha1")];

/// Every version every CRD serves and the hub serves too, as `(kind, version)`.
fn served_versions() -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(crd_dir()).expect("crds dir") {
        let text = std::fs::read_to_string(entry.expect("entry").path()).expect("read");
        let crd: Value = serde_saphyr::from_str(&text).expect("yaml");
        for v in crd["spec"]["versions"].as_array().expect("versions") {
            let kind = crd["spec"]["names"]["kind"].as_str().expect("kind");
            let version = v["name"].as_str().expect("name");
            if v["served"] == true && !NOT_SERVED_BY_THE_HUB.contains(&(kind, version)) {
                out.insert((kind.to_owned(), version.to_owned()));
            }
        }
    }
    out
}

macro_rules! all_kinds {
    ($m:ident) => {
        $m!(cluster_v1::ManagedCluster, "managedcluster.v1.json");
        $m!(cluster_v1beta2::ManagedClusterSet, "managedclusterset.v1beta2.json");
        $m!(cluster_v1beta2::ManagedClusterSetBinding, "managedclustersetbinding.v1beta2.json");
        $m!(cluster_v1beta1::Placement, "placement.v1beta1.json");
        $m!(cluster_v1beta1::PlacementDecision, "placementdecision.v1beta1.json");
        $m!(cluster_v1alpha1::AddOnPlacementScore, "addonplacementscore.v1alpha1.json");
        $m!(cluster_v1alpha1::ClusterClaim, "clusterclaim.v1alpha1.json");
        $m!(work_v1::ManifestWork, "manifestwork.v1.json");
        $m!(work_v1::AppliedManifestWork, "appliedmanifestwork.v1.json");
        $m!(work_v1alpha1::ManifestWorkReplicaSet, "manifestworkreplicaset.v1alpha1.json");
        $m!(addon_v1alpha1::ClusterManagementAddOn, "clustermanagementaddon.v1alpha1.json");
        $m!(addon_v1beta1::ClusterManagementAddOn, "clustermanagementaddon.v1beta1.json");
        $m!(addon_v1alpha1::ManagedClusterAddOn, "managedclusteraddon.v1alpha1.json");
        $m!(addon_v1beta1::ManagedClusterAddOn, "managedclusteraddon.v1beta1.json");
        $m!(addon_v1alpha1::AddOnDeploymentConfig, "addondeploymentconfig.v1alpha1.json");
        $m!(addon_v1beta1::AddOnDeploymentConfig, "addondeploymentconfig.v1beta1.json");
        $m!(addon_v1alpha1::AddOnTemplate, "addontemplate.v1alpha1.json");
        $m!(authentication_v1beta1::ManagedServiceAccount, "managedserviceaccount.v1beta1.json");
        $m!(policy_v1::Policy, "policy.v1.json");
        $m!(policy_v1::PlacementBinding, "placementbinding.v1.json");
        $m!(policy_v1::ConfigurationPolicy, "configurationpolicy.v1.json");
        $m!(policy_v1beta1::PolicySet, "policyset.v1beta1.json");
        $m!(multicluster_v1alpha1::ClusterProfile, "clusterprofile.v1alpha1.json");
    };
}

// ---- full examples and schema coverage ------------------------------------------------------

#[test]
fn cluster_kinds_round_trip_and_cover_their_schemas() {
    check_kind::<cluster_v1::ManagedCluster>("managedcluster.v1.json");
    check_kind::<cluster_v1beta2::ManagedClusterSet>("managedclusterset.v1beta2.json");
    check_kind::<cluster_v1beta2::ManagedClusterSetBinding>(
        "managedclustersetbinding.v1beta2.json",
    );
    check_kind::<cluster_v1beta1::Placement>("placement.v1beta1.json");
    check_kind::<cluster_v1beta1::PlacementDecision>("placementdecision.v1beta1.json");
    check_kind::<cluster_v1alpha1::AddOnPlacementScore>("addonplacementscore.v1alpha1.json");
    check_kind::<cluster_v1alpha1::ClusterClaim>("clusterclaim.v1alpha1.json");
}

#[test]
fn work_kinds_round_trip_and_cover_their_schemas() {
    check_kind::<work_v1::ManifestWork>("manifestwork.v1.json");
    check_kind::<work_v1::AppliedManifestWork>("appliedmanifestwork.v1.json");
    check_kind::<work_v1alpha1::ManifestWorkReplicaSet>("manifestworkreplicaset.v1alpha1.json");
}

#[test]
fn addon_kinds_round_trip_and_cover_their_schemas() {
    check_kind::<addon_v1alpha1::ClusterManagementAddOn>("clustermanagementaddon.v1alpha1.json");
    check_kind::<addon_v1beta1::ClusterManagementAddOn>("clustermanagementaddon.v1beta1.json");
    check_kind::<addon_v1alpha1::ManagedClusterAddOn>("managedclusteraddon.v1alpha1.json");
    check_kind::<addon_v1beta1::ManagedClusterAddOn>("managedclusteraddon.v1beta1.json");
    check_kind::<addon_v1alpha1::AddOnDeploymentConfig>("addondeploymentconfig.v1alpha1.json");
    check_kind::<addon_v1beta1::AddOnDeploymentConfig>("addondeploymentconfig.v1beta1.json");
    check_kind::<addon_v1alpha1::AddOnTemplate>("addontemplate.v1alpha1.json");
}

#[test]
fn authentication_kinds_round_trip_and_cover_their_schemas() {
    check_kind::<authentication_v1beta1::ManagedServiceAccount>(
        "managedserviceaccount.v1beta1.json",
    );
}

#[test]
fn policy_kinds_round_trip_and_cover_their_schemas() {
    check_kind::<policy_v1::Policy>("policy.v1.json");
    check_kind::<policy_v1::PlacementBinding>("placementbinding.v1.json");
    // `object-templates` and `object-templates-raw` are one of: one example each.
    check_examples::<policy_v1::ConfigurationPolicy>(&[
        "configurationpolicy.v1.json",
        "configurationpolicy-raw.v1.json",
    ]);
    check_kind::<policy_v1beta1::PolicySet>("policyset.v1beta1.json");
}

#[test]
fn multicluster_kinds_round_trip_and_cover_their_schemas() {
    check_kind::<multicluster_v1alpha1::ClusterProfile>("clusterprofile.v1alpha1.json");
}

#[test]
fn resource_constants_match_the_crds() {
    macro_rules! resource_only {
        ($ty:ty, $golden:literal) => {
            check_resource::<$ty>();
        };
    }
    all_kinds!(resource_only);
}

#[test]
fn every_served_version_has_a_type() {
    let mut typed = BTreeSet::new();
    macro_rules! collect {
        ($ty:ty, $golden:literal) => {
            typed.insert((<$ty>::KIND.to_owned(), <$ty>::VERSION.to_owned()));
        };
    }
    all_kinds!(collect);
    assert_eq!(typed, served_versions());
}

// ---- JSON oddities --------------------------------------------------------------------------

#[test]
fn odd_json_keys_are_reproduced() {
    let mw = to_value(&from_value::<work_v1::ManifestWork>(&golden("manifestwork.v1.json")));
    assert!(mw["spec"]["deleteOption"]["selectivelyOrphans"]["orphaningRules"].is_array());
    let feedback = &mw["status"]["resourceStatus"]["manifests"][0]["statusFeedback"];
    assert_eq!(feedback["values"][0]["fieldValue"]["integer"], 2);

    let p = to_value(&from_value::<cluster_v1beta1::Placement>(&golden("placement.v1beta1.json")));
    assert_eq!(p["status"]["decisionGroups"][1]["clusterCount"], 2);

    let mwrs: work_v1alpha1::ManifestWorkReplicaSet =
        from_value(&golden("manifestworkreplicaset.v1alpha1.json"));
    assert_eq!(mwrs.status.as_ref().unwrap().placement_summary.len(), 1);
    assert!(to_value(&mwrs)["status"]["placementSummary"].is_array());

    let a: addon_v1alpha1::ClusterManagementAddOn =
        from_value(&golden("clustermanagementaddon.v1alpha1.json"));
    assert!(to_value(&a)["status"]["defaultconfigReferences"].is_array());
    let b: addon_v1beta1::ClusterManagementAddOn = a.into();
    assert!(to_value(&b)["status"]["defaultConfigReferences"].is_array());

    let a: addon_v1alpha1::ManagedClusterAddOn =
        from_value(&golden("managedclusteraddon.v1alpha1.json"));
    let a_json = to_value(&a);
    assert_eq!(a_json["status"]["registrations"][1]["subject"]["organizationUnit"][0], "ou1");
    let b: addon_v1beta1::ManagedClusterAddOn = a.into();
    let b_json = to_value(&b);
    assert_eq!(
        b_json["status"]["registrations"][1]["customSigner"]["subject"]["organizationUnits"][1],
        "ou2"
    );

    let amw = json!({"spec": {"hubHash": "h", "agentID": "a", "manifestWorkName": "w"}});
    let amw: work_v1::AppliedManifestWork = from_value(&amw);
    assert_eq!(amw.spec.unwrap().agent_id.as_deref(), Some("a"));
}

// ---- minimal objects ------------------------------------------------------------------------

#[test]
fn minimal_objects_have_no_spurious_fields() {
    check_minimal::<cluster_v1::ManagedCluster>(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "c1"}
    }));
    check_minimal::<cluster_v1::ManagedCluster>(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
        "metadata": {"name": "c1"}, "spec": {"taints": [{"key": "k", "effect": "NoSelect"}]},
        "status": {}
    }));
    check_minimal::<cluster_v1beta2::ManagedClusterSet>(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
        "metadata": {"name": "s"}, "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}}
    }));
    check_minimal::<cluster_v1beta2::ManagedClusterSetBinding>(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSetBinding", "metadata": {"name": "s", "namespace": "n"},
        "spec": {"clusterSet": "s"}
    }));
    check_minimal::<cluster_v1beta1::Placement>(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "p", "namespace": "n"}, "spec": {}
    }));
    check_minimal::<cluster_v1beta1::Placement>(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {
            "prioritizerPolicy": {"configurations": [{"scoreCoordinate": {"type": "BuiltIn"}}]},
            "decisionStrategy": {"groupStrategy": {"decisionGroups": [
                {"groupName": "g", "groupClusterSelector": {}}]}}
        }
    }));
    check_minimal::<cluster_v1beta1::PlacementDecision>(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
        "metadata": {"name": "p-decision-1", "namespace": "n"}, "status": {"decisions": []}
    }));
    check_minimal::<cluster_v1alpha1::AddOnPlacementScore>(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
        "metadata": {"name": "s", "namespace": "c1"}, "status": {"scores": [{"name": "a", "value": 0}]}
    }));
    check_minimal::<cluster_v1alpha1::ClusterClaim>(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "ClusterClaim",
        "metadata": {"name": "id.k8s.io"}
    }));
    check_minimal::<work_v1::ManifestWork>(json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "w", "namespace": "c1"},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}]}}
    }));
    check_minimal::<work_v1::ManifestWork>(json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "w", "namespace": "c1"},
        "spec": {"manifestConfigs": [{
            "resourceIdentifier": {"resource": "namespaces", "name": "x"},
            "updateStrategy": {"type": "ServerSideApply", "serverSideApply": {
                "ignoreFields": [{"condition": "OnSpokePresent"}]}}}]},
        "status": {"resourceStatus": {"manifests": [
            {"resourceMeta": {"ordinal": 0}, "conditions": []}]}}
    }));
    check_minimal::<work_v1::AppliedManifestWork>(json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "AppliedManifestWork",
        "metadata": {"name": "h-w"}, "spec": {"hubHash": "h", "manifestWorkName": "w"},
        "status": {"appliedResources": [{"resource": "namespaces", "name": "x", "version": "v1"}]}
    }));
    check_minimal::<work_v1alpha1::ManifestWorkReplicaSet>(json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "m", "namespace": "n"},
        "spec": {"placementRefs": [{"name": "p"}], "cascadeDeletionPolicy": "Background"}
    }));
    for version in ["v1alpha1", "v1beta1"] {
        let api_version = format!("addon.open-cluster-management.io/{version}");
        let cma = json!({"apiVersion": api_version, "kind": "ClusterManagementAddOn",
            "metadata": {"name": "a"}, "spec": {}});
        let mca = json!({"apiVersion": api_version, "kind": "ManagedClusterAddOn",
            "metadata": {"name": "a", "namespace": "c1"}, "spec": {}});
        let adc = json!({"apiVersion": api_version, "kind": "AddOnDeploymentConfig",
            "metadata": {"name": "a", "namespace": "n"}, "spec": {}});
        if version == "v1alpha1" {
            check_minimal::<addon_v1alpha1::ClusterManagementAddOn>(cma);
            check_minimal::<addon_v1alpha1::ManagedClusterAddOn>(mca);
            check_minimal::<addon_v1alpha1::AddOnDeploymentConfig>(adc);
        } else {
            check_minimal::<addon_v1beta1::ClusterManagementAddOn>(cma);
            check_minimal::<addon_v1beta1::ManagedClusterAddOn>(mca);
            check_minimal::<addon_v1beta1::AddOnDeploymentConfig>(adc);
        }
    }
    check_minimal::<addon_v1alpha1::AddOnTemplate>(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnTemplate",
        "metadata": {"name": "t"}, "spec": {"addonName": "a", "agentSpec": {}}
    }));
    check_minimal::<authentication_v1beta1::ManagedServiceAccount>(json!({
        "apiVersion": "authentication.open-cluster-management.io/v1beta1",
        "kind": "ManagedServiceAccount", "metadata": {"name": "m", "namespace": "c1"},
        "spec": {"rotation": {}}
    }));
    check_minimal::<multicluster_v1alpha1::ClusterProfile>(json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": {"name": "c1", "namespace": "apps"},
        "spec": {"clusterManager": {"name": "open-cluster-management"}}
    }));
}

#[test]
fn default_objects_serialize_to_type_meta_and_metadata_only() {
    let mc = cluster_v1::ManagedCluster::default();
    assert_eq!(
        to_value(&mc),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
               "metadata": {}})
    );
    let p = cluster_v1beta1::Placement::default();
    assert_eq!(
        to_value(&p),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
               "metadata": {}, "spec": {}})
    );
    // Required fields the server defaults take that default.
    let mwrs = work_v1alpha1::ManifestWorkReplicaSetSpec::default();
    assert_eq!(
        to_value(&mwrs),
        json!({"placementRefs": [], "cascadeDeletionPolicy": "Background"})
    );
    assert_eq!(work_v1::UpdateStrategy::default().type_, work_v1::UPDATE_STRATEGY_UPDATE);
    assert_eq!(work_v1::IgnoreField::default().condition, work_v1::IGNORE_FIELDS_ON_SPOKE_PRESENT);
    assert_eq!(
        cluster_v1beta2::ManagedClusterSelector::default().selector_type,
        cluster_v1beta2::SELECTOR_TYPE_EXCLUSIVE_CLUSTER_SET_LABEL
    );
    assert_eq!(
        cluster_v1beta1::ScoreCoordinate::default().type_,
        cluster_v1beta1::SCORE_COORDINATE_TYPE_BUILT_IN
    );
}

// ---- input leniency and strictness ----------------------------------------------------------

#[test]
fn type_meta_is_optional_on_input_but_must_match_when_present() {
    let mc: cluster_v1::ManagedCluster = from_value(&json!({"metadata": {"name": "c1"}}));
    assert_eq!(to_value(&mc)["apiVersion"], "cluster.open-cluster-management.io/v1");
    assert_eq!(mc.kind.as_str(), "ManagedCluster");

    let wrong_version = json!({"apiVersion": "addon.open-cluster-management.io/v1beta1",
        "kind": "ClusterManagementAddOn", "metadata": {}, "spec": {}});
    let err = serde_json::from_value::<addon_v1alpha1::ClusterManagementAddOn>(wrong_version)
        .expect_err("v1beta1 body read as v1alpha1");
    assert!(err.to_string().contains("apiVersion"), "{err}");

    let wrong_kind = json!({"apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedClusterSet", "metadata": {}});
    assert!(serde_json::from_value::<cluster_v1::ManagedCluster>(wrong_kind).is_err());
}

#[test]
fn nulls_and_unknown_fields_are_accepted() {
    let mc: cluster_v1::ManagedCluster = from_value(&json!({
        "metadata": {"name": "c1"},
        "spec": {"hubAcceptsClient": false, "managedClusterClientConfigs": null,
                 "taints": [{"key": "k", "effect": "NoSelect", "timeAdded": null}],
                 "fromTheFuture": {"x": 1}},
        "status": {"conditions": null, "capacity": null, "version": {}}
    }));
    let spec = mc.spec.as_ref().unwrap();
    assert_eq!(spec.hub_accepts_client, Some(false));
    assert_eq!(spec.taints[0].time_added, None);
    assert_eq!(
        to_value(&mc),
        json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
               "metadata": {"name": "c1"},
               "spec": {"hubAcceptsClient": false, "taints": [{"key": "k", "effect": "NoSelect"}]},
               "status": {"version": {}}})
    );
}

#[test]
fn required_fields_with_server_defaults_read_the_default_when_missing() {
    let set: cluster_v1beta2::ManagedClusterSet =
        from_value(&json!({"spec": {"clusterSelector": {}}}));
    assert_eq!(
        set.spec.unwrap().cluster_selector.unwrap().selector_type,
        cluster_v1beta2::SELECTOR_TYPE_EXCLUSIVE_CLUSTER_SET_LABEL
    );
    let mwrs: work_v1alpha1::ManifestWorkReplicaSet =
        from_value(&json!({"spec": {"placementRefs": [{"name": "p"}]}}));
    assert_eq!(
        mwrs.spec.unwrap().cascade_deletion_policy,
        work_v1alpha1::CASCADE_DELETION_BACKGROUND
    );
    let strategy: work_v1::UpdateStrategy = from_value(&json!({}));
    assert_eq!(strategy.type_, work_v1::UPDATE_STRATEGY_UPDATE);
    let coordinate: cluster_v1beta1::ScoreCoordinate = from_value(&json!({"builtIn": "Steady"}));
    assert_eq!(coordinate.type_, cluster_v1beta1::SCORE_COORDINATE_TYPE_BUILT_IN);
}

#[test]
fn required_fields_are_required() {
    let no_spec = json!({"metadata": {"name": "p"}});
    assert!(serde_json::from_value::<cluster_v1beta1::Placement>(no_spec).is_err());
    let no_effect = json!({"spec": {"taints": [{"key": "k"}]}});
    assert!(serde_json::from_value::<cluster_v1::ManagedCluster>(no_effect).is_err());
    let no_decisions = json!({"status": {}});
    assert!(serde_json::from_value::<cluster_v1beta1::PlacementDecision>(no_decisions).is_err());
    let no_rotation = json!({"spec": {"ttlSecondsAfterCreation": 60}});
    assert!(
        serde_json::from_value::<authentication_v1beta1::ManagedServiceAccount>(no_rotation)
            .is_err()
    );
}

#[test]
fn manifests_are_kept_verbatim() {
    let mw: work_v1::ManifestWork = from_value(&golden("manifestwork.v1.json"));
    let manifests = &mw.spec.as_ref().unwrap().workload.as_ref().unwrap().manifests;
    assert_eq!(manifests[0].0["spec"]["x-unknown"], json!([1, null, {"a": true}]));
}

#[test]
fn object_list_round_trips() {
    let mc: cluster_v1::ManagedCluster = from_value(&golden("managedcluster.v1.json"));
    let list = ObjectList {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta {
            resource_version: Some("7".into()),
            ..Default::default()
        },
        items: vec![mc.clone(), mc],
    };
    let value = to_value(&list);
    assert_eq!(value["apiVersion"], "cluster.open-cluster-management.io/v1");
    assert_eq!(value["kind"], "ManagedClusterList");
    assert_eq!(value["metadata"]["resourceVersion"], "7");
    let back: ObjectList<cluster_v1::ManagedCluster> = from_value(&value);
    assert_eq!(back, list);
    let empty: ObjectList<cluster_v1::ManagedCluster> =
        from_value(&json!({"kind": "ManagedClusterList", "items": null}));
    assert!(empty.items.is_empty());
}

// ---- addon conversions ----------------------------------------------------------------------

/// The v1alpha1 golden without the fields v1beta1 cannot carry.
fn cma_v1alpha1_lossless() -> addon_v1alpha1::ClusterManagementAddOn {
    let mut cma: addon_v1alpha1::ClusterManagementAddOn =
        from_value(&golden("clustermanagementaddon.v1alpha1.json"));
    cma.spec.add_on_configuration = None;
    cma
}

fn mca_v1alpha1_lossless() -> addon_v1alpha1::ManagedClusterAddOn {
    let mut mca: addon_v1alpha1::ManagedClusterAddOn =
        from_value(&golden("managedclusteraddon.v1alpha1.json"));
    mca.status.as_mut().unwrap().add_on_configuration = None;
    mca
}

#[test]
fn cluster_management_addon_converts_both_ways() {
    let alpha = cma_v1alpha1_lossless();
    let beta_golden: addon_v1beta1::ClusterManagementAddOn =
        from_value(&golden("clustermanagementaddon.v1beta1.json"));

    let beta: addon_v1beta1::ClusterManagementAddOn = alpha.clone().into();
    assert_eq!(to_value(&beta), to_value(&beta_golden));
    let back: addon_v1alpha1::ClusterManagementAddOn = beta.into();
    assert_eq!(to_value(&back), to_value(&alpha));

    let alpha_again: addon_v1alpha1::ClusterManagementAddOn = beta_golden.clone().into();
    let beta_again: addon_v1beta1::ClusterManagementAddOn = alpha_again.into();
    assert_eq!(beta_again, beta_golden);
}

#[test]
fn cluster_management_addon_conversion_drops_add_on_configuration() {
    let full: addon_v1alpha1::ClusterManagementAddOn =
        from_value(&golden("clustermanagementaddon.v1alpha1.json"));
    assert!(full.spec.add_on_configuration.is_some());
    let beta: addon_v1beta1::ClusterManagementAddOn = full.into();
    let back: addon_v1alpha1::ClusterManagementAddOn = beta.into();
    assert_eq!(back, cma_v1alpha1_lossless());
}

#[test]
fn supported_config_without_default_uses_the_reserved_name() {
    let alpha = cma_v1alpha1_lossless();
    assert!(alpha.spec.supported_configs[1].default_config.is_none());
    let beta: addon_v1beta1::ClusterManagementAddOn = alpha.into();
    assert_eq!(beta.spec.default_configs[1].name, addon::RESERVED_NO_DEFAULT_CONFIG_NAME);
    assert_eq!(beta.spec.default_configs[1].namespace, None);
}

#[test]
fn managed_cluster_addon_converts_both_ways() {
    let alpha = mca_v1alpha1_lossless();
    let beta_golden: addon_v1beta1::ManagedClusterAddOn =
        from_value(&golden("managedclusteraddon.v1beta1.json"));

    let beta: addon_v1beta1::ManagedClusterAddOn = alpha.clone().into();
    assert_eq!(to_value(&beta), to_value(&beta_golden));
    let back: addon_v1alpha1::ManagedClusterAddOn = beta.into();
    assert_eq!(to_value(&back), to_value(&alpha));

    let alpha_again: addon_v1alpha1::ManagedClusterAddOn = beta_golden.clone().into();
    assert_eq!(
        alpha_again.spec.install_namespace.as_deref(),
        Some(addon::DEFAULT_INSTALL_NAMESPACE)
    );
    assert_eq!(alpha_again.metadata.annotations, None);
    let beta_again: addon_v1beta1::ManagedClusterAddOn = alpha_again.into();
    assert_eq!(beta_again, beta_golden);
}

#[test]
fn managed_cluster_addon_conversion_edge_cases() {
    // No kubeClientDriver: kubeClient registrations get "csr", which comes back explicitly.
    let alpha: addon_v1alpha1::ManagedClusterAddOn = from_value(&json!({
        "metadata": {"name": "a", "namespace": "c1", "annotations": {"keep": "me"}},
        "spec": {},
        "status": {
            "registrations": [{"signerName": "kubernetes.io/kube-apiserver-client"}],
            "configReferences": [{"resource": "addondeploymentconfigs", "namespace": "c1", "name": "cfg"}]
        }
    }));
    let beta: addon_v1beta1::ManagedClusterAddOn = alpha.into();
    let beta_json = to_value(&beta);
    assert_eq!(
        beta_json["status"]["registrations"],
        json!([{"type": "kubeClient", "kubeClient": {"driver": "csr"}}])
    );
    // The inline (deprecated) name becomes desiredConfig when that is missing.
    assert_eq!(
        beta_json["status"]["configReferences"],
        json!([{"resource": "addondeploymentconfigs",
                "desiredConfig": {"namespace": "c1", "name": "cfg"}}])
    );
    assert_eq!(beta_json["metadata"]["annotations"], json!({"keep": "me"}));
    let back: addon_v1alpha1::ManagedClusterAddOn = beta.into();
    let back_json = to_value(&back);
    assert_eq!(back_json["status"]["kubeClientDriver"], "csr");
    assert_eq!(back_json["metadata"]["annotations"], json!({"keep": "me"}));
    assert_eq!(
        back_json["status"]["configReferences"][0]["desiredConfig"],
        json!({"namespace": "c1", "name": "cfg"})
    );

    // A kubeClient registration loses organization units (v1beta1 has no place for them).
    let alpha: addon_v1alpha1::ManagedClusterAddOn = from_value(&json!({
        "spec": {},
        "status": {"registrations": [{"signerName": "kubernetes.io/kube-apiserver-client",
            "subject": {"user": "u", "organizationUnit": ["x"]}}]}
    }));
    let beta: addon_v1beta1::ManagedClusterAddOn = alpha.into();
    let back: addon_v1alpha1::ManagedClusterAddOn = beta.into();
    assert_eq!(
        to_value(&back)["status"]["registrations"],
        json!([{"signerName": "kubernetes.io/kube-apiserver-client", "subject": {"user": "u"}}])
    );
}

#[test]
fn addon_deployment_config_converts_losslessly() {
    let alpha: addon_v1alpha1::AddOnDeploymentConfig =
        from_value(&golden("addondeploymentconfig.v1alpha1.json"));
    let beta_golden: addon_v1beta1::AddOnDeploymentConfig =
        from_value(&golden("addondeploymentconfig.v1beta1.json"));
    let beta: addon_v1beta1::AddOnDeploymentConfig = alpha.clone().into();
    assert_eq!(beta, beta_golden);
    let back: addon_v1alpha1::AddOnDeploymentConfig = beta.into();
    assert_eq!(back, alpha);
}

mod conversion_props {
    use super::*;
    use proptest::prelude::*;

    fn opt_string() -> impl Strategy<Value = Option<String>> {
        proptest::option::of("[a-z]{1,6}")
    }

    fn subject() -> impl Strategy<Value = Option<addon_v1alpha1::Subject>> {
        proptest::option::of(
            (
                opt_string(),
                proptest::collection::vec("[a-z]{1,4}", 0..3),
                proptest::collection::vec("[a-z]{1,4}", 0..3),
            )
                .prop_map(|(user, groups, organization_units)| {
                    addon_v1alpha1::Subject { user, groups, organization_units }
                }),
        )
    }

    fn registration() -> impl Strategy<Value = addon_v1alpha1::RegistrationConfig> {
        (
            prop_oneof![
                Just(addon::KUBE_APISERVER_CLIENT_SIGNER_NAME.to_owned()),
                "[a-z]{1,5}\\.io/[a-z]{1,5}"
            ],
            subject(),
        )
            .prop_map(|(signer_name, mut subject)| {
                if signer_name == addon::KUBE_APISERVER_CLIENT_SIGNER_NAME {
                    // v1beta1 kubeClient subjects have no organization units.
                    if let Some(s) = subject.as_mut() {
                        s.organization_units.clear();
                    }
                }
                addon_v1alpha1::RegistrationConfig { signer_name, subject }
            })
    }

    proptest! {
        #[test]
        fn registrations_round_trip(
            registrations in proptest::collection::vec(registration(), 0..4),
            driver in prop_oneof![Just("csr"), Just("token")],
            install_namespace in opt_string(),
        ) {
            let has_kube_client = registrations
                .iter()
                .any(|r| r.signer_name == addon::KUBE_APISERVER_CLIENT_SIGNER_NAME);
            let alpha = addon_v1alpha1::ManagedClusterAddOn {
                spec: addon_v1alpha1::ManagedClusterAddOnSpec {
                    install_namespace,
                    configs: Vec::new(),
                },
                status: Some(addon_v1alpha1::ManagedClusterAddOnStatus {
                    registrations,
                    kube_client_driver: has_kube_client.then(|| driver.to_owned()),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let beta: addon_v1beta1::ManagedClusterAddOn = alpha.clone().into();
            let back: addon_v1alpha1::ManagedClusterAddOn = beta.into();
            prop_assert_eq!(back, alpha);
        }
    }
}
