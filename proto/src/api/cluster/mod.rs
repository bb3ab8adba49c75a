//! `cluster.open-cluster-management.io`: ManagedCluster (v1), ManagedClusterSet and
//! ManagedClusterSetBinding (v1beta2), Placement and PlacementDecision (v1beta1),
//! AddOnPlacementScore and ClusterClaim (v1alpha1, which also holds the shared
//! [`v1alpha1::RolloutStrategy`]), plus the registration and placement labels, annotations,
//! finalizers and taint keys.

/// The API group.
pub const GROUP: &str = "cluster.open-cluster-management.io";

/// The group every agent certificate carries besides its cluster's (ignored when an approver
/// checks a request's Os).
pub const GROUP_MANAGED_CLUSTERS: &str = "system:open-cluster-management:managed-clusters";

/// The group of a cluster's agents (the `O` of their certificates; the RBAC key).
pub fn agent_group(cluster: &str) -> String {
    format!("system:open-cluster-management:{cluster}")
}

/// The user of a cluster's agent (the `CN` of its certificate).
pub fn agent_user(cluster: &str, agent: &str) -> String {
    format!("system:open-cluster-management:{cluster}:{agent}")
}

/// Label on a cluster's Namespace, Lease, CSRs and per-cluster RBAC naming the cluster it belongs
/// to.
pub const LABEL_CLUSTER_NAME: &str = "open-cluster-management.io/cluster-name";
/// Label on a ManagedCluster naming its `ExclusiveClusterSetLabel` set (webhook default
/// [`CLUSTER_SET_DEFAULT`]).
pub const LABEL_CLUSTER_SET: &str = "cluster.open-cluster-management.io/clusterset";
/// Label on a PlacementDecision naming its Placement.
pub const LABEL_PLACEMENT: &str = "cluster.open-cluster-management.io/placement";
/// Label on a PlacementDecision: its decision group's name (`""` for unnamed groups).
pub const LABEL_DECISION_GROUP_NAME: &str =
    "cluster.open-cluster-management.io/decision-group-name";
/// Label on a PlacementDecision: its decision group's index (decimal string).
pub const LABEL_DECISION_GROUP_INDEX: &str =
    "cluster.open-cluster-management.io/decision-group-index";
/// Label on a spoke ClusterClaim: the claim is not reported to the hub.
pub const LABEL_SPOKE_ONLY: &str = "open-cluster-management.io/spoke-only";
/// Prefix of the ManagedCluster label `feature.open-cluster-management.io/addon-<name>` mirroring
/// an addon's health (values [`ADDON_FEATURE_AVAILABLE`], [`ADDON_FEATURE_UNHEALTHY`],
/// [`ADDON_FEATURE_UNREACHABLE`]).
pub const LABEL_PREFIX_ADDON_FEATURE: &str = "feature.open-cluster-management.io/addon-";
/// Addon feature label value: the addon's Available condition is True.
pub const ADDON_FEATURE_AVAILABLE: &str = "available";
/// Addon feature label value: the addon's Available condition is False.
pub const ADDON_FEATURE_UNHEALTHY: &str = "unhealthy";
/// Addon feature label value: the addon's Available condition is missing or Unknown.
pub const ADDON_FEATURE_UNREACHABLE: &str = "unreachable";
/// Prefix of the spoke Namespace label `clusterset.open-cluster-management.io/<hubHash[:63]>` =
/// `true` marking namespaces managed through a clusterset's `managedNamespaces`.
pub const LABEL_PREFIX_CLUSTER_SET_NAMESPACE: &str = "clusterset.open-cluster-management.io/";

/// Annotation on a ManagedCluster: RFC 3339 time it was auto-accepted.
pub const ANNOTATION_AUTOMATICALLY_ACCEPTED_ON: &str =
    "open-cluster-management.io/automatically-accepted-on";
/// Annotation on a ManagedCluster; `"true"` makes the hub treat its clock as synced.
pub const ANNOTATION_SKIP_CLOCK_SYNC_CHECK: &str =
    "registration.open-cluster-management.io/skip-clock-sync-check";
/// Prefix of the annotations the agent may set on its ManagedCluster at creation.
pub const ANNOTATION_PREFIX_AGENT: &str = "agent.open-cluster-management.io/";
/// Annotation on a ManagedCluster: AWS IRSA registration marker.
pub const ANNOTATION_MANAGED_CLUSTER_ARN: &str =
    "agent.open-cluster-management.io/managed-cluster-arn";
/// Annotation on a ManagedCluster: JSON `{"registries":[{"source":..,"mirrors":..}]}` image
/// override for addons.
pub const ANNOTATION_IMAGE_REGISTRIES: &str = "open-cluster-management.io/image-registries";
/// Annotation on objects in a cluster namespace: integer 0..100, cluster GC deletes lower first
/// (missing or invalid = 0).
pub const ANNOTATION_CLEANUP_PRIORITY: &str = "open-cluster-management.io/cleanup-priority";
/// Annotation on a Placement; `"true"` makes the scheduler skip it.
pub const ANNOTATION_EXPERIMENTAL_SCHEDULING_DISABLE: &str =
    "cluster.open-cluster-management.io/experimental-scheduling-disable";
/// Annotation on the `default`/`global` ManagedClusterSet; `"false"` stops the controller from
/// reverting its selector.
pub const ANNOTATION_CLUSTER_SET_AUTO_UPDATE: &str =
    "cluster.open-cluster-management.io/autoupdate";
/// Annotation on a CSR created by the gRPC server: the real agent user name.
pub const ANNOTATION_CSR_USER: &str = "open-cluster-management.io/csr-user";

/// ManagedCluster finalizer: per-cluster RBAC still to remove.
pub const FINALIZER_API_RESOURCE_CLEANUP: &str =
    "cluster.open-cluster-management.io/api-resource-cleanup";
/// ManagedCluster finalizer: resources in the cluster namespace still to garbage-collect.
pub const FINALIZER_RESOURCE_CLEANUP: &str = "cluster.open-cluster-management.io/resource-cleanup";

/// Automatic taint (effect `NoSelect`) while the cluster's Available condition is missing or
/// Unknown.
pub const TAINT_UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";
/// Automatic taint (effect `NoSelect`) while the cluster's Available condition is False.
pub const TAINT_UNAVAILABLE: &str = "cluster.open-cluster-management.io/unavailable";

/// The Lease in a cluster's namespace its agent renews (the hub creates it on acceptance).
pub const LEASE_NAME: &str = "managed-cluster-lease";
/// The `ExclusiveClusterSetLabel` set every cluster joins by default.
pub const CLUSTER_SET_DEFAULT: &str = "default";
/// The `LabelSelector` set selecting every cluster.
pub const CLUSTER_SET_GLOBAL: &str = "global";

/// Reserved ClusterClaim: cluster id.
pub const CLAIM_ID: &str = "id.k8s.io";
/// Reserved ClusterClaim: Kubernetes version.
pub const CLAIM_KUBE_VERSION: &str = "kubeversion.open-cluster-management.io";
/// Reserved ClusterClaim: platform.
pub const CLAIM_PLATFORM: &str = "platform.open-cluster-management.io";
/// Reserved ClusterClaim: product.
pub const CLAIM_PRODUCT: &str = "product.open-cluster-management.io";
/// Well-known ClusterClaim: the cluster set (documented, not reserved).
pub const CLAIM_CLUSTER_SET: &str = "clusterset.k8s.io";
/// The claims always reported, whatever the custom-claim limit.
pub const RESERVED_CLAIM_NAMES: &[&str] =
    &[CLAIM_ID, CLAIM_KUBE_VERSION, CLAIM_PLATFORM, CLAIM_PRODUCT];

pub mod v1;

pub mod v1beta2;

pub mod v1beta1;

pub mod v1alpha1;
