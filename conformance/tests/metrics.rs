//! `/metrics` end to end: a hub with its controllers is driven over REST (creates, a dry run,
//! server-side apply, a watch, an unknown path), then its exposition must pass the real
//! `promtool check metrics` and show each request, watch event, stored object, storage call
//! and fleet gauge with kube-apiserver's names and labels. Authorization is kube-apiserver's:
//! the `system:monitoring` group or a granted nonResourceURL.

use std::time::Duration;

use anyhow::ensure;
use ocm_conformance::hub::{Backend, TestHub, eventually};
use ocm_conformance::kubectl::{Kubectl, MCL, cluster};
use ocm_conformance::prom::{self, Sample};
use reqwest::Method;
use serde_json::json;

const WORKS: &str = "/apis/work.open-cluster-management.io/v1/namespaces/c1/manifestworks";
const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";
const WORK_GROUP: &str = "work.open-cluster-management.io";

async fn scrape(hub: &TestHub, client: &reqwest::Client) -> anyhow::Result<(String, Vec<Sample>)> {
    let (code, body) = hub.call(client, Method::GET, "/metrics", None, &[]).await?;
    ensure!(code == 200, "GET /metrics: {code} {body}");
    let text = body.as_str().map(str::to_owned).unwrap_or_default();
    let samples = prom::samples(&text)?;
    Ok((text, samples))
}

fn work(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": "c1"},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}, "data": {"a": "1"}}]}},
    })
}

#[tokio::test]
async fn metrics_count_requests_watches_objects_and_the_fleet() -> anyhow::Result<()> {
    let hub = TestHub::start_with_controllers(Backend::Sled).await?;
    let admin = hub.http()?;
    for name in ["c1", "c2", "c3"] {
        let mut mc = cluster(name, json!({}));
        mc["spec"]["hubAcceptsClient"] = json!(name == "c1");
        let (code, body) = hub.call(&admin, Method::POST, MCL, Some(&mc), &[]).await?;
        ensure!(code == 201, "create {name}: {code} {body}");
    }
    // A dry run is counted with dry_run="All" and stores nothing.
    let (code, _) = hub
        .call(
            &admin,
            Method::POST,
            &format!("{MCL}?dryRun=All"),
            Some(&cluster("dry", json!({}))),
            &[],
        )
        .await?;
    ensure!(code == 201, "dry run: {code}");
    // The accepted cluster gets its namespace and Lease from registration.
    eventually("c1's namespace", Duration::from_secs(10), || async {
        let (code, _) = hub.call(&admin, Method::GET, "/api/v1/namespaces/c1", None, &[]).await?;
        Ok((code == 200).then_some(()))
    })
    .await?;
    for name in ["w1", "w2"] {
        let (code, body) = hub.call(&admin, Method::POST, WORKS, Some(&work(name)), &[]).await?;
        ensure!(code == 201, "create work {name}: {code} {body}");
    }
    let applied = json!({"status": {"conditions": [{"type": "Applied", "status": "True",
        "reason": "AppliedManifestWorkComplete", "message": "applied",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let merge = [("content-type", "application/merge-patch+json")];
    let (code, body) = hub
        .call(&admin, Method::PATCH, &format!("{WORKS}/w1/status"), Some(&applied), &merge)
        .await?;
    ensure!(code == 200, "work status: {code} {body}");
    // Server-side apply is verb APPLY.
    let apply = [("content-type", "application/apply-patch+yaml")];
    let labelled = json!({"apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster", "metadata": {"name": "c2", "labels": {"env": "prod"}}});
    let (code, body) = hub
        .call(
            &admin,
            Method::PATCH,
            &format!("{MCL}/c2?fieldManager=test&force=true"),
            Some(&labelled),
            &apply,
        )
        .await?;
    ensure!(code == 200, "apply: {code} {body}");
    // A watch that ends by itself: its events are counted, and it is long-running until then.
    let (code, _) = hub
        .call(&admin, Method::GET, &format!("{MCL}?watch=true&timeoutSeconds=1"), None, &[])
        .await?;
    ensure!(code == 200, "watch: {code}");
    // A path this hub does not serve is counted without naming it.
    let (code, _) = hub.call(&admin, Method::GET, "/apis/example.com/v1/bogus", None, &[]).await?;
    ensure!(code == 404, "unknown path: {code}");

    // The watch's stream is dropped by the server a moment after the client read its end.
    let watch = [("verb", "WATCH"), ("resource", "managedclusters"), ("scope", "cluster")];
    let (text, s) =
        eventually("the watch ended on the server", Duration::from_secs(10), || async {
            let (text, s) = scrape(&hub, &admin).await?;
            let open = prom::sum(&s, "apiserver_longrunning_requests", &watch);
            Ok((open == 0.0).then_some((text, s)))
        })
        .await?;
    prom::check_metrics_unless_skipped(&text).await?;
    let post = [
        ("verb", "POST"),
        ("group", CLUSTER_GROUP),
        ("version", "v1"),
        ("resource", "managedclusters"),
        ("scope", "resource"),
        ("component", "apiserver"),
    ];
    let mut created = post.to_vec();
    created.extend([("code", "201"), ("dry_run", "")]);
    ensure!(prom::value(&s, "apiserver_request_total", &created)? == 3.0);
    let mut dry = post.to_vec();
    dry.extend([("code", "201"), ("dry_run", "All")]);
    ensure!(prom::value(&s, "apiserver_request_total", &dry)? == 1.0);
    ensure!(prom::sum(&s, "apiserver_request_duration_seconds_count", &post) == 4.0);
    // Response sizes are kube-apiserver's: reads only.
    ensure!(prom::sum(&s, "apiserver_response_sizes_count", &post) == 0.0);
    ensure!(
        prom::sum(
            &s,
            "apiserver_response_sizes_count",
            &[("verb", "GET"), ("resource", "namespaces")]
        ) >= 1.0
    );
    let status = [
        ("verb", "PATCH"),
        ("resource", "manifestworks"),
        ("subresource", "status"),
        ("scope", "resource"),
        ("code", "200"),
    ];
    ensure!(prom::value(&s, "apiserver_request_total", &status)? == 1.0);
    ensure!(
        prom::value(&s, "apiserver_request_total", &[("verb", "APPLY"), ("code", "200")])? == 1.0
    );
    ensure!(prom::sum(&s, "apiserver_request_total", &watch) == 1.0);
    // Ended: not long-running any more, and timed.
    ensure!(prom::sum(&s, "apiserver_longrunning_requests", &watch) == 0.0);
    ensure!(prom::sum(&s, "apiserver_request_duration_seconds_count", &watch) == 1.0);
    let events = [("group", CLUSTER_GROUP), ("version", "v1"), ("resource", "managedclusters")];
    ensure!(prom::value(&s, "apiserver_watch_events_total", &events)? >= 3.0);
    ensure!(prom::value(&s, "apiserver_watch_events_sizes_count", &events)? >= 3.0);
    // The unknown path: a GET with no resource named, and no label value taken from the path.
    let unknown = [("verb", "GET"), ("resource", ""), ("code", "404")];
    ensure!(prom::sum(&s, "apiserver_request_total", &unknown) >= 1.0);
    ensure!(
        !text.contains("bogus") && !text.contains("example.com"),
        "a path became a label value"
    );
    // Objects and the watch cache.
    let mcl = [("group", CLUSTER_GROUP), ("resource", "managedclusters")];
    ensure!(prom::value(&s, "apiserver_resource_objects", &mcl)? == 3.0);
    ensure!(
        prom::value(
            &s,
            "apiserver_resource_objects",
            &[("group", WORK_GROUP), ("resource", "manifestworks")]
        )? == 2.0
    );
    ensure!(prom::value(&s, "watch_cache_capacity", &mcl)? > 0.0);
    ensure!(prom::value(&s, "apiserver_watch_cache_resource_version", &mcl)? > 0.0);
    ensure!(prom::value(&s, "apiserver_terminated_watchers_total", &mcl)? == 0.0);
    // Storage latency per operation and kind.
    let stored =
        [("operation", "create"), ("group", CLUSTER_GROUP), ("resource", "managedclusters")];
    ensure!(prom::value(&s, "ocm_storage_request_duration_seconds_count", &stored)? >= 3.0);
    // The fleet.
    let clusters = |accepted, available| [("accepted", accepted), ("available", available)];
    ensure!(prom::sum(&s, "ocm_managed_clusters", &[("accepted", "false")]) == 2.0);
    ensure!(prom::sum(&s, "ocm_managed_clusters", &[("accepted", "true")]) == 1.0);
    ensure!(prom::value(&s, "ocm_managed_clusters", &clusters("false", "True"))? == 0.0);
    ensure!(
        prom::value(&s, "ocm_manifestworks", &[("condition", "Applied"), ("status", "True")])?
            == 1.0
    );
    ensure!(
        prom::value(&s, "ocm_manifestworks", &[("condition", "Applied"), ("status", "Unknown")])?
            == 1.0
    );
    ensure!(
        prom::value(&s, "ocm_manifestworks", &[("condition", "Available"), ("status", "Unknown")])?
            == 2.0
    );
    ensure!(
        prom::value(
            &s,
            "ocm_build_info",
            &[("version", env!("CARGO_PKG_VERSION")), ("profile", "hub")]
        )? == 1.0
    );
    ensure!(prom::value(&s, "process_resident_memory_bytes", &[])? > 0.0);
    ensure!(
        prom::value(&s, "apiserver_current_inflight_requests", &[("request_kind", "readOnly")])?
            >= 1.0,
        "the scrape itself holds a read-only seat"
    );
    // The accepted cluster's Lease (created by registration) has an age.
    let age = prom::value(&s, "ocm_managed_cluster_lease_age_seconds", &[("cluster", "c1")])?;
    ensure!((0.0..3600.0).contains(&age), "lease age {age}");
    ensure!(prom::sum(&s, "ocm_managed_cluster_lease_age_seconds", &[("cluster", "c2")]) == 0.0);

    // Deleting objects is seen at the next scrape (the gauges are recomputed, not accumulated).
    let (code, _) = hub.call(&admin, Method::DELETE, &format!("{MCL}/c3"), None, &[]).await?;
    ensure!(code == 200, "delete c3: {code}");
    eventually("c3 gone from the gauges", Duration::from_secs(10), || async {
        let (_, s) = scrape(&hub, &admin).await?;
        Ok((prom::sum(&s, "ocm_managed_clusters", &[("accepted", "false")]) == 1.0).then_some(()))
    })
    .await?;
    hub.stop().await;
    Ok(())
}

#[tokio::test]
async fn metrics_are_authorized_like_kube_apiserver() -> anyhow::Result<()> {
    let hub = TestHub::start(Backend::Memory).await?;
    let (code, _) = hub.call(&hub.anonymous()?, Method::GET, "/metrics", None, &[]).await?;
    ensure!(code == 401, "anonymous: {code}");
    let (code, body) =
        hub.call(&hub.http_as("alice", None)?, Method::GET, "/metrics", None, &[]).await?;
    ensure!(code == 403, "alice: {code}");
    ensure!(
        body["reason"] == "Forbidden"
            && body["message"].as_str().unwrap_or_default().contains("/metrics"),
        "{body}"
    );
    let monitor = hub.http_as("prometheus", Some("system:monitoring"))?;
    let (text, s) = scrape(&hub, &monitor).await?;
    ensure!(prom::value(&s, "ocm_build_info", &[("profile", "hub")])? == 1.0);
    prom::check_metrics_unless_skipped(&text).await?;
    // A nonResourceURL granted through RBAC works as well.
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "scraper"},
        "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "scraper"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "scraper"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]});
    hub.create_rbac([role, binding]).await?;
    let alice = hub.http_as("alice", None)?;
    eventually("alice may scrape", Duration::from_secs(10), || async {
        let (code, _) = hub.call(&alice, Method::GET, "/metrics", None, &[]).await?;
        Ok((code == 200).then_some(()))
    })
    .await?;
    hub.stop().await;
    Ok(())
}

#[tokio::test]
async fn kubectl_get_raw_metrics_passes_promtool() -> anyhow::Result<()> {
    if ocm_conformance::kubectl::skip("the whole test") {
        return Ok(());
    }
    let hub = TestHub::start(Backend::Sled).await?;
    let kubectl = Kubectl::new(&hub)?;
    // A table read first: its discovery and LIST are in what the scrape shows.
    kubectl.ok(&["get", "namespaces"]).await?;
    let text = kubectl.ok(&["get", "--raw", "/metrics"]).await?;
    ensure!(text.contains("# TYPE apiserver_request_total counter"), "{text}");
    let s = prom::samples(&text)?;
    let list =
        [("verb", "LIST"), ("resource", "namespaces"), ("scope", "cluster"), ("code", "200")];
    ensure!(prom::value(&s, "apiserver_request_total", &list)? == 1.0);
    ensure!(
        prom::sum(&s, "apiserver_request_total", &[("verb", "GET"), ("resource", "")]) >= 1.0,
        "discovery GETs"
    );
    prom::check_metrics_unless_skipped(&text).await?;
    hub.stop().await;
    Ok(())
}

/// The negative control: promtool does reject what its linter forbids, so the checks above can
/// fail.
#[tokio::test]
async fn promtool_rejects_a_badly_named_counter() -> anyhow::Result<()> {
    if prom::skip("the whole test") {
        return Ok(());
    }
    let bad = "# HELP request_latency_ms A counter in milliseconds.\n# TYPE request_latency_ms counter\nrequest_latency_ms 1\n";
    let err = prom::check_metrics(bad).await.expect_err("promtool accepted a bad exposition");
    ensure!(err.to_string().contains("exited 3"), "{err:#}");
    Ok(())
}
