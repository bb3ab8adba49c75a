//! Integration tests of the embedded OCM CRDs and of schema validation, defaulting and pruning
//! against realistic OCM objects.

use ocm_proto::crd::{self, Crd};
use ocm_proto::schema::{ListType, Schema, SchemaType};
use ocm_proto::validation::{FieldError, FieldErrorKind};
use proptest::prelude::*;
use serde_json::{Value, json};

const CLUSTER: &str = "cluster.open-cluster-management.io";
const WORK: &str = "work.open-cluster-management.io";
const ADDON: &str = "addon.open-cluster-management.io";
const AUTHENTICATION: &str = "authentication.open-cluster-management.io";
const POLICY: &str = "policy.open-cluster-management.io";
const MULTICLUSTER: &str = "multicluster.x-k8s.io";

fn crd(group: &str, plural: &str) -> &'static Crd {
    crd::find(group, plural).unwrap_or_else(|| panic!("no CRD {plural}.{group}"))
}

fn storage_schema(group: &str, plural: &str) -> &'static Schema {
    &crd(group, plural).storage_version().schema
}

fn rendered(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn managed_cluster() -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {
            "name": "cluster1",
            "labels": {"cloud": "Amazon", "cluster.open-cluster-management.io/clusterset": "dev"},
        },
        "spec": {
            "hubAcceptsClient": true,
            "leaseDurationSeconds": 60,
            "managedClusterClientConfigs": [
                {"url": "https://api.cluster1.example.com:6443", "caBundle": "LS0tLS1CRUdJTiBDRVJU"}
            ],
            "taints": [{
                "key": "cluster.open-cluster-management.io/unreachable",
                "effect": "NoSelect",
                "timeAdded": "2024-05-01T10:00:00Z",
            }],
        },
        "status": {
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": 110},
            "capacity": {"cpu": 8, "memory": "32Gi"},
            "clusterClaims": [{"name": "id.k8s.io", "value": "0b5c2e6a"}],
            "conditions": [
                {
                    "type": "HubAcceptedManagedCluster",
                    "status": "True",
                    "reason": "HubClusterAdminAccepted",
                    "message": "Accepted by hub cluster admin",
                    "lastTransitionTime": "2024-05-01T09:58:00Z",
                },
                {
                    "type": "ManagedClusterJoined",
                    "status": "True",
                    "reason": "ManagedClusterJoined",
                    "message": "Managed cluster joined",
                    "lastTransitionTime": "2024-05-01T09:59:00Z",
                    "observedGeneration": 1,
                },
                {
                    "type": "ManagedClusterConditionAvailable",
                    "status": "True",
                    "reason": "ManagedClusterAvailable",
                    "message": "Managed cluster is available",
                    "lastTransitionTime": "2024-05-01T10:00:00Z",
                },
            ],
            "version": {"kubernetes": "v1.30.2"},
        },
    })
}

fn manifest_work() -> Value {
    json!({
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": {"name": "hello-work", "namespace": "cluster1"},
        "spec": {
            "deleteOption": {"propagationPolicy": "Foreground"},
            "manifestConfigs": [{
                "resourceIdentifier": {
                    "group": "apps", "resource": "deployments",
                    "name": "hello", "namespace": "default",
                },
                "feedbackRules": [{
                    "type": "JSONPaths",
                    "jsonPaths": [{"name": "replicas", "path": ".spec.replicas"}],
                }],
                "updateStrategy": {"type": "ServerSideApply",
                                   "serverSideApply": {"force": true}},
            }],
            "workload": {"manifests": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "hello", "namespace": "default"},
                    "data": {"greeting": "hi"},
                },
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "metadata": {"name": "hello", "namespace": "default"},
                    "spec": {
                        "replicas": 2,
                        "selector": {"matchLabels": {"app": "hello"}},
                        "template": {
                            "metadata": {"labels": {"app": "hello"}},
                            "spec": {"containers": [{"name": "hello", "image": "busybox"}]},
                        },
                    },
                },
            ]},
        },
    })
}

fn placement() -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": "placement1", "namespace": "default"},
        "spec": {
            "clusterSets": ["dev", "prod"],
            "numberOfClusters": 3,
            "predicates": [{"requiredClusterSelector": {
                "labelSelector": {
                    "matchLabels": {"cloud": "Amazon"},
                    "matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}],
                },
                "claimSelector": {"matchExpressions": [
                    {"key": "region.open-cluster-management.io", "operator": "Exists"}
                ]},
            }}],
            "prioritizerPolicy": {"mode": "Exact", "configurations": [
                {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableCPU"},
                 "weight": 2},
                {"scoreCoordinate": {"type": "AddOn",
                                     "addOn": {"resourceName": "default", "scoreName": "cpu"}},
                 "weight": -1},
            ]},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSelect"}],
            "decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "25%"}},
            "spreadPolicy": {"spreadConstraints": [
                {"topologyKey": "cloud", "topologyKeyType": "Label", "maxSkew": 2}
            ]},
        },
    })
}

// ---------------------------------------------------------------------------------------------
// CRD metadata
// ---------------------------------------------------------------------------------------------

#[test]
fn all_twenty_crds_are_embedded_with_one_storage_version_each() {
    let crds = crd::ocm_crds();
    assert_eq!(crds.len(), 20);
    for c in crds {
        let storage = c.storage_version();
        assert!(storage.storage && storage.served, "{}", c.name());
        assert_eq!(c.versions.iter().filter(|v| v.storage).count(), 1);
        assert!(
            c.group.ends_with(".open-cluster-management.io") || c.group == MULTICLUSTER,
            "{}",
            c.name()
        );
        assert_eq!(c.list_kind, format!("{}List", c.kind));
        assert_eq!(c.singular, c.kind.to_lowercase());
        let root = &storage.schema;
        assert_eq!(root.type_(), Some(SchemaType::Object), "{}", c.name());
        assert_eq!(root.property("metadata").and_then(Schema::type_), Some(SchemaType::Object));
        assert!(crd::find(&c.group, &c.plural).is_some_and(|found| std::ptr::eq(found, c)));
    }
}

#[test]
fn every_crd_has_the_scope_and_versions_its_yaml_declares() {
    // (plural, group, namespaced, storage version, served versions)
    let expected: &[(&str, &str, bool, &str, &[&str])] = &[
        ("clustermanagementaddons", ADDON, false, "v1alpha1", &["v1alpha1", "v1beta1"]),
        ("managedclusters", CLUSTER, false, "v1", &["v1"]),
        ("managedclustersets", CLUSTER, false, "v1beta2", &["v1beta2"]),
        ("manifestworkreplicasets", WORK, true, "v1alpha1", &["v1alpha1"]),
        ("manifestworks", WORK, true, "v1", &["v1"]),
        ("managedclusteraddons", ADDON, true, "v1alpha1", &["v1alpha1", "v1beta1"]),
        ("managedclustersetbindings", CLUSTER, true, "v1beta2", &["v1beta2"]),
        ("appliedmanifestworks", WORK, false, "v1", &["v1"]),
        ("addondeploymentconfigs", ADDON, true, "v1alpha1", &["v1alpha1", "v1beta1"]),
        ("clusterclaims", CLUSTER, false, "v1alpha1", &["v1alpha1"]),
        ("placements", CLUSTER, true, "v1beta1", &["v1beta1"]),
        ("addontemplates", ADDON, false, "v1alpha1", &["v1alpha1"]),
        ("placementdecisions", CLUSTER, true, "v1beta1", &["v1beta1"]),
        ("addonplacementscores", CLUSTER, true, "v1alpha1", &["v1alpha1"]),
        ("managedserviceaccounts", AUTHENTICATION, true, "v1beta1", &["v1alpha1", "v1beta1"]),
        ("policies", POLICY, true, "v1", &["v1"]),
        ("placementbindings", POLICY, true, "v1", &["v1"]),
        ("policysets", POLICY, true, "v1beta1", &["v1beta1"]),
        ("configurationpolicies", POLICY, true, "v1", &["v1"]),
        ("clusterprofiles", MULTICLUSTER, true, "v1alpha1", &["v1alpha1"]),
    ];
    for &(plural, group, namespaced, storage, served) in expected {
        let c = crd(group, plural);
        assert_eq!(c.namespaced, namespaced, "{plural}");
        assert_eq!(c.storage_version().name, storage, "{plural}");
        let got: Vec<&str> =
            c.versions.iter().filter(|v| v.served).map(|v| v.name.as_str()).collect();
        assert_eq!(got, served, "{plural}");
        let without_status = ["addondeploymentconfigs", "clusterclaims", "addontemplates"];
        let status = !without_status.contains(&plural);
        assert!(c.versions.iter().all(|v| v.status_subresource == status), "{plural}");
    }
}

#[test]
fn managed_cluster_metadata_matches_the_yaml() {
    let mc = crd(CLUSTER, "managedclusters");
    assert_eq!(mc.kind, "ManagedCluster");
    assert_eq!(mc.list_kind, "ManagedClusterList");
    assert_eq!(mc.singular, "managedcluster");
    assert_eq!(mc.short_names, ["mcl", "mcls"]);
    assert!(mc.categories.is_empty());
    assert!(!mc.namespaced);
    assert_eq!(mc.versions.len(), 1);
    let v1 = mc.version("v1").unwrap();
    assert!(v1.served && v1.storage && v1.status_subresource);
    assert!(!v1.deprecated && v1.deprecation_warning.is_none());
    assert!(v1.selectable_fields.is_empty());
    let columns: Vec<(&str, &str, &str, i32)> = v1
        .printer_columns
        .iter()
        .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str(), c.priority))
        .collect();
    assert_eq!(
        columns,
        [
            ("Hub Accepted", "boolean", ".spec.hubAcceptsClient", 0),
            ("Managed Cluster URLs", "string", ".spec.managedClusterClientConfigs[*].url", 0),
            (
                "Joined",
                "string",
                r#".status.conditions[?(@.type=="ManagedClusterJoined")].status"#,
                0
            ),
            (
                "Available",
                "string",
                r#".status.conditions[?(@.type=="ManagedClusterConditionAvailable")].status"#,
                0
            ),
            ("Age", "date", ".metadata.creationTimestamp", 0),
        ]
    );
}

#[test]
fn cluster_management_addon_stores_v1alpha1_and_serves_v1beta1() {
    let cma = crd(ADDON, "clustermanagementaddons");
    assert_eq!(cma.short_names, ["cma", "cmas"]);
    assert_eq!(cma.storage_version().name, "v1alpha1");
    let beta = cma.version("v1beta1").unwrap();
    assert!(beta.served && !beta.storage);
    assert_eq!(beta.printer_columns.len(), 1);
    assert_eq!(beta.printer_columns[0].name, "DISPLAY NAME");
    assert_eq!(
        cma.storage_version().printer_columns[1].json_path,
        ".spec.addOnConfiguration.crdName"
    );
    assert_eq!(cma.storage_version().schema.required(), ["spec"]);
}

#[test]
fn manifest_work_replica_set_columns_keep_descriptions() {
    let mwrs = crd(WORK, "manifestworkreplicasets");
    let first = &mwrs.storage_version().printer_columns[0];
    assert_eq!(first.name, "Placement");
    assert!(first.description.is_some());
}

#[test]
fn schema_accessors_expose_structure_list_semantics_and_cel() {
    let mc = storage_schema(CLUSTER, "managedclusters");
    assert_eq!(mc.at(&["spec", "leaseDurationSeconds"]).unwrap().format(), Some("int32"));
    assert_eq!(mc.at(&["spec", "leaseDurationSeconds"]).unwrap().default_value(), Some(&json!(60)));
    assert_eq!(
        mc.at(&["status", "conditions"]).unwrap().list_type(),
        ListType::Map(vec!["type".into()])
    );
    assert_eq!(
        mc.at(&["status", "managedNamespaces"]).unwrap().list_map_keys(),
        ["clusterSet", "name"]
    );
    assert_eq!(mc.at(&["spec", "taints"]).unwrap().list_type(), ListType::Atomic);
    let effect = mc.at(&["spec", "taints", "effect"]).unwrap();
    assert_eq!(
        effect.enum_values(),
        [json!("NoSelect"), json!("PreferNoSelect"), json!("NoSelectIfNew")]
    );
    assert!(mc.at(&["spec", "taints", "timeAdded"]).unwrap().nullable());
    let cpu = mc.at(&["status", "allocatable", "cpu"]).unwrap();
    assert!(cpu.int_or_string());
    assert!(mc.at(&["spec", "taints", "key"]).unwrap().pattern().is_some());

    let mw = storage_schema(WORK, "manifestworks");
    let manifest = mw.at(&["spec", "workload", "manifests"]).unwrap().items().unwrap();
    assert!(manifest.embedded_resource() && manifest.preserve_unknown_fields());
    let rule = mw.at(&["spec", "manifestConfigs", "conditionRules"]).unwrap().items().unwrap();
    assert_eq!(
        rule.cel_rules().collect::<Vec<_>>(),
        [r#"self.type != 'CEL' || self.condition != """#]
    );
    assert_eq!(
        rule.validations()[0].message.as_deref(),
        Some("Condition is required for CEL rules")
    );

    let placement = storage_schema(CLUSTER, "placements");
    let selector =
        placement.at(&["spec", "predicates", "requiredClusterSelector", "labelSelector"]).unwrap();
    assert_eq!(selector.map_type(), ocm_proto::schema::MapType::Atomic);
    assert_eq!(
        placement.at(&["spec", "spreadPolicy", "spreadConstraints"]).unwrap().bounds().max_items,
        Some(8)
    );
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

#[test]
fn realistic_objects_validate_cleanly() {
    let mc = storage_schema(CLUSTER, "managedclusters");
    assert_eq!(rendered(&mc.validate(&managed_cluster())), Vec::<String>::new());
    let mw = storage_schema(WORK, "manifestworks");
    assert_eq!(rendered(&mw.validate(&manifest_work())), Vec::<String>::new());
    let pl = storage_schema(CLUSTER, "placements");
    assert_eq!(rendered(&pl.validate(&placement())), Vec::<String>::new());
    let set = storage_schema(CLUSTER, "managedclustersets");
    let cluster_set = json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSet", "metadata": {"name": "dev"},
        "spec": {"clusterSelector": {"selectorType": "LabelSelector",
            "labelSelector": {"matchLabels": {"env": "dev"}}}}});
    assert_eq!(rendered(&set.validate(&cluster_set)), Vec::<String>::new());
}

#[test]
fn a_bad_managed_cluster_reports_every_error_at_once() {
    let mc = storage_schema(CLUSTER, "managedclusters");
    let bad = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": "cluster1", "whatever": {"not": "checked"}},
        "spec": {
            "hubAcceptsClient": "yes",
            "leaseDurationSeconds": "x",
            "managedClusterClientConfigs": [{"caBundle": "not base64!"}],
            "taints": [
                {"key": "gpu", "effect": "Bogus"},
                {"effect": "NoSelect", "timeAdded": null},
                {"key": "k".repeat(317), "effect": "NoSelect", "timeAdded": "yesterday"},
            ],
        },
        "status": {
            "allocatable": {"cpu": true},
            "conditions": [
                {"type": "Joined", "status": "Maybe", "reason": "R", "message": "",
                 "lastTransitionTime": "2024-05-01T10:00:00Z", "observedGeneration": -1},
                {"type": "Joined", "status": "True", "reason": "", "message": "",
                 "lastTransitionTime": "2024-05-01T10:00:00Z"},
            ],
        },
    });
    let errors = mc.validate(&bad);
    let kinds: Vec<(FieldErrorKind, &str)> =
        errors.iter().map(|e| (e.kind, e.field.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (FieldErrorKind::TypeInvalid, "spec.hubAcceptsClient"),
            (FieldErrorKind::TypeInvalid, "spec.leaseDurationSeconds"),
            (FieldErrorKind::Required, "spec.managedClusterClientConfigs[0].url"),
            (FieldErrorKind::TypeInvalid, "spec.managedClusterClientConfigs[0].caBundle"),
            (FieldErrorKind::NotSupported, "spec.taints[0].effect"),
            (FieldErrorKind::Required, "spec.taints[1].key"),
            (FieldErrorKind::TooLong, "spec.taints[2].key"),
            (FieldErrorKind::TypeInvalid, "spec.taints[2].timeAdded"),
            (FieldErrorKind::TypeInvalid, "status.allocatable[cpu]"),
            (FieldErrorKind::NotSupported, "status.conditions[0].status"),
            (FieldErrorKind::Invalid, "status.conditions[0].observedGeneration"),
            (FieldErrorKind::Invalid, "status.conditions[1].reason"),
            // minLength and pattern both refuse an empty reason, as kube-openapi reports them.
            (FieldErrorKind::Invalid, "status.conditions[1].reason"),
            (FieldErrorKind::Duplicate, "status.conditions[1]"),
        ]
    );
    assert_eq!(
        rendered(&errors),
        [
            r#"spec.hubAcceptsClient: Invalid value: "string": spec.hubAcceptsClient in body must be of type boolean: "string""#,
            r#"spec.leaseDurationSeconds: Invalid value: "string": spec.leaseDurationSeconds in body must be of type integer: "string""#,
            "spec.managedClusterClientConfigs[0].url: Required value",
            r#"spec.managedClusterClientConfigs[0].caBundle: Invalid value: "not base64!": spec.managedClusterClientConfigs[0].caBundle in body must be of type byte: "not base64!""#,
            r#"spec.taints[0].effect: Unsupported value: "Bogus": supported values: "NoSelect", "PreferNoSelect", "NoSelectIfNew""#,
            "spec.taints[1].key: Required value",
            "spec.taints[2].key: Too long: may not be more than 316 bytes",
            r#"spec.taints[2].timeAdded: Invalid value: "yesterday": spec.taints[2].timeAdded in body must be of type date-time: "yesterday""#,
            r#"status.allocatable[cpu]: Invalid value: "boolean": status.allocatable[cpu] in body must be of type integer,string: "boolean""#,
            r#"status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown""#,
            "status.conditions[0].observedGeneration: Invalid value: -1: status.conditions[0].observedGeneration in body should be greater than or equal to 0",
            r#"status.conditions[1].reason: Invalid value: "": status.conditions[1].reason in body should be at least 1 chars long"#,
            r#"status.conditions[1].reason: Invalid value: "": status.conditions[1].reason in body should match '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$'"#,
            r#"status.conditions[1]: Duplicate value: {"type":"Joined"}"#,
        ]
    );
    assert_eq!(errors[1].value, Some(json!("string")));
    assert_eq!(errors[4].value, Some(json!("Bogus")));
    assert_eq!(errors.last().unwrap().value, Some(json!({"type": "Joined"})));
}

#[test]
fn list_map_duplicates_use_every_key() {
    let mc = storage_schema(CLUSTER, "managedclusters");
    let condition = |t: &str| {
        json!({"type": t, "status": "True", "reason": "R", "message": "",
               "lastTransitionTime": "2024-05-01T10:00:00Z"})
    };
    let obj = json!({"status": {
        "managedNamespaces": [
            {"clusterSet": "dev", "name": "ns1", "conditions": [condition("A"), condition("A")]},
            {"clusterSet": "prod", "name": "ns1"},
            {"clusterSet": "dev", "name": "ns1"},
            "not an object",
        ],
    }});
    let errors = mc.validate(&obj);
    assert_eq!(
        rendered(&errors),
        [
            r#"status.managedNamespaces[3]: Invalid value: "string": status.managedNamespaces[3] in body must be of type object: "string""#,
            r#"status.managedNamespaces[0].conditions[1]: Duplicate value: {"type":"A"}"#,
            r#"status.managedNamespaces[3]: Invalid value: "not an object": must be an object for an array of list-type map"#,
        ]
    );
    // Without the bad item the composite key duplicate shows.
    let obj = json!({"status": {"managedNamespaces": [
        {"clusterSet": "dev", "name": "ns1"},
        {"clusterSet": "prod", "name": "ns1"},
        {"clusterSet": "dev", "name": "ns1"},
    ]}});
    assert_eq!(
        rendered(&mc.validate(&obj)),
        [r#"status.managedNamespaces[2]: Duplicate value: {"clusterSet":"dev","name":"ns1"}"#]
    );
    // Long lists take the hashed path and report the same.
    let conditions: Vec<Value> = (0..40).map(|i| condition(&format!("C{}", i % 39))).collect();
    let errors = mc.validate(&json!({"status": {"conditions": conditions}}));
    assert_eq!(rendered(&errors), [r#"status.conditions[39]: Duplicate value: {"type":"C0"}"#]);
}

#[test]
fn required_enum_and_bounds_across_other_kinds() {
    let pl = storage_schema(CLUSTER, "placements");
    let mut bad = placement();
    bad["spec"]["prioritizerPolicy"]["configurations"][0]["weight"] = json!(11);
    bad["spec"]["prioritizerPolicy"]["configurations"][1] = json!({"weight": 1});
    bad["spec"]["spreadPolicy"]["spreadConstraints"] =
        Value::Array(vec![json!({"topologyKey": "cloud", "topologyKeyType": "Label"}); 9]);
    bad["spec"]["decisionStrategy"]["groupStrategy"]["clustersPerDecisionGroup"] = json!(false);
    assert_eq!(
        rendered(&pl.validate(&bad)),
        [
            "spec.prioritizerPolicy.configurations[0].weight: Invalid value: 11: spec.prioritizerPolicy.configurations[0].weight in body should be less than or equal to 10",
            "spec.prioritizerPolicy.configurations[1].scoreCoordinate: Required value",
            r#"spec.decisionStrategy.groupStrategy.clustersPerDecisionGroup: Invalid value: "boolean": spec.decisionStrategy.groupStrategy.clustersPerDecisionGroup in body must be of type integer,string: "boolean""#,
            "spec.spreadPolicy.spreadConstraints: Too many: 9: must have at most 8 items",
        ]
    );

    let cma = storage_schema(ADDON, "clustermanagementaddons");
    let errors = cma.validate(&json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ClusterManagementAddOn", "metadata": {"name": "x"}}));
    assert_eq!(rendered(&errors), ["spec: Required value"]);

    let mw = storage_schema(WORK, "manifestworks");
    let mut work = manifest_work();
    work["spec"]["workload"]["manifests"][1] = json!({"kind": 3, "spec": {}});
    work["spec"]["workload"]["manifests"][0]["apiVersion"] = json!("a/b/c");
    work["spec"]["deleteOption"]["propagationPolicy"] = json!("Later");
    assert_eq!(
        rendered(&mw.validate(&work)),
        [
            r#"spec.deleteOption.propagationPolicy: Unsupported value: "Later": supported values: "Foreground", "Orphan", "SelectivelyOrphan""#,
            r#"spec.workload.manifests[0].apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
            "spec.workload.manifests[1].apiVersion: Required value: must not be empty",
            "spec.workload.manifests[1].kind: Invalid value: 3: must be a string",
        ]
    );
}

#[test]
fn nulls_are_type_errors_unless_nullable_or_defaulted_away() {
    let mc = storage_schema(CLUSTER, "managedclusters");
    let mut obj = json!({"spec": {"hubAcceptsClient": null, "leaseDurationSeconds": null,
        "taints": [{"key": "a", "effect": "NoSelect", "timeAdded": null}]}});
    assert_eq!(
        rendered(&mc.validate(&obj)),
        [
            r#"spec.hubAcceptsClient: Invalid value: "null": spec.hubAcceptsClient in body must be of type boolean: "null""#,
            r#"spec.leaseDurationSeconds: Invalid value: "null": spec.leaseDurationSeconds in body must be of type integer: "null""#,
        ]
    );
    mc.apply_defaults(&mut obj);
    assert_eq!(
        obj,
        json!({"spec": {"leaseDurationSeconds": 60,
            "taints": [{"key": "a", "effect": "NoSelect", "timeAdded": null}]}})
    );
    assert!(mc.validate(&obj).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Defaulting
// ---------------------------------------------------------------------------------------------

#[test]
fn managed_cluster_lease_duration_defaults_to_sixty() {
    let mc = storage_schema(CLUSTER, "managedclusters");
    let mut obj = json!({"apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster", "metadata": {"name": "c"}, "spec": {"hubAcceptsClient": true}});
    mc.apply_defaults(&mut obj);
    assert_eq!(obj["spec"], json!({"hubAcceptsClient": true, "leaseDurationSeconds": 60}));
    // A set value stays; an absent spec is not invented (it has no default).
    let mut obj = json!({"spec": {"leaseDurationSeconds": 5}});
    mc.apply_defaults(&mut obj);
    assert_eq!(obj, json!({"spec": {"leaseDurationSeconds": 5}}));
    let mut obj = json!({"metadata": {"name": "c"}});
    mc.apply_defaults(&mut obj);
    assert_eq!(obj, json!({"metadata": {"name": "c"}}));
}

#[test]
fn managed_cluster_set_selector_type_defaults_top_down() {
    let set = storage_schema(CLUSTER, "managedclustersets");
    let mut obj = json!({"metadata": {"name": "dev"}});
    set.apply_defaults(&mut obj);
    assert_eq!(
        obj["spec"],
        json!({"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}})
    );
    let mut obj = json!({"spec": {}});
    set.apply_defaults(&mut obj);
    assert_eq!(
        obj["spec"],
        json!({"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}})
    );
    let mut obj = json!({"spec": {"clusterSelector": {"labelSelector": {}}}});
    set.apply_defaults(&mut obj);
    assert_eq!(
        obj["spec"]["clusterSelector"],
        json!({"labelSelector": {}, "selectorType": "ExclusiveClusterSetLabel"})
    );
    let mut obj = json!({"spec": {"clusterSelector": {"selectorType": "LabelSelector"}}});
    set.apply_defaults(&mut obj);
    assert_eq!(obj["spec"]["clusterSelector"], json!({"selectorType": "LabelSelector"}));
}

#[test]
fn managed_service_account_defaults_rotation_and_requires_a_positive_ttl() {
    let msa = storage_schema(AUTHENTICATION, "managedserviceaccounts");
    let mut obj = json!({"metadata": {"name": "reader", "namespace": "cluster1"},
        "spec": {"rotation": {}}});
    msa.apply_defaults(&mut obj);
    assert_eq!(obj["spec"], json!({"rotation": {"enabled": true, "validity": "8640h0m0s"}}));
    assert!(msa.validate(&obj).is_empty());
    // `rotation` is required and has no default of its own; the TTL's minimum is exclusive.
    let obj = json!({"spec": {"ttlSecondsAfterCreation": 0}});
    assert_eq!(
        rendered(&msa.validate(&obj)),
        [
            "spec.rotation: Required value",
            "spec.ttlSecondsAfterCreation: Invalid value: 0: spec.ttlSecondsAfterCreation in body should be greater than 0",
        ]
    );
}

#[test]
fn defaults_reach_into_array_items() {
    let pl = storage_schema(CLUSTER, "placements");
    let mut obj = placement();
    pl.apply_defaults(&mut obj);
    let spec = &obj["spec"];
    assert_eq!(spec["tolerations"][0]["operator"], json!("Exists"));
    assert_eq!(spec["spreadPolicy"]["spreadConstraints"][0]["maxSkew"], json!(2));
    assert_eq!(
        spec["spreadPolicy"]["spreadConstraints"][0]["whenUnsatisfiable"],
        json!("ScheduleAnyway")
    );
    assert_eq!(spec["prioritizerPolicy"]["mode"], json!("Exact"));
    assert_eq!(spec["decisionStrategy"]["groupStrategy"]["clustersPerDecisionGroup"], json!("25%"));
    let mut bare = json!({"spec": {"tolerations": [{"key": "gpu"}],
        "prioritizerPolicy": {"configurations": [{"scoreCoordinate": {}}]},
        "decisionStrategy": {"groupStrategy": {}}}});
    pl.apply_defaults(&mut bare);
    let spec = &bare["spec"];
    assert_eq!(spec["tolerations"][0]["operator"], json!("Equal"));
    assert_eq!(spec["prioritizerPolicy"]["mode"], json!("Additive"));
    assert_eq!(spec["prioritizerPolicy"]["configurations"][0]["weight"], json!(1));
    assert_eq!(
        spec["prioritizerPolicy"]["configurations"][0]["scoreCoordinate"]["type"],
        json!("BuiltIn")
    );
    assert_eq!(
        spec["decisionStrategy"]["groupStrategy"]["clustersPerDecisionGroup"],
        json!("100%")
    );
    assert!(pl.validate(&bare).is_empty(), "{:?}", pl.validate(&bare));

    let mw = storage_schema(WORK, "manifestworks");
    let mut work = manifest_work();
    mw.apply_defaults(&mut work);
    let ssa = &work["spec"]["manifestConfigs"][0]["updateStrategy"]["serverSideApply"];
    assert_eq!(ssa["fieldManager"], json!("work-agent"));
    assert_eq!(work["spec"]["manifestConfigs"][0]["feedbackScrapeType"], json!("Poll"));
    // Manifests are preserved as written: their schema has no defaults to add.
    assert_eq!(work["spec"]["workload"], manifest_work()["spec"]["workload"]);
}

// ---------------------------------------------------------------------------------------------
// Pruning
// ---------------------------------------------------------------------------------------------

#[test]
fn prune_drops_and_reports_unknown_fields_but_keeps_embedded_manifests() {
    let mw = storage_schema(WORK, "manifestworks");
    let mut work = manifest_work();
    work["spec"]["colour"] = json!("blue");
    work["spec"]["workload"]["extra"] = json!({"a": 1});
    work["spec"]["manifestConfigs"][0]["bogus"] = json!(true);
    work["spec"]["manifestConfigs"][0]["resourceIdentifier"]["x"] = json!(1);
    work["spec"]["workload"]["manifests"][0]["data"]["new"] = json!("kept");
    work["spec"]["workload"]["manifests"][0]["unknownTopLevel"] = json!("kept");
    work["status"] = json!({"conditions": [], "weird": 1});
    work["extraRoot"] = json!(1);
    work["metadata"]["whatever"] = json!("metadata is not ours");
    let mut expected = manifest_work();
    expected["spec"]["workload"]["manifests"][0]["data"]["new"] = json!("kept");
    expected["spec"]["workload"]["manifests"][0]["unknownTopLevel"] = json!("kept");
    expected["status"] = json!({"conditions": []});
    expected["metadata"]["whatever"] = json!("metadata is not ours");

    let pruned = mw.prune(&mut work);
    assert_eq!(
        pruned,
        [
            "spec.manifestConfigs[0].resourceIdentifier.x",
            "spec.manifestConfigs[0].bogus",
            "spec.workload.extra",
            "spec.colour",
            "status.weird",
            "extraRoot",
        ]
    );
    assert_eq!(work, expected);
    assert!(mw.prune(&mut work).is_empty());
}

#[test]
fn prune_handles_maps_and_wrong_shapes() {
    let mc = storage_schema(CLUSTER, "managedclusters");
    let mut obj = managed_cluster();
    obj["status"]["allocatable"]["gpu"] = json!({"nested": "dropped"});
    obj["spec"]["taints"][0]["colour"] = json!("red");
    obj["spec"]["hubAcceptsClient"] = json!({"not": "a bool"});
    let pruned = mc.prune(&mut obj);
    assert_eq!(
        pruned,
        ["spec.hubAcceptsClient.not", "spec.taints[0].colour", "status.allocatable.gpu.nested"]
    );
    assert_eq!(obj["status"]["allocatable"]["gpu"], json!({}));
    assert_eq!(obj["spec"]["hubAcceptsClient"], json!({}));
    // The root's apiVersion, kind and metadata are never pruned.
    let mut obj = json!({"apiVersion": 1, "kind": "ManagedCluster", "metadata": {"x": 1}});
    assert!(mc.prune(&mut obj).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

/// Keys that occur in the OCM schemas, so generated objects reach deep into them.
const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "spec",
    "status",
    "taints",
    "effect",
    "key",
    "value",
    "conditions",
    "type",
    "status",
    "reason",
    "message",
    "lastTransitionTime",
    "workload",
    "manifests",
    "manifestConfigs",
    "resourceIdentifier",
    "allocatable",
    "leaseDurationSeconds",
    "managedClusterClientConfigs",
    "url",
    "caBundle",
    "clusterSelector",
    "selectorType",
    "predicates",
    "requiredClusterSelector",
    "labelSelector",
    "matchLabels",
    "tolerations",
    "decisionStrategy",
    "groupStrategy",
    "clustersPerDecisionGroup",
    "managedNamespaces",
    "clusterSet",
    "name",
    "unknown",
];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        "[ -~]{0,6}".prop_map(Value::String),
        prop::sample::select(vec!["NoSelect", "True", "2024-01-01T00:00:00Z", "aGk=", "v1"])
            .prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 96, 6, |inner| {
        let key = prop_oneof![
            3 => prop::sample::select(KEYS).prop_map(str::to_owned),
            1 => "[a-z]{1,4}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key, inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect())),
        ]
    })
}

fn all_schemas() -> Vec<&'static Schema> {
    crd::ocm_crds().iter().flat_map(|c| c.versions.iter().map(|v| &v.schema)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn validate_and_defaulting_never_panic(obj in arb_json()) {
        for schema in all_schemas() {
            let _ = schema.validate(&obj);
            let mut copy = obj.clone();
            schema.apply_defaults(&mut copy);
            let once = copy.clone();
            schema.apply_defaults(&mut copy);
            prop_assert_eq!(&copy, &once, "defaulting is idempotent");
        }
    }

    #[test]
    fn prune_is_idempotent(obj in arb_json()) {
        for schema in all_schemas() {
            let mut once = obj.clone();
            let first = schema.prune(&mut once);
            let mut twice = once.clone();
            let second = schema.prune(&mut twice);
            prop_assert!(second.is_empty(), "second prune dropped {:?}", second);
            prop_assert_eq!(&twice, &once);
            // Whatever pruning removed was reported, and nothing is invented.
            prop_assert!(first.len() <= count_keys(&obj));
        }
    }

    #[test]
    fn objects_reach_schemas_under_spec(spec in arb_json()) {
        let obj = json!({"apiVersion": "v1", "kind": "K", "spec": spec, "status": {"conditions": [spec]}});
        for schema in all_schemas() {
            let _ = schema.validate(&obj);
            let mut pruned = obj.clone();
            schema.prune(&mut pruned);
            schema.apply_defaults(&mut pruned);
            let _ = schema.validate(&pruned);
            let mut again = pruned.clone();
            // Defaults only add declared fields, so defaulting a pruned object needs no pruning.
            prop_assert!(schema.prune(&mut again).is_empty());
        }
    }
}

fn count_keys(v: &Value) -> usize {
    match v {
        Value::Object(map) => map.len() + map.values().map(count_keys).sum::<usize>(),
        Value::Array(items) => items.iter().map(count_keys).sum(),
        _ => 0,
    }
}

// ---------------------------------------------------------------------------------------------
// Cross-check with the typed API's golden objects
// ---------------------------------------------------------------------------------------------

#[test]
fn golden_objects_validate_and_prune_to_themselves() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let entries = std::fs::read_dir(&dir).unwrap();
    let mut checked = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some((singular, version)) = name.strip_suffix(".json").and_then(|n| n.split_once('.'))
        else {
            continue;
        };
        let Some(c) = crd::ocm_crds().iter().find(|c| c.singular == singular) else { continue };
        let schema = &c.version(version).unwrap_or_else(|| panic!("{name}: no version")).schema;
        let obj: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(rendered(&schema.validate(&obj)), Vec::<String>::new(), "{name}");
        let mut pruned = obj.clone();
        assert_eq!(schema.prune(&mut pruned), Vec::<String>::new(), "{name}");
        assert_eq!(pruned, obj, "{name}");
        schema.apply_defaults(&mut pruned);
        assert_eq!(rendered(&schema.validate(&pruned)), Vec::<String>::new(), "{name} defaulted");
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} golden objects matched a CRD");
}
