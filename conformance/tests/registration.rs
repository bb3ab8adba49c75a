//! Cluster registration end to end (ocm.md §3, §15): a hub, a `--profile cluster` instance per
//! managed cluster and real `klusterlet` processes joining through the printed join command,
//! `ocm-hub accept`, availability from the Lease, an agent killed (Available Unknown, the
//! `unreachable` taint) and restarted without a new join, denial, deletion and cleanup,
//! certificate rotation with short-lived certificates, and forged CSRs that stay pending.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use ocm_apiserver::machinery::scheme::Profile;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::programs;
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;
use tokio::io::AsyncBufReadExt as _;

const MCL: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";
const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const WAIT: Duration = Duration::from_secs(60);

/// A `klusterlet` process, its output collected line by line.
struct Agent {
    child: tokio::process::Child,
    out: Arc<Mutex<Vec<String>>>,
    data_dir: PathBuf,
}

impl Agent {
    fn spawn(args: &[String], data_dir: &Path) -> anyhow::Result<Agent> {
        let mut child = tokio::process::Command::new(programs::klusterlet()?)
            .args(args)
            .env("RUST_LOG", std::env::var("OCM_AGENT_LOG").unwrap_or_else(|_| "warn".into()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let out = Arc::new(Mutex::new(Vec::new()));
        for pipe in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        {
            let out = Arc::clone(&out);
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    out.lock().unwrap().push(line);
                }
            });
        }
        Ok(Agent { child, out, data_dir: data_dir.to_owned() })
    }

    fn output(&self) -> String {
        self.out.lock().unwrap().join("\n")
    }

    async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }
}

/// A managed cluster: a `--profile cluster` instance with Nodes and ClusterClaims.
async fn managed_cluster(
    nodes: &[(&str, &str, &str)],
    claims: &[(&str, &str, bool)],
) -> anyhow::Result<TestHub> {
    let cluster = TestHub::start_with(Backend::Memory, |c| c.profile = Profile::Cluster).await?;
    let http = cluster.http()?;
    for (name, cpu, memory) in nodes {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
        post(&cluster, &http, "/api/v1/nodes", &node).await?;
        // Status goes through its subresource, as a kubelet writes it.
        let status = json!({"status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                                       "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}});
        let resp =
            merge_patch(&cluster, &http, &format!("/api/v1/nodes/{name}/status"), &status).await?;
        ensure!(resp.is_success(), "node status: {resp}");
    }
    for (name, value, spoke_only) in claims {
        let mut claim = json!({"apiVersion": "cluster.open-cluster-management.io/v1alpha1",
            "kind": "ClusterClaim", "metadata": {"name": name}, "spec": {"value": value}});
        if *spoke_only {
            claim["metadata"]["labels"] = json!({"open-cluster-management.io/spoke-only": "true"});
        }
        post(
            &cluster,
            &http,
            "/apis/cluster.open-cluster-management.io/v1alpha1/clusterclaims",
            &claim,
        )
        .await?;
    }
    Ok(cluster)
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_)
}

fn status_of(obj: &Value, type_: &str) -> String {
    condition(obj, type_).and_then(|c| c["status"].as_str()).unwrap_or("").to_owned()
}

fn taints(obj: &Value) -> Vec<String> {
    obj.pointer("/spec/taints")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(|t| t["key"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

async fn post(
    hub: &TestHub,
    http: &reqwest::Client,
    path: &str,
    body: &Value,
) -> anyhow::Result<Value> {
    let (code, out) = hub.call(http, reqwest::Method::POST, path, Some(body), &[]).await?;
    ensure!(code == 201, "POST {path}: {code} {out}");
    Ok(out)
}

/// A merge patch; the status code.
async fn merge_patch(
    hub: &TestHub,
    http: &reqwest::Client,
    path: &str,
    body: &Value,
) -> anyhow::Result<reqwest::StatusCode> {
    let headers = [("content-type", "application/merge-patch+json")];
    let (code, _) = hub.call(http, reqwest::Method::PATCH, path, Some(body), &headers).await?;
    Ok(reqwest::StatusCode::from_u16(code)?)
}

async fn get(hub: &TestHub, http: &reqwest::Client, path: &str) -> anyhow::Result<Option<Value>> {
    let resp = http.get(format!("{}{path}", hub.url)).send().await?;
    if resp.status() == 404 {
        return Ok(None);
    }
    ensure!(resp.status().is_success(), "GET {path}: {}", resp.status());
    Ok(Some(resp.json().await?))
}

/// One agent (cluster `c1` on a one-node cluster instance) joined with a fresh token, accepted
/// and Available: the cluster instance, the agent's data dir and the agent.
async fn one_available_agent(
    hub: &TestHub,
    http: &reqwest::Client,
) -> anyhow::Result<(TestHub, tempfile::TempDir, Agent)> {
    let token = new_token(hub).await?;
    let cluster = managed_cluster(&[("n1", "1", "1Gi")], &[]).await?;
    let dir = tempfile::tempdir()?;
    let agent = Agent::spawn(&join_args(hub, &token, "c1", &cluster, dir.path()), dir.path())?;
    eventually("c1 registered", WAIT, || async { cluster_obj(hub, http, "c1").await }).await?;
    accept(hub, &["c1"]).await?;
    until_available(hub, http, "c1", WAIT).await?;
    Ok((cluster, dir, agent))
}

async fn cluster_obj(
    hub: &TestHub,
    http: &reqwest::Client,
    name: &str,
) -> anyhow::Result<Option<Value>> {
    get(hub, http, &format!("{MCL}/{name}")).await
}

/// Waits (at most `wait`) until the cluster is Joined and Available.
async fn until_available(
    hub: &TestHub,
    http: &reqwest::Client,
    name: &str,
    wait: Duration,
) -> anyhow::Result<Value> {
    eventually(&format!("{name} joined and available"), wait, || async {
        let mc = cluster_obj(hub, http, name).await?;
        Ok(mc.filter(|mc| {
            status_of(mc, "ManagedClusterJoined") == "True"
                && status_of(mc, "ManagedClusterConditionAvailable") == "True"
        }))
    })
    .await
}

/// Runs `ocm-hub accept` against the hub; returns its output.
async fn accept(hub: &TestHub, clusters: &[&str]) -> anyhow::Result<String> {
    let out = tokio::process::Command::new(programs::ocm_hub()?)
        .arg("accept")
        .args(clusters)
        .arg("--data-dir")
        .arg(hub.path())
        .output()
        .await?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(
        out.status.success(),
        "ocm-hub accept failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(text)
}

/// The agent's `--metrics-listen` exposition: renewals and status reports counted, the
/// certificate's expiry ahead, and a clean `promtool check metrics`.
async fn agent_metrics(http: &reqwest::Client, port: u16) -> anyhow::Result<()> {
    use ocm_conformance::prom;
    let url = format!("http://127.0.0.1:{port}/metrics");
    let text = eventually("the agent's metrics count a renewal and a report", WAIT, || async {
        let text = http.get(&url).send().await?.error_for_status()?.text().await?;
        let s = prom::samples(&text)?;
        let ok = |op| {
            prom::sum(
                &s,
                "ocm_agent_hub_requests_total",
                &[("operation", op), ("result", "success")],
            )
        };
        Ok((ok("lease") >= 1.0 && ok("status") >= 1.0).then_some(text))
    })
    .await?;
    let s = prom::samples(&text)?;
    let expiry = prom::value(&s, "ocm_agent_certificate_expiration_timestamp_seconds", &[])?;
    let now = time::OffsetDateTime::now_utc().unix_timestamp() as f64;
    ensure!(expiry > now, "certificate expiry {expiry} not after {now}");
    ensure!(
        prom::value(&s, "ocm_agent_hub_request_duration_seconds_count", &[("operation", "lease")])?
            >= 1.0
    );
    ensure!(prom::value(&s, "ocm_agent_build_info", &[])? == 1.0);
    ensure!(prom::value(&s, "process_resident_memory_bytes", &[])? > 0.0);
    prom::check_metrics_unless_skipped(&text).await?;
    let (code, _) = {
        let r = http.get(format!("http://127.0.0.1:{port}/other")).send().await?;
        (r.status().as_u16(), ())
    };
    ensure!(code == 404, "GET /other: {code}");
    Ok(())
}

/// The hub's printed join command as `klusterlet` arguments, for cluster `name` against
/// `cluster`'s kubeconfig with data dir `dir`.
fn printed_join(printed: &str, name: &str, cluster: &TestHub, dir: &Path) -> Vec<String> {
    let mut args: Vec<String> = printed
        .split_whitespace()
        .skip(1)
        .map(|a| if a == "<cluster-name>" { name.to_owned() } else { a.to_owned() })
        .collect();
    args.extend(
        [
            "--data-dir",
            &dir.display().to_string(),
            "--cluster-kubeconfig",
            &cluster.kubeconfig().display().to_string(),
        ]
        .map(str::to_owned),
    );
    args
}

/// Joins `name` with a CA file and the given token, against `cluster`'s kubeconfig.
fn join_args(hub: &TestHub, token: &str, name: &str, cluster: &TestHub, dir: &Path) -> Vec<String> {
    [
        "join",
        "--hub",
        &hub.url,
        "--token",
        token,
        "--cluster-name",
        name,
        "--ca-file",
        &hub.path().join("pki/ca.crt").display().to_string(),
        "--data-dir",
        &dir.display().to_string(),
        "--cluster-kubeconfig",
        &cluster.kubeconfig().display().to_string(),
        "--cluster-healthcheck-period",
        "1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

async fn new_token(hub: &TestHub) -> anyhow::Result<String> {
    Ok(ocm_apiserver::cli::admin::token_create(hub.kube().await?, Duration::from_secs(3600))
        .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_join_and_accept_commands_make_a_cluster_available() -> anyhow::Result<()> {
    let hub = TestHub::start_with_controllers(Backend::Sled).await?;
    let http = hub.http()?;
    let cluster = managed_cluster(
        &[("n1", "4", "8Gi"), ("n2", "2", "8Gi")],
        &[
            ("id.k8s.io", "c1-id", false),
            ("zone.example.com", "east", false),
            ("secret.example.com", "x", true),
        ],
    )
    .await?;
    // The hub printed the join command on its first start, with a pinned CA.
    let printed = hub.join_command.clone().context("no join command printed on first start")?;
    ensure!(printed.contains("--ca-hash sha256:") && printed.contains(&hub.url), "{printed}");
    let dir = tempfile::tempdir()?;
    // As a new user runs it: the agent's default healthcheck period (60 s).
    let mut args = printed_join(&printed, "c1", &cluster, dir.path());
    let metrics_port = ocm_conformance::ports::free_ports(1)?[0];
    args.extend(["--metrics-listen".to_owned(), format!("127.0.0.1:{metrics_port}")]);
    let agent = Agent::spawn(&args, dir.path())?;
    // The agent registered and asks for the accept command.
    eventually("the agent prints the accept command", WAIT, || async {
        Ok(agent.output().contains("ocm-hub accept c1").then_some(()))
    })
    .await
    .with_context(|| agent.output())?;
    let mc = cluster_obj(&hub, &http, "c1").await?.context("ManagedCluster c1")?;
    ensure!(mc["spec"]["hubAcceptsClient"] == false, "{mc}");
    ensure!(
        mc["metadata"]["labels"]["cluster.open-cluster-management.io/clusterset"] == "default",
        "{mc}"
    );
    // Not available yet: the hub taints it unreachable.
    eventually("c1 tainted unreachable before acceptance", WAIT, || async {
        let mc = cluster_obj(&hub, &http, "c1").await?;
        Ok(mc.filter(|mc| taints(mc) == ["cluster.open-cluster-management.io/unreachable"]))
    })
    .await?;
    let csrs = get(
        &hub,
        &http,
        &format!("{CSRS}?labelSelector=open-cluster-management.io/cluster-name%3Dc1"),
    )
    .await?
    .context("csrs")?;
    let csr = &csrs["items"][0];
    ensure!(
        csr["spec"]["username"].as_str().is_some_and(|u| u.starts_with("system:bootstrap:")),
        "{csr}"
    );
    ensure!(csr.pointer("/status/conditions").is_none(), "pending until accepted: {csr}");

    let out = accept(&hub, &["c1"]).await?;
    ensure!(
        out.contains("approved CertificateSigningRequest")
            && out.contains("set hubAcceptsClient=true"),
        "{out}"
    );
    // Joined and Available within 10 s of the accept (the bound), with the agent's
    // default 60 s healthcheck period: its first report must not wait for a period.
    let mc = until_available(&hub, &http, "c1", Duration::from_secs(10))
        .await
        .with_context(|| agent.output())?;
    agent_metrics(&http, metrics_port).await?;
    ensure!(status_of(&mc, "HubAcceptedManagedCluster") == "True", "{mc}");
    ensure!(status_of(&mc, "ManagedClusterConditionClockSynced") == "True", "{mc}");
    ensure!(
        mc["status"]["capacity"]["cpu"] == "6" && mc["status"]["capacity"]["memory"] == "16Gi",
        "{mc}"
    );
    ensure!(mc["status"]["allocatable"]["pods"] == "220", "{mc}");
    ensure!(
        mc["status"]["version"]["kubernetes"].as_str().is_some_and(|v| v.starts_with('v')),
        "{mc}"
    );
    ensure!(
        mc["status"]["clusterClaims"]
            == json!([{"name": "id.k8s.io", "value": "c1-id"}, {"name": "zone.example.com", "value": "east"}]),
        "reserved first, spoke-only left out: {mc}"
    );
    let finalizers = mc["metadata"]["finalizers"].to_string();
    ensure!(
        finalizers.contains("api-resource-cleanup") && finalizers.contains("resource-cleanup"),
        "{mc}"
    );
    // What acceptance set up on the hub.
    ensure!(get(&hub, &http, "/api/v1/namespaces/c1").await?.is_some());
    ensure!(
        get(&hub, &http, "/apis/coordination.k8s.io/v1/namespaces/c1/leases/managed-cluster-lease")
            .await?
            .is_some()
    );
    for path in [
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/open-cluster-management:managedcluster:c1",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/open-cluster-management:managedcluster:c1",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/c1/rolebindings/open-cluster-management:managedcluster:c1:registration",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/c1/rolebindings/open-cluster-management:managedcluster:c1:work",
    ] {
        ensure!(get(&hub, &http, path).await?.is_some(), "{path}");
    }
    eventually("taints cleared once available", WAIT, || async {
        Ok(cluster_obj(&hub, &http, "c1").await?.filter(|mc| taints(mc).is_empty()))
    })
    .await?;
    eventually("the default set counts c1", WAIT, || async {
        let set = get(
            &hub,
            &http,
            "/apis/cluster.open-cluster-management.io/v1beta2/managedclustersets/default",
        )
        .await?;
        Ok(set.filter(|s| status_of(s, "ClusterSetEmpty") == "False"))
    })
    .await?;
    // The key never left the agent's data dir, and it is private.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(agent.data_dir.join("tls.key"))?.permissions().mode();
        ensure!(mode & 0o777 == 0o600, "tls.key mode {mode:o}");
    }
    Ok(())
}

/// A hub listening on every address and told the address agents reach it at
/// (`--advertise-address`, here the loopback alias 127.0.0.2) names that address in its join
/// command and cluster-info (HTTPS and gRPC), its certificate covers it and every `--tls-san`
/// (a name it was not given fails), and an agent joined through the printed command works over
/// both. (127.0.0.2 is loopback on Linux, where the suite runs.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_advertised_address_is_what_agents_are_told_and_reach() -> anyhow::Result<()> {
    let hub = TestHub::start_with(Backend::Memory, |c| {
        c.registration.enabled = true;
        c.listen = ([0, 0, 0, 0], 0).into();
        c.grpc_listen = Some(([0, 0, 0, 0], 0).into());
        c.advertise_address = Some("127.0.0.2".into());
        c.tls_sans = vec!["hub.test".into()];
    })
    .await?;
    let http = hub.http()?;
    let port = |url: &str| -> anyhow::Result<u16> {
        Ok(url.rsplit_once(':').context("a port")?.1.parse()?)
    };
    let (https_port, grpc_port) =
        (port(&hub.url)?, port(hub.grpc_url.as_deref().context("gRPC")?)?);
    let advertised = format!("https://127.0.0.2:{https_port}");
    let printed = hub.join_command.clone().context("no join command printed")?;
    ensure!(printed.contains(&format!("--hub {advertised} ")), "{printed}");
    let info = get(&hub, &http, "/api/v1/namespaces/kube-public/configmaps/cluster-info")
        .await?
        .context("cluster-info")?;
    ensure!(info["data"]["kubeconfig"].as_str().is_some_and(|k| k.contains(&advertised)), "{info}");
    ensure!(info["data"]["grpc-server"] == format!("https://127.0.0.2:{grpc_port}"), "{info}");

    // The serving certificate covers the --tls-san name, and a name it was not given fails.
    let at = std::net::SocketAddr::from(([127, 0, 0, 2], https_port));
    let by_name = |name: &str| hub.anonymous_resolving(name, at);
    let ok =
        by_name("hub.test")?.get(format!("https://hub.test:{https_port}/readyz")).send().await?;
    ensure!(ok.status().is_success(), "{}", ok.status());
    let other =
        by_name("other.test")?.get(format!("https://other.test:{https_port}/readyz")).send().await;
    ensure!(other.is_err(), "a name the certificate was not given was accepted: {other:?}");

    // An agent joined through the printed command: Available over HTTPS, its work over gRPC.
    let cluster = managed_cluster(&[("n1", "1", "1Gi")], &[]).await?;
    let dir = tempfile::tempdir()?;
    let agent = Agent::spawn(&printed_join(&printed, "c1", &cluster, dir.path()), dir.path())?;
    eventually("c1 registered", WAIT, || async { cluster_obj(&hub, &http, "c1").await })
        .await
        .with_context(|| agent.output())?;
    accept(&hub, &["c1"]).await?;
    until_available(&hub, &http, "c1", WAIT).await.with_context(|| agent.output())?;
    let works = "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks";
    let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "w", "namespace": "c1"},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "default"}, "data": {"v": "1"}}]}}});
    post(&hub, &http, works, &work).await?;
    eventually("the work's ConfigMap on c1", WAIT, || async {
        get(&cluster, &cluster.http()?, "/api/v1/namespaces/default/configmaps/cfg").await
    })
    .await
    .with_context(|| agent.output())?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_agent_turns_unknown_and_tainted_and_resumes_from_its_data_dir()
-> anyhow::Result<()> {
    let hub = TestHub::start_with_controllers(Backend::Memory).await?;
    let http = hub.http()?;
    let token = new_token(&hub).await?;
    let mut agents = Vec::new();
    let mut clusters = Vec::new();
    let mut dirs = Vec::new();
    for name in ["c1", "c2", "c3"] {
        let cluster = managed_cluster(&[("n1", "1", "1Gi")], &[]).await?;
        let dir = tempfile::tempdir()?;
        agents
            .push(Agent::spawn(&join_args(&hub, &token, name, &cluster, dir.path()), dir.path())?);
        clusters.push(cluster);
        dirs.push(dir);
    }
    eventually("three clusters registered", WAIT, || async {
        let list = get(&hub, &http, MCL).await?.context("list")?;
        Ok((list["items"].as_array().map_or(0, Vec::len) == 3).then_some(()))
    })
    .await?;
    accept(&hub, &["c1", "c2", "c3"]).await?;
    for name in ["c1", "c2", "c3"] {
        until_available(&hub, &http, name, WAIT).await?;
    }
    // Short leases: grace = 5 × 1 s.
    let patch = json!({"spec": {"leaseDurationSeconds": 1}});
    let resp = merge_patch(&hub, &http, &format!("{MCL}/c2"), &patch).await?;
    ensure!(resp.is_success(), "{resp}");
    agents[1].kill().await;
    let mc = eventually("c2 unknown after its lease lapsed", WAIT, || async {
        let mc = cluster_obj(&hub, &http, "c2").await?;
        Ok(mc.filter(|mc| {
            status_of(mc, "ManagedClusterConditionAvailable") == "Unknown"
                && taints(mc).contains(&"cluster.open-cluster-management.io/unreachable".to_owned())
        }))
    })
    .await?;
    let c = condition(&mc, "ManagedClusterConditionAvailable").context("available")?;
    ensure!(c["reason"] == "ManagedClusterLeaseUpdateStopped", "{mc}");
    let taint = &mc["spec"]["taints"][0];
    ensure!(taint["effect"] == "NoSelect" && taint["timeAdded"].is_string(), "{mc}");
    // The others stay available.
    for name in ["c1", "c3"] {
        let mc = cluster_obj(&hub, &http, name).await?.context("cluster")?;
        ensure!(status_of(&mc, "ManagedClusterConditionAvailable") == "True", "{mc}");
    }
    // Restarted from its data dir: no new join, no new CSR.
    let csrs_before =
        get(&hub, &http, CSRS).await?.context("csrs")?["items"].as_array().map_or(0, Vec::len);
    let run_args: Vec<String> = [
        "run",
        "--data-dir",
        &dirs[1].path().display().to_string(),
        "--cluster-kubeconfig",
        &clusters[1].kubeconfig().display().to_string(),
        "--cluster-healthcheck-period",
        "1",
    ]
    .map(str::to_owned)
    .to_vec();
    let restarted = Agent::spawn(&run_args, dirs[1].path())?;
    eventually("c2 available again and untainted", WAIT, || async {
        let mc = cluster_obj(&hub, &http, "c2").await?;
        Ok(mc.filter(|mc| {
            status_of(mc, "ManagedClusterConditionAvailable") == "True" && taints(mc).is_empty()
        }))
    })
    .await
    .with_context(|| restarted.output())?;
    let csrs_after =
        get(&hub, &http, CSRS).await?.context("csrs")?["items"].as_array().map_or(0, Vec::len);
    ensure!(csrs_before == csrs_after, "a restart must not request a new certificate");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denial_revokes_and_deletion_cleans_up() -> anyhow::Result<()> {
    let hub = TestHub::start_with_controllers(Backend::Memory).await?;
    let http = hub.http()?;
    let (_cluster, dir, _agent) = one_available_agent(&hub, &http).await?;
    let path = format!("{MCL}/c1");
    // Deny.
    let deny = json!({"spec": {"hubAcceptsClient": false}});
    ensure!(merge_patch(&hub, &http, &path, &deny).await?.is_success());
    let rb = "/apis/rbac.authorization.k8s.io/v1/namespaces/c1/rolebindings/open-cluster-management:managedcluster:c1:registration";
    let mc = eventually("c1 denied", WAIT, || async {
        let mc = cluster_obj(&hub, &http, "c1").await?;
        let gone = get(&hub, &http, rb).await?.is_none();
        Ok(mc.filter(|mc| gone && status_of(mc, "HubAcceptedManagedCluster") == "False"))
    })
    .await?;
    ensure!(
        condition(&mc, "HubAcceptedManagedCluster").context("c")?["reason"]
            == "HubClusterAdminDenied"
    );
    let role = get(
        &hub,
        &http,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/open-cluster-management:managedcluster:c1",
    )
    .await?
    .context("role")?;
    ensure!(role["rules"].as_array().map_or(0, Vec::len) == 1, "not-accepted form: {role}");
    // Accept again, add a work, then delete the cluster.
    accept(&hub, &["c1"]).await?;
    until_available(&hub, &http, "c1", WAIT).await?;
    let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "w1", "namespace": "c1"},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}}]}}});
    post(
        &hub,
        &http,
        "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks",
        &work,
    )
    .await?;
    // The agent watches its works with its own certificate...
    let agent_http = hub.http_with_cert(
        &std::fs::read_to_string(dir.path().join("tls.crt"))?,
        &std::fs::read_to_string(dir.path().join("tls.key"))?,
    )?;
    let mut watch = agent_http
        .get(format!(
            "{}/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks?watch=1",
            hub.url
        ))
        .send()
        .await?;
    ensure!(watch.status() == 200, "the agent may watch its works: {}", watch.status());
    let resp = http.delete(format!("{}{MCL}/c1", hub.url)).send().await?;
    ensure!(resp.status().is_success(), "{}", resp.status());
    // ...and the stream ends once its cluster's RBAC is gone, with a 403 as the last event.
    let mut last = String::new();
    let ended = tokio::time::timeout(WAIT, async {
        while let Some(chunk) = watch.chunk().await? {
            last.push_str(&String::from_utf8_lossy(&chunk));
        }
        anyhow::Ok(())
    })
    .await;
    ensure!(matches!(ended, Ok(Ok(()))), "the agent's watch outlived its cluster");
    let last = last.lines().last().unwrap_or_default();
    ensure!(last.contains("\"type\":\"ERROR\"") && last.contains("403"), "{last}");
    eventually("c1 and everything of it gone", WAIT, || async {
        let gone = cluster_obj(&hub, &http, "c1").await?.is_none()
            && get(&hub, &http, "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks/w1").await?.is_none()
            && get(&hub, &http, "/apis/rbac.authorization.k8s.io/v1/clusterroles/open-cluster-management:managedcluster:c1").await?.is_none()
            && get(&hub, &http, rb).await?.is_none();
        Ok(gone.then_some(()))
    })
    .await?;
    ensure!(
        get(&hub, &http, "/api/v1/namespaces/c1").await?.is_some(),
        "the namespace stays, as in OCM"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_lived_certificates_are_rotated_and_renewals_auto_approved() -> anyhow::Result<()> {
    let hub = TestHub::start_with(Backend::Memory, |c| {
        c.registration.enabled = true;
        c.registration.signing_duration = Duration::from_secs(20);
    })
    .await?;
    let http = hub.http()?;
    let (_cluster, dir, agent) = one_available_agent(&hub, &http).await?;
    let first = std::fs::read_to_string(dir.path().join("tls.crt"))?;
    eventually("a rotated certificate", WAIT, || async {
        let now = std::fs::read_to_string(dir.path().join("tls.crt"))?;
        Ok((now != first).then_some(()))
    })
    .await
    .with_context(|| agent.output())?;
    let csrs = get(&hub, &http, CSRS).await?.context("csrs")?;
    let renewal = csrs["items"]
        .as_array()
        .context("items")?
        .iter()
        .find(|c| {
            c["spec"]["username"]
                .as_str()
                .is_some_and(|u| u.starts_with("system:open-cluster-management:c1:"))
        })
        .context("a renewal requested with the agent's own certificate")?;
    ensure!(
        condition(renewal, "Approved").context("approved")?["reason"]
            == "AutoApprovedByHubCSRApprovingController",
        "{renewal}"
    );
    // Past the first certificate's end the agent still renews (so with the new one): a
    // renewTime after the first notAfter is the evidence. Renewals every second meanwhile.
    let first_end = not_after(&first)?;
    let patch = json!({"spec": {"leaseDurationSeconds": 1}});
    let resp = merge_patch(&hub, &http, &format!("{MCL}/c1"), &patch).await?;
    ensure!(resp.is_success(), "{resp}");
    let lease = "/apis/coordination.k8s.io/v1/namespaces/c1/leases/managed-cluster-lease";
    eventually("a renewal after the first certificate expired", WAIT, || async {
        let lease = get(&hub, &http, lease).await?.context("the Lease")?;
        let renewed = lease["spec"]["renewTime"].as_str().context("renewTime")?;
        let renewed = time::OffsetDateTime::parse(renewed, &Rfc3339)?.unix_timestamp();
        Ok((renewed > first_end).then_some(()))
    })
    .await
    .with_context(|| agent.output())?;
    let mc = until_available(&hub, &http, "c1", WAIT).await?;
    let rotated = condition(&mc, "ClusterCertificateRotated").context("rotated condition")?;
    ensure!(rotated["status"] == "True", "{mc}");
    Ok(())
}

/// A PEM certificate's notAfter (Unix seconds).
fn not_after(pem: &str) -> anyhow::Result<i64> {
    let der = ocm_agent::hub::pem_certificates(pem).into_iter().next().context("no PEM")?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der)?;
    Ok(cert.validity().not_after.timestamp())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_requests_stay_pending_even_from_a_trusted_identity() -> anyhow::Result<()> {
    // A bootstrap token whose user the hub auto-approves.
    let (id, secret) = ("trust1", "0123456789abcdef");
    let hub = TestHub::start_with(Backend::Memory, |c| {
        c.registration.enabled = true;
        c.registration.auto_approve_identities = vec![format!("system:bootstrap:{id}")];
    })
    .await?;
    let admin = hub.http()?;
    let expires = "2099-01-01T00:00:00Z";
    let token_secret = ocm_apiserver::auth::bootstrap::bootstrap_token_object(
        id,
        secret,
        expires,
        "a trusted identity",
    );
    post(&hub, &admin, "/api/v1/namespaces/kube-system/secrets", &token_secret).await?;
    let bootstrap = hub.http_bearer(&format!("{id}.{secret}"))?;
    for name in ["c1", "c1-evil"] {
        let mc = json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": {"name": name}, "spec": {"hubAcceptsClient": false}});
        eventually("bootstrap token works", WAIT, || async {
            let r = bootstrap.post(format!("{}{MCL}", hub.url)).json(&mc).send().await?;
            Ok((r.status().is_success() || r.status() == 409).then_some(()))
        })
        .await?;
    }
    let request = |label: &str, cn: &str, orgs: &[&str]| -> anyhow::Result<Value> {
        let mut csr = ocm_conformance::csr::client_csr(None, label, cn, orgs)?;
        // Claims another user: the hub records the real requester instead.
        csr["spec"]["username"] = json!("system:open-cluster-management:c1:agent");
        Ok(csr)
    };
    let own = "system:open-cluster-management:c1";
    let mcg = "system:open-cluster-management:managed-clusters";
    let forged = [
        request("c1", "system:open-cluster-management:c1-evil:agent", &[own, mcg])?,
        request(
            "c1",
            "system:open-cluster-management:c1:agent",
            &["system:open-cluster-management:c1-evil", mcg],
        )?,
        request("c1-evil", "system:open-cluster-management:c1:agent", &[own, mcg])?,
        request("c1", "system:open-cluster-management:c1:agent", &[own, "system:masters"])?,
        request("c1", "system:admin", &[own])?,
    ];
    let mut names = Vec::new();
    for body in forged {
        let r = bootstrap.post(format!("{}{CSRS}", hub.url)).json(&body).send().await?;
        ensure!(r.status() == 201, "{}", r.status());
        let created: Value = r.json().await?;
        ensure!(created["spec"]["username"] == format!("system:bootstrap:{id}"), "{created}");
        names.push(created["metadata"]["name"].as_str().unwrap_or_default().to_owned());
    }
    // A valid request of the same identity is approved and issued: the controller ran.
    let valid = request("c1", "system:open-cluster-management:c1:agent1", &[own, mcg])?;
    let r = bootstrap.post(format!("{}{CSRS}", hub.url)).json(&valid).send().await?;
    let created: Value = r.json().await?;
    let valid_name = created["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    eventually("the valid request issued", WAIT, || async {
        let c = get(&hub, &admin, &format!("{CSRS}/{valid_name}")).await?;
        Ok(c.filter(|c| c.pointer("/status/certificate").is_some()))
    })
    .await?;
    // Auto-approval of a trusted identity also accepts its cluster, once.
    let mc = cluster_obj(&hub, &admin, "c1").await?.context("c1")?;
    ensure!(mc["spec"]["hubAcceptsClient"] == true, "{mc}");
    for name in &names {
        let c = get(&hub, &admin, &format!("{CSRS}/{name}")).await?.context("csr")?;
        ensure!(
            c.pointer("/status/conditions").is_none(),
            "forged request {name} was decided: {c}"
        );
    }
    // The bootstrap identity may not approve anything itself.
    let approve = json!({"status": {"conditions": [{"type": "Approved", "status": "True", "reason": "Self", "message": "x"}]}});
    let r =
        merge_patch(&hub, &bootstrap, &format!("{CSRS}/{}/approval", names[0]), &approve).await?;
    ensure!(r == 403, "{r}");
    // Not even an admin approves through /status, or rewrites a request's spec.
    let r = merge_patch(&hub, &admin, &format!("{CSRS}/{}/status", names[0]), &approve).await?;
    ensure!(r == 422, "approval through /status: {r}");
    let forged_user = json!({"spec": {"username": "system:open-cluster-management:c1:agent"}});
    let r = merge_patch(&hub, &admin, &format!("{CSRS}/{}", names[0]), &forged_user).await?;
    ensure!(r.is_success(), "{r}");
    let c = get(&hub, &admin, &format!("{CSRS}/{}", names[0])).await?.context("csr")?;
    ensure!(c["spec"]["username"] == format!("system:bootstrap:{id}"), "spec changed: {c}");
    Ok(())
}

/// A key and a certificate request (PEM) with any subject.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_hub_keeps_its_clusters_and_agents_carry_on() -> anyhow::Result<()> {
    let mut hub = TestHub::start_with_controllers(Backend::Sled).await?;
    let http = hub.http()?;
    let (_cluster, _dir, agent) = one_available_agent(&hub, &http).await?;
    let csrs =
        get(&hub, &http, CSRS).await?.context("csrs")?["items"].as_array().map_or(0, Vec::len);
    let lease = "/apis/coordination.k8s.io/v1/namespaces/c1/leases/managed-cluster-lease";
    // Renew every second, so renewals after the restart show within seconds.
    let resp = merge_patch(
        &hub,
        &http,
        &format!("{MCL}/c1"),
        &json!({"spec": {"leaseDurationSeconds": 1}}),
    )
    .await?;
    ensure!(resp.is_success(), "{resp}");

    hub.restart().await?;
    let http = hub.http()?;
    let renewed_before =
        get(&hub, &http, lease).await?.context("lease")?["spec"]["renewTime"].clone();
    eventually("the agent renews against the restarted hub", WAIT, || async {
        let now = get(&hub, &http, lease).await?.context("lease")?;
        Ok((now["spec"]["renewTime"] != renewed_before).then_some(()))
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e:#}\nagent:\n{}", agent.output()))?;
    let mc = until_available(&hub, &http, "c1", WAIT).await?;
    ensure!(status_of(&mc, "HubAcceptedManagedCluster") == "True", "{mc}");
    let after =
        get(&hub, &http, CSRS).await?.context("csrs")?["items"].as_array().map_or(0, Vec::len);
    ensure!(after == csrs, "no new join after the restart");
    Ok(())
}
