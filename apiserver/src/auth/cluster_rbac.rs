//! The RBAC the hub keeps for each managed cluster's agent (ocm.md §3.5, OCM's
//! `pkg/registration/hub/manifests/rbac`): the per-cluster ClusterRole and ClusterRoleBinding,
//! the shared registration and work ClusterRoles, and the RoleBindings in the cluster's
//! namespace. The agent's identity is the group `system:open-cluster-management:<cluster>` of
//! its client certificate.

use serde_json::{Value, json};

use crate::auth::authz::RBAC_GROUP;

/// The label every object here carries (empty for the shared ClusterRoles).
pub const CLUSTER_NAME_LABEL: &str = ocm_proto::api::cluster::LABEL_CLUSTER_NAME;
/// The shared ClusterRole of the registration agent.
pub const REGISTRATION_ROLE: &str = "open-cluster-management:managedcluster:registration";
/// The shared ClusterRole of the work agent.
pub const WORK_ROLE: &str = "open-cluster-management:managedcluster:work";

pub use ocm_proto::api::cluster::{agent_group, agent_user};

fn rule(groups: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> Value {
    let mut r = json!({"apiGroups": groups, "resources": resources, "verbs": verbs});
    if !names.is_empty() {
        r["resourceNames"] = json!(names);
    }
    r
}

fn subjects(cluster: &str) -> Value {
    json!([
        {"kind": "Group", "apiGroup": RBAC_GROUP, "name": agent_group(cluster)},
        {"kind": "Group", "apiGroup": RBAC_GROUP, "name": format!("open-cluster-management:{cluster}")},
    ])
}

fn meta(name: &str, namespace: Option<&str>, cluster: &str) -> Value {
    let mut m = json!({"name": name, "labels": {CLUSTER_NAME_LABEL: cluster}});
    if let Some(ns) = namespace {
        m["namespace"] = json!(ns);
    }
    m
}

/// The shared ClusterRoles (registration and work), the same for every cluster.
pub fn shared_roles() -> Vec<Value> {
    let cluster_role = |name: &str, rules: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": meta(name, None, ""), "rules": rules})
    };
    vec![
        cluster_role(
            REGISTRATION_ROLE,
            json!([
                rule(
                    &["coordination.k8s.io"],
                    &["leases"],
                    &[],
                    &["get", "list", "watch", "update"]
                ),
                rule(
                    &["addon.open-cluster-management.io"],
                    &["managedclusteraddons"],
                    &[],
                    &["get", "list", "watch"]
                ),
                rule(
                    &["addon.open-cluster-management.io"],
                    &["managedclusteraddons/status"],
                    &[],
                    &["patch", "update"]
                ),
                rule(&["events.k8s.io"], &["events"], &[], &["create"]),
            ]),
        ),
        cluster_role(
            WORK_ROLE,
            json!([
                rule(&["", "events.k8s.io"], &["events"], &[], &["create", "patch", "update"]),
                rule(
                    &["work.open-cluster-management.io"],
                    &["manifestworks"],
                    &[],
                    &["get", "list", "watch", "update", "patch"]
                ),
                rule(
                    &["work.open-cluster-management.io"],
                    &["manifestworks/status"],
                    &[],
                    &["patch", "update"]
                ),
                // Replicated policies: read, and their status written (the spec is the hub's).
                rule(
                    &["policy.open-cluster-management.io"],
                    &["policies"],
                    &[],
                    &["get", "list", "watch"]
                ),
                rule(
                    &["policy.open-cluster-management.io"],
                    &["policies/status"],
                    &[],
                    &["patch", "update"]
                ),
            ]),
        ),
    ]
}

/// The objects of one cluster: its ClusterRole (the accepted or the not-accepted form), the
/// ClusterRoleBinding, and, once accepted, the registration and work RoleBindings in the
/// cluster's namespace.
pub fn cluster_objects(cluster: &str, accepted: bool) -> Vec<Value> {
    let name = format!("open-cluster-management:managedcluster:{cluster}");
    let mcl = "cluster.open-cluster-management.io";
    let rules = if accepted {
        json!([
            rule(
                &["certificates.k8s.io"],
                &["certificatesigningrequests"],
                &[],
                &["create", "get", "list", "watch"]
            ),
            rule(
                &["register.open-cluster-management.io"],
                &["managedclusters/clientcertificates"],
                &[],
                &["renew"]
            ),
            rule(&[mcl], &["managedclusters"], &[cluster], &["get", "list", "update", "watch"]),
            rule(&[mcl], &["managedclusters/status"], &[cluster], &["patch", "update"]),
        ])
    } else {
        json!([rule(&[mcl], &["managedclusters"], &[cluster], &["get", "list", "watch"])])
    };
    let mut out = vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": meta(&name, None, cluster), "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": meta(&name, None, cluster),
               "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
               "subjects": subjects(cluster)}),
    ];
    if accepted {
        for (suffix, role) in [("registration", REGISTRATION_ROLE), ("work", WORK_ROLE)] {
            out.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": meta(&format!("{name}:{suffix}"), Some(cluster), cluster),
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
                "subjects": subjects(cluster)}));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::authz::RbacIndex;
    use crate::machinery::requester::{Attributes, UserInfo};

    fn index(objects: Vec<Value>) -> RbacIndex {
        let mut index = RbacIndex::default();
        for o in &objects {
            index.upsert(o);
        }
        index
    }

    fn agent(cluster: &str) -> UserInfo {
        UserInfo::new(
            agent_user(cluster, "agent"),
            &[&agent_group(cluster), "system:authenticated"],
        )
    }

    #[test]
    fn an_accepted_agent_reaches_only_its_own_cluster() {
        let mut objects = shared_roles();
        objects.extend(cluster_objects("a", true));
        objects.extend(cluster_objects("a-x", true));
        let index = index(objects);
        let can = |user: &UserInfo, attrs: Attributes| index.authorize(user, &attrs).is_allowed();
        let a = agent("a");
        let mw = "work.open-cluster-management.io";
        assert!(can(&a, Attributes::resource("list", mw, "manifestworks", "a", "")));
        assert!(!can(&a, Attributes::resource("list", mw, "manifestworks", "a-x", "")));
        assert!(!can(&a, Attributes::resource("list", mw, "manifestworks", "", "")));
        let mcl = "cluster.open-cluster-management.io";
        assert!(can(&a, Attributes::resource("update", mcl, "managedclusters", "", "a")));
        assert!(!can(&a, Attributes::resource("update", mcl, "managedclusters", "", "a-x")));
        assert!(!can(&agent("a-x"), Attributes::resource("get", mcl, "managedclusters", "", "a")));
    }

    #[test]
    fn a_cluster_not_accepted_may_only_read_itself() {
        let index = index(cluster_objects("c", false));
        let c = agent("c");
        let mcl = "cluster.open-cluster-management.io";
        assert!(
            index
                .authorize(&c, &Attributes::resource("get", mcl, "managedclusters", "", "c"))
                .is_allowed()
        );
        assert!(
            !index
                .authorize(&c, &Attributes::resource("update", mcl, "managedclusters", "", "c"))
                .is_allowed()
        );
        assert_eq!(cluster_objects("c", false).len(), 2, "no RoleBindings before acceptance");
    }
}
