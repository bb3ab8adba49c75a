//! RBAC answers in kube's words: the Forbidden message of a denied request, Go's `%q` quoting
//! the messages use, and apimachinery's aggregate of several errors.

use std::fmt::Write as _;

use crate::machinery::requester::{Attributes, UserInfo};

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

/// apimachinery's error aggregate text: one message as is, several (duplicates dropped) as
/// `[a, b]`, none as `""`.
pub(super) fn aggregate(errors: &[String]) -> String {
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
pub(super) fn go_quote(s: &str) -> String {
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
    use crate::auth::authz::test_util::*;

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
}
