//! Atomic placement decisions end to end: a placement over 300 clusters, its decisions in
//! slices of 100, reshuffled 1,000 times (a few clusters early in name order leave and come
//! back, so every later cluster moves between slices) while a kube watch over HTTPS follows
//! its PlacementDecisions. The checker groups the watch's events by resourceVersion and looks
//! at the state after each whole revision: no cluster that stays selected throughout is ever
//! missing from every slice. The same checker run against the previous write path (each slice
//! written on its own, then the status, replayed by a client through the REST API) must catch
//! a cluster vanishing, so the check is known to bite.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use futures::StreamExt as _;
use ocm_conformance::hub::{Backend, TestHub};
use ocm_conformance::kubectl::{MCL, cluster, create, merge_patch, stored};
use serde_json::{Value, json};
use tokio::sync::oneshot;

const GROUP: &str = "/apis/cluster.open-cluster-management.io/v1beta1";
const UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";
const CLUSTERS: usize = 300;
/// The clusters that leave and come back: the first in name order, so each move shifts every
/// later cluster by one place across the slices of 100.
const POOL: usize = 10;
const RESHUFFLES: usize = 1_000;
/// Reshuffles of the previous write path: enough for it to show a vanish many times over.
const LEGACY_RESHUFFLES: usize = 100;
/// How long one reshuffle may take to be decided, and the watch to deliver the last state.
const WAIT: Duration = Duration::from_secs(30);

fn name(i: usize) -> String {
    format!("cluster-{i:03}")
}

fn decisions(ns: &str) -> String {
    format!("{GROUP}/namespaces/{ns}/placementdecisions")
}

/// The clusters a set of PlacementDecisions (by name) holds, all slices together.
fn union(slices: &BTreeMap<String, Vec<String>>) -> BTreeSet<String> {
    slices.values().flatten().cloned().collect()
}

/// A PlacementDecision's name and clusters.
fn slice_of(object: &Value) -> (String, Vec<String>) {
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let clusters = object["status"]["decisions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["clusterName"].as_str().map(str::to_owned))
        .collect();
    (name, clusters)
}

/// What the checker saw.
#[derive(Debug, Default)]
struct Report {
    /// Whole revisions applied.
    revisions: usize,
    /// Revisions that wrote more than one decision (one resourceVersion on several objects).
    shared: usize,
    /// Revisions after which a stable cluster was in no slice: (resourceVersion, cluster).
    vanished: Vec<(String, String)>,
}

/// The checker: the namespace's PlacementDecisions as the watch has shown them, revision by
/// revision, and every stable cluster required in some slice once all of them first are.
struct Checker {
    stable: BTreeSet<String>,
    slices: BTreeMap<String, Vec<String>>,
    /// The revision being read: its resourceVersion and events (type, object).
    open: Option<(String, Vec<(String, Value)>)>,
    armed: bool,
    report: Report,
}

impl Checker {
    /// Takes one watch event; a new resourceVersion (or a bookmark) closes the revision
    /// before it.
    fn event(&mut self, line: &[u8]) -> anyhow::Result<()> {
        let ev: Value = serde_json::from_slice(line).context("a watch line")?;
        let kind = ev["type"].as_str().unwrap_or_default().to_owned();
        let rv = ev["object"]["metadata"]["resourceVersion"].as_str().unwrap_or_default();
        match kind.as_str() {
            "ERROR" => bail!("the watch ended with an error: {ev}"),
            "BOOKMARK" => self.close(),
            _ => {
                if self.open.as_ref().is_some_and(|(open, _)| open != rv) {
                    self.close();
                }
                let open = self.open.get_or_insert_with(|| (rv.to_owned(), Vec::new()));
                open.1.push((kind, ev["object"].clone()));
            }
        }
        Ok(())
    }

    /// The state once the revision being read is applied.
    fn applied(&self) -> BTreeMap<String, Vec<String>> {
        let mut slices = self.slices.clone();
        for (kind, object) in self.open.iter().flat_map(|(_, events)| events) {
            let (name, clusters) = slice_of(object);
            if kind == "DELETED" {
                slices.remove(&name);
            } else {
                slices.insert(name, clusters);
            }
        }
        slices
    }

    /// Applies the revision being read as a whole and checks the state after it.
    fn close(&mut self) {
        let Some((rv, events)) = self.open.as_ref() else { return };
        let (rv, many) = (rv.clone(), events.len() > 1);
        self.slices = self.applied();
        self.open = None;
        self.report.revisions += 1;
        self.report.shared += usize::from(many);
        let selected = union(&self.slices);
        if !self.armed {
            self.armed = self.stable.is_subset(&selected);
            return;
        }
        for c in self.stable.difference(&selected) {
            self.report.vanished.push((rv.clone(), c.clone()));
        }
    }
}

/// Follows the PlacementDecisions of `ns` with a kube watch from a list, checking each
/// revision, until told the final selection and the watch has shown it; says on `watching` once
/// its watch is open.
async fn check(
    hub: &TestHub,
    http: reqwest::Client,
    ns: &str,
    stable: BTreeSet<String>,
    watching: oneshot::Sender<()>,
    finish: oneshot::Receiver<BTreeSet<String>>,
) -> anyhow::Result<Report> {
    let path = decisions(ns);
    let list = stored(hub, &http, &path).await?;
    let rv = list["metadata"]["resourceVersion"].as_str().context("list resourceVersion")?;
    let slices = list["items"].as_array().into_iter().flatten().map(slice_of).collect();
    let url = format!("{}{path}?watch=true&resourceVersion={rv}&timeoutSeconds=3600", hub.url);
    let resp = http.get(url).send().await?;
    ensure!(resp.status().as_u16() == 200, "watch {path}: {}", resp.status());
    let _ = watching.send(());
    let mut body = resp.bytes_stream();
    let mut checker =
        Checker { stable, slices, open: None, armed: false, report: Report::default() };
    let mut finish = finish;
    let mut last: Option<BTreeSet<String>> = None;
    let mut buf: Vec<u8> = Vec::new();
    loop {
        if last.as_ref().is_some_and(|want| union(&checker.applied()) == *want) {
            checker.close();
            return Ok(checker.report);
        }
        tokio::select! {
            chunk = body.next() => {
                let chunk = chunk.context("the watch ended")??;
                buf.extend_from_slice(&chunk);
                while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=end).collect();
                    checker.event(&line[..end])?;
                }
            }
            want = &mut finish, if last.is_none() => last = Some(want?),
        }
    }
}

/// The clusters selected with `excluded` left out, in name order.
fn selection(excluded: &BTreeSet<usize>) -> BTreeSet<String> {
    (0..CLUSTERS).filter(|i| !excluded.contains(i)).map(name).collect()
}

/// The placement's spec predicate: every cluster but the `excluded`.
fn predicates(excluded: &BTreeSet<usize>) -> Value {
    let mut values: Vec<String> = excluded.iter().map(|i| format!("{i:03}")).collect();
    if values.is_empty() {
        values.push("none".into());
    }
    json!([{"requiredClusterSelector": {"labelSelector": {"matchExpressions": [
        {"key": "n", "operator": "NotIn", "values": values}]}}}])
}

/// Toggles the pool cluster of step `i`: it leaves, or comes back.
fn toggle(excluded: &mut BTreeSet<usize>, i: usize) {
    let c = i % POOL;
    if !excluded.remove(&c) {
        excluded.insert(c);
    }
}

/// Waits until the decisions of `ns` hold exactly `want`.
async fn until_decided(
    hub: &TestHub,
    http: &reqwest::Client,
    ns: &str,
    want: &BTreeSet<String>,
) -> anyhow::Result<()> {
    let until = tokio::time::Instant::now() + WAIT;
    loop {
        let list = stored(hub, http, &decisions(ns)).await?;
        let slices = list["items"].as_array().into_iter().flatten().map(slice_of).collect();
        if union(&slices) == *want {
            return Ok(());
        }
        ensure!(tokio::time::Instant::now() < until, "{ns}: {want:?} not decided within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn namespace(hub: &TestHub, http: &reqwest::Client, ns: &str) -> anyhow::Result<()> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    create(hub, http, "/api/v1/namespaces", body).await?;
    Ok(())
}

/// The previous write path, as a client through the REST API: each slice of `selected`
/// written on its own, in order, then the placement's status.
async fn legacy_write(
    hub: &TestHub,
    http: &reqwest::Client,
    selected: &BTreeSet<String>,
) -> anyhow::Result<()> {
    let names: Vec<&String> = selected.iter().collect();
    for (i, chunk) in names.chunks(100).enumerate() {
        let slice: Vec<Value> =
            chunk.iter().map(|c| json!({"clusterName": c, "reason": ""})).collect();
        let path = format!("{}/legacy-decision-{}/status", decisions("legacy"), i + 1);
        merge_patch(hub, http, &path, json!({"status": {"decisions": slice}})).await?;
    }
    let status = json!({"status": {"numberOfSelectedClusters": selected.len()}});
    let path = format!("{GROUP}/namespaces/legacy/placements/legacy/status");
    merge_patch(hub, http, &path, status).await?;
    Ok(())
}

/// A placement `legacy` the scheduler leaves alone, with three decision slices the test
/// writes itself.
async fn legacy_setup(hub: &TestHub, http: &reqwest::Client) -> anyhow::Result<()> {
    namespace(hub, http, "legacy").await?;
    let placement = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "legacy", "namespace": "legacy", "annotations": {
            "cluster.open-cluster-management.io/experimental-scheduling-disable": "true"}},
        "spec": {},
    });
    create(hub, http, &format!("{GROUP}/namespaces/legacy/placements"), placement).await?;
    for i in 1..=CLUSTERS / 100 {
        let decision = json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta1",
            "kind": "PlacementDecision",
            "metadata": {"name": format!("legacy-decision-{i}"), "namespace": "legacy",
                "labels": {"cluster.open-cluster-management.io/placement": "legacy"}},
        });
        create(hub, http, &decisions("legacy"), decision).await?;
    }
    legacy_write(hub, http, &selection(&BTreeSet::new())).await
}

/// The hub's placement `spread` over every cluster but the excluded, bound to `global`.
async fn spread_setup(hub: &TestHub, http: &reqwest::Client) -> anyhow::Result<()> {
    namespace(hub, http, "apps").await?;
    let binding = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSetBinding",
        "metadata": {"name": "global", "namespace": "apps"},
        "spec": {"clusterSet": "global"},
    });
    let bindings = "/apis/cluster.open-cluster-management.io/v1beta2/namespaces/apps/managedclustersetbindings";
    create(hub, http, bindings, binding).await?;
    let placement = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "spread", "namespace": "apps"},
        "spec": {
            "tolerations": [{"key": UNREACHABLE, "operator": "Exists"}],
            "predicates": predicates(&BTreeSet::new()),
        },
    });
    create(hub, http, &format!("{GROUP}/namespaces/apps/placements"), placement).await?;
    Ok(())
}

/// Runs `steps` reshuffles with `write` deciding each, checked by a watch of `ns`; what the
/// checker saw.
async fn reshuffled<F, Fut>(
    hub: &TestHub,
    ns: &str,
    steps: usize,
    mut write: F,
) -> anyhow::Result<Report>
where
    F: FnMut(BTreeSet<usize>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let http = hub.http()?;
    let stable: BTreeSet<String> = (POOL..CLUSTERS).map(name).collect();
    let (finish, finished) = oneshot::channel();
    let (watching_tx, watching) = oneshot::channel();
    let checker = check(hub, hub.http()?, ns, stable, watching_tx, finished);
    let driver = async {
        // Every reshuffle's revision comes after the checker's list and within its watch.
        watching.await.context("the checker did not start watching")?;
        let mut excluded = BTreeSet::new();
        for i in 0..steps {
            toggle(&mut excluded, i);
            write(excluded.clone()).await?;
            until_decided(hub, &http, ns, &selection(&excluded)).await?;
        }
        let _ = finish.send(selection(&excluded));
        anyhow::Ok(())
    };
    let (report, driven) =
        tokio::join!(tokio::time::timeout(Duration::from_secs(900), checker), driver);
    driven?;
    report.context("the checker did not see the last state")?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_still_selected_cluster_vanishes_while_decisions_reshuffle() -> anyhow::Result<()> {
    let hub = TestHub::start_with_controllers(Backend::Memory).await?;
    let http = hub.http()?;
    for i in 0..CLUSTERS {
        create(&hub, &http, MCL, cluster(&name(i), json!({"n": format!("{i:03}")}))).await?;
    }

    // The negative control: the previous write path, a slice at a time, vanishes clusters.
    legacy_setup(&hub, &http).await?;
    let legacy = reshuffled(&hub, "legacy", LEGACY_RESHUFFLES, |excluded| {
        let (hub, http) = (&hub, &http);
        async move { legacy_write(hub, http, &selection(&excluded)).await }
    })
    .await?;
    ensure!(legacy.revisions >= LEGACY_RESHUFFLES, "{legacy:?}");
    ensure!(
        !legacy.vanished.is_empty(),
        "the checker missed the previous path's vanish: {legacy:?}"
    );

    // The hub's scheduler writes a pass as one commit: nothing vanishes.
    spread_setup(&hub, &http).await?;
    until_decided(&hub, &http, "apps", &selection(&BTreeSet::new())).await?;
    let spread = reshuffled(&hub, "apps", RESHUFFLES, |excluded| {
        let (hub, http) = (&hub, &http);
        async move {
            let patch = json!({"spec": {"predicates": predicates(&excluded)}});
            merge_patch(hub, http, &format!("{GROUP}/namespaces/apps/placements/spread"), patch)
                .await?;
            Ok(())
        }
    })
    .await?;
    ensure!(
        spread.vanished.is_empty(),
        "stable clusters vanished: {:?}",
        &spread.vanished[..spread.vanished.len().min(20)]
    );
    // Each reshuffle moved clusters across every slice: one revision writing several of them.
    ensure!(spread.shared >= RESHUFFLES, "{spread:?}");
    eprintln!(
        "previous path: {} revisions, {} vanishes; one commit per pass: {} revisions, {} of \
         several decisions, {} vanishes",
        legacy.revisions,
        legacy.vanished.len(),
        spread.revisions,
        spread.shared,
        spread.vanished.len()
    );
    let decided = stored(&hub, &http, &decisions("apps")).await?;
    let reasons: BTreeSet<&str> = decided["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|d| d["status"]["decisions"].as_array().into_iter().flatten())
        .filter_map(|d| d["reason"].as_str())
        .collect();
    ensure!(reasons == BTreeSet::from(["Selected: feasible"]), "{reasons:?}");
    hub.stop().await;
    Ok(())
}
