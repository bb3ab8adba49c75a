//! OCM's placement scheduler (ocm.md §5) as a pure function of a placement and the world it sees:
//! candidates from the bound sets, the predicate and taint filters, the prioritizers, the count
//! and the decision groups, plus, on request, what each step kept or dropped and why.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use ocm_proto::api::cluster::v1::{
    ManagedCluster, TAINT_EFFECT_NO_SELECT_IF_NEW, TAINT_EFFECT_PREFER_NO_SELECT, Taint,
};
use ocm_proto::api::cluster::v1beta1::{
    ClusterClaimSelector, Placement, PrioritizerPolicy, SCORE_COORDINATE_TYPE_BUILT_IN, Toleration,
};
use ocm_proto::api::meta::{IntOrString, LabelSelector as ApiLabelSelector};
use ocm_proto::quantity::Quantity;
use ocm_proto::selector::LabelSelector;

use super::cel;

/// Decisions per PlacementDecision object.
pub const DECISIONS_PER_OBJECT: usize = 100;
/// The best and worst score a prioritizer gives.
const MAX_SCORE: i64 = 100;

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

/// An AddOnPlacementScore item as the `AddOn` prioritizer finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOnValue {
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

/// One group of decisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub index: usize,
    pub name: String,
    /// The group's clusters, by name.
    pub clusters: Vec<String>,
}

/// The `PlacementSatisfied` condition's status, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Satisfied {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// Which step dropped a cluster, or that it was kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// Not a member of any set bound to the namespace and named by the placement.
    ClusterSet,
    /// Being deleted.
    Deleting,
    Predicate,
    TaintToleration,
    /// Feasible, but scored below the `numberOfClusters` cut.
    Count,
    /// Selected.
    Selected,
}

impl Step {
    /// The step's name in explanations.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::ClusterSet => "ClusterSet",
            Step::Deleting => "Deleting",
            Step::Predicate => "Predicate",
            Step::TaintToleration => "TaintToleration",
            Step::Count => "NumberOfClusters",
            Step::Selected => "Selected",
        }
    }
}

/// Why one cluster ended where it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub cluster: String,
    pub step: Step,
    pub reason: String,
    /// Each prioritizer's score (before weighting), for feasible clusters.
    pub scores: Vec<(String, i64)>,
    /// The weighted total, for feasible clusters.
    pub total: Option<i64>,
}

/// Why a pass selected nothing.
#[derive(Debug)]
enum Refusal {
    /// `<plugin>:<message>`: the placement cannot be scheduled as written.
    Misconfigured(String),
    /// The pass could not run now (no thread to evaluate CEL on): nothing is to be written,
    /// the pass is tried again.
    Unavailable(String),
}

impl From<String> for Refusal {
    fn from(m: String) -> Refusal {
        Refusal::Misconfigured(m)
    }
}

/// What the scheduler decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Set when the pass could not run now (a resource of this process was missing, not the
    /// placement at fault): the caller writes nothing and tries again; the rest is empty.
    pub unavailable: Option<String>,
    /// `<plugin>:<message>` when the placement cannot be scheduled as written; the previous
    /// decisions are then kept.
    pub misconfigured: Option<String>,
    pub satisfied: Satisfied,
    /// The selected clusters, in decision order.
    pub groups: Vec<Group>,
    pub selected: usize,
    /// When a toleration runs out: schedule again then.
    pub requeue_after: Option<Duration>,
    /// The weighted totals of the feasible clusters, best first (the `ScoreUpdate` event).
    pub totals: Vec<(String, i64)>,
    /// Per cluster (every cluster of the hub), when asked for.
    pub verdicts: Vec<Verdict>,
    /// How many clusters each step dropped (or selected), always.
    pub counts: BTreeMap<Step, usize>,
}

/// The verdicts of a pass: always counted by step, kept one by one when explaining.
struct Tally {
    explain: bool,
    verdicts: Vec<Verdict>,
    counts: BTreeMap<Step, usize>,
}

impl Tally {
    fn drop(&mut self, c: &ClusterFacts, step: Step, reason: &str) {
        *self.counts.entry(step).or_default() += 1;
        if self.explain {
            self.verdicts.push(Verdict {
                cluster: c.name.clone(),
                step,
                reason: reason.to_owned(),
                scores: Vec::new(),
                total: None,
            });
        }
    }
}

/// A prioritizer and its weight.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Prioritizer {
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
fn prioritizers(policy: Option<&PrioritizerPolicy>) -> Result<Vec<(Prioritizer, i64)>, String> {
    let mode = policy.and_then(|p| p.mode.as_deref()).unwrap_or("");
    let exact = match mode {
        "Exact" => true,
        "" | "Additive" => false,
        other => return Err(format!("incorrect prioritizer policy mode: {other}")),
    };
    // Keyed by the coordinate as written: (type, builtIn, addOn).
    let mut weights: Vec<(ocm_proto::api::cluster::v1beta1::ScoreCoordinate, i64)> = Vec::new();
    let mut set =
        |coordinate: ocm_proto::api::cluster::v1beta1::ScoreCoordinate, w: i64| match weights
            .iter_mut()
            .find(|(c, _)| *c == coordinate)
        {
            Some(entry) => entry.1 = w,
            None => weights.push((coordinate, w)),
        };
    if !exact {
        for name in ["Balance", "Steady"] {
            set(
                ocm_proto::api::cluster::v1beta1::ScoreCoordinate {
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

/// A claim selector as a label selector over the claims map.
fn claim_selector(sel: Option<&ClusterClaimSelector>) -> Result<LabelSelector, String> {
    let Some(sel) = sel else { return Ok(LabelSelector::default()) };
    let api = ApiLabelSelector {
        match_expressions: Some(sel.match_expressions.clone()),
        match_labels: None,
    };
    LabelSelector::from_api(&api).map_err(|e| e.to_string())
}

fn label_selector(sel: Option<&ApiLabelSelector>) -> Result<LabelSelector, String> {
    sel.map_or(Ok(LabelSelector::default()), |s| {
        LabelSelector::from_api(s).map_err(|e| e.to_string())
    })
}

/// A label selector and a claim selector, both of which must match.
struct Selector {
    labels: LabelSelector,
    claims: LabelSelector,
    cel: Option<cel::Expressions>,
}

impl Selector {
    /// Whether the labels and claims match (the CEL expressions are asked separately).
    fn matches(&self, c: &ClusterFacts) -> bool {
        self.labels.matches(|k| c.labels.get(k).map(String::as_str))
            && self.claims.matches(|k| c.claims.get(k).map(String::as_str))
    }
}

/// A predicate's CEL expressions, when it has any.
fn cel_expressions(p: &ocm_proto::api::cluster::v1beta1::ClusterPredicate) -> Option<&[String]> {
    let exprs = &p.required_cluster_selector.as_ref()?.cel_selector.as_ref()?.cel_expressions;
    (!exprs.is_empty()).then_some(exprs.as_slice())
}

/// The Predicate filter: the candidates some predicate (labels AND claims AND CEL) selects.
fn predicate<'c>(
    spec: &ocm_proto::api::cluster::v1beta1::PlacementSpec,
    world: &World<'_>,
    candidates: Vec<&'c ClusterFacts>,
    tally: &mut Tally,
) -> Result<Vec<&'c ClusterFacts>, String> {
    let mut predicates = Vec::new();
    for p in &spec.predicates {
        let Some(sel) = &p.required_cluster_selector else {
            predicates.push(Selector {
                labels: LabelSelector::default(),
                claims: LabelSelector::default(),
                cel: None,
            });
            continue;
        };
        let labels = label_selector(sel.label_selector.as_ref());
        let claims = claim_selector(sel.claim_selector.as_ref());
        let (labels, claims) = match (labels, claims) {
            (Ok(labels), Ok(claims)) => (labels, claims),
            (Err(e), _) | (_, Err(e)) => return Err(format!("Predicate:{e}")),
        };
        let cel = cel_expressions(p)
            .map(cel::compile)
            .transpose()
            .map_err(|e| format!("Predicate:{e}"))?;
        predicates.push(Selector { labels, claims, cel });
    }
    // What the CEL expressions read of a cluster: only that is converted.
    let reads =
        cel::Reads::union(predicates.iter().filter_map(|p| p.cel.as_ref().map(|e| &e.reads)));
    let mut passed = Vec::new();
    for c in candidates {
        if predicates.is_empty() {
            passed.push(c);
            continue;
        }
        // The cluster's object and its CEL form, fetched and made once for all predicates.
        let json = std::cell::OnceCell::new();
        let subject = std::cell::OnceCell::new();
        let mut refused: Option<String> = None;
        let mut selected = false;
        for p in predicates.iter().filter(|p| p.matches(c)) {
            let Some(exprs) = &p.cel else {
                selected = true;
                break;
            };
            let Some(object) = json.get_or_init(|| (world.object)(&c.name)) else {
                refused.get_or_insert_with(|| "the cluster is gone".to_owned());
                continue;
            };
            let subject = subject.get_or_init(|| cel::Subject::new(&c.name, object, &reads));
            match exprs.matches(subject, world.scores) {
                Ok(()) => {
                    selected = true;
                    break;
                }
                Err(why) => {
                    tracing::debug!(cluster = %c.name, %why, "celSelector did not select");
                    refused.get_or_insert(why);
                }
            }
        }
        if selected {
            passed.push(c);
        } else if let Some(why) = refused {
            tally.drop(c, Step::Predicate, &format!("matches no predicate (celSelector: {why})"));
        } else {
            tally.drop(c, Step::Predicate, "matches no predicate");
        }
    }
    Ok(passed)
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

/// How many clusters one decision group holds (OCM's `calculateLength`: a percentage is
/// `ceil(p / 100 × selected)` in floating point; out of range means all).
fn group_length(spec: Option<&IntOrString>, selected: usize) -> Result<usize, String> {
    let n: i64 = match spec {
        None => i64::try_from(selected).unwrap_or(i64::MAX),
        Some(IntOrString::Int(n)) => i64::from(*n),
        Some(IntOrString::String(s)) => {
            // OCM prints the IntOrString struct itself (`{Type IntVal StrVal}`).
            let bad = || format!("{{1 0 {s}}} invalid type: string is not a percentage");
            let pct: f64 = s.strip_suffix('%').and_then(|p| p.parse().ok()).ok_or_else(bad)?;
            (pct / 100.0 * selected as f64).ceil() as i64
        }
    };
    let selected_i = i64::try_from(selected).unwrap_or(i64::MAX);
    Ok(if n <= 0 || n > selected_i { selected } else { usize::try_from(n).unwrap_or(selected) })
}

/// The `PlacementSatisfied` condition, first matching row of ocm.md §5.6.
fn satisfied(
    spec_sets: &[String],
    valid: usize,
    eligible: &[&String],
    candidates: usize,
    selected: usize,
    unscheduled: usize,
) -> Satisfied {
    let no = |reason, message: String| Satisfied { status: "False", reason, message };
    if valid == 0 {
        no(
            "NoManagedClusterSetBindings",
            "No valid ManagedClusterSetBindings found in placement namespace".into(),
        )
    } else if eligible.is_empty() {
        no(
            "NoIntersection",
            format!(
                "None of ManagedClusterSets [{}] is bound to placement namespace",
                spec_sets.join(",")
            ),
        )
    } else if candidates == 0 {
        let names: Vec<&str> = eligible.iter().map(|s| s.as_str()).collect();
        no(
            "AllManagedClusterSetsEmpty",
            format!("All ManagedClusterSets [{}] have no member ManagedCluster", names.join(",")),
        )
    } else if selected == 0 {
        no(
            "NoManagedClusterMatched",
            "No ManagedCluster matches any of the cluster predicate".into(),
        )
    } else if unscheduled == 0 {
        Satisfied {
            status: "True",
            reason: "AllDecisionsScheduled",
            message: "All cluster decisions scheduled".into(),
        }
    } else {
        no("NotAllDecisionsScheduled", format!("{unscheduled} cluster decisions unscheduled"))
    }
}

/// The clusters a pass selected, best first, with what came with them.
struct Selection<'c> {
    selected: Vec<&'c ClusterFacts>,
    totals: Vec<(String, i64)>,
    requeue: Option<Timestamp>,
}

/// Decides where `placement` goes in `world`; `explain` also fills [`Outcome::verdicts`].
///
/// As OCM: a misconfiguration (`<plugin>:<message>`; prioritizer and group errors have no plugin
/// name) stops the pass with nothing selected, and the placement's decisions are emptied. The
/// predicates are checked only when there are candidates, the tolerations only when clusters
/// passed the predicates, prioritizers of weight 0 not at all.
pub fn schedule(placement: &Placement, world: &World<'_>, explain: bool) -> Outcome {
    let spec = &placement.spec;
    let mut tally = Tally { explain, verdicts: Vec::new(), counts: BTreeMap::new() };

    // Candidates: members of the bound sets the placement names.
    let valid: Vec<&String> =
        world.bindings.iter().filter(|b| world.sets.contains_key(*b)).collect();
    let eligible: Vec<&String> = if spec.cluster_sets.is_empty() {
        valid.clone()
    } else {
        valid.iter().copied().filter(|s| spec.cluster_sets.contains(s)).collect()
    };
    let selectors: Vec<&LabelSelector> =
        eligible.iter().filter_map(|s| world.sets.get(*s).and_then(|r| r.as_ref().ok())).collect();
    let mut candidates = Vec::new();
    for c in world.clusters {
        if valid.is_empty() {
            tally.drop(c, Step::ClusterSet, "no ManagedClusterSetBinding in the namespace");
        } else if eligible.is_empty() {
            tally.drop(c, Step::ClusterSet, "no set both bound and named by spec.clusterSets");
        } else if !selectors.iter().any(|s| s.matches(|k| c.labels.get(k).map(String::as_str))) {
            tally.drop(c, Step::ClusterSet, "in none of the eligible sets");
        } else if c.deleting {
            tally.drop(c, Step::Deleting, "being deleted");
        } else {
            candidates.push(&**c);
        }
    }
    let candidate_count = candidates.len();

    let group_strategy = spec.decision_strategy.as_ref().and_then(|d| d.group_strategy.as_ref());
    let (selection, groups, misconfigured) = match select(spec, world, candidates, &mut tally) {
        Err(Refusal::Unavailable(why)) => {
            return Outcome {
                unavailable: Some(why),
                misconfigured: None,
                satisfied: Satisfied { status: "Unknown", reason: "", message: String::new() },
                groups: Vec::new(),
                selected: 0,
                requeue_after: None,
                totals: Vec::new(),
                verdicts: Vec::new(),
                counts: BTreeMap::new(),
            };
        }
        Err(Refusal::Misconfigured(m)) => {
            (None, vec![Group { index: 0, name: String::new(), clusters: Vec::new() }], Some(m))
        }
        Ok(sel) => match groups_of(group_strategy, &sel.selected) {
            Ok(groups) => (Some(sel), groups, None),
            // OCM writes no decision object at all then.
            Err(m) => (None, Vec::new(), Some(format!(":{m}"))),
        },
    };
    let (count, totals, requeue) = match selection {
        Some(sel) => (sel.selected.len(), sel.totals, sel.requeue),
        None => (0, Vec::new(), None),
    };
    if explain {
        tally
            .verdicts
            .sort_by(|a, b| a.step.cmp(&b.step).reverse().then_with(|| a.cluster.cmp(&b.cluster)));
    }
    let wanted = spec.number_of_clusters.map(|n| usize::try_from(n).unwrap_or(0));
    let unscheduled = wanted.map_or(0, |n| n.saturating_sub(count));
    let satisfied =
        satisfied(&spec.cluster_sets, valid.len(), &eligible, candidate_count, count, unscheduled);
    let requeue_after = requeue.map(|at| {
        let secs = at.duration_since(world.now).as_secs_f64().max(0.0);
        Duration::from_secs_f64(secs)
    });
    Outcome {
        unavailable: None,
        misconfigured,
        satisfied,
        groups,
        selected: count,
        requeue_after,
        totals,
        verdicts: tally.verdicts,
        counts: tally.counts,
    }
}

/// The filters and prioritizers over the candidates: the clusters selected, best first.
fn select<'c>(
    spec: &ocm_proto::api::cluster::v1beta1::PlacementSpec,
    world: &World<'_>,
    candidates: Vec<&'c ClusterFacts>,
    tally: &mut Tally,
) -> Result<Selection<'c>, Refusal> {
    let explain = tally.explain;
    // Predicate (OCM returns before reading its selectors when there is nothing to filter).
    let passed = if candidates.is_empty() {
        Vec::new()
    } else if spec.predicates.iter().any(|p| cel_expressions(p).is_some()) {
        cel::on_cel_stack(|| predicate(spec, world, candidates, tally))
            .map_err(Refusal::Unavailable)??
    } else {
        predicate(spec, world, candidates, tally)?
    };
    // TaintToleration (likewise only with clusters to filter).
    let mut feasible = Vec::new();
    let mut requeue: Option<Timestamp> = None;
    if !passed.is_empty() {
        for t in &spec.tolerations {
            check_toleration(t).map_err(|e| format!("TaintToleration:{e}"))?;
        }
        for c in passed {
            match taints_pass(c, &spec.tolerations, world.own, world.now) {
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

    // Prioritizers (always checked).
    let prioritizers =
        prioritizers(spec.prioritizer_policy.as_ref()).map_err(|e| format!(":{e}"))?;
    // Balance counts the decisions of the other placements: this one's own are taken out.
    let elsewhere =
        |cluster: &str, n: u32| n.saturating_sub(world.own.get(cluster).copied().unwrap_or(0));
    let max_elsewhere = if prioritizers.iter().any(|(p, _)| *p == Prioritizer::Balance) {
        world.decided.iter().map(|(c, n)| elsewhere(c, *n)).max().unwrap_or(0)
    } else {
        0
    };
    let cpu = prioritizers
        .iter()
        .any(|(p, _)| *p == Prioritizer::Cpu)
        .then(|| resource_scores(&feasible, |c| c.cpu));
    let memory = prioritizers
        .iter()
        .any(|(p, _)| *p == Prioritizer::Memory)
        .then(|| resource_scores(&feasible, |c| c.memory));
    // (weighted total, cluster, each prioritizer's score when explaining)
    type Scored<'c> = (i64, &'c ClusterFacts, Vec<(String, i64)>);
    let mut scored: Vec<Scored<'c>> = feasible
        .iter()
        .map(|c| {
            let mut total = 0i64;
            let mut parts = Vec::new();
            for (p, weight) in &prioritizers {
                let score = match p {
                    Prioritizer::Steady => {
                        if world.own.contains_key(&c.name) {
                            MAX_SCORE
                        } else {
                            0
                        }
                    }
                    Prioritizer::Balance => {
                        match world.decided.get(&c.name).map(|n| elsewhere(&c.name, *n)) {
                            Some(n) if n > 0 && max_elsewhere > 0 => {
                                let usage = f64::from(n) / f64::from(max_elsewhere);
                                2 * ((100.0 * (0.5 - usage)) as i64)
                            }
                            _ => MAX_SCORE,
                        }
                    }
                    Prioritizer::Cpu => {
                        cpu.as_ref().and_then(|s| s.get(&c.name)).copied().unwrap_or(0)
                    }
                    Prioritizer::Memory => {
                        memory.as_ref().and_then(|s| s.get(&c.name)).copied().unwrap_or(0)
                    }
                    Prioritizer::AddOn { resource, score } => {
                        match AddOnValue::find(world.scores, &c.name, resource, score, world.now) {
                            AddOnValue::Value(v) => i64::from(v).clamp(-MAX_SCORE, MAX_SCORE),
                            AddOnValue::Missing | AddOnValue::Expired => 0,
                        }
                    }
                };
                total += weight * score;
                if explain {
                    parts.push((p.name(), score));
                }
            }
            (total, *c, parts)
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    let wanted = spec.number_of_clusters.map(|n| usize::try_from(n).unwrap_or(0));
    let take = wanted.map_or(scored.len(), |n| n.min(scored.len()));
    let totals: Vec<(String, i64)> = scored.iter().map(|(t, c, _)| (c.name.clone(), *t)).collect();
    let mut selected: Vec<&ClusterFacts> = Vec::with_capacity(take);
    for (i, (total, c, parts)) in scored.into_iter().enumerate() {
        if i < take {
            selected.push(c);
        }
        *tally.counts.entry(if i < take { Step::Selected } else { Step::Count }).or_default() += 1;
        if explain {
            let (step, reason) = if i < take {
                (Step::Selected, format!("rank {} of {}", i + 1, totals.len()))
            } else {
                (
                    Step::Count,
                    format!("rank {} of {}; numberOfClusters is {take}", i + 1, totals.len()),
                )
            };
            tally.verdicts.push(Verdict {
                cluster: c.name.clone(),
                step,
                reason,
                scores: parts,
                total: Some(total),
            });
        }
    }
    Ok(Selection { selected, totals, requeue })
}

/// The decision groups of the selected clusters: each `decisionGroups` entry's members by name,
/// then the rest, chunked by the group length; one empty group when nothing is selected.
fn groups_of(
    strategy: Option<&ocm_proto::api::cluster::v1beta1::GroupStrategy>,
    selected: &[&ClusterFacts],
) -> Result<Vec<Group>, String> {
    let count = selected.len();
    let length =
        group_length(strategy.and_then(|g| g.clusters_per_decision_group.as_ref()), count)?.max(1);
    let mut rest: Vec<&ClusterFacts> = selected.to_vec();
    rest.sort_by(|a, b| a.name.cmp(&b.name));
    let mut groups: Vec<Group> = Vec::new();
    let mut push = |name: &str, clusters: Vec<String>| {
        for chunk in clusters.chunks(length) {
            groups.push(Group {
                index: groups.len(),
                name: name.to_owned(),
                clusters: chunk.to_vec(),
            });
        }
    };
    for g in strategy.map(|g| g.decision_groups.as_slice()).unwrap_or_default() {
        let sel = &g.group_cluster_selector;
        let sel = match (
            label_selector(sel.label_selector.as_ref()),
            claim_selector(sel.claim_selector.as_ref()),
        ) {
            // Group selectors have no CEL (ocm.md §2.4).
            (Ok(labels), Ok(claims)) => Selector { labels, claims, cel: None },
            (Err(e), _) | (_, Err(e)) => return Err(e),
        };
        let (members, others): (Vec<&ClusterFacts>, Vec<&ClusterFacts>) =
            rest.into_iter().partition(|c| sel.matches(c));
        rest = others;
        push(&g.group_name, members.into_iter().map(|c| c.name.clone()).collect());
    }
    push("", rest.into_iter().map(|c| c.name.clone()).collect());
    if groups.is_empty() {
        groups.push(Group { index: 0, name: String::new(), clusters: Vec::new() });
    }
    Ok(groups)
}

/// The PlacementDecision objects of an outcome: (name, group, decisions), at most
/// [`DECISIONS_PER_OBJECT`] each, numbered from 1 across the groups; an empty group still has one.
pub fn slices<'a>(placement: &str, groups: &'a [Group]) -> Vec<(String, &'a Group, &'a [String])> {
    let mut out = Vec::new();
    for g in groups {
        if g.clusters.is_empty() {
            out.push((format!("{placement}-decision-{}", out.len() + 1), g, &g.clusters[..]));
            continue;
        }
        for chunk in g.clusters.chunks(DECISIONS_PER_OBJECT) {
            out.push((format!("{placement}-decision-{}", out.len() + 1), g, chunk));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    //! One case per rule of ocm.md §5 (and §6's set membership), each checked against what
    //! OCM's scheduler decides.

    use super::*;
    use ocm_proto::api::meta::Time;
    use serde_json::json;

    /// A cluster: name, labels, claims, taints `key=value:Effect@secondsAgo`, cpu, memory.
    struct C {
        facts: ClusterFacts,
        /// More of the object, for CEL: merged over what the facts say.
        extra: serde_json::Map<String, serde_json::Value>,
    }

    fn c(name: &str) -> C {
        let mut labels = BTreeMap::new();
        labels.insert("cluster.open-cluster-management.io/clusterset".into(), "default".into());
        let facts = ClusterFacts { name: name.into(), labels, ..ClusterFacts::default() };
        C { facts, extra: serde_json::Map::new() }
    }

    impl C {
        /// Sets a top-level part of the object (`status`, `spec`, ...), or `metadata.annotations`.
        fn with(mut self, part: &str, v: serde_json::Value) -> C {
            self.extra.insert(part.into(), v);
            self
        }
        /// The ManagedCluster the facts came from, as CEL reads it.
        fn object(&self) -> serde_json::Value {
            let f = &self.facts;
            let claims: Vec<_> =
                f.claims.iter().map(|(k, v)| json!({"name": k, "value": v})).collect();
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
        fn label(mut self, k: &str, v: &str) -> C {
            self.facts.labels.insert(k.into(), v.into());
            self
        }
        fn claim(mut self, k: &str, v: &str) -> C {
            self.facts.claims.insert(k.into(), v.into());
            self
        }
        fn taint(mut self, key: &str, value: &str, effect: &str, secs_ago: Option<i64>) -> C {
            let now = Timestamp::now();
            self.facts.taints.push(Taint {
                key: key.into(),
                value: (!value.is_empty()).then(|| value.into()),
                effect: effect.into(),
                time_added: secs_ago
                    .map(|s| Time(now.checked_sub(Duration::from_secs(s.unsigned_abs())).unwrap())),
            });
            self
        }
        fn cpu(mut self, millis: f64) -> C {
            self.facts.cpu = Some(millis);
            self
        }
        fn memory(mut self, v: f64) -> C {
            self.facts.memory = Some(v);
            self
        }
        fn deleting(mut self) -> C {
            self.facts.deleting = true;
            self
        }
    }

    /// The world of a case.
    struct Case {
        clusters: Vec<Arc<ClusterFacts>>,
        sets: BTreeMap<String, Result<LabelSelector, String>>,
        bindings: BTreeSet<String>,
        elsewhere: HashMap<String, u32>,
        own: HashMap<String, u32>,
        scores: HashMap<(String, String), Arc<ScoreObject>>,
        objects: HashMap<String, Arc<serde_json::Value>>,
    }

    fn world(clusters: Vec<C>) -> Case {
        let mut sets = BTreeMap::new();
        for set in ["default", "prod"] {
            let sel = format!("cluster.open-cluster-management.io/clusterset={set}");
            sets.insert(set.to_owned(), Ok(LabelSelector::parse(&sel).unwrap()));
        }
        sets.insert("global".into(), Ok(LabelSelector::default()));
        Case {
            objects: clusters
                .iter()
                .map(|c| (c.facts.name.clone(), Arc::new(c.object())))
                .collect(),
            clusters: clusters.into_iter().map(|c| Arc::new(c.facts)).collect(),
            sets,
            bindings: ["default".to_owned()].into(),
            elsewhere: HashMap::new(),
            own: HashMap::new(),
            scores: HashMap::new(),
        }
    }

    impl Case {
        fn bind(mut self, sets: &[&str]) -> Case {
            self.bindings = sets.iter().map(|s| (*s).to_owned()).collect();
            self
        }
        fn current(mut self, clusters: &[&str]) -> Case {
            self.own = clusters.iter().map(|s| ((*s).to_owned(), 1)).collect();
            self
        }
        fn elsewhere(mut self, counts: &[(&str, u32)]) -> Case {
            self.elsewhere = counts.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect();
            self
        }
        fn score(self, cluster: &str, value: AddOnValue) -> Case {
            let (v, valid_until) = match value {
                AddOnValue::Value(v) => (v, None),
                AddOnValue::Expired => (50, Some(Timestamp::now() - Duration::from_secs(60))),
                AddOnValue::Missing => return self,
            };
            self.score_object(cluster, "res", &[("s", v)], valid_until)
        }
        fn score_object(
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

        fn run(&self, spec: serde_json::Value) -> Outcome {
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
                now: Timestamp::now(),
            };
            let explained = schedule(&placement, &world, true);
            let quiet = schedule(&placement, &world, false);
            assert_eq!(
                (
                    &explained.groups,
                    &explained.satisfied,
                    &explained.misconfigured,
                    &explained.counts
                ),
                (&quiet.groups, &quiet.satisfied, &quiet.misconfigured, &quiet.counts),
                "explaining changes nothing decided"
            );
            explained
        }
    }

    /// The decided clusters, group by group.
    fn decided(o: &Outcome) -> Vec<Vec<&str>> {
        o.groups.iter().map(|g| g.clusters.iter().map(String::as_str).collect()).collect()
    }

    fn flat(o: &Outcome) -> Vec<&str> {
        decided(o).into_iter().flatten().collect()
    }

    fn reason(o: &Outcome) -> &str {
        o.satisfied.reason
    }

    fn abc() -> Vec<C> {
        vec![c("a"), c("b"), c("c")]
    }

    #[test]
    fn no_binding_in_the_namespace() {
        let o = world(abc()).bind(&[]).run(json!({}));
        assert_eq!(reason(&o), "NoManagedClusterSetBindings");
        assert_eq!(
            o.satisfied.message,
            "No valid ManagedClusterSetBindings found in placement namespace"
        );
        assert_eq!(decided(&o), vec![Vec::<&str>::new()], "one empty group");
    }

    #[test]
    fn a_binding_naming_no_set_is_not_valid() {
        let o = world(abc()).bind(&["nope"]).run(json!({}));
        assert_eq!(reason(&o), "NoManagedClusterSetBindings");
    }

    #[test]
    fn cluster_sets_must_intersect_the_bound_ones() {
        let o = world(abc()).run(json!({"clusterSets": ["prod", "qa"]}));
        assert_eq!(reason(&o), "NoIntersection");
        assert_eq!(
            o.satisfied.message,
            "None of ManagedClusterSets [prod,qa] is bound to placement namespace"
        );
    }

    #[test]
    fn bound_sets_without_members() {
        let o = world(abc()).bind(&["prod"]).run(json!({}));
        assert_eq!(reason(&o), "AllManagedClusterSetsEmpty");
        assert_eq!(
            o.satisfied.message,
            "All ManagedClusterSets [prod] have no member ManagedCluster"
        );
    }

    #[test]
    fn an_empty_spec_selects_every_member_of_the_bound_sets() {
        let clusters = vec![
            c("b"),
            c("a"),
            c("p").label("cluster.open-cluster-management.io/clusterset", "prod"),
        ];
        let o = world(clusters).run(json!({}));
        assert_eq!(flat(&o), ["a", "b"]);
        assert_eq!((o.satisfied.status, reason(&o)), ("True", "AllDecisionsScheduled"));
        assert_eq!(o.satisfied.message, "All cluster decisions scheduled");
        assert_eq!(o.selected, 2);
    }

    #[test]
    fn cluster_sets_narrow_the_bound_ones() {
        let clusters =
            vec![c("a"), c("p").label("cluster.open-cluster-management.io/clusterset", "prod")];
        let o = world(clusters).bind(&["default", "prod"]).run(json!({"clusterSets": ["prod"]}));
        assert_eq!(flat(&o), ["p"]);
    }

    #[test]
    fn a_label_selector_set_selects_across_exclusive_sets() {
        let clusters =
            vec![c("a"), c("p").label("cluster.open-cluster-management.io/clusterset", "prod")];
        let o = world(clusters).bind(&["global"]).run(json!({}));
        assert_eq!(flat(&o), ["a", "p"]);
    }

    #[test]
    fn deleting_clusters_are_not_candidates() {
        let o = world(vec![c("a"), c("b").deleting()]).run(json!({}));
        assert_eq!(flat(&o), ["a"]);
        let v = o.verdicts.iter().find(|v| v.cluster == "b").unwrap();
        assert_eq!(v.step, Step::Deleting);
    }

    #[test]
    fn predicate_match_labels() {
        let o = world(vec![c("a").label("env", "dev"), c("b").label("env", "prod")])
            .run(json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}}]}));
        assert_eq!(flat(&o), ["b"]);
    }

    #[test]
    fn predicate_match_expressions() {
        let o = world(vec![c("a").label("env", "dev"), c("b").label("env", "prod"), c("c")]).run(
            json!({
                "predicates": [{"requiredClusterSelector": {"labelSelector": {"matchExpressions": [
                    {"key": "env", "operator": "Exists"},
                    {"key": "env", "operator": "NotIn", "values": ["dev"]},
                ]}}}]
            }),
        );
        assert_eq!(flat(&o), ["b"]);
    }

    #[test]
    fn predicates_are_ored() {
        let o = world(vec![c("a").label("x", "1"), c("b").label("y", "1"), c("c")]).run(json!({
            "predicates": [
                {"requiredClusterSelector": {"labelSelector": {"matchLabels": {"x": "1"}}}},
                {"requiredClusterSelector": {"labelSelector": {"matchLabels": {"y": "1"}}}},
            ]
        }));
        assert_eq!(flat(&o), ["a", "b"]);
        let v = o.verdicts.iter().find(|v| v.cluster == "c").unwrap();
        assert_eq!((v.step, v.reason.as_str()), (Step::Predicate, "matches no predicate"));
    }

    #[test]
    fn claim_selector_reads_cluster_claims() {
        let o = world(vec![c("a").claim("region", "eu"), c("b").claim("region", "us"), c("c")])
            .run(json!({
                "predicates": [{"requiredClusterSelector": {"claimSelector": {"matchExpressions": [
                    {"key": "region", "operator": "In", "values": ["eu", "ap"]},
                ]}}}]
            }));
        assert_eq!(flat(&o), ["a"]);
    }

    #[test]
    fn label_and_claim_selectors_of_one_predicate_are_anded() {
        let o = world(vec![
            c("a").label("env", "prod").claim("region", "eu"),
            c("b").label("env", "prod").claim("region", "us"),
            c("c").label("env", "dev").claim("region", "eu"),
        ])
        .run(json!({"predicates": [{"requiredClusterSelector": {
            "labelSelector": {"matchLabels": {"env": "prod"}},
            "claimSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}]},
        }}]}));
        assert_eq!(flat(&o), ["a"]);
    }

    #[test]
    fn an_invalid_selector_is_misconfigured() {
        let o = world(abc())
            .run(json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {
            "matchExpressions": [{"key": "env", "operator": "In"}]}}}]}));
        let m = o.misconfigured.as_deref().unwrap();
        assert!(m.starts_with("Predicate:"), "{m}");
        // As OCM: nothing selected, the decisions emptied, the usual Satisfied row.
        assert_eq!(reason(&o), "NoManagedClusterMatched");
        assert_eq!(decided(&o), vec![Vec::<&str>::new()]);
        // With no candidates the selectors are not read (OCM's predicate returns first).
        let o = world(abc())
            .bind(&["prod"])
            .run(json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {
            "matchExpressions": [{"key": "env", "operator": "In"}]}}}]}));
        assert_eq!((o.misconfigured.as_deref(), reason(&o)), (None, "AllManagedClusterSetsEmpty"));
    }

    /// The clusters a `celSelector` of `exprs` selects, and why the others were dropped.
    fn cel(case: &Case, exprs: &[&str]) -> (Vec<String>, Vec<(String, String)>) {
        let o = case.run(json!({"predicates": [{"requiredClusterSelector": {
            "celSelector": {"celExpressions": exprs}}}]}));
        assert_eq!(o.misconfigured, None, "{exprs:?}");
        let dropped = o
            .verdicts
            .iter()
            .filter(|v| v.step == Step::Predicate)
            .map(|v| (v.cluster.clone(), v.reason.clone()))
            .collect();
        (flat(&o).into_iter().map(str::to_owned).collect(), dropped)
    }

    fn fleet() -> Case {
        world(vec![
            c("a").label("env", "prod").claim("platform.open-cluster-management.io", "AWS").with(
                "status",
                json!({"version": {"kubernetes": "v1.30.2"}, "allocatable": {"cpu": "8", "memory": "32Gi"}}),
            ),
            c("b").label("env", "dev").with(
                "status",
                json!({"version": {"kubernetes": "v1.28.9"}, "allocatable": {"cpu": "2", "memory": "8Gi"}}),
            ),
            c("c")
                .label("env", "prod")
                .with("metadata.annotations", json!({"cfg": "{\"tier\": \"gold\", \"n\": 3}"})),
        ])
        .score_object("a", "load", &[("cpu", 80), ("mem", 20)], None)
        .score_object("b", "load", &[("cpu", 10), ("mem", 90)], None)
    }

    #[test]
    fn cel_reads_the_whole_cluster() {
        let case = fleet();
        let (picked, _) = cel(&case, &["managedCluster.metadata.labels[\"env\"] == \"prod\""]);
        assert_eq!(picked, ["a", "c"]);
        let (picked, _) = cel(&case, &["managedCluster.metadata.name.startsWith(\"b\")"]);
        assert_eq!(picked, ["b"]);
        let (picked, _) = cel(
            &case,
            &[
                "managedCluster.status.clusterClaims.exists(c, c.name == \"platform.open-cluster-management.io\" && c.value == \"AWS\")",
            ],
        );
        assert_eq!(picked, ["a"]);
        // Expressions are ANDed; predicates are ORed (a label predicate picks c as well).
        let (picked, _) = cel(
            &case,
            &[
                "managedCluster.metadata.labels.env == \"prod\"",
                "has(managedCluster.status.version)",
            ],
        );
        assert_eq!(picked, ["a"]);
        let o = case.run(json!({"predicates": [
            {"requiredClusterSelector": {"celSelector": {"celExpressions": ["managedCluster.metadata.name == \"b\""]}}},
            {"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}},
                "celSelector": {"celExpressions": ["managedCluster.metadata.name != \"a\""]}}}]}));
        assert_eq!(flat(&o), ["b", "c"]);
    }

    #[test]
    fn cel_has_the_kubernetes_libraries_and_parse_json() {
        let case = fleet();
        for (expr, want) in [
            (
                "semver(managedCluster.status.version.kubernetes.substring(1)).isGreaterThan(semver(\"1.29.0\"))",
                vec!["a"],
            ),
            (
                "quantity(managedCluster.status.allocatable.memory).isGreaterThan(quantity(\"16Gi\"))",
                vec!["a"],
            ),
            (
                "managedCluster.status.version.kubernetes.matches(\"^v1\\\\.2[0-9]\\\\.\")",
                vec!["b"],
            ),
            ("managedCluster.metadata.name.upperAscii() == \"C\"", vec!["c"]),
            (
                "isURL(\"https://\" + managedCluster.metadata.name + \".example.com\")",
                vec!["a", "b", "c"],
            ),
            ("managedCluster.metadata.annotations.cfg.parseJSON().tier == \"gold\"", vec!["c"]),
            ("[3, 1, 2].isSorted() || managedCluster.metadata.name == \"a\"", vec!["a"]),
        ] {
            let (picked, dropped) = cel(&case, &[expr]);
            assert_eq!(picked, want, "{expr}: {dropped:?}");
        }
    }

    #[test]
    fn cel_scores_reads_the_clusters_addon_placement_score() {
        let case = fleet();
        let (picked, dropped) = cel(
            &case,
            &["managedCluster.scores(\"load\").exists(s, s.name == \"cpu\" && s.value > 50)"],
        );
        assert_eq!(picked, ["a"]);
        let c = dropped.iter().find(|(c, _)| c == "c").unwrap();
        assert!(c.1.contains("failed to get score"), "{c:?}");
        assert!(c.1.contains("\"load\" not found"), "{c:?}");
        let (picked, _) = cel(
            &case,
            &["managedCluster.scores(\"load\").filter(s, s.quantity == \"90\").size() == 1"],
        );
        assert_eq!(picked, ["b"]);
        // A name that is not a literal cannot be costed, so it selects nothing (and says why).
        let (picked, dropped) = cel(&case, &["managedCluster.scores(\"lo\" + \"ad\").size() > 0"]);
        assert!(picked.is_empty());
        assert!(dropped[0].1.contains("scores() is bounded only as"), "{dropped:?}");
    }

    #[test]
    fn cel_errors_and_non_bools_select_nothing_and_say_why() {
        let case = fleet();
        let (picked, dropped) = cel(&case, &["managedCluster.metadata.labels.missing == \"x\""]);
        assert!(picked.is_empty());
        assert!(dropped[0].1.starts_with("matches no predicate (celSelector: "), "{dropped:?}");
        assert!(dropped[0].1.contains("missing"), "{dropped:?}");
        let (picked, dropped) = cel(&case, &["size(managedCluster.metadata.labels)"]);
        assert!(picked.is_empty());
        assert!(dropped[0].1.contains("returned int, not a bool"), "{dropped:?}");
        let (_, dropped) = cel(&case, &["managedCluster.metadata.name == \"a\""]);
        assert!(dropped.iter().all(|(_, why)| why.contains(": false")), "{dropped:?}");
    }

    #[test]
    fn cel_compile_errors_are_misconfigured_and_select_nothing() {
        let o = fleet().run(json!({"predicates": [{"requiredClusterSelector": {
            "celSelector": {"celExpressions": ["managedCluster.metadata.name =="]}}}]}));
        let m = o.misconfigured.as_deref().unwrap();
        assert!(m.starts_with("Predicate:compilation failed: "), "{m}");
        assert_eq!(decided(&o), vec![Vec::<&str>::new()]);
        // Limits: length and depth are refused at compile time, before anything recurses.
        let long = format!("\"{}\" == \"\"", "x".repeat(cel::MAX_LEN));
        let deep = vec!["1"; cel::MAX_DEPTH + 1].join(" + ") + " > 0";
        for (expr, want) in [(long, "bytes long"), (deep, "levels are allowed")] {
            let o = fleet().run(json!({"predicates": [{"requiredClusterSelector": {
                "celSelector": {"celExpressions": [expr]}}}]}));
            let m = o.misconfigured.as_deref().unwrap();
            assert!(m.starts_with("Predicate:compilation failed: ") && m.contains(want), "{m}");
        }
        // Just within the limits, a deep expression runs (on CEL's own stack).
        let deep = vec!["1"; cel::MAX_DEPTH - 10].join(" + ") + " > 0";
        let nested = format!("{}1{} != []", "[".repeat(90), "]".repeat(90));
        assert_eq!(cel(&fleet(), &[&deep, &nested]).0, ["a", "b", "c"]);
    }

    #[test]
    fn cel_cost_is_bounded_before_evaluating() {
        let case = fleet();
        // Two loops over the labels cost little.
        let (picked, _) = cel(
            &case,
            &[
                "managedCluster.metadata.labels.all(k, managedCluster.metadata.labels.exists(j, j == k))",
            ],
        );
        assert_eq!(picked, ["a", "b", "c"]);
        // Three nested loops over 100 items are 10^6 iterations: over the per-call limit.
        let hundred =
            format!("[{}]", (0..100).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
        let expensive =
            format!("{hundred}.all(x, {hundred}.all(y, {hundred}.all(z, x + y + z >= 0)))");
        let (picked, dropped) = cel(&case, &[&expensive]);
        assert!(picked.is_empty());
        assert!(dropped[0].1.contains("exceeds the per-expression limit"), "{dropped:?}");
        // Eleven expressions just under the per-call limit exceed the cluster's budget together.
        let under = format!("{hundred}.all(x, {hundred}.all(y, x + y >= 0))");
        let many: Vec<&str> = std::iter::repeat_n(under.as_str(), 400).collect();
        let (picked, dropped) = cel(&case, &many);
        assert!(picked.is_empty());
        assert!(dropped[0].1.contains("exceed the cost budget"), "{dropped:?}");
    }

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
        assert!(after > Duration::from_secs(285) && after <= Duration::from_secs(290), "{after:?}");
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

    #[test]
    fn decision_groups_take_their_members_by_name_then_the_rest() {
        let clusters =
            vec![c("d").label("canary", "true"), c("b").label("canary", "true"), c("c"), c("a")];
        let o = world(clusters).run(json!({"decisionStrategy": {"groupStrategy": {"decisionGroups": [
            {"groupName": "canary", "groupClusterSelector": {"labelSelector": {"matchLabels": {"canary": "true"}}}}]}}}));
        assert_eq!(decided(&o), vec![vec!["b", "d"], vec!["a", "c"]]);
        let names: Vec<(&str, usize)> =
            o.groups.iter().map(|g| (g.name.as_str(), g.index)).collect();
        assert_eq!(names, [("canary", 0), ("", 1)]);
    }

    #[test]
    fn a_percentage_per_group_rounds_up() {
        let clusters: Vec<C> = (0..5).map(|i| c(&format!("c{i}"))).collect();
        let o = world(clusters).run(
            json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "25%"}}}),
        );
        // ceil(25% of 5) = 2 per group.
        assert_eq!(decided(&o), vec![vec!["c0", "c1"], vec!["c2", "c3"], vec!["c4"]]);
        // In floating point, as OCM: 7 / 100 × 100 = 7.000000000000001, so groups of 8.
        let clusters: Vec<C> = (0..100).map(|i| c(&format!("c{i:03}"))).collect();
        let o = world(clusters).run(
            json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "7%"}}}),
        );
        assert_eq!(o.groups[0].clusters.len(), 8);
        assert_eq!(o.groups.len(), 13);
    }

    #[test]
    fn a_number_per_group_chunks_every_group() {
        let clusters =
            vec![c("a").label("g", "1"), c("b").label("g", "1"), c("c").label("g", "1"), c("d")];
        let o = world(clusters).run(json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": 2,
            "decisionGroups": [{"groupName": "one", "groupClusterSelector": {"labelSelector": {"matchLabels": {"g": "1"}}}}]}}}));
        assert_eq!(decided(&o), vec![vec!["a", "b"], vec!["c"], vec!["d"]]);
        let names: Vec<&str> = o.groups.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(names, ["one", "one", ""]);
    }

    #[test]
    fn a_per_group_count_beyond_the_selection_is_one_group() {
        let o = world(abc())
            .run(json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": 10}}}));
        assert_eq!(decided(&o), vec![vec!["a", "b", "c"]]);
    }

    #[test]
    fn a_non_percentage_string_per_group_is_misconfigured() {
        let o = world(abc()).run(
            json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "ten"}}}),
        );
        assert_eq!(
            o.misconfigured.as_deref(),
            Some(":{1 0 ten} invalid type: string is not a percentage")
        );
        assert!(o.groups.is_empty(), "OCM writes no decision object then");
    }

    #[test]
    fn decisions_are_sliced_by_a_hundred_across_groups() {
        let clusters: Vec<C> = (0..250)
            .map(|i| {
                let cl = c(&format!("c{i:03}"));
                if i < 120 { cl.label("first", "yes") } else { cl }
            })
            .collect();
        let o = world(clusters).run(json!({"decisionStrategy": {"groupStrategy": {"decisionGroups": [
            {"groupName": "first", "groupClusterSelector": {"labelSelector": {"matchLabels": {"first": "yes"}}}}]}}}));
        let s = slices("p", &o.groups);
        let shape: Vec<(&str, usize, usize)> =
            s.iter().map(|(name, g, cl)| (name.as_str(), g.index, cl.len())).collect();
        assert_eq!(
            shape,
            [
                ("p-decision-1", 0, 100),
                ("p-decision-2", 0, 20),
                ("p-decision-3", 1, 100),
                ("p-decision-4", 1, 30)
            ]
        );
        assert_eq!(s[2].2[0], "c120", "each group's clusters in name order");
    }

    #[test]
    fn nothing_selected_is_one_empty_decision() {
        let o = world(abc()).run(json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"x": "y"}}}}]}));
        let s = slices("p", &o.groups);
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].0.as_str(), s[0].2.len()), ("p-decision-1", 0));
    }

    #[test]
    fn every_cluster_is_explained() {
        let clusters = vec![
            c("a"),
            c("p").label("cluster.open-cluster-management.io/clusterset", "prod"),
            c("t").taint("x", "", "NoSelect", None),
        ];
        let o = world(clusters).run(json!({}));
        let steps: Vec<(&str, Step)> =
            o.verdicts.iter().map(|v| (v.cluster.as_str(), v.step)).collect();
        assert_eq!(
            steps,
            [("a", Step::Selected), ("t", Step::TaintToleration), ("p", Step::ClusterSet)]
        );
    }
}
