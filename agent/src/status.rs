//! What the agent reports of a work's manifests beyond applying them (ocm.md §4.3–§4.4): the
//! `manifestConfigs` options a manifest takes (OCM's matching: group and resource exactly, name
//! and namespace with `*` wildcards; from the matching entries in order, the first feedback
//! rules, update strategy and condition rules given), status feedback (`WellKnownStatus`,
//! `JSONPaths`) with `StatusFeedbackSynced`, the conditions of condition rules written at the
//! work's generation with those of other generations pruned, and the work-level conditions
//! aggregated from the manifests' (`Available`, and each type a rule made).

use std::collections::BTreeMap;

use ocm_proto::api::meta::{
    CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN, Condition, condition, set_condition,
};
use ocm_proto::api::work::v1::{
    self as v1, CONDITION_AVAILABLE, CONDITION_PROGRESSING, FEEDBACK_JSON_PATHS,
    FEEDBACK_WELL_KNOWN_STATUS, FIELD_VALUE_BOOLEAN, FIELD_VALUE_INTEGER, FIELD_VALUE_STRING,
    FeedbackRule, FeedbackValue, FieldValue, ManifestCondition, ManifestConfigOption,
    REASON_CONDITION_RULES_AGGREGATED, REASON_RESOURCES_AVAILABLE, REASON_RESOURCES_NOT_AVAILABLE,
    REASON_RESOURCES_STATUS_UNKNOWN, ResourceIdentifier,
};
use ocm_proto::jsonpath::JsonPath;
use serde_json::Value;

use crate::cluster::Applied;

/// The reason prefix of every condition a condition rule makes (and of their aggregates).
const RULE_REASON_PREFIX: &str = "ConditionRule";

/// Whether `value` matches `pattern`, where each `*` stands for any run of characters.
pub(crate) fn wildcard(value: &str, pattern: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else { return value == pattern };
    let Some(mut tail) = value.strip_prefix(first) else { return false };
    let mut parts: Vec<&str> = rest.split('*').collect();
    let last = parts.pop().unwrap_or("");
    for part in parts {
        match tail.find(part) {
            Some(at) => tail = &tail[at + part.len()..],
            None => return false,
        }
    }
    tail.ends_with(last)
}

/// Whether a manifest config's `ResourceIdentifier` names `r`: group and resource exactly, name
/// and namespace as patterns.
fn identifies(id: &ResourceIdentifier, r: &Applied) -> bool {
    id.group.as_deref().unwrap_or("") == r.group.as_deref().unwrap_or("")
        && id.resource == r.resource
        && wildcard(r.namespace.as_deref().unwrap_or(""), id.namespace.as_deref().unwrap_or(""))
        && wildcard(&r.name, &id.name)
}

/// The options of the manifest that resolved to `r`: from the `configs` naming it, in order,
/// the first feedback rules, update strategy and condition rules given; `None` when no entry
/// names it.
pub fn config_for(configs: &[ManifestConfigOption], r: &Applied) -> Option<ManifestConfigOption> {
    let mut matching = configs.iter().filter(|c| identifies(&c.resource_identifier, r)).peekable();
    let mut merged = matching.peek().map(|c| ManifestConfigOption {
        resource_identifier: c.resource_identifier.clone(),
        ..ManifestConfigOption::default()
    })?;
    for c in matching {
        if merged.feedback_rules.is_empty() {
            merged.feedback_rules.clone_from(&c.feedback_rules);
        }
        if merged.update_strategy.is_none() {
            merged.update_strategy.clone_from(&c.update_strategy);
        }
        if merged.condition_rules.is_empty() {
            merged.condition_rules.clone_from(&c.condition_rules);
        }
    }
    Some(merged)
}

/// OCM's `WellKnownStatus` fields per kind: (name, path under `.status`, or a condition's status).
fn well_known(group: &str, kind: &str) -> &'static [(&'static str, &'static str)] {
    match (group, kind) {
        ("apps", "Deployment") => &[
            ("ReadyReplicas", "readyReplicas"),
            ("Replicas", "replicas"),
            ("AvailableReplicas", "availableReplicas"),
        ],
        ("apps", "DaemonSet") => &[
            ("NumberReady", "numberReady"),
            ("DesiredNumberScheduled", "desiredNumberScheduled"),
            ("NumberAvailable", "numberAvailable"),
        ],
        ("batch", "Job") => &[("JobComplete", "condition:Complete"), ("JobSucceeded", "succeeded")],
        ("", "Pod") => &[("PodReady", "condition:Ready"), ("PodPhase", "phase")],
        _ => &[],
    }
}

/// A feedback value of a scalar (`None` for anything else).
fn field_value(v: &Value) -> Option<FieldValue> {
    let typed = |type_: &str| FieldValue { type_: type_.to_owned(), ..FieldValue::default() };
    match v {
        Value::Number(n) => {
            n.as_i64().map(|i| FieldValue { integer: Some(i), ..typed(FIELD_VALUE_INTEGER) })
        }
        Value::String(s) => {
            Some(FieldValue { string: Some(s.clone()), ..typed(FIELD_VALUE_STRING) })
        }
        Value::Bool(b) => Some(FieldValue { boolean: Some(*b), ..typed(FIELD_VALUE_BOOLEAN) }),
        _ => None,
    }
}

/// The value at `path` under the live object's `.status` (`condition:<type>` is that
/// condition's status; other paths are kubectl JSONPaths relative to `.status`, with or without
/// `{}`, as OCM reads them: `.readyReplicas`, `.conditions[?(@.type=="Ready")].status`). The
/// first match, or `None`; a path that does not parse is an error.
fn status_value<'a>(live: &'a Value, path: &str) -> Result<Option<&'a Value>, String> {
    let Some(status) = live.get("status") else { return Ok(None) };
    if let Some(kind) = path.strip_prefix("condition:") {
        let conditions = status.get("conditions").and_then(Value::as_array);
        let found = conditions.into_iter().flatten().find(|c| c["type"] == kind);
        return Ok(found.and_then(|c| c.get("status")));
    }
    let inner = path.trim();
    let inner = inner.strip_prefix('{').and_then(|s| s.strip_suffix('}')).unwrap_or(inner);
    let relative =
        if inner.starts_with(['.', '[']) { inner.to_owned() } else { format!(".{inner}") };
    let path = JsonPath::parse(&relative).map_err(|e| e.to_string())?;
    Ok(path.find(status).into_iter().next())
}

/// The status feedback of a live object under its rules (`WellKnownStatus`, `JSONPaths`), and
/// the `StatusFeedbackSynced` condition to report with it. A value not reported yet is left
/// out, not a failure (as OCM).
pub fn feedback(
    group: &str,
    kind: &str,
    live: &Value,
    rules: &[FeedbackRule],
) -> (Vec<FeedbackValue>, Condition) {
    const SYNCED: &str = "StatusFeedbackSynced";
    if rules.is_empty() {
        return (Vec::new(), condition(SYNCED, CONDITION_TRUE, "NoStatusFeedbackSynced", ""));
    }
    let mut values = Vec::new();
    let mut failed = Vec::new();
    for rule in rules {
        let wanted: Vec<(String, String)> = match rule.type_.as_str() {
            FEEDBACK_WELL_KNOWN_STATUS => well_known(group, kind)
                .iter()
                .map(|(n, p)| (n.to_string(), p.to_string()))
                .collect(),
            FEEDBACK_JSON_PATHS => {
                rule.json_paths.iter().map(|p| (p.name.clone(), p.path.clone())).collect()
            }
            _ => Vec::new(),
        };
        for (name, path) in wanted {
            match status_value(live, &path) {
                Ok(Some(v)) => match field_value(v) {
                    Some(field_value) => values.push(FeedbackValue { name, field_value }),
                    None => failed.push(format!("{name}: the value at {path} is not a scalar")),
                },
                Ok(None) => {}
                Err(e) => failed.push(format!("{name}: {e}")),
            }
        }
    }
    let synced = if failed.is_empty() {
        condition(SYNCED, CONDITION_TRUE, SYNCED, "")
    } else {
        condition(SYNCED, CONDITION_FALSE, "StatusFeedbackSyncFailed", failed.join("; "))
    };
    (values, synced)
}

/// `conditions` with each of `new` set (apimachinery's rules: a transition time moves only with
/// the status).
pub fn with_conditions(
    mut conditions: Vec<Condition>,
    new: impl IntoIterator<Item = Condition>,
) -> Vec<Condition> {
    for c in new {
        set_condition(&mut conditions, c, crate::clock::now());
    }
    conditions
}

/// Whether a condition was made by a condition rule (or aggregates those): its reason starts
/// with `ConditionRule`.
pub fn made_by_rule(c: &Condition) -> bool {
    c.reason.starts_with(RULE_REASON_PREFIX)
}

/// Removes the rule-made conditions of another generation than `generation`: a removed rule
/// changes the work's generation, so such a condition is a removed rule's.
pub fn prune_rule_conditions(conditions: &mut Vec<Condition>, generation: Option<i64>) {
    let generation = generation.unwrap_or(0);
    conditions.retain(|c| !made_by_rule(c) || c.observed_generation.unwrap_or(0) == generation);
}

/// A manifest's `conditions` with the conditions its rules gave set at `generation` and the
/// stale rule-made ones pruned.
pub fn with_rule_conditions(
    conditions: Vec<Condition>,
    results: Vec<Condition>,
    generation: Option<i64>,
) -> Vec<Condition> {
    let results = results.into_iter().map(|mut c| {
        c.observed_generation = Some(generation.unwrap_or(0));
        c
    });
    let mut conditions = with_conditions(conditions, results);
    prune_rule_conditions(&mut conditions, generation);
    conditions
}

/// How the manifests' conditions of one type stand.
#[derive(Debug, Default)]
struct Tally {
    trues: usize,
    falses: usize,
    unknowns: usize,
    /// The last non-empty message seen.
    message: String,
}

/// The work-level conditions aggregated from the manifests' (ocm.md §4.4), at `generation`,
/// sorted by type: `Available` always, and one of each type a condition rule made.
pub fn aggregate(manifests: &[ManifestCondition], generation: Option<i64>) -> Vec<Condition> {
    let mut tallies: BTreeMap<&str, Tally> = BTreeMap::new();
    tallies.insert(CONDITION_AVAILABLE, Tally::default());
    for c in manifests.iter().flat_map(|m| &m.conditions) {
        if c.type_ != CONDITION_AVAILABLE && !made_by_rule(c) {
            continue;
        }
        let tally = tallies.entry(&c.type_).or_default();
        match c.status.as_str() {
            CONDITION_TRUE => tally.trues += 1,
            CONDITION_FALSE => tally.falses += 1,
            CONDITION_UNKNOWN => tally.unknowns += 1,
            _ => {}
        }
        if !c.message.is_empty() {
            tally.message.clone_from(&c.message);
        }
    }
    tallies
        .into_iter()
        .map(|(type_, tally)| {
            let mut c = if type_ == CONDITION_AVAILABLE {
                available(&tally, manifests.len())
            } else {
                from_rules(type_, &tally)
            };
            c.observed_generation = Some(generation.unwrap_or(0));
            c
        })
        .collect()
}

/// The work's `Available`: False if any manifest is not available, else Unknown if any is
/// unknown or none is available, else True.
fn available(t: &Tally, total: usize) -> Condition {
    if t.falses > 0 {
        let message = format!("{} of {total} resources are not available", t.falses);
        condition(CONDITION_AVAILABLE, CONDITION_FALSE, REASON_RESOURCES_NOT_AVAILABLE, message)
    } else if t.unknowns > 0 {
        let message = format!("{} of {total} resources have unknown status", t.unknowns);
        condition(CONDITION_AVAILABLE, CONDITION_UNKNOWN, REASON_RESOURCES_STATUS_UNKNOWN, message)
    } else if t.trues == 0 {
        let message = "cannot get any available resource";
        condition(CONDITION_AVAILABLE, CONDITION_UNKNOWN, REASON_RESOURCES_STATUS_UNKNOWN, message)
    } else {
        let message = "All resources are available";
        condition(CONDITION_AVAILABLE, CONDITION_TRUE, REASON_RESOURCES_AVAILABLE, message)
    }
}

/// The work's condition of a rule-made type: `Progressing` is True if any manifest's is, else
/// Unknown if any is, else False; any other type is False if any is, else Unknown if any is (or
/// none is True), else True. The message is the one manifest's, or says how many there are.
fn from_rules(type_: &str, t: &Tally) -> Condition {
    let status = if type_ == CONDITION_PROGRESSING {
        match (t.trues, t.unknowns) {
            (1.., _) => CONDITION_TRUE,
            (0, 1..) => CONDITION_UNKNOWN,
            _ => CONDITION_FALSE,
        }
    } else if t.falses > 0 {
        CONDITION_FALSE
    } else if t.unknowns > 0 || t.trues == 0 {
        CONDITION_UNKNOWN
    } else {
        CONDITION_TRUE
    };
    let total = t.trues + t.falses + t.unknowns;
    let message = if total == 1 && !t.message.is_empty() {
        t.message.clone()
    } else {
        format!("Aggregated from {total} manifest conditions")
    };
    condition(type_, status, REASON_CONDITION_RULES_AGGREGATED, message)
}

/// What became of one manifest in a pass.
#[derive(Debug)]
pub enum Seen {
    /// Applied: what it resolved to (with the live uid) and the live object.
    Applied(Applied, Value),
    /// Only read (its work or itself `Complete`): what it resolved to and the live object, if
    /// it is there.
    Read(Applied, Option<Value>),
    /// Not applied, and why.
    ApplyFailed(String),
    /// Not read, and why.
    ReadFailed(String),
}

impl Seen {
    /// The live object, where there is one.
    pub fn live(&self) -> Option<&Value> {
        match self {
            Seen::Applied(_, live) | Seen::Read(_, Some(live)) => Some(live),
            _ => None,
        }
    }

    /// What it resolved to, while the object is there.
    pub fn resource(&self) -> Option<&Applied> {
        match self {
            Seen::Applied(r, _) | Seen::Read(r, Some(_)) => Some(r),
            _ => None,
        }
    }
}

/// A manifest's status after a pass: its `previous` one updated with what was `seen`: `Applied`
/// (left as it was when only read), `Available`, feedback under the options' rules, and the
/// conditions its rules gave (`rules`; `None` leaves the rule-made ones as they were, as when
/// there is no live object to evaluate).
pub fn manifest_condition(
    resource_meta: v1::ManifestResourceMeta,
    previous: Option<&ManifestCondition>,
    seen: &Seen,
    config: Option<&ManifestConfigOption>,
    rules: Option<Vec<Condition>>,
    generation: Option<i64>,
) -> ManifestCondition {
    let mut conditions = previous.map(|p| p.conditions.clone()).unwrap_or_default();
    let mut status_feedback = previous.and_then(|p| p.status_feedback.clone());
    let mut new = Vec::new();
    if let Seen::Applied(..) = seen {
        new.push(condition(
            v1::CONDITION_APPLIED,
            CONDITION_TRUE,
            v1::REASON_APPLIED_MANIFEST_COMPLETE,
            "Apply manifest complete",
        ));
    }
    match seen {
        Seen::Applied(r, live) | Seen::Read(r, Some(live)) => {
            new.push(condition(
                CONDITION_AVAILABLE,
                CONDITION_TRUE,
                v1::REASON_RESOURCE_AVAILABLE,
                "Resource is available",
            ));
            let kind = resource_meta.kind.as_deref().unwrap_or("");
            let feedback_rules = config.map(|c| c.feedback_rules.as_slice()).unwrap_or_default();
            let (values, synced) =
                feedback(r.group.as_deref().unwrap_or(""), kind, live, feedback_rules);
            status_feedback = (!values.is_empty()).then_some(v1::StatusFeedbackResult { values });
            new.push(synced);
        }
        Seen::Read(_, None) => new.push(condition(
            CONDITION_AVAILABLE,
            CONDITION_FALSE,
            v1::REASON_RESOURCE_NOT_AVAILABLE,
            "Resource is not available",
        )),
        Seen::ApplyFailed(e) => {
            let message = format!("Failed to apply manifest: {e}");
            new.push(condition(
                v1::CONDITION_APPLIED,
                CONDITION_FALSE,
                v1::REASON_APPLIED_MANIFEST_FAILED,
                message.clone(),
            ));
            new.push(condition(
                CONDITION_AVAILABLE,
                CONDITION_UNKNOWN,
                v1::REASON_FETCHING_RESOURCE_FAILED,
                message,
            ));
        }
        Seen::ReadFailed(e) => new.push(condition(
            CONDITION_AVAILABLE,
            CONDITION_UNKNOWN,
            v1::REASON_FETCHING_RESOURCE_FAILED,
            format!("Failed to fetch resource: {e}"),
        )),
    }
    conditions = with_conditions(conditions, new);
    if let Some(rules) = rules {
        conditions = with_rule_conditions(conditions, rules, generation);
    }
    ManifestCondition { resource_meta, status_feedback, conditions }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn feedback_reads_well_known_fields_and_paths_and_refuses_non_scalars() {
        let live = json!({"status": {"readyReplicas": 2, "conditions": [{"type": "Ready", "status": "True"}],
                                     "nested": {"phase": "Running"}, "list": [1]}});
        let rules: Vec<FeedbackRule> = serde_json::from_value(json!([
            {"type": "WellKnownStatus"},
            {"type": "JSONPaths", "jsonPaths": [{"name": "p", "path": ".nested.phase"}, {"name": "l", "path": ".list"}]}])).unwrap();
        let (values, synced) = feedback("apps", "Deployment", &live, &rules);
        let names: Vec<&str> = values.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["ReadyReplicas", "p"], "absent values are left out");
        assert_eq!(values[0].field_value.integer, Some(2));
        assert_eq!(synced.status, CONDITION_FALSE);
        assert!(synced.message.contains("l: the value at .list is not a scalar"));
        let (none, synced) = feedback("apps", "Deployment", &live, &[]);
        assert!(none.is_empty() && synced.reason == "NoStatusFeedbackSynced");
        assert_eq!(status_value(&live, "condition:Ready"), Ok(Some(&json!("True"))));
    }

    #[test]
    fn feedback_paths_read_indexes_and_filters_as_kubectl_does() {
        let live = json!({"status": {
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "Progressing", "status": "False"}],
            "containers": [{"image": "a:1"}, {"image": "b:2"}]}});
        let rules: Vec<FeedbackRule> =
            serde_json::from_value(json!([{"type": "JSONPaths", "jsonPaths": [
            {"name": "ready", "path": ".conditions[?(@.type==\"Ready\")].status"},
            {"name": "first", "path": "{.containers[0].image}"},
            {"name": "last", "path": ".containers[-1].image"},
            {"name": "missing", "path": ".conditions[?(@.type==\"Absent\")].status"},
            {"name": "bad", "path": ".containers[?(@.image"}]}]))
            .unwrap();
        let (values, synced) = feedback("", "Pod", &live, &rules);
        let got: Vec<(&str, Option<&str>)> =
            values.iter().map(|v| (v.name.as_str(), v.field_value.string.as_deref())).collect();
        assert_eq!(got, [("ready", Some("True")), ("first", Some("a:1")), ("last", Some("b:2"))]);
        assert_eq!(synced.status, CONDITION_FALSE, "a path that does not parse fails the sync");
        assert!(synced.message.starts_with("bad: "), "{}", synced.message);
    }

    fn configmap(namespace: Option<&str>, name: &str) -> Applied {
        Applied {
            group: None,
            version: "v1".into(),
            resource: "configmaps".into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
            uid: None,
        }
    }

    #[test]
    fn wildcards_stand_for_any_run_of_characters() {
        for (value, pattern) in [
            ("a", "a"),
            ("abc", "*"),
            ("", "*"),
            ("app-1", "app-*"),
            ("x-app", "*-app"),
            ("a-b-c", "a*c"),
            ("abb", "a*b*b"),
            ("a.b", "a.b"),
        ] {
            assert!(wildcard(value, pattern), "{value} ~ {pattern}");
        }
        for (value, pattern) in [
            ("a", "b"),
            ("ab", "a*b*b"),
            ("a", "a*a"),
            ("xapp", "app*"),
            ("axb", "a.b"),
            ("", "a*"),
        ] {
            assert!(!wildcard(value, pattern), "{value} !~ {pattern}");
        }
    }

    #[test]
    fn options_merge_from_every_matching_entry_in_order() {
        let configs: Vec<ManifestConfigOption> = serde_json::from_value(json!([
            {"resourceIdentifier": {"resource": "configmaps", "name": "other", "namespace": "*"},
             "updateStrategy": {"type": "ReadOnly"}},
            {"resourceIdentifier": {"resource": "configmaps", "name": "app-*", "namespace": "*"},
             "conditionRules": [{"condition": "A", "type": "CEL", "celExpressions": ["true"]}]},
            {"resourceIdentifier": {"resource": "configmaps", "name": "app-1", "namespace": "default"},
             "updateStrategy": {"type": "CreateOnly"},
             "feedbackRules": [{"type": "WellKnownStatus"}],
             "conditionRules": [{"condition": "B", "type": "CEL", "celExpressions": ["true"]}]},
            {"resourceIdentifier": {"group": "apps", "resource": "configmaps", "name": "*", "namespace": "*"},
             "updateStrategy": {"type": "ServerSideApply"}}]))
        .unwrap();
        let got = config_for(&configs, &configmap(Some("default"), "app-1")).unwrap();
        assert_eq!(got.update_strategy.unwrap().type_, "CreateOnly");
        assert_eq!(got.feedback_rules.len(), 1);
        assert_eq!(got.condition_rules[0].condition, "A", "the first entry with rules wins");
        let got = config_for(&configs, &configmap(Some("kube-system"), "app-2")).unwrap();
        assert!(got.update_strategy.is_none() && got.feedback_rules.is_empty());
        assert!(config_for(&configs, &configmap(Some("default"), "web")).is_none());
        // A cluster-scoped resource has the empty namespace, which only `*` or "" matches.
        let exact: Vec<ManifestConfigOption> = serde_json::from_value(json!([
            {"resourceIdentifier": {"resource": "configmaps", "name": "a", "namespace": "default"}}]))
        .unwrap();
        assert!(config_for(&exact, &configmap(None, "a")).is_none());
        assert!(config_for(&configs, &configmap(None, "app-9")).is_some());
    }

    fn rule_made(type_: &str, status: &str, generation: i64) -> Condition {
        Condition {
            observed_generation: Some(generation),
            ..condition(type_, status, "ConditionRuleEvaluated", "")
        }
    }

    #[test]
    fn rule_conditions_are_written_at_the_generation_and_stale_ones_pruned() {
        let before = vec![
            condition("Applied", "True", "AppliedManifestComplete", ""),
            rule_made("Progressing", "True", 1),
            rule_made("Removed", "True", 1),
        ];
        let got = with_rule_conditions(
            before,
            vec![condition("Progressing", "False", "ConditionRuleEvaluated", "done")],
            Some(2),
        );
        let types: Vec<(&str, &str, Option<i64>)> = got
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.observed_generation))
            .collect();
        assert_eq!(types, [("Applied", "True", None), ("Progressing", "False", Some(2))]);
        // Work-level aggregates are rule-made too.
        let mut work = vec![
            Condition {
                observed_generation: Some(1),
                ..condition("Degraded", "False", "ConditionRulesAggregated", "")
            },
            Condition {
                observed_generation: Some(1),
                ..condition("Applied", "True", "AppliedManifestWorkComplete", "")
            },
        ];
        prune_rule_conditions(&mut work, Some(2));
        assert_eq!(work.len(), 1);
        assert_eq!(work[0].type_, "Applied");
    }

    fn manifest(conditions: Vec<Condition>) -> ManifestCondition {
        ManifestCondition { conditions, ..ManifestCondition::default() }
    }

    fn status_of<'c>(all: &'c [Condition], type_: &str) -> (&'c str, &'c str, &'c str) {
        let c = all.iter().find(|c| c.type_ == type_).unwrap();
        (c.status.as_str(), c.reason.as_str(), c.message.as_str())
    }

    #[test]
    fn available_is_false_then_unknown_then_true() {
        let avail = |s: &str| condition("Available", s, "x", "");
        let of = |m: Vec<Vec<Condition>>| {
            aggregate(&m.into_iter().map(manifest).collect::<Vec<_>>(), Some(3))
        };
        let got = of(vec![vec![avail("True")], vec![avail("False")], vec![avail("Unknown")]]);
        assert_eq!(
            status_of(&got, "Available"),
            ("False", "ResourcesNotAvailable", "1 of 3 resources are not available")
        );
        let got = of(vec![vec![avail("True")], vec![avail("Unknown")]]);
        assert_eq!(
            status_of(&got, "Available"),
            ("Unknown", "ResourcesStatusUnknown", "1 of 2 resources have unknown status")
        );
        let got = of(vec![vec![]]);
        assert_eq!(
            status_of(&got, "Available"),
            ("Unknown", "ResourcesStatusUnknown", "cannot get any available resource")
        );
        let got = of(vec![vec![avail("True")], vec![avail("True")]]);
        assert_eq!(
            status_of(&got, "Available"),
            ("True", "ResourcesAvailable", "All resources are available")
        );
        assert_eq!(got[0].observed_generation, Some(3));
        assert_eq!(got.len(), 1, "only Available without rules");
    }

    #[test]
    fn rule_made_types_aggregate_progressing_any_true_others_false_wins() {
        let rule =
            |t: &str, s: &str, m: &str| Condition { message: m.into(), ..rule_made(t, s, 1) };
        let of = |m: Vec<Vec<Condition>>| {
            aggregate(&m.into_iter().map(manifest).collect::<Vec<_>>(), Some(1))
        };
        // Progressing: True if any, else Unknown if any, else False.
        let p = |statuses: &[&str]| {
            let got = of(statuses.iter().map(|s| vec![rule("Progressing", s, "m")]).collect());
            status_of(&got, "Progressing").0.to_owned()
        };
        assert_eq!(p(&["False", "Unknown", "True"]), "True");
        assert_eq!(p(&["False", "Unknown"]), "Unknown");
        assert_eq!(p(&["False", "False"]), "False");
        // Any other type: False wins, then Unknown, else True.
        let d = |statuses: &[&str]| {
            let got = of(statuses.iter().map(|s| vec![rule("Degraded", s, "m")]).collect());
            status_of(&got, "Degraded").0.to_owned()
        };
        assert_eq!(d(&["True", "Unknown", "False"]), "False");
        assert_eq!(d(&["True", "Unknown"]), "Unknown");
        assert_eq!(d(&["True", "True"]), "True");
        // The message: the one manifest's, or how many were aggregated.
        let got = of(vec![vec![rule("Complete", "True", "Job is finished")], vec![]]);
        assert_eq!(
            status_of(&got, "Complete"),
            ("True", "ConditionRulesAggregated", "Job is finished")
        );
        let got =
            of(vec![vec![rule("Complete", "True", "a")], vec![rule("Complete", "True", "b")]]);
        assert_eq!(status_of(&got, "Complete").2, "Aggregated from 2 manifest conditions");
        // Conditions no rule made are not aggregated.
        let got = of(vec![vec![condition("Applied", "True", "AppliedManifestComplete", "")]]);
        assert!(got.iter().all(|c| c.type_ != "Applied"));
    }

    #[test]
    fn a_manifest_only_read_keeps_its_applied_and_follows_its_object() {
        let previous = manifest(vec![
            condition("Applied", "True", "AppliedManifestComplete", "Apply manifest complete"),
            rule_made("Complete", "True", 4),
        ]);
        let r = configmap(Some("default"), "a");
        let meta = v1::ManifestResourceMeta::default();
        let gone = manifest_condition(
            meta.clone(),
            Some(&previous),
            &Seen::Read(r.clone(), None),
            None,
            None,
            Some(4),
        );
        assert_eq!(status_of(&gone.conditions, "Applied").0, "True");
        assert_eq!(
            status_of(&gone.conditions, "Available"),
            ("False", "ResourceNotAvailable", "Resource is not available")
        );
        assert_eq!(
            status_of(&gone.conditions, "Complete").0,
            "True",
            "no object: rule conditions stay"
        );
        let there = manifest_condition(
            meta,
            Some(&previous),
            &Seen::Read(r, Some(json!({}))),
            None,
            Some(Vec::new()),
            Some(5),
        );
        assert_eq!(status_of(&there.conditions, "Available").0, "True");
        assert!(
            there.conditions.iter().all(|c| c.type_ != "Complete"),
            "a new generation without the rule prunes it"
        );
    }
}
