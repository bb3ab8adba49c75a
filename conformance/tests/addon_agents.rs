//! Template add-ons end to end: a hub, three `--profile cluster` stand-ins with real
//! klusterlets, and the sample add-on of `deploy/addons/hello` applied with kubectl as its
//! README says. The add-on lands on the placement's clusters only, its Deployment rendered per
//! cluster; its hub identity (the Secret on the stand-in) can do what its hub permission grants
//! in its own cluster's namespace and nothing in another's; it is Available once its workload
//! is ready; a config change rolls out one cluster at a time; a Lease-mode add-on follows its
//! Lease; uninstalling removes the work, the binding and the Secret, and the identity is
//! refused afterwards; a request for another cluster's add-on identity is never approved.

use std::time::Duration;

use base64::Engine as _;
use ocm_conformance::fleet::{Fleet, get};
use ocm_conformance::hub::{TestHub, eventually};
use ocm_conformance::kubectl::{self, Kubectl, Printed, create, merge_patch};
use reqwest::Method;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);
const AGENT_NS: &str = "open-cluster-management-agent-addon";
const MCAS: &str = "/apis/addon.open-cluster-management.io/v1beta1";
const DEPLOYMENT: &str =
    "/apis/apps/v1/namespaces/open-cluster-management-agent-addon/deployments/hello-agent";
const SECRET: &str =
    "/api/v1/namespaces/open-cluster-management-agent-addon/secrets/hello-hub-kubeconfig";

fn sample() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/addons/hello/hello.yaml").to_owned()
}

async fn mca(fleet: &Fleet, cluster: &str, name: &str) -> anyhow::Result<Option<Value>> {
    fleet.get(&format!("{MCAS}/namespaces/{cluster}/managedclusteraddons/{name}")).await
}

/// The status of an add-on's condition, with its reason.
fn condition(mca: &Value, type_: &str) -> Option<(String, String)> {
    let c = mca["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?;
    Some((c["status"].as_str()?.to_owned(), c["reason"].as_str()?.to_owned()))
}

async fn until_available(
    fleet: &Fleet,
    cluster: &str,
    name: &str,
    want: (&str, &str),
) -> anyhow::Result<()> {
    let last = std::sync::Mutex::new(Value::Null);
    let waited = eventually(&format!("{cluster}/{name} Available {want:?}"), WAIT, || async {
        let m = mca(fleet, cluster, name).await?;
        let got = m.as_ref().and_then(|m| condition(m, "Available"));
        *last.lock().expect("last") = m.map(|m| m["status"].clone()).unwrap_or_default();
        Ok((got == Some((want.0.to_owned(), want.1.to_owned()))).then_some(()))
    })
    .await;
    waited.map_err(|e| anyhow::anyhow!("{e}; last status: {}", last.lock().expect("last")))
}

/// The greeting argument of the hello agent's Deployment on a stand-in.
async fn greeting(c: &TestHub) -> anyhow::Result<Option<String>> {
    let d = get(c, DEPLOYMENT).await?;
    Ok(d.and_then(|d| {
        let args = d["spec"]["template"]["spec"]["containers"][0]["args"].as_array()?.clone();
        args.iter()
            .filter_map(Value::as_str)
            .find_map(|a| a.strip_prefix("--greeting=").map(str::to_owned))
    }))
}

/// kubectl with the add-on identity of the Secret on a stand-in.
async fn identity(c: &TestHub, dir: &std::path::Path) -> anyhow::Result<Kubectl> {
    let secret =
        get(c, SECRET).await?.ok_or_else(|| anyhow::anyhow!("no hub kubeconfig Secret"))?;
    identity_in(&secret, dir)
}

/// kubectl with the identity of a hub kubeconfig Secret, its files written to `dir`.
fn identity_in(secret: &Value, dir: &std::path::Path) -> anyhow::Result<Kubectl> {
    for key in ["kubeconfig", "tls.crt", "tls.key"] {
        let b = base64::engine::general_purpose::STANDARD
            .decode(secret["data"][key].as_str().unwrap_or(""))?;
        std::fs::write(dir.join(key), b)?;
    }
    Kubectl::with_kubeconfig(dir.join("kubeconfig"))
}

/// Plays the kubelet on a stand-in: the Deployment's pod is ready.
async fn ready(c: &TestHub) -> anyhow::Result<()> {
    let http = c.http()?;
    let body = json!({"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1}});
    let (code, out) = c
        .call(
            &http,
            Method::PATCH,
            &format!("{DEPLOYMENT}/status"),
            Some(&body),
            &[("content-type", "application/merge-patch+json")],
        )
        .await?;
    anyhow::ensure!(code == 200, "status patch: {code} {out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_template_addon_across_a_placement() -> anyhow::Result<()> {
    if kubectl::skip("the whole test") {
        return Ok(());
    }
    let args = ["--work-resync-seconds", "1", "--addon-resync-seconds", "1"];
    let fleet = Fleet::start(&["c1", "c2", "c3"], &args).await?;
    let k = Kubectl::new(&fleet.hub)?;
    k.ok(&["label", "managedcluster", "c1", "c2", "hello.addons.example.com/enabled=true"]).await?;
    k.ok(&["apply", "-f", &sample()]).await?;

    // Installed on the placement's clusters only, rendered per cluster.
    for c in ["c1", "c2"] {
        eventually(&format!("hello's Deployment on {c}"), WAIT, || async {
            get(&fleet.clusters[c], DEPLOYMENT).await
        })
        .await?;
    }
    assert!(mca(&fleet, "c3", "hello").await?.is_none(), "c3 is not selected");
    let d = get(&fleet.clusters["c1"], DEPLOYMENT).await?.expect("deployment");
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> =
        container["args"].as_array().expect("args").iter().filter_map(Value::as_str).collect();
    assert!(args.contains(&"--cluster-name=c1"), "{args:?}");
    assert!(args.contains(&"--hub-kubeconfig=/managed/hub-kubeconfig/kubeconfig"), "{args:?}");
    assert_eq!(greeting(&fleet.clusters["c1"]).await?.as_deref(), Some("hello from the hub"));
    assert_eq!(
        d["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
        "hello-hub-kubeconfig"
    );
    let work = fleet.get("/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks/addon-hello-deploy-0").await?.expect("deploy work");
    assert_eq!(work["metadata"]["ownerReferences"][0]["kind"], "ManagedClusterAddOn");
    assert_eq!(work["metadata"]["labels"]["open-cluster-management.io/addon-name"], "hello");

    // The hub identity on the stand-in: its own namespace yes, another cluster's no.
    for c in ["c1", "c2"] {
        eventually(&format!("hello's hub kubeconfig on {c}"), WAIT, || async {
            get(&fleet.clusters[c], SECRET).await
        })
        .await?;
    }
    let dir = tempfile::tempdir()?;
    let agent = identity(&fleet.clusters["c1"], dir.path()).await?;
    eventually("the binding lets c1's add-on read its namespace", WAIT, || async {
        Ok((agent.run(&["get", "configmaps", "-n", "c1"]).await?.code == 0).then_some(()))
    })
    .await?;
    agent.ok(&["create", "configmap", "from-addon", "-n", "c1", "--from-literal=k=v"]).await?;
    let denied = agent.run(&["get", "configmaps", "-n", "c2"]).await?;
    assert_ne!(denied.code, 0, "c1's add-on must not read c2's namespace");
    assert!(denied.stderr.contains("forbidden"), "{}", denied.stderr);
    let who = agent.ok(&["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]).await?;
    assert_eq!(
        who.trim(),
        "system:open-cluster-management:cluster:c1:addon:hello:agent:hello-agent"
    );

    // Available once the workload is ready (the stand-in has no kubelet: the test plays it).
    until_available(&fleet, "c1", "hello", ("Unknown", "NoProbeResult")).await?;
    for c in ["c1", "c2"] {
        ready(&fleet.clusters[c]).await?;
        until_available(&fleet, c, "hello", ("True", "ProbeAvailable")).await?;
    }
    let table = Printed::parse(&k.ok(&["get", "mca", "-A"]).await?)?;
    assert_eq!(table.names(), ["c1", "c2"], "{table:?}");
    assert_eq!(table.cell(0, "NAME")?, "hello");
    assert_eq!(table.cell(0, "AVAILABLE")?, "True");
    let labels = fleet
        .get("/apis/cluster.open-cluster-management.io/v1/managedclusters/c1")
        .await?
        .expect("c1");
    assert_eq!(
        labels["metadata"]["labels"]["feature.open-cluster-management.io/addon-hello"],
        "available"
    );

    // A config change rolls out one cluster at a time (Progressive, maxConcurrency 1): c1
    // first, and c2 never holds it before c1 does.
    let adc = "/apis/addon.open-cluster-management.io/v1alpha1/namespaces/open-cluster-management-addon/addondeploymentconfigs/hello-config";
    let http = fleet.hub.http()?;
    merge_patch(
        &fleet.hub,
        &http,
        adc,
        json!({"spec": {"customizedVariables": [{"name": "GREETING", "value": "v2"}]}}),
    )
    .await?;
    let new = Some("v2".to_owned());
    let deadline = tokio::time::Instant::now() + WAIT;
    // With `maxConcurrency: 1`, c2 waits until c1's work is applied and available at its new
    // generation, which takes at least one agent resync: some poll must see c1 alone on the new
    // config. `All` would move both within one poll.
    let mut c1_alone = false;
    loop {
        let g1 = greeting(&fleet.clusters["c1"]).await?;
        let g2 = greeting(&fleet.clusters["c2"]).await?;
        assert!(!(g2 == new && g1 != new), "c2 took the new config before c1");
        c1_alone |= g1 == new && g2 != new;
        if g1 == new && g2 == new {
            break;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the config never reached both clusters"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(c1_alone, "c1 and c2 took the new config at once: not one cluster at a time");
    let cma = fleet.get(&format!("{MCAS}/clustermanagementaddons/hello")).await?.expect("cma");
    assert_eq!(cma["status"]["installProgressions"][0]["name"], "hello", "{cma}");
    assert!(
        cma["status"]["defaultConfigReferences"].as_array().is_some_and(|r| r.len() == 2),
        "{cma}"
    );

    // A Lease-mode add-on follows its Lease on the cluster.
    let hub_http = fleet.hub.http()?;
    create(
        &fleet.hub,
        &hub_http,
        &format!("{MCAS}/clustermanagementaddons"),
        json!({"metadata": {"name": "leasey"}, "spec": {}}),
    )
    .await?;
    create(
        &fleet.hub,
        &hub_http,
        &format!("{MCAS}/namespaces/c3/managedclusteraddons"),
        json!({"metadata": {"name": "leasey"}, "spec": {}}),
    )
    .await?;
    until_available(&fleet, "c3", "leasey", ("Unknown", "ManagedClusterAddOnLeaseNotFound"))
        .await?;
    let c3 = &fleet.clusters["c3"];
    let c3_http = c3.http()?;
    create(c3, &c3_http, "/api/v1/namespaces", json!({"metadata": {"name": AGENT_NS}})).await?;
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{AGENT_NS}/leases");
    let now = ocm_apiserver::machinery::object::now_rfc3339();
    let micro = now.replace('Z', ".000000Z");
    create(c3, &c3_http, &leases, json!({"metadata": {"name": "leasey"}, "spec": {"renewTime": micro, "leaseDurationSeconds": 60}})).await?;
    until_available(&fleet, "c3", "leasey", ("True", "ManagedClusterAddOnLeaseUpdated")).await?;
    let stale = "2020-01-01T00:00:00.000000Z";
    merge_patch(c3, &c3_http, &format!("{leases}/leasey"), json!({"spec": {"renewTime": stale}}))
        .await?;
    until_available(&fleet, "c3", "leasey", ("False", "ManagedClusterAddOnLeaseUpdateStopped"))
        .await?;
    ocm_conformance::kubectl::delete(c3, &c3_http, &format!("{leases}/leasey")).await?;
    until_available(&fleet, "c3", "leasey", ("Unknown", "ManagedClusterAddOnLeaseNotFound"))
        .await?;

    // A request for c1's add-on identity made by someone else is never approved.
    let forged = forged_request()?;
    create(
        &fleet.hub,
        &hub_http,
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        forged,
    )
    .await?;

    // Uninstall from c2: the work, the Deployment, the Secret go; the identity is refused.
    let dir2 = tempfile::tempdir()?;
    let c2_agent = identity(&fleet.clusters["c2"], dir2.path()).await?;
    c2_agent.ok(&["get", "configmaps", "-n", "c2"]).await?;
    k.ok(&["label", "managedcluster", "c2", "hello.addons.example.com/enabled-"]).await?;
    eventually("hello gone from c2", WAIT, || async {
        let gone = mca(&fleet, "c2", "hello").await?.is_none()
            && get(&fleet.clusters["c2"], DEPLOYMENT).await?.is_none()
            && get(&fleet.clusters["c2"], SECRET).await?.is_none()
            && fleet.get("/apis/rbac.authorization.k8s.io/v1/namespaces/c2/rolebindings/open-cluster-management:hello:clusterrole:agent").await?.is_none();
        Ok(gone.then_some(()))
    })
    .await?;
    let refused = c2_agent.run(&["get", "configmaps", "-n", "c2"]).await?;
    assert_ne!(refused.code, 0, "the removed add-on's identity must be refused");
    assert!(get(&fleet.clusters["c1"], SECRET).await?.is_some(), "c1 keeps its add-on");

    let csr = fleet
        .get("/apis/certificates.k8s.io/v1/certificatesigningrequests/forged-addon")
        .await?
        .expect("csr");
    assert!(
        csr["status"]["conditions"].as_array().is_none_or(Vec::is_empty),
        "forged request approved: {csr}"
    );
    Ok(())
}

/// A CSR for c1's add-on identity, made by the admin rather than c1's agent.
fn forged_request() -> anyhow::Result<Value> {
    let cn = "system:open-cluster-management:cluster:c1:addon:hello:agent:hello-agent";
    let orgs = [
        "system:open-cluster-management:cluster:c1:addon:hello",
        "system:open-cluster-management:addon:hello",
    ];
    let mut csr = ocm_conformance::csr::client_csr(Some("forged-addon"), "c1", cn, &orgs)?;
    csr["metadata"]["labels"]["open-cluster-management.io/addon-name"] = json!("hello");
    Ok(csr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pre_delete_hook_runs_before_removal() -> anyhow::Result<()> {
    let args = ["--work-resync-seconds", "1", "--addon-resync-seconds", "1"];
    let fleet = Fleet::start(&["c1"], &args).await?;
    let http = fleet.hub.http()?;
    let c1 = &fleet.clusters["c1"];
    let manifests = json!([
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hooked"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "state", "namespace": "hooked"},
         "data": {"cluster": "{{CLUSTER_NAME}}"}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "cleanup", "namespace": "hooked",
            "annotations": {"addon.open-cluster-management.io/addon-pre-delete": ""}},
         "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}}},
    ]);
    let template = json!({"metadata": {"name": "hooked-1"},
        "spec": {"addonName": "hooked", "agentSpec": {"workload": {"manifests": manifests}}}});
    create(
        &fleet.hub,
        &http,
        "/apis/addon.open-cluster-management.io/v1alpha1/addontemplates",
        template,
    )
    .await?;
    // The add-on at v1beta1 (defaultConfigs), its install at v1beta1 by hand (Manual).
    let cma = json!({"apiVersion": "addon.open-cluster-management.io/v1beta1", "kind": "ClusterManagementAddOn",
        "metadata": {"name": "hooked"},
        "spec": {"defaultConfigs": [{"group": "addon.open-cluster-management.io", "resource": "addontemplates", "name": "hooked-1"}],
                 "installStrategy": {"type": "Manual"}}});
    create(&fleet.hub, &http, &format!("{MCAS}/clustermanagementaddons"), cma).await?;
    let path = format!("{MCAS}/namespaces/c1/managedclusteraddons");
    create(&fleet.hub, &http, &path, json!({"metadata": {"name": "hooked"}, "spec": {}})).await?;

    let cm = "/api/v1/namespaces/hooked/configmaps/state";
    eventually("the add-on's ConfigMap on c1", WAIT, || async { get(c1, cm).await }).await?;
    assert_eq!(get(c1, cm).await?.expect("cm")["data"]["cluster"], "c1");
    until_available(&fleet, "c1", "hooked", ("True", "WorkApplied")).await?;
    let job = "/apis/batch/v1/namespaces/hooked/jobs/cleanup";
    assert!(get(c1, job).await?.is_none(), "the hook waits for the removal");
    let added = mca(&fleet, "c1", "hooked").await?.expect("mca");
    assert!(
        added["metadata"]["finalizers"].as_array().is_some_and(|f| f
            .iter()
            .any(|f| f == "addon.open-cluster-management.io/addon-pre-delete")),
        "{added}"
    );

    ocm_conformance::kubectl::delete(&fleet.hub, &http, &format!("{path}/hooked")).await?;
    eventually("the hook Job on c1", WAIT, || async { get(c1, job).await }).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(mca(&fleet, "c1", "hooked").await?.is_some(), "the add-on waits for its hook");
    assert!(get(c1, cm).await?.is_some(), "the add-on's objects stay until the hook completed");
    let m = mca(&fleet, "c1", "hooked").await?.expect("mca");
    assert_eq!(
        condition(&m, "HookManifestCompleted"),
        Some(("False".into(), "HookManifestIsNotCompleted".into()))
    );

    // Play the Job controller: the hook completed.
    let c1_http = c1.http()?;
    let done =
        json!({"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}});
    let (code, out) = c1
        .call(
            &c1_http,
            Method::PATCH,
            &format!("{job}/status"),
            Some(&done),
            &[("content-type", "application/merge-patch+json")],
        )
        .await?;
    anyhow::ensure!(code == 200, "job status: {code} {out}");
    eventually("the add-on and its objects gone", WAIT, || async {
        let gone = mca(&fleet, "c1", "hooked").await?.is_none() && get(c1, cm).await?.is_none();
        Ok(gone.then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_custom_signer_registration_is_signed_by_its_ca() -> anyhow::Result<()> {
    let args = ["--work-resync-seconds", "1", "--addon-resync-seconds", "1"];
    let fleet = Fleet::start(&["c1"], &args).await?;
    let http = fleet.hub.http()?;
    // The signer's CA, in the Secret the template names.
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, "hello signer CA");
    let ca_cert = ca.self_signed(&ca_key)?;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let (code, _) = fleet
        .hub
        .call(
            &http,
            Method::POST,
            "/api/v1/namespaces",
            Some(&json!({"metadata": {"name": "open-cluster-management-hub"}})),
            &[],
        )
        .await?;
    anyhow::ensure!(code == 201 || code == 409, "namespace: {code}");
    let secret = json!({"metadata": {"name": "hello-signer-ca"}, "type": "kubernetes.io/tls",
        "data": {"tls.crt": b64(&ca_cert.pem()), "tls.key": b64(&ca_key.serialize_pem())}});
    create(&fleet.hub, &http, "/api/v1/namespaces/open-cluster-management-hub/secrets", secret)
        .await?;
    let template = json!({"metadata": {"name": "signed-1"}, "spec": {"addonName": "signed",
        "agentSpec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "signed", "namespace": "default"}}]}},
        "registration": [{"type": "CustomSigner", "customSigner": {
            "signerName": "example.com/hello-signer", "signingCA": {"name": "hello-signer-ca"}}}]}});
    create(
        &fleet.hub,
        &http,
        "/apis/addon.open-cluster-management.io/v1alpha1/addontemplates",
        template,
    )
    .await?;
    let cma = json!({"metadata": {"name": "signed"}, "spec": {"defaultConfigs": [
        {"group": "addon.open-cluster-management.io", "resource": "addontemplates", "name": "signed-1"}]}});
    create(&fleet.hub, &http, &format!("{MCAS}/clustermanagementaddons"), cma).await?;
    create(
        &fleet.hub,
        &http,
        &format!("{MCAS}/namespaces/c1/managedclusteraddons"),
        json!({"metadata": {"name": "signed"}, "spec": {}}),
    )
    .await?;

    let path = format!(
        "/api/v1/namespaces/{AGENT_NS}/secrets/signed-example.com-hello-signer-client-cert"
    );
    let c1 = &fleet.clusters["c1"];
    let secret = eventually("the custom signer's certificate on c1", WAIT, || async {
        get(c1, &path).await
    })
    .await?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(secret["data"]["tls.crt"].as_str().unwrap_or(""))?;
    let (_, parsed) = x509_parser::pem::parse_x509_pem(&pem)?;
    let cert = parsed.parse_x509()?;
    assert_eq!(cert.issuer().to_string(), "CN=hello signer CA");
    let cn = cert.subject().iter_common_name().next().and_then(|c| c.as_str().ok()).unwrap_or("");
    assert_eq!(cn, "system:open-cluster-management:cluster:c1:addon:signed:agent:signed-agent");
    assert!(
        secret["data"].get("kubeconfig").is_none(),
        "a custom signer's Secret has no kubeconfig"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_addon_identity_is_rotated_before_it_runs_out() -> anyhow::Result<()> {
    let args = ["--work-resync-seconds", "1", "--addon-resync-seconds", "1"];
    // Certificates of 20 s: the agent renews at a fifth left, its own and its add-ons'.
    let fleet = Fleet::start_with(&["c1"], &args, |c| {
        c.registration.signing_duration = Duration::from_secs(20);
    })
    .await?;
    let http = fleet.hub.http()?;
    let template = json!({"metadata": {"name": "rotated-1"}, "spec": {"addonName": "rotated",
        "agentSpec": {"workload": {"manifests": []}},
        "registration": [{"type": "KubeClient"}]}});
    create(
        &fleet.hub,
        &http,
        "/apis/addon.open-cluster-management.io/v1alpha1/addontemplates",
        template,
    )
    .await?;
    let cma = json!({"metadata": {"name": "rotated"}, "spec": {"defaultConfigs": [
        {"group": "addon.open-cluster-management.io", "resource": "addontemplates", "name": "rotated-1"}]}});
    create(&fleet.hub, &http, &format!("{MCAS}/clustermanagementaddons"), cma).await?;
    create(
        &fleet.hub,
        &http,
        &format!("{MCAS}/namespaces/c1/managedclusteraddons"),
        json!({"metadata": {"name": "rotated"}, "spec": {}}),
    )
    .await?;
    let path = format!("/api/v1/namespaces/{AGENT_NS}/secrets/rotated-hub-kubeconfig");
    let c1 = &fleet.clusters["c1"];
    let first =
        eventually("the add-on's identity on c1", WAIT, || async { get(c1, &path).await }).await?;
    let first = first["data"]["tls.crt"].clone();
    let second = eventually("a renewed identity", WAIT, || async {
        Ok(get(c1, &path).await?.filter(|s| s["data"]["tls.crt"] != first))
    })
    .await?;
    let dir = tempfile::tempdir()?;
    let renewed = identity_in(&second, dir.path())?;
    let who = renewed.ok(&["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]).await?;
    assert_eq!(
        who.trim(),
        "system:open-cluster-management:cluster:c1:addon:rotated:agent:rotated-agent"
    );
    Ok(())
}

/// kubectl against a stand-in with a bearer token and the CA of a managed service account's
/// Secret, its kubeconfig written to `dir`.
fn with_token(c: &TestHub, secret: &Value, dir: &std::path::Path) -> anyhow::Result<Kubectl> {
    let kubeconfig = json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": c.url, "certificate-authority-data": secret["data"]["ca.crt"]}}],
        "users": [{"name": "u", "user": {"token": String::from_utf8(base64::engine::general_purpose::STANDARD.decode(secret["data"]["token"].as_str().unwrap_or(""))?)?}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    });
    std::fs::write(dir.join("kubeconfig"), kubeconfig.to_string())?;
    Kubectl::with_kubeconfig(dir.join("kubeconfig"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_managed_service_account_token_works_and_is_rotated() -> anyhow::Result<()> {
    if kubectl::skip("the whole test") {
        return Ok(());
    }
    let args = ["--work-resync-seconds", "1", "--addon-resync-seconds", "1"];
    let fleet = Fleet::start(&["c1"], &args).await?;
    let http = fleet.hub.http()?;
    let k = Kubectl::new(&fleet.hub)?;
    let msa_file =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/addons/managed-serviceaccount.yaml");
    k.ok(&["apply", "-f", msa_file]).await?;
    let install = json!({"metadata": {"name": "managed-serviceaccount"}, "spec": {}});
    create(&fleet.hub, &http, &format!("{MCAS}/namespaces/c1/managedclusteraddons"), install)
        .await?;
    let msas = "/apis/authentication.open-cluster-management.io/v1beta1/namespaces/c1/managedserviceaccounts";
    let msa = json!({"metadata": {"name": "reader"}, "spec": {"rotation": {"validity": "24h"}}});
    create(&fleet.hub, &http, msas, msa).await?;

    let secret_path = "/api/v1/namespaces/c1/secrets/reader";
    let first = eventually("the token's Secret on the hub", WAIT, || async {
        Ok(fleet.get(secret_path).await?.filter(|s| s["data"]["token"].is_string()))
    })
    .await?;
    let reported = eventually("the account's status", WAIT, || async {
        Ok(fleet
            .get(&format!("{msas}/reader"))
            .await?
            .filter(|m| m["status"]["tokenSecretRef"]["name"] == "reader"))
    })
    .await?;
    assert!(reported["status"]["expirationTimestamp"].is_string(), "{reported}");
    assert_eq!(first["metadata"]["ownerReferences"][0]["kind"], "ManagedServiceAccount");
    let c1 = &fleet.clusters["c1"];
    let dir = tempfile::tempdir()?;
    let old = with_token(c1, &first, dir.path())?;
    let who = old.ok(&["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"]).await?;
    assert_eq!(who.trim(), format!("system:serviceaccount:{AGENT_NS}:reader"));

    // The account's ServiceAccount recreated on the cluster: the old token no longer
    // authenticates there, so the agent issues and projects a new one.
    let sa = format!("/api/v1/namespaces/{AGENT_NS}/serviceaccounts/reader");
    ocm_conformance::kubectl::delete(c1, &c1.http()?, &sa).await?;
    let second = eventually("a new token", WAIT, || async {
        Ok(fleet.get(secret_path).await?.filter(|s| s["data"]["token"] != first["data"]["token"]))
    })
    .await?;
    let dir2 = tempfile::tempdir()?;
    let new = with_token(c1, &second, dir2.path())?;
    new.ok(&["auth", "whoami"]).await?;
    assert_ne!(old.run(&["auth", "whoami"]).await?.code, 0, "the old token must be refused");

    // The account's removal takes its ServiceAccount from the cluster and its Secret from the hub.
    ocm_conformance::kubectl::delete(&fleet.hub, &http, &format!("{msas}/reader")).await?;
    eventually("the account gone everywhere", WAIT, || async {
        let gone = get(c1, &sa).await?.is_none() && fleet.get(secret_path).await?.is_none();
        Ok(gone.then_some(()))
    })
    .await?;
    Ok(())
}
