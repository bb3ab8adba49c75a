//! What a requester may see of the objects RBAC lets it read, where that is narrower than RBAC
//! says: a cluster's agent sees only its own cluster's CertificateSigningRequests.
//!
//! OCM's registration ClusterRole lets every agent get, list and watch CSRs cluster-wide, so an
//! agent of one cluster could read the requests (subjects, certificates) of every other. The hub
//! is stricter: to an agent of cluster `c`, a CSR exists only if its `spec.username` is one of
//! `c`'s agent identities (`system:open-cluster-management:c:<agent>`). The requester is
//! recorded by the server at creation and never changes (the CSR strategy), so no client can
//! make a request look like another cluster's; the cluster-name label cannot serve, since any
//! creator sets it. An agent sees the CSRs it (or an earlier agent identity of its cluster)
//! created: its certificate rotations and its add-ons' requests, which is all the klusterlet
//! reads. Requests made with a bootstrap token name the bootstrap identity; an agent no longer
//! sees them, and bootstrap identities (not a cluster's agent) are left to RBAC alone.
//!
//! [`Visibility::of`] is decided once per request (REST list, get and watch); [`visible_to`]
//! is the same rule for one object (the gRPC server's).

use serde_json::Value;

use crate::machinery::requester::UserInfo;
use ocm_proto::api::cluster::agent_group;

/// The API group of CertificateSigningRequests.
const CSR_GROUP: &str = "certificates.k8s.io";
/// Their resource.
const CSR_RESOURCE: &str = "certificatesigningrequests";
/// The prefix of every cluster agent's user name (`<prefix><cluster>:<agent>`).
const AGENT_PREFIX: &str = "system:open-cluster-management:";

/// A narrower view of one resource than RBAC's, for one requester.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visibility {
    /// A cluster's agent reading CSRs: only those requested by an agent identity of this
    /// cluster.
    OwnClusterRequests(String),
}

impl Visibility {
    /// The view `user` has of `resource` in `api_group`, or `None` when it sees whatever RBAC
    /// lets it read.
    pub fn of(user: &UserInfo, api_group: &str, resource: &str) -> Option<Visibility> {
        if api_group != CSR_GROUP || resource != CSR_RESOURCE {
            return None;
        }
        agent_cluster(user).map(|cluster| Visibility::OwnClusterRequests(cluster.to_owned()))
    }

    /// Whether `obj` is in this view.
    pub fn sees(&self, obj: &Value) -> bool {
        match self {
            Visibility::OwnClusterRequests(cluster) => {
                requesting_cluster(obj) == Some(cluster.as_str())
            }
        }
    }
}

/// Whether `user` may see `obj`, an object of `resource` in `api_group` that RBAC lets it
/// read: [`Visibility::of`] and [`Visibility::sees`] in one call.
pub fn visible_to(user: &UserInfo, api_group: &str, resource: &str, obj: &Value) -> bool {
    Visibility::of(user, api_group, resource).is_none_or(|view| view.sees(obj))
}

/// Whether the agents of `cluster` see `obj`, an object of `resource` in `api_group` labelled
/// for that cluster: [`Visibility::sees`] of the view every agent of the cluster has.
pub fn cluster_agents_see(cluster: &str, api_group: &str, resource: &str, obj: &Value) -> bool {
    if api_group != CSR_GROUP || resource != CSR_RESOURCE {
        return true;
    }
    Visibility::OwnClusterRequests(cluster.to_owned()).sees(obj)
}

/// The cluster whose agent requested a CSR, by its server-recorded requester
/// (`spec.username`), if an agent of a cluster did.
pub fn requesting_cluster(csr: &Value) -> Option<&str> {
    csr.pointer("/spec/username").and_then(Value::as_str).and_then(user_cluster)
}

/// The cluster whose agent `user` is: a user `system:open-cluster-management:<cluster>:<agent>`
/// in that cluster's group (`system:open-cluster-management:<cluster>`), as the hub's signer
/// issues agents' certificates.
pub fn agent_cluster(user: &UserInfo) -> Option<&str> {
    let cluster = user_cluster(&user.name)?;
    let group = agent_group(cluster);
    user.groups.contains(&group).then_some(cluster)
}

/// The cluster a user name `system:open-cluster-management:<cluster>:<agent>` names (one
/// `:` after the cluster, neither part empty).
fn user_cluster(name: &str) -> Option<&str> {
    let (cluster, agent) = name.strip_prefix(AGENT_PREFIX)?.split_once(':')?;
    let valid = !cluster.is_empty() && !agent.is_empty() && !agent.contains(':');
    valid.then_some(cluster)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn csr(username: &str) -> Value {
        json!({"metadata": {"name": "x", "labels": {"open-cluster-management.io/cluster-name": "c1"}},
               "spec": {"username": username}})
    }

    fn agent(cluster: &str, name: &str) -> UserInfo {
        let group = agent_group(cluster);
        UserInfo::new(
            format!("{AGENT_PREFIX}{cluster}:{name}"),
            &[group.as_str(), "system:open-cluster-management:managed-clusters"],
        )
    }

    #[test]
    fn an_agent_sees_only_requests_of_its_own_clusters_agents() {
        let c1 = agent("c1", "agent-a");
        let c2 = agent("c2", "agent-b");
        let own = csr("system:open-cluster-management:c1:agent-a");
        let earlier = csr("system:open-cluster-management:c1:agent-old");
        // c2's request, labelled as c1's: the label does not make it c1's.
        let forged = csr("system:open-cluster-management:c2:agent-b");
        let bootstrap = csr("system:bootstrap:abcdef");
        for (obj, sees) in [(&own, true), (&earlier, true), (&forged, false), (&bootstrap, false)] {
            assert_eq!(visible_to(&c1, CSR_GROUP, CSR_RESOURCE, obj), sees, "{obj}");
        }
        assert!(!visible_to(&c2, CSR_GROUP, CSR_RESOURCE, &own));
        assert!(visible_to(&c2, CSR_GROUP, CSR_RESOURCE, &forged));
        assert!(!visible_to(&c1, CSR_GROUP, CSR_RESOURCE, &json!({"spec": {}})));
        // c1 is not a prefix of c10.
        assert!(!visible_to(
            &agent("c1", "a"),
            CSR_GROUP,
            CSR_RESOURCE,
            &csr(&agent("c10", "a").name)
        ));
        // Other kinds, and requesters that are not a cluster's agent, see what RBAC allows.
        assert!(visible_to(&c1, "", "secrets", &forged));
        let admin = UserInfo::new("ocm-admin", &["system:masters"]);
        assert!(visible_to(&admin, CSR_GROUP, CSR_RESOURCE, &forged));
        let bootstrapper = UserInfo::new("system:bootstrap:abcdef", &["system:bootstrappers"]);
        assert!(visible_to(&bootstrapper, CSR_GROUP, CSR_RESOURCE, &own));
    }

    #[test]
    fn an_agent_is_its_user_name_and_its_clusters_group() {
        assert_eq!(agent_cluster(&agent("c1", "a")), Some("c1"));
        // The name without the cluster's group (another group, or none) is not an agent.
        let no_group = UserInfo::new("system:open-cluster-management:c1:a", &["other"]);
        assert_eq!(agent_cluster(&no_group), None);
        let wrong = UserInfo::new(
            "system:open-cluster-management:c1:a",
            &["system:open-cluster-management:c2"],
        );
        assert_eq!(agent_cluster(&wrong), None);
        // An add-on's identity names more parts and is not a cluster's agent.
        let addon = UserInfo::new(
            "system:open-cluster-management:cluster:c1:addon:hello:agent:a",
            &["system:open-cluster-management:cluster"],
        );
        assert_eq!(agent_cluster(&addon), None);
        for name in ["system:open-cluster-management:c1", "system:open-cluster-management::a"] {
            assert_eq!(user_cluster(name), None, "{name}");
        }
    }
}
