//! The managed-cluster controller, one key per cluster (ocm.md §3.3–§3.7, §2.1): finalizers;
//! on acceptance the cluster namespace, the per-cluster RBAC, the Lease and
//! `HubAcceptedManagedCluster`; on denial the not-accepted RBAC; availability from the Lease
//! (Unknown after 5 × `leaseDurationSeconds` without renewal, requeued for exactly that
//! moment), clock sync, the `unreachable`/`unavailable` taints; and on deletion the cleanup of
//! the cluster's add-ons, works and RBAC before its finalizers go.
//!
//! A Lease renewal that changes nothing the last run concluded (Available, clock in sync) wakes
//! nobody: the run already requeued itself for the moment the grace period would end, and at
//! that moment it reads the newest renewTime. So steady renewals cost the hub the write, not
//! a reconcile each.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ocm_proto::api::cluster::v1::{ManagedCluster, ManagedClusterSpec, Taint};
use ocm_proto::api::cluster::{self as api};
use ocm_proto::api::meta::{
    CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN, Condition, Time, condition, find_condition,
    is_condition_true, set_condition,
};
use serde::Deserialize;
use serde_json::{Value, json};

use super::Ctx;
use crate::auth::cluster_rbac::{self, CLUSTER_NAME_LABEL};
use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::store::cache::CachedObject;

use ocm_proto::api::cluster::LEASE_NAME;
/// `leaseDurationSeconds` when unset or 0.
const DEFAULT_LEASE_SECONDS: i64 = 60;
/// How often deletion cleanup looks again while resources remain.
const CLEANUP_EVERY: Duration = Duration::from_secs(5);

struct Clusters {
    ctx: Arc<Ctx>,
    /// The Lease renewTime each cluster's clock was last judged on.
    clock_seen: Mutex<HashMap<String, String>>,
    /// What the last run concluded from each accepted cluster's Lease.
    judged: Mutex<HashMap<String, Judged>>,
}

/// What a run concluded from a cluster's Lease: a renewal within `grace` of now changes
/// nothing while the cluster is Available and its clock in sync (or not checked).
#[derive(Debug, Clone, Copy)]
struct Judged {
    quiet: bool,
    grace: time::Duration,
}

/// What a run read from an accepted cluster's Lease.
#[derive(Debug, Default)]
struct LeaseReading {
    /// Until the grace period ends, when the cluster is still Available: run again then.
    requeue: Option<Duration>,
    /// The renewTime the clock was judged on, remembered once the status is written.
    clock_judged: Option<String>,
    /// The grace period, when availability follows a Lease.
    grace: Option<time::Duration>,
}

fn now() -> Time {
    Time(crate::machinery::clock::timestamp())
}

impl Clusters {
    async fn run(&self, name: String) -> Result<Action, ApiError> {
        let Some(cached) = self.ctx.registry.cached(&self.ctx.kinds.clusters, "", &name) else {
            return self.gone(&name).await;
        };
        let value = cached.value();
        let raw = &*value;
        let mc = ManagedCluster::deserialize(raw)
            .map_err(|e| ApiError::internal(format!("stored ManagedCluster {name}: {e}")))?;
        if object::is_deleting(raw) {
            return self.delete(&name, raw, mc).await;
        }
        let spec = mc.spec.clone().unwrap_or_default();
        let accepted = spec.hub_accepts_client == Some(true);

        // Finalizers first: nothing below may outlive the cluster without them.
        if self.add_finalizers(&name, raw, accepted).await? {
            return Ok(Action::Done); // the write queues the cluster again
        }

        let mut status = mc.status.clone().unwrap_or_default();
        let stamp = now();
        let accept_error =
            self.follow_acceptance(&name, accepted, &mut status.conditions, &stamp).await?;
        let lease = if accepted {
            self.read_lease(&name, raw, &spec, &mut status.conditions, &stamp)
        } else {
            LeaseReading::default()
        };

        let mut rv = object::meta_str(raw, "resourceVersion").to_owned();
        if mc.status.as_ref().map(|s| &s.conditions) != Some(&status.conditions) {
            rv = self.write_conditions(&name, &rv, &status.conditions).await?;
        }
        self.remember(&name, raw, &status.conditions, lease.clock_judged, lease.grace);

        // Taints follow availability.
        let taints = desired_taints(&spec.taints, &status.conditions);
        if taints != spec.taints {
            let body = json!({"metadata": {"resourceVersion": rv}, "spec": {"taints": taints}});
            self.ctx.patch(&self.ctx.kinds.clusters, "", &name, body, None).await?;
        }
        // A failed acceptance is told in the condition, then retried with backoff.
        if let Some(e) = accept_error {
            return Err(e);
        }
        Ok(lease.requeue.map_or(Action::Done, Action::RequeueAfter))
    }

    /// A cluster that no longer exists: what was remembered of it is forgotten, its RBAC
    /// removed, and the shared roles too when it was the last.
    async fn gone(&self, name: &str) -> Result<Action, ApiError> {
        self.clock_seen.lock().unwrap_or_else(PoisonError::into_inner).remove(name);
        self.judged.lock().unwrap_or_else(PoisonError::into_inner).remove(name);
        self.remove_rbac(name).await?;
        self.prune_shared_roles().await?;
        Ok(Action::Done)
    }

    /// Adds the finalizers the cluster lacks (`resource-cleanup`, and `api-resource-cleanup`
    /// once accepted); whether it wrote.
    async fn add_finalizers(
        &self,
        name: &str,
        raw: &Value,
        accepted: bool,
    ) -> Result<bool, ApiError> {
        let mut finalizers: Vec<String> =
            object::finalizers(raw).into_iter().map(str::to_owned).collect();
        let mut wanted = vec![api::FINALIZER_RESOURCE_CLEANUP];
        if accepted {
            wanted.push(api::FINALIZER_API_RESOURCE_CLEANUP);
        }
        let missing: Vec<&str> =
            wanted.into_iter().filter(|f| !finalizers.iter().any(|h| h == f)).collect();
        if missing.is_empty() {
            return Ok(false);
        }
        finalizers.extend(missing.into_iter().map(str::to_owned));
        let body = json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": object::meta_str(raw, "resourceVersion"),
        }});
        self.ctx.patch(&self.ctx.kinds.clusters, "", name, body, None).await?;
        Ok(true)
    }

    /// Sets up an accepted cluster, or takes a denied one's rights away, and says so in
    /// `HubAcceptedManagedCluster`. A failed set-up is returned (after the condition tells it)
    /// for the caller to return once the status is written; a failed denial is an error at once.
    async fn follow_acceptance(
        &self,
        name: &str,
        accepted: bool,
        conditions: &mut Vec<Condition>,
        stamp: &Time,
    ) -> Result<Option<ApiError>, ApiError> {
        if accepted {
            let applied = self.accept(name).await;
            let c = match &applied {
                Ok(()) => condition(
                    api::v1::CONDITION_HUB_ACCEPTED,
                    CONDITION_TRUE,
                    api::v1::REASON_HUB_CLUSTER_ADMIN_ACCEPTED,
                    "Accepted by hub cluster admin",
                ),
                Err(e) => condition(
                    api::v1::CONDITION_HUB_ACCEPTED,
                    CONDITION_FALSE,
                    api::v1::REASON_ERROR,
                    format!("Failed to apply the cluster's RBAC: {}", e.message),
                ),
            };
            set_condition(conditions, c, stamp.clone());
            return Ok(applied.err());
        }
        if find_condition(conditions, api::v1::CONDITION_HUB_ACCEPTED).is_some() {
            self.deny(name).await?;
            set_condition(
                conditions,
                condition(
                    api::v1::CONDITION_HUB_ACCEPTED,
                    CONDITION_FALSE,
                    api::v1::REASON_HUB_CLUSTER_ADMIN_DENIED,
                    "Denied by hub cluster admin",
                ),
                stamp.clone(),
            );
        }
        Ok(None)
    }

    /// Availability and clock of an accepted cluster, from its Lease: `Available` goes Unknown
    /// once the grace period (5 × `leaseDurationSeconds`) passes without a renewal, and
    /// `ManagedClusterConditionClockSynced` is judged once per renewTime.
    fn read_lease(
        &self,
        name: &str,
        raw: &Value,
        spec: &ManagedClusterSpec,
        conditions: &mut Vec<Condition>,
        stamp: &Time,
    ) -> LeaseReading {
        let mut out = LeaseReading::default();
        let lease = self.ctx.registry.cached(&self.ctx.kinds.leases, name, LEASE_NAME);
        let Some(renew_str) = lease.as_ref().and_then(|l| {
            l.value().pointer("/spec/renewTime").and_then(Value::as_str).map(str::to_owned)
        }) else {
            return out;
        };
        let seconds = match spec.lease_duration_seconds {
            Some(s) if s > 0 => i64::from(s),
            _ => DEFAULT_LEASE_SECONDS,
        };
        let grace = time::Duration::seconds(5 * seconds);
        out.grace = Some(grace);
        let now_t = crate::machinery::clock::now();
        // A renewTime so far ahead that adding the grace overflows never expires.
        let Some((renewed, expiry)) =
            object::parse_rfc3339(&renew_str).and_then(|r| r.checked_add(grace).map(|e| (r, e)))
        else {
            return out;
        };
        if now_t >= expiry {
            set_condition(
                conditions,
                condition(
                    api::v1::CONDITION_AVAILABLE,
                    CONDITION_UNKNOWN,
                    api::v1::REASON_LEASE_UPDATE_STOPPED,
                    "Registration agent stopped updating its lease.",
                ),
                stamp.clone(),
            );
        } else {
            let left = (expiry - now_t).unsigned_abs();
            out.requeue = Some(left + Duration::from_millis(10));
        }
        let judged = self
            .clock_seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .is_none_or(|seen| *seen != renew_str);
        if judged {
            out.clock_judged = Some(renew_str);
        }
        if judged && !skips_clock_check(raw) {
            set_condition(conditions, clock_synced((now_t - renewed).abs(), grace), stamp.clone());
        }
        out
    }

    /// Writes the status conditions at `rv`; the resourceVersion written.
    async fn write_conditions(
        &self,
        name: &str,
        rv: &str,
        conditions: &[Condition],
    ) -> Result<String, ApiError> {
        let body = json!({
            "metadata": {"resourceVersion": rv},
            "status": {"conditions": conditions},
        });
        let written =
            self.ctx.patch(&self.ctx.kinds.clusters, "", name, body, Some("status")).await?;
        Ok(object::meta_str(&written.object, "resourceVersion").to_owned())
    }

    /// Once the status is written: the renewTime the clock was judged on, and what the run
    /// concluded from the Lease (which decides whether the next renewal wakes the cluster).
    fn remember(
        &self,
        name: &str,
        raw: &Value,
        conditions: &[Condition],
        clock_judged: Option<String>,
        grace: Option<time::Duration>,
    ) {
        if let Some(renew) = clock_judged {
            self.clock_seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(name.to_owned(), renew);
        }
        let judged = grace.map(|grace| Judged {
            quiet: is_condition_true(conditions, api::v1::CONDITION_AVAILABLE)
                && (skips_clock_check(raw)
                    || is_condition_true(conditions, api::v1::CONDITION_CLOCK_SYNCED)),
            grace,
        });
        let mut all = self.judged.lock().unwrap_or_else(PoisonError::into_inner);
        match judged {
            Some(j) => all.insert(name.to_owned(), j),
            None => all.remove(name),
        };
    }

    /// What acceptance sets up: namespace, RBAC (shared and per cluster), the Lease.
    async fn accept(&self, name: &str) -> Result<(), ApiError> {
        let ctx = &self.ctx;
        ctx.ensure(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {CLUSTER_NAME_LABEL: name}},
        }))
        .await?;
        for obj in cluster_rbac::shared_roles()
            .into_iter()
            .chain(cluster_rbac::cluster_objects(name, true))
        {
            ctx.ensure(obj).await?;
        }
        if ctx.registry.cached(&ctx.kinds.leases, name, LEASE_NAME).is_none() {
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": LEASE_NAME, "namespace": name,
                             "labels": {CLUSTER_NAME_LABEL: name}},
                "spec": {"holderIdentity": LEASE_NAME,
                         "renewTime": object::rfc3339_micros(crate::machinery::clock::now())},
            });
            ctx.registry.create_if_absent(&ctx.kinds.leases, lease, &Ctx::opts()).await?;
        }
        Ok(())
    }

    /// A denied cluster keeps only the right to read itself, and (as in OCM) its work agent's
    /// RoleBinding while works remain, so it can still release their finalizers.
    async fn deny(&self, name: &str) -> Result<(), ApiError> {
        for obj in cluster_rbac::cluster_objects(name, false) {
            self.ctx.ensure(obj).await?;
        }
        let rb = &self.ctx.kinds.role_bindings;
        let prefix = format!("open-cluster-management:managedcluster:{name}");
        self.ctx.remove(rb, name, &format!("{prefix}:registration")).await?;
        if self.ctx.registry.cached_list(&self.ctx.kinds.works, name).is_empty() {
            self.ctx.remove(rb, name, &format!("{prefix}:work")).await?;
        }
        Ok(())
    }

    async fn remove_role_bindings(&self, name: &str) -> Result<(), ApiError> {
        let rb = &self.ctx.kinds.role_bindings;
        for suffix in ["registration", "work"] {
            let rb_name = format!("open-cluster-management:managedcluster:{name}:{suffix}");
            self.ctx.remove(rb, name, &rb_name).await?;
        }
        Ok(())
    }

    /// Removes every per-cluster RBAC object.
    async fn remove_rbac(&self, name: &str) -> Result<(), ApiError> {
        let kinds = &self.ctx.kinds;
        let role = format!("open-cluster-management:managedcluster:{name}");
        self.ctx.remove(&kinds.cluster_role_bindings, "", &role).await?;
        self.ctx.remove(&kinds.cluster_roles, "", &role).await?;
        self.remove_role_bindings(name).await
    }

    /// The shared roles exist while at least one cluster does.
    async fn prune_shared_roles(&self) -> Result<(), ApiError> {
        let kinds = &self.ctx.kinds;
        if !self.ctx.registry.cached_list(&kinds.clusters, "").is_empty() {
            return Ok(());
        }
        for role in [cluster_rbac::REGISTRATION_ROLE, cluster_rbac::WORK_ROLE] {
            self.ctx.remove(&kinds.cluster_roles, "", role).await?;
        }
        Ok(())
    }

    /// A deleted cluster: its add-ons, then its works, go first (the `resource-cleanup`
    /// finalizer, with the `Deleting` condition saying what remains); then its RBAC (the
    /// `api-resource-cleanup` finalizer). The namespace stays, as in OCM.
    async fn delete(
        &self,
        name: &str,
        raw: &Value,
        mc: ManagedCluster,
    ) -> Result<Action, ApiError> {
        let ctx = &self.ctx;
        let kinds = &ctx.kinds;
        let finalizers: Vec<&str> = object::finalizers(raw);
        let rv = object::meta_str(raw, "resourceVersion").to_owned();
        let mut status = mc.status.unwrap_or_default();
        if finalizers.contains(&api::FINALIZER_RESOURCE_CLEANUP) {
            for (rt, what) in
                [(&kinds.addons, "managedclusteraddons"), (&kinds.works, "manifestworks")]
            {
                let left = ctx.registry.cached_list(rt, name);
                if left.is_empty() {
                    continue;
                }
                for item in &left {
                    if !item.deleting {
                        ctx.remove(rt, name, item.namespace_name().1).await?;
                    }
                }
                let c = condition(
                    api::v1::CONDITION_DELETING,
                    CONDITION_FALSE,
                    api::v1::REASON_RESOURCE_REMAINING,
                    format!("The resource {what} is remaining: {} left", left.len()),
                );
                if set_condition(&mut status.conditions, c, now()) {
                    let body = json!({"metadata": {"resourceVersion": rv},
                                      "status": {"conditions": status.conditions}});
                    ctx.patch(&kinds.clusters, "", name, body, Some("status")).await?;
                }
                return Ok(Action::RequeueAfter(CLEANUP_EVERY));
            }
            let c = condition(
                api::v1::CONDITION_DELETING,
                CONDITION_TRUE,
                api::v1::REASON_NO_RESOURCE,
                "All resources are cleaned up",
            );
            let mut rv = rv.clone();
            if set_condition(&mut status.conditions, c, now()) {
                let body = json!({"metadata": {"resourceVersion": rv},
                                  "status": {"conditions": status.conditions}});
                let w = ctx.patch(&kinds.clusters, "", name, body, Some("status")).await?;
                rv = object::meta_str(&w.object, "resourceVersion").to_owned();
            }
            return self.drop_finalizer(name, raw, &rv, api::FINALIZER_RESOURCE_CLEANUP).await;
        }
        if finalizers.contains(&api::FINALIZER_API_RESOURCE_CLEANUP) {
            self.remove_rbac(name).await?;
            return self.drop_finalizer(name, raw, &rv, api::FINALIZER_API_RESOURCE_CLEANUP).await;
        }
        Ok(Action::Done)
    }

    async fn drop_finalizer(
        &self,
        name: &str,
        raw: &Value,
        rv: &str,
        finalizer: &str,
    ) -> Result<Action, ApiError> {
        // At `rv`: this pass may have written the cluster since `raw` was read.
        let mut body = object::finalizer_patch(raw, finalizer, false);
        body["metadata"]["resourceVersion"] = json!(rv);
        self.ctx.patch(&self.ctx.kinds.clusters, "", name, body, None).await?;
        Ok(Action::Done)
    }
}

/// `ManagedClusterConditionClockSynced` for a renewTime `skew` away from the hub's clock: in sync
/// within the grace period.
fn clock_synced(skew: time::Duration, grace: time::Duration) -> Condition {
    if skew < grace {
        condition(
            api::v1::CONDITION_CLOCK_SYNCED,
            CONDITION_TRUE,
            api::v1::REASON_CLOCK_SYNCED,
            "The clock of the managed cluster is synced with the hub.",
        )
    } else {
        condition(
            api::v1::CONDITION_CLOCK_SYNCED,
            CONDITION_FALSE,
            api::v1::REASON_CLOCK_OUT_OF_SYNC,
            "The clocks of hub and managed cluster are out of sync. This may cause problems in certificate rotation and availability checks.",
        )
    }
}

fn skips_clock_check(raw: &Value) -> bool {
    raw.pointer("/metadata/annotations")
        .and_then(|a| a.get(api::ANNOTATION_SKIP_CLOCK_SYNC_CHECK))
        .and_then(Value::as_str)
        == Some("true")
}

/// The taints with the automatic ones brought in line with the Available condition: missing
/// or Unknown → `unreachable`; False → `unavailable`; True → neither. Other taints are kept.
fn desired_taints(current: &[Taint], conditions: &[Condition]) -> Vec<Taint> {
    let status =
        find_condition(conditions, api::v1::CONDITION_AVAILABLE).map(|c| c.status.as_str());
    let want = match status {
        Some(CONDITION_TRUE) => None,
        Some(CONDITION_FALSE) => Some(api::TAINT_UNAVAILABLE),
        _ => Some(api::TAINT_UNREACHABLE),
    };
    let mut out: Vec<Taint> = current
        .iter()
        .filter(|t| {
            let automatic = t.key == api::TAINT_UNREACHABLE || t.key == api::TAINT_UNAVAILABLE;
            !automatic
                || Some(t.key.as_str()) == want && t.effect == api::v1::TAINT_EFFECT_NO_SELECT
        })
        .cloned()
        .collect();
    if let Some(key) = want {
        if !out.iter().any(|t| t.key == key) {
            out.push(Taint {
                key: key.to_owned(),
                value: None,
                effect: api::v1::TAINT_EFFECT_NO_SELECT.to_owned(),
                time_added: None, // stamped by admission
            });
        }
    }
    out
}

pub(super) fn start(ctx: &Arc<Ctx>, runtime: &Runtime) {
    let k = &ctx.kinds;
    // Works and add-ons matter by their going (denial keeps RBAC while works remain; deletion
    // waits for them to go), not by their status, nor by their coming: a new one changes
    // nothing a run does, and a rollout creating one per cluster would run every cluster.
    let by_namespace = |rt| {
        Watch::new(rt, |o| vec![o.namespace_name().0.to_owned()]).on_presence().not_on_creation()
    };
    let by_label = |rt| {
        Watch::new(rt, |o| {
            o.label(CLUSTER_NAME_LABEL)
                .filter(|c| !c.is_empty())
                .map(|c| vec![c.to_owned()])
                .unwrap_or_default()
        })
    };
    let clusters = Arc::new(Clusters {
        ctx: Arc::clone(ctx),
        clock_seen: Mutex::default(),
        judged: Mutex::default(),
    });
    // A renewal wakes the cluster only if it could change what the last run concluded;
    // creation and deletion of the Lease always do.
    let lease_news = {
        let clusters = Arc::clone(&clusters);
        move |_: &CachedObject, lease: &CachedObject| {
            let (cluster, name) = lease.namespace_name();
            if name != LEASE_NAME {
                return false; // another Lease (an add-on's): no key, no parse
            }
            let judged = clusters
                .judged
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(cluster)
                .copied();
            let Some(j) = judged.filter(|j| j.quiet) else { return true };
            let renew = lease
                .value()
                .pointer("/spec/renewTime")
                .and_then(Value::as_str)
                .and_then(crate::machinery::object::parse_rfc3339);
            renew.is_none_or(|r| (crate::machinery::clock::now() - r).abs() >= j.grace)
        }
    };
    let agent_lease = |o: &CachedObject| match o.namespace_name() {
        (cluster, LEASE_NAME) => vec![cluster.to_owned()],
        _ => vec![],
    };
    let watches = vec![
        super::by_name(&k.clusters),
        Watch::new(&k.leases, agent_lease).on_changes(lease_news),
        by_namespace(&k.works),
        by_namespace(&k.addons),
        by_label(&k.cluster_roles),
        by_label(&k.cluster_role_bindings),
        by_label(&k.role_bindings),
    ];
    // Each run waits on a few durable writes; many at once share a group commit.
    runtime.run("managedcluster", watches, 16, move |key| {
        let clusters = Arc::clone(&clusters);
        async move { clusters.run(key).await }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn available(status: &str) -> Vec<ocm_proto::api::meta::Condition> {
        vec![condition(api::v1::CONDITION_AVAILABLE, status, "R", "m")]
    }

    fn keys(t: &[Taint]) -> Vec<&str> {
        t.iter().map(|t| t.key.as_str()).collect()
    }

    #[test]
    fn taints_follow_availability_and_keep_the_users() {
        let user = Taint {
            key: "example.com/gpu".into(),
            effect: "NoSelect".into(),
            ..Default::default()
        };
        let none = desired_taints(std::slice::from_ref(&user), &[]);
        assert_eq!(keys(&none), ["example.com/gpu", api::TAINT_UNREACHABLE]);
        let down = desired_taints(&none, &available(CONDITION_FALSE));
        assert_eq!(keys(&down), ["example.com/gpu", api::TAINT_UNAVAILABLE]);
        let up = desired_taints(&down, &available(CONDITION_TRUE));
        assert_eq!(keys(&up), ["example.com/gpu"]);
        let unknown = desired_taints(&up, &available(CONDITION_UNKNOWN));
        assert_eq!(keys(&unknown), ["example.com/gpu", api::TAINT_UNREACHABLE]);
        assert_eq!(desired_taints(&unknown, &available(CONDITION_UNKNOWN)), unknown, "stable");
    }
}
