//! Root policy and PolicySet status as pure functions (ocm-wave2.md §3.4): per cluster its
//! replica's compliance, the root's compliance over them, and a set's compliance and message
//! over its policies, as OCM's propagator computes them.

use std::collections::BTreeMap;

use ocm_proto::api::policy::v1::{CompliancePerClusterStatus, PolicyStatus};
use ocm_proto::api::policy::v1beta1::{PolicySetPlacement, PolicySetStatus};
use ocm_proto::api::policy::{COMPLIANT, NON_COMPLIANT, PENDING, overall};

use super::select::Selection;

/// The root's compliance over its clusters' rows: none without clusters; NonCompliant wins,
/// then Pending; a cluster not yet reporting leaves it unset; else Compliant.
pub(super) fn root_compliance(rows: &[CompliancePerClusterStatus]) -> Option<String> {
    if rows.is_empty() {
        return None;
    }
    let has = |state: &str| rows.iter().any(|r| r.compliant.as_deref() == Some(state));
    if has(NON_COMPLIANT) {
        Some(NON_COMPLIANT.to_owned())
    } else if has(PENDING) {
        Some(PENDING.to_owned())
    } else if rows.iter().any(|r| r.compliant.as_deref().is_none_or(str::is_empty)) {
        None
    } else {
        Some(COMPLIANT.to_owned())
    }
}

/// The root's status: `placement[]` from the selection, `status[]` sorted by cluster with each
/// replica's compliance (`reported`, by cluster), and the compliance over them.
pub(super) fn root_status(
    selection: &Selection,
    reported: &BTreeMap<String, String>,
) -> PolicyStatus {
    let rows: Vec<CompliancePerClusterStatus> = selection
        .clusters
        .keys()
        .map(|c| CompliancePerClusterStatus {
            clustername: Some(c.clone()),
            clusternamespace: Some(c.clone()),
            compliant: reported.get(c).filter(|s| !s.is_empty()).cloned(),
            remaining_bindings: Vec::new(),
        })
        .collect();
    PolicyStatus {
        compliant: root_compliance(&rows),
        details: Vec::new(),
        placement: selection.placements.clone(),
        status: rows,
    }
}

/// What a PolicySet knows of one of its policies.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Member {
    /// No such Policy in the set's namespace.
    Missing,
    /// The Policy is disabled.
    Disabled,
    /// Its compliance over the clusters the set's bindings select (None: none reported yet).
    Reporting(Option<String>),
}

/// A set's status from its members (in the set's order) and the placements its bindings have.
pub(super) fn set_status(
    members: &[(String, Member)],
    placement: Vec<PolicySetPlacement>,
) -> PolicySetStatus {
    let names = |want: fn(&Member) -> bool| -> Vec<&str> {
        members.iter().filter(|(_, m)| want(m)).map(|(n, _)| n.as_str()).collect()
    };
    let state = |m: &Member| match m {
        Member::Reporting(s) => s.clone(),
        _ => None,
    };
    let pending = names(|m| matches!(m, Member::Reporting(Some(s)) if s == PENDING));
    let disabled = names(|m| *m == Member::Disabled);
    let unknown = names(|m| matches!(m, Member::Reporting(None)));
    let deleted = names(|m| *m == Member::Missing);
    let found: Vec<String> = members.iter().filter_map(|(_, m)| state(m)).collect();
    let mut parts = Vec::new();
    let mut list = |label: &str, names: &[&str]| {
        if !names.is_empty() {
            parts.push(format!("{label}: {}", names.join(", ")));
        }
    };
    list("Policies awaiting pending dependencies", &pending);
    list("Disabled policies", &disabled);
    list("No status provided while awaiting policy status", &unknown);
    list("Deleted policies", &deleted);
    let status_message = if parts.is_empty() {
        "All policies are reporting status".to_owned()
    } else {
        parts.join("; ")
    };
    let compliant = if unknown.is_empty() {
        overall(found.iter().map(String::as_str)).map(str::to_owned)
    } else {
        None
    };
    PolicySetStatus {
        compliant,
        exclusions: Vec::new(),
        placement,
        status_message: Some(status_message),
    }
}

/// A policy's compliance over `clusters` only (a set's view of it): NonCompliant wins, then
/// Pending; None when none of them reported.
pub(super) fn compliance_among(
    rows: &[CompliancePerClusterStatus],
    clusters: &[String],
) -> Option<String> {
    let states = rows
        .iter()
        .filter(|r| r.clustername.as_ref().is_some_and(|c| clusters.contains(c)))
        .filter_map(|r| r.compliant.as_deref())
        .filter(|s| !s.is_empty());
    overall(states).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(c: &str, s: Option<&str>) -> CompliancePerClusterStatus {
        CompliancePerClusterStatus {
            clustername: Some(c.into()),
            clusternamespace: Some(c.into()),
            compliant: s.map(str::to_owned),
            remaining_bindings: Vec::new(),
        }
    }

    #[test]
    fn root_compliance_follows_ocm() {
        assert_eq!(root_compliance(&[]), None);
        let c = Some(COMPLIANT);
        assert_eq!(root_compliance(&[row("a", c), row("b", c)]).as_deref(), c);
        assert_eq!(root_compliance(&[row("a", c), row("b", None)]), None);
        let nc = Some(NON_COMPLIANT);
        assert_eq!(root_compliance(&[row("a", nc), row("b", None)]).as_deref(), nc);
        let p = Some(PENDING);
        assert_eq!(root_compliance(&[row("a", p), row("b", c)]).as_deref(), p);
    }

    #[test]
    fn set_status_lists_what_is_not_reporting() {
        let all = set_status(
            &[
                ("a".into(), Member::Reporting(Some(COMPLIANT.into()))),
                ("b".into(), Member::Reporting(Some(NON_COMPLIANT.into()))),
            ],
            Vec::new(),
        );
        assert_eq!(all.compliant.as_deref(), Some(NON_COMPLIANT));
        assert_eq!(all.status_message.as_deref(), Some("All policies are reporting status"));
        let some = set_status(
            &[
                ("a".into(), Member::Disabled),
                ("b".into(), Member::Reporting(None)),
                ("c".into(), Member::Missing),
            ],
            Vec::new(),
        );
        assert_eq!(some.compliant, None);
        assert_eq!(
            some.status_message.as_deref(),
            Some(
                "Disabled policies: a; No status provided while awaiting policy status: b; Deleted policies: c"
            )
        );
    }
}
