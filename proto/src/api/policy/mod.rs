//! `policy.open-cluster-management.io`: governance policies (ocm-wave2.md §3). Policy and
//! PlacementBinding at v1, PolicySet at v1beta1, and the ConfigurationPolicy template kind at
//! v1, plus the labels and annotations OCM's propagator puts on replicated policies and the
//! compliance values every status uses.

/// The API group.
pub const GROUP: &str = "policy.open-cluster-management.io";

/// Label on a replicated policy naming its root, `<root namespace>.<root name>`.
pub const LABEL_ROOT_POLICY: &str = "policy.open-cluster-management.io/root-policy";
/// Label on a replicated policy naming the cluster it is for.
pub const LABEL_CLUSTER_NAME: &str = "policy.open-cluster-management.io/cluster-name";
/// Label on a replicated policy naming the cluster's namespace on the hub.
pub const LABEL_CLUSTER_NAMESPACE: &str = "policy.open-cluster-management.io/cluster-namespace";
/// The prefix of the labels and annotations a root policy passes on even with
/// `copyPolicyMetadata: false`.
pub const METADATA_PREFIX: &str = "policy.open-cluster-management.io/";
/// Annotation a user changes to force a new propagation; never copied to replicas.
pub const ANNOTATION_TRIGGER_UPDATE: &str = "policy.open-cluster-management.io/trigger-update";
/// Annotation OCM's propagator adds to every replica (Argo CD leaves it alone).
pub const ANNOTATION_ARGOCD_COMPARE: &str = "argocd.argoproj.io/compare-options";
/// Its value.
pub const ARGOCD_IGNORE_EXTRANEOUS: &str = "IgnoreExtraneous";

/// Compliance value: every template complies.
pub const COMPLIANT: &str = "Compliant";
/// Compliance value: some template does not comply.
pub const NON_COMPLIANT: &str = "NonCompliant";
/// Compliance value: some template waits on a dependency.
pub const PENDING: &str = "Pending";
/// ConfigurationPolicy compliance value while its objects are being removed.
pub const TERMINATING: &str = "Terminating";

/// `remediationAction`: report only.
pub const INFORM: &str = "inform";
/// `remediationAction`: create, patch or delete to comply.
pub const ENFORCE: &str = "enforce";

/// The `kind` of the ConfigurationPolicy template.
pub const KIND_CONFIGURATION_POLICY: &str = "ConfigurationPolicy";

/// The longest `len(namespace) + len(name)` of a root policy: `<namespace>.<name>` must be a
/// valid label value (63 characters).
pub const MAX_ROOT_NAME: usize = 62;

pub mod v1;
pub mod v1beta1;

/// The replicated policy name of the root policy `namespace/name`: `<namespace>.<name>`.
pub fn replica_name(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

/// The compliance over several (a policy's over its templates or clusters, a set's over its
/// policies): NonCompliant wins, then Pending, else Compliant; `None` when there are none.
pub fn overall<'a>(states: impl IntoIterator<Item = &'a str>) -> Option<&'static str> {
    let mut out = None;
    for s in states {
        out = Some(match (out, s) {
            (_, NON_COMPLIANT) | (Some(NON_COMPLIANT), _) => NON_COMPLIANT,
            (_, PENDING) | (Some(PENDING), _) => PENDING,
            _ => COMPLIANT,
        });
    }
    out
}

/// Whether a `remediationAction` value (any case) says enforce.
pub fn is_enforce(action: &str) -> bool {
    action.eq_ignore_ascii_case(ENFORCE)
}
