//! `work.open-cluster-management.io/v1`: ManifestWork, AppliedManifestWork.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::api::meta::Manifest;
use crate::api::meta::{ApiVersionTag, Condition, KindTag, ObjectMeta, Time, null_as_default};

/// Delete propagation: delete applied resources, then the work (default).
pub const PROPAGATION_FOREGROUND: &str = "Foreground";
/// Delete propagation: leave every applied resource.
pub const PROPAGATION_ORPHAN: &str = "Orphan";
/// Delete propagation: leave the resources matching `selectivelyOrphans.orphaningRules`.
pub const PROPAGATION_SELECTIVELY_ORPHAN: &str = "SelectivelyOrphan";
/// Feedback rule type: the well-known status fields of the kind.
pub const FEEDBACK_WELL_KNOWN_STATUS: &str = "WellKnownStatus";
/// Feedback rule type: the given JSON paths.
pub const FEEDBACK_JSON_PATHS: &str = "JSONPaths";
/// Update strategy: create or update (default).
pub const UPDATE_STRATEGY_UPDATE: &str = "Update";
/// Update strategy: create only.
pub const UPDATE_STRATEGY_CREATE_ONLY: &str = "CreateOnly";
/// Update strategy: server-side apply.
pub const UPDATE_STRATEGY_SERVER_SIDE_APPLY: &str = "ServerSideApply";
/// Update strategy: read only (feedback only).
pub const UPDATE_STRATEGY_READ_ONLY: &str = "ReadOnly";
/// Ignore-field condition: ignore when the object exists on the spoke (default).
pub const IGNORE_FIELDS_ON_SPOKE_PRESENT: &str = "OnSpokePresent";
/// Ignore-field condition: ignore spoke-side changes until the manifest changes.
pub const IGNORE_FIELDS_ON_SPOKE_CHANGE: &str = "OnSpokeChange";
/// Condition rule type: built-in conditions (`Complete` for Jobs and Pods).
pub const CONDITION_RULE_WELL_KNOWN_CONDITIONS: &str = "WellKnownConditions";
/// Condition rule type: CEL expressions.
pub const CONDITION_RULE_CEL: &str = "CEL";
/// Feedback scrape type: poll (default).
pub const FEEDBACK_SCRAPE_POLL: &str = "Poll";
/// Feedback scrape type: watch.
pub const FEEDBACK_SCRAPE_WATCH: &str = "Watch";
/// Executor subject type (the only one).
pub const EXECUTOR_SUBJECT_SERVICE_ACCOUNT: &str = "ServiceAccount";
/// Feedback value type.
pub const FIELD_VALUE_INTEGER: &str = "Integer";
/// Feedback value type.
pub const FIELD_VALUE_STRING: &str = "String";
/// Feedback value type.
pub const FIELD_VALUE_BOOLEAN: &str = "Boolean";
/// Feedback value type (only with feature RawFeedbackJsonString).
pub const FIELD_VALUE_JSON_RAW: &str = "JsonRaw";

/// Work and manifest condition: applied.
pub const CONDITION_APPLIED: &str = "Applied";
/// Work and manifest condition: available.
pub const CONDITION_AVAILABLE: &str = "Available";
/// Condition produced only by condition rules.
pub const CONDITION_PROGRESSING: &str = "Progressing";
/// Condition produced only by condition rules.
pub const CONDITION_DEGRADED: &str = "Degraded";
/// Condition produced by condition rules; True freezes the work.
pub const CONDITION_COMPLETE: &str = "Complete";
/// Work condition: the hub work is being deleted.
pub const CONDITION_DELETING: &str = "Deleting";
/// Manifest condition: status feedback state.
pub const CONDITION_STATUS_FEEDBACK_SYNCED: &str = "StatusFeedbackSynced";

/// Work Applied True.
pub const REASON_APPLIED_MANIFEST_WORK_COMPLETE: &str = "AppliedManifestWorkComplete";
/// Work Applied False.
pub const REASON_APPLIED_MANIFEST_WORK_FAILED: &str = "AppliedManifestWorkFailed";
/// Manifest Applied True.
pub const REASON_APPLIED_MANIFEST_COMPLETE: &str = "AppliedManifestComplete";
/// Manifest Applied False.
pub const REASON_APPLIED_MANIFEST_FAILED: &str = "AppliedManifestFailed";
/// Manifest Applied False: SSA ignore-field error.
pub const REASON_APPLIED_MANIFEST_SSA_IGNORE_FIELD_ERROR: &str =
    "AppliedManifestSSAIgnoreFieldError";
/// Manifest Available True.
pub const REASON_RESOURCE_AVAILABLE: &str = "ResourceAvailable";
/// Manifest Available False.
pub const REASON_RESOURCE_NOT_AVAILABLE: &str = "ResourceNotAvailable";
/// Manifest Available Unknown.
pub const REASON_FETCHING_RESOURCE_FAILED: &str = "FetchingResourceFailed";
/// Manifest Available Unknown.
pub const REASON_INCOMPLETE_RESOURCE_META: &str = "IncompleteResourceMeta";
/// Work Available True.
pub const REASON_RESOURCES_AVAILABLE: &str = "ResourcesAvailable";
/// Work Available False.
pub const REASON_RESOURCES_NOT_AVAILABLE: &str = "ResourcesNotAvailable";
/// Work Available Unknown.
pub const REASON_RESOURCES_STATUS_UNKNOWN: &str = "ResourcesStatusUnknown";
/// StatusFeedbackSynced True.
pub const REASON_STATUS_FEEDBACK_SYNCED: &str = "StatusFeedbackSynced";
/// StatusFeedbackSynced True without rules.
pub const REASON_NO_STATUS_FEEDBACK_SYNCED: &str = "NoStatusFeedbackSynced";
/// StatusFeedbackSynced False.
pub const REASON_STATUS_FEEDBACK_SYNC_FAILED: &str = "StatusFeedbackSyncFailed";
/// Manifest rule condition: evaluated.
pub const REASON_CONDITION_RULE_EVALUATED: &str = "ConditionRuleEvaluated";
/// Manifest rule condition: invalid rule.
pub const REASON_CONDITION_RULE_INVALID: &str = "ConditionRuleInvalid";
/// Manifest rule condition: expression error.
pub const REASON_CONDITION_RULE_EXPRESSION_ERROR: &str = "ConditionRuleExpressionError";
/// Manifest rule condition: internal error.
pub const REASON_CONDITION_RULE_INTERNAL_ERROR: &str = "ConditionRuleInternalError";
/// Work-level rule-generated conditions.
pub const REASON_CONDITION_RULES_AGGREGATED: &str = "ConditionRulesAggregated";
/// Deleting True.
pub const REASON_WORK_DELETING: &str = "WorkDeleting";

/// Resources for one managed cluster, stored in the cluster's namespace on the hub and
/// applied by its work agent. Namespaced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWork {
    /// `work.open-cluster-management.io/v1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<ManifestWork>,
    /// `ManifestWork`.
    #[serde(default)]
    pub kind: KindTag<ManifestWork>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ManifestWorkSpec>,
    /// Observed state (written by the agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ManifestWorkStatus>,
}

resource!(
    ManifestWork,
    group = "work.open-cluster-management.io",
    version = "v1",
    kind = "ManifestWork",
    plural = "manifestworks",
    singular = "manifestwork",
    short_names = [],
    namespaced = true,
    status_subresource = true,
    storage_version = true
);

/// `ManifestWork.spec` (also the MWRS `manifestWorkTemplate` and AddOnTemplate `agentSpec`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkSpec {
    /// The manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<ManifestsTemplate>,
    /// What happens to applied resources on deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DeleteOption>,
    /// Per-resource options.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub manifest_configs: Vec<ManifestConfigOption>,
    /// Identity the agent applies as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<ManifestWorkExecutor>,
}

/// `spec.workload`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestsTemplate {
    /// Embedded Kubernetes objects, kept verbatim.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<Manifest>,
}

/// `spec.deleteOption`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOption {
    /// `PROPAGATION_*` (default `Foreground`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [PROPAGATION_FOREGROUND, PROPAGATION_ORPHAN, PROPAGATION_SELECTIVELY_ORPHAN]))]
    pub propagation_policy: Option<String>,
    /// Resources kept on deletion with `SelectivelyOrphan` (JSON key is plural).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selectively_orphans: Option<SelectivelyOrphan>,
    /// Delete the work this long after its `Complete` condition turned True.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i64>,
}

/// `deleteOption.selectivelyOrphans`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct SelectivelyOrphan {
    /// Resources to orphan.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub orphaning_rules: Vec<OrphaningRule>,
}

/// Identifies one resource (`group` "" = core, `namespace` "" = cluster-scoped).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ResourceIdentifier {
    /// API group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Plural resource.
    pub resource: String,
    /// Name.
    pub name: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// An orphaning rule has the shape of a [`ResourceIdentifier`].
pub type OrphaningRule = ResourceIdentifier;

/// One entry of `spec.manifestConfigs`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestConfigOption {
    /// The resource these options are for.
    pub resource_identifier: ResourceIdentifier,
    /// Status feedback to collect.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub feedback_rules: Vec<FeedbackRule>,
    /// How to apply it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// Conditions to compute (map keyed by `condition`).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["condition"]))]
    pub condition_rules: Vec<ConditionRule>,
    /// `FEEDBACK_SCRAPE_*` (default `Poll`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [FEEDBACK_SCRAPE_POLL, FEEDBACK_SCRAPE_WATCH]))]
    pub feedback_scrape_type: Option<String>,
}

/// One feedback rule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackRule {
    /// `FEEDBACK_*`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = [FEEDBACK_WELL_KNOWN_STATUS, FEEDBACK_JSON_PATHS]))]
    pub type_: String,
    /// Paths for `JSONPaths` (map keyed by `name`).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub json_paths: Vec<JsonPath>,
}

/// A named JSON path relative to the object's `.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct JsonPath {
    /// Feedback value name.
    pub name: String,
    /// Resource version to read (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The JSON path.
    pub path: String,
}

/// `manifestConfigs[].updateStrategy`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// `UPDATE_STRATEGY_*` (server default `Update`; missing reads as that).
    #[serde(rename = "type", default = "default_update_strategy_type")]
    #[schemars(extend("enum" = [UPDATE_STRATEGY_UPDATE, UPDATE_STRATEGY_CREATE_ONLY, UPDATE_STRATEGY_SERVER_SIDE_APPLY, UPDATE_STRATEGY_READ_ONLY]))]
    pub type_: String,
    /// Options for `ServerSideApply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<ServerSideApplyConfig>,
}

/// The server default for the required field.
impl Default for UpdateStrategy {
    fn default() -> Self {
        Self { type_: default_update_strategy_type(), server_side_apply: None }
    }
}

fn default_update_strategy_type() -> String {
    UPDATE_STRATEGY_UPDATE.to_owned()
}

/// `updateStrategy.serverSideApply`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ServerSideApplyConfig {
    /// Force conflicts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
    /// Field manager (default `work-agent`, must start with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_manager: Option<String>,
    /// Fields to leave alone (map keyed by `condition`).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["condition"]))]
    pub ignore_fields: Vec<IgnoreField>,
}

/// One set of ignored fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreField {
    /// `IGNORE_FIELDS_*` (server default `OnSpokePresent`; missing reads as that).
    #[serde(default = "default_ignore_field_condition")]
    #[schemars(extend("enum" = [IGNORE_FIELDS_ON_SPOKE_PRESENT, IGNORE_FIELDS_ON_SPOKE_CHANGE]))]
    pub condition: String,
    /// JSON paths.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub json_paths: Vec<String>,
    /// RFC 6901 JSON pointers.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub json_pointers: Vec<String>,
    /// jq path expressions.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub jq_path_expressions: Vec<String>,
}

/// The server default for the required field.
impl Default for IgnoreField {
    fn default() -> Self {
        Self {
            condition: default_ignore_field_condition(),
            json_paths: Vec::new(),
            json_pointers: Vec::new(),
            jq_path_expressions: Vec::new(),
        }
    }
}

fn default_ignore_field_condition() -> String {
    IGNORE_FIELDS_ON_SPOKE_PRESENT.to_owned()
}

/// One condition rule.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ConditionRule {
    /// Condition type to produce ([`CONDITION_COMPLETE`] is special).
    pub condition: String,
    /// `CONDITION_RULE_*`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = [CONDITION_RULE_WELL_KNOWN_CONDITIONS, CONDITION_RULE_CEL]))]
    pub type_: String,
    /// CEL expressions (ANDed) for `CEL`.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub cel_expressions: Vec<String>,
    /// Static message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// CEL message expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_expression: Option<String>,
}

/// `spec.executor`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkExecutor {
    /// The identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<ManifestWorkExecutorSubject>,
}

/// `executor.subject`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkExecutorSubject {
    /// [`EXECUTOR_SUBJECT_SERVICE_ACCOUNT`].
    #[serde(rename = "type")]
    #[schemars(extend("enum" = [EXECUTOR_SUBJECT_SERVICE_ACCOUNT]))]
    pub type_: String,
    /// The service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ManifestWorkSubjectServiceAccount>,
}

/// A spoke service account.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkSubjectServiceAccount {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// `ManifestWork.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkStatus {
    /// Work-level conditions.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::meta::conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Per-manifest status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_status: Option<ManifestResourceStatus>,
}

/// `status.resourceStatus`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestResourceStatus {
    /// One entry per manifest.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub manifests: Vec<ManifestCondition>,
}

/// Status of one manifest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestCondition {
    /// Which manifest.
    pub resource_meta: ManifestResourceMeta,
    /// Collected feedback (JSON key is singular).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_feedback: Option<StatusFeedbackResult>,
    /// Manifest conditions (required; a Go agent's nil list arrives as `null`).
    #[serde(deserialize_with = "null_as_default")]
    #[schemars(schema_with = "crate::api::meta::conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// Identifies a manifest by position and coordinates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManifestResourceMeta {
    /// Index in `spec.workload.manifests`.
    pub ordinal: i32,
    /// API group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// API version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Plural resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// `statusFeedback`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct StatusFeedbackResult {
    /// Values (map keyed by `name`).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub values: Vec<FeedbackValue>,
}

/// One feedback value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackValue {
    /// Name (from the rule).
    pub name: String,
    /// The value.
    pub field_value: FieldValue,
}

/// A typed feedback value; exactly the member named by `type` is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct FieldValue {
    /// `FIELD_VALUE_*`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = [FIELD_VALUE_INTEGER, FIELD_VALUE_STRING, FIELD_VALUE_BOOLEAN, FIELD_VALUE_JSON_RAW]))]
    pub type_: String,
    /// For `Integer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integer: Option<i64>,
    /// For `String`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    /// For `Boolean`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boolean: Option<bool>,
    /// For `JsonRaw` (max 1024 chars).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_raw: Option<String>,
}

/// The agent's record of what one ManifestWork applied on the spoke; named
/// `<hubHash>-<work name>`. Cluster-scoped, lives on the spoke.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct AppliedManifestWork {
    /// `work.open-cluster-management.io/v1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<AppliedManifestWork>,
    /// `AppliedManifestWork`.
    #[serde(default)]
    pub kind: KindTag<AppliedManifestWork>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<AppliedManifestWorkSpec>,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<AppliedManifestWorkStatus>,
}

resource!(
    AppliedManifestWork,
    group = "work.open-cluster-management.io",
    version = "v1",
    kind = "AppliedManifestWork",
    plural = "appliedmanifestworks",
    singular = "appliedmanifestwork",
    short_names = [],
    namespaced = false,
    status_subresource = true,
    storage_version = true
);

/// `AppliedManifestWork.spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct AppliedManifestWorkSpec {
    /// SHA-256 (hex) of the hub apiserver URL.
    pub hub_hash: String,
    /// Work agent id (JSON key `agentID`).
    #[serde(rename = "agentID", default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The ManifestWork's name.
    pub manifest_work_name: String,
}

/// `AppliedManifestWork.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct AppliedManifestWorkStatus {
    /// Resources applied (sorted by group, version, resource, namespace, name).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub applied_resources: Vec<AppliedManifestResourceMeta>,
    /// When eviction of this unmanaged AMW started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_start_time: Option<Time>,
}

/// One applied resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct AppliedManifestResourceMeta {
    /// API group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Plural resource.
    pub resource: String,
    /// Name.
    pub name: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// API version.
    pub version: String,
    /// UID of the live object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}
