//! [`RbacIndex`]: the stored Roles, ClusterRoles, RoleBindings and ClusterRoleBindings, kept up to
//! date object by object, and the RBAC decision for a request, which reads only the bindings that
//! name the user or its groups.

use std::collections::HashMap;

use serde_json::Value;

use super::binding::{Binding, RoleRef, Subject, SubjectIndex};
use super::messages::{aggregate, go_quote};
use super::rule::PolicyRule;
use super::{RBAC_GROUP, string};
use crate::machinery::intern::{Symbol, symbol};
use crate::machinery::requester::{Attributes, Decision, UserInfo};

/// RBAC objects indexed for fast decisions. Objects are the JSON of rbac.authorization.k8s.io/v1
/// Role, ClusterRole, RoleBinding and ClusterRoleBinding as the API stores them.
#[derive(Debug, Default)]
pub struct RbacIndex {
    /// Role rules by namespace, then name.
    roles: HashMap<Symbol, HashMap<Symbol, Vec<PolicyRule>>>,
    cluster_roles: HashMap<Symbol, Vec<PolicyRule>>,
    /// RoleBindings by namespace, then name.
    role_bindings: HashMap<Symbol, HashMap<Symbol, Binding>>,
    cluster_role_bindings: HashMap<Symbol, Binding>,
    /// ClusterRoleBinding names by subject.
    cluster_subjects: SubjectIndex,
    /// RoleBinding names by namespace, then subject.
    namespace_subjects: HashMap<Symbol, SubjectIndex>,
}

impl RbacIndex {
    /// An index of these objects.
    #[cfg(test)]
    pub fn from_objects<'a>(objects: impl IntoIterator<Item = &'a Value>) -> RbacIndex {
        let mut index = RbacIndex::default();
        for obj in objects {
            index.upsert(obj);
        }
        index
    }

    /// Adds or replaces an object (by kind, namespace, name). Ignores objects that are not rbac/v1
    /// Role, ClusterRole, RoleBinding or ClusterRoleBinding, namespaced kinds without a namespace,
    /// and bindings without a `roleRef`.
    pub fn upsert(&mut self, obj: &Value) {
        let kind = string(obj, "kind");
        let api_version = string(obj, "apiVersion");
        if !(api_version.is_empty() || api_version.starts_with("rbac.authorization.k8s.io/")) {
            return;
        }
        let name = crate::machinery::object::name(obj);
        let namespace = crate::machinery::object::namespace(obj);
        if name.is_empty() {
            return;
        }
        let rules = || -> Vec<PolicyRule> {
            obj.get("rules")
                .and_then(Value::as_array)
                .map(|rules| rules.iter().map(PolicyRule::from_json).collect())
                .unwrap_or_default()
        };
        match kind {
            "Role" if !namespace.is_empty() => {
                self.roles.entry(symbol(namespace)).or_default().insert(symbol(name), rules());
            }
            "ClusterRole" => {
                self.cluster_roles.insert(symbol(name), rules());
            }
            "RoleBinding" if !namespace.is_empty() => {
                self.remove(kind, namespace, name);
                if let Some(binding) = Binding::from_json(obj, namespace) {
                    self.namespace_subjects.entry(symbol(namespace)).or_default().insert(&binding);
                    self.role_bindings
                        .entry(symbol(namespace))
                        .or_default()
                        .insert(symbol(name), binding);
                }
            }
            "ClusterRoleBinding" => {
                self.remove(kind, namespace, name);
                if let Some(binding) = Binding::from_json(obj, "") {
                    self.cluster_subjects.insert(&binding);
                    self.cluster_role_bindings.insert(symbol(name), binding);
                }
            }
            _ => {}
        }
    }

    /// Removes an object (`namespace` is ignored for cluster-scoped kinds).
    pub fn remove(&mut self, kind: &str, namespace: &str, name: &str) {
        match kind {
            "Role" => {
                if let Some(roles) = self.roles.get_mut(namespace) {
                    roles.remove(name);
                    if roles.is_empty() {
                        self.roles.remove(namespace);
                    }
                }
            }
            "ClusterRole" => {
                self.cluster_roles.remove(name);
            }
            "RoleBinding" => {
                let Some(bindings) = self.role_bindings.get_mut(namespace) else { return };
                let Some(old) = bindings.remove(name) else { return };
                if bindings.is_empty() {
                    self.role_bindings.remove(namespace);
                }
                if let Some(subjects) = self.namespace_subjects.get_mut(namespace) {
                    subjects.remove(&old);
                    if subjects.is_empty() {
                        self.namespace_subjects.remove(namespace);
                    }
                }
            }
            "ClusterRoleBinding" => {
                if let Some(old) = self.cluster_role_bindings.remove(name) {
                    self.cluster_subjects.remove(&old);
                }
            }
            _ => {}
        }
    }

    /// Whether RBAC allows the request: [`RbacIndex::authorize`] without the reason, for the
    /// check every request passes (nothing is formatted on the way to yes).
    pub fn allows(&self, user: &UserInfo, attrs: &Attributes) -> bool {
        let mut allowed = false;
        self.visit_rules(user, &attrs.namespace, |_, _, rule| {
            allowed = rule.allows(attrs);
            !allowed
        });
        allowed
    }

    /// Kubernetes' RBAC decision for this request.
    pub fn authorize(&self, user: &UserInfo, attrs: &Attributes) -> Decision {
        let mut allowed_by = None;
        let errors = self.visit_rules(user, &attrs.namespace, |binding, subject, rule| {
            if rule.allows(attrs) {
                allowed_by = Some(binding.describe(subject));
                false
            } else {
                true
            }
        });
        match allowed_by {
            Some(source) => Decision::Allow { reason: format!("RBAC: allowed by {source}") },
            None if errors.is_empty() => Decision::Deny { reason: String::new() },
            None => Decision::Deny { reason: format!("RBAC: {}", aggregate(&errors)) },
        }
    }

    /// The bindings that may apply to `user` for a request in `namespace` (cluster-wide ones,
    /// then the namespace's), found through the subject index: the only bindings a decision
    /// looks at.
    fn candidates(&self, user: &UserInfo, namespace: &str) -> Vec<&Binding> {
        let mut out: Vec<&Binding> = self
            .cluster_subjects
            .names_for(user)
            .into_iter()
            .filter_map(|name| self.cluster_role_bindings.get(name))
            .collect();
        if !namespace.is_empty() {
            if let (Some(subjects), Some(bindings)) =
                (self.namespace_subjects.get(namespace), self.role_bindings.get(namespace))
            {
                out.extend(
                    subjects.names_for(user).into_iter().filter_map(|name| bindings.get(name)),
                );
            }
        }
        out
    }

    /// kube's `VisitRulesFor`: calls `visit` with each rule that applies to `user` in `namespace`
    /// (with the binding and the first of its subjects that matched) until it returns false;
    /// returns the role references that could not be resolved, in kube's error wording.
    pub(super) fn visit_rules<'a>(
        &'a self,
        user: &UserInfo,
        namespace: &str,
        mut visit: impl FnMut(&'a Binding, &'a Subject, &'a PolicyRule) -> bool,
    ) -> Vec<String> {
        let mut errors = Vec::new();
        for binding in self.candidates(user, namespace) {
            let Some(subject) =
                binding.subjects.iter().find(|s| s.applies_to(user, &binding.namespace))
            else {
                continue;
            };
            match self.role_rules(&binding.role_ref, &binding.namespace) {
                Ok(rules) => {
                    for rule in rules {
                        if !visit(binding, subject, rule) {
                            return errors;
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        errors
    }

    /// kube's `GetRoleReferenceRules`: a Role of the binding's namespace (none for a
    /// ClusterRoleBinding) or a ClusterRole.
    fn role_rules(
        &self,
        role_ref: &RoleRef,
        binding_namespace: &str,
    ) -> Result<&[PolicyRule], String> {
        match &*role_ref.kind {
            "Role" => self
                .roles
                .get(binding_namespace)
                .and_then(|roles| roles.get(&*role_ref.name))
                .map(Vec::as_slice)
                .ok_or_else(|| format!("role.{RBAC_GROUP} {} not found", go_quote(&role_ref.name))),
            "ClusterRole" => {
                self.cluster_roles.get(&*role_ref.name).map(Vec::as_slice).ok_or_else(|| {
                    format!("clusterrole.{RBAC_GROUP} {} not found", go_quote(&role_ref.name))
                })
            }
            other => Err(format!("unsupported role reference kind: {}", go_quote(other))),
        }
    }

    /// How many bindings a decision for `user` in `namespace` looks at.
    #[cfg(test)]
    fn candidate_count(&self, user: &UserInfo, namespace: &str) -> usize {
        self.candidates(user, namespace).len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::auth::authz::test_util::*;
    use crate::auth::authz::{AUTHENTICATED_GROUP, default_objects};

    #[test]
    fn role_binding_to_role_applies_in_its_namespace_only() {
        let index = RbacIndex::from_objects(&[
            role("a", "reader", vec![rule(&["get", "list"], &[""], &["configmaps"])]),
            role("b", "reader", vec![rule(&["*"], &["*"], &["*"])]),
            rb("a", "bind", "Role", "reader", vec![subject("User", "alice")]),
        ]);
        let alice = user("alice");
        assert!(allowed(&index, &alice, &get("", "configmaps", "a", "x")));
        assert!(
            !allowed(&index, &alice, &get("", "secrets", "a", "x")),
            "the Role of namespace b is not used"
        );
        assert!(!allowed(&index, &alice, &get("", "configmaps", "b", "x")));
        assert!(!allowed(&index, &alice, &get("", "configmaps", "a-x", "x")));
        assert!(!allowed(&index, &alice, &Attributes::resource("list", "", "configmaps", "", "")));
    }

    #[test]
    fn role_binding_to_cluster_role_applies_in_its_namespace_only() {
        let index = RbacIndex::from_objects(&[
            cluster_role(
                "work",
                vec![rule(&["get", "list", "watch"], &[WORK_GROUP], &["manifestworks"])],
            ),
            rb("a", "work", "ClusterRole", "work", vec![subject("User", "alice")]),
        ]);
        let alice = user("alice");
        let list = |ns: &str| Attributes::resource("list", WORK_GROUP, "manifestworks", ns, "");
        assert!(allowed(&index, &alice, &list("a")));
        assert!(!allowed(&index, &alice, &list("b")));
        // across all namespaces: a RoleBinding never suffices (403, never filtered)
        assert!(!allowed(&index, &alice, &list("")));
        assert!(!allowed(
            &index,
            &alice,
            &Attributes::resource("watch", WORK_GROUP, "manifestworks", "", "")
        ));
    }

    #[test]
    fn cluster_role_binding_applies_everywhere_and_across_namespaces() {
        let index = RbacIndex::from_objects(&[
            cluster_role(
                "work",
                vec![rule(&["get", "list", "watch"], &[WORK_GROUP], &["manifestworks"])],
            ),
            crb("work", "ClusterRole", "work", vec![subject("User", "alice")]),
        ]);
        let alice = user("alice");
        for ns in ["a", "b", ""] {
            assert!(
                allowed(
                    &index,
                    &alice,
                    &Attributes::resource("list", WORK_GROUP, "manifestworks", ns, "")
                ),
                "{ns}"
            );
            assert!(allowed(
                &index,
                &alice,
                &Attributes::resource("watch", WORK_GROUP, "manifestworks", ns, "")
            ));
        }
    }

    #[test]
    fn cluster_role_binding_to_a_role_is_ignored() {
        let index = RbacIndex::from_objects(&[
            role("a", "admin", vec![rule(&["*"], &["*"], &["*"])]),
            role("", "admin", vec![rule(&["*"], &["*"], &["*"])]),
            crb("b", "Role", "admin", vec![subject("User", "alice")]),
        ]);
        let alice = user("alice");
        let decision = index.authorize(&alice, &get("", "pods", "a", "p"));
        assert_eq!(
            decision,
            Decision::Deny {
                reason: "RBAC: role.rbac.authorization.k8s.io \"admin\" not found".into()
            }
        );
        assert!(!allowed(&index, &alice, &get("", "pods", "", "p")));
    }

    #[test]
    fn a_binding_to_a_missing_role_starts_working_when_the_role_appears() {
        let mut index = RbacIndex::default();
        index.upsert(&crb("b", "ClusterRole", "later", vec![subject("User", "alice")]));
        index.upsert(&rb("a", "b", "Role", "later-role", vec![subject("User", "alice")]));
        let alice = user("alice");
        let pods = get("", "pods", "a", "p");
        assert_eq!(
            index.authorize(&alice, &pods),
            Decision::Deny {
                reason: "RBAC: [clusterrole.rbac.authorization.k8s.io \"later\" not found, \
                         role.rbac.authorization.k8s.io \"later-role\" not found]"
                    .into()
            }
        );

        index.upsert(&role("a", "later-role", vec![rule(&["get"], &[""], &["pods"])]));
        assert!(allowed(&index, &alice, &pods));
        assert!(!allowed(&index, &alice, &get("", "pods", "", "p")));
        index.upsert(&cluster_role("later", vec![rule(&["get"], &[""], &["pods"])]));
        assert!(allowed(&index, &alice, &get("", "pods", "", "p")));

        // roles and bindings going away take their grants with them
        index.remove("ClusterRole", "", "later");
        assert!(!allowed(&index, &alice, &get("", "pods", "", "p")));
        assert!(allowed(&index, &alice, &pods));
        index.remove("RoleBinding", "a", "b");
        assert!(!allowed(&index, &alice, &pods));
        // replacing a role's rules takes effect at once
        index.upsert(&cluster_role("later", vec![rule(&["list"], &[""], &["pods"])]));
        assert!(!allowed(&index, &alice, &get("", "pods", "", "p")));
        assert!(allowed(&index, &alice, &Attributes::resource("list", "", "pods", "", "")));
    }

    #[test]
    fn replacing_a_binding_reindexes_its_subjects() {
        let mut index = RbacIndex::from_objects(&[
            cluster_role("r", vec![rule(&["get"], &[""], &["pods"])]),
            crb("b", "ClusterRole", "r", vec![subject("User", "alice"), subject("Group", "g1")]),
            rb("ns", "b", "ClusterRole", "r", vec![subject("User", "carol")]),
        ]);
        let pods = get("", "pods", "ns", "p");
        assert!(allowed(&index, &user("alice"), &pods));
        assert!(allowed(&index, &UserInfo::new("x", &["g1"]), &pods));
        index.upsert(&crb("b", "ClusterRole", "r", vec![subject("User", "bob")]));
        assert!(!allowed(&index, &user("alice"), &pods));
        assert!(!allowed(&index, &UserInfo::new("x", &["g1"]), &pods));
        assert!(allowed(&index, &user("bob"), &pods));
        index.upsert(&rb("ns", "b", "ClusterRole", "r", vec![subject("User", "dave")]));
        assert!(!allowed(&index, &user("carol"), &pods));
        assert!(allowed(&index, &user("dave"), &pods));
        index.remove("ClusterRoleBinding", "", "b");
        index.remove("RoleBinding", "ns", "b");
        assert!(!allowed(&index, &user("bob"), &pods));
        assert!(!allowed(&index, &user("dave"), &pods));
        assert!(index.cluster_subjects.is_empty() && index.namespace_subjects.is_empty());
        assert!(index.role_bindings.is_empty() && index.cluster_role_bindings.is_empty());
    }

    #[test]
    fn objects_that_are_not_rbac_are_ignored() {
        let mut index = RbacIndex::default();
        let mut foreign = cluster_role("r", vec![rule(&["*"], &["*"], &["*"])]);
        foreign["apiVersion"] = json!("example.com/v1");
        index.upsert(&foreign);
        index.upsert(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "r"}}));
        // namespaced kinds without a namespace, bindings without a roleRef
        index.upsert(&role("", "r", vec![rule(&["*"], &["*"], &["*"])]));
        index.upsert(
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                             "metadata": {"name": "b"}, "subjects": [subject("User", "alice")]}),
        );
        assert!(
            index.cluster_roles.is_empty()
                && index.roles.is_empty()
                && index.cluster_role_bindings.is_empty()
        );
        // rule fields of the wrong type narrow the rule, never widen it
        let index =
            alice_with(vec![json!({"verbs": ["get", 7], "apiGroups": "*", "resources": ["pods"]})]);
        assert!(!allowed(&index, &user("alice"), &get("", "pods", "ns", "p")));
    }

    #[test]
    fn ocm_virtual_resources() {
        let index = RbacIndex::from_objects(&[
            cluster_role(
                "acceptor",
                vec![rule(&["update"], &[CLUSTER_GROUP], &["managedclusters/accept"])],
            ),
            cluster_role(
                "set-user",
                vec![
                    named_rule(
                        &["create"],
                        &[CLUSTER_GROUP],
                        &["managedclustersets/join"],
                        &["dev"],
                    ),
                    named_rule(
                        &["create"],
                        &[CLUSTER_GROUP],
                        &["managedclustersets/bind"],
                        &["dev"],
                    ),
                ],
            ),
            cluster_role(
                "renewer",
                vec![rule(
                    &["renew"],
                    &["register.open-cluster-management.io"],
                    &["managedclusters/clientcertificates"],
                )],
            ),
            crb("acceptor", "ClusterRole", "acceptor", vec![subject("User", "admin")]),
            crb("set-user", "ClusterRole", "set-user", vec![subject("User", "dev")]),
            crb(
                "renewer",
                "ClusterRole",
                "renewer",
                vec![subject("Group", "system:open-cluster-management:a")],
            ),
        ]);
        let accept = Attributes::resource("update", CLUSTER_GROUP, "managedclusters", "", "a")
            .with_subresource("accept");
        assert!(allowed(&index, &user("admin"), &accept));
        assert!(!allowed(&index, &user("dev"), &accept));
        assert!(!allowed(
            &index,
            &user("admin"),
            &Attributes::resource("update", CLUSTER_GROUP, "managedclusters", "", "a")
        ));

        let join = |set: &str| {
            Attributes::resource("create", CLUSTER_GROUP, "managedclustersets", "", set)
                .with_subresource("join")
        };
        let bind = |set: &str| {
            Attributes::resource("create", CLUSTER_GROUP, "managedclustersets", "", set)
                .with_subresource("bind")
        };
        assert!(allowed(&index, &user("dev"), &join("dev")));
        assert!(!allowed(&index, &user("dev"), &join("prod")));
        assert!(allowed(&index, &user("dev"), &bind("dev")));
        assert!(!allowed(&index, &user("dev"), &bind("dev-x")));
        assert!(!allowed(
            &index,
            &user("dev"),
            &Attributes::resource("create", CLUSTER_GROUP, "managedclustersets", "", "dev")
        ));

        let renew = Attributes::resource(
            "renew",
            "register.open-cluster-management.io",
            "managedclusters",
            "",
            "",
        )
        .with_subresource("clientcertificates");
        assert!(allowed(
            &index,
            &UserInfo::new("agent", &["system:open-cluster-management:a"]),
            &renew
        ));
        assert!(!allowed(
            &index,
            &UserInfo::new("agent", &["system:open-cluster-management:a-x"]),
            &renew
        ));
    }

    #[test]
    fn ocm_agents_are_confined_to_their_cluster() {
        let mut objects = vec![ocm_work_role()];
        objects.extend(ocm_cluster_objects("a"));
        objects.extend(ocm_cluster_objects("a-x"));
        let index = RbacIndex::from_objects(&objects);
        let agent = UserInfo::new(
            "system:open-cluster-management:a:agent1",
            &[
                "system:open-cluster-management:a",
                "system:open-cluster-management:managed-clusters",
                AUTHENTICATED_GROUP,
            ],
        );
        let mc = |verb: &str, name: &str| {
            Attributes::resource(verb, CLUSTER_GROUP, "managedclusters", "", name)
        };
        assert!(allowed(&index, &agent, &mc("get", "a")));
        assert!(!allowed(&index, &agent, &mc("get", "a-x")));
        assert!(!allowed(&index, &agent, &mc("list", "")), "resourceNames never allow a list");
        assert!(!allowed(&index, &agent, &mc("delete", "a")));
        assert!(allowed(&index, &agent, &mc("patch", "a").with_subresource("status")));
        assert!(!allowed(&index, &agent, &mc("patch", "a-x").with_subresource("status")));
        assert!(
            !allowed(&index, &agent, &mc("patch", "a")),
            "status rule does not cover the main resource"
        );
        assert!(!allowed(&index, &agent, &mc("update", "a").with_subresource("accept")));

        let mw =
            |verb: &str, ns: &str| Attributes::resource(verb, WORK_GROUP, "manifestworks", ns, "");
        assert!(allowed(&index, &agent, &mw("list", "a")));
        assert!(allowed(&index, &agent, &mw("watch", "a")));
        assert!(!allowed(&index, &agent, &mw("list", "a-x")));
        assert!(!allowed(&index, &agent, &mw("list", "")), "all-namespace list is denied");
        assert!(!allowed(&index, &agent, &mw("watch", "")));
        assert!(!allowed(&index, &agent, &mw("create", "a")));
        let status = Attributes::resource("update", WORK_GROUP, "manifestworks", "a", "w")
            .with_subresource("status");
        assert!(allowed(&index, &agent, &status));
        assert!(!allowed(&index, &agent, &Attributes { namespace: "a-x".into(), ..status }));
        assert!(!allowed(&index, &agent, &get("", "secrets", "a", "s")));
    }

    /// 20,000 ClusterRoleBindings (and RoleBindings) for other clusters' agents: a decision only
    /// looks at the bindings naming the user or its groups.
    #[test]
    fn decisions_consult_only_the_users_own_bindings() {
        let mut index = RbacIndex::default();
        index.upsert(&ocm_work_role());
        for obj in default_objects() {
            index.upsert(&obj);
        }
        for i in 0..20_000 {
            for obj in ocm_cluster_objects(&format!("c{i}")) {
                index.upsert(&obj);
            }
        }
        assert_eq!(index.cluster_role_bindings.len(), 20_000 + 6);

        let agent = UserInfo::new(
            "system:open-cluster-management:c17:agent",
            &["system:open-cluster-management:c17", AUTHENTICATED_GROUP],
        );
        // its own ClusterRoleBinding plus system:discovery, system:basic-user and
        // system:public-info-viewer through system:authenticated; its RoleBinding in its namespace
        assert_eq!(index.candidate_count(&agent, ""), 4);
        assert_eq!(index.candidate_count(&agent, "c17"), 5);
        assert_eq!(index.candidate_count(&agent, "c18"), 4);
        assert_eq!(index.candidate_count(&UserInfo::new("nobody", &[]), "c17"), 0);

        // and the decisions are still right
        let mc =
            |name: &str| Attributes::resource("get", CLUSTER_GROUP, "managedclusters", "", name);
        assert!(allowed(&index, &agent, &mc("c17")));
        assert!(!allowed(&index, &agent, &mc("c18")));
        assert!(!allowed(&index, &agent, &mc("c170")));
        let list = |ns: &str| Attributes::resource("list", WORK_GROUP, "manifestworks", ns, "");
        assert!(allowed(&index, &agent, &list("c17")));
        assert!(!allowed(&index, &agent, &list("c18")));
        assert!(!allowed(&index, &agent, &list("")));
        // sanity: every 1000th cluster's agent reaches its own cluster and not its neighbour
        for i in (0..20_000).step_by(1000) {
            let agent = UserInfo::new("agent", &[&format!("system:open-cluster-management:c{i}")]);
            assert!(allowed(&index, &agent, &mc(&format!("c{i}"))));
            assert!(!allowed(&index, &agent, &mc(&format!("c{}", i + 1))));
            assert!(allowed(&index, &agent, &list(&format!("c{i}"))));
        }

        // removing them all leaves only the defaults' index entries
        for i in 0..20_000 {
            let name = format!("open-cluster-management:managedcluster:c{i}");
            index.remove("ClusterRoleBinding", "", &name);
            index.remove("RoleBinding", &format!("c{i}"), &format!("{name}:work"));
        }
        assert_eq!(index.cluster_role_bindings.len(), 6);
        // (the one namespaced default: kube-public's cluster-info reader)
        assert_eq!(index.namespace_subjects.len(), 1);
        assert_eq!(index.cluster_subjects.groups.len(), 5);
        assert!(!allowed(&index, &agent, &mc("c17")));
    }
}
