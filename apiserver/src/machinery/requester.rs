//! Who asks and what: the authenticated user, the attributes of a request
//! (Kubernetes' `authorizer.Attributes`), a decision, and the [`Authorizer`] the auth layer
//! implements, so strategies and the registry can ask about the permissions admission checks.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Who is asking (after authentication).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with a name and groups.
    #[cfg(test)]
    pub fn new(name: impl Into<String>, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..UserInfo::default()
        }
    }
}

/// What is asked (Kubernetes' `authorizer.Attributes`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// get list watch create update patch delete deletecollection (or any verb a rule may name,
    /// such as `renew`) for resources; the lower-case HTTP method for non-resource requests.
    pub verb: String,
    pub resource_request: bool,
    /// `""` for the core group.
    pub api_group: String,
    pub api_version: String,
    /// Plural.
    pub resource: String,
    /// `""`, or `status`, `accept`, ...
    pub subresource: String,
    /// `""` for cluster scope and for all namespaces.
    pub namespace: String,
    /// `""` for collections.
    pub name: String,
    /// The request path, for non-resource requests.
    pub path: String,
}

impl Attributes {
    /// A resource request.
    pub fn resource(
        verb: &str,
        api_group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Attributes {
        Attributes {
            verb: verb.to_string(),
            resource_request: true,
            api_group: api_group.to_string(),
            resource: resource.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            ..Attributes::default()
        }
    }

    /// The same request on a subresource.
    pub fn with_subresource(mut self, subresource: &str) -> Attributes {
        self.subresource = subresource.to_string();
        self
    }

    /// A non-resource request (`/healthz`, `/apis`, ...).
    pub fn non_resource(verb: &str, path: &str) -> Attributes {
        Attributes { verb: verb.to_string(), path: path.to_string(), ..Attributes::default() }
    }
}

/// An authorization decision, with kube's reason text: on allow, the binding that allowed it
/// (`RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to Group "z"`); on deny, empty
/// unless some binding of the user refers to a role that could not be resolved (`RBAC:
/// clusterrole.rbac.authorization.k8s.io "y" not found`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow { reason: String },
    Deny { reason: String },
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allow { .. })
    }

    pub fn reason(&self) -> &str {
        match self {
            Decision::Allow { reason } | Decision::Deny { reason } => reason,
        }
    }
}

/// A request's authenticated user, shared by everything that serves the request.
pub type Identity = Arc<UserInfo>;

/// Decides requests (the hub's RBAC; implemented by the auth layer).
pub trait Authorizer: Send + Sync {
    /// Whether `user` may do `attrs`, with the reason.
    fn decide(&self, user: &UserInfo, attrs: &Attributes) -> Decision;
}

/// Who asks for a write, with the authorizer to ask about the permissions admission checks
/// (`managedclusters/accept`, `managedclustersets/join`, `signers/approve`, ...).
#[derive(Clone)]
pub struct Requester {
    pub user: Identity,
    pub authorizer: Arc<dyn Authorizer>,
}

impl std::fmt::Debug for Requester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Requester").field("user", &self.user.name).finish_non_exhaustive()
    }
}

impl Requester {
    /// Whether the requester may do `attrs`.
    pub fn can(&self, attrs: &Attributes) -> bool {
        self.authorizer.decide(&self.user, attrs).is_allowed()
    }
}
