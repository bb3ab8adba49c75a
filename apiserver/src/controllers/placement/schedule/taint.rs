//! The TaintToleration step: a cluster stays when the placement tolerates each of its taints
//! (`PreferNoSelect` is ignored, `NoSelectIfNew` only keeps clusters already decided), a
//! toleration with `tolerationSeconds` only until they run out; the earliest such instant is when
//! the placement is scheduled again.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::cluster::v1::{
    TAINT_EFFECT_NO_SELECT_IF_NEW, TAINT_EFFECT_PREFER_NO_SELECT, Taint,
};
use ocm_proto::api::cluster::v1beta1::Toleration;

use super::explain::{Step, Tally};
use super::world::{ClusterFacts, World};

/// The clusters of `passed` whose taints `tolerations` tolerate now, and the earliest instant a
/// toleration in use runs out. The tolerations are checked only when there are clusters to
/// filter, as OCM does.
pub(super) fn filter<'c>(
    tolerations: &[Toleration],
    world: &World<'_>,
    passed: Vec<&'c ClusterFacts>,
    tally: &mut Tally,
) -> Result<(Vec<&'c ClusterFacts>, Option<Timestamp>), String> {
    let mut feasible = Vec::new();
    let mut requeue: Option<Timestamp> = None;
    if !passed.is_empty() {
        for t in tolerations {
            check_toleration(t).map_err(|e| format!("TaintToleration:{e}"))?;
        }
        for c in passed {
            match taints_pass(c, tolerations, world.own, world.now) {
                (Ok(()), expiry) => {
                    if let Some(at) = expiry {
                        requeue = Some(requeue.map_or(at, |r| r.min(at)));
                    }
                    feasible.push(c);
                }
                (Err(why), _) => tally.drop(c, Step::TaintToleration, &why),
            }
        }
    }
    Ok((feasible, requeue))
}

/// Whether a toleration tolerates a taint (ignoring `tolerationSeconds`).
fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    let effect = t.effect.as_deref().unwrap_or("");
    let key = t.key.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match t.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        _ => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
    }
}

fn check_toleration(t: &Toleration) -> Result<(), String> {
    let key = t.key.as_deref().unwrap_or("");
    let op = t.operator.as_deref().unwrap_or("Equal");
    if key.is_empty() && op != "Exists" {
        return Err("If the key is empty, operator must be Exists.".into());
    }
    if op == "Exists" && !t.value.as_deref().unwrap_or("").is_empty() {
        return Err("If the operator is Exists, the value should be empty.".into());
    }
    if op != "Exists" && op != "Equal" {
        return Err(format!("The operator {op:?} is not supported."));
    }
    Ok(())
}

/// Whether every taint of `c` is tolerated now; the earliest instant a toleration in use runs
/// out; and, when dropped, which taint did it.
fn taints_pass(
    c: &ClusterFacts,
    tolerations: &[Toleration],
    current: &HashMap<String, u32>,
    now: Timestamp,
) -> (Result<(), String>, Option<Timestamp>) {
    let mut expiry: Option<Timestamp> = None;
    for taint in &c.taints {
        if taint.effect == TAINT_EFFECT_PREFER_NO_SELECT {
            continue;
        }
        if taint.effect == TAINT_EFFECT_NO_SELECT_IF_NEW && current.contains_key(&c.name) {
            continue;
        }
        let mut tolerated = false;
        let mut expired = false;
        for t in tolerations.iter().filter(|t| tolerates(t, taint)) {
            let Some(seconds) = t.toleration_seconds else {
                tolerated = true;
                break;
            };
            // A taint without timeAdded was added at the zero time: long expired.
            let added = taint.time_added.as_ref().map_or(Timestamp::MIN, |t| t.0);
            let until = added.checked_add(Duration::from_secs(seconds.max(0).unsigned_abs())).ok();
            match until {
                Some(until) if now < until => {
                    tolerated = true;
                    expiry = Some(expiry.map_or(until, |e| e.min(until)));
                    break;
                }
                _ => expired = true,
            }
        }
        if !tolerated {
            let value = taint.value.as_deref().unwrap_or("");
            let why = if expired {
                format!(
                    "taint {}={value}:{} tolerated until its tolerationSeconds ran out",
                    taint.key, taint.effect
                )
            } else {
                format!("taint {}={value}:{} not tolerated", taint.key, taint.effect)
            };
            return (Err(why), None);
        }
    }
    (Ok(()), expiry)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::placement::schedule::test_util::*;

    #[test]
    fn a_no_select_taint_drops_the_cluster() {
        let o = world(vec![
            c("a"),
            c("b").taint(
                "cluster.open-cluster-management.io/unreachable",
                "",
                "NoSelect",
                Some(10),
            ),
        ])
        .run(json!({}));
        assert_eq!(flat(&o), ["a"]);
        let v = o.verdicts.iter().find(|v| v.cluster == "b").unwrap();
        assert_eq!(v.step, Step::TaintToleration);
        assert!(v.reason.contains("unreachable"), "{}", v.reason);
    }

    #[test]
    fn an_equal_toleration_matches_key_and_value() {
        let clusters = vec![
            c("a").taint("gpu", "true", "NoSelect", None),
            c("b").taint("gpu", "false", "NoSelect", None),
        ];
        let o = world(clusters)
            .run(json!({"tolerations": [{"key": "gpu", "operator": "Equal", "value": "true"}]}));
        assert_eq!(flat(&o), ["a"]);
    }

    #[test]
    fn an_exists_toleration_without_key_tolerates_everything() {
        let clusters = vec![
            c("a").taint("x", "1", "NoSelect", None),
            c("b").taint("y", "", "NoSelectIfNew", None),
        ];
        let o = world(clusters).run(json!({"tolerations": [{"operator": "Exists"}]}));
        assert_eq!(flat(&o), ["a", "b"]);
    }

    #[test]
    fn a_toleration_effect_must_match() {
        let clusters = vec![c("a").taint("x", "", "NoSelect", None)];
        let o = world(clusters).run(
            json!({"tolerations": [{"key": "x", "operator": "Exists", "effect": "NoSelectIfNew"}]}),
        );
        assert_eq!(reason(&o), "NoManagedClusterMatched");
        assert_eq!(o.satisfied.message, "No ManagedCluster matches any of the cluster predicate");
    }

    #[test]
    fn prefer_no_select_is_accepted_and_ignored() {
        let o = world(vec![c("a").taint("x", "", "PreferNoSelect", None)]).run(json!({}));
        assert_eq!(flat(&o), ["a"]);
    }

    #[test]
    fn no_select_if_new_keeps_decided_clusters_only() {
        let clusters = vec![
            c("a").taint("x", "", "NoSelectIfNew", None),
            c("b").taint("x", "", "NoSelectIfNew", None),
        ];
        let o = world(clusters).current(&["a"]).run(json!({}));
        assert_eq!(flat(&o), ["a"]);
    }

    #[test]
    fn toleration_seconds_hold_until_they_run_out_and_requeue_then() {
        let unreachable = "cluster.open-cluster-management.io/unreachable";
        let clusters = vec![
            c("fresh").taint(unreachable, "", "NoSelect", Some(10)),
            c("old").taint(unreachable, "", "NoSelect", Some(400)),
            c("undated").taint(unreachable, "", "NoSelect", None),
        ];
        let o = world(clusters).run(json!({"tolerations": [
            {"key": unreachable, "operator": "Exists", "tolerationSeconds": 300}]}));
        assert_eq!(flat(&o), ["fresh"]);
        let after = o.requeue_after.expect("requeued for the expiry");
        assert_eq!(after, Duration::from_secs(290), "300 s of toleration less the 10 s gone");
        let v = o.verdicts.iter().find(|v| v.cluster == "old").unwrap();
        assert!(v.reason.contains("tolerationSeconds ran out"), "{}", v.reason);
    }

    #[test]
    fn invalid_tolerations_are_misconfigured() {
        for t in [
            json!({"key": "", "operator": "Equal", "value": "x"}),
            json!({"key": "k", "operator": "Exists", "value": "x"}),
        ] {
            let o = world(abc()).run(json!({"tolerations": [t]}));
            assert!(
                o.misconfigured.as_deref().unwrap().starts_with("TaintToleration:"),
                "{:?}",
                o.misconfigured
            );
        }
    }
}
