//! kube-rs 5.0 as the oracle (kube-api.md §2.5, §6, §10): discovery (legacy and aggregated), the
//! typed API on k8s-openapi kinds, `DynamicObject` on OCM kinds, error mapping, raw watches, and
//! `kube::runtime` watchers and reflectors, each run against a real hub on every backend.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use futures::{Stream, StreamExt as _};
use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
    CertificateSigningRequestStatus,
};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::{GroupVersionKind, Status};
use kube::discovery::{ApiCapabilities, ApiResource, Discovery, Scope};
use kube::runtime::watcher::{self, Event, watcher};
use kube::runtime::{WatchStreamExt as _, reflector};
use kube::{Client, ResourceExt as _};
use ocm_apiserver::serve::server::ServeConfig;
use ocm_conformance::hub::{Backend, TestHub};
use serde_json::{Value, json};

/// Upper bound for one behaviour on one backend (only so a broken server cannot hang the suite).
const LIMIT: Duration = Duration::from_secs(180);
/// Upper bound for one awaited event or convergence.
const WAIT: Duration = Duration::from_secs(60);

const CLUSTER: &str = "cluster.open-cluster-management.io";
const WORK: &str = "work.open-cluster-management.io";
const ADDON: &str = "addon.open-cluster-management.io";

type Tune = fn(&mut ServeConfig);

/// Runs `case` against a fresh hub (tuned by `tune`) on every backend, one after the other.
async fn on_every_backend<F, Fut>(tune: Tune, case: F) -> anyhow::Result<()>
where
    F: Fn(TestHub) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    for backend in Backend::all() {
        let hub = TestHub::start_with(backend, tune)
            .await
            .with_context(|| format!("starting a hub on {backend:?}"))?;
        match tokio::time::timeout(LIMIT, case(hub)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                // Printed at once: the runtime's shutdown may take a while before the harness reports.
                eprintln!("on the {backend:?} backend: {e:#}");
                return Err(e.context(format!("on the {backend:?} backend")));
            }
            Err(_) => bail!("on the {backend:?} backend: no result within {LIMIT:?}"),
        }
    }
    Ok(())
}

fn no_tuning(_: &mut ServeConfig) {}

/// Frequent bookmarks: every 200 ms (the cache reports progress every 50 ms).
fn quick_bookmarks(cfg: &mut ServeConfig) {
    cfg.bookmark_every = Duration::from_millis(200);
    cfg.cache.progress_every = Duration::from_millis(50);
}

/// A cache that remembers 5 events per kind and ends a watcher 4 events behind.
fn tiny_history(cfg: &mut ServeConfig) {
    quick_bookmarks(cfg);
    cfg.cache.history_per_kind = 5;
    cfg.cache.watcher_buffer = 4;
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// The `Status` of a failed call; an error when the call succeeded or failed otherwise.
fn api_error<T: std::fmt::Debug>(result: kube::Result<T>) -> anyhow::Result<Box<Status>> {
    match result {
        Err(kube::Error::Api(status)) => Ok(status),
        Err(e) => bail!("expected an API error (Status), got another error: {e:?}"),
        Ok(v) => bail!("expected an API error, the call succeeded: {v:?}"),
    }
}

/// Asserts that a call failed with `code` and `reason`; returns the Status.
fn expect_error<T: std::fmt::Debug>(
    result: kube::Result<T>,
    code: u16,
    reason: &str,
) -> anyhow::Result<Box<Status>> {
    let status = api_error(result)?;
    ensure!(
        status.code == code && status.reason == reason,
        "expected {code} {reason}, got {} {:?}: {status:?}",
        status.code,
        status.reason
    );
    ensure!(status.is_failure(), "an error Status must say status: Failure: {status:?}");
    Ok(status)
}

/// A delete answered with the object: it is the one asked for.
fn deleted_object<K: kube::Resource + std::fmt::Debug>(obj: &K, name: &str) -> anyhow::Result<()> {
    ensure!(obj.name_any() == name, "delete of {name} returned {obj:?}");
    Ok(())
}

/// A delete answered with a Status: it says Success.
fn success(status: &Status) -> anyhow::Result<()> {
    ensure!(status.is_success(), "a delete answered with a non-success Status: {status:?}");
    Ok(())
}

fn labels(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

fn config_map(name: &str, v: &str, label_pairs: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: labels(label_pairs),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("v".to_owned(), v.to_owned())])),
        ..Default::default()
    }
}

fn data_of(cm: &ConfigMap, key: &str) -> Option<String> {
    cm.data.as_ref().and_then(|d| d.get(key)).cloned()
}

async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<Namespace> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..Default::default() },
        ..Default::default()
    };
    api.create(&PostParams::default(), &ns)
        .await
        .with_context(|| format!("creating namespace {name}"))
}

fn names<K: kube::Resource>(items: &[K]) -> BTreeSet<String> {
    items.iter().map(|o| o.name_any()).collect()
}

/// A `Patch::Json` from JSON ops (the payload type is kube's `json_patch::Patch`, inferred).
fn json_patch(ops: Value) -> anyhow::Result<Patch<()>> {
    Ok(Patch::Json(serde_json::from_value(ops)?))
}

fn gvk(group: &str, version: &str, kind: &str) -> GroupVersionKind {
    GroupVersionKind::gvk(group, version, kind)
}

/// One resource as discovery reports it, comparable between the two discovery modes.
type ResourceSummary = (String, String, String, String, String, Vec<String>, Vec<String>);

fn summarize(discovery: &Discovery) -> BTreeSet<ResourceSummary> {
    let mut out = BTreeSet::new();
    for group in discovery.groups() {
        for version in group.versions() {
            for (ar, caps) in group.versioned_resources(version) {
                let mut ops = caps.operations.clone();
                ops.sort();
                let mut subs: Vec<String> = caps
                    .subresources
                    .iter()
                    .map(|(sar, scaps)| {
                        let mut ops = scaps.operations.clone();
                        ops.sort();
                        format!("{}:{}", sar.plural, ops.join(","))
                    })
                    .collect();
                subs.sort();
                out.insert((
                    ar.group.clone(),
                    ar.version.clone(),
                    ar.kind.clone(),
                    ar.plural.clone(),
                    format!("{:?}", caps.scope),
                    ops,
                    subs,
                ));
            }
        }
    }
    out
}

/// Resolves `group/version/kind` from discovery and checks its plural, scope and verbs.
fn expect_resource(
    discovery: &Discovery,
    (group, version, kind): (&str, &str, &str),
    plural: &str,
    scope: Scope,
    subresources: &[&str],
) -> anyhow::Result<(ApiResource, ApiCapabilities)> {
    let (ar, caps) = discovery
        .resolve_gvk(&gvk(group, version, kind))
        .with_context(|| format!("discovery has no {group}/{version} {kind}"))?;
    ensure!(ar.plural == plural, "{kind}: plural {:?}, want {plural:?}", ar.plural);
    ensure!(caps.scope == scope, "{kind}: scope {:?}, want {scope:?}", caps.scope);
    for verb in ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    {
        ensure!(
            caps.supports_operation(verb),
            "{kind}: verb {verb} missing: {:?}",
            caps.operations
        );
    }
    let subs: BTreeSet<&str> = caps.subresources.iter().map(|(a, _)| a.plural.as_str()).collect();
    for sub in subresources {
        ensure!(subs.contains(sub), "{kind}: subresource {sub} missing, have {subs:?}");
    }
    Ok((ar, caps))
}

fn check_discovery(discovery: &Discovery) -> anyhow::Result<()> {
    for group in ["", CLUSTER, WORK, ADDON, "coordination.k8s.io", "certificates.k8s.io"] {
        ensure!(discovery.has_group(group), "group {group:?} not discovered");
    }
    let core = discovery.get("").context("core group")?;
    ensure!(core.versions().any(|v| v == "v1"), "core group without v1");
    expect_resource(discovery, ("", "v1", "ConfigMap"), "configmaps", Scope::Namespaced, &[])?;
    expect_resource(
        discovery,
        ("", "v1", "Namespace"),
        "namespaces",
        Scope::Cluster,
        &["status", "finalize"],
    )?;
    expect_resource(
        discovery,
        (CLUSTER, "v1", "ManagedCluster"),
        "managedclusters",
        Scope::Cluster,
        &["status"],
    )?;
    expect_resource(
        discovery,
        (CLUSTER, "v1beta1", "Placement"),
        "placements",
        Scope::Namespaced,
        &["status"],
    )?;
    expect_resource(
        discovery,
        (WORK, "v1", "ManifestWork"),
        "manifestworks",
        Scope::Namespaced,
        &["status"],
    )?;
    let addon = discovery.get(ADDON).context("addon group")?;
    let (ar, caps) = addon
        .recommended_kind("ManagedClusterAddOn")
        .context("no recommended ManagedClusterAddOn")?;
    ensure!(ar.plural == "managedclusteraddons" && caps.scope == Scope::Namespaced, "{ar:?}");
    let (ar, caps) = addon
        .recommended_kind("ClusterManagementAddOn")
        .context("no recommended ClusterManagementAddOn")?;
    ensure!(ar.plural == "clustermanagementaddons" && caps.scope == Scope::Cluster, "{ar:?}");
    let versions: BTreeSet<&str> = addon.versions().collect();
    ensure!(
        versions.contains("v1alpha1") && versions.contains("v1beta1"),
        "addon versions: {versions:?}"
    );
    expect_resource(
        discovery,
        ("coordination.k8s.io", "v1", "Lease"),
        "leases",
        Scope::Namespaced,
        &[],
    )?;
    expect_resource(
        discovery,
        ("certificates.k8s.io", "v1", "CertificateSigningRequest"),
        "certificatesigningrequests",
        Scope::Cluster,
        &["status", "approval"],
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Discovery

async fn discovery_case(hub: TestHub) -> anyhow::Result<()> {
    let client = hub.kube().await?;
    let legacy = Discovery::new(client.clone()).run().await.context("Discovery::run (legacy)")?;
    check_discovery(&legacy).context("legacy discovery")?;
    let aggregated = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .context("Discovery::run_aggregated")?;
    check_discovery(&aggregated).context("aggregated discovery")?;
    let (a, b) = (summarize(&legacy), summarize(&aggregated));
    let only_legacy: Vec<_> = a.difference(&b).collect();
    let only_aggregated: Vec<_> = b.difference(&a).collect();
    ensure!(
        only_legacy.is_empty() && only_aggregated.is_empty(),
        "the two discovery modes disagree:\nonly legacy: {only_legacy:#?}\nonly aggregated: {only_aggregated:#?}"
    );

    // Use ManagedCluster's ApiResource exactly as discovery resolved it.
    for discovery in [&legacy, &aggregated] {
        let (ar, caps) = discovery
            .resolve_gvk(&gvk(CLUSTER, "v1", "ManagedCluster"))
            .context("resolve ManagedCluster")?;
        ensure!(caps.scope == Scope::Cluster);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let name = format!("discovered-{}", api.list(&ListParams::default()).await?.items.len());
        let obj = DynamicObject::new(&name, &ar).data(json!({"spec": {"hubAcceptsClient": true}}));
        let created = api.create(&PostParams::default(), &obj).await?;
        ensure!(created.name_any() == name);
        let types = created.types.clone().context("created object without apiVersion/kind")?;
        ensure!(types.api_version == ar.api_version && types.kind == ar.kind, "{types:?}");
        let listed = api.list(&ListParams::default()).await?;
        ensure!(listed.items.iter().any(|o| o.name_any() == name), "{name} not listed");
    }
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_legacy_and_aggregated() -> anyhow::Result<()> {
    on_every_backend(no_tuning, discovery_case).await
}

// ---------------------------------------------------------------------------------------------
// Typed API

async fn typed_config_maps_case(hub: TestHub) -> anyhow::Result<()> {
    let client = hub.kube().await?;
    create_namespace(&client, "typed").await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "typed");
    let pp = PostParams::default();
    for i in 0..7 {
        let tier = if i % 2 == 0 { "front" } else { "back" };
        let created = api
            .create(
                &pp,
                &config_map(&format!("cm-{i}"), &i.to_string(), &[("tier", tier), ("app", "kc")]),
            )
            .await
            .with_context(|| format!("create cm-{i}"))?;
        ensure!(created.metadata.uid.is_some() && created.metadata.resource_version.is_some());
        ensure!(created.namespace().as_deref() == Some("typed"));
    }
    // Get, get_opt.
    let got = api.get("cm-3").await?;
    ensure!(data_of(&got, "v").as_deref() == Some("3"), "{got:?}");
    ensure!(api.get_opt("cm-3").await?.is_some());
    ensure!(api.get_opt("missing").await?.is_none(), "get_opt of a missing name must be None");

    // Lists with selectors.
    let front = api.list(&ListParams::default().labels("tier=front")).await?;
    ensure!(
        names(&front.items) == BTreeSet::from(["cm-0", "cm-2", "cm-4", "cm-6"].map(String::from)),
        "tier=front: {:?}",
        names(&front.items)
    );
    ensure!(front.metadata.resource_version.as_deref().is_some_and(|rv| !rv.is_empty()));
    let one = api.list(&ListParams::default().fields("metadata.name=cm-3")).await?;
    ensure!(names(&one.items) == BTreeSet::from(["cm-3".to_owned()]), "{:?}", names(&one.items));
    let not_three = api.list(&ListParams::default().fields("metadata.name!=cm-3")).await?;
    ensure!(not_three.items.len() == 6, "metadata.name!=cm-3: {:?}", names(&not_three.items));
    let set =
        api.list(&ListParams::default().labels("tier in (front,back),app=kc,!absent")).await?;
    ensure!(set.items.len() == 7, "set-based selector: {:?}", names(&set.items));

    // Pagination: limit 2, follow continue until it is empty, everything exactly once.
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    let mut first_rv = None;
    loop {
        let mut lp = ListParams::default().labels("app=kc").limit(2);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.with_context(|| format!("page {pages}"))?;
        pages += 1;
        ensure!(page.items.len() <= 2, "page {pages} has {} items", page.items.len());
        let rv = page.metadata.resource_version.clone();
        if first_rv.is_none() {
            first_rv = rv.clone();
        } else {
            ensure!(rv == first_rv, "page {pages} served at {rv:?}, first page at {first_rv:?}");
        }
        seen.extend(page.items.iter().map(|o| o.name_any()));
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
        ensure!(pages < 20, "pagination does not end");
    }
    ensure!(pages == 4, "7 items at limit 2 take 4 pages, took {pages}");
    let unique: BTreeSet<_> = seen.iter().cloned().collect();
    ensure!(seen.len() == 7 && unique.len() == 7, "pages returned {seen:?}");

    // Replace, then replace again with the stale resourceVersion.
    let mut stale = api.get("cm-1").await?;
    let mut fresh = stale.clone();
    fresh.data = Some(BTreeMap::from([("v".to_owned(), "replaced".to_owned())]));
    let replaced = api.replace("cm-1", &pp, &fresh).await?;
    ensure!(data_of(&replaced, "v").as_deref() == Some("replaced"));
    ensure!(replaced.resource_version() != stale.resource_version(), "rv must change");
    stale.data = Some(BTreeMap::from([("v".to_owned(), "lost update".to_owned())]));
    let status = expect_error(api.replace("cm-1", &pp, &stale).await, 409, "Conflict")?;
    ensure!(status.is_conflict());
    ensure!(data_of(&api.get("cm-1").await?, "v").as_deref() == Some("replaced"));

    // Merge patch: set a key, add a label, delete a key with null.
    let patch = json!({"metadata": {"labels": {"patched": "merge"}}, "data": {"k": "merged"}});
    let merged = api.patch("cm-2", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    ensure!(data_of(&merged, "k").as_deref() == Some("merged"), "{merged:?}");
    ensure!(data_of(&merged, "v").as_deref() == Some("2"), "merge must keep other keys");
    ensure!(merged.labels().get("patched").map(String::as_str) == Some("merge"));
    ensure!(merged.labels().get("tier").map(String::as_str) == Some("front"));
    let unset = api
        .patch("cm-2", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": null}})))
        .await?;
    ensure!(data_of(&unset, "v").is_none() && data_of(&unset, "k").is_some(), "{unset:?}");

    // JSON patch: test + add + replace; a failing test is 422 and changes nothing.
    let ops = json_patch(json!([
        {"op": "test", "path": "/data/k", "value": "merged"},
        {"op": "add", "path": "/data/json", "value": "yes"},
        {"op": "replace", "path": "/metadata/labels/patched", "value": "json"}
    ]))?;
    let patched = api.patch("cm-2", &PatchParams::default(), &ops).await?;
    ensure!(data_of(&patched, "json").as_deref() == Some("yes"), "{patched:?}");
    ensure!(patched.labels().get("patched").map(String::as_str) == Some("json"));
    let failing = json_patch(json!([
        {"op": "test", "path": "/data/k", "value": "something else"},
        {"op": "add", "path": "/data/never", "value": "x"}
    ]))?;
    let result = api.patch("cm-2", &PatchParams::default(), &failing).await;
    expect_error(result, 422, "Invalid").context("a failing JSON patch test op")?;
    ensure!(data_of(&api.get("cm-2").await?, "never").is_none());

    // Delete one: either the object or a Success Status.
    api.delete("cm-6", &DeleteParams::default())
        .await?
        .either(|obj| deleted_object(&obj, "cm-6"), |status| success(&status))?;
    ensure!(api.get_opt("cm-6").await?.is_none(), "cm-6 still there after delete");
    expect_error(api.delete("cm-6", &DeleteParams::default()).await, 404, "NotFound")?;

    // Delete a collection by label; the rest stays.
    let result = api
        .delete_collection(&DeleteParams::default(), &ListParams::default().labels("tier=back"))
        .await?;
    result.either(
        |list| {
            let gone = names(&list.items);
            ensure!(
                gone == BTreeSet::from(["cm-1", "cm-3", "cm-5"].map(String::from)),
                "deletecollection returned {gone:?}"
            );
            Ok(())
        },
        |status| success(&status),
    )?;
    let left = api.list(&ListParams::default()).await?;
    ensure!(
        names(&left.items) == BTreeSet::from(["cm-0", "cm-2", "cm-4"].map(String::from)),
        "after deletecollection: {:?}",
        names(&left.items)
    );
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_config_maps() -> anyhow::Result<()> {
    on_every_backend(no_tuning, typed_config_maps_case).await
}

async fn typed_namespaces_leases_csrs_case(hub: TestHub) -> anyhow::Result<()> {
    let client = hub.kube().await?;
    let pp = PostParams::default();

    // Namespaces: the built-in ones exist; a new one is Active; delete returns it Terminating
    // and it disappears once the namespace controller emptied it.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let all = namespaces.list(&ListParams::default()).await?;
    for builtin in ["default", "kube-system", "kube-public"] {
        ensure!(names(&all.items).contains(builtin), "{builtin} missing: {:?}", names(&all.items));
    }
    let ns = create_namespace(&client, "leases").await?;
    ensure!(
        ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Active"),
        "new namespace: {ns:?}"
    );
    let labelled = namespaces
        .patch(
            "leases",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await?;
    ensure!(labelled.labels().get("team").map(String::as_str) == Some("a"));
    let by_label = namespaces.list(&ListParams::default().labels("team=a")).await?;
    ensure!(names(&by_label.items) == BTreeSet::from(["leases".to_owned()]));

    // Leases.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "leases");
    let lease = Lease {
        metadata: ObjectMeta { name: Some("agent".into()), ..Default::default() },
        spec: Some(LeaseSpec {
            holder_identity: Some("agent-1".into()),
            lease_duration_seconds: Some(60),
            ..Default::default()
        }),
    };
    let created = leases.create(&pp, &lease).await?;
    ensure!(created.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some("agent-1"));
    expect_error(leases.create(&pp, &lease).await, 409, "AlreadyExists")?;
    let renewed = leases
        .patch(
            "agent",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"renewTime": "2025-01-01T00:00:00.000000Z", "leaseTransitions": 1}})),
        )
        .await?;
    let spec = renewed.spec.clone().context("lease spec")?;
    ensure!(spec.renew_time.is_some() && spec.lease_transitions == Some(1), "{spec:?}");
    ensure!(spec.holder_identity.as_deref() == Some("agent-1"));
    let mut stale = created.clone();
    stale.spec.as_mut().context("spec")?.holder_identity = Some("agent-2".into());
    expect_error(leases.replace("agent", &pp, &stale).await, 409, "Conflict")?;
    let mut current = leases.get("agent").await?;
    current.spec.as_mut().context("spec")?.holder_identity = Some("agent-2".into());
    let replaced = leases.replace("agent", &pp, &current).await?;
    ensure!(replaced.spec.and_then(|s| s.holder_identity).as_deref() == Some("agent-2"));
    let list = leases.list(&ListParams::default().fields("metadata.namespace=leases")).await?;
    ensure!(names(&list.items) == BTreeSet::from(["agent".to_owned()]));

    // CertificateSigningRequests: cluster-scoped, status dropped on create, field selector on
    // spec.signerName, the approval subresource.
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    let signer = "kubernetes.io/kube-apiserver-client";
    let csr = CertificateSigningRequest {
        metadata: ObjectMeta { name: Some("csr-1".into()), ..Default::default() },
        spec: CertificateSigningRequestSpec {
            request: ByteString(
                ocm_agent::registration::new_request("c1", "agent1")?.1.into_bytes(),
            ),
            signer_name: signer.into(),
            usages: Some(vec!["client auth".into()]),
            ..Default::default()
        },
        status: Some(CertificateSigningRequestStatus {
            certificate: Some(ByteString(b"forged".to_vec())),
            ..Default::default()
        }),
    };
    let created = csrs.create(&pp, &csr).await?;
    ensure!(
        created.status.as_ref().is_none_or(|s| s.certificate.is_none()),
        "create must drop status: {:?}",
        created.status
    );
    ensure!(created.spec.request == csr.spec.request, "request bytes changed");
    let matching =
        csrs.list(&ListParams::default().fields(&format!("spec.signerName={signer}"))).await?;
    ensure!(names(&matching.items).contains("csr-1"));
    let other =
        csrs.list(&ListParams::default().fields("spec.signerName=example.com/other")).await?;
    ensure!(other.items.is_empty(), "{:?}", names(&other.items));
    let approval = CertificateSigningRequestStatus {
        conditions: Some(vec![CertificateSigningRequestCondition {
            type_: "Approved".into(),
            status: "True".into(),
            reason: Some("Test".into()),
            message: Some("approved by the kube_client suite".into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let approved = csrs
        .patch_subresource(
            "approval",
            "csr-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": approval})),
        )
        .await?;
    let conditions = approved.status.and_then(|s| s.conditions).unwrap_or_default();
    ensure!(
        conditions.iter().any(|c| c.type_ == "Approved" && c.status == "True"),
        "{conditions:?}"
    );
    csrs.delete("csr-1", &DeleteParams::default())
        .await?
        .either(|obj| deleted_object(&obj, "csr-1"), |status| success(&status))?;
    ensure!(csrs.get_opt("csr-1").await?.is_none());

    // Deleting the namespace: answered with the object, Terminating, then gone.
    namespaces.delete("leases", &DeleteParams::default()).await?.either(
        |ns| {
            ensure!(ns.metadata.deletion_timestamp.is_some(), "{ns:?}");
            ensure!(
                ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating"),
                "{ns:?}"
            );
            Ok(())
        },
        |status| bail!("a namespace with finalizers must be returned, not a Status: {status:?}"),
    )?;
    let deadline = tokio::time::Instant::now() + WAIT;
    while namespaces.get_opt("leases").await?.is_some() {
        ensure!(tokio::time::Instant::now() < deadline, "namespace never went away");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    ensure!(leases.get_opt("agent").await?.is_none(), "the namespace's lease survived");
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_namespaces_leases_csrs() -> anyhow::Result<()> {
    on_every_backend(no_tuning, typed_namespaces_leases_csrs_case).await
}

// ---------------------------------------------------------------------------------------------
// DynamicObject on OCM kinds

async fn dynamic_ocm_case(hub: TestHub) -> anyhow::Result<()> {
    let client = hub.kube().await?;
    let discovery = Discovery::new(client.clone())
        .filter(&[CLUSTER, WORK])
        .run_aggregated()
        .await
        .context("discovery")?;
    let (mc_ar, _) = discovery
        .resolve_gvk(&gvk(CLUSTER, "v1", "ManagedCluster"))
        .context("ManagedCluster not discovered")?;
    let clusters: Api<DynamicObject> = Api::all_with(client.clone(), &mc_ar);
    let pp = PostParams::default();

    let mc =
        DynamicObject::new("spoke-1", &mc_ar).data(json!({"spec": {"hubAcceptsClient": true}}));
    let created = clusters.create(&pp, &mc).await.context("create ManagedCluster")?;
    ensure!(created.metadata.generation == Some(1), "generation {:?}", created.metadata.generation);
    ensure!(
        created.data["spec"]["leaseDurationSeconds"] == json!(60),
        "the CRD default leaseDurationSeconds=60 is missing: {}",
        created.data
    );
    let status = expect_error(clusters.create(&pp, &mc).await, 409, "AlreadyExists")?;
    ensure!(status.is_already_exists());

    // Status through /status: set, generation unchanged, spec untouched.
    let status_patch = json!({
        "spec": {"hubAcceptsClient": false},
        "status": {"version": {"kubernetes": "v1.31.0"}}
    });
    let patched = clusters
        .patch_status("spoke-1", &PatchParams::default(), &Patch::Merge(&status_patch))
        .await
        .context("patch_status")?;
    ensure!(
        patched.data["status"]["version"]["kubernetes"] == json!("v1.31.0"),
        "{}",
        patched.data
    );
    ensure!(
        patched.metadata.generation == Some(1),
        "status write bumped generation: {:?}",
        patched.metadata.generation
    );
    ensure!(patched.data["spec"]["hubAcceptsClient"] == json!(true), "status write changed spec");
    ensure!(patched.resource_version() != created.resource_version());
    let fetched = clusters.get_status("spoke-1").await?;
    ensure!(fetched.data["status"]["version"]["kubernetes"] == json!("v1.31.0"));

    // The main resource: spec change bumps generation, status is kept.
    let spec_patch = json!({
        "spec": {"leaseDurationSeconds": 30},
        "status": {"version": {"kubernetes": "bogus"}}
    });
    let patched =
        clusters.patch("spoke-1", &PatchParams::default(), &Patch::Merge(&spec_patch)).await?;
    ensure!(patched.metadata.generation == Some(2), "generation {:?}", patched.metadata.generation);
    ensure!(patched.data["spec"]["leaseDurationSeconds"] == json!(30));
    ensure!(
        patched.data["status"]["version"]["kubernetes"] == json!("v1.31.0"),
        "{}",
        patched.data
    );

    // Strategic merge patch works on OCM kinds too (kube-apiserver refuses it for custom
    // resources): the list merge keys come from the CRD schema.
    let patched = clusters
        .patch(
            "spoke-1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"hubAcceptsClient": false}})),
        )
        .await?;
    ensure!(patched.data["spec"]["hubAcceptsClient"] == json!(false), "{}", patched.data);

    // Invalid: a schema violation is 422 with a cause on the field.
    let bad =
        DynamicObject::new("spoke-bad", &mc_ar).data(json!({"spec": {"hubAcceptsClient": "yes"}}));
    let status = expect_error(clusters.create(&pp, &bad).await, 422, "Invalid")?;
    let causes = status.details.as_ref().map(|d| d.causes.clone()).unwrap_or_default();
    ensure!(
        causes.iter().any(|c| c.field == "spec.hubAcceptsClient"),
        "no cause on spec.hubAcceptsClient: {status:?}"
    );
    let bad_name = DynamicObject::new("Not_A_Name", &mc_ar).data(json!({"spec": {}}));
    let status = expect_error(clusters.create(&pp, &bad_name).await, 422, "Invalid")?;
    let causes = status.details.as_ref().map(|d| d.causes.clone()).unwrap_or_default();
    ensure!(causes.iter().any(|c| c.field == "metadata.name"), "{status:?}");
    ensure!(clusters.get_opt("spoke-bad").await?.is_none());

    // A Placement in a namespace.
    create_namespace(&client, "placements").await?;
    let (pl_ar, pl_caps) = discovery
        .get(CLUSTER)
        .context("cluster group")?
        .versioned_resources("v1beta1")
        .into_iter()
        .find(|(ar, _)| ar.kind == "Placement")
        .context("no v1beta1 Placement")?;
    ensure!(pl_caps.scope == Scope::Namespaced);
    let placements: Api<DynamicObject> = Api::namespaced_with(client.clone(), "placements", &pl_ar);
    let placement = DynamicObject::new("p1", &pl_ar)
        .data(json!({"spec": {"numberOfClusters": 1, "clusterSets": ["default"]}}));
    let created = placements.create(&pp, &placement).await.context("create Placement")?;
    ensure!(created.namespace().as_deref() == Some("placements"));
    ensure!(created.data["spec"]["numberOfClusters"] == json!(1));
    let everywhere: Api<DynamicObject> = Api::all_with(client.clone(), &pl_ar);
    let all = everywhere.list(&ListParams::default()).await?;
    ensure!(
        all.items
            .iter()
            .any(|p| p.name_any() == "p1" && p.namespace().as_deref() == Some("placements")),
        "cross-namespace list: {:?}",
        names(&all.items)
    );
    let nowhere: Api<DynamicObject> = Api::namespaced_with(client.clone(), "no-such-ns", &pl_ar);
    expect_error(nowhere.create(&pp, &placement).await, 404, "NotFound")
        .context("create in a missing namespace")?;

    // A ManifestWork in the cluster's namespace.
    create_namespace(&client, "spoke-1").await?;
    let (mw_ar, _) =
        discovery.resolve_gvk(&gvk(WORK, "v1", "ManifestWork")).context("ManifestWork")?;
    let works: Api<DynamicObject> = Api::namespaced_with(client.clone(), "spoke-1", &mw_ar);
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "shipped", "namespace": "default"}, "data": {"a": "b"}});
    let work = DynamicObject::new("work-1", &mw_ar)
        .data(json!({"spec": {"workload": {"manifests": [manifest]}}}));
    let created = works.create(&pp, &work).await.context("create ManifestWork")?;
    ensure!(
        created.data["spec"]["workload"]["manifests"][0]["data"]["a"] == json!("b"),
        "{}",
        created.data
    );

    // Delete the cluster.
    clusters
        .delete("spoke-1", &DeleteParams::default())
        .await?
        .either(|obj| deleted_object(&obj, "spoke-1"), |status| success(&status))?;
    let deadline = tokio::time::Instant::now() + WAIT;
    while clusters.get_opt("spoke-1").await?.is_some() {
        ensure!(tokio::time::Instant::now() < deadline, "ManagedCluster never went away");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_ocm_objects() -> anyhow::Result<()> {
    on_every_backend(no_tuning, dynamic_ocm_case).await
}

// ---------------------------------------------------------------------------------------------
// Errors

async fn errors_case(hub: TestHub) -> anyhow::Result<()> {
    let client = hub.kube().await?;
    let pp = PostParams::default();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let status = expect_error(cms.get("nope").await, 404, "NotFound")?;
    ensure!(status.is_not_found());
    let details = status.details.clone().context("NotFound without details")?;
    ensure!(details.name == "nope" && details.kind == "configmaps", "{details:?}");
    expect_error(
        cms.patch("nope", &PatchParams::default(), &Patch::Merge(json!({"data": {}}))).await,
        404,
        "NotFound",
    )?;
    expect_error(cms.delete("nope", &DeleteParams::default()).await, 404, "NotFound")?;
    let mut missing = config_map("nope", "1", &[]);
    missing.metadata.resource_version = Some("1".into());
    expect_error(cms.replace("nope", &pp, &missing).await, 404, "NotFound")?;

    // A namespaced create in a namespace that does not exist.
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "does-not-exist");
    expect_error(elsewhere.create(&pp, &config_map("x", "1", &[])).await, 404, "NotFound")?;

    // Cluster-scoped OCM kind.
    let ar =
        ApiResource::from_gvk_with_plural(&gvk(CLUSTER, "v1", "ManagedCluster"), "managedclusters");
    let clusters: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    expect_error(clusters.get("nope").await, 404, "NotFound")?;
    ensure!(clusters.get_opt("nope").await?.is_none());

    // Invalid typed object; bad selectors.
    let status =
        expect_error(cms.create(&pp, &config_map("Bad_Name", "1", &[])).await, 422, "Invalid")?;
    let causes = status.details.as_ref().map(|d| d.causes.clone()).unwrap_or_default();
    ensure!(causes.iter().any(|c| c.field == "metadata.name"), "{status:?}");
    expect_error(cms.list(&ListParams::default().labels("a in (b")).await, 400, "BadRequest")?;
    let status = expect_error(
        cms.list(&ListParams::default().fields("spec.color=red")).await,
        400,
        "BadRequest",
    )?;
    ensure!(status.message.contains("field label not supported: spec.color"), "{status:?}");
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_map_to_kube_errors() -> anyhow::Result<()> {
    on_every_backend(no_tuning, errors_case).await
}

// ---------------------------------------------------------------------------------------------
// kube::runtime::watcher

type EventStream = Pin<Box<dyn Stream<Item = Result<Event<ConfigMap>, watcher::Error>> + Send>>;

fn show(event: &Event<ConfigMap>) -> String {
    let obj = |o: &ConfigMap| format!("{}={}", o.name_any(), data_of(o, "v").unwrap_or_default());
    match event {
        Event::Init => "Init".into(),
        Event::InitApply(o) => format!("InitApply({})", obj(o)),
        Event::InitDone => "InitDone".into(),
        Event::Apply(o) => format!("Apply({})", obj(o)),
        Event::Delete(o) => format!("Delete({})", o.name_any()),
    }
}

async fn next_event(stream: &mut EventStream) -> anyhow::Result<Event<ConfigMap>> {
    match tokio::time::timeout(WAIT, stream.next()).await {
        Err(_) => bail!("no watcher event within {WAIT:?}"),
        Ok(None) => bail!("the watcher stream ended"),
        Ok(Some(Err(e))) => bail!("watcher error: {e:?}"),
        Ok(Some(Ok(event))) => Ok(event),
    }
}

/// Reads the initial phase: `Init`, one `InitApply` per object, `InitDone`.
async fn initial_phase(stream: &mut EventStream) -> anyhow::Result<BTreeSet<String>> {
    let first = next_event(stream).await?;
    ensure!(matches!(first, Event::Init), "first event {}", show(&first));
    let mut applied = BTreeSet::new();
    loop {
        let event = next_event(stream).await?;
        match event {
            Event::InitApply(_) => {
                ensure!(applied.insert(show(&event)), "duplicate {}", show(&event));
            }
            Event::InitDone => return Ok(applied),
            other => bail!("unexpected {} during the initial phase", show(&other)),
        }
    }
}

/// Initial state, then live create/update/delete, then silence across several bookmarks (and
/// server-side watch ends, with a short timeout), then one more change.
async fn watcher_flow(
    hub: TestHub,
    config: watcher::Config,
    quiet: Duration,
) -> anyhow::Result<()> {
    let client = hub.kube().await?;
    create_namespace(&client, "watched").await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "watched");
    let pp = PostParams::default();
    api.create(&pp, &config_map("a", "1", &[])).await?;
    api.create(&pp, &config_map("b", "1", &[])).await?;
    // Noise elsewhere must not reach a namespaced watcher.
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    other.create(&pp, &config_map("elsewhere", "1", &[])).await?;
    // A streaming list starts at resourceVersion 0: whatever the watch cache holds, with no
    // wait (Kubernetes semantics). A consistent list first makes the cache hold the creates.
    api.list(&ListParams::default()).await?;

    let mut stream: EventStream = watcher(api.clone(), config).boxed();
    let initial = initial_phase(&mut stream).await?;
    let want: BTreeSet<String> =
        ["InitApply(a=1)", "InitApply(b=1)"].into_iter().map(String::from).collect();
    ensure!(initial == want, "initial phase {initial:?}, want {want:?}");

    api.create(&pp, &config_map("c", "1", &[])).await?;
    api.patch("a", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "2"}}))).await?;
    other.delete("elsewhere", &DeleteParams::default()).await?;
    api.delete("b", &DeleteParams::default()).await?;
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(show(&next_event(&mut stream).await?));
    }
    ensure!(got == ["Apply(c=1)", "Apply(a=2)", "Delete(b)"], "live events {got:?}");

    // Bookmarks (and re-watches) keep flowing; none of them may surface as an event or error.
    match tokio::time::timeout(quiet, stream.next()).await {
        Err(_) => {}
        Ok(other) => bail!("nothing was written, yet the watcher produced {other:?}"),
    }
    api.create(&pp, &config_map("d", "1", &[])).await?;
    let event = next_event(&mut stream).await?;
    ensure!(show(&event) == "Apply(d=1)", "after the quiet period: {}", show(&event));
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_list_then_watch() -> anyhow::Result<()> {
    on_every_backend(quick_bookmarks, |hub| {
        watcher_flow(hub, watcher::Config::default(), Duration::from_millis(1500))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_streaming_lists() -> anyhow::Result<()> {
    on_every_backend(quick_bookmarks, |hub| {
        watcher_flow(hub, watcher::Config::default().streaming_lists(), Duration::from_millis(1500))
    })
    .await
}

/// With `timeoutSeconds=2` the server ends every watch after 2 s; kube re-watches from the
/// last bookmark each time and must neither relist nor miss anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_survives_watch_timeouts() -> anyhow::Result<()> {
    on_every_backend(quick_bookmarks, |hub| {
        watcher_flow(hub, watcher::Config::default().timeout(2), Duration::from_secs(5))
    })
    .await
}

/// A watcher that stops reading while 150 large ConfigMaps are written, updated and deleted:
/// the hub ends its watch (buffer full), its resourceVersion falls out of the 5-event history,
/// the re-watch gets a 410 ERROR event, kube relists, and the watcher converges anyway.
async fn lagging_watcher_case(hub: TestHub) -> anyhow::Result<()> {
    let client = hub.kube().await?;
    create_namespace(&client, "lag").await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "lag");
    let pp = PostParams::default();
    api.create(&pp, &config_map("seed", "1", &[])).await?;
    let mut stream: EventStream = watcher(api.clone(), watcher::Config::default()).boxed();
    let initial = initial_phase(&mut stream).await?;
    ensure!(initial == BTreeSet::from(["InitApply(seed=1)".to_owned()]), "{initial:?}");

    // Not reading `stream` from here on.
    let big = "x".repeat(64 * 1024);
    let mut expected: BTreeMap<String, String> = BTreeMap::from([("seed".into(), "1".into())]);
    for i in 0..150 {
        let name = format!("big-{i:03}");
        let mut cm = config_map(&name, "1", &[]);
        cm.data.as_mut().context("data")?.insert("payload".into(), big.clone());
        api.create(&pp, &cm).await.with_context(|| format!("create {name}"))?;
        expected.insert(name, "1".into());
    }
    for i in (0..150).step_by(5) {
        let name = format!("big-{i:03}");
        api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "2"}})))
            .await?;
        expected.insert(name, "2".into());
    }
    for i in (1..150).step_by(3) {
        let name = format!("big-{i:03}");
        api.delete(&name, &DeleteParams::default()).await?;
        expected.remove(&name);
    }
    api.delete("seed", &DeleteParams::default()).await?;
    expected.remove("seed");

    // A raw watch from a long-gone resourceVersion: one ERROR event, 410 Expired.
    let mut raw = api.watch(&WatchParams::default(), "1").await?.boxed();
    match tokio::time::timeout(WAIT, raw.next()).await.context("no event on an expired watch")? {
        Some(Ok(WatchEvent::Error(status))) => {
            ensure!(status.code == 410 && status.reason == "Expired", "{status:?}")
        }
        other => bail!("a watch from resourceVersion 1 must get a 410 ERROR event, got {other:?}"),
    }
    drop(raw);

    // Resume reading, applying the events as a store would, until it matches.
    let mut store: BTreeMap<String, String> = BTreeMap::from([("seed".into(), "1".into())]);
    let mut buffer: Option<BTreeMap<String, String>> = None;
    let mut relists = 0;
    let mut errors = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    while store != expected || buffer.is_some() {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let item = match tokio::time::timeout(left, stream.next()).await {
            Ok(Some(item)) => item,
            Ok(None) => bail!("the watcher stream ended"),
            Err(_) => bail!(
                "the watcher did not converge within {WAIT:?}: {} objects, want {}; relists {relists}, errors {errors:?}",
                store.len(),
                expected.len()
            ),
        };
        let event = match item {
            Ok(event) => event,
            Err(e) => {
                errors.push(format!("{e}"));
                continue;
            }
        };
        let v = |o: &ConfigMap| data_of(o, "v").unwrap_or_default();
        match event {
            Event::Init => {
                relists += 1;
                buffer = Some(BTreeMap::new());
            }
            Event::InitApply(o) => {
                buffer.as_mut().context("InitApply outside Init")?.insert(o.name_any(), v(&o));
            }
            Event::InitDone => store = buffer.take().context("InitDone without Init")?,
            Event::Apply(o) => {
                store.insert(o.name_any(), v(&o));
            }
            Event::Delete(o) => {
                store.remove(&o.name_any());
            }
        }
    }
    ensure!(
        relists >= 1,
        "the watcher never relisted, so its watch never expired (the test did not test anything)"
    );
    let server = api.list(&ListParams::default()).await?;
    let server: BTreeMap<String, String> =
        server.items.iter().map(|o| (o.name_any(), data_of(o, "v").unwrap_or_default())).collect();
    ensure!(server == expected, "the server's list disagrees with the writes");
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_recovers_after_expired_watch() -> anyhow::Result<()> {
    on_every_backend(tiny_history, lagging_watcher_case).await
}

/// A reflector store follows a burst of 200 concurrent creates, updates and deletes and ends
/// equal (names and resourceVersions) to the server's list.
async fn reflector_case(hub: TestHub) -> anyhow::Result<()> {
    let client = hub.kube().await?;
    create_namespace(&client, "reflected").await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "reflected");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .default_backoff()
        .touched_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(WAIT, reader.wait_until_ready())
        .await
        .context("the reflector never became ready")??;

    let mut writers = Vec::new();
    for w in 0..4 {
        let api = api.clone();
        writers.push(tokio::spawn(async move {
            let mut live: BTreeMap<String, u32> = BTreeMap::new();
            for op in 0..50u32 {
                let name = format!("w{w}-{}", op % 12);
                match live.get(&name).copied() {
                    None => {
                        api.create(&PostParams::default(), &config_map(&name, "0", &[])).await?;
                        live.insert(name, 0);
                    }
                    Some(_) if op % 4 == 3 => {
                        api.delete(&name, &DeleteParams::default()).await?;
                        live.remove(&name);
                    }
                    Some(n) => {
                        let patch = json!({"data": {"v": (n + 1).to_string()}});
                        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
                        live.insert(name, n + 1);
                    }
                }
            }
            anyhow::Ok(live)
        }));
    }
    let mut expected = BTreeMap::new();
    for w in writers {
        for (name, n) in w.await?? {
            expected.insert(name, n.to_string());
        }
    }
    let server = api.list(&ListParams::default()).await?;
    let server_state: BTreeMap<String, (String, String)> = server
        .items
        .iter()
        .map(|o| {
            (
                o.name_any(),
                (o.resource_version().unwrap_or_default(), data_of(o, "v").unwrap_or_default()),
            )
        })
        .collect();
    let server_values: BTreeMap<String, String> =
        server_state.iter().map(|(k, (_, v))| (k.clone(), v.clone())).collect();
    ensure!(server_values == expected, "the server's list disagrees with the writes");

    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let store: BTreeMap<String, (String, String)> = reader
            .state()
            .iter()
            .map(|o| {
                (
                    o.name_any(),
                    (o.resource_version().unwrap_or_default(), data_of(o, "v").unwrap_or_default()),
                )
            })
            .collect();
        if store == server_state {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let missing: Vec<_> = server_state.keys().filter(|k| !store.contains_key(*k)).collect();
            let extra: Vec<_> = store.keys().filter(|k| !server_state.contains_key(*k)).collect();
            bail!(
                "the reflector did not converge within {WAIT:?}: missing {missing:?}, extra {extra:?}, {} differ",
                store.iter().filter(|(k, v)| server_state.get(*k).is_some_and(|s| s != *v)).count()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    task.abort();
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_converges_after_burst() -> anyhow::Result<()> {
    on_every_backend(quick_bookmarks, reflector_case).await
}

// ---------------------------------------------------------------------------------------------
// Api::watch (raw WatchEvent stream)

fn rv_of(obj: &ConfigMap) -> anyhow::Result<u64> {
    obj.resource_version().context("no resourceVersion")?.parse().context("resourceVersion")
}

async fn raw_watch_case(hub: TestHub) -> anyhow::Result<()> {
    let client = hub.kube().await?;
    create_namespace(&client, "raw").await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "raw");
    let pp = PostParams::default();
    api.create(&pp, &config_map("before", "1", &[])).await?;
    let list = api.list(&ListParams::default()).await?;
    let from = list.metadata.resource_version.clone().context("list without resourceVersion")?;

    let mut stream = api.watch(&WatchParams::default().timeout(60), &from).await?.boxed();
    api.create(&pp, &config_map("y", "1", &[])).await?;
    api.patch("y", &PatchParams::default(), &Patch::Merge(json!({"data": {"v": "2"}}))).await?;
    api.delete("y", &DeleteParams::default()).await?;

    let mut got: Vec<(String, u64)> = Vec::new();
    let mut bookmark_after_delete = false;
    let deadline = tokio::time::Instant::now() + WAIT;
    while !bookmark_after_delete {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let event = match tokio::time::timeout(left, stream.next()).await {
            Ok(Some(event)) => event.context("watch event")?,
            Ok(None) => bail!("the watch ended early; got {got:?}"),
            Err(_) => bail!("no bookmark after the delete within {WAIT:?}; got {got:?}"),
        };
        match event {
            WatchEvent::Added(o) => got.push((
                format!("Added({}={})", o.name_any(), data_of(&o, "v").unwrap_or_default()),
                rv_of(&o)?,
            )),
            WatchEvent::Modified(o) => got.push((
                format!("Modified({}={})", o.name_any(), data_of(&o, "v").unwrap_or_default()),
                rv_of(&o)?,
            )),
            WatchEvent::Deleted(o) => got.push((format!("Deleted({})", o.name_any()), rv_of(&o)?)),
            WatchEvent::Bookmark(b) => {
                let rv: u64 =
                    b.metadata.resource_version.parse().context("bookmark resourceVersion")?;
                if let Some((_, last)) = got.last() {
                    ensure!(rv >= *last, "bookmark {rv} is behind an event at {last}");
                }
                bookmark_after_delete = got.len() == 3;
            }
            WatchEvent::Error(status) => bail!("unexpected ERROR event: {status:?}"),
        }
    }
    let kinds: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
    ensure!(kinds == ["Added(y=1)", "Modified(y=2)", "Deleted(y)"], "events {kinds:?}");
    ensure!(got.windows(2).all(|w| w[0].1 < w[1].1), "resourceVersions not increasing: {got:?}");
    ensure!(got[0].1 > from.parse::<u64>()?, "an event at or before the start resourceVersion");
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_watch_events_and_bookmarks() -> anyhow::Result<()> {
    on_every_backend(quick_bookmarks, raw_watch_case).await
}

// ---------------------------------------------------------------------------------------------
// Metadata-only API (PartialObjectMetadata)

/// kube's metadata API (`Accept: ...;as=PartialObjectMetadataList|PartialObjectMetadata`):
/// list, get and `metadata_watcher` see names, labels and resourceVersions but no data.
async fn metadata_case(hub: TestHub) -> anyhow::Result<()> {
    let client = hub.kube().await?;
    create_namespace(&client, "meta").await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "meta");
    let pp = PostParams::default();
    for (name, tier) in [("a", "front"), ("b", "back")] {
        api.create(&pp, &config_map(name, "1", &[("tier", tier)])).await?;
    }
    let list = api.list_metadata(&ListParams::default().labels("tier=front")).await?;
    let names: Vec<String> = list.items.iter().map(|o| o.name_any()).collect();
    ensure!(names == ["a"], "{names:?}");
    ensure!(
        list.metadata.resource_version.is_some(),
        "a metadata list carries its resourceVersion"
    );
    let types = list.items[0].types.clone().context("PartialObjectMetadata without types")?;
    ensure!(
        types.kind == "PartialObjectMetadata" && types.api_version == "meta.k8s.io/v1",
        "{types:?}"
    );
    let one = api.get_metadata("b").await?;
    ensure!(one.labels().get("tier").map(String::as_str) == Some("back"), "{one:?}");

    // `Api<PartialObjectMeta<K>>` makes metadata-only requests (kube's metadata watcher).
    let meta_api: Api<kube::core::PartialObjectMeta<ConfigMap>> =
        Api::namespaced(client.clone(), "meta");
    let mut stream = watcher(meta_api, watcher::Config::default()).boxed();
    let mut initial = BTreeSet::new();
    loop {
        let ev = tokio::time::timeout(WAIT, stream.next()).await.context("no metadata event")?;
        match ev.context("the metadata watcher ended")?? {
            Event::Init => {}
            Event::InitApply(o) => {
                initial.insert(o.name_any());
            }
            Event::InitDone => break,
            other => bail!("unexpected {other:?} in the initial phase"),
        }
    }
    ensure!(initial == BTreeSet::from(["a".to_owned(), "b".to_owned()]), "{initial:?}");
    api.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "edge"}}})),
    )
    .await?;
    let ev = tokio::time::timeout(WAIT, stream.next()).await.context("no live metadata event")?;
    match ev.context("the metadata watcher ended")?? {
        Event::Apply(o) => {
            ensure!(
                o.name_any() == "b" && o.labels().get("tier").map(String::as_str) == Some("edge")
            );
            // The event itself was metadata only, not a whole object kube trimmed.
            let kind = o.types.as_ref().map(|t| t.kind.as_str());
            ensure!(kind == Some("PartialObjectMetadata"), "watch event kind {kind:?}")
        }
        other => bail!("expected the relabel, got {other:?}"),
    }
    hub.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_list_get_and_watch() -> anyhow::Result<()> {
    on_every_backend(no_tuning, metadata_case).await
}
