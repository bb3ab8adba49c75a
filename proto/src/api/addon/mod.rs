//! `addon.open-cluster-management.io`: ClusterManagementAddOn, ManagedClusterAddOn and
//! AddOnDeploymentConfig at v1alpha1 (storage) and v1beta1, AddOnTemplate (v1alpha1), the
//! v1alpha1 <-> v1beta1 conversions, and the addon labels, annotations, finalizers and
//! condition constants.
//!
//! The types whose JSON is identical in both versions live at this module's root and are
//! re-exported by [`v1alpha1`] and [`v1beta1`].
//!
//! # Conversion
//!
//! `From` in both directions mirrors OCM's conversion webhook (`api:addon/v1beta1/conversion.go`,
//! `ocm:pkg/addon/webhook/*`):
//! - ClusterManagementAddOn `supportedConfigs[i]` <-> `defaultConfigs[i]`; a supported config
//!   without `defaultConfig` becomes a default config named [`RESERVED_NO_DEFAULT_CONFIG_NAME`],
//!   which turns back into "no default" (so does an empty name);
//! - ManagedClusterAddOn `spec.installNamespace` <-> annotation
//!   [`ANNOTATION_V1ALPHA1_INSTALL_NAMESPACE`] (unlike OCM, the annotation is removed again when
//!   converting back, so v1alpha1 -> v1beta1 -> v1alpha1 is the identity);
//! - registration `signerName == kubernetes.io/kube-apiserver-client` <-> `{type: kubeClient,
//!   kubeClient.subject{user, groups}}`, any other signer <-> `{type: customSigner,
//!   customSigner{signerName, subject}}`; `organizationUnit` <-> `organizationUnits`;
//! - v1alpha1 `status.kubeClientDriver` <-> `kubeClient.driver` of every kubeClient registration
//!   (`csr` when unset); back, the first kubeClient registration's driver;
//! - v1alpha1 `configReferences[].namespace/name` (deprecated, inline) are rebuilt from
//!   `desiredConfig`; when `desiredConfig` is absent but they are set, they become
//!   `desiredConfig`.
//!
//! Losses, as in OCM: v1alpha1 `spec.addOnConfiguration` (CMA) and `status.addOnConfiguration`
//! (MCA) have no v1beta1 counterpart and are dropped; the organization units of a kubeClient
//! registration are dropped; `kubeClientDriver` is dropped when no kubeClient registration
//! exists and reads back as `csr` when it was unset; inline `configReferences` names that
//! disagree with `desiredConfig` are replaced by it. AddOnDeploymentConfig converts losslessly.

use schemars::JsonSchema;

use serde::{Deserialize, Serialize};

use crate::api::cluster::v1alpha1::RolloutStrategy;
use crate::api::meta::{ByteString, Condition, ResourceRequirements, Toleration, null_as_default};
use std::collections::BTreeMap;

/// The API group.
pub const GROUP: &str = "addon.open-cluster-management.io";

/// Label on CSRs, ManifestWorks and RoleBindings: the addon the object relates to.
pub const LABEL_ADDON_NAME: &str = "open-cluster-management.io/addon-name";
/// Label on ManagedClusterAddOn-related objects: the addon namespace.
pub const LABEL_ADDON_NAMESPACE: &str = "open-cluster-management.io/addon-namespace";

/// ClusterManagementAddOn annotation: who installs the addon ([`LIFECYCLE_ADDON_MANAGER`] or
/// [`LIFECYCLE_SELF`]).
pub const ANNOTATION_LIFECYCLE: &str = "addon.open-cluster-management.io/lifecycle";
/// Lifecycle: the hub addon-manager installs and upgrades (also when the annotation is absent).
pub const LIFECYCLE_ADDON_MANAGER: &str = "addon-manager";
/// Lifecycle: the addon does it itself.
pub const LIFECYCLE_SELF: &str = "self";
/// ManagedClusterAddOn annotation: opt out of automatic installation.
pub const ANNOTATION_DISABLE_AUTOMATIC_INSTALLATION: &str =
    "addon.open-cluster-management.io/disable-automatic-installation";
/// ManagedClusterAddOn annotation: hosted mode's hosting cluster.
pub const ANNOTATION_HOSTING_CLUSTER_NAME: &str =
    "addon.open-cluster-management.io/hosting-cluster-name";
/// Addon manifest annotation: pre-delete hook object.
pub const ANNOTATION_ADDON_PRE_DELETE: &str = "addon.open-cluster-management.io/addon-pre-delete";
/// Addon manifest annotation: keep the object after the addon is deleted.
pub const ANNOTATION_DELETION_ORPHAN: &str = "addon.open-cluster-management.io/deletion-orphan";
/// Addon manifest annotation: `managed` / `hosting` / `none`.
pub const ANNOTATION_HOSTED_MANIFEST_LOCATION: &str =
    "addon.open-cluster-management.io/hosted-manifest-location";
/// v1beta1 ManagedClusterAddOn annotation holding the v1alpha1 `spec.installNamespace`.
pub const ANNOTATION_V1ALPHA1_INSTALL_NAMESPACE: &str =
    "addon.open-cluster-management.io/v1alpha1-install-namespace";

/// ManagedClusterAddOn finalizer: the pre-delete hook has to complete.
pub const FINALIZER_ADDON_PRE_DELETE: &str = "addon.open-cluster-management.io/addon-pre-delete";
/// ManagedClusterAddOn finalizer: the hosted pre-delete hook has to complete.
pub const FINALIZER_HOSTING_ADDON_PRE_DELETE: &str =
    "addon.open-cluster-management.io/hosting-addon-pre-delete";
/// ManagedClusterAddOn finalizer: hosted manifests have to be cleaned up.
pub const FINALIZER_HOSTING_MANIFESTS_CLEANUP: &str =
    "addon.open-cluster-management.io/hosting-manifests-cleanup";
/// Deprecated variant of [`FINALIZER_ADDON_PRE_DELETE`].
pub const FINALIZER_ADDON_PRE_DELETE_DEPRECATED: &str =
    "cluster.open-cluster-management.io/addon-pre-delete";
/// Deprecated variant of [`FINALIZER_HOSTING_ADDON_PRE_DELETE`].
pub const FINALIZER_HOSTING_ADDON_PRE_DELETE_DEPRECATED: &str =
    "cluster.open-cluster-management.io/hosting-addon-pre-delete";
/// Deprecated variant of [`FINALIZER_HOSTING_MANIFESTS_CLEANUP`].
pub const FINALIZER_HOSTING_MANIFESTS_CLEANUP_DEPRECATED: &str =
    "cluster.open-cluster-management.io/hosting-manifests-cleanup";

/// Default addon agent install namespace.
pub const DEFAULT_INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// Sentinel default-config name for a v1alpha1 supported config without a default.
pub const RESERVED_NO_DEFAULT_CONFIG_NAME: &str = "__reserved_no_default__";
/// The signer that means a kubeClient registration.
pub const KUBE_APISERVER_CLIENT_SIGNER_NAME: &str = "kubernetes.io/kube-apiserver-client";

/// Install strategy: users create ManagedClusterAddOns (default).
pub const INSTALL_STRATEGY_MANUAL: &str = "Manual";
/// Install strategy: install on the clusters of the listed placements.
pub const INSTALL_STRATEGY_PLACEMENTS: &str = "Placements";
/// Health check mode: the registration agent watches the addon's lease (default).
pub const HEALTH_CHECK_MODE_LEASE: &str = "Lease";
/// Health check mode: the addon controller writes Available.
pub const HEALTH_CHECK_MODE_CUSTOMIZED: &str = "Customized";

/// MCA condition.
pub const CONDITION_AVAILABLE: &str = "Available";
/// MCA condition.
pub const CONDITION_DEGRADED: &str = "Degraded";
/// MCA and installProgression condition.
pub const CONDITION_PROGRESSING: &str = "Progressing";
/// MCA condition.
pub const CONDITION_CONFIGURED: &str = "Configured";
/// MCA condition.
pub const CONDITION_MANIFEST_APPLIED: &str = "ManifestApplied";
/// MCA condition.
pub const CONDITION_HOOK_MANIFEST_COMPLETED: &str = "HookManifestCompleted";
/// MCA condition.
pub const CONDITION_HOSTING_MANIFEST_APPLIED: &str = "HostingManifestApplied";
/// MCA condition.
pub const CONDITION_HOSTING_CLUSTER_VALIDITY: &str = "HostingClusterValidity";
/// MCA condition.
pub const CONDITION_REGISTRATION_APPLIED: &str = "RegistrationApplied";

/// Available reason (work prober).
pub const REASON_WORK_NOT_FOUND: &str = "WorkNotFound";
/// Available reason (work prober).
pub const REASON_WORK_APPLY_FAILED: &str = "WorkApplyFailed";
/// Available reason (work prober).
pub const REASON_WORK_NOT_APPLIED: &str = "WorkNotApplied";
/// Available reason (work prober).
pub const REASON_WORK_APPLIED: &str = "WorkApplied";
/// Available reason (feedback probe).
pub const REASON_NO_PROBE_RESULT: &str = "NoProbeResult";
/// Available reason (feedback probe).
pub const REASON_PROBE_UNAVAILABLE: &str = "ProbeUnavailable";
/// Available reason (feedback probe).
pub const REASON_PROBE_AVAILABLE: &str = "ProbeAvailable";
/// Available False (lease mode).
pub const REASON_LEASE_UPDATE_STOPPED: &str = "ManagedClusterAddOnLeaseUpdateStopped";
/// Available Unknown (lease mode).
pub const REASON_LEASE_NOT_FOUND: &str = "ManagedClusterAddOnLeaseNotFound";
/// Available True (lease mode).
pub const REASON_LEASE_UPDATED: &str = "ManagedClusterAddOnLeaseUpdated";
/// ManifestApplied True.
pub const REASON_ADDON_MANIFEST_APPLIED: &str = "AddonManifestApplied";
/// ManifestApplied False.
pub const REASON_MANIFEST_WORK_APPLY_FAILED: &str = "ManifestWorkApplyFailed";
/// ManifestApplied False.
pub const REASON_ADDON_MANIFEST_APPLIED_FAILED: &str = "AddonManifestAppliedFailed";
/// Progressing True.
pub const REASON_PROGRESSING: &str = "Progressing";
/// Progressing False.
pub const REASON_COMPLETED: &str = "Completed";
/// Progressing False.
pub const REASON_FAILED: &str = "Failed";
/// Progressing reason.
pub const REASON_WAITING_FOR_CANARY: &str = "WaitingForCanary";
/// Progressing reason.
pub const REASON_CONFIGURATION_UNSUPPORTED: &str = "ConfigurationUnsupported";
/// Progressing reason.
pub const REASON_WAITING_FOR_MANIFEST_APPLIED: &str = "WaitingForManifestApplied";
/// Progressing reason.
pub const REASON_WAITING_FOR_HOSTING_MANIFEST_APPLIED: &str = "WaitingForHostingManifestApplied";
/// HostingClusterValidity True.
pub const REASON_HOSTING_CLUSTER_VALID: &str = "HostingClusterValid";
/// HostingClusterValidity False.
pub const REASON_HOSTING_CLUSTER_INVALID: &str = "HostingClusterInvalid";
/// RegistrationApplied reason.
pub const REASON_NIL_REGISTRATION: &str = "NilRegistration";
/// RegistrationApplied False.
pub const REASON_SET_PERMISSION_FAILED: &str = "SetPermissionFailed";
/// RegistrationApplied True.
pub const REASON_SET_PERMISSION_APPLIED: &str = "SetPermissionApplied";

/// Display metadata of an addon.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct AddOnMeta {
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A config kind: group and plural resource.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ConfigGroupResource {
    /// API group (default `""`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Plural resource.
    pub resource: String,
}

/// A config object: namespace (empty = cluster-scoped) and name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReferent {
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

/// A config object with its kind (Go's `AddOnConfig` = `ConfigGroupResource` +
/// `ConfigReferent`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct AddOnConfig {
    /// API group (default `""`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Plural resource.
    pub resource: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

/// A config object and the hash of its spec.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSpecHash {
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
    /// Hash of the config's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_hash: Option<String>,
}

/// `spec.installStrategy` of a ClusterManagementAddOn.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct InstallStrategy {
    /// `INSTALL_STRATEGY_*` (default `Manual`).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [crate::api::addon::INSTALL_STRATEGY_MANUAL, crate::api::addon::INSTALL_STRATEGY_PLACEMENTS]))]
    pub type_: Option<String>,
    /// Placements (map keyed by namespace + name; a later entry wins for a cluster).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["namespace", "name"]))]
    pub placements: Vec<PlacementStrategy>,
}

/// One install placement.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStrategy {
    /// Placement namespace.
    pub namespace: String,
    /// Placement name.
    pub name: String,
    /// Configs for the addons on this placement's clusters.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,
    /// Config rollout (server default `{type: All}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_strategy: Option<RolloutStrategy>,
}

/// A default config and the desired spec hash.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct DefaultConfigReference {
    /// API group (default `""`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Plural resource.
    pub resource: String,
    /// Desired config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_config: Option<ConfigSpecHash>,
}

/// Install progress of one placement.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct InstallProgression {
    /// Placement namespace.
    pub namespace: String,
    /// Placement name.
    pub name: String,
    /// Config references for this placement.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub config_references: Vec<InstallConfigReference>,
    /// Conditions ([`CONDITION_PROGRESSING`]).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::api::meta::conditions_schema")]
    pub conditions: Vec<Condition>,
}

/// A config reference of an install progression.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct InstallConfigReference {
    /// API group (default `""`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Plural resource.
    pub resource: String,
    /// Desired config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_config: Option<ConfigSpecHash>,
    /// Last config that rolled out successfully.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_known_good_config: Option<ConfigSpecHash>,
    /// Last config applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_config: Option<ConfigSpecHash>,
}

/// An object related to a ManagedClusterAddOn.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// API group.
    pub group: String,
    /// Plural resource.
    pub resource: String,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

/// `status.healthCheck` of a ManagedClusterAddOn.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheck {
    /// `HEALTH_CHECK_MODE_*` (default `Lease`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [crate::api::addon::HEALTH_CHECK_MODE_LEASE, crate::api::addon::HEALTH_CHECK_MODE_CUSTOMIZED]))]
    pub mode: Option<String>,
}

/// `AddOnDeploymentConfig.spec` (identical in v1alpha1 and v1beta1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct AddOnDeploymentConfigSpec {
    /// Template variables (map keyed by `name`).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub customized_variables: Vec<CustomizedVariable>,
    /// Node selector and tolerations for the addon agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_placement: Option<NodePlacement>,
    /// Image mirrors.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub registries: Vec<ImageMirror>,
    /// Proxy settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_config: Option<ProxyConfig>,
    /// Agent install namespace (default [`DEFAULT_INSTALL_NAMESPACE`], `""` = the template's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_install_namespace: Option<String>,
    /// Container resources (map keyed by `containerID`).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["containerID"]))]
    pub resource_requirements: Vec<ContainerResourceRequirements>,
}

/// One template variable.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct CustomizedVariable {
    /// Name, `^[a-zA-Z_][_a-zA-Z0-9]*$`, max 255.
    pub name: String,
    /// Value, max 1024.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// Where the addon agent runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct NodePlacement {
    /// Node selector.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

/// One image mirror.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ImageMirror {
    /// Mirror registry.
    pub mirror: String,
    /// Source registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Proxy settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ProxyConfig {
    /// HTTP proxy URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_proxy: Option<String>,
    /// HTTPS proxy URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https_proxy: Option<String>,
    /// Proxy CA bundle (base64 in JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::api::meta::bytes_schema")]
    pub ca_bundle: Option<ByteString>,
    /// No-proxy list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_proxy: Option<String>,
}

/// Resources of the matching containers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(inline)]
#[serde(rename_all = "camelCase")]
pub struct ContainerResourceRequirements {
    /// `<kind>:<name>:<container>` (wildcards allowed; JSON key `containerID`).
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// The resources.
    pub resources: ResourceRequirements,
}

pub mod v1alpha1;

pub mod v1beta1;

/// A config's spec hash as OCM computes it (`GetSpecHash`, ocm-wave2.md §2.6): the lowercase
/// hex SHA-256 of Go's `json.Marshal` of the object's top-level fields other than `apiVersion`,
/// `kind`, `metadata` and `status` (keys sorted at every level; `<`, `>`, `&`, U+2028 and U+2029
/// escaped as Go escapes them).
pub fn spec_hash(config: &serde_json::Value) -> String {
    let fields: serde_json::Map<String, serde_json::Value> = config
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    crate::gojson::go_json_sha256(&serde_json::Value::Object(fields))
}

// ---- conversions ----------------------------------------------------------------------------

impl From<v1alpha1::ClusterManagementAddOn> for v1beta1::ClusterManagementAddOn {
    fn from(src: v1alpha1::ClusterManagementAddOn) -> Self {
        let spec = src.spec;
        Self {
            api_version: Default::default(),
            kind: Default::default(),
            metadata: src.metadata,
            spec: v1beta1::ClusterManagementAddOnSpec {
                add_on_meta: spec.add_on_meta,
                default_configs: spec
                    .supported_configs
                    .into_iter()
                    .map(|c| {
                        let referent = c.default_config.unwrap_or_else(|| ConfigReferent {
                            namespace: None,
                            name: RESERVED_NO_DEFAULT_CONFIG_NAME.to_owned(),
                        });
                        AddOnConfig {
                            group: c.group,
                            resource: c.resource,
                            namespace: referent.namespace,
                            name: referent.name,
                        }
                    })
                    .collect(),
                install_strategy: spec.install_strategy,
            },
            status: src.status.map(|s| v1beta1::ClusterManagementAddOnStatus {
                default_config_references: s.default_config_references,
                install_progressions: s.install_progressions,
            }),
        }
    }
}

impl From<v1beta1::ClusterManagementAddOn> for v1alpha1::ClusterManagementAddOn {
    fn from(src: v1beta1::ClusterManagementAddOn) -> Self {
        let spec = src.spec;
        Self {
            api_version: Default::default(),
            kind: Default::default(),
            metadata: src.metadata,
            spec: v1alpha1::ClusterManagementAddOnSpec {
                add_on_meta: spec.add_on_meta,
                add_on_configuration: None,
                supported_configs: spec
                    .default_configs
                    .into_iter()
                    .map(|c| v1alpha1::ConfigMeta {
                        group: c.group,
                        resource: c.resource,
                        default_config: (!c.name.is_empty()
                            && c.name != RESERVED_NO_DEFAULT_CONFIG_NAME)
                            .then_some(ConfigReferent { namespace: c.namespace, name: c.name }),
                    })
                    .collect(),
                install_strategy: spec.install_strategy,
            },
            status: src.status.map(|s| v1alpha1::ClusterManagementAddOnStatus {
                default_config_references: s.default_config_references,
                install_progressions: s.install_progressions,
            }),
        }
    }
}

impl From<v1alpha1::ManagedClusterAddOn> for v1beta1::ManagedClusterAddOn {
    fn from(src: v1alpha1::ManagedClusterAddOn) -> Self {
        let mut metadata = src.metadata;
        if let Some(ns) = src.spec.install_namespace.filter(|ns| !ns.is_empty()) {
            metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(ANNOTATION_V1ALPHA1_INSTALL_NAMESPACE.to_owned(), ns);
        }
        Self {
            api_version: Default::default(),
            kind: Default::default(),
            metadata,
            spec: v1beta1::ManagedClusterAddOnSpec { configs: src.spec.configs },
            status: src.status.map(mca_status_to_v1beta1),
        }
    }
}

impl From<v1beta1::ManagedClusterAddOn> for v1alpha1::ManagedClusterAddOn {
    fn from(src: v1beta1::ManagedClusterAddOn) -> Self {
        let mut metadata = src.metadata;
        let install_namespace = match metadata.annotations.as_mut() {
            Some(annotations) => {
                let ns = annotations.remove(ANNOTATION_V1ALPHA1_INSTALL_NAMESPACE);
                if annotations.is_empty() {
                    metadata.annotations = None;
                }
                ns
            }
            None => None,
        };
        Self {
            api_version: Default::default(),
            kind: Default::default(),
            metadata,
            spec: v1alpha1::ManagedClusterAddOnSpec {
                install_namespace,
                configs: src.spec.configs,
            },
            status: src.status.map(mca_status_to_v1alpha1),
        }
    }
}

fn mca_status_to_v1beta1(
    s: v1alpha1::ManagedClusterAddOnStatus,
) -> v1beta1::ManagedClusterAddOnStatus {
    let driver = s
        .kube_client_driver
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| v1beta1::KUBE_CLIENT_DRIVER_CSR.to_owned());
    let registrations = s
        .registrations
        .into_iter()
        .map(|r| {
            let subject = r.subject;
            if r.signer_name == KUBE_APISERVER_CLIENT_SIGNER_NAME {
                v1beta1::RegistrationConfig {
                    type_: v1beta1::REGISTRATION_TYPE_KUBE_CLIENT.to_owned(),
                    kube_client: Some(v1beta1::KubeClientConfig {
                        subject: subject
                            .map(|s| v1beta1::KubeClientSubject { user: s.user, groups: s.groups }),
                        driver: Some(driver.clone()),
                    }),
                    custom_signer: None,
                }
            } else {
                v1beta1::RegistrationConfig {
                    type_: v1beta1::REGISTRATION_TYPE_CUSTOM_SIGNER.to_owned(),
                    kube_client: None,
                    custom_signer: Some(v1beta1::CustomSignerConfig {
                        signer_name: r.signer_name,
                        subject: subject.map(|s| v1beta1::Subject {
                            user: s.user,
                            groups: s.groups,
                            organization_units: s.organization_units,
                        }),
                    }),
                }
            }
        })
        .collect();
    let config_references = s
        .config_references
        .into_iter()
        .map(|r| {
            let desired_config = r.desired_config.or_else(|| {
                (!r.name.is_empty() || r.namespace.as_deref().is_some_and(|ns| !ns.is_empty()))
                    .then_some(ConfigSpecHash {
                        namespace: r.namespace,
                        name: r.name,
                        spec_hash: None,
                    })
            });
            v1beta1::ConfigReference {
                group: r.group,
                resource: r.resource,
                last_observed_generation: r.last_observed_generation,
                desired_config,
                last_applied_config: r.last_applied_config,
            }
        })
        .collect();
    v1beta1::ManagedClusterAddOnStatus {
        conditions: s.conditions,
        related_objects: s.related_objects,
        add_on_meta: s.add_on_meta,
        supported_configs: s.supported_configs,
        config_references,
        namespace: s.namespace,
        registrations,
        health_check: s.health_check,
    }
}

fn mca_status_to_v1alpha1(
    s: v1beta1::ManagedClusterAddOnStatus,
) -> v1alpha1::ManagedClusterAddOnStatus {
    let kube_client_driver = s
        .registrations
        .iter()
        .find(|r| r.type_ == v1beta1::REGISTRATION_TYPE_KUBE_CLIENT && r.kube_client.is_some())
        .and_then(|r| r.kube_client.as_ref().and_then(|k| k.driver.clone()));
    let registrations = s
        .registrations
        .into_iter()
        .map(|r| {
            if r.type_ == v1beta1::REGISTRATION_TYPE_KUBE_CLIENT {
                v1alpha1::RegistrationConfig {
                    signer_name: KUBE_APISERVER_CLIENT_SIGNER_NAME.to_owned(),
                    subject: r.kube_client.and_then(|k| k.subject).map(|s| v1alpha1::Subject {
                        user: s.user,
                        groups: s.groups,
                        organization_units: Vec::new(),
                    }),
                }
            } else {
                let custom = r.custom_signer.unwrap_or_default();
                v1alpha1::RegistrationConfig {
                    signer_name: custom.signer_name,
                    subject: custom.subject.map(|s| v1alpha1::Subject {
                        user: s.user,
                        groups: s.groups,
                        organization_units: s.organization_units,
                    }),
                }
            }
        })
        .collect();
    let config_references = s
        .config_references
        .into_iter()
        .map(|r| {
            let (namespace, name) = match &r.desired_config {
                Some(d) => (d.namespace.clone(), d.name.clone()),
                None => (None, String::new()),
            };
            v1alpha1::ConfigReference {
                group: r.group,
                resource: r.resource,
                namespace,
                name,
                last_observed_generation: r.last_observed_generation,
                desired_config: r.desired_config,
                last_applied_config: r.last_applied_config,
            }
        })
        .collect();
    v1alpha1::ManagedClusterAddOnStatus {
        conditions: s.conditions,
        related_objects: s.related_objects,
        add_on_meta: s.add_on_meta,
        add_on_configuration: None,
        supported_configs: s.supported_configs,
        config_references,
        namespace: s.namespace,
        registrations,
        health_check: s.health_check,
        kube_client_driver,
    }
}

impl From<v1alpha1::AddOnDeploymentConfig> for v1beta1::AddOnDeploymentConfig {
    fn from(src: v1alpha1::AddOnDeploymentConfig) -> Self {
        Self {
            api_version: Default::default(),
            kind: Default::default(),
            metadata: src.metadata,
            spec: src.spec,
        }
    }
}

impl From<v1beta1::AddOnDeploymentConfig> for v1alpha1::AddOnDeploymentConfig {
    fn from(src: v1beta1::AddOnDeploymentConfig) -> Self {
        Self {
            api_version: Default::default(),
            kind: Default::default(),
            metadata: src.metadata,
            spec: src.spec,
        }
    }
}

#[cfg(test)]
mod spec_hash_tests {
    use super::*;
    use crate::gojson::go_json;
    use serde_json::json;

    #[test]
    fn spec_hash_is_gos_json_of_the_spec() {
        let config = json!({
            "apiVersion": "addon.open-cluster-management.io/v1alpha1",
            "kind": "AddOnDeploymentConfig",
            "metadata": {"name": "c", "resourceVersion": "7"},
            "spec": {"customizedVariables": [{"name": "B", "value": "<x&y>"}],
                     "agentInstallNamespace": "ns"},
        });
        assert_eq!(
            go_json(&json!({"spec": config["spec"]})),
            r#"{"spec":{"agentInstallNamespace":"ns","customizedVariables":[{"name":"B","value":"\u003cx\u0026y\u003e"}]}}"#
        );
        // Python's json.dumps(sort_keys=True, separators=(",", ":")) of the same, escaped alike.
        assert_eq!(
            spec_hash(&config),
            "6f574580cc2dbb7e5bc8247dbc5f89d3c8efd26ee2d96bd8c1121cf2be0d6faf"
        );
    }
}
