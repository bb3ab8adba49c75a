//! The simulator's cluster: it answers from memory (healthy, a fixed version and size, no
//! claims) and keeps the objects written to it, so agents run without a Kubernetes API.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use ocm_agent::cluster::{Applied, Claim, Cluster, Resources, Strategy};
use ocm_agent::error::AgentError;
use serde_json::Value;

/// A cluster that answers from memory: healthy, a fixed version and size, no claims; the
/// objects written to it (by the policy agent of the `policies` mode; namespaced kinds such as
/// ConfigMaps) kept in a map.
#[derive(Default)]
pub(super) struct MemoryCluster(Mutex<std::collections::HashMap<String, Value>>);

/// An object's key in a [`MemoryCluster`].
fn memory_key(obj: &Value) -> String {
    let t = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("").to_owned();
    let ns = t("/metadata/namespace");
    format!("{}/{}/{}/{}", t("/apiVersion"), t("/kind"), ns, t("/metadata/name"))
}

/// What names an object of a [`MemoryCluster`] (core kinds, plural by an `s`).
fn memory_applied(obj: &Value) -> Applied {
    let t = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("").to_owned();
    let ns = t("/metadata/namespace");
    Applied {
        group: None,
        version: "v1".into(),
        resource: format!("{}s", t("/kind").to_lowercase()),
        namespace: Some(if ns.is_empty() { "default".to_owned() } else { ns }),
        name: t("/metadata/name"),
        uid: Some(t("/metadata/uid")).filter(|u| !u.is_empty()),
    }
}

impl Cluster for MemoryCluster {
    fn healthy(&self) -> BoxFuture<'_, Result<(), AgentError>> {
        Box::pin(async { Ok(()) })
    }

    fn version(&self) -> BoxFuture<'_, Result<String, AgentError>> {
        Box::pin(async { Ok("v1.32.0-sim".to_owned()) })
    }

    fn resources(&self) -> BoxFuture<'_, Result<Resources, AgentError>> {
        Box::pin(async {
            let r: std::collections::BTreeMap<String, String> =
                [("cpu", "8"), ("memory", "32Gi"), ("pods", "110")]
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
            Ok(Resources { capacity: r.clone(), allocatable: r })
        })
    }

    fn claims(&self) -> BoxFuture<'_, Result<Vec<Claim>, AgentError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn resolve<'a>(&'a self, manifest: &'a Value) -> BoxFuture<'a, Result<Applied, AgentError>> {
        Box::pin(async move { Ok(memory_applied(manifest)) })
    }

    fn get<'a>(&'a self, manifest: &'a Value) -> BoxFuture<'a, Result<Option<Value>, AgentError>> {
        let objects = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let found = objects.get(&memory_key(manifest)).cloned();
        Box::pin(async move { Ok(found) })
    }

    fn apply<'a>(
        &'a self,
        manifest: &'a Value,
        _owner: Option<&'a Value>,
        _strategy: &'a Strategy,
    ) -> BoxFuture<'a, Result<(Applied, Value), AgentError>> {
        static UIDS: AtomicU64 = AtomicU64::new(0);
        let mut obj = manifest.clone();
        let uid = UIDS.fetch_add(1, Ordering::Relaxed);
        obj["metadata"]["uid"] = Value::String(format!("sim-{uid}"));
        let mut objects = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        objects.insert(memory_key(&obj), obj.clone());
        Box::pin(async move { Ok((memory_applied(&obj), obj)) })
    }
}
