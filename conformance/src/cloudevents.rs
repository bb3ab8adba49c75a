//! The gRPC suites' side of the CloudEvents protocol: clusters accepted on a test hub, a
//! cluster agent's client over real mTLS (the agent library's own), events, and reading a
//! stream past its heartbeats.

use std::time::Duration;

use anyhow::Context as _;
use ocm_agent::grpc::{Client, Endpoint};
use ocm_proto::cloudevents::v1::CloudEvent;
use ocm_proto::cloudevents::{Attr, EventType, HEARTBEAT, ext};
use reqwest::Method;
use serde_json::json;

use crate::hub::{TestHub, eventually};
use crate::kubectl::create;

/// How long a suite waits for an event or a state.
pub const WAIT: Duration = Duration::from_secs(30);

/// Accepts clusters `names` (their namespaces and agent RBAC made by the hub).
pub async fn accepted(hub: &TestHub, names: &[&str]) -> anyhow::Result<()> {
    let http = hub.http()?;
    for name in names {
        let mc = json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
            "metadata": {"name": name}, "spec": {"hubAcceptsClient": true}});
        create(hub, &http, "/apis/cluster.open-cluster-management.io/v1/managedclusters", mc)
            .await?;
        let lease =
            format!("/apis/coordination.k8s.io/v1/namespaces/{name}/leases/managed-cluster-lease");
        eventually(&format!("{name} accepted"), WAIT, || async {
            let (code, _) = hub.call(&http, Method::GET, &lease, None, &[]).await?;
            Ok((code == 200).then_some(()))
        })
        .await?;
    }
    Ok(())
}

/// A connected client for cluster `cluster`'s agent (its certificate as the hub issues it).
pub async fn agent(hub: &TestHub, cluster: &str) -> anyhow::Result<Client> {
    let user = format!("system:open-cluster-management:{cluster}:agent1");
    let group = format!("system:open-cluster-management:{cluster}");
    let (crt, key) = hub.certificate_for(&user, Some(&group))?;
    Ok(endpoint(hub)?.connect(&crt, &key).await?)
}

/// The hub's gRPC server, trusted by its CA.
pub fn endpoint(hub: &TestHub) -> anyhow::Result<Endpoint> {
    Ok(Endpoint {
        url: hub.grpc_url.clone().context("the hub serves no gRPC")?,
        ca_pem: std::fs::read_to_string(hub.path().join("pki/ca.crt"))?,
    })
}

/// An event of type `t` about `cluster`, with no other attributes.
pub fn event(t: &str, cluster: &str) -> anyhow::Result<CloudEvent> {
    let mut e = CloudEvent::new("id-1", "agent1", &EventType::parse(t)?);
    e.set(ext::CLUSTER_NAME, Attr::CeString(cluster.into()));
    Ok(e)
}

/// The next event that is not a heartbeat.
pub async fn next(stream: &mut tonic::Streaming<CloudEvent>) -> anyhow::Result<CloudEvent> {
    loop {
        let e = tokio::time::timeout(WAIT, stream.message())
            .await
            .context("no event in time")??
            .context("the stream ended")?;
        if e.r#type != HEARTBEAT {
            return Ok(e);
        }
    }
}

/// Whether `r` is the hub's refusal with gRPC code `code` (as tonic names it).
pub fn refused(r: Result<impl std::fmt::Debug, ocm_agent::error::AgentError>, code: &str) -> bool {
    matches!(r, Err(ocm_agent::error::AgentError::GrpcRefused { code: c, .. }) if c == code)
}
