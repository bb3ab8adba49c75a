//! The prioritizers (`Balance`, `Steady`, `ResourceAllocatableCPU`/`Memory`, `AddOn`), their
//! weights per `prioritizerPolicy`, each feasible cluster's weighted total, and the
//! `numberOfClusters` cut of the ranking.

use std::collections::HashMap;

use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::cluster::v1beta1::{
    PrioritizerPolicy, SCORE_COORDINATE_TYPE_BUILT_IN, ScoreCoordinate,
};

use super::explain::{Step, Tally};
use super::world::{ClusterFacts, ScoreLookup, World};

/// The best and worst score a prioritizer gives.
const MAX_SCORE: i64 = 100;

/// An AddOnPlacementScore item as the `AddOn` prioritizer finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AddOnValue {
    Value(i32),
    /// No such object or item: scores 0.
    Missing,
    /// `validUntil` has passed: scores 0.
    Expired,
}

impl AddOnValue {
    /// Item `score` of object `resource` in the namespace of `cluster`, as of `now`.
    fn find(
        scores: ScoreLookup<'_>,
        cluster: &str,
        resource: &str,
        score: &str,
        now: Timestamp,
    ) -> AddOnValue {
        let Some(object) = scores(cluster, resource) else { return AddOnValue::Missing };
        if object.valid_until.is_some_and(|t| t < now) {
            return AddOnValue::Expired;
        }
        object
            .items
            .iter()
            .find(|(name, _)| name == score)
            .map_or(AddOnValue::Missing, |(_, v)| AddOnValue::Value(*v))
    }
}

/// A prioritizer and its weight.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Prioritizer {
    Balance,
    Steady,
    Cpu,
    Memory,
    AddOn { resource: String, score: String },
}

impl Prioritizer {
    fn name(&self) -> String {
        match self {
            Prioritizer::Balance => "Balance".into(),
            Prioritizer::Steady => "Steady".into(),
            Prioritizer::Cpu => "ResourceAllocatableCPU".into(),
            Prioritizer::Memory => "ResourceAllocatableMemory".into(),
            Prioritizer::AddOn { resource, score } => format!("AddOn/{resource}/{score}"),
        }
    }
}

/// The prioritizers with their (non-zero) weights, per `prioritizerPolicy` (OCM's `getWeights`
/// and `getPrioritizers`: a weight of 0 disables an entry before its name is looked at).
pub(super) fn prioritizers(
    policy: Option<&PrioritizerPolicy>,
) -> Result<Vec<(Prioritizer, i64)>, String> {
    let mode = policy.and_then(|p| p.mode.as_deref()).unwrap_or("");
    let exact = match mode {
        "Exact" => true,
        "" | "Additive" => false,
        other => return Err(format!("incorrect prioritizer policy mode: {other}")),
    };
    // Keyed by the coordinate as written: (type, builtIn, addOn).
    let mut weights: Vec<(ScoreCoordinate, i64)> = Vec::new();
    let mut set = |coordinate: ScoreCoordinate, w: i64| match weights
        .iter_mut()
        .find(|(c, _)| *c == coordinate)
    {
        Some(entry) => entry.1 = w,
        None => weights.push((coordinate, w)),
    };
    if !exact {
        for name in ["Balance", "Steady"] {
            set(
                ScoreCoordinate {
                    type_: SCORE_COORDINATE_TYPE_BUILT_IN.into(),
                    built_in: Some(name.into()),
                    add_on: None,
                },
                1,
            );
        }
    }
    for config in policy.map(|p| p.configurations.as_slice()).unwrap_or_default() {
        set(config.score_coordinate.clone(), i64::from(config.weight.unwrap_or(1)));
    }
    let mut out = Vec::new();
    for (coordinate, weight) in weights.into_iter().filter(|(_, w)| *w != 0) {
        let prioritizer = if coordinate.type_ == SCORE_COORDINATE_TYPE_BUILT_IN {
            match coordinate.built_in.as_deref().unwrap_or("") {
                "Balance" => Prioritizer::Balance,
                "Steady" => Prioritizer::Steady,
                "ResourceAllocatableCPU" => Prioritizer::Cpu,
                "ResourceAllocatableMemory" => Prioritizer::Memory,
                other => return Err(format!("incorrect builtin prioritizer: {other}")),
            }
        } else {
            match &coordinate.add_on {
                Some(a) => Prioritizer::AddOn {
                    resource: a.resource_name.clone(),
                    score: a.score_name.clone(),
                },
                None => return Err("addOn should not be empty".into()),
            }
        };
        // Two coordinates naming one prioritizer (an AddOn type with a builtIn too) add up.
        match out.iter_mut().find(|(p, _)| *p == prioritizer) {
            Some((_, w)) => *w += weight,
            None => out.push((prioritizer, weight)),
        }
    }
    out.sort();
    Ok(out)
}

/// A feasible cluster's weighted total and, when explaining, each prioritizer's score.
pub(super) type Scored<'c> = (i64, &'c ClusterFacts, Vec<(String, i64)>);

/// Each feasible cluster's weighted total (with each prioritizer's score when `explain`), best
/// first, equal totals by name.
pub(super) fn score<'c>(
    prioritizers: &[(Prioritizer, i64)],
    feasible: &[&'c ClusterFacts],
    world: &World<'_>,
    explain: bool,
) -> Vec<Scored<'c>> {
    let inputs = Inputs::new(prioritizers, feasible, world);
    let mut scored: Vec<Scored<'c>> = feasible
        .iter()
        .map(|c| {
            let mut total = 0i64;
            let mut parts = Vec::new();
            for (p, weight) in prioritizers {
                let score = inputs.score(p, c);
                total += weight * score;
                if explain {
                    parts.push((p.name(), score));
                }
            }
            (total, *c, parts)
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    scored
}

/// Why a pass selects its clusters, the same for each of them and for as long as the spec's
/// `numberOfClusters` stays (no rank or score, which other clusters move): the stable part of
/// explain's reason for a selected cluster, and each PlacementDecision's `reason`.
pub(super) fn selected_reason(wanted: Option<usize>) -> String {
    match wanted {
        None => "feasible".to_owned(),
        Some(n) => format!("among the {n} best scores"),
    }
}

/// The `numberOfClusters` cut: the best `wanted` (all when unset) are selected, the rest counted
/// at the NumberOfClusters step. Returns the selected clusters, best first, and every feasible
/// cluster's total.
pub(super) fn cut<'c>(
    wanted: Option<usize>,
    scored: Vec<Scored<'c>>,
    tally: &mut Tally,
) -> (Vec<&'c ClusterFacts>, Vec<(String, i64)>) {
    let take = wanted.map_or(scored.len(), |n| n.min(scored.len()));
    let totals: Vec<(String, i64)> = scored.iter().map(|(t, c, _)| (c.name.clone(), *t)).collect();
    let ranked = totals.len();
    let mut selected: Vec<&ClusterFacts> = Vec::with_capacity(take);
    let why = selected_reason(wanted);
    for (i, (total, c, parts)) in scored.into_iter().enumerate() {
        if i < take {
            selected.push(c);
            let reason = || format!("{why}; rank {} of {ranked}", i + 1);
            tally.rank(c, Step::Selected, reason, parts, total);
        } else {
            let reason = || format!("rank {} of {ranked}; numberOfClusters is {take}", i + 1);
            tally.rank(c, Step::Count, reason, parts, total);
        }
    }
    (selected, totals)
}

/// What the prioritizers read beyond one cluster, computed once per pass.
struct Inputs<'a, 'w> {
    world: &'a World<'w>,
    /// For `Balance`: the most decisions of other placements any cluster has.
    max_elsewhere: u32,
    cpu: Option<HashMap<String, i64>>,
    memory: Option<HashMap<String, i64>>,
}

impl<'a, 'w> Inputs<'a, 'w> {
    fn new(
        prioritizers: &[(Prioritizer, i64)],
        feasible: &[&ClusterFacts],
        world: &'a World<'w>,
    ) -> Inputs<'a, 'w> {
        let uses = |wanted: Prioritizer| prioritizers.iter().any(|(p, _)| *p == wanted);
        let max_elsewhere = if uses(Prioritizer::Balance) {
            world.decided.iter().map(|(c, n)| elsewhere(world, c, *n)).max().unwrap_or(0)
        } else {
            0
        };
        Inputs {
            world,
            max_elsewhere,
            cpu: uses(Prioritizer::Cpu).then(|| resource_scores(feasible, |c| c.cpu)),
            memory: uses(Prioritizer::Memory).then(|| resource_scores(feasible, |c| c.memory)),
        }
    }

    /// One prioritizer's score of one cluster, before weighting.
    fn score(&self, p: &Prioritizer, c: &ClusterFacts) -> i64 {
        let world = self.world;
        match p {
            Prioritizer::Steady => {
                if world.own.contains_key(&c.name) {
                    MAX_SCORE
                } else {
                    0
                }
            }
            Prioritizer::Balance => {
                match world.decided.get(&c.name).map(|n| elsewhere(world, &c.name, *n)) {
                    Some(n) if n > 0 && self.max_elsewhere > 0 => {
                        let usage = f64::from(n) / f64::from(self.max_elsewhere);
                        2 * ((100.0 * (0.5 - usage)) as i64)
                    }
                    _ => MAX_SCORE,
                }
            }
            Prioritizer::Cpu => {
                self.cpu.as_ref().and_then(|s| s.get(&c.name)).copied().unwrap_or(0)
            }
            Prioritizer::Memory => {
                self.memory.as_ref().and_then(|s| s.get(&c.name)).copied().unwrap_or(0)
            }
            Prioritizer::AddOn { resource, score } => {
                match AddOnValue::find(world.scores, &c.name, resource, score, world.now) {
                    AddOnValue::Value(v) => i64::from(v).clamp(-MAX_SCORE, MAX_SCORE),
                    AddOnValue::Missing | AddOnValue::Expired => 0,
                }
            }
        }
    }
}

/// For `Balance`: the decisions of other placements naming `cluster`, of the `n` that name it
/// (this placement's own are taken out).
fn elsewhere(world: &World<'_>, cluster: &str, n: u32) -> u32 {
    n.saturating_sub(world.own.get(cluster).copied().unwrap_or(0))
}

/// Scores of one resource prioritizer: allocatable scaled into [-100, 100] over the candidates.
fn resource_scores(
    feasible: &[&ClusterFacts],
    pick: fn(&ClusterFacts) -> Option<f64>,
) -> HashMap<String, i64> {
    let values: Vec<(&str, f64)> =
        feasible.iter().filter_map(|c| pick(c).map(|v| (c.name.as_str(), v))).collect();
    let min = values.iter().map(|(_, v)| *v).fold(f64::INFINITY, f64::min);
    let max = values.iter().map(|(_, v)| *v).fold(f64::NEG_INFINITY, f64::max);
    values
        .into_iter()
        .map(|(name, v)| {
            let score = if max == min {
                MAX_SCORE
            } else {
                // Truncation toward zero, as Go's int64() conversion.
                (((v - min) / (max - min) - 0.5) * 200.0) as i64
            };
            (name.to_owned(), score)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::placement::schedule::test_util::*;

    #[test]
    fn fewer_feasible_than_wanted_is_not_all_scheduled() {
        let o = world(abc()).run(json!({"numberOfClusters": 5}));
        assert_eq!(flat(&o), ["a", "b", "c"]);
        assert_eq!((o.satisfied.status, reason(&o)), ("False", "NotAllDecisionsScheduled"));
        assert_eq!(o.satisfied.message, "2 cluster decisions unscheduled");
    }

    #[test]
    fn equal_scores_are_cut_by_name() {
        let o = world(vec![c("c"), c("a"), c("b")]).run(json!({"numberOfClusters": 2}));
        assert_eq!(flat(&o), ["a", "b"]);
        let v = o.verdicts.iter().find(|v| v.cluster == "c").unwrap();
        assert_eq!(v.step, Step::Count);
    }

    #[test]
    fn steady_keeps_the_current_decisions() {
        let o = world(abc()).current(&["c"]).run(json!({"numberOfClusters": 1}));
        assert_eq!(flat(&o), ["c"]);
        let v = o.verdicts.iter().find(|v| v.cluster == "c").unwrap();
        assert_eq!(v.scores, vec![("Balance".to_owned(), 100), ("Steady".to_owned(), 100)]);
        assert_eq!(v.total, Some(200));
    }

    #[test]
    fn balance_prefers_clusters_other_placements_use_less() {
        // counts a:4 b:2 c:0 → a: 2*trunc(100*(0.5-1)) = -100, b: 0, c: 100.
        let o = world(abc()).elsewhere(&[("a", 4), ("b", 2)]).run(json!({"numberOfClusters": 2}));
        assert_eq!(flat(&o), ["b", "c"]);
        assert_eq!(
            o.totals,
            vec![("c".to_owned(), 100), ("b".to_owned(), 0), ("a".to_owned(), -100)]
        );
    }

    #[test]
    fn balance_takes_out_every_own_decision_object() {
        // a is named by 3 decision objects, 2 of them this placement's (a leftover duplicate):
        // elsewhere a:1, b:2 → a: 2*trunc(100*(0.5-0.5)) = 0, b: -100.
        let mut case = world(vec![c("a"), c("b")]).elsewhere(&[("a", 3), ("b", 2)]).current(&["a"]);
        case.own = [("a".to_owned(), 2)].into();
        let o = case.run(json!({"prioritizerPolicy": {"mode": "Exact", "configurations": [
            {"scoreCoordinate": {"builtIn": "Balance"}}]}}));
        assert_eq!(o.totals, vec![("a".to_owned(), 0), ("b".to_owned(), -100)]);
    }

    #[test]
    fn balance_truncates_like_go() {
        // counts a:3 b:1 → b: 2*trunc(100*(0.5-1/3)) = 2*16 = 32.
        let o = world(vec![c("a"), c("b")]).elsewhere(&[("a", 3), ("b", 1)]).run(json!({
            "prioritizerPolicy": {"mode": "Exact", "configurations": [
                {"scoreCoordinate": {"builtIn": "Balance"}}]}}));
        assert_eq!(o.totals, vec![("b".to_owned(), 32), ("a".to_owned(), -100)]);
    }

    #[test]
    fn allocatable_cpu_ranks_in_exact_mode() {
        let clusters = vec![c("a").cpu(1000.0), c("b").cpu(4000.0), c("c").cpu(2500.0), c("d")];
        let o = world(clusters).current(&["a"]).run(json!({"numberOfClusters": 2, "prioritizerPolicy": {
            "mode": "Exact", "configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableCPU"}, "weight": 2}]}}));
        assert_eq!(flat(&o), ["b", "c"], "Exact drops Steady: the current decision does not count");
        // (a-min)/(max-min)*200-100: a -100, b 100, c 0; d has no cpu: 0.
        assert_eq!(
            o.totals,
            vec![
                ("b".to_owned(), 200),
                ("c".to_owned(), 0),
                ("d".to_owned(), 0),
                ("a".to_owned(), -200)
            ]
        );
    }

    #[test]
    fn equal_allocatable_memory_scores_everyone_the_maximum() {
        let clusters = vec![c("a").memory(8.0), c("b").memory(8.0)];
        let o = world(clusters)
            .run(json!({"prioritizerPolicy": {"mode": "Exact", "configurations": [
            {"scoreCoordinate": {"builtIn": "ResourceAllocatableMemory"}}]}}));
        assert_eq!(o.totals, vec![("a".to_owned(), 100), ("b".to_owned(), 100)]);
    }

    #[test]
    fn additive_mode_extends_the_defaults_and_weights_override() {
        // Steady weight 0 disables it; Balance stays at 1; CPU added at weight 1.
        let clusters = vec![c("a").cpu(1.0), c("b").cpu(2.0)];
        let o = world(clusters).current(&["a"]).run(
            json!({"numberOfClusters": 1, "prioritizerPolicy": {
            "configurations": [
                {"scoreCoordinate": {"builtIn": "Steady"}, "weight": 0},
                {"scoreCoordinate": {"builtIn": "ResourceAllocatableCPU"}},
            ]}}),
        );
        assert_eq!(flat(&o), ["b"]);
        assert_eq!(o.totals, vec![("b".to_owned(), 200), ("a".to_owned(), 0)]);
    }

    #[test]
    fn a_negative_weight_prefers_the_lowest() {
        let clusters = vec![c("a").cpu(1.0), c("b").cpu(2.0)];
        let o = world(clusters).run(json!({"numberOfClusters": 1, "prioritizerPolicy": {"mode": "Exact",
            "configurations": [{"scoreCoordinate": {"builtIn": "ResourceAllocatableCPU"}, "weight": -1}]}}));
        assert_eq!(flat(&o), ["a"]);
    }

    #[test]
    fn addon_scores_count_missing_and_expired_as_zero() {
        let case = world(vec![c("a"), c("b"), c("m"), c("x")])
            .score("a", AddOnValue::Value(30))
            .score("b", AddOnValue::Value(-20))
            .score("x", AddOnValue::Expired);
        let o = case.run(json!({"prioritizerPolicy": {"mode": "Exact", "configurations": [
            {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "res", "scoreName": "s"}}, "weight": 3}]}}));
        assert_eq!(
            o.totals,
            vec![
                ("a".to_owned(), 90),
                ("m".to_owned(), 0),
                ("x".to_owned(), 0),
                ("b".to_owned(), -60)
            ]
        );
    }

    #[test]
    fn unknown_or_incomplete_prioritizers_are_misconfigured() {
        for (config, want) in [
            (
                json!({"scoreCoordinate": {"builtIn": "Spread"}}),
                ":incorrect builtin prioritizer: Spread",
            ),
            (json!({"scoreCoordinate": {"type": "AddOn"}}), ":addOn should not be empty"),
            (json!({"scoreCoordinate": {"type": "BuiltIn"}}), ":incorrect builtin prioritizer: "),
        ] {
            let spec = json!({"prioritizerPolicy": {"configurations": [config]}});
            let o = world(abc()).run(spec.clone());
            assert_eq!(o.misconfigured.as_deref(), Some(want));
            assert_eq!(decided(&o), vec![Vec::<&str>::new()], "nothing selected");
            // Checked even when nothing is bound (OCM validates prioritizers on every pass).
            let o = world(abc()).bind(&[]).run(spec);
            assert_eq!(
                (o.misconfigured.as_deref(), reason(&o)),
                (Some(want), "NoManagedClusterSetBindings")
            );
        }
        // A weight of 0 disables an entry before its name is read.
        let o = world(abc()).run(json!({"prioritizerPolicy": {"configurations": [
            {"scoreCoordinate": {"builtIn": "Nope"}, "weight": 0}]}}));
        assert_eq!(o.misconfigured, None);
    }
}
