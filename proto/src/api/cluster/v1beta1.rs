//! `cluster.open-cluster-management.io/v1beta1`: Placement, PlacementDecision.

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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub cluster_sets: Vec<String>,
    /// Desired number of clusters (unset = all feasible).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_of_clusters: Option<i32>,
    /// ORed cluster predicates (empty = all pass).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub predicates: Vec<ClusterPredicate>,
    /// Prioritizers and weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prioritizer_policy: Option<PrioritizerPolicy>,
    /// Spread constraints (API-only, not implemented by the scheduler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_policy: Option<SpreadPolicy>,
    /// Tolerations of cluster taints.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// CEL selector.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCelSelector {
    /// Expressions, ANDed.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub decision_groups: Vec<DecisionGroupStatus>,
    /// Conditions ([`CONDITION_PLACEMENT_SATISFIED`], [`CONDITION_PLACEMENT_MISCONFIGURED`]).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
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
