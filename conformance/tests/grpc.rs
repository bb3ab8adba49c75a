//! The hub's CloudEvents gRPC server as an agent meets it, through the agent's own client over
//! real mTLS: the `subscription-id` header and heartbeats; works reaching only their cluster's
//! subscribers; RBAC keeping cluster `a-x`'s agent from subscribing to or publishing for cluster
//! `a` (by the event's cluster, and by the object the event carries); the resync protocol;
//! status reports of an older generation ignored; Publish of a Kubernetes kind (a Lease); a
//! denied cluster's open streams ended; an agent streaming only its own cluster's CSRs; and
//! callers without credentials refused.

use std::time::Duration;

use anyhow::{Context as _, ensure};
use ocm_agent::grpc;
use ocm_conformance::cloudevents::{WAIT, accepted, agent, endpoint, event, next, refused};
use ocm_conformance::csr::client_csr;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::kubectl::{create, delete, merge_patch};
use ocm_conformance::prom;
use ocm_proto::api::work::v1::ManifestWorkStatus;
use ocm_proto::cloudevents::v1::CloudEvent;
use ocm_proto::cloudevents::{Attr, HEARTBEAT, data_type, ext};
use ocm_proto::payload::status_hash;
use reqwest::Method;
use serde_json::{Value, json};

async fn hub() -> anyhow::Result<TestHub> {
    TestHub::start_with(Backend::Memory, |c| {
        c.registration.enabled = true;
        c.grpc_heartbeat = Duration::from_millis(300);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_are_kept_apart_and_the_protocol_holds() -> anyhow::Result<()> {
    let hub = hub().await?;
    accepted(&hub, &["a", "a-x"]).await?;
    let (a, ax) = (agent(&hub, "a").await?, agent(&hub, "a-x").await?);
    let bundles = data_type::MANIFEST_BUNDLES;

    // a-x may not subscribe for a; each may for itself.
    ensure!(refused(grpc::subscribe(&ax, "a", bundles).await, "PermissionDenied"));
    let mut stream_a = grpc::subscribe(&a, "a", bundles).await?;
    let mut stream_ax = grpc::subscribe(&ax, "a-x", bundles).await?;
    // The hub first asks for the statuses it lacks (none yet); then an idle stream gets
    // heartbeats.
    for stream in [&mut stream_a, &mut stream_ax] {
        let ask = tokio::time::timeout(WAIT, stream.message()).await??.context("ended")?;
        ensure!(ask.r#type == format!("{bundles}.status.resync_request"), "{ask:?}");
        let hashes: Value = serde_json::from_slice(ask.bytes().context("data")?)?;
        ensure!(hashes == json!({"statusHashes": []}), "{hashes}");
    }
    let beat = tokio::time::timeout(WAIT, stream_ax.message()).await??.context("ended")?;
    ensure!(beat.r#type == HEARTBEAT && beat.data.is_none(), "{beat:?}");

    // A work in a reaches a's stream only, as a ManifestBundle.
    let work = json!({"apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "w", "namespace": "a", "labels": {"team": "x"}},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}}]},
            "deleteOption": {"propagationPolicy": "Orphan"}}});
    let works = "/apis/work.open-cluster-management.io/v1/namespaces/a/manifestworks";
    let created = create(&hub, &hub.http()?, works, work.clone()).await?;
    let uid = created["metadata"]["uid"].as_str().context("uid")?.to_owned();
    let e = next(&mut stream_a).await?;
    ensure!(e.r#type == format!("{bundles}.spec.create_request"), "{e:?}");
    ensure!(e.string(ext::RESOURCE_ID) == Some(uid.as_str()) && e.source == "kube");
    ensure!(e.integer(ext::RESOURCE_VERSION) == Some(1), "{e:?}");
    let data: Value = serde_json::from_slice(e.bytes().context("data")?)?;
    ensure!(data["manifests"][0]["kind"] == "ConfigMap", "{data}");
    ensure!(data["deleteOption"]["propagationPolicy"] == "Orphan", "{data}");
    let meta: Value = serde_json::from_str(e.string(ext::METADATA).context("metadata")?)?;
    ensure!(meta["name"] == "w" && meta["labels"]["team"] == "x", "{meta}");
    let nothing = tokio::time::timeout(Duration::from_secs(1), next(&mut stream_ax)).await;
    ensure!(nothing.is_err(), "a's work reached a-x: {nothing:?}");

    // a-x may not publish for a: not by naming a, not by naming a's work from its own cluster.
    let status = json!({"conditions": [{"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete",
        "message": "done", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}]});
    let report = |cluster: &str, version: i32| -> anyhow::Result<CloudEvent> {
        let mut e = event(&format!("{bundles}.status.update_request"), cluster)?;
        e.set(ext::RESOURCE_ID, Attr::CeString(uid.clone()))
            .set(ext::RESOURCE_VERSION, Attr::CeInteger(version))
            .set_json(status.to_string());
        Ok(e)
    };
    ensure!(refused(grpc::publish(&ax, report("a", 1)?).await, "PermissionDenied"));
    // Not even whether a uid exists in a's namespace.
    let mut probe = report("a", 1)?;
    probe.set(ext::RESOURCE_ID, Attr::CeString("no-such-uid".into()));
    ensure!(refused(grpc::publish(&ax, probe).await, "PermissionDenied"));
    ensure!(refused(grpc::publish(&ax, report("a-x", 1)?).await, "FailedPrecondition"));
    let lease = |ns: &str| -> anyhow::Result<CloudEvent> {
        let mut e = event(&format!("{}.spec.update_request", data_type::LEASES), "a-x")?;
        e.set_json(
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "managed-cluster-lease", "namespace": ns},
                "spec": {"renewTime": "2026-01-01T00:00:00.000000Z"}})
            .to_string(),
        );
        Ok(e)
    };
    ensure!(refused(grpc::publish(&ax, lease("a")?).await, "PermissionDenied"));

    // a's own report lands (with the finalizer the hub adds) before Publish returns; an older
    // generation's does not.
    let path = format!("{works}/w");
    let (_, before) = hub.call(&hub.http()?, Method::GET, &path, None, &[]).await?;
    grpc::publish(&a, report("a", 1)?).await?;
    let (_, stored) = hub.call(&hub.http()?, Method::GET, &path, None, &[]).await?;
    ensure!(stored["status"]["conditions"][0]["message"] == "done", "{stored}");
    ensure!(
        stored["metadata"]["finalizers"]
            == json!(["cluster.open-cluster-management.io/manifest-work-cleanup"]),
        "{stored}"
    );
    // The finalizer and the first status are one write: a watcher sees them arrive together.
    let watched = hub
        .http()?
        .get(format!(
            "{}{works}?watch=1&timeoutSeconds=1&resourceVersion={}",
            hub.url,
            before["metadata"]["resourceVersion"].as_str().context("rv")?
        ))
        .send()
        .await?
        .text()
        .await?;
    let events: Vec<Value> = watched.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    ensure!(events.len() == 1, "one write for the first report: {events:?}");
    ensure!(
        events[0]["object"]["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"],
        "{events:?}"
    );
    let patch = json!({"spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm2", "namespace": "default"}}]}}});
    let body = merge_patch(&hub, &hub.http()?, &path, patch).await?;
    ensure!(body["metadata"]["generation"] == 2, "{body}");
    let e = next(&mut stream_a).await?;
    ensure!(e.r#type == format!("{bundles}.spec.update_request"), "{e:?}");
    ensure!(e.integer(ext::RESOURCE_VERSION) == Some(2), "{e:?}");
    let mut stale = status.clone();
    stale["conditions"][0]["message"] = json!("stale");
    let mut old = report("a", 1)?;
    old.set_json(stale.to_string());
    grpc::publish(&a, old).await?;
    let (_, w) = hub.call(&hub.http()?, Method::GET, &path, None, &[]).await?;
    ensure!(w["status"]["conditions"][0]["message"] == "done", "a stale report landed: {w}");

    // A new subscription is asked for what the hub lacks: the hash of the status it holds.
    let mut again = grpc::subscribe(&a, "a", bundles).await?;
    let ask = next(&mut again).await?;
    ensure!(ask.r#type == format!("{bundles}.status.resync_request"), "{ask:?}");
    let held: ManifestWorkStatus = serde_json::from_value(w["status"].clone())?;
    let hashes: Value = serde_json::from_slice(ask.bytes().context("data")?)?;
    let want = json!({"statusHashes": [{"resourceID": uid, "statusHash": status_hash(&held)}]});
    ensure!(hashes == want, "{hashes} is not {want}");
    drop(again);

    // Spec resync: the hub sends what is newer than the agent holds, and deletes what it lacks.
    // The agent holds the work at `held` and a work the hub never had.
    let resync = |held: i64| -> anyhow::Result<CloudEvent> {
        let mut e = event(&format!("{bundles}.spec.resync_request"), "a")?;
        e.set_json(
            json!({"resourceVersions": [{"resourceID": uid, "resourceVersion": held},
                                        {"resourceID": "gone", "resourceVersion": 3}]})
            .to_string(),
        );
        Ok(e)
    };
    grpc::publish(&a, resync(1)?).await?;
    let mut seen = Vec::new();
    for _ in 0..2 {
        let e = next(&mut stream_a).await?;
        ensure!(e.r#type == format!("{bundles}.spec.resync_response"), "{e:?}");
        seen.push((
            e.string(ext::RESOURCE_ID).unwrap_or("").to_owned(),
            e.get(ext::DELETION_TIMESTAMP).is_some(),
        ));
    }
    let mut want = vec![("gone".to_owned(), true), (uid.clone(), false)];
    seen.sort();
    want.sort();
    ensure!(seen == want, "{seen:?}");
    // Holding the current generation, the agent is sent only the deletion of what it lacks.
    grpc::publish(&a, resync(2)?).await?;
    let e = next(&mut stream_a).await?;
    ensure!(e.string(ext::RESOURCE_ID) == Some("gone"), "a current work was sent again: {e:?}");
    let nothing = tokio::time::timeout(Duration::from_secs(1), next(&mut stream_a)).await;
    ensure!(nothing.is_err(), "a current work was sent again: {nothing:?}");

    // A Kubernetes kind over Publish: a's agent renews its Lease.
    let lease_path = "/apis/coordination.k8s.io/v1/namespaces/a/leases/managed-cluster-lease";
    let (_, current) = hub.call(&hub.http()?, Method::GET, lease_path, None, &[]).await?;
    let mut renewed = current.clone();
    renewed["spec"]["renewTime"] = json!("2030-01-01T00:00:00.000000Z");
    let mut e = event(&format!("{}.spec.update_request", data_type::LEASES), "a")?;
    e.set_json(renewed.to_string());
    grpc::publish(&a, e).await?;
    let (_, after) = hub.call(&hub.http()?, Method::GET, lease_path, None, &[]).await?;
    ensure!(after["spec"]["renewTime"] == "2030-01-01T00:00:00.000000Z", "{after}");

    // The release: a `Deleted` report lets a deleted work go.
    delete(&hub, &hub.http()?, &path).await?;
    let e = next(&mut stream_a).await?;
    ensure!(e.get(ext::DELETION_TIMESTAMP).is_some() && e.data.is_none(), "{e:?}");
    // Deleting, the work waits for its agent: neither the deletion nor a report of the current
    // generation (the deletion raised it) other than `Deleted` releases it; that report lands.
    let (_, deleting) = hub.call(&hub.http()?, Method::GET, &path, None, &[]).await?;
    let generation = deleting["metadata"]["generation"].as_i64().context("generation")? as i32;
    let mut still = status.clone();
    still["conditions"][0]["message"] = json!("deleting");
    let mut current = report("a", generation)?;
    current.set_json(still.to_string());
    grpc::publish(&a, current).await?;
    let (code, w) = hub.call(&hub.http()?, Method::GET, &path, None, &[]).await?;
    ensure!(code == 200 && w["metadata"]["deletionTimestamp"].is_string(), "{code} {w}");
    ensure!(w["status"]["conditions"][0]["message"] == "deleting", "the report did not land: {w}");
    ensure!(
        w["metadata"]["finalizers"]
            == json!(["cluster.open-cluster-management.io/manifest-work-cleanup"]),
        "released before the agent said Deleted: {w}"
    );
    let mut deleted = report("a", 2)?;
    deleted.set_json(
        json!({"conditions": [{"type": "Deleted", "status": "True", "reason": "ManifestsDeleted",
            "message": "gone", "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
        .to_string(),
    );
    grpc::publish(&a, deleted.clone()).await?;
    eventually("the work released", WAIT, || async {
        let (code, _) = hub.call(&hub.http()?, Method::GET, &path, None, &[]).await?;
        Ok((code == 404).then_some(()))
    })
    .await?;

    // A repeated `Deleted` for a work already gone is fine (nothing is left to release).
    grpc::publish(&a, deleted).await?;

    // Bad requests are the protocol's errors: a report must say which generation it is about.
    let mut versionless = report("a", 1)?;
    versionless.attributes.remove("ce-resourceversion");
    ensure!(refused(grpc::publish(&a, versionless).await, "InvalidArgument"));
    ensure!(refused(grpc::subscribe(&a, "", bundles).await, "InvalidArgument"));
    ensure!(refused(grpc::subscribe(&a, "a", "no.such.v1.things").await, "InvalidArgument"));
    let mut nameless = event(&format!("{bundles}.status.update_request"), "")?;
    nameless.set_json("{}");
    ensure!(refused(grpc::publish(&a, nameless).await, "PermissionDenied"));
    let bad_type = CloudEvent {
        r#type: "nonsense".into(),
        ..event(&format!("{bundles}.status.update_request"), "a")?
    };
    ensure!(refused(grpc::publish(&a, bad_type).await, "InvalidArgument"));
    Ok(())
}

/// An open stream is authorized again when RBAC changes: denying a cluster (the hub takes its
/// agent's RBAC away) ends its agent's subscriptions within 5 s (issue 6), and leaves another
/// cluster's alone; the gRPC metrics count both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_clusters_streams_end() -> anyhow::Result<()> {
    let hub = hub().await?;
    accepted(&hub, &["a", "b"]).await?;
    let (a, b) = (agent(&hub, "a").await?, agent(&hub, "b").await?);
    let mut stream_a = grpc::subscribe(&a, "a", data_type::MANIFEST_BUNDLES).await?;
    let mut stream_b = grpc::subscribe(&b, "b", data_type::MANIFEST_BUNDLES).await?;
    for stream in [&mut stream_a, &mut stream_b] {
        let ask = tokio::time::timeout(WAIT, stream.message()).await??.context("ended")?;
        ensure!(ask.r#type.ends_with(".status.resync_request"), "{ask:?}");
    }
    let cluster = "/apis/cluster.open-cluster-management.io/v1/managedclusters/a";
    merge_patch(&hub, &hub.http()?, cluster, json!({"spec": {"hubAcceptsClient": false}})).await?;
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match stream_a.message().await {
                Ok(Some(e)) if e.r#type == HEARTBEAT => continue,
                other => return other,
            }
        }
    })
    .await
    .context("a denied cluster's stream still open after 5 s")?;
    ensure!(
        matches!(&end, Err(s) if s.code() == tonic::Code::PermissionDenied),
        "the stream ended otherwise: {end:?}"
    );
    ensure!(refused(
        grpc::subscribe(&a, "a", data_type::MANIFEST_BUNDLES).await,
        "PermissionDenied"
    ));
    // b's stream is still served: its heartbeats keep coming.
    let beat =
        tokio::time::timeout(WAIT, stream_b.message()).await??.context("b's stream ended")?;
    ensure!(beat.r#type == HEARTBEAT, "{beat:?}");

    // a's agent naming b is refused, and counted under no cluster's name: `consumer` is the
    // caller's own cluster, never one it claims.
    ensure!(refused(
        grpc::subscribe(&a, "b", data_type::MANIFEST_BUNDLES).await,
        "PermissionDenied"
    ));

    // /metrics tells it under OCM's gRPC names and labels (the cluster as `consumer`),
    // promtool-clean.
    let (code, body) = hub.call(&hub.http()?, Method::GET, "/metrics", None, &[]).await?;
    ensure!(code == 200, "GET /metrics: {code} {body}");
    let text = body.as_str().context("the exposition")?;
    prom::check_metrics_unless_skipped(text).await?;
    let samples = prom::samples(text)?;
    let bundles = |consumer| {
        [
            ("consumer", consumer),
            ("data_type", data_type::MANIFEST_BUNDLES),
            ("method", "Subscribe"),
        ]
    };
    let [a_consumer, a_type, a_method] = bundles("a");
    let denied = [a_consumer, a_type, a_method, ("grpc_code", "PermissionDenied")];
    let ended = prom::sum(&samples, "grpc_server_ce_processed_total", &denied);
    ensure!(ended == 2.0, "a's stream and its second try: {text}");
    ensure!(prom::value(&samples, "grpc_server_ce_called_total", &bundles("a"))? == 2.0);
    ensure!(prom::value(&samples, "grpc_server_ce_called_total", &bundles("b"))? == 1.0);
    ensure!(prom::value(&samples, "grpc_server_ce_called_total", &bundles("unknown"))? == 1.0);
    // b's stream is open; its status resync request and a heartbeat at least were sent.
    let open = [("consumer", "b"), ("data_type", data_type::MANIFEST_BUNDLES)];
    ensure!(prom::value(&samples, "grpc_server_ce_subscribers", &open)? == 1.0);
    let open_a = [("consumer", "a"), ("data_type", data_type::MANIFEST_BUNDLES)];
    ensure!(prom::value(&samples, "grpc_server_ce_subscribers", &open_a)? == 0.0);
    ensure!(prom::value(&samples, "grpc_server_ce_msg_sent_total", &bundles("b"))? >= 2.0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_without_credentials_is_refused() -> anyhow::Result<()> {
    let hub = hub().await?;
    accepted(&hub, &["a"]).await?;
    // A certificate from another CA: the TLS handshake succeeds, the hub authenticates nobody.
    let other = tempfile::tempdir()?;
    let pki = ocm_apiserver::auth::pki::Pki::load_or_create(other.path(), &["127.0.0.1".into()])?;
    let (crt, key) = pki.issue_client("system:open-cluster-management:a:agent1", None, 1)?;
    let client = endpoint(&hub)?.connect(&crt, &key).await?;
    let r = grpc::subscribe(&client, "a", data_type::MANIFEST_BUNDLES).await;
    ensure!(refused(r, "Unauthenticated"), "a foreign certificate was let in");
    Ok(())
}

/// CSRs over gRPC, stricter than OCM: an agent subscribes only to its own cluster's, and is
/// sent only requests its own cluster's agents made (the requester the hub recorded), whatever
/// cluster label a request carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_streams_only_its_own_clusters_csrs() -> anyhow::Result<()> {
    let hub = hub().await?;
    accepted(&hub, &["c1", "c2"]).await?;
    let (c1, c2) = (agent(&hub, "c1").await?, agent(&hub, "c2").await?);
    let csrs = data_type::CSRS;
    ensure!(refused(grpc::subscribe(&c2, "c1", csrs).await, "PermissionDenied"));
    let mut stream_c1 = grpc::subscribe(&c1, "c1", csrs).await?;
    let mut stream_c2 = grpc::subscribe(&c2, "c2", csrs).await?;
    // Each agent asks for a certificate; c1's request carries c2's label.
    let request = |client: &str, label: &str| -> anyhow::Result<CloudEvent> {
        let (cn, group) = (
            format!("system:open-cluster-management:{client}:agent2"),
            format!("system:open-cluster-management:{client}"),
        );
        let name = format!("{client}-renewal");
        let csr = client_csr(Some(&name), label, &cn, &[&group])?;
        let mut e = event(&format!("{csrs}.spec.create_request"), label)?;
        e.set_json(csr.to_string());
        Ok(e)
    };
    grpc::publish(&c1, request("c1", "c2")?).await?;
    grpc::publish(&c2, request("c2", "c2")?).await?;
    let e = next(&mut stream_c2).await?;
    let sent: Value = serde_json::from_slice(e.bytes().context("data")?)?;
    ensure!(sent["metadata"]["name"] == "c2-renewal", "c2 was sent {sent}");
    let e = next(&mut stream_c1).await?;
    let sent: Value = serde_json::from_slice(e.bytes().context("data")?)?;
    ensure!(sent["metadata"]["name"] == "c1-renewal", "c1 was sent {sent}");
    // A request labelled c2 that no agent of c2 made (the admin's, as a bootstrap identity's
    // would be): neither its creation nor its deletion reaches c2, which never learns its id.
    let cn = "system:open-cluster-management:c2:agent9";
    let csr = client_csr(Some("admin-made"), "c2", cn, &["system:open-cluster-management:c2"])?;
    let (http, path) = (hub.http()?, "/apis/certificates.k8s.io/v1/certificatesigningrequests");
    let (code, body) = hub.call(&http, Method::POST, path, Some(&csr), &[]).await?;
    ensure!(code == 201, "the admin's request: {code} {body}");
    let gone = format!("{path}/admin-made");
    let (code, body) = hub.call(&http, Method::DELETE, &gone, None, &[]).await?;
    ensure!(code == 200, "deleting the admin's request: {code} {body}");
    let nothing = tokio::time::timeout(Duration::from_secs(1), next(&mut stream_c2)).await;
    ensure!(nothing.is_err(), "c1's request, or the admin's, reached c2: {nothing:?}");
    Ok(())
}
