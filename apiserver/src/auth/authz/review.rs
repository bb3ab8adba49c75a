//! The rules a user has in a namespace, as SelfSubjectRulesReview reports them.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::index::RbacIndex;
use super::messages::aggregate;
use crate::machinery::intern::Symbol;
use crate::machinery::requester::UserInfo;

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

impl RbacIndex {
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
}

fn owned(symbols: &[Symbol]) -> Vec<String> {
    symbols.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::auth::authz::AUTHENTICATED_GROUP;
    use crate::auth::authz::test_util::*;

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
}
