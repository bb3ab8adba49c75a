//! Typed OCM hub API objects (every kind at every version the hub serves from the copied CRDs)
//! and the [`Resource`] trait that names them.
//!
//! Layout: [`cluster`] (`cluster.open-cluster-management.io`), [`work`]
//! (`work.open-cluster-management.io`), [`addon`] (`addon.open-cluster-management.io`, with the
//! v1alpha1 <-> v1beta1 conversions), [`authentication`]
//! (`authentication.open-cluster-management.io`), [`policy`] (`policy.open-cluster-management.io`),
//! [`multicluster`] (SIG-multicluster's `multicluster.x-k8s.io`, whose ClusterProfiles the hub
//! writes) and [`meta`] (the pieces every kind shares: the
//! `apiVersion`/`kind` tags, [`ObjectList`], condition status values, serde helpers). Each
//! group module holds one submodule per version (`cluster::v1`, `cluster::v1beta1`, ...) and the
//! group's well-known labels, annotations and finalizers as `pub const`s; condition types and
//! reasons sit next to the kind that carries them.
//!
//! Conventions, applied to every field (the CRD's `openAPIV3Schema` is the source of truth):
//! - a property the schema lists in `required` is a bare field; any other property is an
//!   `Option` that is omitted when `None`, except arrays and maps, which are a `Vec`/`BTreeMap`
//!   omitted when empty (and read `null` as empty);
//! - enum-valued strings are `String`s with `pub const` values, so values from a newer OCM
//!   round-trip untouched;
//! - embedded manifests (`x-kubernetes-preserve-unknown-fields`) are [`work::v1::Manifest`], a
//!   newtype around `serde_json::Value`;
//! - upstream shapes (`metav1.Condition`, `LabelSelector`, `Time`, `Quantity`, `IntOrString`,
//!   `corev1.Toleration`, `ResourceRequirements`, `rbacv1.RoleRef`, `[]byte`) are the
//!   `k8s-openapi` types;
//! - unknown fields are ignored on input, never rejected (the server prunes);
//! - every type derives `schemars::JsonSchema` and is inlined (`#[schemars(inline)]`): the hub
//!   publishes these schemas as its OpenAPI, so doc comments are what `kubectl explain` shows,
//!   and what the Rust type cannot say the CRD does is an attribute: enum values
//!   (`extend("enum" = [...])` over the `pub const`s), `x-kubernetes-list-type`/`-list-map-keys`
//!   and `x-kubernetes-map-type`; condition lists and `[]byte` use the schema functions in
//!   [`meta`]. `conformance/tests/schema_fidelity.rs` checks them against the CRDs.
#![warn(missing_docs)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Implements [`Resource`] for one kind; the literals are the CRD's names.
macro_rules! resource {
    (
        $ty:ty,group = $group:literal,version = $version:literal,kind = $kind:literal,
        plural = $plural:literal,singular = $singular:literal,short_names = [$($short:literal),*],
        namespaced = $namespaced:literal,status_subresource = $status:literal,
        storage_version = $storage:literal
    ) => {
        impl $crate::api::Resource for $ty {
            const GROUP: &'static str = $group;
            const VERSION: &'static str = $version;
            const API_VERSION: &'static str = concat!($group, "/", $version);
            const KIND: &'static str = $kind;
            const LIST_KIND: &'static str = concat!($kind, "List");
            const PLURAL: &'static str = $plural;
            const SINGULAR: &'static str = $singular;
            const SHORT_NAMES: &'static [&'static str] = &[$($short),*];
            const NAMESPACED: bool = $namespaced;
            const STATUS_SUBRESOURCE: bool = $status;
            const STORAGE_VERSION: bool = $storage;

            fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

pub mod addon;
pub mod authentication;
pub mod cluster;
pub mod meta;
pub mod multicluster;
pub mod policy;
pub mod work;

pub use meta::{ApiVersionTag, KindTag, Manifest, ObjectList};

/// What the API machinery needs to know about one kind at one version: its names as the CRD
/// declares them, its scope and whether status is a subresource.
pub trait Resource {
    /// API group, e.g. `cluster.open-cluster-management.io`.
    const GROUP: &'static str;
    /// Version within the group, e.g. `v1beta1`.
    const VERSION: &'static str;
    /// `<group>/<version>`, the value of `apiVersion`.
    const API_VERSION: &'static str;
    /// The kind, e.g. `Placement`.
    const KIND: &'static str;
    /// The kind of a list of these, `<Kind>List`.
    const LIST_KIND: &'static str;
    /// Plural resource name used in URLs, e.g. `placements`.
    const PLURAL: &'static str;
    /// Singular resource name, e.g. `placement`.
    const SINGULAR: &'static str;
    /// Short names the CRD declares (may be empty).
    const SHORT_NAMES: &'static [&'static str];
    /// Whether objects live in a namespace (`scope: Namespaced`).
    const NAMESPACED: bool;
    /// Whether the CRD version enables the `status` subresource.
    const STATUS_SUBRESOURCE: bool;
    /// Whether this version is the one the CRD stores (`storage: true`); objects of the other
    /// served versions are converted to it (see [`addon`]).
    const STORAGE_VERSION: bool;

    /// The object's metadata.
    fn metadata(&self) -> &ObjectMeta;
    /// The object's metadata, mutably.
    fn metadata_mut(&mut self) -> &mut ObjectMeta;
}

/// A function producing one kind's JSON schema (its own, not a `$ref`), with the upstream types
/// it uses (`ObjectMeta`, `Time`, ...) as definitions in the generator.
pub type SchemaFn = fn(&mut schemars::SchemaGenerator) -> schemars::Schema;

/// The JSON schema of the typed OCM kind `kind` at `api_version`, derived from the Rust type
/// (descriptions from its doc comments); `None` when this crate has no type for it.
pub fn json_schema(api_version: &str, kind: &str) -> Option<SchemaFn> {
    // The names come from each type's `Resource` constants, so they cannot drift from it.
    fn of<T: Resource + schemars::JsonSchema>() -> (&'static str, &'static str, SchemaFn) {
        (T::API_VERSION, T::KIND, T::json_schema)
    }
    [
        of::<cluster::v1::ManagedCluster>(),
        of::<cluster::v1beta2::ManagedClusterSet>(),
        of::<cluster::v1beta2::ManagedClusterSetBinding>(),
        of::<cluster::v1beta1::Placement>(),
        of::<cluster::v1beta1::PlacementDecision>(),
        of::<cluster::v1alpha1::AddOnPlacementScore>(),
        of::<cluster::v1alpha1::ClusterClaim>(),
        of::<work::v1::ManifestWork>(),
        of::<work::v1::AppliedManifestWork>(),
        of::<work::v1alpha1::ManifestWorkReplicaSet>(),
        of::<addon::v1alpha1::ClusterManagementAddOn>(),
        of::<addon::v1alpha1::ManagedClusterAddOn>(),
        of::<addon::v1alpha1::AddOnDeploymentConfig>(),
        of::<addon::v1alpha1::AddOnTemplate>(),
        of::<addon::v1beta1::ClusterManagementAddOn>(),
        of::<addon::v1beta1::ManagedClusterAddOn>(),
        of::<addon::v1beta1::AddOnDeploymentConfig>(),
        of::<authentication::v1beta1::ManagedServiceAccount>(),
        of::<policy::v1::Policy>(),
        of::<policy::v1::PlacementBinding>(),
        of::<policy::v1::ConfigurationPolicy>(),
        of::<policy::v1beta1::PolicySet>(),
        of::<multicluster::v1alpha1::ClusterProfile>(),
    ]
    .into_iter()
    .find(|(a, k, _)| *a == api_version && *k == kind)
    .map(|(_, _, f)| f)
}
