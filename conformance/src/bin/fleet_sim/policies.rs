//! The `policies` mode: governance across the simulated fleet (`fleet.rs`). Each cluster runs
//! the klusterlet's own policy agent (`ocm_agent::policy`: the gRPC stream, evaluation,
//! enforcement and status) over the simulator's in-memory cluster; 100 policies, each
//! one ConfigurationPolicy template (`musthave` of a ConfigMap, `enforce`), are bound to the
//! fleet's placement. Timed from the binding's create until every root policy has every
//! cluster's row Compliant; the hub's RSS before, after and settled, per replicated policy;
//! the simulator's CPU per agent round (each round evaluates the cluster's 100 templates).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use ocm_agent::grpc::Endpoint;
use ocm_agent::policy::{GrpcPolicies, Hub as PolicyHub, PolicyAgent};
use ocm_agent::state::DataDir;
use ocm_agent::transport::GrpcSource;
use serde_json::{Value, json};

use super::fleet::{self, NS, PLACEMENT, resource, wait_for};
use super::memory::MemoryCluster;
use super::{Hub, hub_usage};

const GROUP: &str = "policy.open-cluster-management.io";
/// Policies bound to the fleet.
const POLICIES: usize = 100;
/// Seconds between one agent's rounds.
const ROUND: Duration = Duration::from_secs(10);
/// How long after the last row is Compliant the settled RSS is read (past the watch cache's
/// 75 s history).
const SETTLE: Duration = Duration::from_secs(80);

/// Starts the policy agent of the cluster whose data dir is `dir`: its stream and its rounds,
/// each round counted in `rounds`.
fn start(endpoint: &Endpoint, dir: &DataDir, rounds: &Arc<AtomicU64>) -> anyhow::Result<()> {
    let cluster = dir.identity()?.context("identity")?.cluster_name;
    let source = GrpcSource {
        endpoint: endpoint.clone(),
        others: Default::default(),
        data_dir: dir.clone(),
        cluster: cluster.clone(),
        healthiness: Duration::from_secs(30),
    };
    let mut agent = PolicyAgent::new(&cluster, Arc::new(MemoryCluster::default()), dir.clone());
    let stream = GrpcPolicies::new(source, agent.journaled());
    tokio::spawn(Arc::clone(&stream).follow());
    let rounds = Arc::clone(rounds);
    tokio::spawn(async move {
        let hub = PolicyHub::Grpc(stream);
        loop {
            agent.round(&hub).await;
            rounds.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(ROUND).await;
        }
    });
    Ok(())
}

/// The i-th policy.
fn policy(i: usize) -> Value {
    json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "Policy",
        "metadata": {"name": format!("policy-{i}"), "namespace": NS},
        "spec": {"disabled": false, "remediationAction": "enforce", "policy-templates": [{
            "objectDefinition": {"apiVersion": "policy.open-cluster-management.io/v1",
                "kind": "ConfigurationPolicy", "metadata": {"name": format!("config-{i}")},
                "spec": {"remediationAction": "inform", "object-templates": [{
                    "complianceType": "musthave",
                    "objectDefinition": {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": format!("policy-{i}"), "namespace": "default"},
                        "data": {"policy": format!("{i}")}}}]}}}]}})
}

/// Whether every root lists `n` clusters, all Compliant.
fn all_compliant(roots: &[DynamicObject], n: usize) -> bool {
    roots.len() == POLICIES
        && roots.iter().all(|r| {
            let rows = r.data.pointer("/status/status").and_then(Value::as_array);
            rows.is_some_and(|rows| {
                rows.len() == n && rows.iter().all(|x| x["compliant"] == "Compliant")
            })
        })
}

/// Runs the fleet set-up and the policies over the agents of `dirs`.
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
    let endpoints: Value =
        serde_json::from_str(&std::fs::read_to_string(hub.dir.path().join("endpoints.json"))?)?;
    let url = endpoints["grpc"].as_str().context("no gRPC endpoint")?.to_owned();
    let endpoint = Endpoint { url, ca_pem: ca.to_owned() };
    let rounds = Arc::new(AtomicU64::new(0));
    for d in dirs {
        start(&endpoint, d, &rounds)?;
    }
    let policies = resource(GROUP, "v1", "Policy", "policies");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &policies);
    for i in 0..POLICIES {
        api.create(&PostParams::default(), &serde_json::from_value(policy(i))?).await?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (cpu0, rss0) = hub_usage(pid)?;
    let (sim0, rounds0) = (own_cpu()?, rounds.load(Ordering::Relaxed));
    let subjects: Vec<Value> = (0..POLICIES)
        .map(|i| json!({"apiGroup": GROUP, "kind": "Policy", "name": format!("policy-{i}")}))
        .collect();
    let binding = json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "PlacementBinding",
        "metadata": {"name": "fleet", "namespace": NS},
        "placementRef": {"apiGroup": "cluster.open-cluster-management.io", "kind": "Placement", "name": PLACEMENT},
        "subjects": subjects});
    let bindings = resource(GROUP, "v1", "PlacementBinding", "placementbindings");
    let t0 = Instant::now();
    Api::<DynamicObject>::namespaced_with(client.clone(), NS, &bindings)
        .create(&PostParams::default(), &serde_json::from_value(binding)?)
        .await?;
    wait_for("every replicated policy Compliant on the hub", || async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok(all_compliant(&api.list(&ListParams::default()).await?.items, n))
    })
    .await?;
    let took = t0.elapsed();
    let (cpu1, _) = hub_usage(pid)?;
    let (sim1, rounds1) = (own_cpu()?, rounds.load(Ordering::Relaxed));
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss1 = hub_usage(pid)?.1;
    tokio::time::sleep(SETTLE).await;
    let rss2 = hub_usage(pid)?.1;
    let replicas = (n * POLICIES) as f64;
    let per_round_ms = (sim1 - sim0) * 1000.0 / (rounds1 - rounds0).max(1) as f64;
    println!(
        "| clusters | policies | replicated | all Compliant on the hub | hub CPU s | hub RSS before MiB | after MiB | per replica KiB | settled MiB | settled per replica KiB | agent rounds | simulator CPU per round ms |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {n} | {POLICIES} | {} | {:.1} s | {:.1} | {:.0} | {:.0} | {:.2} | {:.0} | {:.2} | {} | {:.2} |",
        n * POLICIES,
        took.as_secs_f64(),
        cpu1 - cpu0,
        rss0 as f64 / 1024.0,
        rss1 as f64 / 1024.0,
        rss1.saturating_sub(rss0) as f64 / replicas,
        rss2 as f64 / 1024.0,
        rss2.saturating_sub(rss0) as f64 / replicas,
        rounds1 - rounds0,
        per_round_ms,
    );
    Ok(())
}

/// This process's CPU seconds (user + system).
fn own_cpu() -> anyhow::Result<f64> {
    Ok(hub_usage(std::process::id())?.0)
}
