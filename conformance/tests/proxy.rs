//! The cluster proxy end to end: real klusterlets keep tunnels to the hub, and requests to
//! `/apis/cluster.open-cluster-management.io/v1/managedclusters/{name}/proxy/…` reach their
//! `--profile cluster` stand-ins (which honour impersonation as kube-apiserver does). kubectl
//! with `ocm-hub kubeconfig`'s file gets, lists, watches, applies and deletes; the hub's RBAC
//! decides who may proxy to which cluster and the cluster's RBAC what `ocm-hub:<user>` may do
//! there; the caller's own identity headers never reach a cluster; paths cannot leave the
//! cluster's API; one cluster's agent cannot answer for another; a cluster that refuses
//! proxying gets 503; an agent restart ends proxied watches and the tunnel comes back.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use ocm_conformance::fleet::Fleet;
use ocm_conformance::hub::{TestHub, eventually};
use ocm_conformance::kubectl::Kubectl;
use ocm_conformance::programs;
use reqwest::Method;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(60);

fn proxy(cluster: &str, path: &str) -> String {
    format!("/apis/cluster.open-cluster-management.io/v1/managedclusters/{cluster}/proxy{path}")
}

/// Waits until `cluster`'s tunnel answers through the hub.
async fn tunnel_open(hub: &TestHub, cluster: &str) -> anyhow::Result<()> {
    let http = hub.http()?;
    eventually(&format!("{cluster}'s tunnel"), WAIT, || async {
        let (code, _) =
            hub.call(&http, Method::GET, &proxy(cluster, "/version"), None, &[]).await?;
        Ok((code == 200).then_some(()))
    })
    .await
}

/// Who the cluster says the caller is: a SelfSubjectReview through the proxy.
async fn whoami_on(
    hub: &TestHub,
    http: &reqwest::Client,
    cluster: &str,
    headers: &[(&str, &str)],
) -> anyhow::Result<(u16, Value)> {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let path = proxy(cluster, "/apis/authentication.k8s.io/v1/selfsubjectreviews");
    hub.call(http, Method::POST, &path, Some(&review), headers).await
}

fn user_info(review: &Value) -> (String, Vec<String>) {
    let user = &review["status"]["userInfo"];
    let name = user["username"].as_str().unwrap_or_default().to_owned();
    let groups = user["groups"]
        .as_array()
        .map(|g| g.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    (name, groups)
}

/// A ClusterRole `name` with `rules` and its ClusterRoleBinding to `subject` (`kind`, `name`).
fn grant(name: &str, rules: Value, subject: Value) -> [Value; 2] {
    [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name}, "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [subject]}),
    ]
}

fn write_kubeconfig(
    hub: &TestHub,
    cluster: &str,
    source: Option<&std::path::Path>,
) -> anyhow::Result<std::path::PathBuf> {
    let mut cmd = std::process::Command::new(programs::ocm_hub()?);
    cmd.args(["kubeconfig", cluster, "--data-dir"]).arg(hub.path());
    if let Some(source) = source {
        cmd.arg("--kubeconfig").arg(source);
    }
    let out = cmd.output()?;
    anyhow::ensure!(
        out.status.success(),
        "ocm-hub kubeconfig: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = hub.path().join(format!("{cluster}-proxy.kubeconfig"));
    std::fs::write(&path, &out.stdout)?;
    Ok(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_acts_on_a_cluster_through_the_hub() -> anyhow::Result<()> {
    if ocm_conformance::kubectl::skip("the cluster proxy with kubectl") {
        return Ok(());
    }
    let fleet = Fleet::start(&["c1", "c2"], &[]).await?;
    let hub = &fleet.hub;
    tunnel_open(hub, "c1").await?;
    tunnel_open(hub, "c2").await?;
    let (c1, c2) = (&fleet.clusters["c1"], &fleet.clusters["c2"]);
    let http = hub.http()?;

    // The hub's admin is the cluster's `ocm-hub:` admin, never its system:masters: the
    // cluster refuses until it binds that group.
    let (code, me) = hub
        .call(
            &http,
            Method::POST,
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            Some(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
            &[],
        )
        .await?;
    anyhow::ensure!(code == 201, "whoami on the hub: {code} {me}");
    let (admin, admin_groups) = user_info(&me);
    let (code, seen) = whoami_on(hub, &http, "c1", &[]).await?;
    anyhow::ensure!(code == 201, "whoami through the proxy: {code} {seen}");
    let (name, groups) = user_info(&seen);
    assert_eq!(name, format!("ocm-hub:{admin}"));
    let mut want: Vec<String> = admin_groups.iter().map(|g| format!("ocm-hub:{g}")).collect();
    want.push("system:authenticated".into());
    assert_eq!(groups, want, "the cluster sees the hub's groups under the prefix");
    let (code, body) =
        hub.call(&http, Method::GET, &proxy("c1", "/api/v1/namespaces"), None, &[]).await?;
    assert_eq!(code, 403, "the cluster decides: {body}");
    assert!(
        body["message"].as_str().unwrap_or_default().contains(&format!("ocm-hub:{admin}")),
        "{body}"
    );
    c1.create_rbac(grant("ocm-hub-admins", json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
        json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "ocm-hub:system:masters"}))).await?;
    answers(hub, &http, &proxy("c1", "/api/v1/namespaces"), 200, "NamespaceList").await?;

    // `ocm-hub kubeconfig c1` and kubectl: get, apply, watch, delete on c1 and only there.
    for (cluster, ns) in [(c1, "only-on-c1"), (c2, "only-on-c2")] {
        let (code, body) = cluster
            .call(
                &cluster.http()?,
                Method::POST,
                "/api/v1/namespaces",
                Some(&json!({"metadata": {"name": ns}})),
                &[],
            )
            .await?;
        anyhow::ensure!(code == 201, "{code} {body}");
    }
    let kubectl = Kubectl::with_kubeconfig(write_kubeconfig(hub, "c1", None)?)?;
    let namespaces = kubectl.ok(&["get", "ns", "-o", "name"]).await?;
    assert!(namespaces.contains("namespace/only-on-c1"), "{namespaces}");
    assert!(!namespaces.contains("only-on-c2"), "{namespaces}");
    let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: proxied\n  namespace: only-on-c1\ndata:\n  k: v1\n";
    let run = kubectl.run_with(&["apply", "-f", "-"], Some(manifest)).await?;
    anyhow::ensure!(run.code == 0, "apply through the proxy: {run:?}");
    let stored =
        ocm_conformance::fleet::get(c1, "/api/v1/namespaces/only-on-c1/configmaps/proxied").await?;
    assert_eq!(stored.context("applied on c1")?["data"]["k"], "v1");
    let mut watching = kubectl
        .spawn_watching(&[
            "get",
            "cm",
            "proxied",
            "-n",
            "only-on-c1",
            "-w",
            "-o",
            "custom-columns=NAME:.metadata.name,K:.data.k",
        ])
        .await?;
    let (code, body) = c1
        .call(
            &c1.http()?,
            Method::PATCH,
            "/api/v1/namespaces/only-on-c1/configmaps/proxied",
            Some(&json!({"data": {"k": "changed-on-the-cluster"}})),
            &[("content-type", "application/merge-patch+json")],
        )
        .await?;
    anyhow::ensure!(code == 200, "{code} {body}");
    watching.printed("changed-on-the-cluster").await?;
    drop(watching);
    kubectl.ok(&["delete", "cm", "proxied", "-n", "only-on-c1"]).await?;
    let gone =
        ocm_conformance::fleet::get(c1, "/api/v1/namespaces/only-on-c1/configmaps/proxied").await?;
    assert!(gone.is_none(), "deleted through the proxy");
    let other = Kubectl::with_kubeconfig(write_kubeconfig(hub, "c2", None)?)?;
    let run = other.run(&["get", "ns", "only-on-c2"]).await?;
    assert_ne!(run.code, 0, "c2 has not bound the hub's admins: {run:?}");
    assert!(run.stderr.contains("forbidden"), "{run:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_hub_and_the_cluster_each_decide_and_no_identity_leaks() -> anyhow::Result<()> {
    let fleet = Fleet::start(&["c1", "c2"], &[]).await?;
    let hub = &fleet.hub;
    tunnel_open(hub, "c1").await?;
    tunnel_open(hub, "c2").await?;
    let c1 = &fleet.clusters["c1"];
    let bob = hub.http_as("bob", Some("devs"))?;
    let list = proxy("c1", "/api/v1/namespaces");

    // No proxy right on the hub: the hub refuses.
    let (code, body) = hub.call(&bob, Method::GET, &list, None, &[]).await?;
    assert_eq!(code, 403, "{body}");
    assert!(
        body["message"].as_str().unwrap_or_default().contains("managedclusters/proxy"),
        "{body}"
    );

    // With the right for c1 only, the hub refuses c2, and c1's cluster refuses bob until it
    // binds ocm-hub:bob.
    hub.create_rbac(grant("proxy-c1", json!([{"apiGroups": ["cluster.open-cluster-management.io"],
        "resources": ["managedclusters/proxy"], "resourceNames": ["c1"], "verbs": ["get", "create"]}]),
        json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}))).await?;
    // RBAC is followed a moment behind its writes, on the hub as on the cluster.
    answers(hub, &bob, &list, 403, "\"ocm-hub:bob\"").await?;
    let (code, body) =
        hub.call(&bob, Method::GET, &proxy("c2", "/api/v1/namespaces"), None, &[]).await?;
    assert_eq!(code, 403, "{body}");
    assert!(
        body["message"].as_str().unwrap_or_default().contains("managedclusters/proxy"),
        "the hub refuses: {body}"
    );
    c1.create_rbac(grant(
        "hub-bob",
        json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]}]),
        json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "ocm-hub:bob"}),
    ))
    .await?;
    answers(hub, &bob, &list, 200, "NamespaceList")
        .await
        .context("allowed once c1 binds ocm-hub:bob")?;

    // The caller's own identity headers never reach the cluster.
    let forged = [
        ("X-Remote-User", "root"),
        ("X-Remote-Group", "system:masters"),
        ("X-Ocm-Proxy-User", "root"),
        ("X-Ocm-Proxy-Group", "system:masters"),
        ("X-Ocm-Proxy-Token", "not-a-token"),
    ];
    let (code, seen) = whoami_on(hub, &bob, "c1", &forged).await?;
    anyhow::ensure!(code == 201, "{code} {seen}");
    let (name, groups) = user_info(&seen);
    assert_eq!(name, "ocm-hub:bob");
    assert_eq!(groups, ["ocm-hub:devs", "ocm-hub:system:authenticated", "system:authenticated"]);
    let (code, body) = whoami_on(hub, &bob, "c1", &[("Impersonate-User", "system:admin")]).await?;
    assert_eq!(code, 403, "bob may not impersonate on the hub: {body}");
    let admin = hub.http()?;
    let impersonating = [("Impersonate-User", "alice"), ("Impersonate-Group", "system:masters")];
    let (code, seen) = whoami_on(hub, &admin, "c1", &impersonating).await?;
    anyhow::ensure!(code == 201, "{code} {seen}");
    let (name, groups) = user_info(&seen);
    assert_eq!(name, "ocm-hub:alice", "the hub's impersonation, under the prefix on the cluster");
    assert_eq!(
        groups,
        ["ocm-hub:system:masters", "ocm-hub:system:authenticated", "system:authenticated"]
    );

    // Paths cannot leave the cluster's API, nor reach another cluster through this one's.
    let escapes = [
        "/api/../../../../api/v1/namespaces",
        "/api/%2e%2e/%2e%2e/metrics",
        "/api/v1%2F..%2F..%2Fmetrics",
        "/api/..%5C..%5Cmetrics",
        "/https:%2F%2Fexample.com/api",
        "/../../c2/proxy/api/v1/namespaces",
    ];
    for path in escapes {
        let (code, body) = curl_as_admin(hub, &proxy("c1", path)).await?;
        assert_eq!(code, 400, "{path}: {body}");
        assert!(body.contains("\"reason\":\"BadRequest\""), "{path}: {body}");
    }
    for path in ["//example.com/api", "/http://example.com/api"] {
        let (code, _) = curl_as_admin(hub, &proxy("c1", path)).await?;
        assert_eq!(code, 404, "{path}");
    }
    // An upgrade (kubectl exec's), over HTTP/1.1 where it exists.
    let upgrade = ["--http1.1", "-H", "Connection: Upgrade", "-H", "Upgrade: websocket"];
    let exec = proxy("c1", "/api/v1/namespaces/default/pods/p/exec?command=sh");
    let (code, body) = curl_as_admin_with(hub, &exec, &upgrade).await?;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("not supported"), "{body}");
    Ok(())
}

/// Waits until GET `path` answers `code` with a body (a Status's message, else the body)
/// containing `text`.
async fn answers(
    hub: &TestHub,
    client: &reqwest::Client,
    path: &str,
    code: u16,
    text: &str,
) -> anyhow::Result<()> {
    eventually(&format!("GET {path} answering {code} with {text:?}"), WAIT, || async {
        let (got, body) = hub.call(client, Method::GET, path, None, &[]).await?;
        let said = body["message"].as_str().map_or_else(|| body.to_string(), str::to_owned);
        Ok((got == code && said.contains(text)).then_some(()))
    })
    .await
}

/// GET `path` on the hub as its admin with curl, sending the path exactly as written.
async fn curl_as_admin(hub: &TestHub, path: &str) -> anyhow::Result<(u16, String)> {
    curl_as_admin_with(hub, path, &[]).await
}

/// [`curl_as_admin`] with more curl arguments.
async fn curl_as_admin_with(
    hub: &TestHub,
    path: &str,
    args: &[&str],
) -> anyhow::Result<(u16, String)> {
    let (crt, key) = hub.certificate_for("curl-admin", Some("system:masters"))?;
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("c.crt"), crt)?;
    std::fs::write(dir.path().join("c.key"), key)?;
    let out = tokio::process::Command::new(programs::required("curl", "OCM_CURL", "curl")?)
        .args(args)
        .args(["-s", "--path-as-is", "-w", "\n%{http_code}", "--cacert"])
        .arg(hub.path().join("pki/ca.crt"))
        .arg("--cert")
        .arg(dir.path().join("c.crt"))
        .arg("--key")
        .arg(dir.path().join("c.key"))
        .arg(format!("{}{path}", hub.url))
        .output()
        .await?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').context("curl printed no status")?;
    Ok((code.trim().parse()?, body.to_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_clusters_agent_cannot_answer_for_another() -> anyhow::Result<()> {
    let fleet = Fleet::start(&["c1", "c2"], &[]).await?;
    let hub = &fleet.hub;
    tunnel_open(hub, "c1").await?;
    tunnel_open(hub, "c2").await?;
    let admin = hub.http()?;
    // c1's own credentials open a tunnel that answers everything with "forged".
    let dir = fleet.dirs[0].path();
    let (crt, key) = (
        std::fs::read_to_string(dir.join("tls.crt"))?,
        std::fs::read_to_string(dir.join("tls.key"))?,
    );
    let forged =
        tokio::spawn(forged_tunnel(hub.url.clone(), hub.path().join("pki/ca.crt"), crt, key));
    eventually("the forged tunnel takes c1's place", WAIT, || async {
        let (code, body) =
            hub.call(&admin, Method::GET, &proxy("c1", "/version"), None, &[]).await?;
        Ok((code == 200 && body == "forged").then_some(()))
    })
    .await?;
    // It answers for c1, whose identity it holds, and never for c2.
    for _ in 0..20 {
        let (code, body) =
            hub.call(&admin, Method::GET, &proxy("c2", "/version"), None, &[]).await?;
        assert_eq!(code, 200);
        assert!(body.get("gitVersion").is_some(), "c2's own answer: {body}");
    }
    forged.abort();
    // A certificate that is not an agent's opens no tunnel: the hub closes it.
    let (crt, key) = hub.certificate_for(
        "system:open-cluster-management:c2",
        Some("system:open-cluster-management:c2"),
    )?;
    let refused = forged_tunnel(hub.url.clone(), hub.path().join("pki/ca.crt"), crt, key);
    // Whether the handshake or the first accept saw the close, the connection ends.
    let _ended = tokio::time::timeout(Duration::from_secs(20), refused)
        .await
        .context("the hub kept a tunnel of a certificate that is not an agent's open")?;
    let (_, body) = hub.call(&admin, Method::GET, &proxy("c2", "/version"), None, &[]).await?;
    assert!(body.get("gitVersion").is_some(), "c2's own answer: {body}");
    Ok(())
}

/// A tunnel to the hub with `crt`/`key`, answering every request with `forged`, until the hub
/// ends it.
async fn forged_tunnel(
    url: String,
    ca: std::path::PathBuf,
    crt: String,
    key: String,
) -> anyhow::Result<()> {
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_file_iter(&ca)? {
        roots.add(c?)?;
    }
    let chain = rustls::pki_types::CertificateDer::pem_slice_iter(crt.as_bytes())
        .collect::<Result<Vec<_>, _>>()?;
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes())?;
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_client_auth_cert(chain, key)?;
    config.alpn_protocols = vec![ocm_proto::tunnel::ALPN.to_vec()];
    let addr = url.trim_start_matches("https://");
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).to_owned();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(rustls::pki_types::ServerName::try_from(host)?, tcp)
        .await?;
    let mut conn = h2::server::handshake(tls).await?;
    while let Some(accepted) = conn.accept().await {
        let (_req, mut respond) = accepted?;
        let mut send = respond.send_response(http::Response::new(()), false)?;
        send.send_data(bytes::Bytes::from_static(b"forged"), true)?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusing_cluster_gets_503_and_an_agent_restart_ends_watches_cleanly()
-> anyhow::Result<()> {
    let mut fleet = Fleet::start(&["c1"], &["--enable-proxy=false"]).await?;
    let hub = &fleet.hub;
    let admin = hub.http()?;
    // Its agent is running (its cluster Available) and opens no tunnel.
    eventually("c1 Available", WAIT, || async {
        let mc =
            fleet.get("/apis/cluster.open-cluster-management.io/v1/managedclusters/c1").await?;
        let available =
            mc.as_ref().and_then(|m| m["status"]["conditions"].as_array()).is_some_and(|cs| {
                cs.iter().any(|c| {
                    c["type"] == "ManagedClusterConditionAvailable" && c["status"] == "True"
                })
            });
        Ok(available.then_some(()))
    })
    .await?;
    let (code, body) = hub.call(&admin, Method::GET, &proxy("c1", "/version"), None, &[]).await?;
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["reason"], "ServiceUnavailable");
    assert!(
        body["message"].as_str().unwrap_or_default().contains("--enable-proxy=false"),
        "{body}"
    );

    // Restarted with proxying on, the agent opens its tunnel.
    let mut old = fleet.agents.remove(0);
    old.kill().await?;
    let cluster_kubeconfig = fleet.clusters["c1"].kubeconfig();
    let dir = fleet.dirs[0].path().to_owned();
    let run = || -> anyhow::Result<tokio::process::Child> {
        Ok(tokio::process::Command::new(programs::klusterlet()?)
            .args(["run", "--data-dir"])
            .arg(&dir)
            .arg("--cluster-kubeconfig")
            .arg(&cluster_kubeconfig)
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?)
    };
    let mut agent = run()?;
    tunnel_open(hub, "c1").await?;
    fleet.clusters["c1"].create_rbac(grant("ocm-hub-admins", json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]),
        json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "ocm-hub:system:masters"}))).await?;
    answers(hub, &admin, &proxy("c1", "/api/v1/namespaces"), 200, "NamespaceList").await?;
    let (code, body) = fleet.clusters["c1"]
        .call(
            &fleet.clusters["c1"].http()?,
            Method::POST,
            "/api/v1/namespaces",
            Some(&json!({"metadata": {"name": "watched"}})),
            &[],
        )
        .await?;
    anyhow::ensure!(code == 201, "{code} {body}");

    // A watch through the proxy ends (cleanly) when the agent stops, and new requests work
    // once it is back.
    let url =
        format!("{}{}", hub.url, proxy("c1", "/api/v1/namespaces/watched/configmaps?watch=true"));
    let mut watch = admin.get(&url).send().await?;
    assert_eq!(watch.status().as_u16(), 200);
    agent.kill().await?;
    let ended = tokio::time::timeout(WAIT, async {
        loop {
            match watch.chunk().await {
                Ok(Some(_)) => continue,
                Ok(None) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .context("the proxied watch did not end when the agent stopped")?;
    ended.context("the proxied watch failed instead of ending")?;
    let (code, body) = hub.call(&admin, Method::GET, &proxy("c1", "/version"), None, &[]).await?;
    assert_eq!(code, 503, "no tunnel while the agent is away: {body}");
    let _agent = run()?;
    tunnel_open(hub, "c1").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_managed_service_account_token_reaches_its_own_cluster_as_itself() -> anyhow::Result<()> {
    let fleet = Fleet::start(&["c1", "c2"], &[]).await?;
    let hub = &fleet.hub;
    tunnel_open(hub, "c1").await?;
    let c1 = &fleet.clusters["c1"];
    let (admin, c1_admin) = (hub.http()?, c1.http()?);
    // The service account on the cluster and its token, as the managed-serviceaccount agent
    // makes them, and the hub's copy: the Secret the ManagedServiceAccount's status names.
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "msa-one"}});
    let (code, body) = c1
        .call(&c1_admin, Method::POST, "/api/v1/namespaces/default/serviceaccounts", Some(&sa), &[])
        .await?;
    anyhow::ensure!(code == 201, "{code} {body}");
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}});
    let (code, body) = c1
        .call(
            &c1_admin,
            Method::POST,
            "/api/v1/namespaces/default/serviceaccounts/msa-one/token",
            Some(&request),
            &[],
        )
        .await?;
    anyhow::ensure!(code == 201, "{code} {body}");
    let token = body["status"]["token"].as_str().context("a token")?.to_owned();
    let msa = json!({"apiVersion": "authentication.open-cluster-management.io/v1beta1", "kind": "ManagedServiceAccount",
        "metadata": {"name": "msa-one", "namespace": "c1"}, "spec": {"rotation": {}}});
    let msas = "/apis/authentication.open-cluster-management.io/v1beta1/namespaces/c1/managedserviceaccounts";
    let (code, body) = hub.call(&admin, Method::POST, msas, Some(&msa), &[]).await?;
    anyhow::ensure!(code == 201, "{code} {body}");
    use base64::Engine as _;
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "msa-one", "namespace": "c1",
                     "labels": {"authentication.open-cluster-management.io/is-managed-serviceaccount": "true"}},
        "data": {"token": base64::engine::general_purpose::STANDARD.encode(&token)}});
    let (code, body) =
        hub.call(&admin, Method::POST, "/api/v1/namespaces/c1/secrets", Some(&secret), &[]).await?;
    anyhow::ensure!(code == 201, "{code} {body}");
    let holder = hub.http_bearer(&token)?;
    let (code, body) = whoami_on(hub, &holder, "c1", &[]).await?;
    assert_eq!(code, 401, "not yet the token the hub holds for the account: {body}");
    let status = json!({"status": {"tokenSecretRef": {"name": "msa-one", "lastRefreshTimestamp": "2026-11-27T00:00:00Z"}}});
    let (code, body) = hub
        .call(
            &admin,
            Method::PATCH,
            &format!("{msas}/msa-one/status"),
            Some(&status),
            &[("content-type", "application/merge-patch+json")],
        )
        .await?;
    anyhow::ensure!(code == 200, "{code} {body}");

    // The cluster sees its own service account, not an impersonated hub user.
    let seen = eventually("the token recognised", WAIT, || async {
        let (code, seen) =
            whoami_on(hub, &holder, "c1", &[("Impersonate-User", "system:admin")]).await?;
        Ok((code == 201).then_some(seen))
    })
    .await?;
    let (name, groups) = user_info(&seen);
    assert_eq!(name, "system:serviceaccount:default:msa-one");
    assert!(groups.iter().all(|g| !g.starts_with("ocm-hub:")), "{groups:?}");
    // The same token names nobody on the hub, and is no credential for another cluster.
    let (code, _) = hub.call(&holder, Method::GET, "/api/v1/namespaces", None, &[]).await?;
    assert_eq!(code, 401);
    let (code, _) = whoami_on(hub, &holder, "c2", &[]).await?;
    assert_eq!(code, 401);
    Ok(())
}
