//! The `mwrs` mode: ManifestWorkReplicaSet rollouts over the simulated fleet.
//!
//! The fleet is `fleet.rs`'s: the joined clusters, each with a simulated work agent, and a
//! Placement deciding them all (PlacementDecisions of 100 clusters).
//!
//! The scenarios, in the order given by `--scenarios`:
//! - `all`: a set of one ConfigMap (rendered per cluster) with `All` and `RollbackAll`: from its
//!   create until every cluster's work exists, until the works' status says every one is
//!   `Applied` at its generation, and until the set's status says so (`PlacementRolledOut`
//!   True/Complete, summary applied = clusters); the hub's RSS before and after, per work.
//! - `rollback` (after `all`, on its set): a template change the agents refuse (`Applied`
//!   False); until the set records the failure (`abortedTime`), and until every work is back at
//!   the previous revision and `Applied` there.
//! - `progressive`: a set with `Progressive` at `maxConcurrency` 10 %, no `minSuccessTime`: the
//!   same times as `all`.
//!
//! Each set is deleted after its scenarios; the time until its works are gone is printed too.

use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, DynamicObject, Patch};
use kube::api::{PatchParams, PostParams};
use ocm_agent::state::DataDir;
use serde_json::{Value, json};

use super::fleet::{self, NS, PLACEMENT, WITHIN};
use super::tracker::{Milestone, SetSeen, Tracker, sets_resource};
use super::{Hub, hub_usage, work_agent};

/// The mode's figures for one scenario.
struct Row {
    scenario: String,
    exist: Duration,
    applied: Duration,
    status: Duration,
    cpu: f64,
    rss: Option<(u64, u64)>,
    deleted: Option<Duration>,
}

/// Runs the fleet set-up and the scenarios over the agents of `dirs`.
pub(super) async fn run(
    hub: &Hub,
    client: &kube::Client,
    ca: &str,
    dirs: &[DataDir],
    pid: u32,
    wave: usize,
    scenarios: &[String],
) -> anyhow::Result<()> {
    let n = dirs.len();
    fleet::prepare(hub, client, ca, dirs, wave).await?;
    let mut rows: Vec<Row> = Vec::new();
    let mut rollback = None;
    // The set still standing: `rollback` needs `all`'s; any other scenario starts without one.
    let mut left: Option<&str> = None;
    for s in scenarios {
        if s != "rollback" {
            if let Some(set) = left.take() {
                finish(client, pid, n, &mut rows, set).await?;
            }
        }
        match s.as_str() {
            "all" => {
                let all = json!({"type": "All", "failureStrategy": "RollbackAll"});
                rows.push(roll_out(client, pid, n, "all", all, true).await?);
                left = Some("all");
            }
            "rollback" => {
                anyhow::ensure!(left == Some("all"), "rollback runs on the set `all` makes");
                rollback = Some(roll_back(client, pid, n).await?);
            }
            "progressive" => {
                let p = json!({"type": "Progressive", "progressive": {"maxConcurrency": "10%"}});
                rows.push(roll_out(client, pid, n, "progressive", p, false).await?);
                left = Some("progressive");
            }
            other => anyhow::bail!("--scenarios: {other:?} is not all, rollback or progressive"),
        }
    }
    if let Some(set) = left {
        finish(client, pid, n, &mut rows, set).await?;
    }
    print(n, &rows, rollback.as_ref());
    Ok(())
}

/// Deletes the set `set` and notes the time on its row.
async fn finish(
    client: &kube::Client,
    pid: u32,
    n: usize,
    rows: &mut [Row],
    set: &str,
) -> anyhow::Result<()> {
    let deleted = delete(client, pid, n, set).await?;
    if let Some(row) = rows.iter_mut().rev().find(|r| r.scenario == set) {
        row.deleted = Some(deleted);
    }
    Ok(())
}

/// The one ConfigMap of the sets' template, rendered per cluster; refused by the simulated
/// agents when `fail`.
fn configmap(v: &str, fail: bool) -> Value {
    let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "fleet-sim", "namespace": "default"},
        "data": {"v": v, "cluster": "{{ .clusterName }}"}});
    if fail {
        cm["metadata"]["annotations"] = json!({work_agent::FAIL: "true"});
    }
    cm
}

fn sets(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), NS, &sets_resource())
}

/// Whether the set's status says every cluster runs `revision` and is applied.
fn complete(s: &SetSeen, revision: &str, n: usize) -> bool {
    s.update_revision == revision
        && s.rolled_out == ("True".to_owned(), "Complete".to_owned())
        && s.applied == n as i64
}

/// Creates the set `name` with `strategy` and times it until complete; with `measure_rss`, the
/// hub's RSS before the create and once complete.
async fn roll_out(
    client: &kube::Client,
    pid: u32,
    n: usize,
    name: &str,
    strategy: Value,
    measure_rss: bool,
) -> anyhow::Result<Row> {
    let tracker = Tracker::start(client, NS, name, n, pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (cpu0, rss0) = hub_usage(pid)?;
    let set = json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"placementRefs": [{"name": PLACEMENT, "rolloutStrategy": strategy}],
                 "manifestWorkTemplate": {"workload": {"manifests": [configmap("1", false)]}}},
    });
    let t0 = Instant::now();
    sets(client).create(&PostParams::default(), &serde_json::from_value(set)?).await?;
    let (_, s) = tracker
        .set_status("an update revision", t0, WITHIN, |s| !s.update_revision.is_empty())
        .await?;
    let rev = s.update_revision;
    let exist = tracker.reached(&Milestone::AllExist, t0, WITHIN).await?;
    let applied = tracker.reached(&Milestone::AllApplied(rev.clone()), t0, WITHIN).await?;
    let (status, _) = tracker.set_status("complete", t0, WITHIN, |s| complete(s, &rev, n)).await?;
    let (cpu1, _) = hub_usage(pid)?;
    let rss = if measure_rss {
        tokio::time::sleep(Duration::from_secs(3)).await;
        Some((rss0, hub_usage(pid)?.1))
    } else {
        None
    };
    Ok(Row {
        scenario: name.to_owned(),
        exist: exist - t0,
        applied: applied - t0,
        status: status - t0,
        cpu: cpu1 - cpu0,
        rss,
        deleted: None,
    })
}

/// The rollback scenario's figures.
struct Rollback {
    aborted: Duration,
    back: Duration,
    back_applied: Duration,
    failed_seen: usize,
    cpu: f64,
}

/// Changes the template of the set `all` to one the agents refuse; times the rollback.
async fn roll_back(client: &kube::Client, pid: u32, n: usize) -> anyhow::Result<Rollback> {
    let tracker = Tracker::start(client, NS, "all", n, pid);
    let since = Instant::now();
    let (_, good) =
        tracker.set_status("the set", since, WITHIN, |s| !s.current_revision.is_empty()).await?;
    let good = good.current_revision;
    // The works' watch has listed them all before the change.
    tracker.reached(&Milestone::AllApplied(good.clone()), since, WITHIN).await?;
    let (cpu0, _) = hub_usage(pid)?;
    let patch = json!({"spec": {"manifestWorkTemplate": {"workload": {"manifests": [configmap("2", true)]}}}});
    let t0 = Instant::now();
    sets(client).patch("all", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let (aborted, _) = tracker
        .set_status("the rollout aborted", t0, WITHIN, |s| s.update_revision != good && s.aborted)
        .await?;
    let failed_seen = tracker.failed();
    let back = tracker.reached(&Milestone::AllAt(good.clone()), t0, WITHIN).await?;
    let back_applied = tracker.reached(&Milestone::AllApplied(good), t0, WITHIN).await?;
    let (cpu1, _) = hub_usage(pid)?;
    Ok(Rollback {
        aborted: aborted - t0,
        back: back - t0,
        back_applied: back_applied - t0,
        failed_seen,
        cpu: cpu1 - cpu0,
    })
}

/// Deletes the set `name` (background cascade) and times it until its works are gone.
async fn delete(client: &kube::Client, pid: u32, n: usize, name: &str) -> anyhow::Result<Duration> {
    let tracker = Tracker::start(client, NS, name, n, pid);
    // The works' watch has listed them all before the delete.
    tracker.reached(&Milestone::AllExist, Instant::now(), WITHIN).await?;
    let t0 = Instant::now();
    sets(client).delete(name, &DeleteParams::default()).await?;
    let gone = tracker.reached(&Milestone::NoneLeft, t0, WITHIN).await?;
    Ok(gone - t0)
}

fn print(n: usize, rows: &[Row], rollback: Option<&Rollback>) {
    let s = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    println!(
        "| clusters | set | all works exist | all Applied (works' status) | set status Complete | hub CPU s | hub RSS before MiB | after MiB | per work KiB | set deleted → works gone |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let (before, after, per) = match r.rss {
            Some((b, a)) => (
                format!("{:.0}", b as f64 / 1024.0),
                format!("{:.0}", a as f64 / 1024.0),
                format!("{:.1}", a.saturating_sub(b) as f64 / n as f64),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "| {n} | {} | {} | {} | {} | {:.1} | {before} | {after} | {per} | {} |",
            r.scenario,
            s(r.exist),
            s(r.applied),
            s(r.status),
            r.cpu,
            r.deleted.map_or("-".into(), s)
        );
    }
    if let Some(r) = rollback {
        println!();
        println!(
            "| clusters | change → rollout aborted | → every work back at the previous revision | → and Applied there | works seen failed at the abort | hub CPU s |"
        );
        println!("|---:|---:|---:|---:|---:|---:|");
        println!(
            "| {n} | {} | {} | {} | {} | {:.1} |",
            s(r.aborted),
            s(r.back),
            s(r.back_applied),
            r.failed_seen,
            r.cpu
        );
    }
}
