//! `policy.open-cluster-management.io/v1beta1`: PolicySet.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::meta::{ApiVersionTag, KindTag, ObjectMeta, null_as_default};

/// A group of Policies of its namespace, bound to placements together, with a compliance over
/// all of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PolicySet {
    /// `policy.open-cluster-management.io/v1beta1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<PolicySet>,
    /// `PolicySet`.
    #[serde(default)]
    pub kind: KindTag<PolicySet>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Its policies and exclusions.
    pub spec: PolicySetSpec,
    /// Its compliance and placements.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PolicySetStatus>,
}

resource!(
    PolicySet,
    group = "policy.open-cluster-management.io",
    version = "v1beta1",
    kind = "PolicySet",
    plural = "policysets",
    singular = "policyset",
    short_names = ["plcset"],
    namespaced = true,
    status_subresource = true,
    storage_version = true
);

/// `PolicySet.spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PolicySetSpec {
    /// What the set is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Clusters a policy of the set is not propagated to through the set's bindings.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub exclusions: Vec<PolicySetExclusion>,
    /// The names of its Policies, in its namespace.
    pub policies: Vec<String>,
}

/// One `spec.exclusions[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PolicySetExclusion {
    /// The clusters left out.
    pub cluster_names: Vec<String>,
    /// The policy they are left out of.
    pub policy_name: String,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `PolicySet.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PolicySetStatus {
    /// Over its policies: any NonCompliant wins, then Pending, then Compliant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["Compliant", "Pending", "NonCompliant"]))]
    pub compliant: Option<String>,
    /// The exclusions in effect.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub exclusions: Vec<PolicySetStatusExclusion>,
    /// The bindings that place it.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub placement: Vec<PolicySetPlacement>,
    /// What is missing or disabled among its policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
}

/// One `status.exclusions[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PolicySetStatusExclusion {
    /// The clusters left out.
    pub clusters: Vec<String>,
    /// The policy.
    pub policy_name: String,
}

/// One `status.placement[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PolicySetPlacement {
    /// The Placement's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<String>,
    /// The PlacementBinding's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_binding: Option<String>,
    /// The PlacementRule's name (deprecated kind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_rule: Option<String>,
}
