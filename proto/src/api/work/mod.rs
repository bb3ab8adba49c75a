//! `work.open-cluster-management.io`: ManifestWork and AppliedManifestWork (v1),
//! ManifestWorkReplicaSet (v1alpha1), plus the work labels, annotations and finalizers.

/// The API group.
pub const GROUP: &str = "work.open-cluster-management.io";

/// Label on a ManifestWork: `<mwrs-namespace>.<mwrs-name>` of the owning ManifestWorkReplicaSet.
pub const LABEL_MANIFEST_WORK_REPLICA_SET: &str =
    "work.open-cluster-management.io/manifestworkreplicaset";
/// Label on a ManifestWork: the MWRS placementRef name that produced it.
pub const LABEL_PLACEMENT_NAME: &str = "work.open-cluster-management.io/placementname";
/// Label on a ManifestWork made by a ManifestWorkReplicaSet, and on its ControllerRevisions:
/// the revision (hash of the template) the work runs (OCM enhancement 229).
pub const LABEL_CONTROLLER_HASH: &str = "work.open-cluster-management.io/controller-hash";
/// Label on a ManifestWorkReplicaSet's ControllerRevisions: the owning set's name.
pub const LABEL_MANIFEST_WORK_REPLICA_SET_NAME: &str =
    "work.open-cluster-management.io/manifestworkreplicaset-name";
/// Label on a ManifestWork in an agent's CloudEvents cache: the source id it came from.
pub const LABEL_CLOUDEVENTS_ORIGINAL_SOURCE: &str =
    "cloudevents.open-cluster-management.io/originalsource";

/// Annotation on an addon ManifestWork (and on SSA-applied spoke objects): hash of the configs
/// or of the filtered desired object.
pub const ANNOTATION_CONFIG_SPEC_HASH: &str = "open-cluster-management.io/config-spec-hash";
/// Annotation on applied spoke resources: the object spec hash.
pub const ANNOTATION_OBJECT_HASH: &str = "open-cluster-management.io/object-hash";
/// Annotation kept by CloudEvents clients: payload data type.
pub const ANNOTATION_CLOUDEVENTS_DATA_TYPE: &str =
    "cloudevents.open-cluster-management.io/datatype";
/// Annotation kept by CloudEvents clients: resource version.
pub const ANNOTATION_CLOUDEVENTS_RESOURCE_VERSION: &str =
    "cloudevents.open-cluster-management.io/resourceversion";
/// Annotation kept by CloudEvents clients: sequence id.
pub const ANNOTATION_CLOUDEVENTS_SEQUENCE_ID: &str =
    "cloudevents.open-cluster-management.io/sequenceid";

/// ManifestWork finalizer (added by the work agent; removed once the AppliedManifestWork is
/// gone). Also on the per-cluster work RoleBinding.
pub const FINALIZER_MANIFEST_WORK_CLEANUP: &str =
    "cluster.open-cluster-management.io/manifest-work-cleanup";
/// AppliedManifestWork finalizer (removed once owned resources are deleted).
pub const FINALIZER_APPLIED_MANIFEST_WORK_CLEANUP: &str =
    "cluster.open-cluster-management.io/applied-manifest-work-cleanup";
/// ManifestWorkReplicaSet finalizer (removed once its ManifestWorks are deleted).
pub const FINALIZER_MANIFEST_WORK_REPLICA_SET_CLEANUP: &str =
    "work.open-cluster-management.io/manifest-work-cleanup";

pub mod v1;
pub mod v1alpha1;
