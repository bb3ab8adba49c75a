//! `cluster.open-cluster-management.io`: ManagedCluster (v1), ManagedClusterSet and
//! ManagedClusterSetBinding (v1beta2), Placement and PlacementDecision (v1beta1),
//! AddOnPlacementScore and ClusterClaim (v1alpha1, which also holds the shared
//! [`v1alpha1::RolloutStrategy`]), plus the registration and placement labels, annotations,
//! finalizers and taint keys.

/// The API group.
pub const GROUP: &str = "cluster.open-cluster-management.io";

/// The group every agent certificate carries besides its cluster's (ignored when an approver
/// checks a request's Os).
pub const GROUP_MANAGED_CLUSTERS: &str = "system:open-cluster-management:managed-clusters";

/// The group of a cluster's agents (the `O` of their certificates; the RBAC key).
pub fn agent_group(cluster: &str) -> String {
    format!("system:open-cluster-management:{cluster}")
}

/// The user of a cluster's agent (the `CN` of its certificate).
pub fn agent_user(cluster: &str, agent: &str) -> String {
    format!("system:open-cluster-management:{cluster}:{agent}")
}

/// Label on a cluster's Namespace, Lease, CSRs and per-cluster RBAC naming the cluster it belongs
/// to.
pub const LABEL_CLUSTER_NAME: &str = "open-cluster-management.io/cluster-name";
/// Label on a ManagedCluster naming its `ExclusiveClusterSetLabel` set (webhook default
/// [`CLUSTER_SET_DEFAULT`]).
pub const LABEL_CLUSTER_SET: &str = "cluster.open-cluster-management.io/clusterset";
/// Label on a PlacementDecision naming its Placement.
pub const LABEL_PLACEMENT: &str = "cluster.open-cluster-management.io/placement";
/// Label on a PlacementDecision: its decision group's name (`""` for unnamed groups).
pub const LABEL_DECISION_GROUP_NAME: &str =
    "cluster.open-cluster-management.io/decision-group-name";
/// Label on a PlacementDecision: its decision group's index (decimal string).
pub const LABEL_DECISION_GROUP_INDEX: &str =
    "cluster.open-cluster-management.io/decision-group-index";
/// Label on a spoke ClusterClaim: the claim is not reported to the hub.
pub const LABEL_SPOKE_ONLY: &str = "open-cluster-management.io/spoke-only";
/// Prefix of the ManagedCluster label `feature.open-cluster-management.io/addon-<name>` mirroring
/// an addon's health (values [`ADDON_FEATURE_AVAILABLE`], [`ADDON_FEATURE_UNHEALTHY`],
/// [`ADDON_FEATURE_UNREACHABLE`]).
pub const LABEL_PREFIX_ADDON_FEATURE: &str = "feature.open-cluster-management.io/addon-";
/// Addon feature label value: the addon's Available condition is True.
pub const ADDON_FEATURE_AVAILABLE: &str = "available";
/// Addon feature label value: the addon's Available condition is False.
pub const ADDON_FEATURE_UNHEALTHY: &str = "unhealthy";
/// Addon feature label value: the addon's Available condition is missing or Unknown.
pub const ADDON_FEATURE_UNREACHABLE: &str = "unreachable";
/// Prefix of the spoke Namespace label `clusterset.open-cluster-management.io/<hubHash[:63]>` =
/// `true` marking namespaces managed through a clusterset's `managedNamespaces`.
pub const LABEL_PREFIX_CLUSTER_SET_NAMESPACE: &str = "clusterset.open-cluster-management.io/";

/// Annotation on a ManagedCluster: RFC 3339 time it was auto-accepted.
pub const ANNOTATION_AUTOMATICALLY_ACCEPTED_ON: &str =
    "open-cluster-management.io/automatically-accepted-on";
/// Annotation on a ManagedCluster; `"true"` makes the hub treat its clock as synced.
pub const ANNOTATION_SKIP_CLOCK_SYNC_CHECK: &str =
    "registration.open-cluster-management.io/skip-clock-sync-check";
/// Prefix of the annotations the agent may set on its ManagedCluster at creation.
pub const ANNOTATION_PREFIX_AGENT: &str = "agent.open-cluster-management.io/";
/// Annotation on a ManagedCluster: AWS IRSA registration marker.
pub const ANNOTATION_MANAGED_CLUSTER_ARN: &str =
    "agent.open-cluster-management.io/managed-cluster-arn";
/// Annotation on a ManagedCluster: JSON `{"registries":[{"source":..,"mirrors":..}]}` image
/// override for addons.
pub const ANNOTATION_IMAGE_REGISTRIES: &str = "open-cluster-management.io/image-registries";
/// Annotation on objects in a cluster namespace: integer 0..100, cluster GC deletes lower first
/// (missing or invalid = 0).
pub const ANNOTATION_CLEANUP_PRIORITY: &str = "open-cluster-management.io/cleanup-priority";
/// Annotation on a Placement; `"true"` makes the scheduler skip it.
pub const ANNOTATION_EXPERIMENTAL_SCHEDULING_DISABLE: &str =
    "cluster.open-cluster-management.io/experimental-scheduling-disable";
/// Annotation on the `default`/`global` ManagedClusterSet; `"false"` stops the controller from
/// reverting its selector.
pub const ANNOTATION_CLUSTER_SET_AUTO_UPDATE: &str =
    "cluster.open-cluster-management.io/autoupdate";
/// Annotation on a CSR created by the gRPC server: the real agent user name.
pub const ANNOTATION_CSR_USER: &str = "open-cluster-management.io/csr-user";

/// ManagedCluster finalizer: per-cluster RBAC still to remove.
pub const FINALIZER_API_RESOURCE_CLEANUP: &str =
    "cluster.open-cluster-management.io/api-resource-cleanup";
/// ManagedCluster finalizer: resources in the cluster namespace still to garbage-collect.
pub const FINALIZER_RESOURCE_CLEANUP: &str = "cluster.open-cluster-management.io/resource-cleanup";

/// Automatic taint (effect `NoSelect`) while the cluster's Available condition is missing or
/// Unknown.
pub const TAINT_UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";
/// Automatic taint (effect `NoSelect`) while the cluster's Available condition is False.
pub const TAINT_UNAVAILABLE: &str = "cluster.open-cluster-management.io/unavailable";

/// The Lease in a cluster's namespace its agent renews (the hub creates it on acceptance).
pub const LEASE_NAME: &str = "managed-cluster-lease";
/// The `ExclusiveClusterSetLabel` set every cluster joins by default.
pub const CLUSTER_SET_DEFAULT: &str = "default";
/// The `LabelSelector` set selecting every cluster.
pub const CLUSTER_SET_GLOBAL: &str = "global";

/// Reserved ClusterClaim: cluster id.
pub const CLAIM_ID: &str = "id.k8s.io";
/// Reserved ClusterClaim: Kubernetes version.
pub const CLAIM_KUBE_VERSION: &str = "kubeversion.open-cluster-management.io";
/// Reserved ClusterClaim: platform.
pub const CLAIM_PLATFORM: &str = "platform.open-cluster-management.io";
/// Reserved ClusterClaim: product.
pub const CLAIM_PRODUCT: &str = "product.open-cluster-management.io";
/// Well-known ClusterClaim: the cluster set (documented, not reserved).
pub const CLAIM_CLUSTER_SET: &str = "clusterset.k8s.io";
/// The claims always reported, whatever the custom-claim limit.
pub const RESERVED_CLAIM_NAMES: &[&str] =
    &[CLAIM_ID, CLAIM_KUBE_VERSION, CLAIM_PLATFORM, CLAIM_PRODUCT];

/// `cluster.open-cluster-management.io/v1`: ManagedCluster.
pub mod v1 {
    use std::collections::BTreeMap;

    use schemars::JsonSchema;

    use serde::{Deserialize, Serialize};

    use crate::api::meta::{
        ApiVersionTag, ByteString, Condition, KindTag, ObjectMeta, Quantity, Time, null_as_default,
    };

    /// Taint effect: the scheduler never selects the cluster unless tolerated.
    pub const TAINT_EFFECT_NO_SELECT: &str = "NoSelect";
    /// Taint effect: accepted by the API; no effect in the current scheduler.
    pub const TAINT_EFFECT_PREFER_NO_SELECT: &str = "PreferNoSelect";
    /// Taint effect: like `NoSelect`, but clusters already selected stay.
    pub const TAINT_EFFECT_NO_SELECT_IF_NEW: &str = "NoSelectIfNew";

    /// Condition: the hub accepted the cluster (`spec.hubAcceptsClient`).
    pub const CONDITION_HUB_ACCEPTED: &str = "HubAcceptedManagedCluster";
    /// Condition type constant that exists in the API but is not set by current code.
    pub const CONDITION_HUB_DENIED: &str = "HubDeniedManagedCluster";
    /// Condition: the agent joined (set once HubAccepted is True).
    pub const CONDITION_JOINED: &str = "ManagedClusterJoined";
    /// Condition: the cluster is available (agent probe, hub lease check).
    pub const CONDITION_AVAILABLE: &str = "ManagedClusterConditionAvailable";
    /// Condition: hub and agent clocks agree.
    pub const CONDITION_CLOCK_SYNCED: &str = "ManagedClusterConditionClockSynced";
    /// Condition: the agent's client certificate rotation state.
    pub const CONDITION_CLUSTER_CERTIFICATE_ROTATED: &str = "ClusterCertificateRotated";
    /// Condition: progress of the hub's cleanup of a deleting cluster.
    pub const CONDITION_DELETING: &str = "Deleting";
    /// Condition on `status.managedNamespaces[]`: the namespace exists on the spoke.
    pub const CONDITION_NAMESPACE_AVAILABLE: &str = "NamespaceAvailable";

    /// HubAccepted True.
    pub const REASON_HUB_CLUSTER_ADMIN_ACCEPTED: &str = "HubClusterAdminAccepted";
    /// HubAccepted False: accepted before, now `hubAcceptsClient` is false.
    pub const REASON_HUB_CLUSTER_ADMIN_DENIED: &str = "HubClusterAdminDenied";
    /// HubAccepted False: RBAC apply errors.
    pub const REASON_ERROR: &str = "Error";
    /// Joined True.
    pub const REASON_MANAGED_CLUSTER_JOINED: &str = "ManagedClusterJoined";
    /// Available True.
    pub const REASON_MANAGED_CLUSTER_AVAILABLE: &str = "ManagedClusterAvailable";
    /// Available False: the spoke apiserver health check fails.
    pub const REASON_KUBE_APISERVER_UNAVAILABLE: &str = "ManagedClusterKubeAPIServerUnavailable";
    /// Available Unknown: the lease was not renewed within the grace period.
    pub const REASON_LEASE_UPDATE_STOPPED: &str = "ManagedClusterLeaseUpdateStopped";
    /// ClockSynced True.
    pub const REASON_CLOCK_SYNCED: &str = "ManagedClusterClockSynced";
    /// ClockSynced False.
    pub const REASON_CLOCK_OUT_OF_SYNC: &str = "ManagedClusterClockOutOfSync";
    /// ClusterCertificateRotated True.
    pub const REASON_CLIENT_CERTIFICATE_UPDATED: &str = "ClientCertificateUpdated";
    /// ClusterCertificateRotated False.
    pub const REASON_CLIENT_CERTIFICATE_UPDATE_FAILED: &str = "ClientCertificateUpdateFailed";
    /// Deleting False: resources remain in the cluster namespace.
    pub const REASON_RESOURCE_REMAINING: &str = "ResourceRemaining";
    /// Deleting False: cleanup failed.
    pub const REASON_DELETING_ERROR: &str = "DeletingError";
    /// Deleting True: nothing left.
    pub const REASON_NO_RESOURCE: &str = "NoResource";
    /// NamespaceAvailable True.
    pub const REASON_NAMESPACE_APPLIED: &str = "NamespaceApplied";
    /// NamespaceAvailable False.
    pub const REASON_NAMESPACE_APPLY_FAILED: &str = "NamespaceApplyFailed";

    /// A managed (spoke) cluster registered with the hub. Cluster-scoped; the name is the cluster
    /// name and the name of its namespace on the hub.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedCluster {
        /// `cluster.open-cluster-management.io/v1`.
        #[serde(default)]
        pub api_version: ApiVersionTag<ManagedCluster>,
        /// `ManagedCluster`.
        #[serde(default)]
        pub kind: KindTag<ManagedCluster>,
        /// Standard object metadata.
        #[serde(default)]
        pub metadata: ObjectMeta,
        /// Desired state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub spec: Option<ManagedClusterSpec>,
        /// Observed state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub status: Option<ManagedClusterStatus>,
    }

    resource!(
        ManagedCluster,
        group = "cluster.open-cluster-management.io",
        version = "v1",
        kind = "ManagedCluster",
        plural = "managedclusters",
        singular = "managedcluster",
        short_names = ["mcl", "mcls"],
        namespaced = false,
        status_subresource = true,
        storage_version = true
    );

    /// `ManagedCluster.spec`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedClusterSpec {
        /// Spoke apiserver URLs (informational; the hub never dials them).
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub managed_cluster_client_configs: Vec<ClientConfig>,
        /// The hub's half of the double opt-in; setting it true needs `managedclusters/accept`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub hub_accepts_client: Option<bool>,
        /// Agent lease renew period in seconds (default 60).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub lease_duration_seconds: Option<i32>,
        /// Taints placement must tolerate to select the cluster.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub taints: Vec<Taint>,
    }

    /// One spoke apiserver endpoint.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ClientConfig {
        /// The URL (https).
        pub url: String,
        /// CA bundle for the URL (base64 in JSON).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(schema_with = "crate::api::meta::bytes_schema")]
        pub ca_bundle: Option<ByteString>,
    }

    /// A taint on a ManagedCluster.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct Taint {
        /// Taint key (qualified name, max 316 chars).
        pub key: String,
        /// Taint value (max 1024 chars).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub value: Option<String>,
        /// One of the `TAINT_EFFECT_*` values.
        #[schemars(extend("enum" = [TAINT_EFFECT_NO_SELECT, TAINT_EFFECT_PREFER_NO_SELECT, TAINT_EFFECT_NO_SELECT_IF_NEW]))]
        pub effect: String,
        /// When the taint was added (set by the webhook; `null` accepted on input).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub time_added: Option<Time>,
    }

    /// `ManagedCluster.status`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedClusterStatus {
        /// Conditions (`CONDITION_*`), a map keyed by `type`.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        #[schemars(schema_with = "crate::api::meta::conditions_schema")]
        pub conditions: Vec<Condition>,
        /// Sum of the nodes' `status.capacity`.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "BTreeMap::is_empty"
        )]
        pub capacity: BTreeMap<String, Quantity>,
        /// Sum of the schedulable nodes' `status.allocatable`.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "BTreeMap::is_empty"
        )]
        pub allocatable: BTreeMap<String, Quantity>,
        /// Spoke version.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub version: Option<ManagedClusterVersion>,
        /// Reported ClusterClaims.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub cluster_claims: Vec<ManagedClusterClaim>,
        /// Namespaces requested by clustersets' `spec.managedNamespaces` (map keyed by
        /// `clusterSet` + `name`).
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["clusterSet", "name"]))]
        pub managed_namespaces: Vec<ClusterSetManagedNamespaceConfig>,
    }

    /// `status.version`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedClusterVersion {
        /// Spoke apiserver GitVersion, e.g. `v1.30.2`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub kubernetes: Option<String>,
    }

    /// One reported ClusterClaim.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedClusterClaim {
        /// Claim name (1..253 chars).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<String>,
        /// Claim value (1..1024 chars).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub value: Option<String>,
    }

    /// One entry of `status.managedNamespaces`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ClusterSetManagedNamespaceConfig {
        /// Namespace name on the spoke.
        pub name: String,
        /// The ManagedClusterSet that asked for it.
        pub cluster_set: String,
        /// Conditions ([`CONDITION_NAMESPACE_AVAILABLE`]).
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        #[schemars(schema_with = "crate::api::meta::conditions_schema")]
        pub conditions: Vec<Condition>,
    }
}

/// `cluster.open-cluster-management.io/v1beta2`: ManagedClusterSet, ManagedClusterSetBinding.
pub mod v1beta2 {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use crate::api::meta::{
        ApiVersionTag, Condition, KindTag, LabelSelector, ObjectMeta, null_as_default,
    };

    /// Selector type: members carry label `cluster.open-cluster-management.io/clusterset=<set>`
    /// (the default).
    pub const SELECTOR_TYPE_EXCLUSIVE_CLUSTER_SET_LABEL: &str = "ExclusiveClusterSetLabel";
    /// Selector type: members match `labelSelector`.
    pub const SELECTOR_TYPE_LABEL_SELECTOR: &str = "LabelSelector";

    /// ManagedClusterSet condition: no cluster selected.
    pub const CONDITION_CLUSTER_SET_EMPTY: &str = "ClusterSetEmpty";
    /// ClusterSetEmpty True.
    pub const REASON_NO_CLUSTER_MATCHED: &str = "NoClusterMatched";
    /// ClusterSetEmpty False.
    pub const REASON_CLUSTERS_SELECTED: &str = "ClustersSelected";
    /// ManagedClusterSetBinding condition: the named set exists.
    pub const CONDITION_BOUND: &str = "Bound";
    /// Bound True.
    pub const REASON_CLUSTER_SET_BOUND: &str = "ClusterSetBound";
    /// Bound False.
    pub const REASON_CLUSTER_SET_NOT_FOUND: &str = "ClusterSetNotFound";

    /// A set of ManagedClusters. Cluster-scoped.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedClusterSet {
        /// `cluster.open-cluster-management.io/v1beta2`.
        #[serde(default)]
        pub api_version: ApiVersionTag<ManagedClusterSet>,
        /// `ManagedClusterSet`.
        #[serde(default)]
        pub kind: KindTag<ManagedClusterSet>,
        /// Standard object metadata.
        #[serde(default)]
        pub metadata: ObjectMeta,
        /// Desired state (server default `{clusterSelector: {selectorType:
        /// ExclusiveClusterSetLabel}}`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub spec: Option<ManagedClusterSetSpec>,
        /// Observed state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub status: Option<ManagedClusterSetStatus>,
    }

    resource!(
        ManagedClusterSet,
        group = "cluster.open-cluster-management.io",
        version = "v1beta2",
        kind = "ManagedClusterSet",
        plural = "managedclustersets",
        singular = "managedclusterset",
        short_names = ["mclset", "mclsets"],
        namespaced = false,
        status_subresource = true,
        storage_version = true
    );

    /// `ManagedClusterSet.spec`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedClusterSetSpec {
        /// How members are selected.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cluster_selector: Option<ManagedClusterSelector>,
        /// Namespaces to create on every member cluster (map keyed by `name`).
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
        pub managed_namespaces: Vec<ManagedNamespaceConfig>,
    }

    /// `spec.clusterSelector`.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedClusterSelector {
        /// `SELECTOR_TYPE_*` (server default `ExclusiveClusterSetLabel`; missing on input reads
        /// as that default).
        #[serde(default = "default_selector_type")]
        #[schemars(extend("enum" = [SELECTOR_TYPE_EXCLUSIVE_CLUSTER_SET_LABEL, SELECTOR_TYPE_LABEL_SELECTOR]))]
        pub selector_type: String,
        /// Label selector, only for `LabelSelector` (`{}` selects every cluster).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
        pub label_selector: Option<LabelSelector>,
    }

    /// The server default for the required field.
    impl Default for ManagedClusterSelector {
        fn default() -> Self {
            Self { selector_type: default_selector_type(), label_selector: None }
        }
    }

    fn default_selector_type() -> String {
        SELECTOR_TYPE_EXCLUSIVE_CLUSTER_SET_LABEL.to_owned()
    }

    /// One entry of `spec.managedNamespaces`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedNamespaceConfig {
        /// Namespace name (DNS label).
        pub name: String,
    }

    /// `ManagedClusterSet.status`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedClusterSetStatus {
        /// Conditions ([`CONDITION_CLUSTER_SET_EMPTY`]).
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        #[schemars(schema_with = "crate::api::meta::conditions_schema")]
        pub conditions: Vec<Condition>,
    }

    /// Makes a ManagedClusterSet usable by Placements in this namespace; the name must equal
    /// `spec.clusterSet`. Namespaced.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedClusterSetBinding {
        /// `cluster.open-cluster-management.io/v1beta2`.
        #[serde(default)]
        pub api_version: ApiVersionTag<ManagedClusterSetBinding>,
        /// `ManagedClusterSetBinding`.
        #[serde(default)]
        pub kind: KindTag<ManagedClusterSetBinding>,
        /// Standard object metadata.
        #[serde(default)]
        pub metadata: ObjectMeta,
        /// Desired state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub spec: Option<ManagedClusterSetBindingSpec>,
        /// Observed state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub status: Option<ManagedClusterSetBindingStatus>,
    }

    resource!(
        ManagedClusterSetBinding,
        group = "cluster.open-cluster-management.io",
        version = "v1beta2",
        kind = "ManagedClusterSetBinding",
        plural = "managedclustersetbindings",
        singular = "managedclustersetbinding",
        short_names = ["mclsetbinding", "mclsetbindings"],
        namespaced = true,
        status_subresource = true,
        storage_version = true
    );

    /// `ManagedClusterSetBinding.spec`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedClusterSetBindingSpec {
        /// The bound set's name (minLength 1; the webhook requires it to equal
        /// `metadata.name`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cluster_set: Option<String>,
    }

    /// `ManagedClusterSetBinding.status`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ManagedClusterSetBindingStatus {
        /// Conditions ([`CONDITION_BOUND`]).
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        #[schemars(schema_with = "crate::api::meta::conditions_schema")]
        pub conditions: Vec<Condition>,
    }
}

/// `cluster.open-cluster-management.io/v1beta1`: Placement, PlacementDecision.
pub mod v1beta1 {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use crate::api::meta::{
        ApiVersionTag, Condition, IntOrString, KindTag, LabelSelector, LabelSelectorRequirement,
        ObjectMeta, Time, null_as_default,
    };

    /// Prioritizer mode: the default prioritizers (Balance, Steady) plus `configurations`.
    pub const PRIORITIZER_MODE_ADDITIVE: &str = "Additive";
    /// Prioritizer mode: only `configurations`.
    pub const PRIORITIZER_MODE_EXACT: &str = "Exact";
    /// Score coordinate type: a built-in prioritizer named by `builtIn`.
    pub const SCORE_COORDINATE_TYPE_BUILT_IN: &str = "BuiltIn";
    /// Score coordinate type: an AddOnPlacementScore named by `addOn`.
    pub const SCORE_COORDINATE_TYPE_ADD_ON: &str = "AddOn";
    /// Built-in prioritizer: spread decisions across placements.
    pub const PRIORITIZER_BALANCE: &str = "Balance";
    /// Built-in prioritizer: keep current decisions.
    pub const PRIORITIZER_STEADY: &str = "Steady";
    /// Built-in prioritizer: allocatable CPU.
    pub const PRIORITIZER_RESOURCE_ALLOCATABLE_CPU: &str = "ResourceAllocatableCPU";
    /// Built-in prioritizer: allocatable memory.
    pub const PRIORITIZER_RESOURCE_ALLOCATABLE_MEMORY: &str = "ResourceAllocatableMemory";
    /// Built-in prioritizer named by the API but rejected by the scheduler.
    pub const PRIORITIZER_SPREAD: &str = "Spread";
    /// Toleration operator: key and value must match (the default).
    pub const TOLERATION_OP_EQUAL: &str = "Equal";
    /// Toleration operator: any value of the key.
    pub const TOLERATION_OP_EXISTS: &str = "Exists";
    /// `sortBy`: by cluster name (default; API-only).
    pub const SORT_BY_CLUSTER_NAME: &str = "ClusterName";
    /// `sortBy`: by score (API-only).
    pub const SORT_BY_SCORE: &str = "Score";
    /// Spread `topologyKeyType`: a cluster label.
    pub const TOPOLOGY_KEY_TYPE_LABEL: &str = "Label";
    /// Spread `topologyKeyType`: a cluster claim.
    pub const TOPOLOGY_KEY_TYPE_CLAIM: &str = "Claim";
    /// Spread `whenUnsatisfiable`: do not schedule.
    pub const WHEN_UNSATISFIABLE_DO_NOT_SCHEDULE: &str = "DoNotSchedule";
    /// Spread `whenUnsatisfiable`: schedule anyway (default).
    pub const WHEN_UNSATISFIABLE_SCHEDULE_ANYWAY: &str = "ScheduleAnyway";

    /// Placement condition: whether the desired decisions were scheduled.
    pub const CONDITION_PLACEMENT_SATISFIED: &str = "PlacementSatisfied";
    /// Placement condition: whether the configuration is valid.
    pub const CONDITION_PLACEMENT_MISCONFIGURED: &str = "PlacementMisconfigured";
    /// PlacementSatisfied False: no valid bindings in the namespace.
    pub const REASON_NO_MANAGED_CLUSTER_SET_BINDINGS: &str = "NoManagedClusterSetBindings";
    /// PlacementSatisfied False: no eligible set.
    pub const REASON_NO_INTERSECTION: &str = "NoIntersection";
    /// PlacementSatisfied False: no candidate clusters.
    pub const REASON_ALL_MANAGED_CLUSTER_SETS_EMPTY: &str = "AllManagedClusterSetsEmpty";
    /// PlacementSatisfied False: nothing selected.
    pub const REASON_NO_MANAGED_CLUSTER_MATCHED: &str = "NoManagedClusterMatched";
    /// PlacementSatisfied True.
    pub const REASON_ALL_DECISIONS_SCHEDULED: &str = "AllDecisionsScheduled";
    /// PlacementSatisfied False: fewer than `numberOfClusters`, or a scheduling error.
    pub const REASON_NOT_ALL_DECISIONS_SCHEDULED: &str = "NotAllDecisionsScheduled";
    /// PlacementMisconfigured True.
    pub const REASON_MISCONFIGURED: &str = "Misconfigured";
    /// PlacementMisconfigured False (sic, OCM's spelling).
    pub const REASON_SUCCEEDCONFIGURED: &str = "Succeedconfigured";

    /// Selects clusters from the sets bound to its namespace and publishes the result as
    /// PlacementDecisions. Namespaced.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct Placement {
        /// `cluster.open-cluster-management.io/v1beta1`.
        #[serde(default)]
        pub api_version: ApiVersionTag<Placement>,
        /// `Placement`.
        #[serde(default)]
        pub kind: KindTag<Placement>,
        /// Standard object metadata.
        #[serde(default)]
        pub metadata: ObjectMeta,
        /// Desired state (required; `{}` = every cluster of every bound set).
        pub spec: PlacementSpec,
        /// Observed state.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub status: Option<PlacementStatus>,
    }

    resource!(
        Placement,
        group = "cluster.open-cluster-management.io",
        version = "v1beta1",
        kind = "Placement",
        plural = "placements",
        singular = "placement",
        short_names = [],
        namespaced = true,
        status_subresource = true,
        storage_version = true
    );

    /// `Placement.spec`; all fields are ANDed.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct PlacementSpec {
        /// Restrict to these bound sets (empty = all bound sets).
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub cluster_sets: Vec<String>,
        /// Desired number of clusters (unset = all feasible).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub number_of_clusters: Option<i32>,
        /// ORed cluster predicates (empty = all pass).
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub predicates: Vec<ClusterPredicate>,
        /// Prioritizers and weights.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub prioritizer_policy: Option<PrioritizerPolicy>,
        /// Spread constraints (API-only, not implemented by the scheduler).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub spread_policy: Option<SpreadPolicy>,
        /// Tolerations of cluster taints.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub tolerations: Vec<Toleration>,
        /// Decision groups.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub decision_strategy: Option<DecisionStrategy>,
        /// `SORT_BY_*` (API-only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("enum" = [SORT_BY_CLUSTER_NAME, SORT_BY_SCORE]))]
        pub sort_by: Option<String>,
        /// Score refresh rate limit, `^[0-9]+[hms]$` (API-only, default `1m`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub score_rate_limit: Option<String>,
    }

    /// One predicate.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ClusterPredicate {
        /// The selector a cluster must match.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub required_cluster_selector: Option<ClusterSelector>,
    }

    /// Label, claim and CEL selectors, ANDed.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ClusterSelector {
        /// Selector on cluster labels.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
        pub label_selector: Option<LabelSelector>,
        /// Selector on `status.clusterClaims` (name -> value).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub claim_selector: Option<ClusterClaimSelector>,
        /// CEL expressions over the ManagedCluster.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cel_selector: Option<ClusterCelSelector>,
    }

    /// Selector on cluster claims.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ClusterClaimSelector {
        /// Requirements, ANDed.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub match_expressions: Vec<LabelSelectorRequirement>,
    }

    /// CEL selector.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ClusterCelSelector {
        /// Expressions, ANDed.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub cel_expressions: Vec<String>,
    }

    /// `spec.prioritizerPolicy`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct PrioritizerPolicy {
        /// `PRIORITIZER_MODE_*` (default `Additive`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub mode: Option<String>,
        /// Prioritizers and their weights.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub configurations: Vec<PrioritizerConfig>,
    }

    /// One prioritizer.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct PrioritizerConfig {
        /// Which score.
        pub score_coordinate: ScoreCoordinate,
        /// Weight, -10..10 (default 1; 0 disables).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub weight: Option<i32>,
    }

    /// Where a score comes from.
    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ScoreCoordinate {
        /// `SCORE_COORDINATE_TYPE_*` (server default `BuiltIn`; missing reads as that).
        #[serde(rename = "type", default = "default_score_coordinate_type")]
        #[schemars(extend("enum" = [SCORE_COORDINATE_TYPE_BUILT_IN, SCORE_COORDINATE_TYPE_ADD_ON]))]
        pub type_: String,
        /// Built-in prioritizer name (`PRIORITIZER_*`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub built_in: Option<String>,
        /// AddOnPlacementScore coordinates.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub add_on: Option<AddOnScore>,
    }

    /// The server default for the required field.
    impl Default for ScoreCoordinate {
        fn default() -> Self {
            Self { type_: default_score_coordinate_type(), built_in: None, add_on: None }
        }
    }

    fn default_score_coordinate_type() -> String {
        SCORE_COORDINATE_TYPE_BUILT_IN.to_owned()
    }

    /// An AddOnPlacementScore item.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct AddOnScore {
        /// AddOnPlacementScore name (in the cluster namespace).
        pub resource_name: String,
        /// Item name within `status.scores`.
        pub score_name: String,
    }

    /// `spec.spreadPolicy` (API-only).
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct SpreadPolicy {
        /// Up to 8 constraints.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub spread_constraints: Vec<SpreadConstraintsTerm>,
    }

    /// One spread constraint (API-only).
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct SpreadConstraintsTerm {
        /// Label or claim name.
        pub topology_key: String,
        /// `TOPOLOGY_KEY_TYPE_*`.
        #[schemars(extend("enum" = [TOPOLOGY_KEY_TYPE_LABEL, TOPOLOGY_KEY_TYPE_CLAIM]))]
        pub topology_key_type: String,
        /// Maximum skew (default 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_skew: Option<i32>,
        /// `WHEN_UNSATISFIABLE_*` (default `ScheduleAnyway`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("enum" = [WHEN_UNSATISFIABLE_DO_NOT_SCHEDULE, WHEN_UNSATISFIABLE_SCHEDULE_ANYWAY]))]
        pub when_unsatisfiable: Option<String>,
    }

    /// A toleration of a cluster taint (OCM's own shape, not `corev1.Toleration`).
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct Toleration {
        /// Taint key (empty = all keys, requires `Exists`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub key: Option<String>,
        /// `TOLERATION_OP_*` (default `Equal`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub operator: Option<String>,
        /// Taint value (empty with `Exists`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub value: Option<String>,
        /// `cluster::v1::TAINT_EFFECT_*` (empty = all effects).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("enum" = [crate::api::cluster::v1::TAINT_EFFECT_NO_SELECT, crate::api::cluster::v1::TAINT_EFFECT_PREFER_NO_SELECT, crate::api::cluster::v1::TAINT_EFFECT_NO_SELECT_IF_NEW]))]
        pub effect: Option<String>,
        /// Tolerated for this long after the taint's `timeAdded`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub toleration_seconds: Option<i64>,
    }

    /// `spec.decisionStrategy`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct DecisionStrategy {
        /// How selected clusters are grouped.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub group_strategy: Option<GroupStrategy>,
    }

    /// `decisionStrategy.groupStrategy`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct GroupStrategy {
        /// Named groups, matched in order.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub decision_groups: Vec<DecisionGroup>,
        /// Group size: integer or percentage (default `"100%"`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub clusters_per_decision_group: Option<IntOrString>,
    }

    /// One named decision group.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct DecisionGroup {
        /// Group name.
        pub group_name: String,
        /// Which selected clusters belong to it.
        pub group_cluster_selector: GroupClusterSelector,
    }

    /// Label and claim selectors (no CEL), ANDed.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct GroupClusterSelector {
        /// Selector on cluster labels.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
        pub label_selector: Option<LabelSelector>,
        /// Selector on cluster claims.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub claim_selector: Option<ClusterClaimSelector>,
    }

    /// `Placement.status`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct PlacementStatus {
        /// Number of selected clusters.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub number_of_selected_clusters: Option<i32>,
        /// The decision groups.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub decision_groups: Vec<DecisionGroupStatus>,
        /// Conditions ([`CONDITION_PLACEMENT_SATISFIED`], [`CONDITION_PLACEMENT_MISCONFIGURED`]).
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        #[schemars(schema_with = "crate::api::meta::conditions_schema")]
        pub conditions: Vec<Condition>,
        /// Last score refresh (API-only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub last_score_update_time: Option<Time>,
    }

    /// One decision group in `status.decisionGroups`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct DecisionGroupStatus {
        /// Group index.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub decision_group_index: Option<i32>,
        /// Group name (`""` for unnamed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub decision_group_name: Option<String>,
        /// Names of the group's PlacementDecision objects.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub decisions: Vec<String>,
        /// Number of clusters in the group.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cluster_count: Option<i32>,
    }

    /// A slice (at most 100 clusters) of a Placement's decision. Namespaced; status only.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct PlacementDecision {
        /// `cluster.open-cluster-management.io/v1beta1`.
        #[serde(default)]
        pub api_version: ApiVersionTag<PlacementDecision>,
        /// `PlacementDecision`.
        #[serde(default)]
        pub kind: KindTag<PlacementDecision>,
        /// Standard object metadata (labels [`crate::api::cluster::LABEL_PLACEMENT`] and the
        /// decision group labels).
        #[serde(default)]
        pub metadata: ObjectMeta,
        /// The decisions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub status: Option<PlacementDecisionStatus>,
    }

    resource!(
        PlacementDecision,
        group = "cluster.open-cluster-management.io",
        version = "v1beta1",
        kind = "PlacementDecision",
        plural = "placementdecisions",
        singular = "placementdecision",
        short_names = [],
        namespaced = true,
        status_subresource = true,
        storage_version = true
    );

    /// `PlacementDecision.status`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct PlacementDecisionStatus {
        /// Selected clusters (required, may be empty).
        pub decisions: Vec<ClusterDecision>,
    }

    /// One selected cluster.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ClusterDecision {
        /// Cluster name.
        pub cluster_name: String,
        /// Reason (the scheduler writes `""`).
        pub reason: String,
        /// Score (API-only).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub score: Option<i64>,
    }
}

/// `cluster.open-cluster-management.io/v1alpha1`: AddOnPlacementScore, ClusterClaim and the
/// shared rollout strategy types.
pub mod v1alpha1 {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use crate::api::meta::{
        ApiVersionTag, Condition, IntOrString, KindTag, ObjectMeta, Time, null_as_default,
    };

    /// Rollout type: every cluster at once (default).
    pub const ROLLOUT_ALL: &str = "All";
    /// Rollout type: mandatory groups first, then a moving window over all clusters.
    pub const ROLLOUT_PROGRESSIVE: &str = "Progressive";
    /// Rollout type: mandatory groups first, then group by group.
    pub const ROLLOUT_PROGRESSIVE_PER_GROUP: &str = "ProgressivePerGroup";
    /// `progressDeadline` value: wait forever.
    pub const PROGRESS_DEADLINE_NONE: &str = "None";

    /// A score published by an addon for one cluster (lives in the cluster namespace); read by
    /// placement `AddOn` prioritizers. Status only.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct AddOnPlacementScore {
        /// `cluster.open-cluster-management.io/v1alpha1`.
        #[serde(default)]
        pub api_version: ApiVersionTag<AddOnPlacementScore>,
        /// `AddOnPlacementScore`.
        #[serde(default)]
        pub kind: KindTag<AddOnPlacementScore>,
        /// Standard object metadata.
        #[serde(default)]
        pub metadata: ObjectMeta,
        /// The scores.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub status: Option<AddOnPlacementScoreStatus>,
    }

    resource!(
        AddOnPlacementScore,
        group = "cluster.open-cluster-management.io",
        version = "v1alpha1",
        kind = "AddOnPlacementScore",
        plural = "addonplacementscores",
        singular = "addonplacementscore",
        short_names = [],
        namespaced = true,
        status_subresource = true,
        storage_version = true
    );

    /// `AddOnPlacementScore.status`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct AddOnPlacementScoreStatus {
        /// Conditions.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        #[schemars(schema_with = "crate::api::meta::conditions_schema")]
        pub conditions: Vec<Condition>,
        /// Scores (map keyed by `name`).
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
        pub scores: Vec<AddOnPlacementScoreItem>,
        /// Expiry (none = never).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub valid_until: Option<Time>,
    }

    /// One score.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct AddOnPlacementScoreItem {
        /// Score name.
        pub name: String,
        /// Score, -100..100.
        pub value: i32,
    }

    /// A fact about a spoke cluster, reported into `ManagedCluster.status.clusterClaims`.
    /// Cluster-scoped, lives on the spoke; no status.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ClusterClaim {
        /// `cluster.open-cluster-management.io/v1alpha1`.
        #[serde(default)]
        pub api_version: ApiVersionTag<ClusterClaim>,
        /// `ClusterClaim`.
        #[serde(default)]
        pub kind: KindTag<ClusterClaim>,
        /// Standard object metadata; the name is the claim name.
        #[serde(default)]
        pub metadata: ObjectMeta,
        /// The claim.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub spec: Option<ClusterClaimSpec>,
    }

    resource!(
        ClusterClaim,
        group = "cluster.open-cluster-management.io",
        version = "v1alpha1",
        kind = "ClusterClaim",
        plural = "clusterclaims",
        singular = "clusterclaim",
        short_names = [],
        namespaced = false,
        status_subresource = false,
        storage_version = true
    );

    /// `ClusterClaim.spec`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct ClusterClaimSpec {
        /// Claim value (1..1024 chars).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub value: Option<String>,
    }

    /// How a change rolls out over a placement's decision groups (used by
    /// ManifestWorkReplicaSet and ClusterManagementAddOn install strategies).
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct RolloutStrategy {
        /// `ROLLOUT_*` (default `All`).
        #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
        #[schemars(extend("enum" = [ROLLOUT_ALL, ROLLOUT_PROGRESSIVE, ROLLOUT_PROGRESSIVE_PER_GROUP]))]
        pub type_: Option<String>,
        /// Settings for `All`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub all: Option<RolloutConfig>,
        /// Settings for `Progressive`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub progressive: Option<RolloutProgressive>,
        /// Settings for `ProgressivePerGroup`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub progressive_per_group: Option<RolloutProgressivePerGroup>,
    }

    /// Timing and failure tolerance shared by every rollout type (Go's `RolloutConfig`, which
    /// `RolloutAll` consists of).
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct RolloutConfig {
        /// Soak time after success (duration, default `0`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub min_success_time: Option<String>,
        /// `^(([0-9])+[h|m|s])|None$` (default `None`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub progress_deadline: Option<String>,
        /// Tolerated failures: integer or percentage (default 0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_failures: Option<IntOrString>,
    }

    /// `rolloutStrategy.progressive`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct RolloutProgressive {
        /// Soak time after success (duration, default `0`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub min_success_time: Option<String>,
        /// `^(([0-9])+[h|m|s])|None$` (default `None`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub progress_deadline: Option<String>,
        /// Tolerated failures: integer or percentage (default 0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_failures: Option<IntOrString>,
        /// Groups rolled first, with zero tolerated failures.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub mandatory_decision_groups: Vec<MandatoryDecisionGroup>,
        /// Window size: integer or percentage.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_concurrency: Option<IntOrString>,
    }

    /// `rolloutStrategy.progressivePerGroup`.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct RolloutProgressivePerGroup {
        /// Soak time after success (duration, default `0`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub min_success_time: Option<String>,
        /// `^(([0-9])+[h|m|s])|None$` (default `None`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub progress_deadline: Option<String>,
        /// Tolerated failures per group: integer or percentage (default 0).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub max_failures: Option<IntOrString>,
        /// Groups rolled first.
        #[serde(
            default,
            deserialize_with = "null_as_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        pub mandatory_decision_groups: Vec<MandatoryDecisionGroup>,
    }

    /// A decision group named by name or index.
    #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[schemars(inline)]
    #[serde(rename_all = "camelCase")]
    pub struct MandatoryDecisionGroup {
        /// Group name (matched first).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub group_name: Option<String>,
        /// Group index.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub group_index: Option<i32>,
    }
}
