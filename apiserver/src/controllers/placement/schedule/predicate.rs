//! The Predicate step: a cluster stays when some predicate selects it, a predicate being its
//! label selector AND its claim selector AND its CEL expressions (`celSelector`). Also the label
//! and claim selectors decision groups use.

use std::cell::OnceCell;

use ocm_proto::api::cluster::v1beta1::{ClusterClaimSelector, ClusterPredicate, PlacementSpec};
use ocm_proto::api::meta::LabelSelector as ApiLabelSelector;
use ocm_proto::selector::LabelSelector;

use super::cel;
use super::explain::{Step, Tally};
use super::world::{ClusterFacts, World};

/// A claim selector as a label selector over the claims map.
pub(super) fn claim_selector(sel: Option<&ClusterClaimSelector>) -> Result<LabelSelector, String> {
    let Some(sel) = sel else { return Ok(LabelSelector::default()) };
    let api = ApiLabelSelector {
        match_expressions: Some(sel.match_expressions.clone()),
        match_labels: None,
    };
    LabelSelector::from_api(&api).map_err(|e| e.to_string())
}

pub(super) fn label_selector(sel: Option<&ApiLabelSelector>) -> Result<LabelSelector, String> {
    sel.map_or(Ok(LabelSelector::default()), |s| {
        LabelSelector::from_api(s).map_err(|e| e.to_string())
    })
}

/// A label selector and a claim selector, both of which must match.
pub(super) struct Selector {
    pub(super) labels: LabelSelector,
    pub(super) claims: LabelSelector,
    pub(super) cel: Option<cel::Expressions>,
}

impl Selector {
    /// Whether the labels and claims match (the CEL expressions are asked separately).
    pub(super) fn matches(&self, c: &ClusterFacts) -> bool {
        self.labels.matches(|k| c.labels.get(k).map(String::as_str))
            && self.claims.matches(|k| c.claims.get(k).map(String::as_str))
    }
}

/// A predicate's CEL expressions, when it has any.
fn cel_expressions(p: &ClusterPredicate) -> Option<&[String]> {
    let exprs = &p.required_cluster_selector.as_ref()?.cel_selector.as_ref()?.cel_expressions;
    (!exprs.is_empty()).then_some(exprs.as_slice())
}

/// Whether some predicate has CEL expressions (which then run on CEL's own stack).
pub(super) fn uses_cel(spec: &PlacementSpec) -> bool {
    spec.predicates.iter().any(|p| cel_expressions(p).is_some())
}

/// The Predicate filter: the candidates some predicate (labels AND claims AND CEL) selects. A
/// predicate that cannot be read or compiled is `Predicate:<why>`.
pub(super) fn filter<'c>(
    spec: &PlacementSpec,
    world: &World<'_>,
    candidates: Vec<&'c ClusterFacts>,
    tally: &mut Tally,
) -> Result<Vec<&'c ClusterFacts>, String> {
    let predicates = spec.predicates.iter().map(compile).collect::<Result<Vec<_>, _>>()?;
    // What the CEL expressions read of a cluster: only that is converted.
    let reads =
        cel::Reads::union(predicates.iter().filter_map(|p| p.cel.as_ref().map(|e| &e.reads)));
    let mut passed = Vec::new();
    for c in candidates {
        if predicates.is_empty() {
            passed.push(c);
            continue;
        }
        match selects(&predicates, c, world, &reads) {
            Ok(()) => passed.push(c),
            Err(Some(why)) => tally.drop(
                c,
                Step::Predicate,
                &format!("matches no predicate (celSelector: {why})"),
            ),
            Err(None) => tally.drop(c, Step::Predicate, "matches no predicate"),
        }
    }
    Ok(passed)
}

/// One predicate as a selector: its label and claim selectors, its CEL expressions compiled.
fn compile(p: &ClusterPredicate) -> Result<Selector, String> {
    let Some(sel) = &p.required_cluster_selector else {
        return Ok(Selector {
            labels: LabelSelector::default(),
            claims: LabelSelector::default(),
            cel: None,
        });
    };
    let labels = label_selector(sel.label_selector.as_ref());
    let claims = claim_selector(sel.claim_selector.as_ref());
    let (labels, claims) = match (labels, claims) {
        (Ok(labels), Ok(claims)) => (labels, claims),
        (Err(e), _) | (_, Err(e)) => return Err(format!("Predicate:{e}")),
    };
    let cel =
        cel_expressions(p).map(cel::compile).transpose().map_err(|e| format!("Predicate:{e}"))?;
    Ok(Selector { labels, claims, cel })
}

/// Whether some predicate selects `c`; when none does, the first reason a CEL selector gave for
/// not selecting it (`None` when no CEL expression was evaluated).
fn selects(
    predicates: &[Selector],
    c: &ClusterFacts,
    world: &World<'_>,
    reads: &cel::Reads,
) -> Result<(), Option<String>> {
    // The cluster's object and its CEL form, fetched and made once for all predicates.
    let json = OnceCell::new();
    let subject = OnceCell::new();
    let mut refused: Option<String> = None;
    for p in predicates.iter().filter(|p| p.matches(c)) {
        let Some(exprs) = &p.cel else {
            return Ok(());
        };
        let Some(object) = json.get_or_init(|| (world.object)(&c.name)) else {
            refused.get_or_insert_with(|| "the cluster is gone".to_owned());
            continue;
        };
        let subject = subject.get_or_init(|| cel::Subject::new(&c.name, object, reads));
        match exprs.matches(subject, world.scores) {
            Ok(()) => return Ok(()),
            Err(why) => {
                tracing::debug!(cluster = %c.name, %why, "celSelector did not select");
                refused.get_or_insert(why);
            }
        }
    }
    Err(refused)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::controllers::placement::cel;
    use crate::controllers::placement::schedule::test_util::*;

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
}
