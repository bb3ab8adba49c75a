//! The hub's replicas as the agent knows them: the HTTPS and gRPC URLs the hub publishes in
//! `kube-public/cluster-info` (`ocm-hub-replicas`, the leader's first), kept in the data dir so
//! an agent restarted while its replica is away still knows the others. The agent's REST
//! client moves to the next replica when its own cannot be reached ([`crate::hub`]'s
//! failover), and its gRPC stream reconnects to the next one ([`crate::transport`]); watches
//! resume from the last revision they saw, valid on every replica.

use serde::{Deserialize, Serialize};

use crate::error::AgentError;
use crate::state::DataDir;

/// The file of the data dir holding the list.
const FILE: &str = "hub-replicas";

/// One replica's URLs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replica {
    pub https: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<String>,
}

/// The list the hub publishes, parsed (`None`: the hub runs as one replica, or says nothing
/// readable).
pub fn published(cluster_info: &k8s_openapi::api::core::v1::ConfigMap) -> Option<Vec<Replica>> {
    let text = cluster_info.data.as_ref()?.get(ocm_proto::cloudevents::CLUSTER_INFO_REPLICAS)?;
    let list: Vec<Replica> = serde_json::from_str(text).ok()?;
    (!list.is_empty()).then_some(list)
}

/// The list remembered in the data dir.
pub fn remembered(dir: &DataDir) -> Result<Vec<Replica>, AgentError> {
    Ok(dir.read(FILE)?.and_then(|text| serde_json::from_str(&text).ok()).unwrap_or_default())
}

/// Remembers `list` in the data dir.
pub async fn remember(dir: &DataDir, list: &[Replica]) -> Result<(), AgentError> {
    let text = serde_json::to_vec(list).map_err(|e| AgentError::Invalid(e.to_string()))?;
    dir.write_async(FILE, text, false).await
}

/// The HTTPS URLs to try, in order: the published replicas, then the URL the agent joined at
/// when the list does not name it.
pub fn https_urls(list: &[Replica], joined: &str) -> Vec<String> {
    let mut urls: Vec<String> = list.iter().map(|r| r.https.clone()).collect();
    if !urls.iter().any(|u| u == joined) {
        urls.push(joined.to_owned());
    }
    urls
}
