//! Schema fidelity (design.md §5 "Schemas"): (a) realistic objects of every served OCM kind,
//! created over REST and read back (GET and LIST, at every served version), validate against
//! the real OCM CRD schemas; (b) for every served OCM kind and version, every property path,
//! type, format, enum value, required property and structural extension of the CRD schema is in
//! the OpenAPI schema the hub publishes, except the differences
//! `conformance/schema-differences.yaml` explains.

use std::collections::BTreeMap;

use anyhow::{Context as _, ensure};
use ocm_conformance::fidelity::{self, Difference, Explained};
use ocm_conformance::hub::{Backend, TestHub};
use ocm_proto::crd::{Crd, ocm_crds};
use serde_json::{Value, json};

/// The golden objects of `ocm-proto` (one realistic object per kind and version).
const GOLDEN: &[&str] = &[
    include_str!("../../proto/tests/golden/addondeploymentconfig.v1alpha1.json"),
    include_str!("../../proto/tests/golden/addondeploymentconfig.v1beta1.json"),
    include_str!("../../proto/tests/golden/addonplacementscore.v1alpha1.json"),
    include_str!("../../proto/tests/golden/addontemplate.v1alpha1.json"),
    include_str!("../../proto/tests/golden/clustermanagementaddon.v1alpha1.json"),
    include_str!("../../proto/tests/golden/clustermanagementaddon.v1beta1.json"),
    include_str!("../../proto/tests/golden/managedcluster.v1.json"),
    include_str!("../../proto/tests/golden/managedclusteraddon.v1alpha1.json"),
    include_str!("../../proto/tests/golden/managedclusteraddon.v1beta1.json"),
    include_str!("../../proto/tests/golden/managedclusterset.v1beta2.json"),
    include_str!("../../proto/tests/golden/managedclustersetbinding.v1beta2.json"),
    include_str!("../../proto/tests/golden/managedserviceaccount.v1beta1.json"),
    include_str!("../../proto/tests/golden/manifestwork.v1.json"),
    include_str!("../../proto/tests/golden/manifestworkreplicaset.v1alpha1.json"),
    include_str!("../../proto/tests/golden/placement.v1beta1.json"),
    include_str!("../../proto/tests/golden/placementdecision.v1beta1.json"),
    include_str!("../../proto/tests/golden/placementbinding.v1.json"),
    include_str!("../../proto/tests/golden/policy.v1.json"),
    include_str!("../../proto/tests/golden/policyset.v1beta1.json"),
    include_str!("../../proto/tests/golden/configurationpolicy.v1.json"),
    include_str!("../../proto/tests/golden/clusterprofile.v1alpha1.json"),
];

struct Client {
    hub: TestHub,
    http: reqwest::Client,
}

impl Client {
    async fn start() -> anyhow::Result<Client> {
        let hub = TestHub::start(Backend::Memory).await?;
        let http = hub.http()?;
        Ok(Client { hub, http })
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let (code, body) = self.hub.call(&self.http, method.clone(), path, body, &[]).await?;
        ensure!((200..300).contains(&code), "{method} {path}: HTTP {code}: {body}");
        Ok(body)
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(reqwest::Method::GET, path, None).await
    }
}

/// Whether `have` holds everything `want` says (objects key by key, other values equal).
fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => {
            w.iter().all(|(k, v)| h.get(k).is_some_and(|hv| contains(hv, v)))
        }
        (h, w) => h == w,
    }
}

/// The versions of each OCM kind the hub serves, as its discovery says.
async fn served(client: &Client) -> anyhow::Result<Vec<(&'static Crd, String)>> {
    let mut out = Vec::new();
    for crd in ocm_crds() {
        for v in &crd.versions {
            // A version the hub does not serve is a 404; any other failure fails the test.
            let path = format!("/apis/{}/{}", crd.group, v.name);
            let (code, list) =
                client.hub.call(&client.http, reqwest::Method::GET, &path, None, &[]).await?;
            if code == 404 {
                continue;
            }
            ensure!(code == 200, "GET {path}: {code} {list}");
            let resources = list["resources"].as_array().context("APIResourceList")?;
            if resources
                .iter()
                .any(|r| r["kind"] == crd.kind.as_str() && r["name"] == crd.plural.as_str())
            {
                out.push((crd, v.name.clone()));
            }
        }
    }
    Ok(out)
}

fn collection(crd: &Crd, version: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("/apis/{}/{version}/namespaces/{ns}/{}", crd.group, crd.plural),
        None => format!("/apis/{}/{version}/{}", crd.group, crd.plural),
    }
}

/// (b) The published schemas carry everything the CRD schemas say, but for explained
/// differences; the file lists no difference that no longer exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_schemas_cover_the_crd_schemas() -> anyhow::Result<()> {
    let client = Client::start().await?;
    let served = served(&client).await?;
    ensure!(served.len() >= 16, "too few served OCM kinds and versions: {}", served.len());
    let root = client.get("/openapi/v3").await?;
    let mut found: Vec<Difference> = Vec::new();
    let mut documents: BTreeMap<String, Value> = BTreeMap::new();
    for (crd, version) in &served {
        let key = format!("apis/{}/{version}", crd.group);
        if !documents.contains_key(&key) {
            let url = root["paths"][&key]["serverRelativeURL"]
                .as_str()
                .with_context(|| format!("/openapi/v3 lists no {key}"))?;
            documents.insert(key.clone(), client.get(url).await?);
        }
        let doc = &documents[&key];
        let schemas = doc["components"]["schemas"].as_object().context("components.schemas")?;
        let gvk = json!({"group": crd.group, "version": version, "kind": crd.kind});
        let ours = schemas
            .values()
            .find(|s| {
                s["x-kubernetes-group-version-kind"].as_array().is_some_and(|g| g.contains(&gvk))
            })
            .with_context(|| format!("{key}: no schema for {}", crd.kind))?;
        let theirs = &crd.version(version).context("CRD version")?.openapi_schema;
        found.extend(fidelity::compare(&crd.kind, version, theirs, doc, ours));
        if let Ok(dir) = std::env::var("FIDELITY_DUMP") {
            std::fs::write(
                format!("{dir}/{}.{version}.json", crd.kind),
                serde_json::to_vec_pretty(doc)?,
            )?;
        }
    }
    Explained::load()?.check(&found)?;
    client.hub.stop().await;
    Ok(())
}

/// Strips what the server owns from a golden object and renames it per version (the versions
/// of a kind share one store).
fn creatable(golden: &Value) -> Value {
    let mut obj = golden.clone();
    let version =
        obj["apiVersion"].as_str().unwrap_or("").rsplit('/').next().unwrap_or("").to_owned();
    let meta = obj["metadata"].as_object_mut().expect("golden metadata");
    for owned in [
        "resourceVersion",
        "uid",
        "generation",
        "creationTimestamp",
        "ownerReferences",
        "finalizers",
    ] {
        meta.remove(owned);
    }
    let kind = obj["kind"].as_str().unwrap_or("");
    // A binding's name must be its set's; other kinds take the version into their name.
    if kind != "ManagedClusterSetBinding" {
        let name = format!("{}-{version}", obj["metadata"]["name"].as_str().unwrap_or("x"));
        obj["metadata"]["name"] = Value::String(name.replace('.', "-"));
    }
    obj
}

/// (a) Realistic objects of every served OCM kind (the golden examples, status included),
/// created over REST and read back with GET and LIST at every served version of their kind,
/// validate against the CRD schema of that version and carry no field it does not declare.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_read_back_validate_against_the_crd_schemas() -> anyhow::Result<()> {
    let client = Client::start().await?;
    let served = served(&client).await?;
    let mut kinds_created = Vec::new();
    let mut namespaces = std::collections::HashSet::new();
    for text in GOLDEN {
        let golden: Value = serde_json::from_str(text)?;
        // The golden object itself is checked too: a bad example would prove nothing.
        fidelity::assert_matches_crd(&golden).context("golden example")?;
        let obj = creatable(&golden);
        let (group, version) =
            obj["apiVersion"].as_str().and_then(|a| a.split_once('/')).context("apiVersion")?;
        let kind = obj["kind"].as_str().context("kind")?;
        let crd = ocm_proto::crd::find_kind(group, kind).context("crd")?;
        let namespace = obj["metadata"]["namespace"].as_str().map(str::to_owned);
        if let Some(ns) = namespace.as_ref().filter(|ns| namespaces.insert((*ns).clone())) {
            client
                .call(
                    reqwest::Method::POST,
                    "/api/v1/namespaces",
                    Some(
                        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                    ),
                )
                .await?;
        }
        let path = collection(crd, version, namespace.as_deref());
        let created = client.call(reqwest::Method::POST, &path, Some(&obj)).await?;
        fidelity::assert_matches_crd(&created).context("create answer")?;
        let name = created["metadata"]["name"].as_str().context("name")?.to_owned();
        if let Some(status) = golden.get("status") {
            let mut with_status = created.clone();
            with_status["status"] = status.clone();
            let updated = client
                .call(reqwest::Method::PUT, &format!("{path}/{name}/status"), Some(&with_status))
                .await?;
            fidelity::assert_matches_crd(&updated).context("status answer")?;
            ensure!(
                contains(&updated["status"], status),
                "{kind} {name}: status not kept as sent:\n{status}\n{}",
                updated["status"]
            );
        }
        kinds_created.push(kind.to_owned());
        for (c, v) in served.iter().filter(|(c, _)| c.kind == kind) {
            let one =
                client.get(&format!("{}/{name}", collection(c, v, namespace.as_deref()))).await?;
            ensure!(one["apiVersion"] == format!("{group}/{v}"), "{one}");
            fidelity::assert_matches_crd(&one).with_context(|| format!("GET {kind} {v}"))?;
            let list = client.get(&collection(c, v, namespace.as_deref())).await?;
            ensure!(!list["items"].as_array().is_none_or(Vec::is_empty), "{list}");
            fidelity::assert_items_match_crd(&list).with_context(|| format!("LIST {kind} {v}"))?;
        }
    }
    for (crd, _) in &served {
        ensure!(kinds_created.contains(&crd.kind), "no example of served kind {}", crd.kind);
    }
    client.hub.stop().await;
    Ok(())
}

/// The object check fails for an object the CRD refuses (so the test above can fail).
#[test]
fn the_object_check_finds_violations() -> anyhow::Result<()> {
    let bad = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": "c1"},
        "spec": {"hubAcceptsClient": "yes", "colour": "blue", "taints": [{"key": "k", "effect": "Sometimes"}]},
    });
    let problems = fidelity::check_against_crd(&bad)?;
    let text = problems.join("\n");
    for expected in ["spec.hubAcceptsClient", "spec.colour", "spec.taints[0].effect"] {
        ensure!(text.contains(expected), "{expected} not reported: {text}");
    }
    Ok(())
}

/// The comparison finds each kind of difference (so the test above can fail).
#[test]
fn the_comparison_finds_differences() -> anyhow::Result<()> {
    let crd = json!({"type": "object", "properties": {
        "spec": {"type": "object", "required": ["a"], "properties": {
            "a": {"type": "string", "enum": ["X", "Y"]},
            "b": {"x-kubernetes-int-or-string": true},
            "c": {"type": "string", "format": "date-time"},
            "d": {"type": "array", "items": {"type": "integer", "format": "int32"}, "x-kubernetes-list-type": "set"},
            "e": {"type": "boolean"},
        }},
    }});
    let doc = json!({"components": {"schemas": {"T": {"type": "string"}}}});
    let ours = json!({"type": "object", "properties": {
        "spec": {"allOf": [{"type": "object", "properties": {
            "a": {"type": "string", "enum": ["X"]},
            "b": {"type": "string"},
            "c": {"$ref": "#/components/schemas/T"},
            "d": {"type": "array", "items": {"type": "integer", "format": "int64"}},
        }}]},
    }});
    let found: Vec<String> =
        fidelity::compare("K", "v1", &crd, &doc, &ours).iter().map(ToString::to_string).collect();
    let text = found.join("\n");
    for expected in [
        "spec.a: enum",
        "spec.b: int-or-string",
        "spec.c: format",
        "spec.d: list-type",
        "spec.d[]: format",
        "spec.e: missing-property",
        "spec.a: required (required by the CRD, optional in ours)",
    ] {
        ensure!(text.contains(expected), "{expected} not found: {text}");
    }
    ensure!(found.len() == 7, "{text}");
    Ok(())
}
