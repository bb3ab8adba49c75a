//! `authentication.open-cluster-management.io/v1beta1`: ManagedServiceAccount.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::meta::{ApiVersionTag, Condition, KindTag, ObjectMeta, Time, null_as_default};

/// ManagedServiceAccount condition: the token Secret exists on the hub.
pub const CONDITION_SECRET_CREATED: &str = "SecretCreated";
/// ManagedServiceAccount condition: the agent reported a token from the managed cluster.
pub const CONDITION_TOKEN_REPORTED: &str = "TokenReported";
/// SecretCreated True.
pub const REASON_SECRET_CREATED: &str = "SecretCreated";
/// TokenReported True.
pub const REASON_TOKEN_REPORTED: &str = "TokenReported";
/// TokenReported False: requesting or writing the token failed.
pub const REASON_TOKEN_REPORT_FAILED: &str = "TokenReportFailed";

/// `spec.rotation.validity` when unset (the CRD's default, 360 days).
pub const DEFAULT_VALIDITY: &str = "8640h0m0s";

/// A ServiceAccount on a managed cluster whose token the hub holds: the object lives in the
/// cluster namespace on the hub, the agent creates the ServiceAccount (named like the object)
/// on the cluster and reports its token into a Secret next to the object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManagedServiceAccount {
    /// `authentication.open-cluster-management.io/v1beta1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<ManagedServiceAccount>,
    /// `ManagedServiceAccount`.
    #[serde(default)]
    pub kind: KindTag<ManagedServiceAccount>,
    /// Standard object metadata; the namespace is the cluster's.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired state: token rotation and lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ManagedServiceAccountSpec>,
    /// The observed state: conditions, token expiry and the Secret holding the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ManagedServiceAccountStatus>,
}

resource!(
    ManagedServiceAccount,
    group = "authentication.open-cluster-management.io",
    version = "v1beta1",
    kind = "ManagedServiceAccount",
    plural = "managedserviceaccounts",
    singular = "managedserviceaccount",
    short_names = [],
    namespaced = true,
    status_subresource = true,
    storage_version = true
);

/// `ManagedServiceAccount.spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManagedServiceAccountSpec {
    /// How the token is rotated.
    pub rotation: ManagedServiceAccountRotation,
    /// Seconds after creation when the ManagedServiceAccount is deleted, whatever its status
    /// (finalizers are honoured); unset means never. Must be positive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0, "exclusiveMinimum" = true))]
    pub ttl_seconds_after_creation: Option<i32>,
}

/// `spec.rotation`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManagedServiceAccountRotation {
    /// Deprecated: the token is rotated before it expires whatever this says (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub enabled: Option<bool>,
    /// How long a requested token is valid, as a Go duration (default `8640h0m0s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = DEFAULT_VALIDITY))]
    pub validity: Option<String>,
}

/// `ManagedServiceAccount.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManagedServiceAccountStatus {
    /// Conditions: `SecretCreated`, `TokenReported`.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::meta::conditions_schema")]
    pub conditions: Vec<Condition>,
    /// When the current token expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_timestamp: Option<Time>,
    /// The Secret in the cluster namespace holding the token and the cluster's CA certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<SecretRef>,
}

/// `status.tokenSecretRef`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// The Secret's name.
    pub name: String,
    /// When the token in the Secret was last refreshed.
    pub last_refresh_timestamp: Time,
}
