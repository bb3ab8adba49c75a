//! `cluster.open-cluster-management.io/v1alpha1`: AddOnPlacementScore, ClusterClaim and the shared rollout strategy types.

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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::meta::conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Scores (map keyed by `name`).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
