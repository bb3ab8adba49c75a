//! Hub replicas as real `ocm-hub serve` processes over one etcd cluster, for the failover
//! suites and benchmark: each on its own ports and data dir (the later ones holding a copy of
//! the first one's `pki/`, as the README's "several replicas" section says), killed with
//! SIGKILL, frozen with SIGSTOP, and started again on the same ports and data; one may run in a
//! network namespace of its own ([`crate::netns`]), to be partitioned from etcd.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use crate::hub::eventually;
use crate::programs;

/// One replica process.
pub struct Replica {
    dir: tempfile::TempDir,
    /// The address it listens on: loopback, or its network namespace's client link.
    host: String,
    /// The network namespace it runs in, if not the test's.
    netns: Option<String>,
    https: u16,
    grpc: u16,
    args: Vec<String>,
    child: Option<Child>,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica").field("https", &self.https).finish_non_exhaustive()
    }
}

impl Replica {
    /// Starts a replica on `etcd` (client URLs) with `extra` flags; with `pki_from`, a copy of
    /// that replica's identity first. Returns once it answers `/readyz`.
    pub async fn start(
        etcd: &[String],
        pki_from: Option<&Replica>,
        extra: &[&str],
    ) -> anyhow::Result<Replica> {
        Replica::launch("127.0.0.1".to_owned(), None, etcd_args(etcd), pki_from, extra).await
    }

    /// Starts one hub on its embedded sled store, as a process like the replicas (for the
    /// benchmarks that compare the two).
    pub async fn start_sled(extra: &[&str]) -> anyhow::Result<Replica> {
        let storage = vec!["--storage".to_owned(), "sled".to_owned()];
        Replica::launch("127.0.0.1".to_owned(), None, storage, None, extra).await
    }

    /// Starts a replica inside `netns`, listening on its client link and reaching `etcd` (its
    /// members' URLs at the namespace's store link) over its store link.
    pub async fn start_in(
        netns: &crate::netns::Netns,
        etcd: &[String],
        pki_from: Option<&Replica>,
        extra: &[&str],
    ) -> anyhow::Result<Replica> {
        let host = netns.client_inside().to_string();
        let netns = Some(netns.name().to_owned());
        Replica::launch(host, netns, etcd_args(etcd), pki_from, extra).await
    }

    async fn launch(
        host: String,
        netns: Option<String>,
        mut args: Vec<String>,
        pki_from: Option<&Replica>,
        extra: &[&str],
    ) -> anyhow::Result<Replica> {
        let dir = tempfile::tempdir()?;
        if let Some(first) = pki_from {
            copy_dir(&first.path().join("pki"), &dir.path().join("pki"))?;
        }
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let ports = crate::ports::free_ports(2)?;
        let (https, grpc) = (ports[0], ports[1]);
        let mut replica = Replica { dir, host, netns, https, grpc, args, child: None };
        replica.resume().await?;
        Ok(replica)
    }

    /// The data dir.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `https://HOST:PORT`.
    pub fn url(&self) -> String {
        format!("https://{}:{}", self.host, self.https)
    }

    /// The gRPC server's URL.
    pub fn grpc_url(&self) -> String {
        format!("https://{}:{}", self.host, self.grpc)
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process runs.
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// The replica's identity as `endpoints.json` names it.
    pub fn identity(&self) -> anyhow::Result<String> {
        let text = std::fs::read_to_string(self.path().join("endpoints.json"))?;
        let endpoints: Value = serde_json::from_str(&text)?;
        endpoints["replica"].as_str().map(str::to_owned).context("endpoints.json names no replica")
    }

    /// What it logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path().join("hub.log")).unwrap_or_default()
    }

    /// SIGKILL, as a crash: nothing is released.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, as a supervisor stops it, and waits for the process to exit.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        self.signal("TERM")?;
        if let Some(mut child) = self.child.take() {
            child.wait()?;
        }
        Ok(())
    }

    /// Sends `signal` (`STOP`, `CONT`, `TERM`) to the process.
    pub fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let pid = self.pid().context("the replica is not running")?;
        let status =
            Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status()?;
        anyhow::ensure!(status.success(), "kill -{signal} {pid} failed");
        Ok(())
    }

    /// Starts the stopped replica again on its ports and data; returns once it answers
    /// `/readyz`.
    pub async fn resume(&mut self) -> anyhow::Result<()> {
        self.resume_within(Duration::from_secs(60)).await
    }

    /// [`Replica::resume`], waiting up to `limit` for it to listen and as long again to be
    /// ready (a hub loading a large store).
    pub async fn resume_within(&mut self, limit: Duration) -> anyhow::Result<()> {
        let endpoints = self.path().join("endpoints.json");
        let _ = std::fs::remove_file(&endpoints);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path().join("hub.log"))?;
        let hub = programs::ocm_hub()?;
        let mut command = match &self.netns {
            Some(netns) => {
                let mut ip = Command::new("ip");
                ip.args(["netns", "exec", netns]).arg(hub);
                ip
            }
            None => Command::new(hub),
        };
        let child = command
            .arg("serve")
            .arg("--data-dir")
            .arg(self.path())
            .arg(format!("--listen={}:{}", self.host, self.https))
            .arg(format!("--grpc-listen={}:{}", self.host, self.grpc))
            .args(&self.args)
            .env("RUST_LOG", std::env::var("OCM_HUB_LOG").unwrap_or_else(|_| "info".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()?;
        self.child = Some(child);
        let until = tokio::time::Instant::now() + limit;
        while !endpoints.exists() {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                self.child = None;
                anyhow::bail!("the replica exited with {status}:\n{}", self.log());
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < until,
                "the replica wrote no endpoints.json within {limit:?}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let http = self.http()?;
        eventually("the replica's /readyz", limit, || async {
            let ok = http.get(format!("{}/readyz", self.url())).send().await;
            Ok(ok.is_ok_and(|r| r.status().is_success()).then_some(()))
        })
        .await
    }

    /// An admin client (the shared identity).
    pub fn http(&self) -> anyhow::Result<reqwest::Client> {
        crate::hub::admin_http(self.path())
    }

    /// Whether it leads, as its `leader_election_master_status` says (`None`: no answer).
    pub async fn leads(&self, http: &reqwest::Client) -> Option<bool> {
        if !self.running() {
            return None;
        }
        let metrics = http.get(format!("{}/metrics", self.url())).send().await.ok()?;
        let text = metrics.text().await.ok()?;
        let line = text
            .lines()
            .find(|l| l.starts_with("leader_election_master_status{name=\"ocm-hub\"}"))?;
        Some(line.ends_with(" 1"))
    }
}

/// The flags of a replica on the etcd members `endpoints`.
fn etcd_args(endpoints: &[String]) -> Vec<String> {
    vec![
        "--storage".to_owned(),
        "etcd".to_owned(),
        format!("--etcd-endpoints={}", endpoints.join(",")),
    ]
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Copies the files of `from` into `to` (one level: the PKI folder), keeping their modes.
fn copy_dir(from: &Path, to: &PathBuf) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// The one replica of `replicas` that leads, once exactly one says so (`None` within `limit`).
pub async fn leader(
    replicas: &[Replica],
    http: &reqwest::Client,
    limit: Duration,
) -> anyhow::Result<usize> {
    eventually("exactly one leading replica", limit, || async {
        let mut leading = Vec::new();
        for (i, r) in replicas.iter().enumerate() {
            if r.leads(http).await == Some(true) {
                leading.push(i);
            }
        }
        Ok((leading.len() == 1).then(|| leading[0]))
    })
    .await
}

/// The collection the failover suites write to.
pub const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// A ConfigMap named `name`.
pub fn configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}})
}

/// POSTs `body` to `path` on `replica`: the status and body.
pub async fn post(
    http: &reqwest::Client,
    replica: &str,
    path: &str,
    body: &Value,
) -> anyhow::Result<(u16, Value)> {
    let resp = http.post(format!("{replica}{path}")).json(body).send().await?;
    Ok((resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null)))
}

/// Creates ConfigMaps `w-N` through the replicas in turn (the next one when a replica does
/// not answer), recording each one acknowledged (201).
pub async fn write_continuously(
    http: reqwest::Client,
    urls: Vec<String>,
    acknowledged: Arc<Mutex<BTreeSet<String>>>,
) {
    for n in 0.. {
        let name = format!("w-{n}");
        let url = &urls[n % urls.len()];
        if let Ok((201, _)) = post(&http, url, CONFIGMAPS, &configmap(&name)).await {
            if let Ok(mut acked) = acknowledged.lock() {
                acked.insert(name);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every acknowledged ConfigMap is stored (read through `replica`).
pub async fn all_acknowledged_stored(
    http: &reqwest::Client,
    replica: &str,
    acknowledged: &Mutex<BTreeSet<String>>,
) -> anyhow::Result<()> {
    // What was acknowledged before the (consistent) list was asked for must be in it.
    let acked = acknowledged.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.clone();
    let list: Value = http.get(format!("{replica}{CONFIGMAPS}")).send().await?.json().await?;
    let stored: BTreeSet<String> = list["items"]
        .as_array()
        .context("a list")?
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let lost: Vec<&String> = acked.difference(&stored).collect();
    anyhow::ensure!(lost.is_empty(), "acknowledged writes missing: {lost:?}");
    Ok(())
}

/// Two clusters, the namespace `apps` bound to the `global` set.
pub async fn placement_fixture(http: &reqwest::Client, replica: &str) -> anyhow::Result<()> {
    for name in ["c1", "c2"] {
        let cluster = crate::kubectl::cluster(name, json!({"env": "prod"}));
        let path = "/apis/cluster.open-cluster-management.io/v1/managedclusters";
        let (code, body) = post(http, replica, path, &cluster).await?;
        anyhow::ensure!(code == 201, "{code} {body}");
    }
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}});
    let (code, body) = post(http, replica, "/api/v1/namespaces", &ns).await?;
    anyhow::ensure!(code == 201, "{code} {body}");
    let binding = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2",
        "kind": "ManagedClusterSetBinding",
        "metadata": {"name": "global", "namespace": "apps"},
        "spec": {"clusterSet": "global"},
    });
    let path = "/apis/cluster.open-cluster-management.io/v1beta2/namespaces/apps/managedclustersetbindings";
    let (code, body) = post(http, replica, path, &binding).await?;
    anyhow::ensure!(code == 201, "{code} {body}");
    Ok(())
}

/// Creates the Placement `name` in `apps` over the `global` set.
pub async fn create_placement(
    http: &reqwest::Client,
    replica: &str,
    name: &str,
) -> anyhow::Result<()> {
    let placement = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": name, "namespace": "apps"},
        // The clusters have no agents: they turn unreachable (NoSelect), which this tolerates.
        "spec": {"clusterSets": ["global"], "tolerations": [
            {"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"},
        ]},
    });
    let path = "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/apps/placements";
    let (code, body) = post(http, replica, path, &placement).await?;
    anyhow::ensure!(code == 201, "create placement {name}: {code} {body}");
    Ok(())
}

/// The placement's decisions name both clusters (read through `replica`) within `limit`.
pub async fn decided(
    http: &reqwest::Client,
    replica: &str,
    placement: &str,
    limit: Duration,
) -> anyhow::Result<()> {
    let path = format!(
        "{replica}/apis/cluster.open-cluster-management.io/v1beta1/namespaces/apps/placementdecisions?labelSelector=cluster.open-cluster-management.io/placement={placement}"
    );
    eventually(&format!("decisions of {placement}"), limit, || async {
        let list: Value = http.get(&path).send().await?.json().await?;
        let mut clusters: Vec<&str> = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|d| d["status"]["decisions"].as_array().into_iter().flatten())
            .filter_map(|d| d["clusterName"].as_str())
            .collect();
        clusters.sort_unstable();
        Ok((clusters == ["c1", "c2"]).then_some(()))
    })
    .await
}
