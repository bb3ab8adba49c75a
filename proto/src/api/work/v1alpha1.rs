//! `work.open-cluster-management.io/v1alpha1`: ManifestWorkReplicaSet.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::v1::ManifestWorkSpec;
use crate::api::cluster::v1alpha1::RolloutStrategy;
use crate::api::meta::{
    ApiVersionTag, Condition, KindTag, LabelSelector, ObjectMeta, Time, null_as_default,
};

/// failureStrategy: a rollout whose failures exceed maxFailures stops (enhancement 229).
pub const FAILURE_STRATEGY_ABORT_ALL: &str = "AbortAll";
/// failureStrategy: as AbortAll, and the clusters already updated return to the current
/// revision (the hub's own).
pub const FAILURE_STRATEGY_ROLLBACK_ALL: &str = "RollbackAll";
/// The default `revisionHistoryLimit`.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

/// Condition (enhancement 229): how the rollout of the update revision goes.
pub const CONDITION_PROGRESSING: &str = "Progressing";
/// Progressing True: a new revision is rolling out.
pub const REASON_NEW_REVISION_CREATED: &str = "NewRevisionCreated";
/// Progressing True: every selected cluster runs the update revision.
pub const REASON_NEW_MANIFEST_WORK_AVAILABLE: &str = "NewManifestWorkAvailable";
/// Progressing False: failures exceeded maxFailures and the rollout stopped.
pub const REASON_ROLLOUT_ABORTED: &str = "RolloutAborted";
/// Progressing False: the rollout stopped and the updated clusters went back.
pub const REASON_ROLLED_BACK: &str = "RolledBack";
/// Progressing False: the set is paused.
pub const REASON_ROLLOUT_PAUSED: &str = "RolloutPaused";
/// PlacementRolledOut False: the rollout stopped on failures.
pub const REASON_ROLLOUT_DEGRADED: &str = "RolloutDegraded";
/// ManifestworkApplied False: a cluster's work cannot be rendered from the template.
pub const REASON_RENDER_FAILED: &str = "RenderFailed";

/// Cascade deletion: drop the finalizer at once, works deleted in the background
/// (default).
pub const CASCADE_DELETION_BACKGROUND: &str = "Background";
/// Cascade deletion: keep the MWRS until its works are gone.
pub const CASCADE_DELETION_FOREGROUND: &str = "Foreground";

/// Condition: the placements exist and have decisions.
pub const CONDITION_PLACEMENT_VERIFIED: &str = "PlacementVerified";
/// Condition: the rollout finished.
pub const CONDITION_PLACEMENT_ROLLED_OUT: &str = "PlacementRolledOut";
/// Condition: the works are applied (sic, lower-case `w`).
pub const CONDITION_MANIFESTWORK_APPLIED: &str = "ManifestworkApplied";
/// PlacementVerified / ManifestworkApplied True.
pub const REASON_AS_EXPECTED: &str = "AsExpected";
/// False: not as expected.
pub const REASON_NOT_AS_EXPECTED: &str = "NotAsExpected";
/// PlacementVerified False: a Placement is missing.
pub const REASON_PLACEMENT_DECISION_NOT_FOUND: &str = "PlacementDecisionNotFound";
/// False: no decisions.
pub const REASON_PLACEMENT_DECISION_EMPTY: &str = "PlacementDecisionEmpty";
/// PlacementRolledOut True.
pub const REASON_COMPLETE: &str = "Complete";
/// PlacementRolledOut False.
pub const REASON_PROGRESSING: &str = "Progressing";
/// ManifestworkApplied False: works progressing.
pub const REASON_PROCESSING: &str = "Processing";
/// ManifestworkApplied False: the owner label value would be invalid.
pub const REASON_INVALID_MANIFEST_WORK_NAME: &str = "InvalidManifestWorkName";

/// Fans a ManifestWork template out to the clusters of one or more Placements. Namespaced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkReplicaSet {
    /// `work.open-cluster-management.io/v1alpha1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<ManifestWorkReplicaSet>,
    /// `ManifestWorkReplicaSet`.
    #[serde(default)]
    pub kind: KindTag<ManifestWorkReplicaSet>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ManifestWorkReplicaSetSpec>,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ManifestWorkReplicaSetStatus>,
}

resource!(
    ManifestWorkReplicaSet,
    group = "work.open-cluster-management.io",
    version = "v1alpha1",
    kind = "ManifestWorkReplicaSet",
    plural = "manifestworkreplicasets",
    singular = "manifestworkreplicaset",
    short_names = ["mwrs"],
    namespaced = true,
    status_subresource = true,
    storage_version = true
);

/// `ManifestWorkReplicaSet.spec`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkReplicaSetSpec {
    /// The ManifestWork spec created in each selected cluster namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_work_template: Option<ManifestWorkSpec>,
    /// Placements in the same namespace (at least one).
    pub placement_refs: Vec<LocalPlacementReference>,
    /// `CASCADE_DELETION_*` (server default `Background`; missing reads as that).
    #[serde(default = "default_cascade_deletion_policy")]
    #[schemars(extend("enum" = [CASCADE_DELETION_BACKGROUND, CASCADE_DELETION_FOREGROUND]))]
    pub cascade_deletion_policy: String,
    /// Old revisions kept for rollback (default [`DEFAULT_REVISION_HISTORY_LIMIT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = DEFAULT_REVISION_HISTORY_LIMIT))]
    pub revision_history_limit: Option<i32>,
    /// While true no cluster is moved to another revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Patches of the rendered work, per selected clusters, applied in order.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<Override>,
}

/// One override: a patch of the ManifestWork spec of the clusters its selector matches.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct Override {
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The clusters it applies to (by label); none means every cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub cluster_selector: Option<LabelSelector>,
    /// A JSON merge patch of the ManifestWork spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-preserve-unknown-fields" = true), with = "serde_json::Map<String, serde_json::Value>")]
    pub merge_patch: Option<serde_json::Value>,
    /// A JSON patch (RFC 6902) of the ManifestWork spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "json_patch_schema")]
    pub json_patch: Option<Vec<serde_json::Value>>,
}

/// A JSON patch as the extension schema declares it: a list of free-form operations.
fn json_patch_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "x-kubernetes-list-type": "atomic",
    })
}

/// The server default for the required field.
impl Default for ManifestWorkReplicaSetSpec {
    fn default() -> Self {
        Self {
            manifest_work_template: None,
            placement_refs: Vec::new(),
            cascade_deletion_policy: default_cascade_deletion_policy(),
            revision_history_limit: None,
            paused: None,
            overrides: Vec::new(),
        }
    }
}

fn default_cascade_deletion_policy() -> String {
    CASCADE_DELETION_BACKGROUND.to_owned()
}

/// One placement reference.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct LocalPlacementReference {
    /// Placement name (same namespace).
    pub name: String,
    /// Rollout over its decision groups (server default `{type: All, all:
    /// {progressDeadline: None}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_strategy: Option<PlacementRolloutStrategy>,
}

/// OCM's rollout strategy plus what a rollout does when failures exceed maxFailures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PlacementRolloutStrategy {
    /// The rollout type and its parameters.
    #[serde(flatten)]
    pub strategy: RolloutStrategy,
    /// `FAILURE_STRATEGY_*`; unset: the rollout stops adding clusters, as OCM's does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [FAILURE_STRATEGY_ABORT_ALL, FAILURE_STRATEGY_ROLLBACK_ALL]))]
    pub failure_strategy: Option<String>,
}

/// `ManifestWorkReplicaSet.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkReplicaSetStatus {
    /// Conditions (`CONDITION_*`).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::meta::conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Per-placement summaries (JSON key is singular).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub placement_summary: Vec<PlacementSummary>,
    /// Totals over all placements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<ManifestWorkReplicaSetSummary>,
    /// The revision every selected cluster last ran successfully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,
    /// The revision of the current template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_revision: Option<String>,
    /// When the rollout of the update revision was aborted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aborted_time: Option<Time>,
    /// Added to the template hash when two templates' revision names collide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// Which revision each cluster's work runs.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub cluster_revisions: Vec<ClusterRevisions>,
}

/// The clusters whose work runs one revision.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRevisions {
    /// The revision (its hash).
    #[serde(default)]
    pub revision: String,
    /// The clusters, by name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub clusters: Vec<String>,
}

/// One placement's summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSummary {
    /// Placement name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// E.g. `"3 (20 / 30 clusters applied)"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_decision_groups: Option<String>,
    /// Counts for this placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<ManifestWorkReplicaSetSummary>,
}

/// Work counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkReplicaSetSummary {
    /// Works matching the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<i64>,
    /// Works progressing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressing: Option<i64>,
    /// Works available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available: Option<i64>,
    /// Works degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub degraded: Option<i64>,
    /// Works applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<i64>,
    /// Desired number of works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_total: Option<i64>,
    /// Works updated to the current template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<i64>,
}
