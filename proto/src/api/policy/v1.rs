//! `policy.open-cluster-management.io/v1`: Policy, PlacementBinding and the ConfigurationPolicy
//! template kind.

use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::api::meta::{
    ApiVersionTag, KindTag, LabelSelector, LabelSelectorRequirement, ObjectMeta, Time,
    null_as_default,
};

/// An object kept as written (`x-kubernetes-preserve-unknown-fields`): a policy template's
/// `objectDefinition`, a detail's `templateMeta`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawObject(pub serde_json::Value);

impl JsonSchema for RawObject {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RawObject".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "An object, kept as written.",
            "x-kubernetes-preserve-unknown-fields": true,
        })
    }
}

// ---- Policy ---------------------------------------------------------------------------------

/// A policy: templates (ConfigurationPolicies and other policy kinds) that the clusters its
/// PlacementBindings select must comply with. A root policy lives in a user namespace; each
/// selected cluster gets a replica `<namespace>.<name>` in its cluster namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// `policy.open-cluster-management.io/v1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<Policy>,
    /// `Policy`.
    #[serde(default)]
    pub kind: KindTag<Policy>,
    /// Standard object metadata.
    pub metadata: ObjectMeta,
    /// The desired state: templates, remediation, whether it is disabled.
    pub spec: PolicySpec,
    /// The observed state: compliance per cluster (root) or per template (replica).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PolicyStatus>,
}

resource!(
    Policy,
    group = "policy.open-cluster-management.io",
    version = "v1",
    kind = "Policy",
    plural = "policies",
    singular = "policy",
    short_names = ["plc"],
    namespaced = true,
    status_subresource = true,
    storage_version = true
);

/// `Policy.spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PolicySpec {
    /// Whether the replicas carry all of the root's labels and annotations (default true) or
    /// only the `policy.open-cluster-management.io/` ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_policy_metadata: Option<bool>,
    /// Objects whose compliance the whole policy waits on.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<PolicyDependency>,
    /// A disabled policy is not propagated: its replicas are removed.
    pub disabled: bool,
    /// Options of hub templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub_template_options: Option<HubTemplateOptions>,
    /// The templates each selected cluster evaluates.
    #[serde(rename = "policy-templates")]
    pub policy_templates: Vec<PolicyTemplate>,
    /// `inform` or `enforce` (any case): when set, it overrides every template's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Inform", "inform", "Enforce", "enforce"]))]
    pub remediation_action: Option<String>,
}

/// One dependency: an object and the compliance it must have.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PolicyDependency {
    /// The object's `apiVersion`.
    pub api_version: String,
    /// `Compliant`, `Pending` or `NonCompliant`.
    #[schemars(extend("enum" = ["Compliant", "Pending", "NonCompliant"]))]
    pub compliance: String,
    /// The object's kind.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The object's namespace (for a Policy, empty: the replica's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// `spec.hubTemplateOptions`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct HubTemplateOptions {
    /// The ServiceAccount whose rights hub template lookups run with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// One `spec.policy-templates[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTemplate {
    /// Dependencies of this template only.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub extra_dependencies: Vec<PolicyDependency>,
    /// Whether a Pending template counts as Compliant for the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_pending: Option<bool>,
    /// The template object (a ConfigurationPolicy, or another policy kind).
    pub object_definition: RawObject,
}

/// `Policy.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PolicyStatus {
    /// The policy's compliance: over its clusters (root) or its templates (replica).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Compliant", "Pending", "NonCompliant"]))]
    pub compliant: Option<String>,
    /// Per template, its compliance and history (replica only).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<DetailsPerTemplate>,
    /// Per binding, the clusters it decides (root only).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub placement: Vec<PolicyPlacement>,
    /// Per cluster, its replica's compliance (root only).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<CompliancePerClusterStatus>,
}

/// One `status.details[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct DetailsPerTemplate {
    /// The template's compliance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Compliant", "Pending", "NonCompliant"]))]
    pub compliant: Option<String>,
    /// Its compliance messages, newest first (at most 10).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<ComplianceHistory>,
    /// The template's metadata (its name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_meta: Option<RawObject>,
}

/// One compliance message of a template.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ComplianceHistory {
    /// The event that carried it (`<policy>.<hex nanos>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_name: Option<String>,
    /// When it was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_timestamp: Option<Time>,
    /// `<State>; <type> - <message>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One `status.placement[]` entry of a root policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PolicyPlacement {
    /// The clusters the binding's placement decides.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<PlacementDecision>,
    /// Clusters a PolicySet excludes.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub exclusions: Vec<ClusterExclusion>,
    /// The Placement's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// The PlacementBinding's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_binding: Option<String>,
    /// The PlacementRule's name (deprecated kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_rule: Option<String>,
    /// The PolicySet the binding reaches the policy through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_set: Option<String>,
}

/// A decided cluster.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PlacementDecision {
    /// The cluster's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// The cluster's namespace on the hub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_namespace: Option<String>,
}

/// An excluded cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterExclusion {
    /// The cluster's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
}

/// One `status.status[]` entry of a root policy (note the lower-case keys).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct CompliancePerClusterStatus {
    /// The cluster's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clustername: Option<String>,
    /// The cluster's namespace on the hub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusternamespace: Option<String>,
    /// Its replica's compliance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Compliant", "Pending", "NonCompliant"]))]
    pub compliant: Option<String>,
    /// Bindings that still select the cluster while a restricted one filters it.
    #[serde(
        default,
        rename = "remainingBindings",
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub remaining_bindings: Vec<RemainingBinding>,
}

/// One `remainingBindings[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct RemainingBinding {
    /// The PlacementBinding's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_binding: Option<String>,
}

// ---- PlacementBinding -----------------------------------------------------------------------

/// Binds Policies and PolicySets of its namespace to a Placement of its namespace (no `spec`
/// wrapper, as in OCM).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PlacementBinding {
    /// `policy.open-cluster-management.io/v1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<PlacementBinding>,
    /// `PlacementBinding`.
    #[serde(default)]
    pub kind: KindTag<PlacementBinding>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the binding changes in the policies it binds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binding_overrides: Option<BindingOverrides>,
    /// The Placement (or PlacementRule) whose decisions it follows.
    pub placement_ref: PlacementRef,
    /// The binding's status (empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PlacementBindingStatus>,
    /// `restricted`: the binding only overrides, for clusters another binding selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["restricted"]))]
    pub sub_filter: Option<String>,
    /// The Policies and PolicySets it binds.
    pub subjects: Vec<Subject>,
}

resource!(
    PlacementBinding,
    group = "policy.open-cluster-management.io",
    version = "v1",
    kind = "PlacementBinding",
    plural = "placementbindings",
    singular = "placementbinding",
    short_names = ["pb"],
    namespaced = true,
    status_subresource = true,
    storage_version = true
);

/// `bindingOverrides`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct BindingOverrides {
    /// `Enforce` (any case): the bound policies are enforced on the clusters it selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Enforce", "enforce"]))]
    pub remediation_action: Option<String>,
}

/// `placementRef`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PlacementRef {
    /// `cluster.open-cluster-management.io` (Placement) or `apps.open-cluster-management.io`.
    #[schemars(extend("enum" = ["apps.open-cluster-management.io", "cluster.open-cluster-management.io"]))]
    pub api_group: String,
    /// `Placement` or `PlacementRule`.
    #[schemars(extend("enum" = ["PlacementRule", "Placement"]))]
    pub kind: String,
    /// Its name, in the binding's namespace.
    pub name: String,
}

/// One `subjects[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// `policy.open-cluster-management.io`.
    #[schemars(extend("enum" = ["policy.open-cluster-management.io"]))]
    pub api_group: String,
    /// `Policy` or `PolicySet`.
    #[schemars(extend("enum" = ["Policy", "PolicySet"]))]
    pub kind: String,
    /// Its name, in the binding's namespace.
    pub name: String,
}

/// `PlacementBinding.status`: OCM keeps nothing there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct PlacementBindingStatus {}

// ---- ConfigurationPolicy --------------------------------------------------------------------

/// The template kind a cluster evaluates itself: objects that must (or must not, or must only)
/// exist as described, reported and, with `enforce`, made so.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ConfigurationPolicy {
    /// `policy.open-cluster-management.io/v1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<ConfigurationPolicy>,
    /// `ConfigurationPolicy`.
    #[serde(default)]
    pub kind: KindTag<ConfigurationPolicy>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The objects and how they are checked.
    pub spec: ConfigurationPolicySpec,
    /// The last evaluation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ConfigurationPolicyStatus>,
}

resource!(
    ConfigurationPolicy,
    group = "policy.open-cluster-management.io",
    version = "v1",
    kind = "ConfigurationPolicy",
    plural = "configurationpolicies",
    singular = "configurationpolicy",
    short_names = [],
    namespaced = true,
    status_subresource = true,
    storage_version = true
);

/// `remediationAction` when unset (the CRD's default).
fn default_inform() -> String {
    super::INFORM.to_owned()
}

/// `ConfigurationPolicy.spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ConfigurationPolicySpec {
    /// Messages replacing the generated ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_message: Option<CustomMessage>,
    /// How often it is evaluated while compliant and while not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluation_interval: Option<EvaluationInterval>,
    /// The namespaces of object templates that name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub namespace_selector: Option<Target>,
    /// The objects.
    #[serde(
        default,
        rename = "object-templates",
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub object_templates: Vec<ObjectTemplate>,
    /// The objects as a Go template of a YAML list (not evaluated by this agent).
    #[serde(default, rename = "object-templates-raw", skip_serializing_if = "Option::is_none")]
    pub object_templates_raw: Option<String>,
    /// What happens to its objects when it goes: `DeleteAll`, `DeleteIfCreated` or `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["DeleteAll", "DeleteIfCreated", "None"], "default" = "None"))]
    pub prune_object_behavior: Option<String>,
    /// `inform` or `enforce` (any case; default `inform`).
    #[serde(default = "default_inform")]
    #[schemars(extend("enum" = ["Inform", "inform", "Enforce", "enforce"], "default" = "inform"))]
    pub remediation_action: String,
    /// `low`, `medium`, `high` or `critical` (any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["low", "Low", "medium", "Medium", "high", "High", "critical", "Critical"]))]
    pub severity: Option<String>,
}

/// `spec.customMessage`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct CustomMessage {
    /// The message while compliant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compliant: Option<String>,
    /// The message while not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noncompliant: Option<String>,
}

/// `spec.evaluationInterval`: `watch`, `never` or a Go duration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct EvaluationInterval {
    /// The interval while compliant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compliant: Option<String>,
    /// The interval while not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noncompliant: Option<String>,
}

/// `spec.namespaceSelector`: a label selector plus `include` and `exclude` globs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// Namespaces left out (globs).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Namespaces taken (globs).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// Label requirements, ANDed.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub match_expressions: Vec<LabelSelectorRequirement>,
    /// Labels that must be set to these values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// `IfMatch`, `Never` or `Default`: whether terminating namespaces are taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["IfMatch", "Never", "Default"], "default" = "Default"))]
    pub terminating_inclusion: Option<String>,
}

/// One `spec.object-templates[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ObjectTemplate {
    /// `MustHave`, `MustOnlyHave` or `MustNotHave` (three spellings each).
    #[schemars(extend("enum" = ["MustHave", "Musthave", "musthave", "MustOnlyHave", "Mustonlyhave", "mustonlyhave", "MustNotHave", "Mustnothave", "mustnothave"]))]
    pub compliance_type: String,
    /// How labels and annotations compare (default: as `complianceType`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["MustHave", "Musthave", "musthave", "MustOnlyHave", "Mustonlyhave", "mustonlyhave"]))]
    pub metadata_compliance_type: Option<String>,
    /// The object, or the part of it that matters.
    pub object_definition: RawObject,
    /// Which objects an unnamed definition applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub object_selector: Option<LabelSelector>,
    /// `Log`, `InStatus` or `None`: where differences are recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Log", "InStatus", "None"]))]
    pub record_diff: Option<String>,
    /// `None`, `IfRequired` or `Always`: when an object is deleted and created again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["None", "IfRequired", "Always"], "default" = "None"))]
    pub recreate_option: Option<String>,
}

/// `ConfigurationPolicy.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ConfigurationPolicyStatus {
    /// One entry per object template.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub compliancy_details: Vec<TemplateStatus>,
    /// `Compliant`, `Pending`, `NonCompliant` or `Terminating`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Compliant", "Pending", "NonCompliant", "Terminating"]))]
    pub compliant: Option<String>,
    /// Compliance messages, newest first.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryEvent>,
    /// The time of its latest evaluation (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_evaluated: Option<String>,
    /// The generation it last evaluated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_evaluated_generation: Option<i64>,
    /// The objects it looked at.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub related_objects: Vec<RelatedObject>,
}

/// One `status.compliancyDetails[]` entry (OCM's capitalised keys).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct TemplateStatus {
    /// The object template's compliance.
    #[serde(default, rename = "Compliant", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Compliant", "Pending", "NonCompliant", "Terminating"]))]
    pub compliant: Option<String>,
    /// Whether the template could be evaluated.
    #[serde(default, rename = "Validity", skip_serializing_if = "Option::is_none")]
    pub validity: Option<Validity>,
    /// Its outcome: `notification` (compliant) or `violation`.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<CompliancyCondition>,
}

/// `compliancyDetails[].Validity`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct Validity {
    /// Why it is not valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether it is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid: Option<bool>,
}

/// One condition of an object template's outcome.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct CompliancyCondition {
    /// When it last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// OCM's message (`configmaps [x] found as specified in namespace default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// OCM's reason (``K8s `must have` object already exists``).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `True`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// `notification` or `violation`.
    #[serde(rename = "type")]
    pub type_: String,
}

/// One `status.history[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEvent {
    /// When.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_timestamp: Option<Time>,
    /// The compliance message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One `status.relatedObjects[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct RelatedObject {
    /// Its compliance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compliant: Option<String>,
    /// Which object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectResource>,
    /// What the agent knows of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<ObjectProperties>,
    /// Why it is (not) compliant (the condition's reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A related object's identity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ObjectResource {
    /// Its `apiVersion`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Its kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its name and namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetadata>,
}

/// A related object's name (`-` when the template names none) and namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct ObjectMetadata {
    /// Its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// What the agent knows of a related object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ObjectProperties {
    /// Whether the policy created it (what `DeleteIfCreated` removes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by_policy: Option<bool>,
    /// The difference between the object and the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Whether it matched after a dry-run update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches_after_dry_run: Option<bool>,
    /// Its uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}
