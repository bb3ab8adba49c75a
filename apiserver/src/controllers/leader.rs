//! Leader election among the replicas of one hub over etcd, as client-go's `leaderelection`
//! does it on a Lease (`kube-system/ocm-hub`): a replica takes the Lease when its holder has not
//! renewed it for `leaseDurationSeconds` as this replica observed (its own monotonic clock, so
//! clocks need not agree), renews it every retry period, and stops leading when it could not
//! renew within the renew deadline, which is shorter than the lease: a leader that loses etcd
//! stops its controllers before any other replica may take over.
//!
//! A replica that is not leading also watches the Lease, so it observes each renewal as it
//! happens rather than at its next poll, and tries again the moment the lease it observed runs
//! out rather than at the next retry tick: it still never counts from a time before it saw the
//! renewal, so it takes over no earlier than client-go's rule allows, and about a retry period
//! sooner than polling alone would.
//!
//! Taking the Lease also rewrites the fence key ([`FENCE_KEY`]) in the same commit, and every
//! controller write goes through a store handle fenced on it ([`ocm_storage::Fence`]): once
//! another replica has taken over, a deposed leader's late write fails instead of landing.

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use ocm_storage::{
    Error as StorageError, EventKind, Fence, KeyValue, Revision, Storage, WatchStream, Write,
};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::controllers::runtime::Leadership;
use crate::machinery::background::Background;
use crate::machinery::clock;
use crate::machinery::object::rfc3339_micros;
use crate::machinery::scheme::Scheme;
use crate::store::registry::Registry;

/// The Lease's namespace and name.
pub const LEASE_NAMESPACE: &str = "kube-system";
/// The Lease's name (also the `name` label of `leader_election_master_status`).
pub const LEASE_NAME: &str = "ocm-hub";
/// The fence key: in the hub's own folder of the registry, which no kind uses (so no API
/// serves it), under `/registry/` so that the watch cache's revision follows its writes (a
/// consistent read waits for the cache to reach the store's revision).
pub const FENCE_KEY: &str = "/registry/ocm-hub/leader";

/// client-go's timings: the lease, the renew deadline and the retry period.
#[derive(Debug, Clone, Copy)]
pub struct Timings {
    pub lease: Duration,
    pub renew_deadline: Duration,
    pub retry: Duration,
}

impl Default for Timings {
    fn default() -> Timings {
        Timings {
            lease: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry: Duration::from_secs(2),
        }
    }
}

impl Timings {
    /// client-go's rules: a renew deadline shorter than the lease, and a retry period shorter
    /// than the renew deadline (a leader gets several tries before it gives up).
    pub fn check(&self) -> Result<(), String> {
        if self.renew_deadline >= self.lease {
            return Err(
                "--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration"
                    .into(),
            );
        }
        if self.retry.is_zero() || self.retry >= self.renew_deadline {
            return Err("--leader-elect-retry-period must be positive and shorter than --leader-elect-renew-deadline".into());
        }
        Ok(())
    }
}

/// A replica's identity in the election: its host name and a random suffix, as client-go
/// components name themselves (`<hostname>_<uuid>`).
pub fn replica_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "ocm-hub".to_owned());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// A replica's running election: the leadership its controllers wait on, the fence their writes
/// go through, and the Lease's release when the hub stops.
#[derive(Debug)]
pub struct Election {
    pub leadership: Leadership,
    pub fence: Fence,
    release: Release,
}

impl Election {
    /// Releases the Lease if this replica still holds it, as client-go's `ReleaseOnCancel`:
    /// the holder is cleared, so the next replica leads at once instead of waiting out the
    /// lease. Called once the controllers have stopped; bounded to 2 s. A replica killed
    /// outright releases nothing: its lease expires.
    pub async fn release(self) {
        let Release { storage, lease_key, identity, fence } = self.release;
        let Some(token) = fence.token() else { return };
        fence.release();
        let release = release(&storage, &lease_key, &identity, token);
        let _ = tokio::time::timeout(Duration::from_secs(2), release).await;
    }
}

/// Starts the election of `identity`; `on_change` is told each change of leadership (for the
/// metric).
pub fn start(
    registry: &Registry,
    background: &Background,
    identity: String,
    timings: Timings,
    on_change: impl Fn(bool) + Send + Sync + 'static,
) -> Election {
    let (leads, leadership) = watch::channel(false);
    let fence = Fence::new(FENCE_KEY);
    let lease_key = lease_key(&registry.scheme);
    let mut elector = Elector {
        storage: registry.storage.clone(),
        lease_key,
        identity,
        timings,
        fence: fence.clone(),
        observed: None,
        watch: None,
    };
    let release = elector.release_handle();
    background.spawn(async move { elector.run(&leads, &on_change).await });
    Election { leadership: Leadership::Elected(leadership), fence, release }
}

/// The Lease's storage key.
pub fn lease_key(scheme: &Scheme) -> String {
    scheme
        .lookup("coordination.k8s.io", "v1", "leases")
        .map(|rt| rt.key(LEASE_NAMESPACE, LEASE_NAME))
        .unwrap_or_else(|| format!("/registry/leases/{LEASE_NAMESPACE}/{LEASE_NAME}"))
}

/// One replica's side of the election.
struct Elector {
    storage: Storage,
    lease_key: String,
    identity: String,
    timings: Timings,
    fence: Fence,
    /// The Lease as last seen, and when this replica first saw it so.
    observed: Option<(Bytes, Instant)>,
    /// The watch on the Lease's folder while this replica is not leading.
    watch: Option<WatchStream>,
}

impl Elector {
    /// Acquires, leads while it renews, and acquires again after losing the lease, until the
    /// hub stops.
    async fn run(&mut self, leads: &watch::Sender<bool>, on_change: &impl Fn(bool)) {
        loop {
            while !self.try_acquire_or_renew().await {
                self.wait_to_retry().await;
            }
            self.watch = None;
            tracing::info!(identity = %self.identity, lease = LEASE_NAME, "became the leader");
            leads.send_replace(true);
            on_change(true);
            self.renew_until_lost().await;
            self.fence.release();
            leads.send_replace(false);
            on_change(false);
            tracing::warn!(
                identity = %self.identity,
                "could not renew the leader lease within the renew deadline: controllers stopped"
            );
        }
    }

    /// Waits for the next attempt: the retry period (jittered), cut short when the lease
    /// observed runs out. Meanwhile the watch records each new value of the Lease when it
    /// arrives.
    async fn wait_to_retry(&mut self) {
        let retry = Instant::now() + jittered(self.timings.retry);
        let until = self.observed_expiry().map_or(retry, |expiry| expiry.min(retry));
        let Some(mut watch) = self.watch.take() else {
            tokio::time::sleep_until(until).await;
            return;
        };
        loop {
            match tokio::time::timeout_at(until, watch.next()).await {
                Err(_) => break,
                Ok(Some(Ok(event))) => self.observe(&event),
                // An outage or a compaction ends the watch; the next attempt opens another.
                Ok(Some(Err(_)) | None) => {
                    tokio::time::sleep_until(until).await;
                    return;
                }
            }
        }
        self.watch = Some(watch);
    }

    /// When the lease observed runs out on this replica's clock, if another replica holds it.
    fn observed_expiry(&self) -> Option<Instant> {
        let (raw, at) = self.observed.as_ref()?;
        let lease: Value = serde_json::from_slice(raw).ok()?;
        let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
        if holder.is_empty() || holder == self.identity {
            return None;
        }
        let seconds = lease["spec"]["leaseDurationSeconds"].as_u64();
        Some(*at + seconds.map_or(self.timings.lease, Duration::from_secs))
    }

    /// Records a watched change of the Lease as observed now.
    fn observe(&mut self, event: &ocm_storage::WatchEvent) {
        if event.key != self.lease_key {
            return;
        }
        self.observed = match event.kind {
            EventKind::Put => Some((event.value.clone(), Instant::now())),
            EventKind::Delete => None,
        };
    }

    /// Opens the watch on the Lease's folder after `revision`, unless one is open.
    async fn watch_from(&mut self, revision: Revision) {
        if self.watch.is_some() {
            return;
        }
        let folder = match self.lease_key.rfind('/') {
            Some(end) => &self.lease_key[..=end],
            None => return,
        };
        self.watch = self.storage.watch(folder, Revision(revision.0 + 1)).await.ok();
    }

    /// Renews every retry period; returns when a renewal has not succeeded for the renew
    /// deadline (each attempt bounded by the time left).
    async fn renew_until_lost(&mut self) {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.timings.retry).await;
            let left = self.timings.renew_deadline.saturating_sub(renewed.elapsed());
            if let Ok(true) = tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                renewed = Instant::now();
            }
            if renewed.elapsed() >= self.timings.renew_deadline {
                return;
            }
        }
    }

    /// client-go's `tryAcquireOrRenew`: whether this replica holds the Lease after the call.
    async fn try_acquire_or_renew(&mut self) -> bool {
        match self.attempt().await {
            Ok(held) => held,
            Err(e) => {
                tracing::debug!(error = %e, "leader election attempt failed");
                false
            }
        }
    }

    async fn attempt(&mut self) -> Result<bool, StorageError> {
        let Some(current) = self.storage.try_get(&self.lease_key).await? else {
            return self.take(None).await;
        };
        if self.fence.token().is_none() {
            self.watch_from(current.mod_revision).await;
        }
        let now = Instant::now();
        let first_seen = match &self.observed {
            Some((raw, at)) if *raw == current.value => *at,
            _ => {
                self.observed = Some((current.value.clone(), now));
                now
            }
        };
        let lease: Value = serde_json::from_slice(&current.value).unwrap_or(Value::Null);
        let spec = &lease["spec"];
        let holder = spec["holderIdentity"].as_str().unwrap_or_default();
        let duration =
            spec["leaseDurationSeconds"].as_u64().map_or(self.timings.lease, Duration::from_secs);
        if holder == self.identity && self.fence.token().is_some() {
            return self.renew(current, lease).await;
        }
        if !holder.is_empty() && holder != self.identity && first_seen + duration > now {
            return Ok(false);
        }
        self.take(Some((current, lease))).await
    }

    /// Renews the Lease this replica holds (the fence stays where it is).
    async fn renew(&mut self, current: KeyValue, mut lease: Value) -> Result<bool, StorageError> {
        lease["spec"]["renewTime"] = json!(rfc3339_micros(clock::now()));
        lease["spec"]["leaseDurationSeconds"] = json!(self.timings.lease.as_secs());
        let value = Bytes::from(lease.to_string());
        match self.storage.update(&self.lease_key, value.clone(), current.mod_revision).await {
            Ok(_) => {
                self.observed = Some((value, Instant::now()));
                Ok(true)
            }
            Err(StorageError::Conflict { .. } | StorageError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Takes the Lease (absent, expired or released) and the fence in one commit.
    async fn take(&mut self, current: Option<(KeyValue, Value)>) -> Result<bool, StorageError> {
        let now = rfc3339_micros(clock::now());
        let transitions = current
            .as_ref()
            .map_or(0, |(_, l)| l["spec"]["leaseTransitions"].as_u64().unwrap_or(0) + 1);
        let spec = json!({
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.timings.lease.as_secs(),
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": transitions,
        });
        let lease_write = match current {
            Some((kv, mut lease)) => {
                lease["spec"] = spec;
                let value = Bytes::from(lease.to_string());
                Write::Update { key: self.lease_key.clone(), value, expected: kv.mod_revision }
            }
            None => {
                let lease = new_lease(spec);
                Write::Create { key: self.lease_key.clone(), value: Bytes::from(lease.to_string()) }
            }
        };
        let fence_value = Bytes::from(self.identity.clone());
        let fence_write = match self.storage.try_get(FENCE_KEY).await? {
            Some(kv) => Write::Update {
                key: FENCE_KEY.to_owned(),
                value: fence_value,
                expected: kv.mod_revision,
            },
            None => Write::Create { key: FENCE_KEY.to_owned(), value: fence_value },
        };
        let lease_value = Bytes::copy_from_slice(lease_write.value());
        match self.storage.commit(vec![lease_write, fence_write]).await {
            Ok(committed) => {
                self.fence.hold(committed.revision);
                self.observed = Some((lease_value, Instant::now()));
                Ok(true)
            }
            Err(
                StorageError::Conflict { .. }
                | StorageError::AlreadyExists { .. }
                | StorageError::NotFound { .. },
            ) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// What releases the Lease when the hub stops: a handle to the store and who holds it.
    fn release_handle(&self) -> Release {
        Release {
            storage: self.storage.clone(),
            lease_key: self.lease_key.clone(),
            identity: self.identity.clone(),
            fence: self.fence.clone(),
        }
    }
}

/// What [`Election::release`] needs.
#[derive(Debug)]
struct Release {
    storage: Storage,
    lease_key: String,
    identity: String,
    fence: Fence,
}

/// Clears the holder of the Lease if this replica still holds it (and the fence it took).
async fn release(storage: &Storage, key: &str, identity: &str, token: Revision) {
    let Ok(Some(fence)) = storage.try_get(FENCE_KEY).await else { return };
    let Ok(current) = storage.get(key).await else { return };
    let Ok(mut lease) = serde_json::from_slice::<Value>(&current.value) else { return };
    if fence.mod_revision != token || lease["spec"]["holderIdentity"] != json!(identity) {
        return;
    }
    lease["spec"]["holderIdentity"] = json!("");
    lease["spec"]["leaseDurationSeconds"] = json!(1);
    lease["spec"]["renewTime"] = json!(rfc3339_micros(clock::now()));
    let _ = storage.update(key, Bytes::from(lease.to_string()), current.mod_revision).await;
}

/// A new Lease object as the registry stores it (no resourceVersion: the store's revision is).
fn new_lease(spec: Value) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": LEASE_NAME,
            "namespace": LEASE_NAMESPACE,
            "uid": uuid::Uuid::new_v4().to_string(),
            "creationTimestamp": crate::machinery::object::now_rfc3339(),
        },
        "spec": spec,
    })
}

/// client-go's `wait.Jitter(period, 1.2)`: a period up to 120 % longer, so replicas that
/// started together do not keep trying in lockstep.
fn jittered(period: Duration) -> Duration {
    let extra = period.mul_f64(1.2 * f64::from(uuid::Uuid::new_v4().as_u128() as u16) / 65536.0);
    period + extra
}
