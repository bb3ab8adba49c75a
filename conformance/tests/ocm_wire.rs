//! OCM's CloudEvents payloads, per data type, against the hub's gRPC server and our agent's
//! encoder. The events here are built from OCM's definitions as its Go structs give them (sdk-go
//! `payload.ManifestBundle`/`ManifestBundleStatus`, `metav1.Condition`, `workv1.ManifestCondition`,
//! the Kubernetes objects of the other data types; attributes as ocm-wave2.md §6.3 lists them),
//! written down here as JSON rather than taken from our own types; and what the hub and our agent
//! send is read back with decoders written the same way (`Ocm*` below), which fail where OCM's Go
//! decoder would: a list where OCM has an object, a number where it has a string.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use ocm_agent::grpc::{self, Client};
use ocm_conformance::cloudevents::{accepted, agent, next};
use ocm_conformance::csr::client_csr;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::kubectl::{create, merge_patch};
use ocm_proto::cloudevents::v1::CloudEvent;
use ocm_proto::cloudevents::{Attr, EventType, data_type, ext};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{Value, json};

async fn hub() -> anyhow::Result<TestHub> {
    TestHub::start_with(Backend::Memory, |c| c.registration.enabled = true).await
}

/// An event as OCM's clients build every event: a UUIDv4 id, `specversion` 1.0, `time`, and the
/// `clustername` and `originalsource` extensions.
fn ocm_event(t: &str, source: &str, cluster: &str) -> anyhow::Result<CloudEvent> {
    let mut e = CloudEvent::new(uuid::Uuid::new_v4().to_string(), source, &EventType::parse(t)?);
    let now = prost_types::Timestamp { seconds: 1_795_000_000, nanos: 0 };
    e.set(ext::TIME, Attr::CeTimestamp(now))
        .set(ext::CLUSTER_NAME, Attr::CeString(cluster.into()))
        .set(ext::ORIGINAL_SOURCE, Attr::CeString(String::new()));
    Ok(e)
}

/// The attributes every event carries, as OCM's decoders read them.
fn check_common(e: &CloudEvent, source: &str, cluster: &str) -> anyhow::Result<()> {
    uuid::Uuid::parse_str(&e.id).with_context(|| format!("id {:?} is not a UUID", e.id))?;
    ensure!(e.spec_version == "1.0" && e.source == source, "{e:?}");
    ensure!(matches!(e.get(ext::TIME), Some(Attr::CeTimestamp(_))), "no time: {e:?}");
    ensure!(e.string(ext::CLUSTER_NAME) == Some(cluster), "clustername: {e:?}");
    ensure!(e.string(ext::ORIGINAL_SOURCE).is_some(), "no originalsource: {e:?}");
    Ok(())
}

/// sdk-go's `payload.ManifestBundle`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
struct OcmManifestBundle {
    manifests: Vec<Value>,
    delete_option: Option<Value>,
    manifest_configs: Option<Vec<Value>>,
    executer: Option<Value>,
}

/// sdk-go's `payload.ManifestBundleStatus`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
struct OcmManifestBundleStatus {
    manifest_bundle: Option<OcmManifestBundle>,
    conditions: Option<Vec<OcmCondition>>,
    resource_status: Option<Vec<OcmManifestCondition>>,
}

/// `workv1.ManifestCondition`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
struct OcmManifestCondition {
    resource_meta: OcmResourceMeta,
    status_feedback: Option<OcmFeedback>,
    conditions: Option<Vec<OcmCondition>>,
}

/// `workv1.ManifestResourceMeta`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct OcmResourceMeta {
    ordinal: i32,
    group: Option<String>,
    version: Option<String>,
    kind: Option<String>,
    resource: Option<String>,
    name: Option<String>,
    namespace: Option<String>,
}

/// `workv1.StatusFeedbackResult`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct OcmFeedback {
    values: Option<Vec<Value>>,
}

/// `metav1.Condition`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
struct OcmCondition {
    r#type: String,
    status: String,
    observed_generation: Option<i64>,
    last_transition_time: String,
    reason: String,
    message: String,
}

/// A work status with per-manifest conditions and feedback, as OCM's work agent publishes it;
/// and the same status as Go's unstructured converter writes it for the status hash, with that
/// hash (sha256 of these bytes).
const OCM_STATUS: &str = r#"{"conditions":[{"type":"Applied","status":"True","observedGeneration":1,"lastTransitionTime":"2026-11-27T10:00:00Z","reason":"AppliedManifestWorkComplete","message":"Apply manifest work complete"}],"resourceStatus":[{"resourceMeta":{"ordinal":0,"group":"","version":"v1","kind":"ConfigMap","resource":"configmaps","name":"cm","namespace":"default"},"statusFeedback":{"values":[{"name":"keys","fieldValue":{"type":"Integer","integer":2}}]},"conditions":[{"type":"Applied","status":"True","lastTransitionTime":"2026-11-27T10:00:00Z","reason":"AppliedManifestComplete","message":"Apply manifest complete"},{"type":"StatusFeedbackSynced","status":"True","lastTransitionTime":"2026-11-27T10:00:00Z","reason":"StatusFeedbackSynced","message":""}]}]}"#;
const OCM_STATUS_HASHED: &str = r#"{"conditions":[{"lastTransitionTime":"2026-11-27T10:00:00Z","message":"Apply manifest work complete","observedGeneration":1,"reason":"AppliedManifestWorkComplete","status":"True","type":"Applied"}],"resourceStatus":{"manifests":[{"conditions":[{"lastTransitionTime":"2026-11-27T10:00:00Z","message":"Apply manifest complete","reason":"AppliedManifestComplete","status":"True","type":"Applied"},{"lastTransitionTime":"2026-11-27T10:00:00Z","message":"","reason":"StatusFeedbackSynced","status":"True","type":"StatusFeedbackSynced"}],"resourceMeta":{"group":"","kind":"ConfigMap","name":"cm","namespace":"default","ordinal":0,"resource":"configmaps","version":"v1"},"statusFeedback":{"values":[{"fieldValue":{"integer":2,"type":"Integer"},"name":"keys"}]}}]}}"#;

fn sha256(bytes: &str) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Manifest bundles both ways: the hub's spec event decodes as OCM's agent reads it; an OCM work
/// agent's status with per-manifest conditions and feedback lands on the work (Applied, the
/// cleanup finalizer, the feedback); the hub's status resync request then holds the hash OCM's
/// agent computes for that status; and our agent's status event decodes as OCM's source reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manifest_bundles_in_ocms_shapes() -> anyhow::Result<()> {
    let hub = hub().await?;
    accepted(&hub, &["c1"]).await?;
    let client = agent(&hub, "c1").await?;
    let bundles = data_type::MANIFEST_BUNDLES;
    let mut stream = grpc::subscribe(&client, "c1", bundles).await?;
    next(&mut stream).await?; // the status resync request of an empty cluster
    let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "w", "namespace": "c1"},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}, "data": {"a": "1", "b": "2"}}]},
            "manifestConfigs": [{"resourceIdentifier": {"resource": "configmaps", "name": "cm", "namespace": "default"},
                "feedbackRules": [{"type": "JSONPaths", "jsonPaths": [{"name": "keys", "path": ".data"}]}]}]}});
    let path = "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks";
    let created = create(&hub, &hub.http()?, path, work).await?;
    let uid = created["metadata"]["uid"].as_str().context("uid")?.to_owned();

    // The spec event, read as OCM's agent codec reads it.
    let spec = next(&mut stream).await?;
    ensure!(spec.r#type == format!("{bundles}.spec.create_request"), "{spec:?}");
    check_common(&spec, "kube", "c1")?;
    ensure!(spec.string(ext::ORIGINAL_SOURCE) == Some(""), "{spec:?}");
    ensure!(spec.string(ext::RESOURCE_ID) == Some(uid.as_str()));
    ensure!(spec.integer(ext::RESOURCE_VERSION) == Some(1), "an integer generation: {spec:?}");
    let meta: Value = serde_json::from_str(spec.string(ext::METADATA).context("metadata")?)?;
    ensure!(meta["name"] == "w" && meta["uid"] == uid.as_str(), "{meta}");
    let bundle: OcmManifestBundle = serde_json::from_slice(spec.bytes().context("data")?)?;
    ensure!(bundle.manifests.len() == 1 && bundle.manifest_configs.is_some_and(|c| c.len() == 1));

    // An OCM work agent's status, as it publishes it.
    let mut report = ocm_event(&format!("{bundles}.status.update_request"), "c1-work-agent", "c1")?;
    report
        .set(ext::ORIGINAL_SOURCE, Attr::CeString("kube".into()))
        .set(ext::RESOURCE_ID, Attr::CeString(uid.clone()))
        .set(ext::RESOURCE_VERSION, Attr::CeInteger(1))
        .set(ext::SEQUENCE_ID, Attr::CeString("1795000000000000001".into()))
        .set(ext::STATUS_HASH, Attr::CeString(sha256(OCM_STATUS_HASHED)))
        .set(ext::METADATA, Attr::CeString(meta.to_string()))
        .set_json(OCM_STATUS);
    grpc::publish(&client, report).await?;
    let (_, w) = hub.call(&hub.http()?, Method::GET, &format!("{path}/w"), None, &[]).await?;
    ensure!(w["status"]["conditions"][0]["type"] == "Applied", "{w}");
    let manifest = &w["status"]["resourceStatus"]["manifests"][0];
    ensure!(manifest["statusFeedback"]["values"][0]["fieldValue"]["integer"] == 2, "{w}");
    ensure!(manifest["conditions"].as_array().is_some_and(|c| c.len() == 2), "{w}");
    let finalizers = w["metadata"]["finalizers"].to_string();
    ensure!(finalizers.contains("cluster.open-cluster-management.io/manifest-work-cleanup"), "{w}");

    // A new subscription is asked for the status by the hash OCM's agent computes for it.
    let mut again = grpc::subscribe(&client, "c1", bundles).await?;
    let ask = next(&mut again).await?;
    check_common(&ask, "kube", "c1")?;
    let hashes: Value = serde_json::from_slice(ask.bytes().context("data")?)?;
    let want =
        json!({"statusHashes": [{"resourceID": uid, "statusHash": sha256(OCM_STATUS_HASHED)}]});
    ensure!(hashes == want, "{hashes} is not {want}");

    // Our agent's status event of the same work, read as OCM's source codec reads it.
    let held: ocm_proto::api::work::v1::ManifestWork = serde_json::from_value(w.clone())?;
    let status = held.status.clone().context("status")?;
    let hash = ocm_proto::payload::status_hash(&status);
    ensure!(hash == sha256(OCM_STATUS_HASHED), "our agent's hash differs from OCM's");
    let ours = ocm_agent::transport::status_event("c1-work-agent", "c1", &held, &status, &hash, 7)?;
    check_common(&ours, "c1-work-agent", "c1")?;
    ensure!(
        ours.integer(ext::RESOURCE_VERSION) == Some(1)
            && ours.string(ext::SEQUENCE_ID) == Some("7")
    );
    let decoded: OcmManifestBundleStatus = serde_json::from_slice(ours.bytes().context("data")?)
        .context("our agent's status is not OCM's ManifestBundleStatus")?;
    let list = decoded.resource_status.context("no resourceStatus")?;
    ensure!(list.len() == 1 && list[0].resource_meta.kind.as_deref() == Some("ConfigMap"));
    ensure!(list[0].conditions.as_ref().is_some_and(|c| c.len() == 2));
    Ok(())
}

/// The Kubernetes kinds OCM's gRPC registration driver moves (ocm-wave2.md §6.4): each object as
/// its full JSON with `apiVersion` and `kind`, `resourceversion` a string. An OCM agent's cluster
/// status, Lease renewal, CSR, add-on status and Event land; the hub's own events of those kinds
/// decode as OCM's agent reads them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_kinds_in_ocms_shapes() -> anyhow::Result<()> {
    let hub = hub().await?;
    accepted(&hub, &["c1"]).await?;
    let client = agent(&hub, "c1").await?;
    let http = hub.http()?;
    let get = |path: String| {
        let (hub, http) = (&hub, &http);
        async move {
            let (code, body) = hub.call(http, Method::GET, &path, None, &[]).await?;
            ensure!(code == 200, "GET {path}: {code} {body}");
            anyhow::Ok(body)
        }
    };
    let publish = |t: String, data: Value| {
        let client: &Client = &client;
        async move {
            let mut e = ocm_event(&t, "c1", "c1")?;
            if let Some(rv) = data.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
                e.set(ext::RESOURCE_VERSION, Attr::CeString(rv.to_owned()));
            }
            if let Some(uid) = data.pointer("/metadata/uid").and_then(Value::as_str) {
                e.set(ext::RESOURCE_ID, Attr::CeString(uid.to_owned()));
            }
            e.set_json(data.to_string());
            grpc::publish(client, e).await?;
            anyhow::Ok(())
        }
    };

    // ManagedCluster: the hub's event, then the agent's status report.
    let clusters = "/apis/cluster.open-cluster-management.io/v1/managedclusters/c1".to_owned();
    let mut stream = grpc::subscribe(&client, "c1", data_type::MANAGED_CLUSTERS).await?;
    // A merge patch: the hub's cluster controller writes the cluster too.
    merge_patch(&hub, &http, &clusters, json!({"metadata": {"labels": {"env": "prod"}}})).await?;
    let sent = loop {
        let e = next(&mut stream).await?;
        ensure!(e.r#type.starts_with(&format!("{}.spec.", data_type::MANAGED_CLUSTERS)), "{e:?}");
        check_common(&e, "kube", "c1")?;
        ensure!(matches!(e.get(ext::RESOURCE_VERSION), Some(Attr::CeString(_))), "{e:?}");
        let sent: Value = serde_json::from_slice(e.bytes().context("data")?)?;
        if sent["metadata"]["labels"]["env"] == "prod" {
            break sent;
        }
    };
    ensure!(sent["apiVersion"] == "cluster.open-cluster-management.io/v1", "{sent}");
    ensure!(sent["kind"] == "ManagedCluster", "{sent}");
    // The agent's status report, as OCM's agent sends it: the object it holds, resourceVersion
    // and all (sent again on a conflict with the hub's own writes, as its informer would).
    eventually("the cluster's status reported", Duration::from_secs(30), || async {
        let mut mc = get(clusters.clone()).await?;
        mc["status"]["version"] = json!({"kubernetes": "v1.32.0"});
        mc["status"]["clusterClaims"] = json!([{"name": "id.k8s.io", "value": "c1-id"}]);
        let t = format!("{}.status.update_request", data_type::MANAGED_CLUSTERS);
        Ok(publish(t, mc).await.ok())
    })
    .await?;
    let mc = get(clusters).await?;
    ensure!(mc["status"]["version"]["kubernetes"] == "v1.32.0", "{mc}");

    // Lease: the agent's renewal.
    let lease = "/apis/coordination.k8s.io/v1/namespaces/c1/leases/managed-cluster-lease";
    let mut l = get(lease.to_owned()).await?;
    l["spec"]["renewTime"] = json!("2030-01-01T00:00:00.000000Z");
    publish(format!("{}.spec.update_request", data_type::LEASES), l).await?;
    ensure!(get(lease.to_owned()).await?["spec"]["renewTime"] == "2030-01-01T00:00:00.000000Z");

    // CSR: created by the agent, recorded as its request.
    let csr = client_csr(
        Some("c1-renewal"),
        "c1",
        "system:open-cluster-management:c1:agent2",
        &["system:open-cluster-management:c1"],
    )?;
    publish(format!("{}.spec.create_request", data_type::CSRS), csr).await?;
    let stored =
        get("/apis/certificates.k8s.io/v1/certificatesigningrequests/c1-renewal".into()).await?;
    ensure!(stored["spec"]["username"] == "system:open-cluster-management:c1:agent1", "{stored}");

    // ManagedClusterAddOn (v1beta1): the agent's status.
    let addons =
        "/apis/addon.open-cluster-management.io/v1beta1/namespaces/c1/managedclusteraddons";
    let mca = json!({"apiVersion": "addon.open-cluster-management.io/v1beta1", "kind": "ManagedClusterAddOn",
        "metadata": {"name": "hello", "namespace": "c1"}, "spec": {}});
    create(&hub, &http, addons, mca).await?;
    // Sent again on a conflict with the hub's add-on manager, which writes the status too.
    eventually("the add-on's status reported", Duration::from_secs(30), || async {
        let mut mca = get(format!("{addons}/hello")).await?;
        mca["status"]["conditions"] = json!([{"type": "Available", "status": "True",
            "reason": "ProbeSucceeded", "message": "the agent is available",
            "lastTransitionTime": "2026-11-27T10:00:00Z"}]);
        let t = format!("{}.status.update_request", data_type::ADDONS_V1BETA1);
        Ok(publish(t, mca).await.ok())
    })
    .await?;
    let mca = get(format!("{addons}/hello")).await?;
    ensure!(mca["status"]["conditions"][0]["reason"] == "ProbeSucceeded", "{mca}");

    // Event (events.k8s.io/v1): created by the agent in its cluster's namespace.
    let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "c1.hello", "namespace": "c1"},
        "eventTime": "2026-11-27T10:00:00.000000Z", "reportingController": "klusterlet",
        "reportingInstance": "c1-agent", "action": "Applied", "reason": "ManifestWorkApplied",
        "regarding": {"kind": "ManifestWork", "namespace": "c1", "name": "w"},
        "note": "applied", "type": "Normal"});
    publish(format!("{}.spec.create_request", data_type::EVENTS), event).await?;
    let stored = get("/apis/events.k8s.io/v1/namespaces/c1/events/c1.hello".into()).await?;
    ensure!(stored["reason"] == "ManifestWorkApplied", "{stored}");
    Ok(())
}

/// Every attribute the hub sets is one OCM's agent knows, with the type it expects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hubs_attributes_have_ocms_types() -> anyhow::Result<()> {
    let hub = hub().await?;
    accepted(&hub, &["c1"]).await?;
    let client = agent(&hub, "c1").await?;
    let mut stream = grpc::subscribe(&client, "c1", data_type::LEASES).await?;
    let path = "/apis/coordination.k8s.io/v1/namespaces/c1/leases";
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "extra", "namespace": "c1"}, "spec": {"leaseDurationSeconds": 60}});
    create(&hub, &hub.http()?, path, lease).await?;
    let e = next(&mut stream).await?;
    let kinds: BTreeMap<&str, &str> = e
        .attributes
        .iter()
        .map(|(k, v)| {
            let kind = match v.attr {
                Some(Attr::CeString(_)) => "string",
                Some(Attr::CeInteger(_)) => "integer",
                Some(Attr::CeTimestamp(_)) => "timestamp",
                _ => "other",
            };
            (k.as_str(), kind)
        })
        .collect();
    let want: BTreeMap<&str, &str> = [
        ("ce-clustername", "string"),
        ("ce-originalsource", "string"),
        ("ce-resourceid", "string"),
        ("ce-resourceversion", "string"),
        ("ce-time", "timestamp"),
        ("contenttype", "string"),
    ]
    .into();
    ensure!(kinds == want, "{kinds:?}");
    Ok(())
}
