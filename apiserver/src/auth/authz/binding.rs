//! RBAC bindings as the index holds them: the role a binding refers to, its subjects and who
//! each stands for (kube's `appliesToUser`, with ServiceAccount namespace defaulting), how a
//! binding is described in an allow reason, and the index of binding names by user and group.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::messages::go_quote;
use super::{service_account_user, string};
use crate::machinery::intern::{Symbol, symbol};
use crate::machinery::requester::UserInfo;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RoleRef {
    pub(super) kind: Symbol,
    pub(super) name: Symbol,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Subject {
    kind: Symbol,
    name: Symbol,
    namespace: Symbol,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Binding {
    pub(super) name: Symbol,
    /// `""` for a ClusterRoleBinding.
    pub(super) namespace: Symbol,
    pub(super) role_ref: RoleRef,
    pub(super) subjects: Vec<Subject>,
}

/// Binding names by the user name or group a subject stands for.
#[derive(Debug, Default)]
pub(super) struct SubjectIndex {
    /// Sorted binding names: most subjects have one or two, which a set would hold in a whole
    /// tree node.
    pub(super) users: HashMap<Symbol, Vec<Symbol>>,
    pub(super) groups: HashMap<Symbol, Vec<Symbol>>,
}

/// What a subject matches, once its namespace defaulting is applied.
enum SubjectKey {
    User(Symbol),
    Group(Symbol),
}

impl Subject {
    /// The user or group this subject matches in a binding of `binding_namespace` (`""` for a
    /// ClusterRoleBinding); `None` when it matches nobody.
    fn key(&self, binding_namespace: &str) -> Option<SubjectKey> {
        match &*self.kind {
            "User" => Some(SubjectKey::User(self.name.clone())),
            "Group" => Some(SubjectKey::Group(self.name.clone())),
            "ServiceAccount" => {
                let ns =
                    if self.namespace.is_empty() { binding_namespace } else { &self.namespace };
                (!ns.is_empty())
                    .then(|| SubjectKey::User(symbol(&service_account_user(ns, &self.name))))
            }
            _ => None,
        }
    }

    /// kube's `appliesToUser`.
    pub(super) fn applies_to(&self, user: &UserInfo, binding_namespace: &str) -> bool {
        match self.key(binding_namespace) {
            Some(SubjectKey::User(name)) => user.name == *name,
            Some(SubjectKey::Group(group)) => user.groups.iter().any(|g| **g == *group),
            None => false,
        }
    }

    /// kube's `describeSubject`.
    pub(super) fn describe(&self, binding_namespace: &str) -> String {
        if &*self.kind == "ServiceAccount" {
            let ns = if self.namespace.is_empty() { binding_namespace } else { &self.namespace };
            format!("{} {}", self.kind, go_quote(&format!("{}/{}", self.name, ns)))
        } else {
            format!("{} {}", self.kind, go_quote(&self.name))
        }
    }
}

impl Binding {
    pub(super) fn from_json(obj: &Value, namespace: &str) -> Option<Binding> {
        let role_ref = obj.get("roleRef")?;
        let subjects = obj
            .get("subjects")
            .and_then(Value::as_array)
            .map(|subjects| {
                subjects
                    .iter()
                    .map(|s| Subject {
                        kind: symbol(string(s, "kind")),
                        name: symbol(string(s, "name")),
                        namespace: symbol(string(s, "namespace")),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Binding {
            name: symbol(crate::machinery::object::name(obj)),
            namespace: symbol(namespace),
            role_ref: RoleRef {
                kind: symbol(string(role_ref, "kind")),
                name: symbol(string(role_ref, "name")),
            },
            subjects,
        })
    }

    fn keys(&self) -> impl Iterator<Item = SubjectKey> + '_ {
        self.subjects.iter().filter_map(|s| s.key(&self.namespace))
    }

    /// kube's `clusterRoleBindingDescriber` / `roleBindingDescriber`.
    pub(super) fn describe(&self, subject: &Subject) -> String {
        if self.namespace.is_empty() {
            format!(
                "ClusterRoleBinding {} of {} {} to {}",
                go_quote(&self.name),
                self.role_ref.kind,
                go_quote(&self.role_ref.name),
                subject.describe("")
            )
        } else {
            format!(
                "RoleBinding {} of {} {} to {}",
                go_quote(&format!("{}/{}", self.name, self.namespace)),
                self.role_ref.kind,
                go_quote(&self.role_ref.name),
                subject.describe(&self.namespace)
            )
        }
    }
}

impl SubjectIndex {
    pub(super) fn insert(&mut self, binding: &Binding) {
        for key in binding.keys() {
            let (map, k) = match key {
                SubjectKey::User(k) => (&mut self.users, k),
                SubjectKey::Group(k) => (&mut self.groups, k),
            };
            let names = map.entry(k).or_default();
            if let Err(at) = names.binary_search(&binding.name) {
                names.insert(at, binding.name.clone());
            }
        }
    }

    pub(super) fn remove(&mut self, binding: &Binding) {
        for key in binding.keys() {
            let (map, k) = match key {
                SubjectKey::User(k) => (&mut self.users, k),
                SubjectKey::Group(k) => (&mut self.groups, k),
            };
            if let Some(names) = map.get_mut(&k) {
                names.retain(|n| *n != binding.name);
                if names.is_empty() {
                    map.remove(&k);
                }
            }
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty()
    }

    /// The names of the bindings naming the user or one of its groups, sorted, each once.
    pub(super) fn names_for<'a>(&'a self, user: &UserInfo) -> BTreeSet<&'a str> {
        let mut names = BTreeSet::new();
        if let Some(n) = self.users.get(user.name.as_str()) {
            names.extend(n.iter().map(|n| &**n));
        }
        for group in &user.groups {
            if let Some(n) = self.groups.get(group.as_str()) {
                names.extend(n.iter().map(|n| &**n));
            }
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::auth::authz::RbacIndex;
    use crate::auth::authz::test_util::*;
    use crate::machinery::requester::Decision;

    #[test]
    fn user_and_group_subjects_match_exactly() {
        let index = RbacIndex::from_objects(&[
            cluster_role("r", vec![rule(&["get"], &[""], &["pods"])]),
            crb(
                "u",
                "ClusterRole",
                "r",
                vec![subject("User", "system:open-cluster-management:a:agent")],
            ),
            crb(
                "g",
                "ClusterRole",
                "r",
                vec![subject("Group", "system:open-cluster-management:b")],
            ),
        ]);
        let pods = get("", "pods", "ns", "p");
        assert!(allowed(
            &index,
            &UserInfo::new("system:open-cluster-management:a:agent", &[]),
            &pods
        ));
        assert!(!allowed(
            &index,
            &UserInfo::new("system:open-cluster-management:a:agent2", &[]),
            &pods
        ));
        assert!(!allowed(&index, &UserInfo::new("system:open-cluster-management:a", &[]), &pods));
        assert!(allowed(
            &index,
            &UserInfo::new("x", &["other", "system:open-cluster-management:b"]),
            &pods
        ));
        assert!(!allowed(
            &index,
            &UserInfo::new("x", &["system:open-cluster-management:b-x"]),
            &pods
        ));
        // a user named like a group is not in it, nor the other way round
        assert!(!allowed(&index, &UserInfo::new("system:open-cluster-management:b", &[]), &pods));
        assert!(!allowed(
            &index,
            &UserInfo::new("y", &["system:open-cluster-management:a:agent"]),
            &pods
        ));
    }

    #[test]
    fn service_account_subjects_follow_kube_namespace_defaulting() {
        let index = RbacIndex::from_objects(&[
            cluster_role("r", vec![rule(&["get"], &[""], &["pods"])]),
            // RoleBinding subject without a namespace: the binding's namespace
            rb("a", "local", "ClusterRole", "r", vec![subject("ServiceAccount", "sa")]),
            // RoleBinding subject naming another namespace
            rb(
                "a",
                "remote",
                "ClusterRole",
                "r",
                vec![json!({"kind": "ServiceAccount", "name": "sb", "namespace": "other"})],
            ),
            // ClusterRoleBinding subject without a namespace: matches nobody
            crb("nons", "ClusterRole", "r", vec![subject("ServiceAccount", "sc")]),
            crb(
                "withns",
                "ClusterRole",
                "r",
                vec![json!({"kind": "ServiceAccount", "name": "sd", "namespace": "d"})],
            ),
            // group of all service accounts of a namespace
            rb("e", "sas", "ClusterRole", "r", vec![subject("Group", "system:serviceaccounts:e")]),
            // unknown kinds match nobody
            crb(
                "odd",
                "ClusterRole",
                "r",
                vec![json!({"kind": "Robot", "name": "system:serviceaccount:a:sa"})],
            ),
        ]);
        let pods = |ns: &str| get("", "pods", ns, "p");
        assert!(allowed(&index, &service_account_user_info("a", "sa"), &pods("a")));
        assert!(!allowed(&index, &service_account_user_info("b", "sa"), &pods("a")));
        assert!(!allowed(&index, &service_account_user_info("a", "sa"), &pods("b")));
        assert!(allowed(&index, &service_account_user_info("other", "sb"), &pods("a")));
        assert!(!allowed(&index, &service_account_user_info("a", "sb"), &pods("a")));
        assert!(!allowed(&index, &service_account_user_info("", "sc"), &pods("a")));
        assert!(!allowed(&index, &UserInfo::new("system:serviceaccount::sc", &[]), &pods("")));
        assert!(allowed(&index, &service_account_user_info("d", "sd"), &pods("")));
        assert!(allowed(&index, &service_account_user_info("d", "sd"), &pods("z")));
        // matching is by user name: any authenticator's user of that name matches
        assert!(allowed(&index, &UserInfo::new("system:serviceaccount:d:sd", &[]), &pods("z")));
        assert!(!allowed(&index, &UserInfo::new("system:serviceaccount:d:sd2", &[]), &pods("z")));
        assert!(allowed(&index, &service_account_user_info("e", "anyone"), &pods("e")));
        assert!(!allowed(&index, &service_account_user_info("e", "anyone"), &pods("f")));
        assert!(
            !allowed(&index, &service_account_user_info("a", "sa"), &pods("")),
            "RoleBindings never cluster-wide"
        );
    }

    #[test]
    fn allow_reasons_name_the_binding_as_kube_does() {
        let index = RbacIndex::from_objects(&[
            cluster_role("r", vec![rule(&["get"], &[""], &["pods"])]),
            crb("c", "ClusterRole", "r", vec![subject("User", "x"), subject("Group", "g")]),
            rb("ns", "n", "ClusterRole", "r", vec![subject("ServiceAccount", "sa")]),
        ]);
        let d = index.authorize(&UserInfo::new("u", &["g"]), &get("", "pods", "ns", "p"));
        assert_eq!(
            d.reason(),
            "RBAC: allowed by ClusterRoleBinding \"c\" of ClusterRole \"r\" to Group \"g\""
        );
        let d =
            index.authorize(&service_account_user_info("ns", "sa"), &get("", "pods", "ns", "p"));
        assert_eq!(
            d.reason(),
            "RBAC: allowed by RoleBinding \"n/ns\" of ClusterRole \"r\" to ServiceAccount \"sa/ns\""
        );
        let d = index.authorize(&UserInfo::new("nobody", &[]), &get("", "pods", "ns", "p"));
        assert_eq!(d, Decision::Deny { reason: String::new() });
    }
}
