//! `addon.open-cluster-management.io/v1alpha1` (the storage version).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::{
    AddOnConfig, AddOnDeploymentConfigSpec, AddOnMeta, ConfigGroupResource, ConfigReferent,
    ConfigSpecHash, ContainerResourceRequirements, CustomizedVariable, DefaultConfigReference,
    HealthCheck, ImageMirror, InstallConfigReference, InstallProgression, InstallStrategy,
    NodePlacement, ObjectReference, PlacementStrategy, ProxyConfig,
};
use crate::api::meta::{ApiVersionTag, Condition, KindTag, ObjectMeta, RoleRef, null_as_default};
use crate::api::work::v1::ManifestWorkSpec;

/// `status.kubeClientDriver`: CSR (default).
pub const KUBE_CLIENT_DRIVER_CSR: &str = "csr";
/// `status.kubeClientDriver`: ServiceAccount token.
pub const KUBE_CLIENT_DRIVER_TOKEN: &str = "token";
/// AddOnTemplate registration type.
pub const REGISTRATION_TYPE_KUBE_CLIENT: &str = "KubeClient";
/// AddOnTemplate registration type.
pub const REGISTRATION_TYPE_CUSTOM_SIGNER: &str = "CustomSigner";
/// AddOnTemplate hub permission type: bind in the cluster namespace.
pub const HUB_PERMISSION_CURRENT_CLUSTER: &str = "CurrentCluster";
/// AddOnTemplate hub permission type: bind in one namespace.
pub const HUB_PERMISSION_SINGLE_NAMESPACE: &str = "SingleNamespace";

/// Hub-wide registration of an addon; the name is the addon name. Cluster-scoped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOn {
    /// `addon.open-cluster-management.io/v1alpha1`.
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
    version = "v1alpha1",
    kind = "ClusterManagementAddOn",
    plural = "clustermanagementaddons",
    singular = "clustermanagementaddon",
    short_names = ["cma", "cmas"],
    namespaced = false,
    status_subresource = true,
    storage_version = true
);

/// `ClusterManagementAddOn.spec` (v1alpha1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnSpec {
    /// Display metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_meta: Option<AddOnMeta>,
    /// Deprecated CRD/CR coordinates (no v1beta1 counterpart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_configuration: Option<ConfigCoordinates>,
    /// Supported config kinds and their defaults (map keyed by group + resource).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["group", "resource"]))]
    pub supported_configs: Vec<ConfigMeta>,
    /// Install strategy (server default `{type: Manual}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_strategy: Option<InstallStrategy>,
}

/// Deprecated `addOnConfiguration`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ConfigCoordinates {
    /// CRD name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crd_name: Option<String>,
    /// CR name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cr_name: Option<String>,
    /// Last observed generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observed_generation: Option<i64>,
}

/// A supported config kind with an optional default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMeta {
    /// API group (default `""`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Plural resource.
    pub resource: String,
    /// Default config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_config: Option<ConfigReferent>,
}

/// `ClusterManagementAddOn.status` (v1alpha1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnStatus {
    /// Default configs' desired hashes (JSON key `defaultconfigReferences`, lower-case `c`).
    #[serde(
        rename = "defaultconfigReferences",
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub default_config_references: Vec<DefaultConfigReference>,
    /// Per-placement install progress.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub install_progressions: Vec<InstallProgression>,
}

/// An addon enabled on one cluster; lives in the cluster namespace, named like the
/// ClusterManagementAddOn. Namespaced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOn {
    /// `addon.open-cluster-management.io/v1alpha1`.
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
    version = "v1alpha1",
    kind = "ManagedClusterAddOn",
    plural = "managedclusteraddons",
    singular = "managedclusteraddon",
    short_names = ["mca", "mcas"],
    namespaced = true,
    status_subresource = true,
    storage_version = true
);

/// `ManagedClusterAddOn.spec` (v1alpha1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnSpec {
    /// Deprecated agent namespace (default [`super::DEFAULT_INSTALL_NAMESPACE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_namespace: Option<String>,
    /// Configs overriding the ClusterManagementAddOn's.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,
}

/// `ManagedClusterAddOn.status` (v1alpha1).
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
    /// Deprecated CRD/CR coordinates (no v1beta1 counterpart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_configuration: Option<ConfigCoordinates>,
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
    /// Client certificate registrations.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<RegistrationConfig>,
    /// Health check mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    /// `KUBE_CLIENT_DRIVER_*` for the kube-apiserver-client registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [KUBE_CLIENT_DRIVER_CSR, KUBE_CLIENT_DRIVER_TOKEN]))]
    pub kube_client_driver: Option<String>,
}

/// A config in use (v1alpha1: with the deprecated inline namespace/name).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReference {
    /// API group (default `""`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Plural resource.
    pub resource: String,
    /// Deprecated inline namespace (same as `desiredConfig.namespace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Deprecated inline name (same as `desiredConfig.name`; required by the schema).
    pub name: String,
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

/// A client certificate the agent should obtain (v1alpha1 shape).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationConfig {
    /// CSR signer ([`super::KUBE_APISERVER_CLIENT_SIGNER_NAME`] for a hub kubeconfig).
    pub signer_name: String,
    /// Certificate subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

/// Certificate subject (v1alpha1: JSON key `organizationUnit`, singular).
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
    #[serde(
        rename = "organizationUnit",
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub organization_units: Vec<String>,
}

/// Deployment settings an addon can reference as a config (v1alpha1). Namespaced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct AddOnDeploymentConfig {
    /// `addon.open-cluster-management.io/v1alpha1`.
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
    version = "v1alpha1",
    kind = "AddOnDeploymentConfig",
    plural = "addondeploymentconfigs",
    singular = "addondeploymentconfig",
    short_names = [],
    namespaced = true,
    status_subresource = false,
    storage_version = true
);

/// A template addon: agent manifests and registrations the hub addon-manager deploys
/// without a custom controller. Cluster-scoped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct AddOnTemplate {
    /// `addon.open-cluster-management.io/v1alpha1`.
    #[serde(default)]
    pub api_version: ApiVersionTag<AddOnTemplate>,
    /// `AddOnTemplate`.
    #[serde(default)]
    pub kind: KindTag<AddOnTemplate>,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The template (required).
    pub spec: AddOnTemplateSpec,
}

resource!(
    AddOnTemplate,
    group = "addon.open-cluster-management.io",
    version = "v1alpha1",
    kind = "AddOnTemplate",
    plural = "addontemplates",
    singular = "addontemplate",
    short_names = [],
    namespaced = false,
    status_subresource = false,
    storage_version = true
);

/// `AddOnTemplate.spec`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct AddOnTemplateSpec {
    /// The addon this template is for.
    pub addon_name: String,
    /// Agent manifests (a ManifestWork spec).
    pub agent_spec: ManifestWorkSpec,
    /// Registrations of the agent.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub registration: Vec<RegistrationSpec>,
}

/// One template registration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationSpec {
    /// `REGISTRATION_TYPE_*`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = [REGISTRATION_TYPE_KUBE_CLIENT, REGISTRATION_TYPE_CUSTOM_SIGNER]))]
    pub type_: String,
    /// For `KubeClient`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_client: Option<KubeClientRegistrationConfig>,
    /// For `CustomSigner`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_signer: Option<CustomSignerRegistrationConfig>,
}

/// Hub permissions of a kubeClient registration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct KubeClientRegistrationConfig {
    /// RBAC bindings to create on the hub.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub hub_permissions: Vec<HubPermissionConfig>,
}

/// One hub permission.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct HubPermissionConfig {
    /// `HUB_PERMISSION_*`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = [HUB_PERMISSION_CURRENT_CLUSTER, HUB_PERMISSION_SINGLE_NAMESPACE]))]
    pub type_: String,
    /// For `CurrentCluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_cluster: Option<CurrentClusterBindingConfig>,
    /// For `SingleNamespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single_namespace: Option<SingleNamespaceBindingConfig>,
}

/// Bind a ClusterRole in the cluster namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct CurrentClusterBindingConfig {
    /// The ClusterRole.
    pub cluster_role_name: String,
}

/// Bind a role in one namespace.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct SingleNamespaceBindingConfig {
    /// The namespace.
    pub namespace: String,
    /// The Role or ClusterRole.
    #[schemars(extend("x-kubernetes-map-type" = "atomic"))]
    pub role_ref: RoleRef,
}

/// A custom-signer registration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct CustomSignerRegistrationConfig {
    /// Signer name.
    pub signer_name: String,
    /// Certificate subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
    /// The CA secret used to sign (JSON key `signingCA`).
    #[serde(rename = "signingCA")]
    pub signing_ca: SigningCARef,
}

/// A CA secret.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct SigningCARef {
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}
