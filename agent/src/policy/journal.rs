//! The policy journal `policies.json` in the data dir: the replicated policies the hub last
//! listed (so the agent keeps evaluating and enforcing them while the hub is away, across its
//! own restarts) and, per template, the objects it manages with whether it created them (what
//! `pruneObjectBehavior` removes when the hub takes the policy away).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use ocm_proto::api::policy::v1::RelatedObject;

use crate::cluster::Applied;
use crate::error::AgentError;
use crate::state::DataDir;

/// The journal's file.
const FILE: &str = "policies.json";

/// One object a template manages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Managed {
    pub(super) object: Applied,
    /// Whether the policy created it (sticky: once created by the policy, always so).
    pub(super) created: bool,
}

/// What the journal holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Journal {
    /// The replicated policies, as the hub last listed them.
    pub(super) policies: Vec<Value>,
    /// Per `<replica>/<template>`, the objects it manages.
    pub(super) managed: BTreeMap<String, Vec<Managed>>,
}

impl Journal {
    /// The journal of `dir` (empty when there is none or it does not parse).
    pub(super) fn load(dir: &DataDir) -> Journal {
        match dir.read(FILE) {
            Ok(Some(text)) => serde_json::from_str(&text).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "the policy journal does not parse; starting empty");
                Journal::default()
            }),
            Ok(None) => Journal::default(),
            Err(e) => {
                tracing::warn!(error = %e, "the policy journal cannot be read; starting empty");
                Journal::default()
            }
        }
    }

    /// Writes it (atomically; private, since templates may carry Secrets).
    pub(super) async fn save(&self, dir: &DataDir) -> Result<(), AgentError> {
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        dir.write_async(FILE, bytes, true).await
    }

    /// Records what a template manages now: `seen` (existing objects) and `created` (made by
    /// this evaluation); an object created earlier stays marked created while it exists.
    pub(super) fn record(&mut self, key: &str, seen: Vec<Applied>, created: &[Applied]) {
        let before = self.managed.remove(key).unwrap_or_default();
        let was_created = |a: &Applied| {
            created.iter().any(|c| same(c, a))
                || before.iter().any(|m| m.created && same(&m.object, a))
        };
        let now: Vec<Managed> = seen
            .into_iter()
            .map(|object| Managed { created: was_created(&object), object })
            .collect();
        if !now.is_empty() {
            self.managed.insert(key.to_owned(), now);
        }
    }
}

impl Journal {
    /// Marks the related objects of template `key` the policy created (by uid), as OCM's
    /// `createdByPolicy` stays true while the object lives.
    pub(super) fn mark_created(&self, key: &str, related: &mut [RelatedObject]) {
        let created: Vec<&str> = self
            .managed
            .get(key)
            .into_iter()
            .flatten()
            .filter(|m| m.created)
            .filter_map(|m| m.object.uid.as_deref())
            .collect();
        for r in related {
            if let Some(p) = r.properties.as_mut() {
                if p.uid.as_deref().is_some_and(|u| created.contains(&u)) {
                    p.created_by_policy = Some(true);
                }
            }
        }
    }
}

/// Whether two records name the same object (and, where both know it, the same uid).
fn same(a: &Applied, b: &Applied) -> bool {
    a.group == b.group
        && a.resource == b.resource
        && a.namespace == b.namespace
        && a.name == b.name
        && (a.uid.is_none() || b.uid.is_none() || a.uid == b.uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(name: &str, uid: &str) -> Applied {
        Applied {
            group: None,
            version: "v1".into(),
            resource: "configmaps".into(),
            namespace: Some("default".into()),
            name: name.into(),
            uid: Some(uid.into()),
        }
    }

    #[test]
    fn created_objects_stay_created_while_they_exist() {
        let mut j = Journal::default();
        j.record("p/t", vec![cm("a", "1"), cm("b", "2")], &[cm("a", "1")]);
        j.record("p/t", vec![cm("a", "1"), cm("b", "2")], &[]);
        let m = &j.managed["p/t"];
        assert!(m[0].created && !m[1].created);
        // Recreated by someone else under a new uid: not the policy's any more.
        j.record("p/t", vec![cm("a", "9")], &[]);
        assert!(!j.managed["p/t"][0].created);
    }
}
