//! What the `mwrs` mode sees of a ManifestWorkReplicaSet on the hub, through watches: its works
//! (by the set's label; per revision, how many exist and how many the works' own status says are
//! `Applied` at their generation) and the set's status. Each time a count reaches the fleet's
//! size, or the set's status changes, the moment is logged, so a scenario asks "when, after
//! this instant, did all works reach ...".

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::Value;
use tokio_util::task::AbortOnDropHandle;

/// The works' label naming their set (`<namespace>.<name>`).
pub(super) const OWNER: &str = "work.open-cluster-management.io/manifestworkreplicaset";
/// The works' label naming their revision.
pub(super) const HASH: &str = "work.open-cluster-management.io/controller-hash";

/// A milestone of the works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Milestone {
    /// Every cluster has a work (of any revision).
    AllExist,
    /// Every cluster's work carries this revision.
    AllAt(String),
    /// Every cluster's work carries this revision and says `Applied` True at its generation.
    AllApplied(String),
    /// No work is left.
    NoneLeft,
}

/// What one work shows.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    revision: String,
    applied: bool,
    failed: bool,
}

/// The set's status as a scenario reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct SetSeen {
    pub update_revision: String,
    pub current_revision: String,
    /// `PlacementRolledOut`'s status and reason, at the set's generation.
    pub rolled_out: (String, String),
    /// `Progressing`'s reason.
    pub progressing: String,
    pub aborted: bool,
    pub applied: i64,
    pub total: i64,
}

#[derive(Default)]
struct State {
    works: HashMap<String, Seen>,
    /// Per revision: works that carry it, and of those, `Applied`.
    at: HashMap<String, (usize, usize)>,
    failed: usize,
    log: Vec<(Instant, Milestone)>,
    sets: Vec<(Instant, SetSeen)>,
}

impl State {
    fn count(&mut self, s: &Seen, sign: isize) {
        let e = self.at.entry(s.revision.clone()).or_default();
        e.0 = e.0.saturating_add_signed(sign);
        e.1 = e.1.saturating_add_signed(sign * isize::from(s.applied));
        self.failed = self.failed.saturating_add_signed(sign * isize::from(s.failed));
    }

    /// Records `key` as `now` (`None`: gone) and logs the milestones that became true.
    fn update(&mut self, key: String, now: Option<Seen>, n: usize) {
        let before = self.milestones(n);
        if let Some(old) = self.works.remove(&key) {
            self.count(&old, -1);
        }
        if let Some(new) = now {
            self.count(&new, 1);
            self.works.insert(key, new);
        }
        let t = Instant::now();
        for m in self.milestones(n) {
            if !before.contains(&m) {
                self.log.push((t, m));
            }
        }
    }

    fn milestones(&self, n: usize) -> Vec<Milestone> {
        let mut out = Vec::new();
        if self.works.len() == n {
            out.push(Milestone::AllExist);
        }
        if self.works.is_empty() {
            out.push(Milestone::NoneLeft);
        }
        for (rev, (count, applied)) in &self.at {
            if *count == n {
                out.push(Milestone::AllAt(rev.clone()));
            }
            if *applied == n {
                out.push(Milestone::AllApplied(rev.clone()));
            }
        }
        out
    }
}

/// Follows one set and its works until dropped.
pub(super) struct Tracker {
    state: Arc<Mutex<State>>,
    _works: AbortOnDropHandle<()>,
    _set: AbortOnDropHandle<()>,
    _progress: AbortOnDropHandle<()>,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The ManifestWorkReplicaSet resource for `kube`'s dynamic API.
pub(super) fn sets_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk(
        "work.open-cluster-management.io",
        "v1alpha1",
        "ManifestWorkReplicaSet",
    );
    ApiResource::from_gvk_with_plural(&gvk, "manifestworkreplicasets")
}

impl Tracker {
    /// Follows the set `ns/name` and its works over a fleet of `n` clusters, printing a line of
    /// progress every second to stderr (with the CPU the hub `pid` and this process used).
    pub(super) fn start(
        client: &kube::Client,
        ns: &str,
        name: &str,
        n: usize,
        pid: u32,
    ) -> Tracker {
        let state = Arc::new(Mutex::new(State::default()));
        let works: Api<DynamicObject> =
            Api::all_with(client.clone(), &ocm_agent::transport::works_resource());
        let cfg = watcher::Config::default().labels(&format!("{OWNER}={ns}.{name}"));
        let works = {
            let state = Arc::clone(&state);
            AbortOnDropHandle::new(tokio::spawn(async move {
                let mut s = std::pin::pin!(watcher(works, cfg).default_backoff());
                while let Some(e) = s.next().await {
                    on_work(&state, e, n);
                }
            }))
        };
        let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &sets_resource());
        let cfg = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let set = {
            let state = Arc::clone(&state);
            AbortOnDropHandle::new(tokio::spawn(async move {
                let mut s = std::pin::pin!(watcher(sets, cfg).default_backoff());
                while let Some(e) = s.next().await {
                    if let Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) = e {
                        let seen = set_seen(&o);
                        let mut st = lock(&state);
                        if st.sets.last().is_none_or(|(_, last)| *last != seen) {
                            st.sets.push((Instant::now(), seen));
                        }
                    }
                }
            }))
        };
        let progress = AbortOnDropHandle::new(tokio::spawn(progress(Arc::clone(&state), pid)));
        Tracker { state, _works: works, _set: set, _progress: progress }
    }

    /// When `m` first became true after `since`, waiting up to `within` for it.
    pub(super) async fn reached(
        &self,
        m: &Milestone,
        since: Instant,
        within: Duration,
    ) -> anyhow::Result<Instant> {
        self.wait(within, &format!("{m:?}"), |st| {
            st.log.iter().find(|(t, x)| *t >= since && x == m).map(|(t, _)| *t)
        })
        .await
    }

    /// When the set's status first satisfied `ok` after `since`, waiting up to `within`.
    pub(super) async fn set_status(
        &self,
        what: &str,
        since: Instant,
        within: Duration,
        ok: impl Fn(&SetSeen) -> bool,
    ) -> anyhow::Result<(Instant, SetSeen)> {
        self.wait(within, what, |st| {
            st.sets.iter().find(|(t, s)| *t >= since && ok(s)).map(|(t, s)| (*t, s.clone()))
        })
        .await
    }

    /// Works that currently report `Applied` False.
    pub(super) fn failed(&self) -> usize {
        lock(&self.state).failed
    }

    async fn wait<T>(
        &self,
        within: Duration,
        what: &str,
        found: impl Fn(&State) -> Option<T>,
    ) -> anyhow::Result<T> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(t) = found(&lock(&self.state)) {
                return Ok(t);
            }
            if Instant::now() > deadline {
                let st = lock(&self.state);
                anyhow::bail!(
                    "{what} not reached within {} s: {} works, per revision (count, Applied) {:?}, last set status {:?}",
                    within.as_secs(),
                    st.works.len(),
                    st.at,
                    st.sets.last().map(|(_, s)| s)
                );
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Prints, every second: the time, the works per revision (count, `Applied`), and the CPU the
/// hub and this process used in that second.
async fn progress(state: Arc<Mutex<State>>, hub: u32) {
    let start = Instant::now();
    let cpu = |pid: u32| super::hub_usage(pid).map(|(c, _)| c).unwrap_or(0.0);
    let (mut hub0, mut sim0) = (cpu(hub), cpu(std::process::id()));
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (hub1, sim1) = (cpu(hub), cpu(std::process::id()));
        let at: Vec<String> = {
            let st = lock(&state);
            st.at
                .iter()
                .filter(|(_, (c, _))| *c > 0)
                .map(|(r, (c, a))| format!("{r}: {c}/{a}"))
                .collect()
        };
        eprintln!(
            "{:5.1} s  works (count/Applied) {}  hub {:.2} cores  simulator {:.2} cores",
            start.elapsed().as_secs_f64(),
            at.join(", "),
            hub1 - hub0,
            sim1 - sim0
        );
        (hub0, sim0) = (hub1, sim1);
    }
}

fn on_work(
    state: &Mutex<State>,
    e: Result<watcher::Event<DynamicObject>, watcher::Error>,
    n: usize,
) {
    let key = |o: &DynamicObject| o.metadata.namespace.clone().unwrap_or_default();
    let mut st = lock(state);
    match e {
        Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
            let seen = work_seen(&o);
            st.update(key(&o), Some(seen), n);
        }
        Ok(watcher::Event::Delete(o)) => st.update(key(&o), None, n),
        Ok(watcher::Event::Init) => {
            let keys: Vec<String> = st.works.keys().cloned().collect();
            for k in keys {
                st.update(k, None, n);
            }
        }
        Ok(watcher::Event::InitDone) | Err(_) => {}
    }
}

/// A work's revision and whether its status says `Applied` (True, or False) at its generation.
fn work_seen(o: &DynamicObject) -> Seen {
    let generation = o.metadata.generation.unwrap_or(0);
    let applied = o
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Applied"))
        .filter(|c| c["observedGeneration"].as_i64() == Some(generation))
        .and_then(|c| c["status"].as_str());
    let revision = o.metadata.labels.as_ref().and_then(|l| l.get(HASH)).cloned();
    Seen {
        revision: revision.unwrap_or_default(),
        applied: applied == Some("True"),
        failed: applied == Some("False"),
    }
}

/// The set's status fields a scenario reads.
fn set_seen(o: &DynamicObject) -> SetSeen {
    let status = &o.data["status"];
    let generation = o.metadata.generation.unwrap_or(0);
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let cond = |t: &str| {
        status["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == t))
            .filter(|c| c["observedGeneration"].as_i64() == Some(generation))
            .map(|c| (text(&c["status"]), text(&c["reason"])))
            .unwrap_or_default()
    };
    SetSeen {
        update_revision: text(&status["updateRevision"]),
        current_revision: text(&status["currentRevision"]),
        rolled_out: cond("PlacementRolledOut"),
        progressing: cond("Progressing").1,
        aborted: status["abortedTime"].is_string(),
        applied: status["summary"]["applied"].as_i64().unwrap_or(0),
        total: status["summary"]["total"].as_i64().unwrap_or(0),
    }
}
