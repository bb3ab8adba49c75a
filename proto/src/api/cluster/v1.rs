//! `cluster.open-cluster-management.io/v1`: ManagedCluster.

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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub managed_cluster_client_configs: Vec<ClientConfig>,
    /// The hub's half of the double opt-in; setting it true needs `managedclusters/accept`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub_accepts_client: Option<bool>,
    /// Agent lease renew period in seconds (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<i32>,
    /// Taints placement must tolerate to select the cluster.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub cluster_claims: Vec<ManagedClusterClaim>,
    /// Namespaces requested by clustersets' `spec.managedNamespaces` (map keyed by
    /// `clusterSet` + `name`).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::meta::conditions_schema")]
    pub conditions: Vec<Condition>,
}
