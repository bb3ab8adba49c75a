//! The RBAC objects a new hub creates: kube's default roles and bindings and OCM's bootstrap role.

use serde_json::{Value, json};

use super::rule::PolicyRule;
use super::{
    ANONYMOUS_USER, AUTHENTICATED_GROUP, AUTOUPDATE_ANNOTATION, BOOTSTRAPPING_LABEL, MASTERS_GROUP,
    MONITORING_GROUP, OCM_BOOTSTRAP_GROUP, RBAC_GROUP, UNAUTHENTICATED_GROUP,
};
use crate::machinery::intern::{Symbol, symbol};

/// The RBAC objects a new hub creates: kube's `cluster-admin` (bound to `system:masters`),
/// `system:discovery` and `system:basic-user` (bound to `system:authenticated`),
/// `system:public-info-viewer` (bound to `system:authenticated` and `system:unauthenticated`),
/// `system:monitoring` (`/metrics` and the health endpoints, bound to `system:monitoring`), and
/// OCM's bootstrap ClusterRole `open-cluster-management:bootstrap` bound by
/// `open-cluster-management:bootstrap:managedcluster` to `system:bootstrappers:managedcluster`
/// (ocm.md §3.1). All carry kube's `kubernetes.io/bootstrapping: rbac-defaults` label and
/// `rbac.authorization.kubernetes.io/autoupdate: "true"` annotation.
pub fn default_objects() -> Vec<Value> {
    let mut out: Vec<Value> = cluster_roles()
        .into_iter()
        .map(|(name, rules)| {
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": metadata(name),
                "rules": rules,
            })
        })
        .collect();
    for (name, role, groups) in BINDINGS {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"kind": "Group", "apiGroup": RBAC_GROUP, "name": g}))
            .collect();
        out.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": metadata(name),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": subjects,
        }));
    }
    out.extend(cluster_info_reader());
    out
}

/// The default ClusterRoles and their rules: kube's and OCM's bootstrap role.
fn cluster_roles() -> [(&'static str, Vec<PolicyRule>); 6] {
    let rule = |verbs: &[&str], groups: &[&str], resources: &[&str]| PolicyRule {
        verbs: to_strings(verbs),
        api_groups: to_strings(groups),
        resources: to_strings(resources),
        ..PolicyRule::default()
    };
    let urls = |verbs: &[&str], urls: &[&str]| PolicyRule {
        verbs: to_strings(verbs),
        non_resource_urls: to_strings(urls),
        ..PolicyRule::default()
    };
    [
        ("cluster-admin", vec![rule(&["*"], &["*"], &["*"]), urls(&["*"], &["*"])]),
        (
            "system:discovery",
            vec![urls(
                &["get"],
                &[
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/version",
                    "/version/",
                    "/openapi",
                    "/openapi/*",
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                ],
            )],
        ),
        (
            "system:basic-user",
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(&["create"], &["authentication.k8s.io"], &["selfsubjectreviews"]),
            ],
        ),
        (
            "system:public-info-viewer",
            vec![urls(&["get"], &["/livez", "/readyz", "/healthz", "/version", "/version/"])],
        ),
        (
            "system:monitoring",
            vec![urls(
                &["get"],
                &[
                    "/healthz",
                    "/healthz/*",
                    "/livez",
                    "/livez/*",
                    "/metrics",
                    "/metrics/slis",
                    "/readyz",
                    "/readyz/*",
                ],
            )],
        ),
        (
            "open-cluster-management:bootstrap",
            vec![
                rule(&["get"], &[""], &["configmaps"]),
                rule(
                    &["create", "get", "list", "watch"],
                    &["certificates.k8s.io"],
                    &["certificatesigningrequests"],
                ),
                rule(
                    &["get", "create", "list", "watch"],
                    &["cluster.open-cluster-management.io"],
                    &["managedclusters"],
                ),
                rule(
                    &["create"],
                    &["cluster.open-cluster-management.io"],
                    &["managedclustersets/join"],
                ),
            ],
        ),
    ]
}

/// The default ClusterRoleBindings: name, ClusterRole, the groups bound.
const BINDINGS: [(&str, &str, &[&str]); 6] = [
    ("cluster-admin", "cluster-admin", &[MASTERS_GROUP]),
    ("system:discovery", "system:discovery", &[AUTHENTICATED_GROUP]),
    ("system:basic-user", "system:basic-user", &[AUTHENTICATED_GROUP]),
    (
        "system:public-info-viewer",
        "system:public-info-viewer",
        &[AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP],
    ),
    ("system:monitoring", "system:monitoring", &[MONITORING_GROUP]),
    (
        "open-cluster-management:bootstrap:managedcluster",
        "open-cluster-management:bootstrap",
        &[OCM_BOOTSTRAP_GROUP],
    ),
];

/// kubeadm's `kubeadm:bootstrap-signer-clusterinfo`: anyone may read the hub's public
/// `cluster-info` (its URL and CA) to check the CA against a pin before joining; joined agents
/// read its gRPC server there too. A Role and its RoleBinding in `kube-public`.
fn cluster_info_reader() -> [Value; 2] {
    let clusterinfo = "ocm:bootstrap-signer-clusterinfo";
    let mut meta = metadata(clusterinfo);
    meta["namespace"] = json!("kube-public");
    [
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"],
                       "resourceNames": ["cluster-info"]}],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": clusterinfo},
            "subjects": [{"kind": "User", "apiGroup": RBAC_GROUP, "name": ANONYMOUS_USER},
                         {"kind": "Group", "apiGroup": RBAC_GROUP, "name": AUTHENTICATED_GROUP}],
        }),
    ]
}

/// A default object's metadata: kube's `rbac-defaults` label and `autoupdate` annotation.
fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "labels": { BOOTSTRAPPING_LABEL: "rbac-defaults" },
        "annotations": { AUTOUPDATE_ANNOTATION: "true" },
    })
}

fn to_strings(items: &[&str]) -> Vec<Symbol> {
    items.iter().map(|s| symbol(s)).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::auth::authz::RbacIndex;
    use crate::auth::authz::test_util::*;
    use crate::machinery::requester::{Attributes, UserInfo};

    #[test]
    fn default_objects_grant_what_kube_and_ocm_grant() {
        let objects = default_objects();
        for obj in &objects {
            assert_eq!(obj["apiVersion"], "rbac.authorization.k8s.io/v1");
            assert_eq!(obj["metadata"]["labels"][BOOTSTRAPPING_LABEL], "rbac-defaults");
            assert_eq!(obj["metadata"]["annotations"][AUTOUPDATE_ANNOTATION], "true");
        }
        let admin_role = objects
            .iter()
            .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "cluster-admin")
            .unwrap();
        assert_eq!(
            admin_role["rules"],
            json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}, {"verbs": ["*"], "nonResourceURLs": ["*"]}])
        );
        let index = RbacIndex::from_objects(&objects);

        let master = UserInfo::new("admin", &[MASTERS_GROUP, AUTHENTICATED_GROUP]);
        assert!(allowed(
            &index,
            &master,
            &Attributes::resource("deletecollection", WORK_GROUP, "manifestworks", "", "")
        ));
        assert!(allowed(
            &index,
            &master,
            &Attributes::resource("update", CLUSTER_GROUP, "managedclusters", "", "a")
                .with_subresource("accept")
        ));
        assert!(allowed(&index, &master, &Attributes::non_resource("get", "/metrics")));

        let someone = user("someone");
        for path in [
            "/api",
            "/api/v1",
            "/apis",
            "/apis/cluster.open-cluster-management.io/v1",
            "/openapi/v3",
            "/version",
            "/healthz",
            "/livez",
            "/readyz",
        ] {
            assert!(allowed(&index, &someone, &Attributes::non_resource("get", path)), "{path}");
        }
        assert!(!allowed(&index, &someone, &Attributes::non_resource("get", "/metrics")));
        assert!(!allowed(&index, &someone, &Attributes::non_resource("post", "/api")));
        for (group, resource) in [
            ("authorization.k8s.io", "selfsubjectaccessreviews"),
            ("authorization.k8s.io", "selfsubjectrulesreviews"),
            ("authentication.k8s.io", "selfsubjectreviews"),
        ] {
            assert!(
                allowed(&index, &someone, &Attributes::resource("create", group, resource, "", "")),
                "{resource}"
            );
        }
        assert!(!allowed(
            &index,
            &someone,
            &Attributes::resource("create", "authorization.k8s.io", "subjectaccessreviews", "", "")
        ));
        assert!(!allowed(
            &index,
            &someone,
            &Attributes::resource("list", "", "namespaces", "", "")
        ));
        assert!(!allowed(
            &index,
            &UserInfo::new("system:masters", &[]),
            &get("", "secrets", "ns", "s")
        ));

        let anonymous = UserInfo::new("system:anonymous", &[UNAUTHENTICATED_GROUP]);
        for path in ["/healthz", "/livez", "/readyz", "/version", "/version/"] {
            assert!(allowed(&index, &anonymous, &Attributes::non_resource("get", path)), "{path}");
        }
        assert!(!allowed(&index, &anonymous, &Attributes::non_resource("get", "/api")));
        assert!(!allowed(
            &index,
            &anonymous,
            &Attributes::resource(
                "create",
                "authorization.k8s.io",
                "selfsubjectaccessreviews",
                "",
                ""
            )
        ));

        let bootstrap =
            UserInfo::new("system:bootstrap:ocmhub", &[OCM_BOOTSTRAP_GROUP, AUTHENTICATED_GROUP]);
        let mc = |verb: &str, name: &str| {
            Attributes::resource(verb, CLUSTER_GROUP, "managedclusters", "", name)
        };
        assert!(allowed(&index, &bootstrap, &mc("create", "")));
        assert!(allowed(&index, &bootstrap, &mc("get", "a")));
        assert!(allowed(&index, &bootstrap, &mc("list", "")));
        assert!(allowed(&index, &bootstrap, &mc("watch", "")));
        assert!(!allowed(&index, &bootstrap, &mc("delete", "a")));
        assert!(!allowed(&index, &bootstrap, &mc("patch", "a").with_subresource("status")));
        assert!(!allowed(&index, &bootstrap, &mc("update", "a").with_subresource("accept")));
        assert!(allowed(
            &index,
            &bootstrap,
            &Attributes::resource(
                "create",
                "certificates.k8s.io",
                "certificatesigningrequests",
                "",
                ""
            )
        ));
        assert!(!allowed(
            &index,
            &bootstrap,
            &Attributes::resource(
                "update",
                "certificates.k8s.io",
                "certificatesigningrequests",
                "",
                "c"
            )
            .with_subresource("approval")
        ));
        assert!(allowed(
            &index,
            &bootstrap,
            &Attributes::resource("create", CLUSTER_GROUP, "managedclustersets", "", "default")
                .with_subresource("join")
        ));
        assert!(allowed(&index, &bootstrap, &get("", "configmaps", "kube-public", "cluster-info")));
        assert!(!allowed(
            &index,
            &bootstrap,
            &Attributes::resource("list", "", "configmaps", "kube-public", "")
        ));
        assert!(!allowed(&index, &bootstrap, &get("", "secrets", "kube-public", "s")));
    }
}
