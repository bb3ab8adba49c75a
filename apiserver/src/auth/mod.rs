//! Who may do what: the PKI and TLS identity of connections, the authentication chain and the
//! hub's tokens, RBAC and the authorizer that follows it, delegation to a kube-apiserver, the
//! review kinds, the per-cluster agent RBAC, what an agent sees beyond RBAC (its own cluster's
//! CSRs only) and the in-flight limits.

pub mod access;
pub mod authn;
pub mod authz;
pub mod bootstrap;
pub mod cluster_rbac;
pub mod delegate;
pub mod identity;
pub mod limits;
pub mod pki;
pub mod reviews;
pub mod sealed;
pub mod tls;
pub mod tokens;
pub mod visibility;
