//! `addon.open-cluster-management.io/v1beta1` (served, converted to v1alpha1 for storage).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::{
    AddOnConfig, AddOnDeploymentConfigSpec, AddOnMeta, ConfigGroupResource, ConfigReferent,
    ConfigSpecHash, ContainerResourceRequirements, CustomizedVariable, DefaultConfigReference,
    HealthCheck, ImageMirror, InstallConfigReference, InstallProgression, InstallStrategy,
    NodePlacement, ObjectReference, PlacementStrategy, ProxyConfig,
};
use crate::api::meta::{ApiVersionTag, Condition, KindTag, ObjectMeta, null_as_default};

/// Registration type: a hub kubeconfig.
pub const REGISTRATION_TYPE_KUBE_CLIENT: &str = "kubeClient";
/// Registration type: a certificate from a custom signer.
pub const REGISTRATION_TYPE_CUSTOM_SIGNER: &str = "customSigner";
/// kubeClient driver: CSR.
pub const KUBE_CLIENT_DRIVER_CSR: &str = "csr";
/// kubeClient driver: ServiceAccount token.
pub const KUBE_CLIENT_DRIVER_TOKEN: &str = "token";

/// Hub-wide registration of an addon; the name is the addon name. Cluster-scoped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOn {
    /// `addon.open-cluster-management.io/v1beta1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<ClusterManagementAddOn>,
    /// `ClusterManagementAddOn`.
    #[serde(default)]
    pub kind: KindTag<ClusterManagementAddOn>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state (required).
    pub spec: ClusterManagementAddOnSpec,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ClusterManagementAddOnStatus>,
}

resource!(
    ClusterManagementAddOn,
    group = "addon.open-cluster-management.io",
    version = "v1beta1",
    kind = "ClusterManagementAddOn",
    plural = "clustermanagementaddons",
    singular = "clustermanagementaddon",
    short_names = ["cma", "cmas"],
    namespaced = false,
    status_subresource = true,
    storage_version = false
);

/// `ClusterManagementAddOn.spec` (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnSpec {
    /// Display metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_meta: Option<AddOnMeta>,
    /// Default configs (map keyed by group + resource).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["group", "resource"]))]
    pub default_configs: Vec<AddOnConfig>,
    /// Install strategy (server default `{type: Manual}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_strategy: Option<InstallStrategy>,
}

/// `ClusterManagementAddOn.status` (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnStatus {
    /// Default configs' desired hashes (JSON key `defaultConfigReferences`).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub default_config_references: Vec<DefaultConfigReference>,
    /// Per-placement install progress.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub install_progressions: Vec<InstallProgression>,
}

/// An addon enabled on one cluster; lives in the cluster namespace. Namespaced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOn {
    /// `addon.open-cluster-management.io/v1beta1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<ManagedClusterAddOn>,
    /// `ManagedClusterAddOn`.
    #[serde(default)]
    pub kind: KindTag<ManagedClusterAddOn>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state (required).
    pub spec: ManagedClusterAddOnSpec,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ManagedClusterAddOnStatus>,
}

resource!(
    ManagedClusterAddOn,
    group = "addon.open-cluster-management.io",
    version = "v1beta1",
    kind = "ManagedClusterAddOn",
    plural = "managedclusteraddons",
    singular = "managedclusteraddon",
    short_names = ["mca", "mcas"],
    namespaced = true,
    status_subresource = true,
    storage_version = false
);

/// `ManagedClusterAddOn.spec` (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnSpec {
    /// Configs overriding the ClusterManagementAddOn's.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,
}

/// `ManagedClusterAddOn.status` (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnStatus {
    /// Conditions (`super::CONDITION_*`).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::meta::conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Related objects.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub related_objects: Vec<ObjectReference>,
    /// Display metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_meta: Option<AddOnMeta>,
    /// Supported config kinds (map keyed by group + resource).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["group", "resource"]))]
    pub supported_configs: Vec<ConfigGroupResource>,
    /// Configs in use.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub config_references: Vec<ConfigReference>,
    /// Spoke namespace for the registration secret and lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Registrations.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<RegistrationConfig>,
    /// Health check mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
}

/// A config in use (v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReference {
    /// API group (default `""`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Plural resource.
    pub resource: String,
    /// Generation of the config last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observed_generation: Option<i64>,
    /// Desired config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_config: Option<ConfigSpecHash>,
    /// Config last applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_config: Option<ConfigSpecHash>,
}

/// A registration (v1beta1 shape): exactly the member named by `type` is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationConfig {
    /// `REGISTRATION_TYPE_*`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = [REGISTRATION_TYPE_KUBE_CLIENT, REGISTRATION_TYPE_CUSTOM_SIGNER]))]
    pub type_: String,
    /// For `kubeClient`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_client: Option<KubeClientConfig>,
    /// For `customSigner`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_signer: Option<CustomSignerConfig>,
}

/// A hub kubeconfig registration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct KubeClientConfig {
    /// Subject (no organization units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<KubeClientSubject>,
    /// `KUBE_CLIENT_DRIVER_*` (set by the agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [KUBE_CLIENT_DRIVER_CSR, KUBE_CLIENT_DRIVER_TOKEN]))]
    pub driver: Option<String>,
}

/// Subject of a kubeClient registration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct KubeClientSubject {
    /// User (CN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Groups (O).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// A custom-signer registration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct CustomSignerConfig {
    /// Signer name (`<dns>/<name>`, 5..571 chars).
    pub signer_name: String,
    /// Subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

/// Certificate subject (v1beta1: JSON key `organizationUnits`, plural).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// User (CN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Groups (O).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Organization units (OU).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub organization_units: Vec<String>,
}

/// Deployment settings an addon can reference as a config (v1beta1). Namespaced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct AddOnDeploymentConfig {
    /// `addon.open-cluster-management.io/v1beta1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<AddOnDeploymentConfig>,
    /// `AddOnDeploymentConfig`.
    #[serde(default)]
    pub kind: KindTag<AddOnDeploymentConfig>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The settings (required).
    pub spec: AddOnDeploymentConfigSpec,
}

resource!(
    AddOnDeploymentConfig,
    group = "addon.open-cluster-management.io",
    version = "v1beta1",
    kind = "AddOnDeploymentConfig",
    plural = "addondeploymentconfigs",
    singular = "addondeploymentconfig",
    short_names = [],
    namespaced = true,
    status_subresource = false,
    storage_version = false
);
