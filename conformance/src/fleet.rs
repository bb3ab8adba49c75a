//! A hub with joined clusters for end-to-end tests: each cluster a `--profile cluster`
//! instance standing in for a real one, with a real `klusterlet` joined by a bootstrap token
//! the hub trusts (auto-approved and accepted).

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use crate::hub::{Backend, TestHub, eventually};
use crate::kubectl::create;
use crate::programs;

/// The bootstrap token the fleet's agents join with (id and secret).
pub const BOOTSTRAP_TOKEN: (&str, &str) = ("fleet1", "0123456789abcdef");

/// How long a fleet waits for its clusters to join.
const JOIN_WAIT: Duration = Duration::from_secs(90);

/// The hub, its stand-in clusters by name, and the agents (killed on drop).
pub struct Fleet {
    pub hub: TestHub,
    pub clusters: BTreeMap<String, TestHub>,
    pub agents: Vec<tokio::process::Child>,
    pub dirs: Vec<tempfile::TempDir>,
}

impl Fleet {
    /// A memory hub with registration on and the clusters `names` joined, each agent run with
    /// `agent_args` besides the join flags; returns once every cluster's namespace exists.
    pub async fn start(names: &[&str], agent_args: &[&str]) -> anyhow::Result<Fleet> {
        Fleet::start_with(names, agent_args, |_| {}).await
    }

    /// [`Fleet::start`] with the hub's config changed by `configure` first.
    pub async fn start_with(
        names: &[&str],
        agent_args: &[&str],
        configure: impl FnOnce(&mut ocm_apiserver::serve::server::ServeConfig),
    ) -> anyhow::Result<Fleet> {
        let (id, secret) = BOOTSTRAP_TOKEN;
        let hub = TestHub::start_with(Backend::Memory, |c| {
            c.registration.enabled = true;
            c.registration.auto_approve_identities = vec![format!("system:bootstrap:{id}")];
            configure(c);
        })
        .await?;
        let http = hub.http()?;
        let token = ocm_apiserver::auth::bootstrap::bootstrap_token_object(
            id,
            secret,
            "2099-01-01T00:00:00Z",
            "fleet tests",
        );
        create(&hub, &http, "/api/v1/namespaces/kube-system/secrets", token).await?;
        let mut fleet =
            Fleet { hub, clusters: BTreeMap::new(), agents: Vec::new(), dirs: Vec::new() };
        for name in names {
            let cluster = TestHub::start_with(Backend::Memory, |c| {
                c.profile = ocm_apiserver::machinery::scheme::Profile::Cluster;
            })
            .await?;
            let dir = tempfile::tempdir()?;
            let ca = fleet.hub.path().join("pki/ca.crt").display().to_string();
            let agent = tokio::process::Command::new(programs::klusterlet()?)
                .args(["join", "--hub", &fleet.hub.url, "--token", &format!("{id}.{secret}")])
                .args(["--cluster-name", name, "--ca-file", &ca])
                .args(agent_args)
                .arg("--data-dir")
                .arg(dir.path())
                .arg("--cluster-kubeconfig")
                .arg(cluster.kubeconfig())
                .env("RUST_LOG", std::env::var("OCM_AGENT_LOG").unwrap_or_else(|_| "warn".into()))
                .stdout(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()?;
            fleet.clusters.insert((*name).to_owned(), cluster);
            fleet.agents.push(agent);
            fleet.dirs.push(dir);
        }
        for name in names {
            eventually(&format!("{name}'s namespace on the hub"), JOIN_WAIT, || async {
                let path = format!("/api/v1/namespaces/{name}");
                let (code, _) = fleet.hub.call(&http, Method::GET, &path, None, &[]).await?;
                Ok((code == 200).then_some(()))
            })
            .await?;
        }
        Ok(fleet)
    }

    /// Creates namespace `ns` on the hub with a ManagedClusterSetBinding of the `default` set,
    /// so its Placements can select the fleet's clusters.
    pub async fn bind_namespace(&self, ns: &str) -> anyhow::Result<()> {
        let http = self.hub.http()?;
        create(
            &self.hub,
            &http,
            "/api/v1/namespaces",
            serde_json::json!({"metadata": {"name": ns}}),
        )
        .await?;
        let binding = serde_json::json!({
            "apiVersion": "cluster.open-cluster-management.io/v1beta2",
            "kind": "ManagedClusterSetBinding",
            "metadata": {"name": "default", "namespace": ns},
            "spec": {"clusterSet": "default"},
        });
        let path = format!(
            "/apis/cluster.open-cluster-management.io/v1beta2/namespaces/{ns}/managedclustersetbindings"
        );
        create(&self.hub, &http, &path, binding).await?;
        Ok(())
    }

    /// GET `path` on the hub: the object, or `None` on 404.
    pub async fn get(&self, path: &str) -> anyhow::Result<Option<Value>> {
        get(&self.hub, path).await
    }
}

/// GET `path` on a hub or stand-in: the object, or `None` on 404.
pub async fn get(on: &TestHub, path: &str) -> anyhow::Result<Option<Value>> {
    let (code, body) = on.call(&on.http()?, Method::GET, path, None, &[]).await?;
    match code {
        200 => Ok(Some(body)),
        404 => Ok(None),
        _ => anyhow::bail!("GET {path}: {code} {body}"),
    }
}
