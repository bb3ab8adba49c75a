//! kubectl's imperative commands against a real hub: `kubectl create namespace|configmap|secret|
//! serviceaccount|role|clusterrole|rolebinding|clusterrolebinding` and `kubectl certificate
//! approve|deny` send their bodies as Kubernetes protobuf (`application/vnd.kubernetes.protobuf`).
//! Each case checks the line kubectl prints and the object the hub stored, read back over REST;
//! one case checks that the protobuf body stores exactly what the same object sent as JSON does.

use anyhow::{Context as _, ensure};
use base64::Engine as _;
use ocm_conformance::kubectl::{Kubectl, absent, setup, stored};
use serde_json::{Value, json};

/// Runs kubectl, which must succeed and print exactly `line`.
async fn prints(k: &Kubectl, args: &[&str], line: &str) -> anyhow::Result<()> {
    let out = k.ok(args).await?;
    ensure!(out.trim_end() == line, "kubectl {args:?} printed {out:?}, expected {line:?}");
    Ok(())
}

fn b64(s: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_namespace_configmap_and_secrets() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };

    prints(&k, &["create", "namespace", "ns1"], "namespace/ns1 created").await?;
    let ns = stored(&hub, &http, "/api/v1/namespaces/ns1").await?;
    ensure!(ns["metadata"]["name"] == "ns1" && ns["status"]["phase"] == "Active", "{ns}");
    ensure!(ns["metadata"]["uid"].as_str().is_some_and(|u| !u.is_empty()), "{ns}");
    ensure!(ns["metadata"]["creationTimestamp"].is_string(), "{ns}");
    // The same again: kubectl prints the server's AlreadyExists.
    let r = k.run(&["create", "namespace", "ns1"]).await?;
    ensure!(r.code == 1, "{r:?}");
    ensure!(
        r.stderr.trim_end()
            == r#"Error from server (AlreadyExists): namespaces "ns1" already exists"#,
        "{r:?}"
    );

    // A config map from literals, a text file and a binary file (binaryData), with the
    // last-applied annotation --save-config writes.
    let dir = tempfile::tempdir()?;
    let text = dir.path().join("greeting.txt");
    std::fs::write(&text, "hello\nworld\n")?;
    let bin = dir.path().join("blob.bin");
    std::fs::write(&bin, [0xffu8, 0xfe, 0x00, 0x41])?;
    let from_text = format!("--from-file={}", text.display());
    let from_bin = format!("--from-file={}", bin.display());
    prints(
        &k,
        &[
            "create",
            "configmap",
            "cm",
            "-n",
            "ns1",
            "--from-literal=k=v",
            "--from-literal=empty=",
            &from_text,
            &from_bin,
            "--save-config",
        ],
        "configmap/cm created",
    )
    .await?;
    let cm = stored(&hub, &http, "/api/v1/namespaces/ns1/configmaps/cm").await?;
    ensure!(cm["data"] == json!({"k": "v", "empty": "", "greeting.txt": "hello\nworld\n"}), "{cm}");
    ensure!(cm["binaryData"] == json!({"blob.bin": b64(&[0xff, 0xfe, 0x00, 0x41])}), "{cm}");
    let applied = cm["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .with_context(|| format!("no last-applied annotation: {cm}"))?;
    let applied: Value = serde_json::from_str(applied)?;
    ensure!(applied["kind"] == "ConfigMap" && applied["data"]["k"] == "v", "{applied}");
    ensure!(cm["metadata"]["namespace"] == "ns1", "{cm}");

    // Secrets: generic (data is base64 of the literal), docker-registry and tls.
    prints(
        &k,
        &["create", "secret", "generic", "s", "-n", "ns1", "--from-literal=password=hunter2"],
        "secret/s created",
    )
    .await?;
    let s = stored(&hub, &http, "/api/v1/namespaces/ns1/secrets/s").await?;
    // kubectl leaves `type` empty; the hub defaults it to Opaque, as kube-apiserver does.
    ensure!(s["data"] == json!({"password": b64(b"hunter2")}) && s["type"] == "Opaque", "{s}");

    prints(
        &k,
        &[
            "create",
            "secret",
            "docker-registry",
            "reg",
            "-n",
            "ns1",
            "--docker-server=registry.example",
            "--docker-username=u",
            "--docker-password=p",
        ],
        "secret/reg created",
    )
    .await?;
    let reg = stored(&hub, &http, "/api/v1/namespaces/ns1/secrets/reg").await?;
    ensure!(reg["type"] == "kubernetes.io/dockerconfigjson", "{reg}");
    ensure!(reg["data"][".dockerconfigjson"].as_str().is_some_and(|d| !d.is_empty()), "{reg}");

    // The hub's own admin certificate and key are a matching pair kubectl accepts.
    let pki = hub.path().join("pki");
    let cert = std::fs::read(pki.join("admin.crt"))?;
    let key = std::fs::read(pki.join("admin.key"))?;
    let cert_flag = format!("--cert={}", pki.join("admin.crt").display());
    let key_flag = format!("--key={}", pki.join("admin.key").display());
    prints(
        &k,
        &["create", "secret", "tls", "t", "-n", "ns1", &cert_flag, &key_flag],
        "secret/t created",
    )
    .await?;
    let t = stored(&hub, &http, "/api/v1/namespaces/ns1/secrets/t").await?;
    ensure!(t["type"] == "kubernetes.io/tls", "{t}");
    ensure!(t["data"] == json!({"tls.crt": b64(&cert), "tls.key": b64(&key)}), "{t}");

    // What kubectl gets back is printed with -o json.
    let out = k
        .ok(&["create", "configmap", "cm2", "-n", "ns1", "--from-literal=a=b", "-o", "json"])
        .await?;
    let printed: Value = serde_json::from_str(&out)?;
    ensure!(printed["data"] == json!({"a": "b"}) && printed["kind"] == "ConfigMap", "{printed}");
    ensure!(printed["metadata"]["resourceVersion"].is_string(), "{printed}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_server_stores_nothing() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    prints(
        &k,
        &["create", "namespace", "dry", "--dry-run=server"],
        "namespace/dry created (server dry run)",
    )
    .await?;
    ensure!(absent(&hub, &http, "/api/v1/namespaces/dry").await?, "{}", "/api/v1/namespaces/dry");

    let out = k
        .ok(&[
            "create",
            "secret",
            "generic",
            "s",
            "-n",
            "default",
            "--from-literal=a=b",
            "--dry-run=server",
            "-o",
            "json",
        ])
        .await?;
    let printed: Value = serde_json::from_str(&out)?;
    ensure!(printed["data"] == json!({"a": b64(b"b")}) && printed["kind"] == "Secret", "{printed}");
    ensure!(
        absent(&hub, &http, "/api/v1/namespaces/default/secrets/s").await?,
        "{}",
        "/api/v1/namespaces/default/secrets/s"
    );

    prints(
        &k,
        &[
            "create",
            "clusterrolebinding",
            "x",
            "--clusterrole=view",
            "--user=u",
            "--dry-run=server",
        ],
        "clusterrolebinding.rbac.authorization.k8s.io/x created (server dry run)",
    )
    .await?;
    ensure!(
        absent(&hub, &http, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/x").await?,
        "{}",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/x"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_service_account_and_rbac() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

    prints(&k, &["create", "serviceaccount", "sa1", "-n", "default"], "serviceaccount/sa1 created")
        .await?;
    let sa = stored(&hub, &http, "/api/v1/namespaces/default/serviceaccounts/sa1").await?;
    ensure!(sa["metadata"]["name"] == "sa1" && sa["kind"] == "ServiceAccount", "{sa}");

    prints(
        &k,
        &[
            "create",
            "role",
            "r",
            "-n",
            "default",
            "--verb=get",
            "--verb=list",
            "--resource=configmaps",
            "--resource=secrets",
            "--resource-name=one",
        ],
        "role.rbac.authorization.k8s.io/r created",
    )
    .await?;
    let role = stored(&hub, &http, &format!("{RBAC}/namespaces/default/roles/r")).await?;
    ensure!(
        role["rules"]
            == json!([{"verbs": ["get", "list"], "apiGroups": [""],
                       "resources": ["configmaps", "secrets"], "resourceNames": ["one"]}]),
        "{role}"
    );

    prints(
        &k,
        &[
            "create",
            "clusterrole",
            "cr",
            "--verb=get",
            "--verb=watch",
            "--resource=managedclusters.cluster.open-cluster-management.io",
            "--resource=leases.coordination.k8s.io",
        ],
        "clusterrole.rbac.authorization.k8s.io/cr created",
    )
    .await?;
    let cr = stored(&hub, &http, &format!("{RBAC}/clusterroles/cr")).await?;
    let rules = cr["rules"].as_array().context("rules")?;
    let mut groups: Vec<(&str, &str)> = rules
        .iter()
        .map(|r| {
            (r["apiGroups"][0].as_str().unwrap_or("?"), r["resources"][0].as_str().unwrap_or("?"))
        })
        .collect();
    groups.sort_unstable();
    ensure!(
        groups
            == [
                ("cluster.open-cluster-management.io", "managedclusters"),
                ("coordination.k8s.io", "leases")
            ],
        "{cr}"
    );
    ensure!(rules.iter().all(|r| r["verbs"] == json!(["get", "watch"])), "{cr}");

    prints(
        &k,
        &["create", "clusterrole", "urls", "--verb=get", "--non-resource-url=/healthz"],
        "clusterrole.rbac.authorization.k8s.io/urls created",
    )
    .await?;
    let urls = stored(&hub, &http, &format!("{RBAC}/clusterroles/urls")).await?;
    ensure!(
        urls["rules"] == json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]),
        "{urls}"
    );

    prints(
        &k,
        &["create", "clusterrole", "agg", "--aggregation-rule=rbac.example.com/aggregate=true"],
        "clusterrole.rbac.authorization.k8s.io/agg created",
    )
    .await?;
    let agg = stored(&hub, &http, &format!("{RBAC}/clusterroles/agg")).await?;
    ensure!(
        agg["aggregationRule"]
            == json!({"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate": "true"}}]}),
        "{agg}"
    );

    prints(
        &k,
        &[
            "create",
            "rolebinding",
            "rb",
            "-n",
            "default",
            "--role=r",
            "--user=alice",
            "--group=devs",
            "--serviceaccount=default:sa1",
        ],
        "rolebinding.rbac.authorization.k8s.io/rb created",
    )
    .await?;
    let rb = stored(&hub, &http, &format!("{RBAC}/namespaces/default/rolebindings/rb")).await?;
    ensure!(
        rb["roleRef"]
            == json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}),
        "{rb}"
    );
    ensure!(
        rb["subjects"]
            == json!([
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
                {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs"},
                {"kind": "ServiceAccount", "name": "sa1", "namespace": "default"}]),
        "{rb}"
    );

    prints(
        &k,
        &["create", "clusterrolebinding", "crb", "--clusterrole=cr", "--user=u"],
        "clusterrolebinding.rbac.authorization.k8s.io/crb created",
    )
    .await?;
    let crb = stored(&hub, &http, &format!("{RBAC}/clusterrolebindings/crb")).await?;
    ensure!(
        crb["roleRef"]
            == json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cr"}),
        "{crb}"
    );
    ensure!(
        crb["subjects"]
            == json!([{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "u"}]),
        "{crb}"
    );
    // kubectl reads them back as it wrote them.
    let out = k.ok(&["get", "clusterrolebinding", "crb", "-o", "jsonpath={.roleRef.name}"]).await?;
    ensure!(out == "cr", "{out:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_approve_and_deny() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let (_, request) = ocm_agent::registration::new_request("c1", "agent1")?;
    for name in ["c1", "c2"] {
        let csr = json!({
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": b64(request.as_bytes()), "signerName": "example.com/signer",
                     "usages": ["client auth"]},
        });
        let resp = http.post(format!("{}{CSRS}", hub.url)).json(&csr).send().await?;
        ensure!(resp.status().as_u16() == 201, "{}", resp.text().await?);
    }
    // approve and deny GET the CSR and PUT it (as protobuf) to its approval subresource.
    prints(
        &k,
        &["certificate", "approve", "c1"],
        "certificatesigningrequest.certificates.k8s.io/c1 approved",
    )
    .await?;
    prints(
        &k,
        &["certificate", "deny", "c2"],
        "certificatesigningrequest.certificates.k8s.io/c2 denied",
    )
    .await?;
    for (name, kind, reason) in
        [("c1", "Approved", "KubectlApprove"), ("c2", "Denied", "KubectlDeny")]
    {
        let csr = stored(&hub, &http, &format!("{CSRS}/{name}")).await?;
        ensure!(csr["spec"]["request"] == b64(request.as_bytes()), "{csr}");
        let conds = csr["status"]["conditions"].as_array().context("conditions")?;
        ensure!(conds.len() == 1, "{csr}");
        let c = &conds[0];
        ensure!(c["type"] == kind && c["status"] == "True" && c["reason"] == reason, "{csr}");
        ensure!(c["lastUpdateTime"].as_str().is_some_and(|t| t.ends_with('Z')), "{csr}");
    }
    Ok(())
}

/// `obj` without what the server assigns per object (and its name, which differs by design).
fn comparable(mut obj: Value) -> Value {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in ["name", "uid", "resourceVersion", "creationTimestamp", "managedFields"] {
            meta.remove(key);
        }
    }
    obj
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_and_json_bodies_store_the_same_object() -> anyhow::Result<()> {
    let Some((hub, http, k)) = setup().await? else { return Ok(()) };
    const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";
    let dir = tempfile::tempdir()?;
    let bin = dir.path().join("blob.bin");
    std::fs::write(&bin, [0u8, 0x80, 0xff])?;
    let from_bin = format!("--from-file={}", bin.display());
    // (collection path, kubectl create arguments after the name)
    let cases: Vec<(String, Vec<&str>)> = vec![
        ("/api/v1/namespaces".into(), vec!["namespace"]),
        (
            "/api/v1/namespaces/default/configmaps".into(),
            vec!["configmap", "--from-literal=a=b", &from_bin, "--save-config"],
        ),
        (
            "/api/v1/namespaces/default/secrets".into(),
            vec!["secret", "generic", "--from-literal=a=b", "--type=example.com/t"],
        ),
        ("/api/v1/namespaces/default/serviceaccounts".into(), vec!["serviceaccount"]),
        (
            format!("{RBAC}/namespaces/default/roles"),
            vec!["role", "--verb=get", "--resource=secrets", "--resource-name=x"],
        ),
        (
            format!("{RBAC}/clusterroles"),
            vec!["clusterrole", "--verb=*", "--resource=leases.coordination.k8s.io"],
        ),
        (
            format!("{RBAC}/namespaces/default/rolebindings"),
            vec!["rolebinding", "--clusterrole=view", "--group=g", "--serviceaccount=a:b"],
        ),
        (
            format!("{RBAC}/clusterrolebindings"),
            vec!["clusterrolebinding", "--clusterrole=view", "--user=u"],
        ),
    ];
    for (i, (collection, args)) in cases.iter().enumerate() {
        let (pb_name, json_name) = (format!("pb{i}"), format!("json{i}"));
        // What kubectl would send, as JSON: --dry-run=client prints it without a request.
        let (kind_words, flags) =
            if args[0] == "secret" { args.split_at(2) } else { args.split_at(1) };
        let mut json_args = vec!["create"];
        json_args.extend_from_slice(kind_words);
        json_args.push(&json_name);
        json_args.extend_from_slice(flags);
        json_args.extend(["--dry-run=client", "-o", "json"]);
        let as_json: Value = serde_json::from_str(&k.ok(&json_args).await?)?;
        let resp = http.post(format!("{}{collection}", hub.url)).json(&as_json).send().await?;
        ensure!(resp.status().as_u16() == 201, "{json_args:?}: {}", resp.text().await?);

        let mut pb_args = vec!["create"];
        pb_args.extend_from_slice(kind_words);
        pb_args.push(&pb_name);
        pb_args.extend_from_slice(flags);
        // kubectl logs its request headers at -v=7: the body really is protobuf.
        pb_args.push("-v=7");
        let r = k.run(&pb_args).await?;
        ensure!(r.code == 0, "{pb_args:?}: {r:?}");
        ensure!(
            r.stderr.contains("Content-Type: application/vnd.kubernetes.protobuf"),
            "{pb_args:?} did not send protobuf: {}",
            r.stderr
        );

        let from_json = stored(&hub, &http, &format!("{collection}/{json_name}")).await?;
        let from_pb = stored(&hub, &http, &format!("{collection}/{pb_name}")).await?;
        let (mut a, b) = (comparable(from_pb), comparable(from_json));
        // --save-config records the object's own name.
        if let Some(note) =
            a.pointer_mut("/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration")
        {
            *note = Value::String(note.as_str().unwrap_or("").replace(&pb_name, &json_name));
        }
        ensure!(a == b, "{pb_args:?}:\nprotobuf: {a}\njson:     {b}");
    }
    Ok(())
}
