//! `cluster.open-cluster-management.io/v1beta2`: ManagedClusterSet, ManagedClusterSetBinding.

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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::meta::conditions_schema")]
    pub conditions: Vec<Condition>,
}
