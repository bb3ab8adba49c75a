//! `multicluster.x-k8s.io`: SIG-multicluster's cluster inventory (KEP-4322, ocm-wave2.md §4.7).
//! ClusterProfile at v1alpha1, one per cluster a cluster manager exposes to a namespace, plus
//! the labels and condition types the API defines and the names OCM's producer uses.

/// The API group.
pub const GROUP: &str = "multicluster.x-k8s.io";

/// Label on a ClusterProfile naming the cluster manager that owns it.
pub const LABEL_CLUSTER_MANAGER: &str = "x-k8s.io/cluster-manager";
/// Label naming the cluster set a ClusterProfile's cluster belongs to.
pub const LABEL_CLUSTER_SET: &str = "multicluster.x-k8s.io/clusterset";
/// ClusterProfile condition: the cluster's control plane is healthy.
pub const CONDITION_CONTROL_PLANE_HEALTHY: &str = "ControlPlaneHealthy";

/// The cluster manager name OCM writes (`spec.clusterManager.name`, the cluster-manager label
/// and the access provider's name).
pub const OCM_CLUSTER_MANAGER: &str = "open-cluster-management";
/// The condition OCM's producer copies from the ManagedCluster's `ManagedClusterJoined`.
pub const CONDITION_JOINED: &str = "Joined";

pub mod v1alpha1;
