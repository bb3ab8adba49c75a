//! Authorization: Kubernetes RBAC (Role, ClusterRole, RoleBinding, ClusterRoleBinding) evaluated
//! as kube-apiserver's RBAC authorizer does, over bindings indexed by subject; the rules a user
//! has (SelfSubjectRulesReview); the Forbidden message; the default RBAC objects of a new hub.
//!
//! Pure and synchronous: the caller keeps an [`RbacIndex`] up to date from the stored RBAC
//! objects (`upsert` / `remove`) and asks it for decisions.
//!
//! Semantics (Kubernetes' `plugin/pkg/auth/authorizer/rbac/rbac.go`,
//! `pkg/registry/rbac/validation/rule.go`, `pkg/apis/rbac/v1/evaluation_helpers.go`):
//! - Deny by default; rules only add. A request is allowed when one rule of one role bound to the
//!   user allows it.
//! - ClusterRoleBindings apply everywhere (cluster scope and every namespace). RoleBindings apply
//!   only to requests in their own namespace, so a list or watch across all namespaces (namespace
//!   `""`) needs a ClusterRoleBinding: it is denied, never filtered.
//! - A RoleBinding refers to a Role of its own namespace or to a ClusterRole (whose rules then
//!   count in the binding's namespace only). A ClusterRoleBinding to a Role grants nothing.
//! - Roles are looked up when deciding: a binding to a role that does not exist yet grants nothing
//!   (the denial's reason says which role is missing) and starts working when the role appears.
//! - Subjects: `User` (name equality), `Group` (one of the user's groups), `ServiceAccount` (the
//!   user named `system:serviceaccount:<namespace>:<name>`; a RoleBinding's subject without a
//!   namespace means the binding's namespace; a ClusterRoleBinding's never matches). Other kinds
//!   match nobody. No group or user gets special treatment (`system:masters` is powerful only
//!   through the default `cluster-admin` binding).
//! - Aggregated ClusterRoles (`aggregationRule`): like kube's authorizer, only the stored `rules`
//!   count. Kubernetes fills them in with a separate controller, which the hub does not run, so
//!   an aggregated ClusterRole grants what its own `rules` list says and nothing more.
//!
//! Cost: a decision looks up the user's name and each of its groups in hash maps of bindings by
//! subject (cluster-wide, and in the request's namespace), so it depends on the bindings that
//! name the user, never on the total number of bindings.

use std::collections::{BTreeSet, HashMap};

use crate::machinery::intern::{Symbol, symbol};
use crate::machinery::requester::{Attributes, Decision, UserInfo};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The RBAC API group.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
/// What a service account's user name starts with: `system:serviceaccount:<namespace>:<name>`.
pub const SERVICE_ACCOUNT_USER_PREFIX: &str = "system:serviceaccount:";
/// The group of every service account.
pub const ALL_SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// The group of every authenticated user.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// The user of anonymous requests.
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The group of anonymous requests.
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The group bound to `cluster-admin` by default.
pub const MASTERS_GROUP: &str = "system:masters";
/// The group kube's `system:monitoring` ClusterRole is bound to: may read `/metrics` and the
/// health endpoints.
pub const MONITORING_GROUP: &str = "system:monitoring";
/// The group OCM's bootstrap credentials carry.
pub const OCM_BOOTSTRAP_GROUP: &str = "system:bootstrappers:managedcluster";
/// The annotation that marks a default object the server keeps up to date.
pub const AUTOUPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The label kube puts on its default RBAC objects.
pub const BOOTSTRAPPING_LABEL: &str = "kubernetes.io/bootstrapping";

/// The user name of a service account.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_USER_PREFIX}{namespace}:{name}")
}

/// A service account as an authenticator presents it: user
/// `system:serviceaccount:<namespace>:<name>` in groups `system:serviceaccounts`,
/// `system:serviceaccounts:<namespace>` and `system:authenticated`.
#[cfg(test)]
pub fn service_account_user_info(namespace: &str, name: &str) -> UserInfo {
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

/// One rbac/v1 `PolicyRule` (JSON field names and omissions as the API has them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyRule {
    #[serde(default)]
    pub verbs: Vec<Symbol>,
    #[serde(rename = "apiGroups", default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<Symbol>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Symbol>,
    #[serde(rename = "resourceNames", default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<Symbol>,
    #[serde(rename = "nonResourceURLs", default, skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<Symbol>,
}

impl PolicyRule {
    /// The rule in a stored object; list entries that are not strings are left out (which can
    /// only narrow what the rule grants).
    pub fn from_json(v: &Value) -> PolicyRule {
        PolicyRule {
            verbs: strings(v, "verbs"),
            api_groups: strings(v, "apiGroups"),
            resources: strings(v, "resources"),
            resource_names: strings(v, "resourceNames"),
            non_resource_urls: strings(v, "nonResourceURLs"),
        }
    }

    /// `"*"` or the verb itself.
    pub fn verb_matches(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| &**v == "*" || &**v == verb)
    }

    /// `"*"` or the group itself (`""` is the core group).
    pub fn api_group_matches(&self, group: &str) -> bool {
        self.api_groups.iter().any(|g| &**g == "*" || &**g == group)
    }

    /// `"*"`, the resource with its subresource (`managedclusters/status`; plain
    /// `managedclusters` does not cover its subresources), or `*/<subresource>`.
    pub fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|r| {
            let r: &str = r;
            if r == "*" {
                return true;
            }
            if subresource.is_empty() {
                return r == resource;
            }
            // r == "<resource>/<subresource>", without building the string
            let combined = r.len() == resource.len() + 1 + subresource.len()
                && r.starts_with(resource)
                && r[resource.len()..].starts_with('/')
                && r.ends_with(subresource);
            combined
                || (r.len() == subresource.len() + 2
                    && r.starts_with("*/")
                    && r.ends_with(subresource))
        })
    }

    /// An empty list allows every name; a non-empty one only the names listed, so it never
    /// allows a request without a name (list, watch, create, deletecollection).
    pub fn resource_name_matches(&self, name: &str) -> bool {
        self.resource_names.is_empty() || self.resource_names.iter().any(|n| &**n == name)
    }

    /// `"*"`, the exact path, or a prefix ending in `*` (`/apis/*` covers `/apis/` and below,
    /// not `/apis`).
    pub fn non_resource_url_matches(&self, path: &str) -> bool {
        self.non_resource_urls.iter().any(|u| {
            let u: &str = u;
            u == "*" || u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
        })
    }

    /// Whether this rule allows the request.
    pub fn allows(&self, attrs: &Attributes) -> bool {
        if attrs.resource_request {
            self.verb_matches(&attrs.verb)
                && self.api_group_matches(&attrs.api_group)
                && self.resource_matches(&attrs.resource, &attrs.subresource)
                && self.resource_name_matches(&attrs.name)
        } else {
            self.verb_matches(&attrs.verb) && self.non_resource_url_matches(&attrs.path)
        }
    }
}

/// An authorization/v1 `ResourceRule` (SelfSubjectRulesReview).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceRule {
    pub verbs: Vec<String>,
    #[serde(rename = "apiGroups", default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(rename = "resourceNames", default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
}

/// An authorization/v1 `NonResourceRule` (SelfSubjectRulesReview).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NonResourceRule {
    pub verbs: Vec<String>,
    #[serde(rename = "nonResourceURLs", default, skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

/// The rules that apply to a user in a namespace, as a SelfSubjectRulesReview reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubjectRules {
    /// Rules naming resources (a rule naming both resources and URLs is in both lists, as in kube).
    pub resource_rules: Vec<ResourceRule>,
    pub non_resource_rules: Vec<NonResourceRule>,
    /// Always false: RBAC knows every rule it has.
    pub incomplete: bool,
    /// Roles the user's bindings refer to that could not be resolved (`""` when none).
    pub evaluation_error: String,
}

impl SubjectRules {
    /// The authorization/v1 `SubjectRulesReviewStatus` JSON.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "resourceRules": self.resource_rules,
            "nonResourceRules": self.non_resource_rules,
            "incomplete": self.incomplete,
        });
        if !self.evaluation_error.is_empty() {
            status["evaluationError"] = Value::String(self.evaluation_error.clone());
        }
        status
    }
}

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

#[derive(Debug, Clone, PartialEq, Eq)]
struct RoleRef {
    kind: Symbol,
    name: Symbol,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Subject {
    kind: Symbol,
    name: Symbol,
    namespace: Symbol,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Binding {
    name: Symbol,
    /// `""` for a ClusterRoleBinding.
    namespace: Symbol,
    role_ref: RoleRef,
    subjects: Vec<Subject>,
}

/// Binding names by the user name or group a subject stands for.
#[derive(Debug, Default)]
struct SubjectIndex {
    /// Sorted binding names: most subjects have one or two, which a set would hold in a whole
    /// tree node.
    users: HashMap<Symbol, Vec<Symbol>>,
    groups: HashMap<Symbol, Vec<Symbol>>,
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
    fn applies_to(&self, user: &UserInfo, binding_namespace: &str) -> bool {
        match self.key(binding_namespace) {
            Some(SubjectKey::User(name)) => user.name == *name,
            Some(SubjectKey::Group(group)) => user.groups.iter().any(|g| **g == *group),
            None => false,
        }
    }

    /// kube's `describeSubject`.
    fn describe(&self, binding_namespace: &str) -> String {
        if &*self.kind == "ServiceAccount" {
            let ns = if self.namespace.is_empty() { binding_namespace } else { &self.namespace };
            format!("{} {}", self.kind, go_quote(&format!("{}/{}", self.name, ns)))
        } else {
            format!("{} {}", self.kind, go_quote(&self.name))
        }
    }
}

impl Binding {
    fn from_json(obj: &Value, namespace: &str) -> Option<Binding> {
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
    fn describe(&self, subject: &Subject) -> String {
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
    fn insert(&mut self, binding: &Binding) {
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

    fn remove(&mut self, binding: &Binding) {
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

    fn is_empty(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty()
    }

    /// The names of the bindings naming the user or one of its groups, sorted, each once.
    fn names_for<'a>(&'a self, user: &UserInfo) -> BTreeSet<&'a str> {
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

    /// The rules that apply to `user` in `namespace`: those of its ClusterRoleBindings, and when
    /// `namespace` is not `""` those of its RoleBindings there (ClusterRoleBindings first, then
    /// RoleBindings, each by name).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> SubjectRules {
        let mut out = SubjectRules::default();
        let errors = self.visit_rules(user, namespace, |_, _, rule| {
            if !rule.resources.is_empty() {
                out.resource_rules.push(ResourceRule {
                    verbs: owned(&rule.verbs),
                    api_groups: owned(&rule.api_groups),
                    resources: owned(&rule.resources),
                    resource_names: owned(&rule.resource_names),
                });
            }
            if !rule.non_resource_urls.is_empty() {
                out.non_resource_rules.push(NonResourceRule {
                    verbs: owned(&rule.verbs),
                    non_resource_urls: owned(&rule.non_resource_urls),
                });
            }
            true
        });
        out.evaluation_error = aggregate(&errors);
        out
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
    fn visit_rules<'a>(
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

/// kube-apiserver's Forbidden message for a denied request (the `message` of its `Status`):
/// `managedclusters.cluster.open-cluster-management.io "c1" is forbidden: User "u" cannot get
/// resource "managedclusters" in API group "cluster.open-cluster-management.io" at the cluster
/// scope`, `forbidden: User "u" cannot get path "/metrics"`; the authorizer's reason is
/// appended as kube does (`<message>: <reason>`, nothing when the reason is empty).
pub fn forbidden_message(user: &UserInfo, attrs: &Attributes, reason: &str) -> String {
    let mut why = if !attrs.resource_request {
        format!(
            "User {} cannot {} path {}",
            go_quote(&user.name),
            attrs.verb,
            go_quote(&attrs.path)
        )
    } else {
        let mut resource = attrs.resource.clone();
        if !attrs.subresource.is_empty() {
            resource = format!("{resource}/{}", attrs.subresource);
        }
        let scope = if attrs.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace {}", go_quote(&attrs.namespace))
        };
        format!(
            "User {} cannot {} resource {} in API group {} {scope}",
            go_quote(&user.name),
            attrs.verb,
            go_quote(&resource),
            go_quote(&attrs.api_group)
        )
    };
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    // apierrors.NewForbidden(GroupResource{group, resource}, name, why)
    let (group, resource) = if attrs.resource_request {
        (attrs.api_group.as_str(), attrs.resource.as_str())
    } else {
        ("", "")
    };
    let qualified =
        if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") };
    if group.is_empty() && resource.is_empty() {
        format!("forbidden: {why}")
    } else if attrs.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {} is forbidden: {why}", go_quote(&attrs.name))
    }
}

/// The RBAC objects a new hub creates: kube's `cluster-admin` (bound to `system:masters`),
/// `system:discovery` and `system:basic-user` (bound to `system:authenticated`),
/// `system:public-info-viewer` (bound to `system:authenticated` and `system:unauthenticated`),
/// `system:monitoring` (`/metrics` and the health endpoints, bound to `system:monitoring`), and
/// OCM's bootstrap ClusterRole `open-cluster-management:bootstrap` bound by
/// `open-cluster-management:bootstrap:managedcluster` to `system:bootstrappers:managedcluster`
/// (ocm.md §3.1). All carry kube's `kubernetes.io/bootstrapping: rbac-defaults` label and
/// `rbac.authorization.kubernetes.io/autoupdate: "true"` annotation.
pub fn default_objects() -> Vec<Value> {
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
    let cluster_roles = [
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
    ];
    let bindings: [(&str, &str, &[&str]); 6] = [
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
    let metadata = |name: &str| {
        json!({
            "name": name,
            "labels": { BOOTSTRAPPING_LABEL: "rbac-defaults" },
            "annotations": { AUTOUPDATE_ANNOTATION: "true" },
        })
    };
    let mut out = Vec::new();
    for (name, rules) in cluster_roles {
        out.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": metadata(name),
            "rules": rules,
        }));
    }
    for (name, role, groups) in bindings {
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
    // kubeadm's `kubeadm:bootstrap-signer-clusterinfo`: anyone may read the hub's public
    // `cluster-info` (its URL and CA) to check the CA against a pin before joining; joined
    // agents read its gRPC server there too.
    let clusterinfo = "ocm:bootstrap-signer-clusterinfo";
    let mut meta = metadata(clusterinfo);
    meta["namespace"] = json!("kube-public");
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta,
        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"],
                   "resourceNames": ["cluster-info"]}],
    }));
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": clusterinfo},
        "subjects": [{"kind": "User", "apiGroup": RBAC_GROUP, "name": ANONYMOUS_USER},
                     {"kind": "Group", "apiGroup": RBAC_GROUP, "name": AUTHENTICATED_GROUP}],
    }));
    out
}

fn to_strings(items: &[&str]) -> Vec<Symbol> {
    items.iter().map(|s| symbol(s)).collect()
}

fn owned(symbols: &[Symbol]) -> Vec<String> {
    symbols.iter().map(|s| s.to_string()).collect()
}

fn string<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or("")
}

fn strings(v: &Value, field: &str) -> Vec<Symbol> {
    v.get(field)
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).map(symbol).collect())
        .unwrap_or_default()
}

/// apimachinery's error aggregate text: one message as is, several (duplicates dropped) as
/// `[a, b]`, none as `""`.
fn aggregate(errors: &[String]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for e in errors {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.len() {
        0 => String::new(),
        1 => seen[0].to_string(),
        _ => format!("[{}]", seen.join(", ")),
    }
}

/// Go's `%q` of a string (strconv.Quote): double quotes, backslash escapes for quotes,
/// backslashes and control characters.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";
    const WORK_GROUP: &str = "work.open-cluster-management.io";

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Value {
        json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
    }

    fn named_rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Value {
        json!({"verbs": verbs, "apiGroups": groups, "resources": resources, "resourceNames": names})
    }

    fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name}, "rules": rules})
    }

    fn role(ns: &str, name: &str, rules: Vec<Value>) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": name, "namespace": ns}, "rules": rules})
    }

    fn subject(kind: &str, name: &str) -> Value {
        if kind == "ServiceAccount" {
            json!({"kind": kind, "name": name})
        } else {
            json!({"kind": kind, "apiGroup": RBAC_GROUP, "name": name})
        }
    }

    fn crb(name: &str, role_kind: &str, role: &str, subjects: Vec<Value>) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name},
               "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role},
               "subjects": subjects})
    }

    fn rb(ns: &str, name: &str, role_kind: &str, role: &str, subjects: Vec<Value>) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": name, "namespace": ns},
               "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role},
               "subjects": subjects})
    }

    fn user(name: &str) -> UserInfo {
        UserInfo::new(name, &[AUTHENTICATED_GROUP])
    }

    fn get(group: &str, resource: &str, ns: &str, name: &str) -> Attributes {
        Attributes::resource("get", group, resource, ns, name)
    }

    fn allowed(index: &RbacIndex, user: &UserInfo, attrs: &Attributes) -> bool {
        index.authorize(user, attrs).is_allowed()
    }

    /// An index where `alice` holds `rules` cluster-wide.
    fn alice_with(rules: Vec<Value>) -> RbacIndex {
        RbacIndex::from_objects(&[
            cluster_role("r", rules),
            crb("b", "ClusterRole", "r", vec![subject("User", "alice")]),
        ])
    }

    #[test]
    fn verbs_match_exactly_or_by_star() {
        let index = alice_with(vec![rule(&["get", "list"], &[""], &["pods"])]);
        let alice = user("alice");
        assert!(allowed(&index, &alice, &get("", "pods", "ns", "p")));
        assert!(allowed(&index, &alice, &Attributes::resource("list", "", "pods", "ns", "")));
        assert!(!allowed(&index, &alice, &Attributes::resource("watch", "", "pods", "ns", "")));
        assert!(
            !allowed(&index, &alice, &Attributes::resource("GET", "", "pods", "ns", "p")),
            "case-sensitive"
        );

        let index = alice_with(vec![rule(&["*"], &[""], &["pods"])]);
        for verb in ["get", "deletecollection", "renew", "escalate"] {
            assert!(
                allowed(&index, &alice, &Attributes::resource(verb, "", "pods", "ns", "p")),
                "{verb}"
            );
        }
    }

    #[test]
    fn api_groups_match_exactly_or_by_star() {
        let index = alice_with(vec![rule(&["get"], &[""], &["pods"])]);
        let alice = user("alice");
        assert!(allowed(&index, &alice, &get("", "pods", "ns", "p")));
        assert!(!allowed(&index, &alice, &get("apps", "pods", "ns", "p")), "core only");

        let index = alice_with(vec![rule(&["get"], &[CLUSTER_GROUP], &["managedclusters"])]);
        assert!(allowed(&index, &alice, &get(CLUSTER_GROUP, "managedclusters", "", "c")));
        assert!(!allowed(&index, &alice, &get("", "managedclusters", "", "c")));
        assert!(!allowed(
            &index,
            &alice,
            &get("cluster.open-cluster-management.io.evil", "managedclusters", "", "c")
        ));

        let index = alice_with(vec![rule(&["get"], &["*"], &["managedclusters"])]);
        assert!(allowed(&index, &alice, &get(CLUSTER_GROUP, "managedclusters", "", "c")));
        assert!(allowed(&index, &alice, &get("", "managedclusters", "", "c")));
    }

    #[test]
    fn resources_match_with_subresources_exactly() {
        let alice = user("alice");
        let status = get(CLUSTER_GROUP, "managedclusters", "", "c").with_subresource("status");
        let main = get(CLUSTER_GROUP, "managedclusters", "", "c");

        // the main resource does not cover its subresources, nor the other way round
        let index = alice_with(vec![rule(&["get"], &[CLUSTER_GROUP], &["managedclusters"])]);
        assert!(allowed(&index, &alice, &main));
        assert!(!allowed(&index, &alice, &status));
        let index = alice_with(vec![rule(&["get"], &[CLUSTER_GROUP], &["managedclusters/status"])]);
        assert!(!allowed(&index, &alice, &main));
        assert!(allowed(&index, &alice, &status));
        assert!(!allowed(&index, &alice, &main.clone().with_subresource("accept")));

        // "*/status": any resource's status subresource, never a main resource
        let index = alice_with(vec![rule(&["get"], &[CLUSTER_GROUP], &["*/status"])]);
        assert!(allowed(&index, &alice, &status));
        assert!(allowed(
            &index,
            &alice,
            &get(CLUSTER_GROUP, "placements", "ns", "p").with_subresource("status")
        ));
        assert!(!allowed(&index, &alice, &main));
        assert!(!allowed(&index, &alice, &main.clone().with_subresource("accept")));
        assert!(!allowed(&index, &alice, &main.clone().with_subresource("xstatus")));

        // "*" covers everything, subresources included
        let index = alice_with(vec![rule(&["get"], &[CLUSTER_GROUP], &["*"])]);
        assert!(allowed(&index, &alice, &main));
        assert!(allowed(&index, &alice, &status));

        // prefix-related resource names do not match
        let index = alice_with(vec![rule(&["get"], &[CLUSTER_GROUP], &["managedcluster"])]);
        assert!(!allowed(&index, &alice, &main));
        let index = alice_with(vec![rule(&["get"], &[CLUSTER_GROUP], &["managedclusters/stat"])]);
        assert!(!allowed(&index, &alice, &status));
    }

    #[test]
    fn resource_names_limit_to_named_objects_and_never_allow_collections() {
        let alice = user("alice");
        let index =
            alice_with(vec![named_rule(&["*"], &[CLUSTER_GROUP], &["managedclusters"], &["a"])]);
        assert!(allowed(&index, &alice, &get(CLUSTER_GROUP, "managedclusters", "", "a")));
        assert!(allowed(
            &index,
            &alice,
            &Attributes::resource("update", CLUSTER_GROUP, "managedclusters", "", "a")
        ));
        assert!(!allowed(&index, &alice, &get(CLUSTER_GROUP, "managedclusters", "", "a-x")));
        assert!(!allowed(&index, &alice, &get(CLUSTER_GROUP, "managedclusters", "", "")));
        for verb in ["list", "watch", "create", "deletecollection"] {
            let attrs = Attributes::resource(verb, CLUSTER_GROUP, "managedclusters", "", "");
            assert!(!allowed(&index, &alice, &attrs), "{verb} without a name");
        }
        // an empty list allows every name and collections
        let index = alice_with(vec![rule(&["*"], &[CLUSTER_GROUP], &["managedclusters"])]);
        assert!(allowed(&index, &alice, &get(CLUSTER_GROUP, "managedclusters", "", "a-x")));
        assert!(allowed(
            &index,
            &alice,
            &Attributes::resource("list", CLUSTER_GROUP, "managedclusters", "", "")
        ));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_trailing_star() {
        let alice = user("alice");
        let index =
            alice_with(vec![json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]})]);
        assert!(allowed(&index, &alice, &Attributes::non_resource("get", "/healthz")));
        assert!(!allowed(&index, &alice, &Attributes::non_resource("get", "/healthz/ping")));
        assert!(!allowed(&index, &alice, &Attributes::non_resource("get", "/healthzz")));
        assert!(!allowed(&index, &alice, &Attributes::non_resource("post", "/healthz")));
        assert!(allowed(&index, &alice, &Attributes::non_resource("get", "/apis/")));
        assert!(allowed(
            &index,
            &alice,
            &Attributes::non_resource("get", "/apis/cluster.open-cluster-management.io/v1")
        ));
        assert!(!allowed(&index, &alice, &Attributes::non_resource("get", "/apis")));
        assert!(!allowed(&index, &alice, &Attributes::non_resource("get", "/metrics")));
        // URL rules never allow resource requests, resource rules never allow paths
        assert!(!allowed(&index, &alice, &get("", "healthz", "", "")));
        let index = alice_with(vec![rule(&["*"], &["*"], &["*"])]);
        assert!(!allowed(&index, &alice, &Attributes::non_resource("get", "/healthz")));
        let index = alice_with(vec![json!({"verbs": ["*"], "nonResourceURLs": ["*"]})]);
        assert!(allowed(&index, &alice, &Attributes::non_resource("delete", "/anything/at/all")));
        assert!(!allowed(&index, &alice, &get("", "pods", "ns", "p")));
    }

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
        assert!(allowed(
            &index,
            &crate::auth::authz::service_account_user_info("a", "sa"),
            &pods("a")
        ));
        assert!(!allowed(
            &index,
            &crate::auth::authz::service_account_user_info("b", "sa"),
            &pods("a")
        ));
        assert!(!allowed(
            &index,
            &crate::auth::authz::service_account_user_info("a", "sa"),
            &pods("b")
        ));
        assert!(allowed(
            &index,
            &crate::auth::authz::service_account_user_info("other", "sb"),
            &pods("a")
        ));
        assert!(!allowed(
            &index,
            &crate::auth::authz::service_account_user_info("a", "sb"),
            &pods("a")
        ));
        assert!(!allowed(
            &index,
            &crate::auth::authz::service_account_user_info("", "sc"),
            &pods("a")
        ));
        assert!(!allowed(&index, &UserInfo::new("system:serviceaccount::sc", &[]), &pods("")));
        assert!(allowed(
            &index,
            &crate::auth::authz::service_account_user_info("d", "sd"),
            &pods("")
        ));
        assert!(allowed(
            &index,
            &crate::auth::authz::service_account_user_info("d", "sd"),
            &pods("z")
        ));
        // matching is by user name: any authenticator's user of that name matches
        assert!(allowed(&index, &UserInfo::new("system:serviceaccount:d:sd", &[]), &pods("z")));
        assert!(!allowed(&index, &UserInfo::new("system:serviceaccount:d:sd2", &[]), &pods("z")));
        assert!(allowed(
            &index,
            &crate::auth::authz::service_account_user_info("e", "anyone"),
            &pods("e")
        ));
        assert!(!allowed(
            &index,
            &crate::auth::authz::service_account_user_info("e", "anyone"),
            &pods("f")
        ));
        assert!(
            !allowed(&index, &crate::auth::authz::service_account_user_info("a", "sa"), &pods("")),
            "RoleBindings never cluster-wide"
        );
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

    /// The per-cluster RBAC of ocm.md §3.5 for clusters `a` and `a-x`.
    fn ocm_cluster_objects(cluster: &str) -> Vec<Value> {
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

    fn ocm_work_role() -> Value {
        cluster_role(
            "open-cluster-management:managedcluster:work",
            vec![
                rule(&["create", "patch", "update"], &["", "events.k8s.io"], &["events"]),
                rule(
                    &["get", "list", "watch", "update", "patch"],
                    &[WORK_GROUP],
                    &["manifestworks"],
                ),
                rule(&["patch", "update"], &[WORK_GROUP], &["manifestworks/status"]),
            ],
        )
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
        let d = index.authorize(
            &crate::auth::authz::service_account_user_info("ns", "sa"),
            &get("", "pods", "ns", "p"),
        );
        assert_eq!(
            d.reason(),
            "RBAC: allowed by RoleBinding \"n/ns\" of ClusterRole \"r\" to ServiceAccount \"sa/ns\""
        );
        let d = index.authorize(&UserInfo::new("nobody", &[]), &get("", "pods", "ns", "p"));
        assert_eq!(d, Decision::Deny { reason: String::new() });
    }

    #[test]
    fn forbidden_messages_are_kubes() {
        let u = UserInfo::new("system:open-cluster-management:a:agent", &["g"]);
        assert_eq!(
            forbidden_message(&u, &get(CLUSTER_GROUP, "managedclusters", "", "b"), ""),
            "managedclusters.cluster.open-cluster-management.io \"b\" is forbidden: User \
             \"system:open-cluster-management:a:agent\" cannot get resource \"managedclusters\" in API group \
             \"cluster.open-cluster-management.io\" at the cluster scope"
        );
        assert_eq!(
            forbidden_message(
                &u,
                &Attributes::resource("list", WORK_GROUP, "manifestworks", "b", ""),
                ""
            ),
            "manifestworks.work.open-cluster-management.io is forbidden: User \
             \"system:open-cluster-management:a:agent\" cannot list resource \"manifestworks\" in API group \
             \"work.open-cluster-management.io\" in the namespace \"b\""
        );
        assert_eq!(
            forbidden_message(&user("bob"), &get("", "secrets", "ns", "s"), ""),
            "secrets \"s\" is forbidden: User \"bob\" cannot get resource \"secrets\" in API group \"\" in the namespace \"ns\""
        );
        assert_eq!(
            forbidden_message(
                &user("bob"),
                &Attributes::resource("patch", CLUSTER_GROUP, "managedclusters", "", "c")
                    .with_subresource("status"),
                ""
            ),
            "managedclusters.cluster.open-cluster-management.io \"c\" is forbidden: User \"bob\" cannot patch \
             resource \"managedclusters/status\" in API group \"cluster.open-cluster-management.io\" at the cluster scope"
        );
        assert_eq!(
            forbidden_message(
                &UserInfo::new("system:anonymous", &[]),
                &Attributes::non_resource("get", "/metrics"),
                ""
            ),
            "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""
        );
        assert_eq!(
            forbidden_message(
                &user("bob"),
                &get("", "pods", "", ""),
                "RBAC: clusterrole.rbac.authorization.k8s.io \"r\" not found"
            ),
            "pods is forbidden: User \"bob\" cannot get resource \"pods\" in API group \"\" at the cluster scope: \
             RBAC: clusterrole.rbac.authorization.k8s.io \"r\" not found"
        );
        assert_eq!(go_quote("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\x01\"");
    }

    #[test]
    fn rules_for_lists_cluster_and_namespace_rules() {
        let mut objects = vec![ocm_work_role()];
        objects.extend(ocm_cluster_objects("a"));
        objects.push(crb(
            "missing",
            "ClusterRole",
            "not-yet",
            vec![subject("Group", "system:open-cluster-management:a")],
        ));
        objects.push(cluster_role(
            "disc",
            vec![json!({"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*"]})],
        ));
        objects.push(crb(
            "disc",
            "ClusterRole",
            "disc",
            vec![subject("Group", AUTHENTICATED_GROUP)],
        ));
        let index = RbacIndex::from_objects(&objects);
        let agent =
            UserInfo::new("agent", &["system:open-cluster-management:a", AUTHENTICATED_GROUP]);

        let cluster = index.rules_for(&agent, "");
        assert_eq!(cluster.resource_rules.len(), 4, "{cluster:?}");
        assert_eq!(cluster.non_resource_rules.len(), 1);
        assert_eq!(
            cluster.evaluation_error,
            "clusterrole.rbac.authorization.k8s.io \"not-yet\" not found"
        );
        assert!(!cluster.incomplete);

        let in_a = index.rules_for(&agent, "a");
        assert_eq!(in_a.resource_rules.len(), 7);
        assert!(in_a.resource_rules[..4] == cluster.resource_rules[..], "cluster-wide rules first");
        assert_eq!(
            serde_json::to_value(&in_a.resource_rules[6]).unwrap(),
            json!({"verbs": ["patch", "update"], "apiGroups": [WORK_GROUP], "resources": ["manifestworks/status"]})
        );
        assert_eq!(index.rules_for(&agent, "a-x").resource_rules.len(), 4);

        let status = in_a.to_status();
        assert_eq!(status["incomplete"], json!(false));
        assert_eq!(
            status["nonResourceRules"],
            json!([{"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*"]}])
        );
        assert_eq!(
            status["resourceRules"][2],
            json!({"verbs": ["get", "list", "update", "watch"], "apiGroups": [CLUSTER_GROUP],
                   "resources": ["managedclusters"], "resourceNames": ["a"]})
        );
        assert_eq!(status["evaluationError"], json!(cluster.evaluation_error));

        let nobody = index.rules_for(&UserInfo::new("nobody", &[]), "a").to_status();
        assert_eq!(
            nobody,
            json!({"resourceRules": [], "nonResourceRules": [], "incomplete": false})
        );
    }

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
