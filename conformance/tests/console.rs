//! The fleet console in a real browser: a hub with real klusterlets (each cluster a
//! `--profile cluster` stand-in), tokens made with `kubectl create token` as a user would, and
//! `conformance/console/console.test.mjs` driving headless Chromium through playwright-core:
//! signing in (a bootstrap token refused), the fleet with its availability, a cluster's works
//! changing live as one is applied with kubectl, an admin accepting a cluster, pausing,
//! resuming and undoing a rollout, a placement's decisions, policy compliance per cluster and a
//! policy disabled, a token without
//! rights seeing an empty fleet and refused actions, nothing served without a session, the
//! session useless from another origin, 1,000 simulated clusters shown with a live change and a
//! screenshot kept under `target/test-artifacts/`, and sign-out ending the session.

use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use ocm_conformance::browser;
use ocm_conformance::fleet::{BOOTSTRAP_TOKEN, Fleet};
use ocm_conformance::hub::eventually;
use ocm_conformance::kubectl::{self, Kubectl, create};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);
const CLUSTERS: [&str; 2] = ["c1", "c2"];
/// The namespace of the rollout, placement and policy the pages show.
const NS: &str = "apps";

/// Waits until every cluster of the fleet is Available.
async fn available(fleet: &Fleet) -> anyhow::Result<()> {
    for name in CLUSTERS {
        eventually(&format!("{name} Available"), WAIT, || async {
            let path =
                format!("/apis/cluster.open-cluster-management.io/v1/managedclusters/{name}");
            let mc = fleet.get(&path).await?;
            let conditions = mc.as_ref().and_then(|m| m.pointer("/status/conditions"));
            let available = conditions.and_then(|c| c.as_array()).is_some_and(|c| {
                c.iter().any(|c| {
                    c["type"] == "ManagedClusterConditionAvailable" && c["status"] == "True"
                })
            });
            Ok(available.then_some(()))
        })
        .await?;
    }
    Ok(())
}

/// A service account in `default` and a token for it, as a user makes them with kubectl;
/// bound to `cluster_role` when one is named.
async fn token(k: &Kubectl, account: &str, cluster_role: Option<&str>) -> anyhow::Result<String> {
    k.ok(&["create", "serviceaccount", account, "-n", "default"]).await?;
    if let Some(role) = cluster_role {
        let subject = format!("default:{account}");
        let args = ["create", "clusterrolebinding", account, "--clusterrole", role];
        k.ok(&[&args[..], &["--serviceaccount", &subject]].concat()).await?;
    }
    Ok(k.ok(&["create", "token", account, "-n", "default"]).await?.trim().to_owned())
}

/// In namespace `apps`: a Placement `all` of the fleet, a ManifestWorkReplicaSet `web` rolled
/// out to it, and a policy `settings` (a `musthave` ConfigMap, `inform`) bound to it.
async fn workloads(fleet: &Fleet) -> anyhow::Result<()> {
    fleet.bind_namespace(NS).await?;
    let (hub, http) = (&fleet.hub, fleet.hub.http()?);
    let placement = json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement", "metadata": {"name": "all", "namespace": NS}, "spec": {}});
    let path =
        format!("/apis/cluster.open-cluster-management.io/v1beta1/namespaces/{NS}/placements");
    create(hub, &http, &path, placement).await?;
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "web", "namespace": "default"}, "data": {"version": "1"}});
    let set = json!({"apiVersion": "work.open-cluster-management.io/v1alpha1",
        "kind": "ManifestWorkReplicaSet", "metadata": {"name": "web", "namespace": NS},
        "spec": {"placementRefs": [{"name": "all", "rolloutStrategy": {"type": "All"}}],
                 "manifestWorkTemplate": {"workload": {"manifests": [config]}}}});
    let path = format!(
        "/apis/work.open-cluster-management.io/v1alpha1/namespaces/{NS}/manifestworkreplicasets"
    );
    create(hub, &http, &path, set).await?;
    let wanted = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "default"}, "data": {"mode": "strict"}});
    let template = json!({"objectDefinition": {"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy", "metadata": {"name": "settings-present"},
        "spec": {"remediationAction": "inform",
                 "object-templates": [{"complianceType": "musthave", "objectDefinition": wanted}]}}});
    let policy = json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "Policy",
        "metadata": {"name": "settings", "namespace": NS},
        "spec": {"disabled": false, "remediationAction": "inform", "policy-templates": [template]}});
    let policies = format!("/apis/policy.open-cluster-management.io/v1/namespaces/{NS}");
    create(hub, &http, &format!("{policies}/policies"), policy).await?;
    let binding = json!({"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "PlacementBinding", "metadata": {"name": "settings", "namespace": NS},
        "placementRef": {"apiGroup": "cluster.open-cluster-management.io", "kind": "Placement", "name": "all"},
        "subjects": [{"apiGroup": "policy.open-cluster-management.io", "kind": "Policy", "name": "settings"}]});
    create(hub, &http, &format!("{policies}/placementbindings"), binding).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_in_a_browser() -> anyhow::Result<()> {
    let Some(b) = browser::require("the whole test (the console in Chromium)")? else {
        return Ok(());
    };
    if kubectl::skip("the whole test (tokens and works made with kubectl)") {
        return Ok(());
    }
    let fleet = Fleet::start_with(&CLUSTERS, &["--policy-resync-seconds", "1"], |c| {
        c.routes = Some(ocm_apiserver::console::routes);
    })
    .await?;
    available(&fleet).await?;
    workloads(&fleet).await?;
    let k = Kubectl::new(&fleet.hub)?;
    let admin = token(&k, "console-admin", Some("cluster-admin")).await?;
    let nobody = token(&k, "console-nobody", None).await?;
    let artifacts = browser::artifacts_dir().join("console");
    let (id, secret) = BOOTSTRAP_TOKEN;
    let run = tokio::process::Command::new(&b.node)
        .arg("console.test.mjs")
        .current_dir(&b.dir)
        .env("HUB", &fleet.hub.url)
        .env("ADMIN_TOKEN", &admin)
        .env("NOBODY_TOKEN", &nobody)
        .env("BOOTSTRAP_TOKEN", format!("{id}.{secret}"))
        .env("CLUSTERS", CLUSTERS.join(","))
        .env("NAMESPACE", NS)
        .env("KUBECONFIG", fleet.hub.kubeconfig())
        .env("CHROMIUM", &b.chromium)
        .env("ARTIFACTS", &artifacts)
        .env("SIMULATED", "1000")
        .env("NODE_EXTRA_CA_CERTS", fleet.hub.path().join("pki/ca.crt"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(600), run)
        .await
        .context("the browser test did not finish in 10 minutes")??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    anyhow::ensure!(
        out.status.success(),
        "the browser test failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    for check in ["sign-out ends the session", "another origin can neither read nor act"] {
        anyhow::ensure!(stdout.contains(check), "the browser test never said {check:?}:\n{stdout}");
    }
    anyhow::ensure!(artifacts.join("fleet-1000.png").is_file(), "no screenshot was kept");
    Ok(())
}
