//! What the scheduler reads: the facts of each ManagedCluster, AddOnPlacementScores, and the
//! [`World`] of one pass (clusters, sets, bindings, decisions, the clock).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::cluster::v1::{ManagedCluster, Taint};
use ocm_proto::quantity::Quantity;
use ocm_proto::selector::LabelSelector;

/// What the scheduler reads of a ManagedCluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterFacts {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `status.clusterClaims`, name → value.
    pub claims: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// Allocatable millicores, when both allocatable and capacity report `cpu`.
    pub cpu: Option<f64>,
    /// Allocatable milli-bytes, when both allocatable and capacity report `memory`.
    pub memory: Option<f64>,
    pub deleting: bool,
}

impl ClusterFacts {
    /// The facts of one cluster.
    pub fn of(cluster: &ManagedCluster) -> ClusterFacts {
        let status = cluster.status.as_ref();
        let resource = |name: &str| -> Option<f64> {
            let status = status?;
            status.capacity.get(name)?;
            let q = Quantity::parse(&status.allocatable.get(name)?.0)?;
            // Precision beyond f64's 53 bits does not change a ranking.
            Some(q.milli() as f64)
        };
        ClusterFacts {
            name: cluster.metadata.name.clone().unwrap_or_default(),
            labels: cluster.metadata.labels.clone().unwrap_or_default(),
            claims: status
                .map(|s| {
                    s.cluster_claims
                        .iter()
                        .filter_map(|c| Some((c.name.clone()?, c.value.clone()?)))
                })
                .into_iter()
                .flatten()
                .collect(),
            taints: cluster.spec.as_ref().map(|s| s.taints.clone()).unwrap_or_default(),
            cpu: resource("cpu"),
            memory: resource("memory"),
            deleting: cluster.metadata.deletion_timestamp.is_some(),
        }
    }
}

/// What the scheduler reads of an AddOnPlacementScore.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScoreObject {
    /// `status.scores`: (name, value).
    pub items: Vec<(String, i32)>,
    pub valid_until: Option<Timestamp>,
}

/// An AddOnPlacementScore by (cluster, object name).
pub type ScoreLookup<'a> = &'a (dyn Fn(&str, &str) -> Option<Arc<ScoreObject>> + Sync);

/// Everything outside the placement the scheduler reads.
pub struct World<'a> {
    /// Every ManagedCluster.
    pub clusters: &'a [Arc<ClusterFacts>],
    /// Every ManagedClusterSet not being deleted: its selector, or why it has none.
    pub sets: &'a BTreeMap<String, Result<LabelSelector, String>>,
    /// The names of the ManagedClusterSetBindings in the placement's namespace.
    pub bindings: &'a BTreeSet<String>,
    /// For `Balance`: how many PlacementDecisions (labelled or not, this placement's included)
    /// name each cluster.
    pub decided: &'a HashMap<String, u32>,
    /// This placement's current decisions: how many of its own PlacementDecisions name each
    /// cluster (`Steady` and `NoSelectIfNew` ask whether a cluster is there; `Balance` takes the
    /// count out of `decided`).
    pub own: &'a HashMap<String, u32>,
    /// AddOnPlacementScores, for the `AddOn` prioritizer and CEL's `scores()`.
    pub scores: ScoreLookup<'a>,
    /// A ManagedCluster as JSON, for CEL's `managedCluster`.
    pub object: &'a (dyn Fn(&str) -> Option<Arc<serde_json::Value>> + Sync),
    pub now: Timestamp,
}
