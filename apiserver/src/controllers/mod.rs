//! The hub's controllers on one runtime (`runtime`): garbage collection and namespace deletion,
//! registration, placement, ManifestWorkReplicaSets and the rollout library they share, the
//! add-on manager and governance policy propagation.

pub mod addon;
pub mod gc;
pub mod leader;
pub mod manifestworkreplicaset;
pub mod placement;
pub mod policy;
pub mod registration;
pub mod replicas;
pub mod rollout;
pub mod runtime;

use std::sync::Arc;

/// The views the API serves from controllers (`placements/<name>/explain`,
/// `manifestworkreplicasets/<name>/render`); `None` where the controller does not run.
#[derive(Default, Clone)]
pub struct Views {
    pub placement: Option<Arc<placement::Scheduler>>,
    pub replica_sets: Option<Arc<manifestworkreplicaset::Controller>>,
}

impl std::fmt::Debug for Views {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Views")
            .field("placement", &self.placement.is_some())
            .field("replica_sets", &self.replica_sets.is_some())
            .finish()
    }
}
