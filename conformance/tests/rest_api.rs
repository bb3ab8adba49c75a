//! The black-box REST suite: drives a real hub over HTTPS with raw JSON and checks the Kubernetes
//! API semantics of `../shared/reference/kube-api.md` §1, §2, §5, §6 (CRUD, status subresource,
//! finalizers, ownerReference GC, namespace lifecycle, lists, watches, discovery, errors) on every
//! storage backend.

use std::pin::Pin;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use ocm_apiserver::store::cache::CacheConfig;
use ocm_conformance::fidelity;
use ocm_conformance::hub::{self, Backend, TestHub, managed_entry};
use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

const MCL: &str = "/apis/cluster.open-cluster-management.io/v1/managedclusters";
const MCL_GROUP: &str = "cluster.open-cluster-management.io";
const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const AGGREGATED_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

fn cms(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/configmaps")
}

fn works(ns: &str) -> String {
    format!("/apis/work.open-cluster-management.io/v1/namespaces/{ns}/manifestworks")
}

fn mcl(name: &str) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": name},
        "spec": {"hubAcceptsClient": true},
    })
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

fn cm_labeled(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}})
}

fn work(name: &str) -> Value {
    json!({
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": {"name": name},
        "spec": {"workload": {"manifests": [{
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "shipped", "namespace": "default"},
            "data": {"a": "b"},
        }]}},
    })
}

/// Percent-encodes a query value.
fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// An HTTP answer.
#[derive(Debug)]
struct Resp {
    code: u16,
    headers: HeaderMap,
    raw: String,
    body: Value,
}

impl Resp {
    /// The body, after checking the code.
    fn ok(self, code: u16) -> anyhow::Result<Value> {
        ensure!(self.code == code, "expected HTTP {code}, got {}: {}", self.code, self.raw);
        Ok(self.body)
    }

    /// Checks a failure `Status` (kube-api.md §1, §5.8) and returns it.
    fn failure(&self, code: u16, reason: &str) -> anyhow::Result<&Value> {
        ensure!(
            self.code == code,
            "expected HTTP {code} {reason}, got {}: {}",
            self.code,
            self.raw
        );
        let s = &self.body;
        ensure!(s["kind"] == "Status" && s["apiVersion"] == "v1", "not a Status: {}", self.raw);
        ensure!(s["status"] == "Failure", "status is not Failure: {}", self.raw);
        ensure!(s["code"] == code, "Status.code is not {code}: {}", self.raw);
        ensure!(s["reason"] == reason, "expected reason {reason}: {}", self.raw);
        ensure!(s["metadata"].is_object(), "Status without metadata: {}", self.raw);
        Ok(s)
    }

    fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or("")
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

struct Api {
    hub: TestHub,
    http: reqwest::Client,
}

impl Api {
    async fn start(backend: Backend) -> anyhow::Result<Api> {
        Api::with(TestHub::start(backend).await?)
    }

    fn with(hub: TestHub) -> anyhow::Result<Api> {
        let http = hub.http()?;
        Ok(Api { hub, http })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<Resp> {
        let mut req = self.http.request(method.clone(), format!("{}{path}", self.hub.url));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some((ct, bytes)) = body {
            req = req.header("content-type", ct).body(bytes);
        }
        let resp = req.send().await.with_context(|| format!("{method} {path}"))?;
        let code = resp.status().as_u16();
        let headers = resp.headers().clone();
        let raw = String::from_utf8_lossy(&resp.bytes().await?).into_owned();
        let body = serde_json::from_str(&raw).unwrap_or(Value::Null);
        Ok(Resp { code, headers, raw, body })
    }

    async fn get(&self, path: &str) -> anyhow::Result<Resp> {
        self.send(Method::GET, path, None, &[]).await
    }

    async fn body(&self, method: Method, path: &str, ct: &str, v: &Value) -> anyhow::Result<Resp> {
        self.send(method, path, Some((ct, serde_json::to_vec(v)?)), &[]).await
    }

    async fn post(&self, path: &str, v: &Value) -> anyhow::Result<Resp> {
        self.body(Method::POST, path, "application/json", v).await
    }

    async fn put(&self, path: &str, v: &Value) -> anyhow::Result<Resp> {
        self.body(Method::PUT, path, "application/json", v).await
    }

    async fn merge(&self, path: &str, v: &Value) -> anyhow::Result<Resp> {
        self.body(Method::PATCH, path, MERGE_PATCH, v).await
    }

    async fn json_patch(&self, path: &str, v: &Value) -> anyhow::Result<Resp> {
        self.body(Method::PATCH, path, JSON_PATCH, v).await
    }

    async fn delete(&self, path: &str) -> anyhow::Result<Resp> {
        self.send(Method::DELETE, path, None, &[]).await
    }

    async fn delete_with(&self, path: &str, opts: &Value) -> anyhow::Result<Resp> {
        self.body(Method::DELETE, path, "application/json", opts).await
    }

    /// POSTs and expects 201.
    async fn create(&self, path: &str, v: &Value) -> anyhow::Result<Value> {
        self.post(path, v).await?.ok(201)
    }

    async fn namespace(&self, name: &str) -> anyhow::Result<Value> {
        self.create("/api/v1/namespaces", &json!({"metadata": {"name": name}})).await
    }

    /// The names in a list answer (after checking its shape).
    async fn names(&self, path: &str) -> anyhow::Result<Vec<String>> {
        let list = self.get(path).await?.ok(200)?;
        names_of(&list)
    }

    async fn watch(&self, path_and_query: &str) -> anyhow::Result<Watch> {
        self.watch_with(path_and_query, &[]).await
    }

    async fn watch_with(
        &self,
        path_and_query: &str,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<Watch> {
        let mut req = self.http.get(format!("{}{path_and_query}", self.hub.url));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.with_context(|| format!("watch {path_and_query}"))?;
        let code = resp.status().as_u16();
        let content_type =
            resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
        ensure!(code == 200, "watch {path_and_query}: HTTP {code}");
        ensure!(
            content_type.starts_with("application/json"),
            "watch content type {content_type:?}"
        );
        Ok(Watch { stream: Box::pin(resp.bytes_stream()), buf: Vec::new() })
    }

    /// Polls `path` until `done` holds (the controllers sweep within about 5 s).
    async fn poll(
        &self,
        path: &str,
        what: &str,
        done: impl Fn(&Resp) -> bool,
    ) -> anyhow::Result<Resp> {
        for _ in 0..400 {
            let r = self.get(path).await?;
            if done(&r) {
                return Ok(r);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let last = self.get(path).await?;
        bail!("gave up waiting for {what}; last answer {}: {}", last.code, last.raw)
    }

    async fn gone(&self, path: &str) -> anyhow::Result<()> {
        self.poll(path, &format!("{path} to be deleted"), |r| r.code == 404)
            .await?
            .failure(404, "NotFound")?;
        Ok(())
    }
}

/// Checks a list's shape (kube-api.md §6.4) and returns its item names.
fn names_of(list: &Value) -> anyhow::Result<Vec<String>> {
    ensure!(list["kind"].as_str().is_some_and(|k| k.ends_with("List")), "no list kind: {list}");
    ensure!(list["apiVersion"].is_string(), "no apiVersion: {list}");
    ensure!(list["metadata"]["resourceVersion"].is_string(), "no list resourceVersion: {list}");
    let items =
        list["items"].as_array().with_context(|| format!("items is not an array: {list}"))?;
    Ok(items.iter().map(|i| name(i).to_owned()).collect())
}

fn name(v: &Value) -> &str {
    v["metadata"]["name"].as_str().unwrap_or("")
}

fn rv(v: &Value) -> anyhow::Result<u64> {
    v["metadata"]["resourceVersion"]
        .as_str()
        .with_context(|| format!("no resourceVersion: {v}"))?
        .parse()
        .with_context(|| format!("resourceVersion is not decimal: {v}"))
}

fn rv_str(v: &Value) -> String {
    v["metadata"]["resourceVersion"].as_str().unwrap_or("").to_owned()
}

fn uid(v: &Value) -> String {
    v["metadata"]["uid"].as_str().unwrap_or("").to_owned()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

/// A watch stream read line by line.
struct Watch {
    stream: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    buf: Vec<u8>,
}

impl Watch {
    /// The next line (any type), or `None` when the stream ended.
    async fn next(&mut self) -> anyhow::Result<Option<Value>> {
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                let line = &line[..line.len() - 1];
                ensure!(!line.iter().all(u8::is_ascii_whitespace), "empty line in a watch");
                let v: Value = serde_json::from_slice(line).with_context(|| {
                    format!("watch line is not JSON: {}", String::from_utf8_lossy(line))
                })?;
                let t = v["type"].as_str().unwrap_or("");
                ensure!(
                    matches!(t, "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR"),
                    "bad watch event type: {v}"
                );
                if matches!(t, "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK") {
                    rv(&v["object"]).context("watch event object")?;
                }
                return Ok(Some(v));
            }
            match tokio::time::timeout(Duration::from_secs(20), self.stream.next()).await {
                Err(_) => bail!("no watch line within 20 s"),
                Ok(None) => {
                    ensure!(self.buf.is_empty(), "watch ended mid-line");
                    return Ok(None);
                }
                Ok(Some(chunk)) => self.buf.extend_from_slice(&chunk?),
            }
        }
    }

    /// The next non-bookmark event.
    async fn event(&mut self) -> anyhow::Result<Value> {
        loop {
            let ev = self.next().await?.context("the watch ended")?;
            if ev["type"] != "BOOKMARK" {
                return Ok(ev);
            }
        }
    }

    /// The next event, checked to be `kind` for object `name`; returns its object.
    async fn expect(&mut self, kind: &str, name_: &str) -> anyhow::Result<Value> {
        let ev = self.event().await?;
        ensure!(
            ev["type"] == kind && name(&ev["object"]) == name_,
            "expected {kind} {name_}, got {ev}"
        );
        Ok(ev["object"].clone())
    }

    /// Reads to the end of the stream, returning every line.
    async fn rest(&mut self) -> anyhow::Result<Vec<Value>> {
        let mut out = Vec::new();
        while let Some(v) = self.next().await? {
            out.push(v);
        }
        Ok(out)
    }
}

/// Whether the etcd runs are skipped (`OCM_SKIP_ETCD=1`), reported as the whole test skipped.
fn etcd_skipped() -> bool {
    ocm_conformance::etcd::skip("the whole test")
}

/// One `#[tokio::test]` per (behaviour, backend), in one module per backend (`memory`, `sled`, `etcd`).
macro_rules! per_backend {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() -> anyhow::Result<()> {
                    super::$name(super::Backend::Memory).await
                }
            )*
        }
        mod sled {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() -> anyhow::Result<()> {
                    super::$name(super::Backend::Sled).await
                }
            )*
        }
        mod etcd {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() -> anyhow::Result<()> {
                    if super::etcd_skipped() {
                        return Ok(());
                    }
                    super::$name(super::Backend::Etcd).await
                }
            )*
        }
    };
}

per_backend!(
    cluster_scoped_ocm_crud,
    stale_and_missing_resource_versions,
    generation_and_status_subresource,
    patches,
    namespaced_ocm_and_core_kinds,
    generate_name,
    dry_run_persists_nothing,
    delete_preconditions,
    finalizers_hold_deletion,
    gc_background,
    gc_foreground,
    gc_orphan,
    namespace_lifecycle,
    label_selectors,
    field_selectors,
    pagination_is_a_consistent_snapshot,
    list_resource_versions,
    watch_event_types,
    watch_resumes_exactly_once,
    watch_timeout_and_bookmarks,
    watch_too_old_is_an_error_event,
    watch_from_an_aged_out_event_is_expired,
    watch_initial_events,
    watch_selector_transitions,
    watch_all_namespaces_and_by_name,
    discovery_documents,
    aggregated_discovery,
    health_and_authentication,
    bad_bodies_store_nothing,
    bad_paths_and_methods,
    body_size_limits,
    field_validation,
    content_negotiation,
    future_resource_versions,
    inflight_limit_is_too_many_requests,
    a_read_over_the_limit_waits_for_a_seat,
    table_output,
);

// ---------------------------------------------------------------------------------------------
// CRUD (§5.1–§5.4)
// ---------------------------------------------------------------------------------------------

async fn cluster_scoped_ocm_crud(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let created = api.create(MCL, &mcl("c1")).await?;
    ensure!(created["kind"] == "ManagedCluster", "{created}");
    ensure!(created["metadata"]["generation"] == 1, "generation: {created}");
    let u = uid(&created);
    ensure!(u.len() == 36 && u.chars().filter(|c| *c == '-').count() == 4, "uid {u:?}");
    let ts = created["metadata"]["creationTimestamp"].as_str().unwrap_or("");
    ensure!(ts.len() == 20 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T', "time {ts:?}");
    let rv1 = rv(&created)?;
    ensure!(rv1 > 0, "resourceVersion 0 is reserved");
    ensure!(created["metadata"].get("namespace").is_none(), "cluster-scoped has no namespace");

    let got = api.get(&format!("{MCL}/c1")).await?.ok(200)?;
    ensure!(got == created, "GET differs from the create answer:\n{got}\n{created}");
    fidelity::assert_matches_crd(&got)?;

    // Name taken.
    let dup = api.post(MCL, &mcl("c1")).await?;
    let s = dup.failure(409, "AlreadyExists")?;
    ensure!(
        dup.message() == format!(r#"managedclusters.{MCL_GROUP} "c1" already exists"#),
        "{}",
        dup.raw
    );
    ensure!(s["details"]["kind"] == "managedclusters" && s["details"]["name"] == "c1", "{s}");
    ensure!(s["details"]["group"] == MCL_GROUP, "{s}");

    // Missing.
    let missing = api.get(&format!("{MCL}/nope")).await?;
    let s = missing.failure(404, "NotFound")?;
    ensure!(
        missing.message() == format!(r#"managedclusters.{MCL_GROUP} "nope" not found"#),
        "{}",
        missing.raw
    );
    ensure!(s["details"]["kind"] == "managedclusters" && s["details"]["name"] == "nope", "{s}");

    // Update with the current resourceVersion.
    let mut next = got.clone();
    next["metadata"]["labels"] = json!({"env": "prod"});
    let updated = api.put(&format!("{MCL}/c1"), &next).await?.ok(200)?;
    ensure!(updated["metadata"]["labels"]["env"] == "prod", "{updated}");
    ensure!(rv(&updated)? > rv1, "resourceVersion did not grow");
    ensure!(uid(&updated) == u, "uid changed");
    ensure!(updated["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]);

    // Client values of server-owned fields are ignored.
    let mut sneaky = updated.clone();
    sneaky["metadata"]["creationTimestamp"] = json!("2001-01-01T00:00:00Z");
    sneaky["metadata"]["generation"] = json!(42);
    let kept = api.put(&format!("{MCL}/c1"), &sneaky).await?.ok(200)?;
    ensure!(kept["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]);
    ensure!(kept["metadata"]["generation"] == 1, "{kept}");

    // A different uid is immutable.
    let mut other_uid = kept.clone();
    other_uid["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    let r = api.put(&format!("{MCL}/c1"), &other_uid).await?;
    let s = r.failure(422, "Invalid")?;
    ensure!(s["details"]["causes"][0]["field"] == "metadata.uid", "{s}");

    // URL and body names must match.
    let mut renamed = kept.clone();
    renamed["metadata"]["name"] = json!("c2");
    api.put(&format!("{MCL}/c1"), &renamed).await?.failure(400, "BadRequest")?;

    // Delete answers Status Success with details.
    let del = api.delete(&format!("{MCL}/c1")).await?.ok(200)?;
    ensure!(del["kind"] == "Status" && del["status"] == "Success", "{del}");
    ensure!(del["details"]["name"] == "c1" && del["details"]["kind"] == "managedclusters", "{del}");
    ensure!(del["details"]["group"] == MCL_GROUP && del["details"]["uid"] == json!(u), "{del}");
    api.get(&format!("{MCL}/c1")).await?.failure(404, "NotFound")?;
    api.delete(&format!("{MCL}/c1")).await?.failure(404, "NotFound")?;
    ensure!(api.names(MCL).await?.is_empty());
    Ok(())
}

async fn stale_and_missing_resource_versions(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let path = format!("{MCL}/c1");
    let v1 = api.create(MCL, &mcl("c1")).await?;
    let mut v2 = v1.clone();
    v2["metadata"]["labels"] = json!({"a": "1"});
    let v2 = api.put(&path, &v2).await?.ok(200)?;

    // PUT with the stale resourceVersion of v1.
    let mut stale = v1.clone();
    stale["metadata"]["labels"] = json!({"a": "2"});
    let r = api.put(&path, &stale).await?;
    let s = r.failure(409, "Conflict")?;
    ensure!(
        r.message()
            == format!(
                r#"Operation cannot be fulfilled on managedclusters.{MCL_GROUP} "c1": the object has been modified; please apply your changes to the latest version and try again"#
            ),
        "{}",
        r.raw
    );
    ensure!(s["details"]["kind"] == "managedclusters", "{s}");

    // PUT without a resourceVersion on an OCM kind.
    let mut unconditional = v2.clone();
    unconditional["metadata"].as_object_mut().context("metadata")?.remove("resourceVersion");
    let r = api.put(&path, &unconditional).await?;
    let s = r.failure(422, "Invalid")?;
    ensure!(
        r.message()
            == format!(
                r#"ManagedCluster.{MCL_GROUP} "c1" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"#
            ),
        "{}",
        r.raw
    );
    ensure!(s["details"]["kind"] == "ManagedCluster", "Invalid carries the Kind: {s}");
    ensure!(s["details"]["causes"][0]["field"] == "metadata.resourceVersion", "{s}");

    // Core kinds allow unconditional updates.
    let c = api.create(&cms("default"), &cm("x")).await?;
    let mut c2 = c.clone();
    c2["metadata"].as_object_mut().context("metadata")?.remove("resourceVersion");
    c2["data"] = json!({"k": "w"});
    let c2 = api.put(&format!("{}/x", cms("default")), &c2).await?.ok(200)?;
    ensure!(c2["data"]["k"] == "w" && rv(&c2)? > rv(&c)?, "{c2}");
    let mut stale = c.clone();
    stale["data"] = json!({"k": "z"});
    let r = api.put(&format!("{}/x", cms("default")), &stale).await?;
    r.failure(409, "Conflict")?;
    ensure!(
        r.message()
            == r#"Operation cannot be fulfilled on configmaps "x": the object has been modified; please apply your changes to the latest version and try again"#,
        "{}",
        r.raw
    );

    // PUT to a missing object (no create-on-update).
    let mut ghost = mcl("ghost");
    ghost["metadata"]["resourceVersion"] = json!(rv_str(&v2));
    api.put(&format!("{MCL}/ghost"), &ghost).await?.failure(404, "NotFound")?;
    ensure!(api.names(MCL).await? == strs(&["c1"]));

    // The stored object is v2.
    let now = api.get(&path).await?.ok(200)?;
    ensure!(now == v2, "a refused write changed the object");
    Ok(())
}

async fn generation_and_status_subresource(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let path = format!("{MCL}/c1");
    let status_path = format!("{path}/status");
    // Status is dropped on create.
    let mut body = mcl("c1");
    body["status"] = json!({"version": {"kubernetes": "v9.9.9"}});
    let v1 = api.create(MCL, &body).await?;
    ensure!(v1.pointer("/status/version").is_none(), "status kept on create: {v1}");
    ensure!(v1["metadata"]["generation"] == 1);

    // No-op update: same resourceVersion, no new revision.
    let same = api.put(&path, &v1).await?.ok(200)?;
    ensure!(rv_str(&same) == rv_str(&v1), "no-op update bumped resourceVersion: {same}");
    let merged = api.merge(&path, &json!({"metadata": {"annotations": null}})).await?.ok(200)?;
    ensure!(rv_str(&merged) == rv_str(&v1), "no-op patch bumped resourceVersion");

    // Metadata-only change: resourceVersion moves, generation does not.
    let v2 = api.merge(&path, &json!({"metadata": {"labels": {"a": "b"}}})).await?.ok(200)?;
    ensure!(rv(&v2)? > rv(&v1)? && v2["metadata"]["generation"] == 1, "{v2}");

    // Spec change: generation + 1.
    let v3 = api.merge(&path, &json!({"spec": {"hubAcceptsClient": false}})).await?.ok(200)?;
    ensure!(v3["metadata"]["generation"] == 2, "{v3}");

    // /status write: status changes, spec and generation do not.
    let mut st = v3.clone();
    st["status"] = json!({"version": {"kubernetes": "v1.32.0"}});
    st["spec"]["hubAcceptsClient"] = json!(true);
    st["metadata"]["labels"] = json!({"a": "changed-by-status"});
    let v4 = api.put(&status_path, &st).await?.ok(200)?;
    ensure!(v4["status"]["version"]["kubernetes"] == "v1.32.0", "{v4}");
    ensure!(v4["spec"]["hubAcceptsClient"] == false, "/status changed spec: {v4}");
    ensure!(v4["metadata"]["generation"] == 2, "/status bumped generation: {v4}");
    ensure!(rv(&v4)? > rv(&v3)?);
    let got_status = api.get(&status_path).await?.ok(200)?;
    ensure!(got_status["status"] == v4["status"], "{got_status}");

    // Main-resource write keeps the old status.
    let mut main = v4.clone();
    main["status"] = json!({"version": {"kubernetes": "v0.0.1"}});
    main["spec"]["hubAcceptsClient"] = json!(true);
    let v5 = api.put(&path, &main).await?.ok(200)?;
    ensure!(v5["status"]["version"]["kubernetes"] == "v1.32.0", "main PUT changed status: {v5}");
    ensure!(v5["spec"]["hubAcceptsClient"] == true && v5["metadata"]["generation"] == 3, "{v5}");

    // Merge patch on /status.
    let v6 = api
        .merge(&status_path, &json!({"status": {"version": {"kubernetes": "v1.33.0"}}}))
        .await?
        .ok(200)?;
    ensure!(v6["status"]["version"]["kubernetes"] == "v1.33.0");
    ensure!(v6["metadata"]["generation"] == 3, "{v6}");
    // A stale /status write conflicts too.
    api.put(&status_path, &v4).await?.failure(409, "Conflict")?;
    Ok(())
}

async fn patches(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let path = format!("{MCL}/c1");
    let v1 = api.create(MCL, &mcl("c1")).await?;
    let v2 =
        api.merge(&path, &json!({"metadata": {"labels": {"a": "1", "b": "2"}}})).await?.ok(200)?;
    ensure!(own_labels(&v2) == json!({"a": "1", "b": "2"}), "{v2}");
    // null deletes a key.
    let v3 = api.merge(&path, &json!({"metadata": {"labels": {"a": null}}})).await?.ok(200)?;
    ensure!(own_labels(&v3) == json!({"b": "2"}), "{v3}");

    // A merge patch carrying a stale resourceVersion is a precondition.
    let r = api
        .merge(&path, &json!({"metadata": {"labels": {"c": "3"}, "resourceVersion": rv_str(&v1)}}))
        .await?;
    r.failure(409, "Conflict")?;
    ensure!(r.message().contains("the object has been modified"), "{}", r.raw);
    // ...and a current one passes.
    let v4 = api
        .merge(&path, &json!({"metadata": {"labels": {"c": "3"}, "resourceVersion": rv_str(&v3)}}))
        .await?
        .ok(200)?;
    ensure!(v4["metadata"]["labels"]["c"] == "3");

    // JSON patch.
    let ops = json!([
        {"op": "test", "path": "/spec/hubAcceptsClient", "value": true},
        {"op": "replace", "path": "/spec/hubAcceptsClient", "value": false},
        {"op": "add", "path": "/metadata/labels/d", "value": "4"},
        {"op": "remove", "path": "/metadata/labels/b"},
    ]);
    let v5 = api.json_patch(&path, &ops).await?.ok(200)?;
    ensure!(v5["spec"]["hubAcceptsClient"] == false, "{v5}");
    ensure!(own_labels(&v5) == json!({"c": "3", "d": "4"}), "{v5}");
    ensure!(v5["metadata"]["generation"] == 2, "{v5}");

    // A failing test op is 422 and changes nothing.
    let r = api
        .json_patch(
            &path,
            &json!([
                {"op": "test", "path": "/spec/hubAcceptsClient", "value": true},
                {"op": "add", "path": "/metadata/labels/e", "value": "5"},
            ]),
        )
        .await?;
    r.failure(422, "Invalid")?;
    // A JSON patch carrying a stale resourceVersion.
    let r = api
        .json_patch(
            &path,
            &json!([
                {"op": "replace", "path": "/metadata/resourceVersion", "value": rv_str(&v1)},
                {"op": "add", "path": "/metadata/labels/e", "value": "5"},
            ]),
        )
        .await?;
    r.failure(409, "Conflict")?;
    // Undecodable patch documents.
    api.json_patch(&path, &json!({"op": "add"})).await?.failure(400, "BadRequest")?;
    api.json_patch(&path, &json!([{"op": "frobnicate", "path": "/x"}]))
        .await?
        .failure(400, "BadRequest")?;
    let r = api.send(Method::PATCH, &path, Some((MERGE_PATCH, b"{not json".to_vec())), &[]).await?;
    r.failure(400, "BadRequest")?;
    // A patch must still produce a valid object.
    let r = api.merge(&path, &json!({"spec": {"hubAcceptsClient": "yes"}})).await?;
    r.failure(422, "Invalid")?;
    let now = api.get(&path).await?.ok(200)?;
    ensure!(now == v5, "refused patches changed the object:\n{now}\n{v5}");

    // An unknown patch type is 415, naming the four it accepts.
    let r = api.body(Method::PATCH, &path, "application/x-patch", &json!({"metadata": {}})).await?;
    r.failure(415, "UnsupportedMediaType")?;
    ensure!(
        r.message().starts_with(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, \
             application/apply-patch+yaml, application/strategic-merge-patch+json"
        ),
        "{}",
        r.raw
    );
    // `force` belongs to apply patches only.
    let r = api.body(Method::PATCH, &format!("{path}?force=true"), MERGE_PATCH, &json!({})).await?;
    r.failure(422, "Invalid")?;
    // Patching a missing object.
    api.merge(&format!("{MCL}/nope"), &json!({"metadata": {"labels": {"a": "b"}}}))
        .await?
        .failure(404, "NotFound")?;
    ensure!(api.names(MCL).await? == strs(&["c1"]));
    Ok(())
}

async fn namespaced_ocm_and_core_kinds(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    api.namespace("cluster1").await?;
    // ManifestWork: the namespace comes from the URL.
    let w = api.create(&works("cluster1"), &work("w1")).await?;
    ensure!(w["metadata"]["namespace"] == "cluster1" && w["metadata"]["generation"] == 1, "{w}");
    ensure!(w["spec"]["workload"]["manifests"][0]["data"]["a"] == "b", "{w}");
    let path = format!("{}/w1", works("cluster1"));
    ensure!(api.get(&path).await?.ok(200)? == w);
    // A different namespace in the body.
    let mut other = work("w2");
    other["metadata"]["namespace"] = json!("default");
    let r = api.post(&works("cluster1"), &other).await?;
    r.failure(400, "BadRequest")?;
    ensure!(
        r.message()
            == "the namespace of the provided object does not match the namespace sent on the request",
        "{}",
        r.raw
    );
    // The same name in another namespace is another object.
    api.create(&works("default"), &work("w1")).await?;
    // Spec change bumps generation; PUT without resourceVersion is refused on OCM kinds.
    let mut w2 = w.clone();
    w2["spec"]["workload"]["manifests"][0]["data"]["a"] = json!("c");
    let w2 = api.put(&path, &w2).await?.ok(200)?;
    ensure!(w2["metadata"]["generation"] == 2, "{w2}");
    let mut w3 = w2.clone();
    w3["metadata"].as_object_mut().context("metadata")?.remove("resourceVersion");
    api.put(&path, &w3).await?.failure(422, "Invalid")?;
    // Status subresource of a namespaced OCM kind.
    let st = api
        .merge(
            &format!("{path}/status"),
            &json!({"status": {"conditions": [{
                "type": "Applied", "status": "True", "reason": "Done", "message": "ok",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }]}}),
        )
        .await?
        .ok(200)?;
    ensure!(st["status"]["conditions"][0]["type"] == "Applied", "{st}");
    ensure!(st["metadata"]["generation"] == 2, "{st}");
    fidelity::assert_matches_crd(&st)?;
    ensure!(sorted(api.names(&works("cluster1")).await?) == strs(&["w1"]));
    let all = api.get("/apis/work.open-cluster-management.io/v1/manifestworks").await?.ok(200)?;
    ensure!(all["kind"] == "ManifestWorkList", "{all}");
    fidelity::assert_items_match_crd(&all)?;
    let mut ns: Vec<String> = all["items"]
        .as_array()
        .context("items")?
        .iter()
        .map(|i| i["metadata"]["namespace"].as_str().unwrap_or("").to_owned())
        .collect();
    ns.sort();
    ensure!(ns == strs(&["cluster1", "default"]), "{all}");
    let del = api.delete(&path).await?.ok(200)?;
    ensure!(del["status"] == "Success" && del["details"]["kind"] == "manifestworks", "{del}");
    api.get(&path).await?.failure(404, "NotFound")?;

    // ConfigMap and Secret.
    let c = api.create(&cms("cluster1"), &cm("c")).await?;
    // Core kinds like ConfigMap carry no generation (kube-apiserver tracks it for custom
    // resources and workloads only).
    ensure!(c["metadata"].get("generation").is_none() && c["metadata"]["uid"].is_string(), "{c}");
    let secrets = "/api/v1/namespaces/cluster1/secrets";
    let s = api
        .create(
            secrets,
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                    "type": "Opaque", "data": {"token": "aGVsbG8="}}),
        )
        .await?;
    ensure!(s["data"]["token"] == "aGVsbG8=" && s["metadata"]["namespace"] == "cluster1", "{s}");
    let mut s2 = s.clone();
    s2["data"]["token"] = json!("d29ybGQ=");
    let s2 = api.put(&format!("{secrets}/s"), &s2).await?.ok(200)?;
    ensure!(s2["data"]["token"] == "d29ybGQ=" && rv(&s2)? > rv(&s)?);
    let list = api.get(secrets).await?.ok(200)?;
    ensure!(list["kind"] == "SecretList" && names_of(&list)? == strs(&["s"]), "{list}");
    let del = api.delete(&format!("{secrets}/s")).await?.ok(200)?;
    ensure!(del["status"] == "Success", "{del}");
    api.get(&format!("{secrets}/s")).await?.failure(404, "NotFound")?;

    // Namespace: cluster-scoped core kind with the kubernetes finalizer and Active phase.
    let ns = api.get("/api/v1/namespaces/cluster1").await?.ok(200)?;
    ensure!(ns["kind"] == "Namespace" && ns["status"]["phase"] == "Active", "{ns}");
    ensure!(ns["spec"]["finalizers"] == json!(["kubernetes"]), "{ns}");
    let names = api.names("/api/v1/namespaces").await?;
    for n in ["cluster1", "default", "kube-system", "kube-public"] {
        ensure!(names.iter().any(|x| x == n), "namespace {n} missing from {names:?}");
    }
    Ok(())
}

async fn generate_name(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let mut body = mcl("");
    body["metadata"] = json!({"generateName": "edge-"});
    let mut seen = Vec::new();
    for _ in 0..3 {
        let c = api.create(MCL, &body).await?;
        let n = name(&c).to_owned();
        let suffix = n.strip_prefix("edge-").with_context(|| format!("name {n:?}"))?;
        ensure!(suffix.len() == 5, "suffix of {n:?}");
        ensure!(suffix.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)), "{n:?}");
        ensure!(c["metadata"]["generateName"] == "edge-");
        seen.push(n);
    }
    ensure!(sorted(api.names(MCL).await?) == sorted(seen));
    // Neither name nor generateName.
    let r = api.post(MCL, &json!({"metadata": {}, "spec": {}})).await?;
    let s = r.failure(422, "Invalid")?;
    ensure!(s["details"]["causes"][0]["field"] == "metadata.name", "{s}");
    Ok(())
}

async fn dry_run_persists_nothing(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let base = api.create(&cms("default"), &cm("real")).await?;
    let list = api.get(&cms("default")).await?.ok(200)?;
    let mut w = api
        .watch(&format!("{}?watch=true&resourceVersion={}", cms("default"), rv_str(&list)))
        .await?;

    // Create.
    let r = api.post(&format!("{}?dryRun=All", cms("default")), &cm("ghost")).await?;
    let ghost = r.ok(201)?;
    ensure!(name(&ghost) == "ghost" && ghost["metadata"]["uid"].is_string(), "{ghost}");
    api.get(&format!("{}/ghost", cms("default"))).await?.failure(404, "NotFound")?;
    // Update.
    let mut changed = base.clone();
    changed["data"] = json!({"k": "dry"});
    let r = api.put(&format!("{}/real?dryRun=All", cms("default")), &changed).await?.ok(200)?;
    ensure!(r["data"]["k"] == "dry", "{r}");
    let r = api
        .merge(&format!("{}/real?dryRun=All", cms("default")), &json!({"data": {"k": "dry2"}}))
        .await?
        .ok(200)?;
    ensure!(r["data"]["k"] == "dry2", "{r}");
    // Delete (query and body forms).
    api.delete(&format!("{}/real?dryRun=All", cms("default"))).await?.ok(200)?;
    api.delete_with(&format!("{}/real", cms("default")), &json!({"dryRun": ["All"]}))
        .await?
        .ok(200)?;
    let now = api.get(&format!("{}/real", cms("default"))).await?.ok(200)?;
    ensure!(now == base, "a dry run changed the object: {now}");
    // Only All is allowed.
    api.post(&format!("{}?dryRun=Some", cms("default")), &cm("ghost2"))
        .await?
        .failure(422, "Invalid")?;
    ensure!(api.names(&cms("default")).await? == strs(&["real"]));
    // No watch event for any of it: the next event is the marker.
    api.create(&cms("default"), &cm("marker")).await?;
    w.expect("ADDED", "marker").await?;
    Ok(())
}

async fn delete_preconditions(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let c = api.create(&cms("default"), &cm("x")).await?;
    let path = format!("{}/x", cms("default"));
    let r = api
        .delete_with(
            &path,
            &json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}),
        )
        .await?;
    r.failure(409, "Conflict")?;
    ensure!(
        r.message().starts_with(r#"Operation cannot be fulfilled on configmaps "x": "#),
        "{}",
        r.raw
    );
    let r = api.delete_with(&path, &json!({"preconditions": {"resourceVersion": "1"}})).await?;
    r.failure(409, "Conflict")?;
    api.get(&path).await?.ok(200)?;
    api.delete_with(&path, &json!({"propagationPolicy": "Sideways"}))
        .await?
        .failure(422, "Invalid")?;
    api.get(&path).await?.ok(200)?;
    let ok = api
        .delete_with(
            &path,
            &json!({"preconditions": {"uid": uid(&c), "resourceVersion": rv_str(&c)},
                    "propagationPolicy": "Background"}),
        )
        .await?
        .ok(200)?;
    ensure!(ok["status"] == "Success" && ok["details"]["kind"] == "configmaps", "{ok}");
    api.get(&path).await?.failure(404, "NotFound")?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Finalizers, GC, namespaces (§5.6)
// ---------------------------------------------------------------------------------------------

async fn finalizers_hold_deletion(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let path = format!("{}/held", cms("default"));
    let mut body = cm("held");
    body["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let c = api.create(&cms("default"), &body).await?;
    let mut w =
        api.watch(&format!("{}?watch=1&resourceVersion={}", cms("default"), rv_str(&c))).await?;

    let marked = api.delete(&path).await?.ok(200)?;
    ensure!(marked["kind"] == "ConfigMap", "finalizers pending: the object is answered: {marked}");
    ensure!(marked["metadata"]["deletionTimestamp"].is_string(), "{marked}");
    ensure!(marked["metadata"]["deletionGracePeriodSeconds"] == 0, "{marked}");
    ensure!(
        marked["metadata"].get("generation").is_none(),
        "no generation on ConfigMaps: {marked}"
    );
    // Kinds that track generation bump it when deletion starts.
    let mut held = mcl("held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    api.create(MCL, &held).await?;
    let m = api.delete(&format!("{MCL}/held")).await?.ok(200)?;
    ensure!(m["metadata"]["generation"] == 2, "deletion bumps generation: {m}");
    let m = w.expect("MODIFIED", "held").await?;
    ensure!(m["metadata"]["deletionTimestamp"].is_string() && rv(&m)? == rv(&marked)?, "{m}");
    // Still there; a second DELETE is idempotent.
    ensure!(api.get(&path).await?.ok(200)? == marked);
    let again = api.delete(&path).await?.ok(200)?;
    ensure!(again["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]);
    // Updates cannot clear deletionTimestamp.
    let mut clear = marked.clone();
    clear["metadata"].as_object_mut().context("metadata")?.remove("deletionTimestamp");
    clear["data"] = json!({"k": "later"});
    let cleared = api.put(&path, &clear).await?.ok(200)?;
    ensure!(cleared["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]);
    w.expect("MODIFIED", "held").await?;
    // No new finalizers while deleting.
    let r = api
        .merge(
            &path,
            &json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}),
        )
        .await?;
    let s = r.failure(422, "Invalid")?;
    ensure!(s["details"]["causes"][0]["field"] == "metadata.finalizers", "{s}");
    // Removing the last finalizer deletes it.
    let last = api.merge(&path, &json!({"metadata": {"finalizers": null}})).await?.ok(200)?;
    api.get(&path).await?.failure(404, "NotFound")?;
    let d = w.expect("DELETED", "held").await?;
    ensure!(rv(&d)? > rv(&cleared)?, "DELETED carries the deletion's resourceVersion: {d}");
    ensure!(rv(&last)? == rv(&d)?, "patch answer {last} vs event {d}");
    ensure!(api.names(&cms("default")).await?.is_empty());
    Ok(())
}

fn owned_by(name_: &str, owner: &Value) -> Value {
    let mut c = cm(name_);
    c["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "v1", "kind": "ConfigMap", "name": name(owner), "uid": uid(owner),
    }]);
    c
}

async fn gc_background(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let owner = api.create(&cms("default"), &cm("owner")).await?;
    api.create(&cms("default"), &owned_by("dep1", &owner)).await?;
    api.create(&cms("default"), &owned_by("dep2", &owner)).await?;
    api.create(&cms("default"), &cm("bystander")).await?;
    let del = api
        .delete_with(
            &format!("{}/owner", cms("default")),
            &json!({"propagationPolicy": "Background"}),
        )
        .await?
        .ok(200)?;
    ensure!(del["status"] == "Success", "{del}");
    api.gone(&format!("{}/dep1", cms("default"))).await?;
    api.gone(&format!("{}/dep2", cms("default"))).await?;
    ensure!(api.names(&cms("default")).await? == strs(&["bystander"]));
    Ok(())
}

async fn gc_foreground(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let owner = api.create(&cms("default"), &cm("owner")).await?;
    let mut dep = owned_by("dep", &owner);
    dep["metadata"]["finalizers"] = json!(["example.com/hold"]);
    api.create(&cms("default"), &dep).await?;
    let owner_path = format!("{}/owner", cms("default"));
    let dep_path = format!("{}/dep", cms("default"));
    let marked =
        api.delete_with(&owner_path, &json!({"propagationPolicy": "Foreground"})).await?.ok(200)?;
    ensure!(marked["metadata"]["deletionTimestamp"].is_string(), "{marked}");
    ensure!(marked["metadata"]["finalizers"] == json!(["foregroundDeletion"]), "{marked}");
    // The collector deletes the dependent (held by its own finalizer) ...
    api.poll(&dep_path, "the dependent to be marked", |r| {
        r.body["metadata"]["deletionTimestamp"].is_string()
    })
    .await?;
    // ... while the owner waits for it.
    let o = api.get(&owner_path).await?.ok(200)?;
    ensure!(o["metadata"]["finalizers"] == json!(["foregroundDeletion"]), "{o}");
    api.merge(&dep_path, &json!({"metadata": {"finalizers": null}})).await?.ok(200)?;
    api.gone(&dep_path).await?;
    api.gone(&owner_path).await?;
    Ok(())
}

async fn gc_orphan(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let owner = api.create(&cms("default"), &cm("owner")).await?;
    api.create(&cms("default"), &owned_by("dep", &owner)).await?;
    let owner_path = format!("{}/owner", cms("default"));
    let marked =
        api.delete_with(&owner_path, &json!({"propagationPolicy": "Orphan"})).await?.ok(200)?;
    ensure!(marked["metadata"]["finalizers"] == json!(["orphan"]), "{marked}");
    api.gone(&owner_path).await?;
    let dep = api.get(&format!("{}/dep", cms("default"))).await?.ok(200)?;
    let refs = dep["metadata"].get("ownerReferences").cloned().unwrap_or(json!([]));
    ensure!(refs == json!([]), "the orphan keeps its ownerReference: {dep}");
    ensure!(dep["metadata"].get("deletionTimestamp").is_none(), "{dep}");
    Ok(())
}

async fn namespace_lifecycle(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    // A missing namespace.
    let r = api.post(&cms("nope"), &cm("x")).await?;
    let s = r.failure(404, "NotFound")?;
    ensure!(r.message() == r#"namespaces "nope" not found"#, "{}", r.raw);
    ensure!(s["details"]["kind"] == "namespaces" && s["details"]["name"] == "nope", "{s}");

    api.namespace("doomed").await?;
    api.create(&works("doomed"), &work("w")).await?;
    api.create(&cms("doomed"), &cm("plain")).await?;
    let mut held = cm("held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    api.create(&cms("doomed"), &held).await?;

    let ns = api.delete("/api/v1/namespaces/doomed").await?.ok(200)?;
    ensure!(ns["kind"] == "Namespace" && ns["metadata"]["deletionTimestamp"].is_string(), "{ns}");
    ensure!(ns["status"]["phase"] == "Terminating", "{ns}");
    // Content goes first.
    api.gone(&format!("{}/w", works("doomed"))).await?;
    api.gone(&format!("{}/plain", cms("doomed"))).await?;
    api.poll(&format!("{}/held", cms("doomed")), "held to be marked", |r| {
        r.body["metadata"]["deletionTimestamp"].is_string()
    })
    .await?;
    // The namespace waits for it; nothing new may be created meanwhile.
    api.get("/api/v1/namespaces/doomed").await?.ok(200)?;
    let r = api.post(&cms("doomed"), &cm("late")).await?;
    let s = r.failure(403, "Forbidden")?;
    ensure!(
        r.message()
            == r#"configmaps "late" is forbidden: unable to create new content in namespace doomed because it is being terminated"#,
        "{}",
        r.raw
    );
    ensure!(s["details"]["kind"] == "configmaps", "{s}");
    api.post(&works("doomed"), &work("late")).await?.failure(403, "Forbidden")?;
    ensure!(api.names(&cms("doomed")).await? == strs(&["held"]));
    ensure!(api.names(&works("doomed")).await?.is_empty());
    // Release the last object: the namespace disappears.
    api.merge(&format!("{}/held", cms("doomed")), &json!({"metadata": {"finalizers": []}}))
        .await?
        .ok(200)?;
    api.gone("/api/v1/namespaces/doomed").await?;
    api.post(&cms("doomed"), &cm("after")).await?.failure(404, "NotFound")?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Lists (§6.1–§6.4, §6.7)
// ---------------------------------------------------------------------------------------------

async fn label_selectors(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    api.namespace("l").await?;
    let path = cms("l");
    api.create(&path, &cm_labeled("front", json!({"tier": "front", "env": "prod"}))).await?;
    api.create(&path, &cm_labeled("back", json!({"tier": "back", "env": "dev"}))).await?;
    api.create(&path, &cm_labeled("db", json!({"tier": "db"}))).await?;
    api.create(&path, &cm_labeled("none", json!({}))).await?;
    let cases: &[(&str, &[&str])] = &[
        ("tier=front", &["front"]),
        ("tier==back", &["back"]),
        ("tier!=front", &["back", "db", "none"]),
        ("tier in (front,back)", &["back", "front"]),
        ("tier notin (front,back)", &["db", "none"]),
        ("env", &["back", "front"]),
        ("!env", &["db", "none"]),
        ("tier in (front, back),env=prod", &["front"]),
        ("tier , !env", &["db"]),
        ("env!=prod", &["back", "db", "none"]),
    ];
    for (sel, want) in cases {
        let got = sorted(api.names(&format!("{path}?labelSelector={}", enc(sel))).await?);
        ensure!(got == strs(want), "labelSelector {sel:?}: got {got:?}, want {want:?}");
    }
    // The same selectors work on all-namespaces lists.
    let got = api.names(&format!("/api/v1/configmaps?labelSelector={}", enc("tier=db"))).await?;
    ensure!(got == strs(&["db"]), "{got:?}");
    // Parse errors.
    for bad in ["tier in (front", "tier=a=b", "!", "tier in ()", "-bad-=x"] {
        let r = api.get(&format!("{path}?labelSelector={}", enc(bad))).await?;
        r.failure(400, "BadRequest").with_context(|| format!("labelSelector {bad:?}"))?;
    }
    Ok(())
}

async fn field_selectors(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    api.namespace("a").await?;
    api.namespace("b").await?;
    api.create(&cms("a"), &cm("x")).await?;
    api.create(&cms("a"), &cm("y")).await?;
    api.create(&cms("b"), &cm("x")).await?;
    let cases: &[(&str, &str, &[&str])] = &[
        ("a", "metadata.name=x", &["x"]),
        ("a", "metadata.name==y", &["y"]),
        ("a", "metadata.name!=x", &["y"]),
        ("a", "metadata.namespace=a", &["x", "y"]),
        ("a", "metadata.namespace=b", &[]),
        ("a", "metadata.name=x,metadata.namespace=a", &["x"]),
    ];
    for (ns, sel, want) in cases {
        let got = sorted(api.names(&format!("{}?fieldSelector={}", cms(ns), enc(sel))).await?);
        ensure!(got == strs(want), "fieldSelector {sel:?} in {ns}: got {got:?}");
    }
    let all = api
        .get(&format!("/api/v1/configmaps?fieldSelector={}", enc("metadata.name=x")))
        .await?
        .ok(200)?;
    let mut seen: Vec<String> = all["items"]
        .as_array()
        .context("items")?
        .iter()
        .map(|i| format!("{}/{}", i["metadata"]["namespace"].as_str().unwrap_or(""), name(i)))
        .collect();
    seen.sort();
    ensure!(seen == strs(&["a/x", "b/x"]), "{seen:?}");
    // Cluster-scoped.
    api.create(MCL, &mcl("c1")).await?;
    api.create(MCL, &mcl("c2")).await?;
    let got = api.names(&format!("{MCL}?fieldSelector={}", enc("metadata.name=c2"))).await?;
    ensure!(got == strs(&["c2"]), "{got:?}");
    // Unsupported field labels, verbatim.
    let r = api.get(&format!("{}?fieldSelector={}", cms("a"), enc("data.k=v"))).await?;
    r.failure(400, "BadRequest")?;
    ensure!(r.message() == "field label not supported: data.k", "{}", r.raw);
    let r = api.get(&format!("{MCL}?fieldSelector={}", enc("spec.hubAcceptsClient=true"))).await?;
    r.failure(400, "BadRequest")?;
    ensure!(r.message() == "field label not supported: spec.hubAcceptsClient", "{}", r.raw);
    let r = api.get(&format!("{}?fieldSelector={}", cms("a"), enc("metadata.name"))).await?;
    r.failure(400, "BadRequest")?;
    Ok(())
}

async fn pagination_is_a_consistent_snapshot(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    api.namespace("p").await?;
    api.namespace("q").await?;
    let path = cms("p");
    for n in ["a", "b", "c", "d", "e"] {
        api.create(&path, &cm_labeled(n, json!({"keep": "yes"}))).await?;
    }
    api.create(&path, &cm_labeled("f", json!({"keep": "no"}))).await?;
    api.create(&cms("q"), &cm("other")).await?;
    let sel = format!("labelSelector={}", enc("keep=yes"));
    let p1 = api.get(&format!("{path}?limit=2&{sel}")).await?.ok(200)?;
    ensure!(names_of(&p1)? == strs(&["a", "b"]), "{p1}");
    let snapshot = rv_str(&p1);
    let token = p1["metadata"]["continue"].as_str().context("page 1 has no continue")?.to_owned();
    // Writes between pages are not visible.
    let c_before = api.get(&format!("{path}/c")).await?.ok(200)?;
    api.create(&path, &cm_labeled("bb", json!({"keep": "yes"}))).await?;
    api.merge(&format!("{path}/c"), &json!({"data": {"changed": "yes"}})).await?.ok(200)?;
    api.delete(&format!("{path}/d")).await?.ok(200)?;

    let p2 = api.get(&format!("{path}?limit=2&{sel}&continue={}", enc(&token))).await?.ok(200)?;
    ensure!(names_of(&p2)? == strs(&["c", "d"]), "page 2 is not of the snapshot: {p2}");
    ensure!(rv_str(&p2) == snapshot, "page 2 resourceVersion {} != {snapshot}", rv_str(&p2));
    ensure!(p2["items"][0] == c_before, "page 2 shows a later state of c: {p2}");
    let token2 = p2["metadata"]["continue"].as_str().context("page 2 has no continue")?;
    let p3 = api.get(&format!("{path}?limit=2&{sel}&continue={}", enc(token2))).await?.ok(200)?;
    ensure!(names_of(&p3)? == strs(&["e"]), "{p3}");
    ensure!(rv_str(&p3) == snapshot, "page 3 resourceVersion");
    ensure!(p3["metadata"].get("continue").is_none_or(|c| c == ""), "last page continues: {p3}");
    // A fresh list sees the writes.
    ensure!(api.names(&format!("{path}?{sel}")).await? == strs(&["a", "b", "bb", "c", "e"]));
    // Pagination without a selector; limit larger than the set.
    let all = api.get(&format!("{path}?limit=100")).await?.ok(200)?;
    ensure!(names_of(&all)?.len() == 6 && all["metadata"].get("continue").is_none_or(|c| c == ""));
    // Tampered, foreign and garbage tokens.
    let mut bytes = token.clone().into_bytes();
    let mid = bytes.len() / 2;
    bytes[mid] = if bytes[mid] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(bytes)?;
    for bad in [tampered.as_str(), "garbage!", "e30"] {
        let r = api.get(&format!("{path}?limit=2&continue={}", enc(bad))).await?;
        r.failure(400, "BadRequest").with_context(|| format!("continue={bad:?}"))?;
    }
    let r = api.get(&format!("{}?limit=2&continue={}", cms("q"), enc(&token))).await?;
    r.failure(400, "BadRequest").context("a token of another namespace")?;
    // continue with resourceVersionMatch.
    let r = api
        .get(&format!(
            "{path}?limit=2&continue={}&resourceVersion={snapshot}&resourceVersionMatch=Exact",
            enc(&token)
        ))
        .await?;
    r.failure(422, "Invalid")?;
    Ok(())
}

async fn list_resource_versions(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    api.namespace("r").await?;
    api.namespace("s").await?;
    let path = cms("r");
    // Empty lists: items is an array, kind and resourceVersion present.
    let empty = api.get(&path).await?.ok(200)?;
    ensure!(empty["kind"] == "ConfigMapList" && empty["apiVersion"] == "v1", "{empty}");
    ensure!(empty["items"] == json!([]) && rv(&empty)? > 0, "{empty}");
    let empty_mcl = api.get(MCL).await?.ok(200)?;
    ensure!(empty_mcl["kind"] == "ManagedClusterList", "{empty_mcl}");
    ensure!(empty_mcl["apiVersion"] == "cluster.open-cluster-management.io/v1");
    ensure!(
        empty_mcl["items"] == json!([]) && empty_mcl["metadata"]["resourceVersion"].is_string()
    );

    let first = api.create(&path, &cm("first")).await?;
    let n1 = rv(&first)?;
    let second = api.create(&path, &cm("second")).await?;
    let n2 = rv(&second)?;
    api.create(&cms("s"), &cm("elsewhere")).await?;

    // Unset: consistent, includes everything written.
    let l = api.get(&path).await?.ok(200)?;
    ensure!(names_of(&l)? == strs(&["first", "second"]) && rv(&l)? >= n2, "{l}");
    // 0: any state (served from the cache); must be well formed.
    let l = api.get(&format!("{path}?resourceVersion=0")).await?.ok(200)?;
    names_of(&l)?;
    ensure!(rv(&l)? > 0, "{l}");
    // N, legacy and NotOlderThan: at least as new as N.
    for q in [
        format!("resourceVersion={n2}"),
        format!("resourceVersion={n2}&resourceVersionMatch=NotOlderThan"),
    ] {
        let l = api.get(&format!("{path}?{q}")).await?.ok(200)?;
        ensure!(names_of(&l)? == strs(&["first", "second"]) && rv(&l)? >= n2, "{q}: {l}");
    }
    // N Exact: exactly the state at N, with and without pagination.
    let l = api
        .get(&format!("{path}?resourceVersion={n1}&resourceVersionMatch=Exact"))
        .await?
        .ok(200)?;
    ensure!(names_of(&l)? == strs(&["first"]), "Exact {n1}: {l}");
    ensure!(rv(&l)? == n1, "Exact list answered at {} not {n1}", rv(&l)?);
    ensure!(l["items"][0] == first, "{l}");
    let l = api
        .get(&format!("{path}?resourceVersion={n2}&resourceVersionMatch=Exact&limit=1"))
        .await?
        .ok(200)?;
    ensure!(names_of(&l)? == strs(&["first"]) && rv(&l)? == n2, "{l}");
    let token = l["metadata"]["continue"].as_str().context("Exact page 1 has no continue")?;
    let l2 = api.get(&format!("{path}?limit=1&continue={}", enc(token))).await?.ok(200)?;
    ensure!(names_of(&l2)? == strs(&["second"]) && rv(&l2)? == n2, "{l2}");

    // Invalid ListOptions.
    invalid_list_options(
        &api,
        &path,
        &[
            "resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch=Exact",
            "resourceVersion=0&resourceVersionMatch=Exact",
            "resourceVersion=1&resourceVersionMatch=Sometime",
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
        ],
        "resourceVersionMatch",
    )
    .await?;
    api.get(&format!("{path}?resourceVersion=abc")).await?.failure(400, "BadRequest")?;
    api.get(&format!("{path}?limit=many")).await?.failure(400, "BadRequest")?;
    // Odd but valid query strings (kube-rs).
    ensure!(api.names(&format!("{path}?&limit=500")).await?.len() == 2);
    ensure!(api.names(&format!("{path}?")).await?.len() == 2);

    // All namespaces: objects keep their namespace.
    let all = api.get("/api/v1/configmaps").await?.ok(200)?;
    ensure!(all["kind"] == "ConfigMapList", "{all}");
    let mut seen: Vec<String> = all["items"]
        .as_array()
        .context("items")?
        .iter()
        .map(|i| format!("{}/{}", i["metadata"]["namespace"].as_str().unwrap_or(""), name(i)))
        .collect();
    seen.sort();
    // (kube-public/cluster-info is the hub's own, published for joining agents)
    ensure!(
        seen == strs(&["kube-public/cluster-info", "r/first", "r/second", "s/elsewhere"]),
        "{seen:?}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Watch (§6.5–§6.8)
// ---------------------------------------------------------------------------------------------

async fn watch_event_types(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    api.create(&cms("default"), &cm("before")).await?;
    // Unset resourceVersion: the current objects as ADDED, then changes.
    let mut w = api.watch(&format!("{}?watch=true", cms("default"))).await?;
    let added = w.expect("ADDED", "before").await?;
    ensure!(added["kind"] == "ConfigMap" && added["apiVersion"] == "v1", "{added}");
    let c = api.create(&cms("default"), &cm("x")).await?;
    let a = w.expect("ADDED", "x").await?;
    ensure!(a == c, "ADDED object differs from the create answer:\n{a}\n{c}");
    let m =
        api.merge(&format!("{}/x", cms("default")), &json!({"data": {"k": "2"}})).await?.ok(200)?;
    let ev = w.expect("MODIFIED", "x").await?;
    ensure!(ev == m, "MODIFIED object differs:\n{ev}\n{m}");
    api.delete(&format!("{}/x", cms("default"))).await?.ok(200)?;
    let d = w.expect("DELETED", "x").await?;
    ensure!(rv(&d)? > rv(&m)?, "DELETED carries the deletion resourceVersion: {d}");
    ensure!(d["data"]["k"] == "2", "DELETED carries the last state: {d}");
    // resourceVersion=0 starts from the current state too.
    let mut w0 = api.watch(&format!("{}?watch=true&resourceVersion=0", cms("default"))).await?;
    w0.expect("ADDED", "before").await?;
    api.create(&cms("default"), &cm("y")).await?;
    w0.expect("ADDED", "y").await?;
    // An OCM kind.
    let mut wm = api.watch(&format!("{MCL}?watch=true")).await?;
    let c = api.create(MCL, &mcl("c1")).await?;
    let ev = wm.expect("ADDED", "c1").await?;
    ensure!(ev == c && ev["kind"] == "ManagedCluster", "{ev}");
    api.merge(&format!("{MCL}/c1/status"), &json!({"status": {"version": {"kubernetes": "v1"}}}))
        .await?
        .ok(200)?;
    let ev = wm.expect("MODIFIED", "c1").await?;
    ensure!(ev["status"]["version"]["kubernetes"] == "v1", "{ev}");
    Ok(())
}

async fn watch_resumes_exactly_once(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let path = cms("default");
    let start = api.create(&path, &cm("a")).await?;
    let b1 = api.create(&path, &cm("b")).await?;
    let m = api.merge(&format!("{path}/a"), &json!({"data": {"k": "2"}})).await?.ok(200)?;
    api.delete(&format!("{path}/b")).await?.ok(200)?;
    let mut w = api.watch(&format!("{path}?watch=true&resourceVersion={}", rv_str(&start))).await?;
    let e1 = w.expect("ADDED", "b").await?;
    ensure!(e1 == b1, "{e1}");
    let e2 = w.expect("MODIFIED", "a").await?;
    ensure!(e2 == m, "{e2}");
    let e3 = w.expect("DELETED", "b").await?;
    ensure!(rv(&e1)? < rv(&e2)? && rv(&e2)? < rv(&e3)?, "out of order");
    // Live events follow, with nothing replayed twice.
    api.create(&path, &cm("c")).await?;
    let e4 = w.expect("ADDED", "c").await?;
    ensure!(rv(&e4)? > rv(&e3)?);
    // Resuming from the latest event's version replays nothing.
    let mut w2 = api.watch(&format!("{path}?watch=true&resourceVersion={}", rv(&e4)?)).await?;
    api.create(&path, &cm("d")).await?;
    w2.expect("ADDED", "d").await?;
    // Resuming on another kind with the same global cursor works too (shared counter).
    let mut w3 = api.watch(&format!("{MCL}?watch=true&resourceVersion={}", rv(&e4)?)).await?;
    api.create(MCL, &mcl("c1")).await?;
    w3.expect("ADDED", "c1").await?;
    Ok(())
}

async fn watch_timeout_and_bookmarks(b: Backend) -> anyhow::Result<()> {
    let hub = TestHub::start_with(b, |c| {
        c.bookmark_every = Duration::from_millis(200);
        c.cache.progress_every = Duration::from_millis(100);
    })
    .await?;
    let api = Api::with(hub)?;
    let c = api.create(&cms("default"), &cm("x")).await?;
    // timeoutSeconds ends the stream cleanly; no bookmarks unless asked for.
    let mut w = api
        .watch(&format!(
            "{}?watch=true&resourceVersion={}&timeoutSeconds=1",
            cms("default"),
            rv_str(&c)
        ))
        .await?;
    let lines = w.rest().await?;
    ensure!(lines.is_empty(), "unexpected lines without changes or bookmarks: {lines:?}");
    // Bookmarks carry kind, apiVersion and a resourceVersion, and nothing else of an object.
    let mut w = api
        .watch(&format!(
            "{}?watch=true&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=30",
            cms("default"),
            rv_str(&c)
        ))
        .await?;
    let bm = w.next().await?.context("watch ended")?;
    ensure!(bm["type"] == "BOOKMARK", "{bm}");
    let o = &bm["object"];
    ensure!(o["kind"] == "ConfigMap" && o["apiVersion"] == "v1", "{bm}");
    ensure!(rv(o)? >= rv(&c)?, "{bm}");
    ensure!(o.get("data").is_none() && o["metadata"].get("name").is_none(), "{bm}");
    // Changes still flow between bookmarks, and bookmarks never go backwards.
    let y = api.create(&cms("default"), &cm("y")).await?;
    let mut last = rv(o)?;
    loop {
        let ev = w.next().await?.context("watch ended")?;
        let r = rv(&ev["object"])?;
        ensure!(r >= last, "resourceVersion went backwards: {ev}");
        last = r;
        if ev["type"] == "ADDED" {
            ensure!(name(&ev["object"]) == "y" && r == rv(&y)?, "{ev}");
            break;
        }
    }
    loop {
        let ev = w.next().await?.context("watch ended")?;
        if ev["type"] == "BOOKMARK" {
            ensure!(rv(&ev["object"])? >= rv(&y)?, "bookmark behind a sent event: {ev}");
            break;
        }
    }
    // An invalid timeout.
    api.get(&format!("{}?watch=true&timeoutSeconds=soon", cms("default")))
        .await?
        .failure(400, "BadRequest")?;
    Ok(())
}

async fn watch_too_old_is_an_error_event(b: Backend) -> anyhow::Result<()> {
    let hub = TestHub::start_with(b, |c| {
        c.cache = CacheConfig { history_per_kind: 5, ..c.cache };
    })
    .await?;
    let api = Api::with(hub)?;
    let first = api.create(&cms("default"), &cm("c0")).await?;
    for i in 1..12 {
        api.create(&cms("default"), &cm(&format!("c{i}"))).await?;
    }
    // A list without a resourceVersion is a consistent read: the cache has caught up with every
    // create above (and so dropped c0 from its 5-event history) once it answers.
    api.get(&cms("default")).await?.ok(200)?;
    let mut w = api
        .watch(&format!("{}?watch=true&resourceVersion={}", cms("default"), rv_str(&first)))
        .await?;
    let lines = w.rest().await?;
    ensure!(lines.len() == 1, "expected exactly one ERROR event, got {lines:?}");
    let ev = &lines[0];
    ensure!(ev["type"] == "ERROR", "{ev}");
    let s = &ev["object"];
    ensure!(s["kind"] == "Status" && s["apiVersion"] == "v1" && s["status"] == "Failure", "{s}");
    ensure!(s["code"] == 410 && s["reason"] == "Expired", "{s}");
    let msg = s["message"].as_str().unwrap_or("");
    ensure!(msg.starts_with(&format!("too old resource version: {} (", rv_str(&first))), "{msg}");
    // A recent enough resourceVersion still resumes.
    let last = api.get(&format!("{}/c11", cms("default"))).await?.ok(200)?;
    resumes_from(&api, &last).await
}

/// A watch of `default`'s ConfigMaps from `last`'s resourceVersion sees a ConfigMap created after.
async fn resumes_from(api: &Api, last: &Value) -> anyhow::Result<()> {
    let mut w = api
        .watch(&format!("{}?watch=true&resourceVersion={}", cms("default"), rv_str(last)))
        .await?;
    api.create(&cms("default"), &cm("fresh")).await?;
    w.expect("ADDED", "fresh").await?;
    Ok(())
}

/// Events leave the history after `history_max_age` even when no more come (a kind that went
/// quiet after a burst); a watch from before them is 410 Gone, one from the newest still resumes.
async fn watch_from_an_aged_out_event_is_expired(b: Backend) -> anyhow::Result<()> {
    let hub = TestHub::start_with(b, |c| {
        c.cache = CacheConfig {
            history_max_age: Duration::from_secs(1),
            progress_every: Duration::from_millis(100),
            ..c.cache
        };
    })
    .await?;
    let api = Api::with(hub)?;
    let first = api.create(&cms("default"), &cm("c0")).await?;
    let last = api.create(&cms("default"), &cm("c1")).await?;
    // Resumable while young.
    let mut w = api
        .watch(&format!("{}?watch=true&resourceVersion={}", cms("default"), rv_str(&first)))
        .await?;
    w.expect("ADDED", "c1").await?;
    drop(w);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let mut w = api
        .watch(&format!("{}?watch=true&resourceVersion={}", cms("default"), rv_str(&first)))
        .await?;
    let lines = w.rest().await?;
    ensure!(lines.len() == 1, "expected exactly one ERROR event, got {lines:?}");
    let s = &lines[0]["object"];
    ensure!(s["code"] == 410 && s["reason"] == "Expired", "{s}");
    resumes_from(&api, &last).await
}

async fn watch_initial_events(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let path = cms("default");
    api.create(&path, &cm("a")).await?;
    let last = api.create(&path, &cm("b")).await?;
    let mut expected = strs(&["a", "b"]);
    let mut newest = rv(&last)?;
    for rv_q in ["", "&resourceVersion=0", &format!("&resourceVersion={}", rv_str(&last))] {
        let mut w = api
            .watch(&format!(
                "{path}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true{rv_q}"
            ))
            .await?;
        let mut added = Vec::new();
        let end = loop {
            let ev = w.next().await?.context("watch ended")?;
            match ev["type"].as_str() {
                Some("ADDED") => added.push(name(&ev["object"]).to_owned()),
                Some("BOOKMARK") => break ev,
                _ => bail!("unexpected event during initial events: {ev}"),
            }
        };
        ensure!(sorted(added.clone()) == expected, "{rv_q}: initial events {added:?}");
        let o = &end["object"];
        ensure!(
            o["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true",
            "the first bookmark must end the initial events: {end}"
        );
        ensure!(o["kind"] == "ConfigMap" && o["apiVersion"] == "v1", "{end}");
        ensure!(rv(o)? >= newest, "{end}");
        // Then a normal watch.
        let n = format!("c{}", rv(o)?);
        newest = rv(&api.create(&path, &cm(&n)).await?)?;
        w.expect("ADDED", &n).await?;
        expected.push(n);
        expected.sort();
    }
    // Validation.
    invalid_list_options(
        &api,
        &path,
        &[
            "watch=true&sendInitialEvents=true",
            "watch=true&sendInitialEvents=true&resourceVersionMatch=Exact&resourceVersion=1",
            "watch=true&resourceVersionMatch=NotOlderThan",
        ],
        "sendInitialEvents",
    )
    .await
}

/// Each query answers 422 Invalid for `ListOptions`; the first one's first cause is `field`.
async fn invalid_list_options(
    api: &Api,
    path: &str,
    queries: &[&str],
    field: &str,
) -> anyhow::Result<()> {
    for (i, q) in queries.iter().enumerate() {
        let r = api.get(&format!("{path}?{q}")).await?;
        let s = r.failure(422, "Invalid").with_context(|| (*q).to_owned())?;
        ensure!(r.message().starts_with(r#"ListOptions.meta.k8s.io "" is invalid: "#), "{}", r.raw);
        if i == 0 {
            ensure!(s["details"]["causes"][0]["field"] == field, "{q}: {s}");
        }
    }
    Ok(())
}

async fn watch_selector_transitions(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let path = cms("default");
    let start = api.create(&path, &cm("seed")).await?;
    let mut w = api
        .watch(&format!(
            "{path}?watch=true&resourceVersion={}&labelSelector={}",
            rv_str(&start),
            enc("app=web")
        ))
        .await?;
    api.create(&path, &cm_labeled("other", json!({"app": "db"}))).await?;
    api.create(&path, &cm_labeled("x", json!({"app": "web"}))).await?;
    w.expect("ADDED", "x").await?;
    // Stops matching: DELETED (with the new resourceVersion).
    let off =
        api.merge(&format!("{path}/x"), &json!({"metadata": {"labels": null}})).await?.ok(200)?;
    let d = w.expect("DELETED", "x").await?;
    ensure!(rv(&d)? == rv(&off)?, "{d}");
    // Changes while not matching are not sent; starts matching: ADDED.
    api.merge(&format!("{path}/x"), &json!({"data": {"k": "quiet"}})).await?.ok(200)?;
    let on = api
        .merge(&format!("{path}/other"), &json!({"metadata": {"labels": {"app": "web"}}}))
        .await?
        .ok(200)?;
    let a = w.expect("ADDED", "other").await?;
    ensure!(a == on, "{a}");
    api.merge(&format!("{path}/other"), &json!({"data": {"k": "v2"}})).await?.ok(200)?;
    w.expect("MODIFIED", "other").await?;
    api.delete(&format!("{path}/other")).await?.ok(200)?;
    w.expect("DELETED", "other").await?;
    Ok(())
}

async fn watch_all_namespaces_and_by_name(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    api.namespace("a").await?;
    api.namespace("b").await?;
    let list = api.get("/api/v1/configmaps").await?.ok(200)?;
    let mut all = api
        .watch(&format!("/api/v1/configmaps?watch=true&resourceVersion={}", rv_str(&list)))
        .await?;
    let mut only_a =
        api.watch(&format!("{}?watch=true&resourceVersion={}", cms("a"), rv_str(&list))).await?;
    api.create(&cms("b"), &cm("x")).await?;
    api.create(&cms("a"), &cm("x")).await?;
    let e1 = all.expect("ADDED", "x").await?;
    let e2 = all.expect("ADDED", "x").await?;
    ensure!(e1["metadata"]["namespace"] == "b" && e2["metadata"]["namespace"] == "a");
    let e = only_a.expect("ADDED", "x").await?;
    ensure!(e["metadata"]["namespace"] == "a", "a namespace watch saw another namespace: {e}");

    // What `kubectl delete --wait` does.
    api.create(&cms("a"), &cm("target")).await?;
    let sel = enc("metadata.name=target");
    // resourceVersion=0 is "any": served from the cache, which may not have the create yet
    // (on etcd it follows a watch), as Kubernetes allows. Ask until it has.
    let list = format!("{}?fieldSelector={sel}&limit=500&resourceVersion=0", cms("a"));
    let l = hub::eventually("the cached list has the create", Duration::from_secs(10), || async {
        let l = api.get(&list).await?.ok(200)?;
        Ok((names_of(&l)? == strs(&["target"])).then_some(l))
    })
    .await?;
    api.delete(&format!("{}/target", cms("a"))).await?.ok(200)?;
    let mut w = api
        .watch(&format!(
            "{}?allowWatchBookmarks=true&fieldSelector={sel}&resourceVersion={}&timeoutSeconds=300&watch=true",
            cms("a"),
            rv_str(&l)
        ))
        .await?;
    // Other objects' events never reach it.
    api.merge(&format!("{}/x", cms("a")), &json!({"data": {"k": "noise"}})).await?.ok(200)?;
    let d = w.expect("DELETED", "target").await?;
    ensure!(d["metadata"]["namespace"] == "a", "{d}");
    // `kubectl get NAME -w`.
    let mut g = api
        .watch(&format!(
            "{}?fieldSelector={}&resourceVersion=0&watch=true",
            cms("a"),
            enc("metadata.name=x")
        ))
        .await?;
    g.expect("ADDED", "x").await?;
    api.merge(&format!("{}/x", cms("a")), &json!({"data": {"k": "again"}})).await?.ok(200)?;
    g.expect("MODIFIED", "x").await?;

    // Across namespaces, name and namespace pinned: only a/x, never b/x nor a/x2 (whose key
    // a/x begins), whether listed (latest, with a limit, or any: all served by that one key)
    // or watched.
    let pinned = enc("metadata.name=x,metadata.namespace=a");
    let mut p = api
        .watch(&format!("/api/v1/configmaps?fieldSelector={pinned}&resourceVersion=0&watch=true"))
        .await?;
    p.expect("ADDED", "x").await?;
    api.create(&cms("a"), &cm("x2")).await?;
    api.merge(&format!("{}/x", cms("b")), &json!({"data": {"k": "b"}})).await?.ok(200)?;
    api.merge(&format!("{}/x", cms("a")), &json!({"data": {"k": "a"}})).await?.ok(200)?;
    let e = p.expect("MODIFIED", "x").await?;
    ensure!(e["metadata"]["namespace"] == "a" && e["data"]["k"] == "a", "{e}");
    for query in ["", "&limit=1", "&resourceVersion=0"] {
        let l = api.get(&format!("/api/v1/configmaps?fieldSelector={pinned}{query}")).await?;
        let l = l.ok(200)?;
        ensure!(names_of(&l)? == strs(&["x"]), "{query}: {l}");
        ensure!(l["items"][0]["metadata"]["namespace"] == "a", "{l}");
        let in_a = format!("{}?fieldSelector={}{query}", cms("a"), enc("metadata.name=x"));
        ensure!(names_of(&api.get(&in_a).await?.ok(200)?)? == strs(&["x"]), "{query}");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Discovery, health, authentication (§1, §2)
// ---------------------------------------------------------------------------------------------

async fn discovery_documents(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let v = api.get("/version").await?.ok(200)?;
    for f in [
        "major",
        "minor",
        "gitVersion",
        "gitCommit",
        "gitTreeState",
        "buildDate",
        "goVersion",
        "compiler",
        "platform",
    ] {
        ensure!(v[f].is_string(), "/version lacks {f}: {v}");
    }
    let core = api.get("/api").await?.ok(200)?;
    ensure!(core["kind"] == "APIVersions" && core["versions"] == json!(["v1"]), "{core}");
    let v1 = api.get("/api/v1").await?.ok(200)?;
    ensure!(v1["kind"] == "APIResourceList" && v1["groupVersion"] == "v1", "{v1}");
    let res = v1["resources"].as_array().context("resources")?;
    let ns = res.iter().find(|r| r["name"] == "namespaces").context("namespaces")?;
    ensure!(ns["namespaced"] == false && ns["kind"] == "Namespace", "{ns}");
    let cmr = res.iter().find(|r| r["name"] == "configmaps").context("configmaps")?;
    ensure!(cmr["namespaced"] == true && cmr["singularName"] == "configmap", "{cmr}");

    let apis = api.get("/apis").await?.ok(200)?;
    ensure!(apis["kind"] == "APIGroupList" && apis["apiVersion"] == "v1", "{apis}");
    let g = apis["groups"]
        .as_array()
        .context("groups")?
        .iter()
        .find(|g| g["name"] == MCL_GROUP)
        .context("the cluster group is missing from /apis")?;
    ensure!(g["preferredVersion"]["groupVersion"] == format!("{MCL_GROUP}/v1"), "{g}");
    ensure!(g["versions"][0] == g["preferredVersion"], "preferred version first: {g}");
    let one = api.get(&format!("/apis/{MCL_GROUP}")).await?.ok(200)?;
    ensure!(one["kind"] == "APIGroup" && one["name"] == MCL_GROUP, "{one}");
    ensure!(one["preferredVersion"] == g["preferredVersion"], "{one}");

    let gv = api.get(&format!("/apis/{MCL_GROUP}/v1")).await?.ok(200)?;
    ensure!(gv["kind"] == "APIResourceList" && gv["groupVersion"] == format!("{MCL_GROUP}/v1"));
    let res = gv["resources"].as_array().context("resources")?;
    let m = res.iter().find(|r| r["name"] == "managedclusters").context("managedclusters")?;
    ensure!(m["singularName"] == "managedcluster" && m["namespaced"] == false, "{m}");
    ensure!(m["kind"] == "ManagedCluster", "{m}");
    let short = m["shortNames"].as_array().context("shortNames")?;
    ensure!(short.contains(&json!("mcl")), "{m}");
    let verbs = sorted(
        m["verbs"]
            .as_array()
            .context("verbs")?
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
    );
    ensure!(
        verbs
            == strs(&[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch"
            ]),
        "{verbs:?}"
    );
    let hash = m["storageVersionHash"].as_str().context("storageVersionHash")?;
    ensure!(hash.len() == 12, "storageVersionHash is base64 of 8 bytes: {hash}");
    let st = res.iter().find(|r| r["name"] == "managedclusters/status").context("status")?;
    let verbs = sorted(
        st["verbs"]
            .as_array()
            .context("verbs")?
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
    );
    ensure!(verbs == strs(&["get", "patch", "update"]) && st["kind"] == "ManagedCluster", "{st}");
    let work = api.get("/apis/work.open-cluster-management.io/v1").await?.ok(200)?;
    let mw = work["resources"]
        .as_array()
        .context("resources")?
        .iter()
        .find(|r| r["name"] == "manifestworks")
        .context("manifestworks")?
        .clone();
    ensure!(mw["namespaced"] == true && mw["kind"] == "ManifestWork", "{mw}");

    for missing in ["/apis/example.com", "/apis/example.com/v1", &format!("/apis/{MCL_GROUP}/v7")] {
        api.get(missing).await?.failure(404, "NotFound").with_context(|| missing.to_owned())?;
    }
    Ok(())
}

async fn aggregated_discovery(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    for (path, core) in [("/apis", false), ("/api", true)] {
        let r = api.send(Method::GET, path, None, &[("accept", AGGREGATED_ACCEPT)]).await?;
        ensure!(r.code == 200, "{path}: {}", r.code);
        ensure!(
            r.header("content-type")
                == Some("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"),
            "{path}: content type {:?}",
            r.header("content-type")
        );
        ensure!(r.body["kind"] == "APIGroupDiscoveryList", "{path}: {}", r.raw);
        ensure!(r.body["apiVersion"] == "apidiscovery.k8s.io/v2", "{path}: {}", r.raw);
        let items = r.body["items"].as_array().context("items")?;
        if core {
            ensure!(items.len() == 1 && items[0]["metadata"]["name"] == "", "{}", r.raw);
        } else {
            let g = items
                .iter()
                .find(|i| i["metadata"]["name"] == MCL_GROUP)
                .context("cluster group missing from aggregated /apis")?;
            let v = &g["versions"][0];
            ensure!(v["version"] == "v1" && v["freshness"] == "Current", "{v}");
            let m = v["resources"]
                .as_array()
                .context("resources")?
                .iter()
                .find(|r| r["resource"] == "managedclusters")
                .context("managedclusters")?;
            ensure!(m["scope"] == "Cluster" && m["singularResource"] == "managedcluster", "{m}");
            ensure!(
                m["responseKind"]
                    == json!({"group": MCL_GROUP, "version": "v1", "kind": "ManagedCluster"}),
                "{m}"
            );
            ensure!(m["shortNames"].as_array().is_some_and(|s| s.contains(&json!("mcl"))), "{m}");
            ensure!(m["subresources"][0]["subresource"] == "status", "{m}");
        }
        let etag = r.header("etag").context("no ETag")?.to_owned();
        ensure!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
        let again = api
            .send(
                Method::GET,
                path,
                None,
                &[("accept", AGGREGATED_ACCEPT), ("if-none-match", &etag)],
            )
            .await?;
        ensure!(again.code == 304 && again.raw.is_empty(), "{path} If-None-Match: {}", again.code);
        let stale = api
            .send(
                Method::GET,
                path,
                None,
                &[("accept", AGGREGATED_ACCEPT), ("if-none-match", "\"x\"")],
            )
            .await?;
        ensure!(stale.code == 200, "{path}: stale ETag answered {}", stale.code);

        // v2beta1 alone.
        let beta = api
            .send(
                Method::GET,
                path,
                None,
                &[(
                    "accept",
                    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
                )],
            )
            .await?;
        ensure!(beta.code == 200, "{}", beta.code);
        ensure!(
            beta.header("content-type")
                == Some(
                    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
                ),
            "{:?}",
            beta.header("content-type")
        );
        ensure!(beta.body["apiVersion"] == "apidiscovery.k8s.io/v2beta1", "{}", beta.raw);
        // Plain JSON: the legacy document.
        let legacy =
            api.send(Method::GET, path, None, &[("accept", "application/json, */*")]).await?;
        let want = if core { "APIVersions" } else { "APIGroupList" };
        ensure!(legacy.body["kind"] == want, "{}", legacy.raw);
    }
    Ok(())
}

async fn health_and_authentication(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let anon = api.hub.anonymous()?;
    for p in ["/healthz", "/livez", "/readyz"] {
        let r = anon.get(format!("{}{p}", api.hub.url)).send().await?;
        ensure!(r.status().as_u16() == 200, "{p}: {}", r.status());
        ensure!(r.text().await? == "ok", "{p}");
    }
    for (method, p) in [
        (Method::GET, "/api"),
        (Method::GET, "/apis"),
        (Method::GET, "/api/v1"),
        (Method::GET, MCL),
        (Method::GET, "/api/v1/namespaces/default/configmaps?watch=true"),
        (Method::POST, "/api/v1/namespaces/default/configmaps"),
        (Method::DELETE, "/api/v1/namespaces/default"),
        (Method::GET, "/no/such/path"),
    ] {
        let mut req = anon.request(method.clone(), format!("{}{p}", api.hub.url));
        if method == Method::POST {
            req =
                req.header("content-type", "application/json").body(serde_json::to_vec(&cm("x"))?);
        }
        let r = req.send().await?;
        let code = r.status().as_u16();
        let raw = r.text().await?;
        let resp = Resp {
            code,
            headers: HeaderMap::new(),
            body: serde_json::from_str(&raw).unwrap_or(Value::Null),
            raw,
        };
        resp.failure(401, "Unauthorized").with_context(|| format!("{method} {p}"))?;
        ensure!(resp.message() == "Unauthorized", "{}", resp.raw);
    }
    // Nothing was written anonymously.
    ensure!(api.names(&cms("default")).await?.is_empty());
    api.get("/api/v1/namespaces/default").await?.ok(200)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Bad input (§1, §5.2, §5.8, §6)
// ---------------------------------------------------------------------------------------------

async fn bad_bodies_store_nothing(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    // Malformed JSON.
    let r = api
        .send(Method::POST, MCL, Some(("application/json", b"{\"metadata\": ".to_vec())), &[])
        .await?;
    r.failure(400, "BadRequest")?;
    let r = api
        .send(Method::POST, &cms("default"), Some(("application/json", b"[1,2]".to_vec())), &[])
        .await?;
    r.failure(400, "BadRequest")?;
    // Wrong apiVersion / kind.
    let mut wrong = mcl("c1");
    wrong["apiVersion"] = json!("cluster.open-cluster-management.io/v9");
    let r = api.post(MCL, &wrong).await?;
    r.failure(400, "BadRequest")?;
    ensure!(
        r.message()
            == "the API version in the data (cluster.open-cluster-management.io/v9) does not match the expected API version (cluster.open-cluster-management.io/v1)",
        "{}",
        r.raw
    );
    let mut wrong = cm("x");
    wrong["kind"] = json!("Secret");
    api.post(&cms("default"), &wrong).await?.failure(400, "BadRequest")?;
    let mut wrong = cm("x");
    wrong["apiVersion"] = json!("v2");
    api.post(&cms("default"), &wrong).await?.failure(400, "BadRequest")?;
    // Types that do not fit the kind.
    let mut wrong = cm("x");
    wrong["data"] = json!({"k": 5});
    let r = api.post(&cms("default"), &wrong).await?;
    ensure!(matches!(r.code, 400 | 422), "data with a number: {}", r.raw);
    // Invalid names.
    for bad in ["Upper".to_owned(), "a".repeat(64), "-lead".to_owned(), "x_y".to_owned()] {
        let r = api.post(MCL, &mcl(&bad)).await?;
        let s = r.failure(422, "Invalid").with_context(|| format!("name {bad:?}"))?;
        ensure!(s["details"]["causes"][0]["field"] == "metadata.name", "{s}");
        ensure!(
            s["details"]["kind"] == "ManagedCluster" && s["details"]["group"] == MCL_GROUP,
            "{s}"
        );
        ensure!(
            r.message().starts_with(&format!(r#"ManagedCluster.{MCL_GROUP} "{bad}" is invalid: metadata.name: Invalid value: "{bad}""#)),
            "{}",
            r.raw
        );
    }
    for bad in ["Upper".to_owned(), "a".repeat(254)] {
        let r = api.post(&cms("default"), &cm(&bad)).await?;
        let s = r.failure(422, "Invalid").with_context(|| format!("name {bad:?}"))?;
        ensure!(s["details"]["causes"][0]["field"] == "metadata.name", "{s}");
        ensure!(s["details"]["causes"][0]["reason"] == "FieldValueInvalid", "{s}");
    }
    // A 254-character name is fine for a ConfigMap only up to 253.
    api.create(&cms("default"), &cm(&"a".repeat(253))).await?;
    // Bad labels and finalizers.
    let r = api.post(&cms("default"), &cm_labeled("lbl", json!({"bad key!": "v"}))).await?;
    r.failure(422, "Invalid")?;
    let mut fin = cm("fin");
    fin["metadata"]["finalizers"] = json!(["not a name"]);
    api.post(&cms("default"), &fin).await?.failure(422, "Invalid")?;
    // Schema violations on an OCM kind.
    let mut bad_spec = mcl("c1");
    bad_spec["spec"]["hubAcceptsClient"] = json!("yes");
    let r = api.post(MCL, &bad_spec).await?;
    let s = r.failure(422, "Invalid")?;
    ensure!(s["details"]["causes"][0]["field"] == "spec.hubAcceptsClient", "{s}");

    ensure!(api.names(MCL).await?.is_empty(), "a refused create stored something");
    ensure!(api.names(&cms("default")).await? == vec!["a".repeat(253)]);
    Ok(())
}

async fn bad_paths_and_methods(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    for p in [
        "/api/v1/widgets",
        "/api/v1/namespaces/default/widgets",
        "/apis/cluster.open-cluster-management.io/v1/widgets",
        "/apis/nope.example.com/v1/things",
        &format!("{MCL}/c1/bogus"),
        "/api/v2/namespaces",
        "/nothing/here",
    ] {
        let r = api.get(p).await?;
        r.failure(404, "NotFound").with_context(|| p.to_owned())?;
    }
    api.post("/api/v1/widgets", &cm("x")).await?.failure(404, "NotFound")?;
    // A namespace segment on a cluster-scoped kind.
    let ns_mcl = format!("/apis/{MCL_GROUP}/v1/namespaces/default/managedclusters");
    api.post(&ns_mcl, &mcl("c1")).await?.failure(404, "NotFound")?;
    api.get(&ns_mcl).await?.failure(404, "NotFound")?;
    // A namespaced kind's object path without a namespace.
    api.get("/api/v1/configmaps/x").await?.failure(404, "NotFound")?;
    // POST to an object path, PUT/PATCH to a collection.
    api.create(MCL, &mcl("c1")).await?;
    let r = api.post(&format!("{MCL}/c1"), &mcl("c1")).await?;
    r.failure(405, "MethodNotAllowed")?;
    ensure!(r.message().contains("not supported"), "{}", r.raw);
    api.put(MCL, &mcl("c2")).await?.failure(405, "MethodNotAllowed")?;
    api.merge(MCL, &json!({})).await?.failure(405, "MethodNotAllowed")?;
    api.send(Method::DELETE, &format!("{MCL}/c1/status"), None, &[])
        .await?
        .failure(405, "MethodNotAllowed")?;
    api.post(&format!("{MCL}/c1/status"), &mcl("c1")).await?.failure(405, "MethodNotAllowed")?;
    ensure!(api.names(MCL).await? == strs(&["c1"]));
    ensure!(
        api.names("/apis/cluster.open-cluster-management.io/v1/managedclusters").await?.len() == 1
    );
    Ok(())
}

async fn body_size_limits(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    // The edge: a body of exactly 3 MiB (a small object padded with JSON whitespace) is read and
    // stored; one byte more is refused while reading, and nothing is stored.
    let limit = 3 * 1024 * 1024;
    let padded = |name: &str, len: usize| {
        let mut body = serde_json::to_vec(&cm(name)).expect("serializable");
        body.resize(len, b' ');
        body
    };
    let path = cms("default");
    api.send(Method::POST, &path, Some(("application/json", padded("edge", limit))), &[])
        .await?
        .ok(201)?;
    api.send(Method::POST, &path, Some(("application/json", padded("over", limit + 1))), &[])
        .await?
        .failure(413, "RequestEntityTooLarge")?;
    ensure!(api.names(&path).await? == strs(&["edge"]));
    api.delete(&format!("{path}/edge")).await?;
    // Over 3 MiB: refused while reading.
    let mut huge = cm("huge");
    huge["data"] = json!({"k": "x".repeat(3 * 1024 * 1024 + 1024)});
    let r = api.post(&cms("default"), &huge).await?;
    r.failure(413, "RequestEntityTooLarge")?;
    ensure!(r.message().starts_with("Request entity too large: "), "{}", r.raw);
    // Over 1.5 MiB but under 3 MiB: the object is too large to store (a Role: ConfigMaps and
    // Secrets refuse more than 1 MiB of data in validation, before the store).
    let roles = "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles";
    let role = |name: &str, resource_name: String| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": name},
               "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                          "resourceNames": [resource_name]}]})
    };
    let r = api.post(roles, &role("big", "x".repeat(2 * 1024 * 1024))).await?;
    r.failure(413, "RequestEntityTooLarge")?;
    ensure!(r.message().starts_with("Request entity too large: "), "{}", r.raw);
    // An update growing an object past the limit.
    let small = api.create(roles, &role("small", "s".into())).await?;
    let mut grown = small.clone();
    grown["rules"][0]["resourceNames"] = json!(["y".repeat(2 * 1024 * 1024)]);
    api.put(&format!("{roles}/small"), &grown).await?.failure(413, "RequestEntityTooLarge")?;
    ensure!(api.names(roles).await? == strs(&["small"]));
    let now = api.get(&format!("{roles}/small")).await?.ok(200)?;
    ensure!(now == small, "a refused update changed the object");
    Ok(())
}

async fn field_validation(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    let mut body = mcl("c1");
    body["spec"]["bogus"] = json!(1);
    let r = api.post(&format!("{MCL}?fieldValidation=Strict"), &body).await?;
    r.failure(400, "BadRequest")?;
    ensure!(
        r.message()
            == r#"ManagedCluster in version "v1" cannot be handled as a ManagedCluster: strict decoding error: unknown field "spec.bogus""#,
        "{}",
        r.raw
    );
    ensure!(api.names(MCL).await?.is_empty());
    // Warn (the default): stored without the field, with a Warning header.
    for (name_, q) in [("c1", "?fieldValidation=Warn"), ("c2", "")] {
        body["metadata"]["name"] = json!(name_);
        let r = api.post(&format!("{MCL}{q}"), &body).await?;
        let warning = r.header("warning").map(str::to_owned);
        let c = r.ok(201)?;
        ensure!(c["spec"].get("bogus").is_none(), "{c}");
        let w = warning.context("no Warning header")?;
        ensure!(w.starts_with("299 - \"") && w.contains(r#"unknown field \"spec.bogus\""#), "{w}");
    }
    // Ignore: silently.
    body["metadata"]["name"] = json!("c3");
    let r = api.post(&format!("{MCL}?fieldValidation=Ignore"), &body).await?;
    ensure!(r.header("warning").is_none(), "Ignore warned");
    r.ok(201)?;
    // Strict on updates and patches too.
    let c1 = api.get(&format!("{MCL}/c1")).await?.ok(200)?;
    let mut upd = c1.clone();
    upd["spec"]["bogus"] = json!(2);
    api.put(&format!("{MCL}/c1?fieldValidation=Strict"), &upd).await?.failure(400, "BadRequest")?;
    api.body(
        Method::PATCH,
        &format!("{MCL}/c1?fieldValidation=Strict"),
        MERGE_PATCH,
        &json!({"spec": {"bogus": 3}}),
    )
    .await?
    .failure(400, "BadRequest")?;
    ensure!(api.get(&format!("{MCL}/c1")).await?.ok(200)? == c1);
    api.post(&format!("{MCL}?fieldValidation=Loose"), &mcl("c4")).await?.failure(422, "Invalid")?;
    ensure!(sorted(api.names(MCL).await?) == strs(&["c1", "c2", "c3"]));
    Ok(())
}

async fn content_negotiation(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    api.create(&cms("default"), &cm("x")).await?;
    let path = format!("{}/x", cms("default"));
    let r = api
        .send(Method::GET, &path, None, &[("accept", "application/vnd.kubernetes.protobuf")])
        .await?;
    r.failure(406, "NotAcceptable")?;
    // YAML: the same list, re-encoded; a Table cannot be YAML, so that is 406.
    let r = api.send(Method::GET, &cms("default"), None, &[("accept", "application/yaml")]).await?;
    ensure!(r.code == 200 && r.header("content-type") == Some("application/yaml"), "{}", r.raw);
    let list: Value = serde_saphyr::from_str(&r.raw)?;
    ensure!(list["kind"] == "ConfigMapList" && list["items"][0]["data"]["k"] == "v", "{list}");
    let table = "application/yaml;as=Table;g=meta.k8s.io;v=v1";
    let r = api.send(Method::GET, &cms("default"), None, &[("accept", table)]).await?;
    r.failure(406, "NotAcceptable")?;
    for accept in
        ["application/vnd.kubernetes.protobuf,application/json", "*/*", "application/json, */*"]
    {
        let r = api.send(Method::GET, &path, None, &[("accept", accept)]).await?;
        ensure!(r.code == 200 && name(&r.body) == "x", "Accept {accept}: {}", r.raw);
        ensure!(r.header("content-type").is_some_and(|c| c.starts_with("application/json")));
    }
    // charset parameters are stripped from Content-Type.
    let r = api
        .send(
            Method::POST,
            &cms("default"),
            Some(("application/json; charset=utf-8", serde_json::to_vec(&cm("y"))?)),
            &[],
        )
        .await?;
    r.ok(201)?;
    let r = api
        .send(
            Method::PATCH,
            &path,
            Some((
                "application/merge-patch+json; charset=utf-8",
                br#"{"data":{"k":"m"}}"#.to_vec(),
            )),
            &[],
        )
        .await?;
    ensure!(r.ok(200)?["data"]["k"] == "m");
    // Unknown request media types.
    let r = api
        .send(Method::POST, &cms("default"), Some(("text/plain", b"name: z".to_vec())), &[])
        .await?;
    r.failure(415, "UnsupportedMediaType")?;
    let r = api
        .send(
            Method::POST,
            &cms("default"),
            Some(("application/vnd.kubernetes.protobuf", vec![0x6b, 0x38, 0x73, 0])),
            &[],
        )
        .await?;
    // Protobuf is decoded (kubectl's built-in kinds); a bare prefix is a malformed body.
    r.failure(400, "BadRequest")?;
    ensure!(sorted(api.names(&cms("default")).await?) == strs(&["x", "y"]));
    Ok(())
}

async fn future_resource_versions(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    api.create(&cms("default"), &cm("x")).await?;
    let far = 1u64 << 50;
    let get_path = format!("{}/x?resourceVersion={far}", cms("default"));
    let list_path = format!("{}?resourceVersion={far}", cms("default"));
    let nt_path = format!("{list_path}&resourceVersionMatch=NotOlderThan");
    let watch_path = format!("{list_path}&watch=true");
    let (get, list, list_nt, watch) = tokio::join!(
        api.get(&get_path),
        api.get(&list_path),
        api.get(&nt_path),
        api.get(&watch_path)
    );
    for (what, r) in
        [("get", get?), ("list", list?), ("list NotOlderThan", list_nt?), ("watch", watch?)]
    {
        let s = r.failure(504, "Timeout").with_context(|| what.to_owned())?;
        ensure!(s["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge", "{what}: {s}");
        ensure!(s["details"]["retryAfterSeconds"].as_u64().is_some_and(|n| n > 0), "{what}: {s}");
        ensure!(r.header("retry-after").is_some(), "{what}: no Retry-After header");
        ensure!(r.message().contains("Too large resource version"), "{what}: {}", r.raw);
    }
    // A resourceVersion already reached is served.
    let got = api.get(&format!("{}/x?resourceVersion=0", cms("default"))).await?.ok(200)?;
    ensure!(name(&got) == "x");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Overload and failures of the store (the remaining reasons of kube-api.md §5.8)
// ---------------------------------------------------------------------------------------------

/// With one read seat and a short wait in line, a read beside a slow read (a GET waiting for a
/// future resourceVersion) answers 429 `TooManyRequests` with `Retry-After` once it has waited;
/// mutating requests and watches do not compete for that seat, and the seat comes back.
async fn inflight_limit_is_too_many_requests(b: Backend) -> anyhow::Result<()> {
    let api = Api::with(
        TestHub::start_with(b, |c| {
            c.max_requests_inflight = 1;
            c.request_queue_wait = Duration::from_millis(300);
        })
        .await?,
    )?;
    api.create(&cms("default"), &cm("x")).await?;
    let slow = format!("{}/x?resourceVersion={}", cms("default"), 1u64 << 50);
    let list = cms("default");
    let mut rejected = None;
    // The slow read holds the seat for about 3 s; try again if the probes never met it.
    for _ in 0..20 {
        let held = api.get(&slow);
        tokio::pin!(held);
        // Give the slow read a head start so that it, not a probe, takes the seat.
        if tokio::time::timeout(Duration::from_millis(200), &mut held).await.is_ok() {
            continue; // it was refused or ended at once: try again
        }
        loop {
            tokio::select! {
                r = &mut held => {
                    // The probe may have had the seat when the slow read arrived: try again.
                    let r = r?;
                    if r.code != 429 {
                        r.failure(504, "Timeout")?;
                    }
                    break;
                }
                r = api.get(&list) => {
                    let r = r?;
                    if r.code == 429 {
                        // A write and a watch are admitted while the read seat is taken.
                        api.create(&cms("default"), &cm("written-meanwhile")).await?;
                        let mut w = api.watch(&format!("{}?watch=true", cms("default"))).await?;
                        w.event().await?;
                        // Only evidence if the slow read still held the seat all along.
                        if futures::poll!(&mut held).is_ready() {
                            api.delete(&format!("{}/written-meanwhile", cms("default"))).await?;
                            break;
                        }
                        rejected = Some(r);
                        held.await?.failure(504, "Timeout")?;
                        break;
                    }
                    r.ok(200)?;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        if rejected.is_some() {
            break;
        }
    }
    let r = rejected.context("no read was ever refused while the only read seat was taken")?;
    let s = r.failure(429, "TooManyRequests")?;
    ensure!(s["details"]["retryAfterSeconds"].as_u64().is_some_and(|n| n > 0), "{s}");
    ensure!(r.header("retry-after").is_some(), "no Retry-After header: {:?}", r.headers);
    ensure!(r.message().starts_with("Too many requests"), "{}", r.raw);
    ensure!(
        sorted(api.names(&cms("default")).await?) == strs(&["written-meanwhile", "x"]),
        "the seat did not come back or the write was lost"
    );
    Ok(())
}

/// With one read seat and the default wait in line (5 s), a read beside a slow read (3 s) is
/// not refused: it waits for the seat and is served once the slow read gives it back, as API
/// Priority and Fairness queues.
async fn a_read_over_the_limit_waits_for_a_seat(b: Backend) -> anyhow::Result<()> {
    let api = Api::with(TestHub::start_with(b, |c| c.max_requests_inflight = 1).await?)?;
    api.create(&cms("default"), &cm("x")).await?;
    let slow = format!("{}/x?resourceVersion={}", cms("default"), 1u64 << 50);
    for _ in 0..10 {
        let held = api.get(&slow);
        tokio::pin!(held);
        // Give the slow read a head start so that it, not the probe, takes the seat.
        if tokio::time::timeout(Duration::from_millis(200), &mut held).await.is_ok() {
            continue; // it ended at once: try again
        }
        let x = format!("{}/x", cms("default"));
        let probe = api.get(&x);
        tokio::pin!(probe);
        tokio::select! {
            biased;
            r = &mut probe => {
                let r = r?;
                ensure!(r.code == 200, "the probe was answered before the seat came back: {}", r.raw);
                // The probe may have had the seat when the slow read arrived: try again.
                held.await?;
                continue;
            }
            r = &mut held => {
                r?.failure(504, "Timeout")?;
            }
        }
        let r = probe.await?;
        ensure!(r.code == 200, "the read that waited in line was not served: {}", r.raw);
        return Ok(());
    }
    anyhow::bail!("the slow read never held the seat")
}

/// A store that stops answering makes requests that need it 503 `ServiceUnavailable`; reads
/// the watch cache can serve (`resourceVersion=0`) keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_outage_is_service_unavailable() -> anyhow::Result<()> {
    if etcd_skipped() {
        return Ok(());
    }
    let mut api = Api::start(Backend::Etcd).await?;
    api.create(&cms("default"), &cm("x")).await?;
    api.get(&cms("default")).await?.ok(200)?;
    api.hub.kill_etcd();
    let r = api.post(&cms("default"), &cm("y")).await?;
    r.failure(503, "ServiceUnavailable")?;
    api.get(&format!("{}/x", cms("default"))).await?.failure(503, "ServiceUnavailable")?;
    let cached = api.get(&format!("{}?resourceVersion=0", cms("default"))).await?.ok(200)?;
    ensure!(names_of(&cached)? == strs(&["x"]), "{cached}");
    Ok(())
}

/// An object in the store that does not decode answers 500 `InternalError` and does not hide
/// its neighbours (kube-apiserver answers the same for an undecodable object in etcd).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_stored_object_is_internal_error() -> anyhow::Result<()> {
    if etcd_skipped() {
        return Ok(());
    }
    let api = Api::start(Backend::Etcd).await?;
    api.create(&cms("default"), &cm("victim")).await?;
    api.create(&cms("default"), &cm("neighbour")).await?;
    let (endpoint, prefix) = api.hub.etcd().context("an etcd hub has an etcd")?;
    let raw = ocm_storage::Storage::open(ocm_storage::Engine::Etcd(ocm_storage::EtcdOptions::new(
        vec![endpoint.to_owned()],
        prefix,
    )))
    .await?;
    let page = raw.list("/", &ocm_storage::ListOptions::default()).await?;
    let kv = page
        .items
        .iter()
        .find(|kv| kv.key.contains("configmaps") && kv.key.ends_with("/default/victim"))
        .with_context(|| format!("no stored key for the victim among {} keys", page.items.len()))?;
    raw.update(&kv.key, &b"\x00not json"[..], kv.mod_revision).await?;
    let r = api.get(&format!("{}/victim", cms("default"))).await?;
    r.failure(500, "InternalError")?;
    ensure!(r.message().starts_with("Internal error occurred"), "{}", r.raw);
    api.get(&format!("{}/neighbour", cms("default"))).await?.ok(200)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Table output (kube-api.md §4)
// ---------------------------------------------------------------------------------------------

const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

/// Tables for lists, single objects, writes and watch events: columns, cells, row objects per
/// `includeObject`, and the errors of a Table request.
async fn table_output(b: Backend) -> anyhow::Result<()> {
    let api = Api::start(b).await?;
    api.create(MCL, &mcl("c1")).await?;
    let table = [("accept", TABLE_ACCEPT)];
    let t = api.send(Method::GET, MCL, None, &table).await?.ok(200)?;
    ensure!(t["kind"] == "Table" && t["apiVersion"] == "meta.k8s.io/v1", "{t}");
    ensure!(t["metadata"]["resourceVersion"].is_string(), "{t}");
    let cols: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .context("columns")?
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    ensure!(
        cols == ["Name", "Hub Accepted", "Managed Cluster URLs", "Joined", "Available", "Age"],
        "{cols:?}"
    );
    ensure!(t["columnDefinitions"][0]["format"] == "name", "{t}");
    ensure!(t["columnDefinitions"][5]["type"] == "date", "{t}");
    let row = &t["rows"][0];
    ensure!(
        row["cells"][0] == "c1" && row["cells"][1] == true && row["cells"][3].is_null(),
        "{row}"
    );
    ensure!(row["object"]["kind"] == "PartialObjectMetadata", "{row}");
    ensure!(row["object"]["apiVersion"] == "meta.k8s.io/v1", "{row}");
    ensure!(
        row["object"]["metadata"]["name"] == "c1" && row["object"].get("spec").is_none(),
        "{row}"
    );

    // includeObject=Object carries the whole object; None carries null; anything else is 400.
    let t = api
        .send(Method::GET, &format!("{MCL}?includeObject=Object"), None, &table)
        .await?
        .ok(200)?;
    ensure!(t["rows"][0]["object"]["spec"]["hubAcceptsClient"] == true, "{t}");
    ensure!(t["rows"][0]["object"]["kind"] == "ManagedCluster", "{t}");
    let t =
        api.send(Method::GET, &format!("{MCL}?includeObject=None"), None, &table).await?.ok(200)?;
    ensure!(t["rows"][0]["object"].is_null(), "{t}");
    let r = api.send(Method::GET, &format!("{MCL}?includeObject=Foo"), None, &table).await?;
    r.failure(400, "BadRequest")?;
    ensure!(r.message().contains("must be 'Metadata', 'Object', 'None', or empty"), "{}", r.raw);

    // One object is a one-row Table; v1beta1 when that is the first acceptable entry.
    let beta = [("accept", "application/json;as=Table;v=v1beta1;g=meta.k8s.io")];
    let t = api.send(Method::GET, &format!("{MCL}/c1"), None, &beta).await?.ok(200)?;
    ensure!(
        t["apiVersion"] == "meta.k8s.io/v1beta1" && t["rows"].as_array().map(Vec::len) == Some(1),
        "{t}"
    );
    ensure!(t["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1", "{t}");
    // Core printers: a ConfigMap's Data counts its entries.
    api.create(&cms("default"), &cm("x")).await?;
    let t = api.send(Method::GET, &format!("{}/x", cms("default")), None, &table).await?.ok(200)?;
    ensure!(t["rows"][0]["cells"][1] == 1, "{t}");
    // A write answers a Table too.
    let r = api
        .send(
            Method::POST,
            &cms("default"),
            Some(("application/json", serde_json::to_vec(&cm("y"))?)),
            &table,
        )
        .await?;
    let t = r.ok(201)?;
    ensure!(t["kind"] == "Table" && t["rows"][0]["cells"][0] == "y", "{t}");

    // The status subresource prints the kind's own columns (kube-apiserver's CRD status
    // endpoint shares the main resource's Table convertor).
    let only = [("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")];
    let t = api.send(Method::GET, &format!("{MCL}/c1/status"), None, &only).await?.ok(200)?;
    ensure!(t["kind"] == "Table" && t["columnDefinitions"][1]["name"] == "Hub Accepted", "{t}");
    // An unknown `as`: 406.
    let odd = [("accept", "application/json;as=Widget;v=v1;g=example.com")];
    api.send(Method::GET, MCL, None, &odd).await?.failure(406, "NotAcceptable")?;
    // Metadata only: a list must ask for the List form.
    let meta = [("accept", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")];
    api.send(Method::GET, MCL, None, &meta).await?.failure(406, "NotAcceptable")?;
    let m = api.send(Method::GET, &format!("{MCL}/c1"), None, &meta).await?.ok(200)?;
    ensure!(m["kind"] == "PartialObjectMetadata" && m.get("spec").is_none(), "{m}");
    ensure!(m["metadata"]["name"] == "c1", "{m}");

    // Watch: every event a one-row Table, columns only on the first.
    let mut w = api.watch_with(&format!("{MCL}?watch=true"), &table).await?;
    let first = w.event().await?;
    ensure!(first["type"] == "ADDED" && first["object"]["kind"] == "Table", "{first}");
    ensure!(first["object"]["columnDefinitions"].is_array(), "{first}");
    api.merge(&format!("{MCL}/c1"), &json!({"metadata": {"labels": {"a": "b"}}})).await?.ok(200)?;
    let next = w.event().await?;
    ensure!(next["type"] == "MODIFIED" && next["object"]["columnDefinitions"].is_null(), "{next}");
    ensure!(next["object"]["rows"][0]["object"]["metadata"]["labels"]["a"] == "b", "{next}");
    Ok(())
}

/// `/openapi/v3`: the root names each group-version document by hash; fetched by its hash a
/// document is immutable, by a stale hash it redirects, and the root revalidates by ETag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_v3_documents_and_caching() -> anyhow::Result<()> {
    let api = Api::start(Backend::Memory).await?;
    let root = api.get("/openapi/v3").await?;
    let etag = root.header("etag").context("root ETag")?.to_owned();
    let root = root.ok(200)?;
    let url = root["paths"]["apis/cluster.open-cluster-management.io/v1"]["serverRelativeURL"]
        .as_str()
        .context("no cluster v1 document")?
        .to_owned();
    ensure!(root["paths"]["api/v1"].is_object(), "{root}");
    let r = api.send(Method::GET, "/openapi/v3", None, &[("if-none-match", &etag)]).await?;
    ensure!(r.code == 304, "the root revalidates: {}", r.code);
    let doc = api.get(&url).await?;
    ensure!(doc.header("cache-control") == Some("public, immutable"), "{:?}", doc.headers);
    let doc = doc.ok(200)?;
    ensure!(doc["openapi"] == "3.0.0", "{doc}");
    let patch = &doc["paths"]["/apis/cluster.open-cluster-management.io/v1/managedclusters/{name}"]
        ["patch"];
    let params: Vec<&str> = patch["parameters"]
        .as_array()
        .context("patch parameters")?
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    ensure!(params.contains(&"fieldValidation") && params.contains(&"force"), "{params:?}");
    let stale = api
        .hub
        .http_no_redirects()?
        .get(format!(
            "{}/openapi/v3/apis/cluster.open-cluster-management.io/v1?hash=0000",
            api.hub.url
        ))
        .send()
        .await?;
    let location = stale.headers().get("location").and_then(|v| v.to_str().ok());
    ensure!(stale.status() == 301 && location == Some(url.as_str()), "{:?}", stale.headers());
    api.get("/openapi/v3/apis/example.com/v1").await?.failure(404, "NotFound")?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Strategic merge patch, server-side apply, managedFields, YAML and gzip (kube-api.md §7, §8)
// ---------------------------------------------------------------------------------------------

const STRATEGIC: &str = "application/strategic-merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

impl Api {
    async fn strategic(&self, path: &str, v: &Value) -> anyhow::Result<Resp> {
        self.body(Method::PATCH, path, STRATEGIC, v).await
    }

    async fn apply(
        &self,
        path: &str,
        manager: &str,
        force: bool,
        v: &Value,
    ) -> anyhow::Result<Resp> {
        let path = format!("{path}?fieldManager={manager}&force={force}");
        self.body(Method::PATCH, &path, APPLY, v).await
    }
}

/// Strategic merge patch: core kinds merge their lists by the Go types' merge keys, OCM kinds by
/// the CRD's list-map keys (kube-apiserver refuses strategic patches for custom resources); a
/// patch that cannot apply is 400 and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategic_merge_patch() -> anyhow::Result<()> {
    let api = Api::start(Backend::Memory).await?;
    let path = format!("{}/x", cms("default"));
    let mut obj = cm_labeled("x", json!({"a": "1", "b": "2"}));
    obj["metadata"]["finalizers"] = json!(["example.com/one", "example.com/two"]);
    obj["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o1", "uid": "u1"}]);
    api.create(&cms("default"), &obj).await?;
    let patched = api
        .strategic(
            &path,
            &json!({"metadata": {
                "labels": {"a": null, "c": "3"},
                "finalizers": ["example.com/three"],
                "$deleteFromPrimitiveList/finalizers": ["example.com/one"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o2", "uid": "u2"}],
            }, "data": {"k": "v2"}}),
        )
        .await?
        .ok(200)?;
    ensure!(patched["metadata"]["labels"] == json!({"b": "2", "c": "3"}), "{patched}");
    ensure!(
        patched["metadata"]["finalizers"] == json!(["example.com/two", "example.com/three"]),
        "finalizers merge as a set: {patched}"
    );
    let owners: Vec<&str> = patched["metadata"]["ownerReferences"]
        .as_array()
        .context("owners")?
        .iter()
        .filter_map(|o| o["uid"].as_str())
        .collect();
    ensure!(owners == ["u1", "u2"], "ownerReferences merge by uid: {owners:?}");
    ensure!(patched["data"]["k"] == "v2");

    // OCM: status conditions merge by `type` through /status.
    api.create(MCL, &mcl("c1")).await?;
    let status_path = format!("{MCL}/c1/status");
    let condition = |t: &str, s: &str| {
        json!({"type": t, "status": s, "reason": "R", "message": "m",
               "lastTransitionTime": "2026-01-01T00:00:00Z"})
    };
    api.strategic(&status_path, &json!({"status": {"conditions": [condition("A", "True")]}}))
        .await?
        .ok(200)?;
    let merged = api
        .strategic(
            &status_path,
            &json!({"status": {"conditions": [condition("B", "True"), condition("A", "False")]}}),
        )
        .await?
        .ok(200)?;
    let conditions = &merged["status"]["conditions"];
    ensure!(conditions.as_array().map(Vec::len) == Some(2), "{merged}");
    ensure!(conditions[0]["type"] == "A" && conditions[0]["status"] == "False", "{merged}");
    ensure!(merged["metadata"]["generation"] == 1, "status patches keep generation: {merged}");
    // `$patch: delete` removes one condition.
    let after = api
        .strategic(
            &status_path,
            &json!({"status": {"conditions": [{"type": "A", "$patch": "delete"}]}}),
        )
        .await?
        .ok(200)?;
    ensure!(after["status"]["conditions"].as_array().map(Vec::len) == Some(1), "{after}");
    ensure!(after["status"]["conditions"][0]["type"] == "B", "{after}");

    // Bad patches: 400, nothing stored.
    let before = api.get(&path).await?.ok(200)?;
    let r = api
        .strategic(&path, &json!({"metadata": {"ownerReferences": [{"name": "no-uid"}]}}))
        .await?;
    r.failure(400, "BadRequest")?;
    ensure!(r.message().contains("merge key"), "{}", r.raw);
    api.strategic(&path, &json!({"data": {"$patch": "explode"}}))
        .await?
        .failure(400, "BadRequest")?;
    api.strategic(&path, &json!(["not", "an", "object"])).await?.failure(400, "BadRequest")?;
    let now = api.get(&path).await?.ok(200)?;
    ensure!(now["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]);
    Ok(())
}

/// Server-side apply: creates (201), records an Apply entry, conflicts with another manager's
/// field (409 with one FieldManagerConflict cause per field, nothing changed), shares equal
/// values, takes over with force, and removes what the manager stops applying.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply() -> anyhow::Result<()> {
    let api = Api::start(Backend::Memory).await?;
    let path = format!("{MCL}/s1");
    let config = |lease: u64, labels: Value| {
        json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
               "metadata": {"name": "s1", "labels": labels},
               "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": lease}})
    };
    // Options are checked first.
    let r = api.body(Method::PATCH, &path, APPLY, &config(60, json!({}))).await?;
    r.failure(422, "Invalid")?;
    ensure!(r.message().contains("fieldManager: Required value"), "{}", r.raw);
    let r = api.body(Method::PATCH, &format!("{path}?force=true"), MERGE_PATCH, &json!({})).await?;
    r.failure(422, "Invalid")?;

    let created =
        api.apply(&path, "alice", false, &config(60, json!({"a": "1", "b": "2"}))).await?;
    let created = created.ok(201)?;
    let entry = managed_entry(&created, "alice", "Apply").context("Apply entry")?;
    ensure!(
        entry["fieldsType"] == "FieldsV1" && entry["apiVersion"] == MCL_GROUP.to_owned() + "/v1"
    );
    ensure!(
        entry["fieldsV1"]
            == json!({"f:metadata": {"f:labels": {"f:a": {}, "f:b": {}}},
                      "f:spec": {"f:hubAcceptsClient": {}, "f:leaseDurationSeconds": {}}}),
        "{entry}"
    );
    // Another manager changes a field alice owns.
    let r = api
        .body(
            Method::PATCH,
            &format!("{path}?fieldManager=bob"),
            MERGE_PATCH,
            &json!({"spec": {"leaseDurationSeconds": 30}, "metadata": {"labels": {"a": "9"}}}),
        )
        .await?;
    let patched = r.ok(200)?;
    ensure!(managed_entry(&patched, "bob", "Update").is_some(), "{patched}");
    // alice re-applies her values: two conflicts, nothing changes.
    let r = api.apply(&path, "alice", false, &config(60, json!({"a": "1", "b": "2"}))).await?;
    let status = r.failure(409, "Conflict")?;
    let causes = status["details"]["causes"].as_array().context("causes")?;
    let mut fields: Vec<&str> = causes.iter().filter_map(|c| c["field"].as_str()).collect();
    fields.sort_unstable();
    ensure!(fields == [".metadata.labels.a", ".spec.leaseDurationSeconds"], "{}", r.raw);
    ensure!(causes.iter().all(|c| c["reason"] == "FieldManagerConflict"), "{}", r.raw);
    ensure!(
        causes[0]["message"]
            .as_str()
            .is_some_and(|m| m
                .starts_with("conflict with \"bob\" using cluster.open-cluster-management.io/v1")),
        "{}",
        r.raw
    );
    ensure!(
        r.message().starts_with("Apply failed with 2 conflicts: conflicts with \"bob\""),
        "{}",
        r.raw
    );
    let now = api.get(&path).await?.ok(200)?;
    ensure!(now["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]);
    // Applying bob's values shares ownership: no conflict.
    let shared = api
        .apply(&path, "alice", false, &config(30, json!({"a": "9", "b": "2"})))
        .await?
        .ok(200)?;
    ensure!(managed_entry(&shared, "bob", "Update").is_some(), "{shared}");
    // Force takes the fields over; bob's emptied entry goes.
    let forced =
        api.apply(&path, "alice", true, &config(45, json!({"a": "1", "b": "2"}))).await?.ok(200)?;
    ensure!(
        forced["spec"]["leaseDurationSeconds"] == 45 && forced["metadata"]["labels"]["a"] == "1"
    );
    ensure!(managed_entry(&forced, "bob", "Update").is_none(), "{forced}");
    // Dropping a label from the configuration removes it.
    let dropped =
        api.apply(&path, "alice", false, &config(45, json!({"a": "1"}))).await?.ok(200)?;
    ensure!(own_labels(&dropped) == json!({"a": "1"}), "{dropped}");
    // A YAML body works too, and a dry run changes nothing.
    let yaml = "apiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\nmetadata:\n  name: s1\n  labels: {a: \"1\"}\nspec:\n  hubAcceptsClient: true\n  leaseDurationSeconds: 50\n";
    let r = api
        .send(
            Method::PATCH,
            &format!("{path}?fieldManager=alice&dryRun=All"),
            Some((APPLY, yaml.as_bytes().to_vec())),
            &[],
        )
        .await?;
    ensure!(r.ok(200)?["spec"]["leaseDurationSeconds"] == 50);
    ensure!(api.get(&path).await?.ok(200)?["spec"]["leaseDurationSeconds"] == 45);
    let r = api
        .send(
            Method::PATCH,
            &format!("{path}?fieldManager=alice"),
            Some((APPLY, yaml.as_bytes().to_vec())),
            &[],
        )
        .await?;
    ensure!(r.ok(200)?["spec"]["leaseDurationSeconds"] == 50);
    // An apply without apiVersion/kind, or with managedFields, is a bad request.
    api.apply(&path, "alice", false, &json!({"metadata": {"name": "s1"}}))
        .await?
        .failure(400, "BadRequest")?;
    let mut with_mf = config(50, json!({}));
    with_mf["metadata"]["managedFields"] = json!([{"manager": "x"}]);
    api.apply(&path, "alice", false, &with_mf).await?.failure(400, "BadRequest")?;
    Ok(())
}

/// managedFields on ordinary writes: the creator owns what it set, each writer what it changed
/// (per subresource), removed fields leave every set, a client can replace the entries (kubectl's
/// migration) or reset them with `[{}]`, and invalid entries are 422.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_fields_on_updates() -> anyhow::Result<()> {
    let api = Api::start(Backend::Memory).await?;
    let path = format!("{}/m", cms("default"));
    let r = api
        .send(
            Method::POST,
            &format!("{}?fieldManager=creator", cms("default")),
            Some((
                "application/json",
                serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "m"}, "data": {"a": "1", "b": "2"}}))?,
            )),
            &[],
        )
        .await?;
    let created = r.ok(201)?;
    let entry = managed_entry(&created, "creator", "Update").context("creator entry")?;
    ensure!(entry["fieldsV1"] == json!({"f:data": {"f:a": {}, "f:b": {}}}), "{entry}");
    // Without fieldManager the User-Agent's product name is the manager.
    let r = api
        .send(
            Method::PATCH,
            &path,
            Some((MERGE_PATCH, br#"{"data":{"a":"9","b":null}}"#.to_vec())),
            &[("user-agent", "tool/1.0 (linux)")],
        )
        .await?;
    let patched = r.ok(200)?;
    let tool = managed_entry(&patched, "tool", "Update").context("tool entry")?;
    ensure!(tool["fieldsV1"] == json!({"f:data": {"f:a": {}}}), "{tool}");
    ensure!(
        managed_entry(&patched, "creator", "Update").is_none(),
        "creator lost a and b: {patched}"
    );
    // Status writes are their own entries, with subresource.
    api.create(MCL, &mcl("c2")).await?;
    let st = api
        .body(
            Method::PATCH,
            &format!("{MCL}/c2/status?fieldManager=agent"),
            MERGE_PATCH,
            &json!({"status": {"version": {"kubernetes": "v1.31.0"}}}),
        )
        .await?
        .ok(200)?;
    let agent = managed_entry(&st, "agent", "Update").context("agent entry")?;
    ensure!(agent["subresource"] == "status", "{agent}");
    ensure!(
        agent["fieldsV1"] == json!({"f:status": {"f:version": {"f:kubernetes": {}}}}),
        "{agent}"
    );
    // A client may replace the entries (a JSON patch guarded by resourceVersion) ...
    let rv = patched["metadata"]["resourceVersion"].as_str().context("rv")?;
    let entries = json!([{"manager": "mine", "operation": "Apply", "apiVersion": "v1",
                          "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]);
    let replaced = api
        .json_patch(
            &path,
            &json!([
                {"op": "replace", "path": "/metadata/managedFields", "value": entries},
                {"op": "replace", "path": "/metadata/resourceVersion", "value": rv},
            ]),
        )
        .await?
        .ok(200)?;
    ensure!(managed_entry(&replaced, "mine", "Apply").is_some(), "{replaced}");
    ensure!(managed_entry(&replaced, "tool", "Update").is_none(), "{replaced}");
    // ... a stale one is a conflict ...
    let stale = api
        .json_patch(
            &path,
            &json!([
                {"op": "replace", "path": "/metadata/managedFields", "value": []},
                {"op": "replace", "path": "/metadata/resourceVersion", "value": rv},
            ]),
        )
        .await?;
    stale.failure(409, "Conflict")?;
    // ... invalid entries are 422 and change nothing ...
    let bad =
        json!([{"manager": "x", "operation": "Patch", "fieldsType": "FieldsV1", "fieldsV1": {}}]);
    let r = api.merge(&path, &json!({"metadata": {"managedFields": bad}})).await?;
    let status = r.failure(422, "Invalid")?;
    ensure!(
        status["details"]["causes"][0]["field"] == "metadata.managedFields[0].operation",
        "{}",
        r.raw
    );
    // ... and `[{}]` stops tracking.
    let reset = api.merge(&path, &json!({"metadata": {"managedFields": [{}]}})).await?.ok(200)?;
    ensure!(reset["metadata"].get("managedFields").is_none(), "{reset}");
    Ok(())
}

/// gzip for non-watch responses over 128 KiB when the client accepts it, with `Vary`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_large_responses() -> anyhow::Result<()> {
    use std::io::Read as _;
    let api = Api::start(Backend::Memory).await?;
    let big = "x".repeat(1024);
    for i in 0..200 {
        let mut obj = cm(&format!("c{i}"));
        obj["data"]["k"] = json!(big);
        api.create(&cms("default"), &obj).await?;
    }
    let raw = |path: String, gzip: bool| {
        let mut req = api.http.get(format!("{}{path}", api.hub.url));
        if gzip {
            req = req.header("accept-encoding", "gzip");
        }
        req.send()
    };
    let resp = raw(cms("default"), true).await?;
    ensure!(
        resp.headers().get("content-encoding").is_some_and(|v| v == "gzip"),
        "{:?}",
        resp.headers()
    );
    ensure!(
        resp.headers().get("vary").is_some_and(|v| v == "Accept-Encoding"),
        "{:?}",
        resp.headers()
    );
    let zipped = resp.bytes().await?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(&zipped[..]).read_to_string(&mut text)?;
    let list: Value = serde_json::from_str(&text)?;
    ensure!(list["items"].as_array().map(Vec::len) == Some(200));
    ensure!(zipped.len() * 4 < text.len(), "compressed {} of {}", zipped.len(), text.len());
    // Small responses, clients without gzip, and watches are sent as they are.
    let small = raw(format!("{}/c1", cms("default")), true).await?;
    ensure!(small.headers().get("content-encoding").is_none());
    let plain = raw(cms("default"), false).await?;
    ensure!(plain.headers().get("content-encoding").is_none());
    let watch =
        raw(format!("{}?watch=true&resourceVersion=0&timeoutSeconds=1", cms("default")), true)
            .await?;
    ensure!(watch.headers().get("content-encoding").is_none(), "{:?}", watch.headers());
    let body = watch.bytes().await?;
    ensure!(body.split(|b| *b == b'\n').filter(|l| !l.is_empty()).count() == 200);
    Ok(())
}

/// Deeply nested bodies are refused with a 400 (JSON, YAML and merge patches alike), never a
/// stack overflow, and the hub keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_bodies_are_bad_requests() -> anyhow::Result<()> {
    let api = Api::start(Backend::Memory).await?;
    let depth = 100_000;
    let json = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"deep\"}},\"x\":{}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let r = api
        .send(Method::POST, &cms("default"), Some(("application/json", json.into_bytes())), &[])
        .await?;
    r.failure(400, "BadRequest")?;
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\nx: {}{}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let r = api
        .send(Method::POST, &cms("default"), Some(("application/yaml", yaml.into_bytes())), &[])
        .await?;
    r.failure(400, "BadRequest")?;
    api.create(&cms("default"), &cm("shallow")).await?;
    let patch = format!("{{\"data\":{}1{}}}", "{\"a\":".repeat(depth), "}".repeat(depth));
    let r = api
        .send(
            Method::PATCH,
            &format!("{}/shallow", cms("default")),
            Some((MERGE_PATCH, patch.into_bytes())),
            &[],
        )
        .await?;
    r.failure(400, "BadRequest")?;
    ensure!(api.get(&format!("{}/shallow", cms("default"))).await?.ok(200)?["data"]["k"] == "v");
    Ok(())
}

/// A ManagedCluster's labels without the cluster-set label OCM's webhook defaults.
fn own_labels(obj: &Value) -> Value {
    let mut labels = obj["metadata"]["labels"].clone();
    if let Some(map) = labels.as_object_mut() {
        map.remove("cluster.open-cluster-management.io/clusterset");
    }
    labels
}

/// OCM's manifest checks (sdk-go's ManifestValidator), as 422s naming the manifest at fault,
/// with nothing stored: no manifests, a manifest without a name or with a generateName, one
/// object twice, and more than 500 KiB in all.
#[tokio::test]
async fn manifestwork_manifests_are_checked_as_ocm_does() -> anyhow::Result<()> {
    let hub = TestHub::start(Backend::Memory).await?;
    let http = hub.http()?;
    let (code, _) = hub
        .call(
            &http,
            Method::POST,
            "/api/v1/namespaces",
            Some(&json!({"metadata": {"name": "c1"}})),
            &[],
        )
        .await?;
    ensure!(code == 201);
    let works = "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks";
    let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}});
    let with = |manifests: Value| {
        let mut w = work("bad");
        w["spec"]["workload"]["manifests"] = manifests;
        w
    };
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "default"},
                     "data": {"x": "y".repeat(520 * 1024)}});
    let mut generated = cm("");
    generated["metadata"] = json!({"generateName": "cm-", "namespace": "default"});
    let cases = [
        (
            json!([]),
            "spec.workload.manifests",
            "FieldValueRequired",
            "Workload manifests should not be empty",
        ),
        (
            json!([cm("a"), cm("")]),
            "spec.workload.manifests[1].metadata.name",
            "FieldValueRequired",
            "name must be set in manifest",
        ),
        (
            json!([generated]),
            "spec.workload.manifests[0].metadata.generateName",
            "FieldValueForbidden",
            "generateName must not be set in manifest",
        ),
        (
            json!([cm("a"), cm("b"), cm("a")]),
            "spec.workload.manifests[2]",
            "FieldValueDuplicate",
            "duplicate manifest for resource default/a with resource type v1.ConfigMap",
        ),
        (json!([big]), "spec.workload.manifests", "FieldValueTooLong", "exceeds the 512000 limit"),
    ];
    for (manifests, field, reason, message) in cases {
        let (code, body) =
            hub.call(&http, Method::POST, works, Some(&with(manifests)), &[]).await?;
        ensure!(code == 422 && body["reason"] == "Invalid", "{field}: {code} {body}");
        let causes = body["details"]["causes"].as_array().context("causes")?;
        ensure!(
            causes.iter().any(|c| c["field"] == field
                && c["reason"] == reason
                && c["message"].as_str().is_some_and(|m| m.contains(message))),
            "{field}: {body}"
        );
    }
    let (code, list) = hub.call(&http, Method::GET, works, None, &[]).await?;
    ensure!(code == 200 && list["items"].as_array().is_some_and(Vec::is_empty), "{list}");
    // The same object in two namespaces, or two kinds of one name, are different manifests.
    let mut other_ns = cm("a");
    other_ns["metadata"]["namespace"] = json!("kube-system");
    let mut secret = cm("a");
    secret["kind"] = json!("Secret");
    let (code, body) = hub
        .call(&http, Method::POST, works, Some(&with(json!([cm("a"), other_ns, secret]))), &[])
        .await?;
    ensure!(code == 201, "{code} {body}");
    hub.stop().await;
    Ok(())
}
