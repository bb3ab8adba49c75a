//! Fixtures for the RBAC tests: stored RBAC objects as JSON, users, requests, and the
//! per-cluster RBAC of an OCM agent.

use serde_json::{Value, json};

use super::service_account_user;
use super::{ALL_SERVICE_ACCOUNTS_GROUP, AUTHENTICATED_GROUP, RBAC_GROUP, RbacIndex};
use crate::machinery::requester::{Attributes, UserInfo};

pub(super) const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";
pub(super) const WORK_GROUP: &str = "work.open-cluster-management.io";

pub(super) fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

pub(super) fn named_rule(
    verbs: &[&str],
    groups: &[&str],
    resources: &[&str],
    names: &[&str],
) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources, "resourceNames": names})
}

pub(super) fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name}, "rules": rules})
}

pub(super) fn role(ns: &str, name: &str, rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
           "metadata": {"name": name, "namespace": ns}, "rules": rules})
}

pub(super) fn subject(kind: &str, name: &str) -> Value {
    if kind == "ServiceAccount" {
        json!({"kind": kind, "name": name})
    } else {
        json!({"kind": kind, "apiGroup": RBAC_GROUP, "name": name})
    }
}

pub(super) fn crb(name: &str, role_kind: &str, role: &str, subjects: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": name},
           "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role},
           "subjects": subjects})
}

pub(super) fn rb(ns: &str, name: &str, role_kind: &str, role: &str, subjects: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
           "metadata": {"name": name, "namespace": ns},
           "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role},
           "subjects": subjects})
}

pub(super) fn user(name: &str) -> UserInfo {
    UserInfo::new(name, &[AUTHENTICATED_GROUP])
}

pub(super) fn get(group: &str, resource: &str, ns: &str, name: &str) -> Attributes {
    Attributes::resource("get", group, resource, ns, name)
}

pub(super) fn allowed(index: &RbacIndex, user: &UserInfo, attrs: &Attributes) -> bool {
    index.authorize(user, attrs).is_allowed()
}

/// An index where `alice` holds `rules` cluster-wide.
pub(super) fn alice_with(rules: Vec<Value>) -> RbacIndex {
    RbacIndex::from_objects(&[
        cluster_role("r", rules),
        crb("b", "ClusterRole", "r", vec![subject("User", "alice")]),
    ])
}

/// A service account as an authenticator presents it: user
/// `system:serviceaccount:<namespace>:<name>` in groups `system:serviceaccounts`,
/// `system:serviceaccounts:<namespace>` and `system:authenticated`.
pub(super) fn service_account_user_info(namespace: &str, name: &str) -> UserInfo {
    UserInfo {
        name: service_account_user(namespace, name),
        groups: vec![
            ALL_SERVICE_ACCOUNTS_GROUP.to_string(),
            format!("{ALL_SERVICE_ACCOUNTS_GROUP}:{namespace}"),
            AUTHENTICATED_GROUP.to_string(),
        ],
        ..UserInfo::default()
    }
}

/// The per-cluster RBAC of ocm.md §3.5 for clusters `a` and `a-x`.
pub(super) fn ocm_cluster_objects(cluster: &str) -> Vec<Value> {
    let name = format!("open-cluster-management:managedcluster:{cluster}");
    let groups = vec![
        subject("Group", &format!("system:open-cluster-management:{cluster}")),
        subject("Group", &format!("open-cluster-management:{cluster}")),
    ];
    vec![
        cluster_role(
            &name,
            vec![
                rule(
                    &["create", "get", "list", "watch"],
                    &["certificates.k8s.io"],
                    &["certificatesigningrequests"],
                ),
                rule(
                    &["renew"],
                    &["register.open-cluster-management.io"],
                    &["managedclusters/clientcertificates"],
                ),
                named_rule(
                    &["get", "list", "update", "watch"],
                    &[CLUSTER_GROUP],
                    &["managedclusters"],
                    &[cluster],
                ),
                named_rule(
                    &["patch", "update"],
                    &[CLUSTER_GROUP],
                    &["managedclusters/status"],
                    &[cluster],
                ),
            ],
        ),
        crb(&name, "ClusterRole", &name, groups.clone()),
        rb(
            cluster,
            &format!("{name}:work"),
            "ClusterRole",
            "open-cluster-management:managedcluster:work",
            groups,
        ),
    ]
}

pub(super) fn ocm_work_role() -> Value {
    cluster_role(
        "open-cluster-management:managedcluster:work",
        vec![
            rule(&["create", "patch", "update"], &["", "events.k8s.io"], &["events"]),
            rule(&["get", "list", "watch", "update", "patch"], &[WORK_GROUP], &["manifestworks"]),
            rule(&["patch", "update"], &[WORK_GROUP], &["manifestworks/status"]),
        ],
    )
}
