//! `/metrics` at scrape time: the gauges computed from the watch cache and the in-flight
//! limits (objects and watchers per kind, the fleet's clusters, lease ages, works and
//! placements by condition) refreshed, then every family encoded.

use std::collections::BTreeMap;
use std::sync::Arc;

use ocm_proto::api::cluster::v1::CONDITION_AVAILABLE as AVAILABLE;
use ocm_proto::api::cluster::v1beta1::{
    CONDITION_PLACEMENT_MISCONFIGURED as MISCONFIGURED, CONDITION_PLACEMENT_SATISFIED as SATISFIED,
};

use crate::auth::limits::Load;
use crate::machinery::metrics::{Metrics, WORK_CONDITIONS};
use crate::machinery::scheme::ResourceType;
use crate::store::registry::Registry;

/// Everything, in Prometheus' text format, with the scrape-time families computed from the
/// hub's watch cache now (on a blocking thread: a scrape reads every cluster, Lease, work and
/// placement).
pub async fn render(metrics: &Arc<Metrics>, registry: &Registry, load: Load) -> String {
    let (metrics, registry) = (Arc::clone(metrics), registry.clone());
    let job = tokio::task::spawn_blocking(move || {
        let _one = metrics.scrape.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        refresh(&metrics, &registry, load);
        metrics.encode()
    });
    job.await.unwrap_or_default()
}

fn refresh(metrics: &Metrics, registry: &Registry, load: Load) {
    let s = &metrics.scraped;
    for (k, kind) in ["readOnly", "mutating"].into_iter().enumerate() {
        s.inflight.with_label_values(&[kind]).set(load.inflight[k] as i64);
        s.inqueue.with_label_values(&[kind]).set(load.queued[k] as i64);
    }
    let capacity = registry.cache.config().history_per_kind as i64;
    for kind in registry.cache.stats() {
        let Some((group, resource)) = metrics.kind(kind.prefix) else { continue };
        let gr = [group, resource];
        s.objects.with_label_values(&gr).set(kind.objects as i64);
        s.cache_capacity.with_label_values(&gr).set(capacity);
        s.cache_history.with_label_values(&gr).set(kind.history as i64);
        s.cache_watchers.with_label_values(&gr).set(kind.watchers as i64);
        s.cache_rv.with_label_values(&gr).set(i64::try_from(kind.rev).unwrap_or(i64::MAX));
        let terminated = s.terminated.with_label_values(&gr);
        terminated.inc_by(kind.terminated.saturating_sub(terminated.get()));
    }
    let lookup = |g: &str, v: &str, p: &str| registry.scheme.lookup(g, v, p).cloned();
    if let Some(rt) = lookup(ocm_proto::api::cluster::GROUP, "v1", "managedclusters") {
        refresh_clusters(metrics, registry, &rt, lookup("coordination.k8s.io", "v1", "leases"));
    }
    if let Some(rt) = lookup("work.open-cluster-management.io", "v1", "manifestworks") {
        let mut counts: BTreeMap<(&str, &str), i64> = BTreeMap::new();
        for c in WORK_CONDITIONS {
            for status in STATUSES {
                counts.insert((c, status), 0);
            }
        }
        for work in registry.cached_list(&rt, "") {
            let facts = Facts::of(&work);
            for c in WORK_CONDITIONS {
                *counts.entry((c, facts.condition(c))).or_default() += 1;
            }
        }
        s.works.reset();
        for ((c, status), n) in counts {
            s.works.with_label_values(&[c, status]).set(n);
        }
    }
    if let Some(rt) = lookup(ocm_proto::api::cluster::GROUP, "v1beta1", "placements") {
        s.placements.reset();
        s.selected.reset();
        for satisfied in STATUSES {
            for misconfigured in ["true", "false"] {
                s.placements.with_label_values(&[satisfied, misconfigured]).set(0);
            }
        }
        for p in registry.cached_list(&rt, "") {
            let (ns, _) = p.namespace_name();
            let facts = Facts::of(&p);
            let misconfigured = facts.condition(MISCONFIGURED) == "True";
            let labels = [facts.condition(SATISFIED), bool_label(misconfigured)];
            s.placements.with_label_values(&labels).inc();
            s.selected.with_label_values(&[ns]).add(facts.status.selected);
        }
    }
}

fn refresh_clusters(
    metrics: &Metrics,
    registry: &Registry,
    clusters: &ResourceType,
    leases: Option<Arc<ResourceType>>,
) {
    let s = &metrics.scraped;
    s.clusters.reset();
    s.lease_age.reset();
    for accepted in ["true", "false"] {
        for available in STATUSES {
            s.clusters.with_label_values(&[accepted, available]).set(0);
        }
    }
    let now = crate::machinery::clock::now();
    for mc in registry.cached_list(clusters, "") {
        let (_, name) = mc.namespace_name();
        let facts = Facts::of(&mc);
        let accepted = facts.spec.hub_accepts_client;
        s.clusters.with_label_values(&[bool_label(accepted), facts.condition(AVAILABLE)]).inc();
        if !accepted {
            continue;
        }
        let lease = leases
            .as_ref()
            .and_then(|rt| registry.cached(rt, name, ocm_proto::api::cluster::LEASE_NAME));
        let renewed = lease.and_then(|l| {
            let at = Facts::of(&l).spec.renew_time?;
            time::OffsetDateTime::parse(&at, &time::format_description::well_known::Rfc3339).ok()
        });
        if let Some(at) = renewed {
            let age = (now - at).as_seconds_f64().max(0.0);
            s.lease_age.with_label_values(&[name]).set(age);
        }
    }
}

/// A condition's status as a label value: `True`, `False`, or `Unknown` for anything else.
const STATUSES: [&str; 3] = ["True", "False", "Unknown"];

fn bool_label(b: bool) -> &'static str {
    if b { "true" } else { "false" }
}

/// What the fleet gauges read of a ManagedCluster, Lease, ManifestWork or Placement: read from
/// the cached JSON without building the whole object (works carry whole manifests).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct Facts {
    spec: FactsSpec,
    status: FactsStatus,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct FactsSpec {
    hub_accepts_client: bool,
    renew_time: Option<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct FactsStatus {
    conditions: Vec<FactsCondition>,
    #[serde(rename = "numberOfSelectedClusters")]
    selected: i64,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct FactsCondition {
    #[serde(rename = "type")]
    kind: String,
    status: String,
}

impl Facts {
    /// The facts of a cached object (none if its JSON does not have these shapes).
    fn of(obj: &crate::store::cache::CachedObject) -> Facts {
        serde_json::from_slice(&obj.json()).unwrap_or_default()
    }

    /// The status of condition `kind` as a label value.
    fn condition(&self, kind: &str) -> &'static str {
        let status =
            self.status.conditions.iter().find(|c| c.kind == kind).map(|c| c.status.as_str());
        match status {
            Some("True") => "True",
            Some("False") => "False",
            _ => "Unknown",
        }
    }
}
