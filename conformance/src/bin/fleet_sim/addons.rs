//! The `addons` mode: one template add-on installed across the simulated fleet (`fleet.rs`) by
//! the hub's add-on manager. The add-on is an AddOnTemplate of one ConfigMap (rendered per
//! cluster with `{{CLUSTER_NAME}}`) under a ClusterManagementAddOn with a `Placements` install
//! strategy over the fleet's placement; the simulated work agents report the deploy works
//! applied and available, which makes each add-on Available (`WorkApplied`: the template has no
//! workload to probe). Timed from the add-on's create until every ManagedClusterAddOn exists,
//! every deploy work exists, and every add-on is Available; the hub's RSS before and after, per
//! installed add-on, and again once the watch cache's history of the install has expired. The template registers no hub identity: the simulated agents make no
//! add-on CSRs.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, ListParams, PostParams};
use ocm_agent::state::DataDir;
use serde_json::{Value, json};

use super::fleet::{self, NS, PLACEMENT, resource, wait_for};
use super::{Hub, hub_usage};

const ADDON_GROUP: &str = "addon.open-cluster-management.io";
const ADDON: &str = "fleet-sim";
/// How long after the last add-on is Available the settled RSS is read (past the watch
/// cache's 75 s history).
const SETTLE: Duration = Duration::from_secs(80);

/// Runs the fleet set-up and the install over the agents of `dirs`.
pub(super) async fn run(
    hub: &Hub,
    client: &kube::Client,
    ca: &str,
    dirs: &[DataDir],
    pid: u32,
    wave: usize,
) -> anyhow::Result<()> {
    let n = dirs.len();
    fleet::prepare(hub, client, ca, dirs, wave).await?;
    let template = json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "AddOnTemplate",
        "metadata": {"name": "fleet-sim-1"},
        "spec": {"addonName": ADDON, "agentSpec": {"workload": {"manifests": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "fleet-sim-addon", "namespace": "default"},
             "data": {"cluster": "{{CLUSTER_NAME}}"}}]}}},
    });
    let templates = resource(ADDON_GROUP, "v1alpha1", "AddOnTemplate", "addontemplates");
    Api::<DynamicObject>::all_with(client.clone(), &templates)
        .create(&PostParams::default(), &serde_json::from_value(template)?)
        .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (cpu0, rss0) = hub_usage(pid)?;
    let cma = json!({
        "apiVersion": "addon.open-cluster-management.io/v1beta1", "kind": "ClusterManagementAddOn",
        "metadata": {"name": ADDON},
        "spec": {"defaultConfigs": [{"group": ADDON_GROUP, "resource": "addontemplates", "name": "fleet-sim-1"}],
                 "installStrategy": {"type": "Placements", "placements": [{"namespace": NS, "name": PLACEMENT}]}},
    });
    let cmas =
        resource(ADDON_GROUP, "v1beta1", "ClusterManagementAddOn", "clustermanagementaddons");
    let t0 = Instant::now();
    Api::<DynamicObject>::all_with(client.clone(), &cmas)
        .create(&PostParams::default(), &serde_json::from_value(cma)?)
        .await?;
    let mcas = resource(ADDON_GROUP, "v1beta1", "ManagedClusterAddOn", "managedclusteraddons");
    let mca_api: Api<DynamicObject> = Api::all_with(client.clone(), &mcas);
    let works = resource("work.open-cluster-management.io", "v1", "ManifestWork", "manifestworks");
    let work_api: Api<DynamicObject> = Api::all_with(client.clone(), &works);
    let work_lp =
        ListParams::default().labels(&format!("open-cluster-management.io/addon-name={ADDON}"));
    wait_for("every add-on Available", || async {
        let list = mca_api.list(&ListParams::default()).await?;
        let ours: Vec<&DynamicObject> =
            list.items.iter().filter(|m| m.metadata.name.as_deref() == Some(ADDON)).collect();
        Ok(ours.len() == n && ours.iter().all(|m| is_available(&m.data)))
    })
    .await?;
    let available = Some(t0.elapsed());
    // Every add-on and work exists once all are Available: their creation times give the
    // earlier milestones.
    let list = mca_api.list(&ListParams::default()).await?;
    let exist = latest_creation(&list.items, t0);
    let wlist = work_api.list(&work_lp).await?;
    anyhow::ensure!(wlist.items.len() == n, "{} deploy works for {n} clusters", wlist.items.len());
    let deployed = latest_creation(&wlist.items, t0);
    let (cpu1, _) = hub_usage(pid)?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss1 = hub_usage(pid)?.1;
    // The watch cache keeps each kind's recent events for 75 s: past that, what stays is the
    // add-ons themselves.
    tokio::time::sleep(SETTLE).await;
    let rss2 = hub_usage(pid)?.1;
    let s = |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()));
    println!(
        "| clusters | all ManagedClusterAddOns exist | all deploy works exist | all Available | hub CPU s | hub RSS before MiB | after MiB | per add-on KiB | settled MiB | settled per add-on KiB |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {n} | {} | {} | {} | {:.1} | {:.0} | {:.0} | {:.1} | {:.0} | {:.1} |",
        s(exist),
        s(deployed),
        s(available),
        cpu1 - cpu0,
        rss0 as f64 / 1024.0,
        rss1 as f64 / 1024.0,
        rss1.saturating_sub(rss0) as f64 / n as f64,
        rss2 as f64 / 1024.0,
        rss2.saturating_sub(rss0) as f64 / n as f64,
    );
    Ok(())
}

/// Whether an add-on's `Available` is True.
fn is_available(mca: &Value) -> bool {
    mca.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Available" && c["status"] == "True"))
}

/// How long after `t0` the last of `objects` was created (second resolution, as the API
/// stamps creations), or `None` if one was created before it.
fn latest_creation(objects: &[DynamicObject], t0: Instant) -> Option<Duration> {
    let started = std::time::SystemTime::now().checked_sub(t0.elapsed())?;
    let started = started.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64();
    let latest = objects
        .iter()
        .filter_map(|o| o.metadata.creation_timestamp.as_ref())
        .map(|t| t.0.as_second() as f64)
        .fold(f64::MIN, f64::max);
    (latest >= started.floor()).then(|| Duration::from_secs_f64((latest - started).max(0.0)))
}
