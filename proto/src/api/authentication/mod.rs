//! `authentication.open-cluster-management.io`: ManagedServiceAccount (v1beta1, the storage
//! version; the CRD's deprecated v1alpha1 has the same shape and is not served by the hub), plus
//! the label the managed-serviceaccount agent puts on what it creates.

/// The API group.
pub const GROUP: &str = "authentication.open-cluster-management.io";

/// Label (value `"true"`) on the ServiceAccount the agent creates on the managed cluster for a
/// ManagedServiceAccount, and on the token Secret it writes in the cluster namespace on the hub.
pub const LABEL_IS_MANAGED_SERVICE_ACCOUNT: &str =
    "authentication.open-cluster-management.io/is-managed-serviceaccount";

pub mod v1beta1;
