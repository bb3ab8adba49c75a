//! One RBAC `PolicyRule` and Kubernetes' rules for matching it against a request: verbs,
//! API groups, resources with subresources, resource names, non-resource URLs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::strings;
use crate::machinery::intern::Symbol;
use crate::machinery::requester::Attributes;

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::auth::authz::test_util::*;

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
}
