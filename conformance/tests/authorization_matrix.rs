//! The authorization matrix (reliability.md R7): thirteen identities × verbs × resources ×
//! namespaces, every cell sent to a running hub. Each answer must equal the golden file
//! `conformance/golden/authorization-matrix.txt`, and each must agree with a model written
//! here from OCM's RBAC tables (ocm.md §3.1, §3.5): unauthenticated → 401, not granted → 403,
//! granted → anything else. Mutations are dry runs, so every cell sees the same store.
//! `OCM_UPDATE_GOLDEN=1` rewrites the golden file (review the diff).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use ocm_apiserver::auth::cluster_rbac::{agent_group, agent_user, cluster_objects, shared_roles};
use ocm_apiserver::auth::pki::Pki;
use ocm_conformance::hub::{Backend, TestHub, eventually, rbac_path};
use serde_json::{Value, json};

const WORK: &str = "/apis/work.open-cluster-management.io/v1";
const CLUSTER: &str = "/apis/cluster.open-cluster-management.io/v1";
const CLUSTERS: [&str; 4] = ["a", "b", "a-x", "c"];
const NAMESPACES: [&str; 3] = ["a", "b", "a-x"];
const BOOTSTRAP: &str = "abcdef.0123456789abcdef";
const BOOTSTRAP_EXPIRED: &str = "expire.0123456789abcdef";
const BOOTSTRAP_REVOKED: &str = "revokd.0123456789abcdef";

/// Who asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Admin,
    /// The agent of an accepted cluster.
    Agent(&'static str),
    /// The agent of cluster `c`: CSR approved, `hubAcceptsClient` false.
    NotAccepted,
    /// The agent of cluster `d`, deleted (its RBAC is gone).
    Deleted,
    ExpiredCert,
    UnknownCa,
    Bootstrap,
    BootstrapExpired,
    BootstrapRevoked,
    Anonymous,
    NoGrants,
}

impl Who {
    fn label(self) -> String {
        match self {
            Who::Admin => "admin".into(),
            Who::Agent(c) => format!("agent-{c}"),
            Who::NotAccepted => "agent-c-not-accepted".into(),
            Who::Deleted => "agent-d-deleted".into(),
            Who::ExpiredCert => "agent-a-expired-cert".into(),
            Who::UnknownCa => "agent-a-unknown-ca".into(),
            Who::Bootstrap => "bootstrap-token".into(),
            Who::BootstrapExpired => "bootstrap-token-expired".into(),
            Who::BootstrapRevoked => "bootstrap-token-revoked".into(),
            Who::Anonymous => "anonymous".into(),
            Who::NoGrants => "authenticated-no-grants".into(),
        }
    }
}

/// One request of the matrix.
#[derive(Debug, Clone)]
struct Cell {
    verb: &'static str,
    /// `group/resource[/subresource]` as RBAC names it (`""` group for core).
    group: &'static str,
    resource: &'static str,
    sub: &'static str,
    /// `""` for cluster scope or all namespaces.
    namespace: &'static str,
    name: &'static str,
}

impl Cell {
    fn key(&self) -> String {
        let res = if self.sub.is_empty() {
            self.resource.to_owned()
        } else {
            format!("{}/{}", self.resource, self.sub)
        };
        let ns = if self.namespace.is_empty() { "*" } else { self.namespace };
        let name = if self.name.is_empty() { "-" } else { self.name };
        format!("{:<16} {:<28} ns={:<4} name={}", self.verb, res, ns, name)
    }

    fn base(&self) -> String {
        let prefix = match self.group {
            "" => "/api/v1".to_owned(),
            "work.open-cluster-management.io" => WORK.to_owned(),
            "cluster.open-cluster-management.io" => CLUSTER.to_owned(),
            g => format!("/apis/{g}/v1"),
        };
        let ns = if self.namespace.is_empty() {
            String::new()
        } else {
            format!("/namespaces/{}", self.namespace)
        };
        format!("{prefix}{ns}/{}", self.resource)
    }

    fn body(&self) -> Value {
        let name = if self.name.is_empty() { "m" } else { self.name };
        let meta = if self.namespace.is_empty() {
            json!({"name": name})
        } else {
            json!({"name": name, "namespace": self.namespace})
        };
        match self.resource {
            "manifestworks" => {
                json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork", "metadata": meta, "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}}]}}})
            }
            "leases" => {
                json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": {}})
            }
            "events" => {
                json!({"apiVersion": "v1", "kind": "Event", "metadata": meta, "involvedObject": {"kind": "ManagedCluster", "name": "a"}, "reason": "R", "message": "m", "type": "Normal"})
            }
            "secrets" => json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta}),
            "managedclusters" => {
                json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster", "metadata": meta, "spec": {"hubAcceptsClient": false}})
            }
            "certificatesigningrequests" => {
                json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": meta, "spec": {"request": "", "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]}})
            }
            _ => json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta}),
        }
    }
}

/// Every cell: namespaced kinds in each namespace and across all, then cluster-scoped kinds.
fn cells() -> Vec<Cell> {
    let mut out = Vec::new();
    let c = |verb, group, resource, sub, namespace, name| Cell {
        verb,
        group,
        resource,
        sub,
        namespace,
        name,
    };
    let namespaced = [
        ("work.open-cluster-management.io", "manifestworks"),
        ("coordination.k8s.io", "leases"),
        ("", "events"),
        ("", "secrets"),
    ];
    for (group, resource) in namespaced {
        for ns in NAMESPACES {
            for verb in ["get", "update", "patch", "delete"] {
                out.push(c(verb, group, resource, "", ns, ns));
            }
            for verb in ["list", "watch", "create", "deletecollection"] {
                out.push(c(verb, group, resource, "", ns, ""));
            }
        }
        for verb in ["list", "watch"] {
            out.push(c(verb, group, resource, "", "", ""));
        }
    }
    for ns in NAMESPACES {
        for verb in ["update", "patch"] {
            out.push(c(verb, "work.open-cluster-management.io", "manifestworks", "status", ns, ns));
        }
    }
    let mcl = "cluster.open-cluster-management.io";
    for name in CLUSTERS {
        for verb in ["get", "update", "patch", "delete"] {
            out.push(c(verb, mcl, "managedclusters", "", "", name));
        }
        for verb in ["update", "patch"] {
            out.push(c(verb, mcl, "managedclusters", "status", "", name));
        }
    }
    for verb in ["list", "watch", "create", "deletecollection"] {
        out.push(c(verb, mcl, "managedclusters", "", "", ""));
    }
    let csr = "certificates.k8s.io";
    out.push(c("get", csr, "certificatesigningrequests", "", "", "x"));
    for verb in ["list", "watch", "create"] {
        out.push(c(verb, csr, "certificatesigningrequests", "", "", ""));
    }
    out.push(c("get", "", "namespaces", "", "", "a"));
    out.push(c("list", "", "namespaces", "", "", ""));
    out
}

/// What OCM's RBAC says: `None` = unauthenticated (401), `Some(allowed)`.
fn model(who: Who, cell: &Cell) -> Option<bool> {
    let full = if cell.sub.is_empty() {
        cell.resource.to_owned()
    } else {
        format!("{}/{}", cell.resource, cell.sub)
    };
    let full = full.as_str();
    let v = cell.verb;
    match who {
        Who::ExpiredCert
        | Who::UnknownCa
        | Who::BootstrapExpired
        | Who::BootstrapRevoked
        | Who::Anonymous => None,
        Who::Admin => Some(true),
        Who::NoGrants | Who::Deleted => Some(false),
        Who::NotAccepted => Some(
            full == "managedclusters" && cell.name == "c" && matches!(v, "get" | "list" | "watch"),
        ),
        Who::Bootstrap => Some(match full {
            "managedclusters" => matches!(v, "get" | "create" | "list" | "watch"),
            "certificatesigningrequests" => matches!(v, "create" | "get" | "list" | "watch"),
            _ => false,
        }),
        Who::Agent(me) => Some(match (full, cell.group) {
            ("managedclusters", _) => {
                cell.name == me && matches!(v, "get" | "update" | "watch" | "list")
            }
            ("managedclusters/status", _) => cell.name == me && matches!(v, "patch" | "update"),
            ("certificatesigningrequests", _) => matches!(v, "create" | "get" | "list" | "watch"),
            _ if cell.namespace != me => false,
            ("manifestworks", _) => matches!(v, "get" | "list" | "watch" | "update" | "patch"),
            ("manifestworks/status", _) => matches!(v, "patch" | "update"),
            ("leases", _) => matches!(v, "get" | "list" | "watch" | "update"),
            ("events", "") => matches!(v, "create" | "patch" | "update"),
            _ => false,
        }),
    }
}

struct Clients {
    by_who: Vec<(Who, reqwest::Client)>,
}

async fn fixture(hub: &TestHub) -> anyhow::Result<(Clients, tempfile::TempDir)> {
    let admin = hub.http()?;
    let post = |path: String, body: Value| {
        let admin = admin.clone();
        let url = format!("{}{path}", hub.url);
        async move {
            let resp = admin.post(url).json(&body).send().await?;
            let code = resp.status().as_u16();
            let text = resp.text().await?;
            ensure!(code == 201 || code == 409, "POST {path}: {code} {text}");
            anyhow::Ok(())
        }
    };
    for ns in CLUSTERS.iter().chain(["d"].iter()) {
        post(
            "/api/v1/namespaces".into(),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await?;
    }
    let mut rbac = shared_roles();
    for c in ["a", "b", "a-x"] {
        rbac.extend(cluster_objects(c, true));
    }
    rbac.extend(cluster_objects("c", false));
    hub.create_rbac(rbac).await?;
    // Cluster d was accepted, then deleted: its RBAC was created (its agent could list its
    // works, the control) and removed again (then it cannot).
    let d_works = format!("{WORK}/namespaces/d/manifestworks");
    let d_agent = {
        let pki = Pki::open(hub.path())?;
        let (crt, key) = pki.issue_client(&agent_user("d", "agent"), Some(&agent_group("d")), 1)?;
        hub.http_with_cert(&crt, &key)?
    };
    let d_lists = || async {
        let (code, _) = hub.call(&d_agent, reqwest::Method::GET, &d_works, None, &[]).await?;
        anyhow::Ok(code)
    };
    hub.create_rbac(cluster_objects("d", true)).await?;
    eventually("cluster d's agent lists its works", Duration::from_secs(5), || async {
        Ok((d_lists().await? == 200).then_some(()))
    })
    .await?;
    for obj in cluster_objects("d", true) {
        let path = rbac_path(&obj)?;
        let name = obj["metadata"]["name"].as_str().context("name")?.to_owned();
        let resp = admin.delete(format!("{}{path}/{name}", hub.url)).send().await?;
        ensure!(resp.status().as_u16() == 200, "deleting {name}: {}", resp.status());
    }
    eventually("cluster d's agent loses its works", Duration::from_secs(5), || async {
        Ok((d_lists().await? == 403).then_some(()))
    })
    .await?;
    // Bootstrap tokens: one valid, one expired, one revoked (deleted).
    let token_secret = |token: &str, expiration: &str| {
        let (id, secret) = token.split_once('.').unwrap_or_default();
        json!({"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
               "metadata": {"name": format!("bootstrap-token-{id}"), "namespace": "kube-system"},
               "stringData": {"token-id": id, "token-secret": secret, "expiration": expiration,
                              "usage-bootstrap-authentication": "true",
                              "auth-extra-groups": "system:bootstrappers:managedcluster"}})
    };
    let secrets = "/api/v1/namespaces/kube-system/secrets";
    post(secrets.into(), token_secret(BOOTSTRAP, "2099-01-01T00:00:00Z")).await?;
    post(secrets.into(), token_secret(BOOTSTRAP_EXPIRED, "2020-01-01T00:00:00Z")).await?;
    post(secrets.into(), token_secret(BOOTSTRAP_REVOKED, "2099-01-01T00:00:00Z")).await?;
    let resp = admin.delete(format!("{}{secrets}/bootstrap-token-revokd", hub.url)).send().await?;
    ensure!(resp.status().as_u16() == 200, "revoking: {}", resp.status());

    let pki = Pki::open(hub.path())?;
    let agent = |c: &str| -> anyhow::Result<reqwest::Client> {
        let (crt, key) = pki.issue_client(&agent_user(c, "agent"), Some(&agent_group(c)), 1)?;
        hub.http_with_cert(&crt, &key)
    };
    let now = time::OffsetDateTime::now_utc();
    let (crt, key) = pki.issue_client_between(
        &agent_user("a", "agent"),
        Some(&agent_group("a")),
        now - time::Duration::days(2),
        now - time::Duration::days(1),
    )?;
    let expired = hub.http_with_cert(&crt, &key)?;
    let stranger = tempfile::tempdir()?;
    let other = Pki::load_or_create(stranger.path(), &[])?;
    let (crt, key) = other.issue_client(&agent_user("a", "agent"), Some(&agent_group("a")), 1)?;
    let unknown = hub.http_with_cert(&crt, &key)?;
    let (crt, key) = pki.issue_client("nobody", None, 1)?;
    let nobody = hub.http_with_cert(&crt, &key)?;
    let by_who = vec![
        (Who::Admin, admin.clone()),
        (Who::Agent("a"), agent("a")?),
        (Who::Agent("b"), agent("b")?),
        (Who::Agent("a-x"), agent("a-x")?),
        (Who::NotAccepted, agent("c")?),
        (Who::Deleted, agent("d")?),
        (Who::ExpiredCert, expired),
        (Who::UnknownCa, unknown),
        (Who::Bootstrap, hub.http_bearer(BOOTSTRAP)?),
        (Who::BootstrapExpired, hub.http_bearer(BOOTSTRAP_EXPIRED)?),
        (Who::BootstrapRevoked, hub.http_bearer(BOOTSTRAP_REVOKED)?),
        (Who::Anonymous, hub.anonymous()?),
        (Who::NoGrants, nobody),
    ];
    Ok((Clients { by_who }, stranger))
}

/// Sends one cell; the status code (and, for a denial, the body's reason).
async fn send(
    hub: &TestHub,
    client: &reqwest::Client,
    cell: &Cell,
) -> anyhow::Result<(u16, String)> {
    let base = cell.base();
    let item = format!(
        "{base}/{}{}",
        cell.name,
        if cell.sub.is_empty() { String::new() } else { format!("/{}", cell.sub) }
    );
    let url = |p: &str| format!("{}{p}", hub.url);
    let req = match cell.verb {
        "get" => client.get(url(&item)),
        "list" => client.get(url(&base)),
        "watch" => client.get(url(&format!("{base}?watch=true&timeoutSeconds=1"))),
        "create" => client.post(url(&format!("{base}?dryRun=All"))).json(&cell.body()),
        "update" => client.put(url(&format!("{item}?dryRun=All"))).json(&cell.body()),
        "patch" => client
            .patch(url(&format!("{item}?dryRun=All")))
            .header("Content-Type", "application/merge-patch+json")
            .body("{}"),
        "delete" => client.delete(url(&format!("{item}?dryRun=All"))),
        "deletecollection" => client.delete(url(&format!("{base}?dryRun=All"))),
        other => anyhow::bail!("verb {other}"),
    };
    let resp = req.send().await?;
    let code = resp.status().as_u16();
    if cell.verb == "watch" && code == 200 {
        return Ok((code, String::new())); // the stream is dropped unread
    }
    let body: Value = serde_json::from_str(&resp.text().await?).unwrap_or(Value::Null);
    let reason = body["reason"].as_str().unwrap_or("").to_owned();
    Ok((code, reason))
}

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/authorization-matrix.txt")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_matrix_matches_the_golden_file() -> anyhow::Result<()> {
    let hub = TestHub::start(Backend::Memory).await?;
    let (clients, _stranger) = fixture(&hub).await?;
    let cells = cells();
    let mut table = String::new();
    let mut disagreements = Vec::new();
    // Grants reach the authorizer through the watch cache: wait until every identity's first
    // granted cell is answered as granted before reading the matrix.
    for (who, client) in &clients.by_who {
        let Some(cell) = cells.iter().find(|c| model(*who, c) == Some(true)) else { continue };
        eventually(
            &format!("{} granted {}", who.label(), cell.key()),
            Duration::from_secs(5),
            || async {
                let (code, _) = send(&hub, client, cell).await?;
                Ok((code != 401 && code != 403).then_some(()))
            },
        )
        .await?;
    }
    for (who, client) in &clients.by_who {
        for cell in &cells {
            let (code, reason) = send(&hub, client, cell).await?;
            writeln!(table, "{:<26} {} -> {code}", who.label(), cell.key())?;
            let agrees = match model(*who, cell) {
                None => code == 401 && reason == "Unauthorized",
                Some(false) => code == 403 && reason == "Forbidden",
                Some(true) => code != 401 && code != 403,
            };
            if !agrees {
                disagreements.push(format!("{} {} -> {code} {reason}", who.label(), cell.key()));
            }
        }
    }
    ensure!(
        disagreements.is_empty(),
        "{} cells disagree with OCM's RBAC model:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    let path = golden_path();
    if std::env::var_os("OCM_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().context("parent")?)?;
        std::fs::write(&path, &table)?;
    }
    let golden = std::fs::read_to_string(&path).with_context(|| {
        format!("{} is missing: run with OCM_UPDATE_GOLDEN=1 once and review it", path.display())
    })?;
    if golden != table {
        let diff: Vec<String> = golden
            .lines()
            .zip(table.lines())
            .filter(|(g, t)| g != t)
            .take(20)
            .map(|(g, t)| format!("golden {g}\n   got {t}"))
            .collect();
        anyhow::bail!(
            "the matrix differs from {} ({} vs {} lines):\n{}",
            path.display(),
            golden.lines().count(),
            table.lines().count(),
            diff.join("\n")
        );
    }
    hub.stop().await;
    Ok(())
}
