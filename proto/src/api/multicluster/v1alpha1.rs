//! `multicluster.x-k8s.io/v1alpha1`: ClusterProfile.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::meta::{
    ApiVersionTag, ByteString, Condition, KindTag, ObjectMeta, Time, null_as_default,
};

/// One cluster of a multi-cluster inventory as its cluster manager describes it to a
/// namespace: who manages it, its health, version and properties, and how to reach it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfile {
    /// `multicluster.x-k8s.io/v1alpha1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<ClusterProfile>,
    /// `ClusterProfile`.
    #[serde(default)]
    pub kind: KindTag<ClusterProfile>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The cluster manager that owns the profile and the cluster's display name.
    pub spec: ClusterProfileSpec,
    /// The cluster as its manager observes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ClusterProfileStatus>,
}

resource!(
    ClusterProfile,
    group = "multicluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterProfile",
    plural = "clusterprofiles",
    singular = "clusterprofile",
    short_names = [],
    namespaced = true,
    status_subresource = true,
    storage_version = true
);

/// `ClusterProfile.spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileSpec {
    /// Which cluster manager owns this ClusterProfile; immutable.
    pub cluster_manager: ClusterManager,
    /// A human-readable name of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
}

/// `spec.clusterManager`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManager {
    /// The name of the cluster manager.
    pub name: String,
}

/// `ClusterProfile.status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileStatus {
    /// How to reach the cluster, one entry per access provider (keyed by name).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub access_providers: Vec<AccessProvider>,
    /// Conditions: `ControlPlaneHealthy` and the cluster manager's own.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::meta::conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Deprecated: `accessProviders` under its old name; an access provider of the same name
    /// wins.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub credential_providers: Vec<AccessProvider>,
    /// The cluster's characteristics as name/value pairs (keyed by name).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub properties: Vec<Property>,
    /// The cluster's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<ClusterVersion>,
}

/// One `status.accessProviders[]` (or `credentialProviders[]`) entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct AccessProvider {
    /// The provider's name, which consumers match against their configured providers.
    pub name: String,
    /// How to talk to the cluster through this provider (a kubeconfig v1 `Cluster`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<KubeconfigCluster>,
}

/// A kubeconfig v1 `Cluster`: an API server address and how to trust it. Field names are the
/// kubeconfig's own (kebab-case).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct KubeconfigCluster {
    /// The API server's address (`https://hostname:port`).
    pub server: String,
    /// The server name the certificate is checked against, when not the server's host.
    #[serde(rename = "tls-server-name", default, skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    /// Skips checking the server's certificate (insecure).
    #[serde(rename = "insecure-skip-tls-verify", default, skip_serializing_if = "Option::is_none")]
    pub insecure_skip_tls_verify: Option<bool>,
    /// The path of a file holding the CA certificates.
    #[serde(rename = "certificate-authority", default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority: Option<String>,
    /// PEM-encoded CA certificates (base64 in JSON); overrides `certificate-authority`.
    #[serde(
        rename = "certificate-authority-data",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "crate::api::meta::bytes_schema")]
    pub certificate_authority_data: Option<ByteString>,
    /// The proxy every request goes through (`http`, `https` or `socks5`).
    #[serde(rename = "proxy-url", default, skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
    /// Asks the server not to compress responses.
    #[serde(rename = "disable-compression", default, skip_serializing_if = "Option::is_none")]
    pub disable_compression: Option<bool>,
    /// Extra information for extenders, by name.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<NamedExtension>,
}

/// One kubeconfig `extensions[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
pub struct NamedExtension {
    /// The extension's nickname.
    pub name: String,
    /// The extension, kept as written.
    #[schemars(extend("x-kubernetes-preserve-unknown-fields" = true), with = "serde_json::Map<String, serde_json::Value>")]
    pub extension: serde_json::Value,
}

/// One `status.properties[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct Property {
    /// A well-known or custom property name (1 to 253 characters).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The property's value (1 to 1024 characters).
    #[schemars(length(min = 1, max = 1024))]
    pub value: String,
    /// When the property was last observed on the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observed_time: Option<Time>,
}

/// `status.version`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterVersion {
    /// The cluster's Kubernetes version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
}
