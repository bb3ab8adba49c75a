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
//!
//! The parts: `rule` (a `PolicyRule` and its matching rules), `binding` (who a binding's subjects
//! are, and the subject index), `index` ([`RbacIndex`] and its decisions), `review` (the rules a
//! user has), `messages` (kube's words for denials and errors), `defaults` (the RBAC objects of a
//! new hub).

mod binding;
mod defaults;
mod index;
mod messages;
mod review;
mod rule;
#[cfg(test)]
mod test_util;

pub use defaults::default_objects;
pub use index::RbacIndex;
pub use messages::forbidden_message;
pub use review::{NonResourceRule, ResourceRule, SubjectRules};
pub use rule::PolicyRule;

use serde_json::Value;

use crate::machinery::intern::{Symbol, symbol};

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

/// A string field of a stored object, `""` when absent or not a string.
fn string<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or("")
}

/// A list-of-strings field of a stored object; entries that are not strings are left out.
fn strings(v: &Value, field: &str) -> Vec<Symbol> {
    v.get(field)
        .and_then(Value::as_array)
        .map(|items| items.iter().filter_map(Value::as_str).map(symbol).collect())
        .unwrap_or_default()
}
