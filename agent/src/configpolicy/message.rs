//! OCM's compliance reasons and messages for an object template (config-policy-controller's
//! `generateMessageWithReason`, ocm-wave2.md §3.5): per outcome the plural resource, the
//! sorted object names in brackets, the outcome's text and the namespace(s); outcomes joined
//! with `; `.

use std::collections::{BTreeMap, BTreeSet};

/// What one object of a template came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// `musthave`/`mustonlyhave`: there and as specified.
    Matches,
    /// Enforce created it.
    Created,
    /// Enforce updated it.
    Updated,
    /// Enforce deleted it (`mustnothave`).
    Deleted,
    /// `musthave`/`mustonlyhave`: not there.
    Missing,
    /// `musthave`/`mustonlyhave`: there, but not as specified.
    Mismatch,
    /// `mustnothave`: there.
    Present,
    /// `mustnothave`: not there.
    Absent,
}

impl Outcome {
    /// Whether the object complies after this outcome.
    pub fn compliant(self) -> bool {
        matches!(
            self,
            Outcome::Matches
                | Outcome::Created
                | Outcome::Updated
                | Outcome::Deleted
                | Outcome::Absent
        )
    }

    /// OCM's condition reason.
    pub fn reason(self) -> &'static str {
        match self {
            Outcome::Matches => "K8s `must have` object already exists",
            Outcome::Created => "K8s creation success",
            Outcome::Updated => "K8s update success",
            Outcome::Deleted => "K8s deletion success",
            Outcome::Missing | Outcome::Mismatch => "K8s does not have a `must have` object",
            Outcome::Present => "K8s has a `must not have` object",
            Outcome::Absent => "K8s `must not have` object already missing",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Outcome::Matches => "found as specified",
            Outcome::Created => "was created successfully",
            Outcome::Updated => "was updated successfully",
            Outcome::Deleted => "was deleted successfully",
            Outcome::Missing => "not found",
            Outcome::Mismatch => "found but not as specified",
            Outcome::Present => "found",
            Outcome::Absent => "missing as expected",
        }
    }
}

/// One object's outcome: its name (empty when the template names none) and namespace (empty
/// for a cluster-scoped kind).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub outcome: Outcome,
    pub name: String,
    pub namespace: String,
}

/// The template's message over what it saw of `plural` (e.g. `configmaps`).
pub fn message(plural: &str, seen: &[Seen]) -> String {
    let mut by: BTreeMap<Outcome, (BTreeSet<&str>, BTreeSet<&str>)> = BTreeMap::new();
    for s in seen {
        let (names, namespaces) = by.entry(s.outcome).or_default();
        if !s.name.is_empty() {
            names.insert(&s.name);
        }
        if !s.namespace.is_empty() {
            namespaces.insert(&s.namespace);
        }
    }
    let parts: Vec<String> = by
        .iter()
        .map(|(outcome, (names, namespaces))| {
            let names: Vec<&str> = names.iter().copied().collect();
            let named =
                if names.is_empty() { String::new() } else { format!(" [{}]", names.join(", ")) };
            let namespaces: Vec<&str> = namespaces.iter().copied().collect();
            let place = match namespaces.len() {
                0 => String::new(),
                1 => format!(" in namespace {}", namespaces[0]),
                _ => format!(" in namespaces: {}", namespaces.join(", ")),
            };
            format!("{plural}{named} {}{place}", outcome.text())
        })
        .collect();
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(outcome: Outcome, name: &str, namespace: &str) -> Seen {
        Seen { outcome, name: name.into(), namespace: namespace.into() }
    }

    #[test]
    fn messages_read_as_ocm_writes_them() {
        let m = message("configmaps", &[seen(Outcome::Matches, "x", "default")]);
        assert_eq!(m, "configmaps [x] found as specified in namespace default");
        let m = message(
            "configmaps",
            &[seen(Outcome::Missing, "b", "n2"), seen(Outcome::Missing, "a", "n1")],
        );
        assert_eq!(m, "configmaps [a, b] not found in namespaces: n1, n2");
        let m = message(
            "namespaces",
            &[seen(Outcome::Created, "t", ""), seen(Outcome::Matches, "u", "")],
        );
        assert_eq!(m, "namespaces [u] found as specified; namespaces [t] was created successfully");
    }
}
