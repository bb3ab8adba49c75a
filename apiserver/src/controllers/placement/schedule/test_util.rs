//! Fixtures of the scheduler's tests, which take one case per rule of ocm.md §5 (and §6's set
//! membership), each checked against what OCM's scheduler decides: clusters built up fact by
//! fact, the world of a case, and a pass run both explained and not.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::cluster::v1::Taint;
use ocm_proto::api::cluster::v1beta1::Placement;
use ocm_proto::api::meta::Time;
use ocm_proto::selector::LabelSelector;
use serde_json::json;

use super::prioritize::AddOnValue;
use super::{ClusterFacts, Outcome, ScoreObject, World, schedule};

/// A cluster: name, labels, claims, taints `key=value:Effect@secondsAgo`, cpu, memory.
pub(super) struct C {
    facts: ClusterFacts,
    /// More of the object, for CEL: merged over what the facts say.
    extra: serde_json::Map<String, serde_json::Value>,
}

pub(super) fn c(name: &str) -> C {
    let mut labels = BTreeMap::new();
    labels.insert("cluster.open-cluster-management.io/clusterset".into(), "default".into());
    let facts = ClusterFacts { name: name.into(), labels, ..ClusterFacts::default() };
    C { facts, extra: serde_json::Map::new() }
}

impl C {
    /// Sets a top-level part of the object (`status`, `spec`, ...), or `metadata.annotations`.
    pub(super) fn with(mut self, part: &str, v: serde_json::Value) -> C {
        self.extra.insert(part.into(), v);
        self
    }
    /// The ManagedCluster the facts came from, as CEL reads it.
    pub(super) fn object(&self) -> serde_json::Value {
        let f = &self.facts;
        let claims: Vec<_> = f.claims.iter().map(|(k, v)| json!({"name": k, "value": v})).collect();
        let mut o = json!({
            "apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster",
            "metadata": {"name": f.name, "labels": f.labels},
            "spec": {"hubAcceptsClient": true},
            "status": {"clusterClaims": claims},
        });
        for (k, v) in &self.extra {
            match k.strip_prefix("metadata.") {
                Some(field) => o["metadata"][field] = v.clone(),
                None => match (o.get_mut(k), v) {
                    (Some(serde_json::Value::Object(to)), serde_json::Value::Object(from)) => {
                        to.extend(from.clone());
                    }
                    _ => o[k] = v.clone(),
                },
            }
        }
        o
    }
    pub(super) fn label(mut self, k: &str, v: &str) -> C {
        self.facts.labels.insert(k.into(), v.into());
        self
    }
    pub(super) fn claim(mut self, k: &str, v: &str) -> C {
        self.facts.claims.insert(k.into(), v.into());
        self
    }
    pub(super) fn taint(
        mut self,
        key: &str,
        value: &str,
        effect: &str,
        secs_ago: Option<i64>,
    ) -> C {
        let now = fixture_now();
        self.facts.taints.push(Taint {
            key: key.into(),
            value: (!value.is_empty()).then(|| value.into()),
            effect: effect.into(),
            time_added: secs_ago
                .map(|s| Time(now.checked_sub(Duration::from_secs(s.unsigned_abs())).unwrap())),
        });
        self
    }
    pub(super) fn cpu(mut self, millis: f64) -> C {
        self.facts.cpu = Some(millis);
        self
    }
    pub(super) fn memory(mut self, v: f64) -> C {
        self.facts.memory = Some(v);
        self
    }
    pub(super) fn deleting(mut self) -> C {
        self.facts.deleting = true;
        self
    }
}

/// The world of a case.
pub(super) struct Case {
    clusters: Vec<Arc<ClusterFacts>>,
    sets: BTreeMap<String, Result<LabelSelector, String>>,
    bindings: BTreeSet<String>,
    elsewhere: HashMap<String, u32>,
    pub(super) own: HashMap<String, u32>,
    scores: HashMap<(String, String), Arc<ScoreObject>>,
    objects: HashMap<String, Arc<serde_json::Value>>,
}

pub(super) fn world(clusters: Vec<C>) -> Case {
    let mut sets = BTreeMap::new();
    for set in ["default", "prod"] {
        let sel = format!("cluster.open-cluster-management.io/clusterset={set}");
        sets.insert(set.to_owned(), Ok(LabelSelector::parse(&sel).unwrap()));
    }
    sets.insert("global".into(), Ok(LabelSelector::default()));
    Case {
        objects: clusters.iter().map(|c| (c.facts.name.clone(), Arc::new(c.object()))).collect(),
        clusters: clusters.into_iter().map(|c| Arc::new(c.facts)).collect(),
        sets,
        bindings: ["default".to_owned()].into(),
        elsewhere: HashMap::new(),
        own: HashMap::new(),
        scores: HashMap::new(),
    }
}

impl Case {
    pub(super) fn bind(mut self, sets: &[&str]) -> Case {
        self.bindings = sets.iter().map(|s| (*s).to_owned()).collect();
        self
    }
    pub(super) fn current(mut self, clusters: &[&str]) -> Case {
        self.own = clusters.iter().map(|s| ((*s).to_owned(), 1)).collect();
        self
    }
    pub(super) fn elsewhere(mut self, counts: &[(&str, u32)]) -> Case {
        self.elsewhere = counts.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect();
        self
    }
    pub(super) fn score(self, cluster: &str, value: AddOnValue) -> Case {
        let (v, valid_until) = match value {
            AddOnValue::Value(v) => (v, None),
            AddOnValue::Expired => (50, Some(fixture_now() - Duration::from_secs(60))),
            AddOnValue::Missing => return self,
        };
        self.score_object(cluster, "res", &[("s", v)], valid_until)
    }
    pub(super) fn score_object(
        mut self,
        cluster: &str,
        name: &str,
        items: &[(&str, i32)],
        valid_until: Option<Timestamp>,
    ) -> Case {
        let items = items.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect();
        let object = Arc::new(ScoreObject { items, valid_until });
        self.scores.insert((cluster.into(), name.into()), object);
        self
    }

    pub(super) fn run(&self, spec: serde_json::Value) -> Outcome {
        let placement: Placement = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"}, "spec": spec,
        }))
        .unwrap();
        let scores = |c: &str, n: &str| self.scores.get(&(c.to_owned(), n.to_owned())).cloned();
        let object = |c: &str| self.objects.get(c).cloned();
        let world = World {
            clusters: &self.clusters,
            sets: &self.sets,
            bindings: &self.bindings,
            decided: &self.elsewhere,
            own: &self.own,
            scores: &scores,
            object: &object,
            now: fixture_now(),
        };
        let explained = schedule(&placement, &world, true);
        let quiet = schedule(&placement, &world, false);
        assert_eq!(
            (&explained.groups, &explained.satisfied, &explained.misconfigured, &explained.counts),
            (&quiet.groups, &quiet.satisfied, &quiet.misconfigured, &quiet.counts),
            "explaining changes nothing decided"
        );
        explained
    }
}

/// The decided clusters, group by group.
pub(super) fn decided(o: &Outcome) -> Vec<Vec<&str>> {
    o.groups.iter().map(|g| g.clusters.iter().map(String::as_str).collect()).collect()
}

pub(super) fn flat(o: &Outcome) -> Vec<&str> {
    decided(o).into_iter().flatten().collect()
}

pub(super) fn reason(o: &Outcome) -> &str {
    o.satisfied.reason
}

pub(super) fn abc() -> Vec<C> {
    vec![c("a"), c("b"), c("c")]
}

/// The one instant the fixtures are built and scheduled at, so no assertion depends on how
/// long a test takes to run.
pub(super) fn fixture_now() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().expect("a valid timestamp")
}
