//! The managed cluster as the agent sees it: a trait, so the fleet simulator can run agents
//! against a cluster that only records, and its real implementation over the `kube` crate
//! (kubeconfig or in-cluster), which knows nothing of whether it talks to a real cluster or an
//! `ocm-hub serve --profile cluster`.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DynamicObject, ListParams};

use crate::error::AgentError;
use ocm_proto::quantity::Quantity;

/// Node capacity and allocatable, summed over the cluster's Nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub capacity: BTreeMap<String, String>,
    pub allocatable: BTreeMap<String, String>,
}

/// A ClusterClaim (name, value) the cluster reports.
pub type Claim = (String, String);

/// What the agent asks of its managed cluster.
pub trait Cluster: Send + Sync + 'static {
    /// Whether its API server is healthy (`/livez`, or `/healthz` where that is missing).
    fn healthy(&self) -> BoxFuture<'_, Result<(), AgentError>>;
    /// Its Kubernetes version (`gitVersion`).
    fn version(&self) -> BoxFuture<'_, Result<String, AgentError>>;
    /// Its Nodes' resources.
    fn resources(&self) -> BoxFuture<'_, Result<Resources, AgentError>>;
    /// Its ClusterClaims that are not spoke-only.
    fn claims(&self) -> BoxFuture<'_, Result<Vec<Claim>, AgentError>>;
}

/// A real Kubernetes API.
#[derive(Clone)]
pub struct KubeCluster {
    client: kube::Client,
}

fn cluster_err(e: kube::Error) -> AgentError {
    AgentError::Cluster(crate::hub::error_chain(&e))
}

impl KubeCluster {
    /// The cluster of a kubeconfig file, or (without one) the in-cluster or default config.
    pub async fn connect(kubeconfig: Option<&std::path::Path>) -> Result<KubeCluster, AgentError> {
        let config = match kubeconfig {
            Some(path) => {
                let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                    AgentError::Invalid(format!("--cluster-kubeconfig {}: {e}", path.display()))
                })?;
                kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.map_err(
                    |e| {
                        AgentError::Invalid(format!("--cluster-kubeconfig {}: {e}", path.display()))
                    },
                )?
            }
            None => kube::Config::infer().await.map_err(|e| {
                AgentError::Invalid(format!(
                    "no cluster to manage: give --cluster-kubeconfig, or run in a cluster ({e})"
                ))
            })?,
        };
        let client = kube::Client::try_from(config).map_err(cluster_err)?;
        Ok(KubeCluster { client })
    }

    async fn get_text(&self, path: &str) -> Result<(), kube::Error> {
        let req = http::Request::get(path).body(Vec::new()).map_err(kube::Error::HttpError)?;
        self.client.request_text(req).await.map(drop)
    }
}

fn sum(
    nodes: &[Node],
    pick: impl Fn(
        &Node,
    )
        -> Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> BTreeMap<String, String> {
    let mut total: BTreeMap<String, Quantity> = BTreeMap::new();
    for node in nodes {
        for (k, v) in pick(node).into_iter().flatten() {
            if let Some(q) = Quantity::parse(&v.0) {
                let e = total.entry(k.clone()).or_default();
                *e = *e + q;
            }
        }
    }
    total.into_iter().map(|(k, v)| (k, v.to_string())).collect()
}

impl Cluster for KubeCluster {
    fn healthy(&self) -> BoxFuture<'_, Result<(), AgentError>> {
        Box::pin(async move {
            match self.get_text("/livez").await {
                Ok(()) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 403 => {
                    self.get_text("/healthz").await.map_err(cluster_err)
                }
                Err(e) => Err(cluster_err(e)),
            }
        })
    }

    fn version(&self) -> BoxFuture<'_, Result<String, AgentError>> {
        Box::pin(async move {
            self.client.apiserver_version().await.map(|v| v.git_version).map_err(cluster_err)
        })
    }

    fn resources(&self) -> BoxFuture<'_, Result<Resources, AgentError>> {
        Box::pin(async move {
            let nodes: Api<Node> = Api::all(self.client.clone());
            let list = nodes.list(&ListParams::default()).await.map_err(cluster_err)?.items;
            let schedulable: Vec<Node> = list
                .iter()
                .filter(|n| !n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false))
                .cloned()
                .collect();
            Ok(Resources {
                capacity: sum(&list, |n| n.status.as_ref().and_then(|s| s.capacity.as_ref())),
                allocatable: sum(&schedulable, |n| {
                    n.status.as_ref().and_then(|s| s.allocatable.as_ref())
                }),
            })
        })
    }

    fn claims(&self) -> BoxFuture<'_, Result<Vec<Claim>, AgentError>> {
        Box::pin(async move {
            let gvk = kube::api::GroupVersionKind::gvk(
                ocm_proto::api::cluster::GROUP,
                "v1alpha1",
                "ClusterClaim",
            );
            let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, "clusterclaims");
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &ar);
            let lp = ListParams::default()
                .labels(&format!("!{}", ocm_proto::api::cluster::LABEL_SPOKE_ONLY));
            let items = match api.list(&lp).await {
                Ok(l) => l.items,
                // A cluster without the ClusterClaim kind has no claims.
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Vec::new()),
                Err(e) => return Err(cluster_err(e)),
            };
            Ok(items
                .into_iter()
                .filter_map(|o| {
                    let name = o.metadata.name?;
                    let value = o.data.pointer("/spec/value")?.as_str()?.to_owned();
                    Some((name, value))
                })
                .collect())
        })
    }
}
