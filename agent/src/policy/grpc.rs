//! Replicated policies over the hub's gRPC CloudEvents server (the default transport): a
//! subscription to `policy.open-cluster-management.io.v1.policies` for the cluster, with a spec
//! resync naming what the agent holds (uid and resourceVersion), so the hub sends what is newer
//! and the deletion of what is gone; the policies held by uid, deletions remembered for the
//! next round; status written back as a `status.update_request` carrying the whole object
//! (at the resourceVersion last received, so a stale write is a conflict, tried again).
//! There is no OCM data type for policies; this one is named and encoded as OCM's generic
//! codec does every other Kubernetes kind (ocm-wave2.md §6.3).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use ocm_proto::cloudevents::v1::CloudEvent;
use ocm_proto::cloudevents::{
    Action, Attr, EventType, HEARTBEAT, HeldVersion, SpecResync, Subresource, data_type, ext,
};
use serde_json::Value;

use crate::backoff::Backoff;
use crate::error::AgentError;
use crate::grpc::{self, Client, Endpoint};
use crate::transport::{GrpcSource, servers};

/// The policies the hub streams, and the client to write their status with.
pub struct GrpcPolicies {
    source: GrpcSource,
    /// The policies, by uid: the journal's at the start, then as the hub's events say.
    held: Mutex<BTreeMap<String, Value>>,
    client: Mutex<Option<Client>>,
}

fn uid_of(p: &Value) -> Option<&str> {
    p.pointer("/metadata/uid").and_then(Value::as_str)
}

impl GrpcPolicies {
    /// Follows the policies of `source.cluster`, starting from `journal` (what the agent held).
    pub fn new(source: GrpcSource, journal: &[Value]) -> Arc<GrpcPolicies> {
        let by_uid =
            journal.iter().filter_map(|p| Some((uid_of(p)?.to_owned(), p.clone()))).collect();
        Arc::new(GrpcPolicies { source, held: Mutex::new(by_uid), client: Mutex::new(None) })
    }

    /// The policies as the hub last said (the journal's until it says otherwise).
    pub(super) fn listed(&self) -> Vec<Value> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).values().cloned().collect()
    }

    /// Writes `status` into the policy `policy` (as held) over the stream's connection.
    pub(super) async fn write_status(
        &self,
        policy: &Value,
        status: &Value,
    ) -> Result<(), AgentError> {
        let client = self.client.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let client = client
            .ok_or_else(|| AgentError::Invalid("not connected to the hub's gRPC server".into()))?;
        let mut event = self.event(Subresource::Status, Action::UpdateRequest)?;
        let mut obj = policy.clone();
        obj["status"] = status.clone();
        let rv = obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("");
        event
            .set(ext::RESOURCE_ID, Attr::CeString(uid_of(policy).unwrap_or("").to_owned()))
            .set(ext::RESOURCE_VERSION, Attr::CeString(rv.to_owned()))
            .set_json(serde_json::to_vec(&obj).unwrap_or_default());
        grpc::publish(&client, event).await
    }

    /// A new event of this agent (source `<cluster>-policy-agent`) about its policies.
    fn event(&self, subresource: Subresource, action: Action) -> Result<CloudEvent, AgentError> {
        let t = EventType::new(data_type::POLICIES, subresource, action)
            .map_err(|e| AgentError::Invalid(e.to_string()))?;
        let cluster = &self.source.cluster;
        let source = format!("{cluster}-policy-agent");
        Ok(CloudEvent::ocm(source, &t, cluster, crate::clock::offset_now()))
    }

    /// Follows the stream for good: reconnects with backoff, to the next replica's server when
    /// one cannot be reached.
    pub async fn follow(self: Arc<GrpcPolicies>) {
        let mut backoff =
            Backoff::new(std::time::Duration::from_millis(500), std::time::Duration::from_secs(10));
        let mut at = 0;
        loop {
            let servers = servers(&self.source);
            at %= servers.len();
            let mut subscribed = false;
            if let Err(e) = self.follow_one(&servers[at], &mut subscribed).await {
                tracing::info!(error = %e, "policy stream interrupted; reconnecting");
            }
            *self.client.lock().unwrap_or_else(PoisonError::into_inner) = None;
            if subscribed {
                backoff.reset();
            } else {
                at = (at + 1) % servers.len();
            }
            backoff.wait().await;
        }
    }

    async fn follow_one(
        &self,
        endpoint: &Endpoint,
        subscribed: &mut bool,
    ) -> Result<(), AgentError> {
        let source = &self.source;
        let (cert, key) = source.data_dir.credentials()?.ok_or_else(|| {
            AgentError::Invalid("the agent holds no certificate: run `klusterlet join`".into())
        })?;
        let client = endpoint.connect(&cert, &key).await?;
        let mut stream = grpc::subscribe(&client, &source.cluster, data_type::POLICIES).await?;
        *subscribed = true;
        *self.client.lock().unwrap_or_else(PoisonError::into_inner) = Some(client.clone());
        grpc::publish(&client, self.resync_request()?).await?;
        loop {
            let next = tokio::time::timeout(source.healthiness, stream.message()).await;
            let event = match next {
                Err(_) => return Err(gone(endpoint, "no heartbeat from the hub")),
                Ok(Err(s)) => return Err(grpc::status_error(s)),
                Ok(Ok(None)) => return Err(gone(endpoint, "the hub ended the stream")),
                Ok(Ok(Some(e))) => e,
            };
            if event.r#type != HEARTBEAT {
                self.take(&event);
            }
        }
    }

    /// The spec resync request: every policy held, by uid and resourceVersion.
    fn resync_request(&self) -> Result<CloudEvent, AgentError> {
        let held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let resource_versions = held
            .iter()
            .map(|(uid, p)| HeldVersion {
                resource_id: uid.clone(),
                resource_version: p
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
            })
            .collect();
        let mut ask = self.event(Subresource::Spec, Action::ResyncRequest)?;
        ask.set_json(serde_json::to_vec(&SpecResync { resource_versions }).unwrap_or_default());
        Ok(ask)
    }

    /// One spec event: a policy created or changed, or one deleted (by uid).
    fn take(&self, event: &CloudEvent) {
        let Ok(t) = EventType::parse(&event.r#type) else { return };
        if t.subresource != Subresource::Spec {
            return;
        }
        let Some(uid) = event.string(ext::RESOURCE_ID).map(str::to_owned) else { return };
        let held = || self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if event.get(ext::DELETION_TIMESTAMP).is_some() {
            held().remove(&uid);
            return;
        }
        // Parsed before the lock: the resync request reads the same map.
        match event.bytes().map(serde_json::from_slice::<Value>) {
            Some(Ok(p))
                if p.pointer("/metadata/namespace").and_then(Value::as_str)
                    == Some(self.source.cluster.as_str()) =>
            {
                held().insert(uid, p);
            }
            _ => tracing::warn!(id = %event.id, "policy event ignored"),
        }
    }
}

fn gone(endpoint: &Endpoint, detail: &str) -> AgentError {
    AgentError::Unreachable { url: endpoint.url.clone(), detail: detail.into() }
}
