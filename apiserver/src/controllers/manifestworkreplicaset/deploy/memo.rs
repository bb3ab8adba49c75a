//! What the deploy step remembers of a set's clusters between runs: per cluster, what the last
//! run read (the cluster's values, whether the work renders, and of the stored work its
//! revision, whether it is the desired one, its rollout status and conditions), with the
//! cluster's and the work's revision and the template it was rendered from. A run of a large
//! set is woken by every work's status report; with this, a cluster whose ManagedCluster and
//! work are unchanged costs a lookup instead of a render and two parses, and a work whose
//! status alone changed costs its own parse. Entries of another template are dropped, and an
//! entry is used only for the revisions it was read at (the work's spec only while its uid,
//! generation and revision label stay: a spec change moves the generation), so what a run
//! concludes is what it would conclude without them.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use k8s_openapi::jiff::Timestamp;

use ocm_proto::api::work::LABEL_CONTROLLER_HASH;
use serde_json::Value;

use crate::controllers::rollout::Status;
use crate::machinery::object;
use crate::machinery::template::{ClusterValues, RenderError};
use crate::store::cache::CachedObject;

/// What one run read of one cluster.
#[derive(Clone, Debug)]
pub(in crate::controllers::manifestworkreplicaset) struct Facts {
    /// The ManagedCluster's revision.
    pub cluster_rev: u64,
    /// Its values at that revision.
    pub values: ClusterValues,
    /// The stored work's revision (`None`: no work).
    pub work_rev: Option<u64>,
    /// Whether the cluster's work renders.
    pub rendered: Result<(), RenderError>,
    /// The stored work, when there is one and the cluster's work renders.
    pub work: Option<WorkFacts>,
}

/// What a run reads of a stored work.
#[derive(Clone, Debug)]
pub(in crate::controllers::manifestworkreplicaset) struct WorkFacts {
    /// Its uid and generation: while they stay, so does its spec.
    pub uid: Box<str>,
    pub generation: i64,
    /// Its revision label.
    pub revision: String,
    /// Whether it is the desired work (spec and revision).
    pub matches: bool,
    pub status: Status,
    pub since: Option<Timestamp>,
    /// Which of `Applied`, `Available`, `Progressing`, `Degraded` are True.
    pub applied: bool,
    pub available: bool,
    pub progressing: bool,
    pub degraded: bool,
}

impl WorkFacts {
    /// Whether `work` (`stored`, parsed) has the spec and revision these facts were read at.
    pub(super) fn same_spec(&self, stored: &CachedObject, work: &Value) -> bool {
        self.uid == stored.uid
            && self.generation == object::generation(work)
            && stored.label(LABEL_CONTROLLER_HASH).unwrap_or_default() == self.revision
    }
}

/// One placement's clusters, read from one template.
struct Entry {
    template: Vec<u8>,
    clusters: HashMap<String, Facts>,
}

/// The facts of every set's placements, by the set's owner label and the placement.
#[derive(Default)]
pub(in crate::controllers::manifestworkreplicaset) struct Memo {
    entries: Mutex<HashMap<(String, String), Entry>>,
}

impl Memo {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes what a placement's last run read, when it read it from `template` (the run
    /// returns what it reads with [`Memo::keep`]; one set never runs twice at once).
    pub(super) fn take(
        &self,
        owner: &str,
        placement: &str,
        template: &[u8],
    ) -> HashMap<String, Facts> {
        let key = (owner.to_owned(), placement.to_owned());
        match self.lock().remove(&key) {
            Some(e) if e.template == template => e.clusters,
            _ => HashMap::new(),
        }
    }

    /// Keeps what a placement's run read.
    pub(super) fn keep(
        &self,
        owner: &str,
        placement: &str,
        template: Vec<u8>,
        clusters: HashMap<String, Facts>,
    ) {
        let key = (owner.to_owned(), placement.to_owned());
        self.lock().insert(key, Entry { template, clusters });
    }

    /// Forgets the sets `exists` denies, and of `owner`'s the placements it no longer lists.
    pub(super) fn retain(&self, owner: &str, placements: &[&str], exists: impl Fn(&str) -> bool) {
        self.lock().retain(
            |(o, p), _| {
                if o == owner { placements.contains(&p.as_str()) } else { exists(o) }
            },
        );
    }
}
