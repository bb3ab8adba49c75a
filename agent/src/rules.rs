//! OCM's condition rules (ocm-wave2 §1.6): a manifest's `manifestConfigs[].conditionRules`
//! evaluated over its live object, each rule giving one condition for the manifest. `CEL` rules
//! AND their expressions in order (stopping at the first `false`) with the variable `object`;
//! `WellKnownConditions` rules take the built-in rule of the object's kind (only `Complete`, for
//! batch/v1 Job and v1 Pod), with the rule's own message or message expression over it; the
//! message is the message expression's (with `result` bound), else the rule's `message`, else
//! "Manifest is [not] <condition>". Reasons and messages are OCM's: `ConditionRuleEvaluated`,
//! `ConditionRuleExpressionError` (False, the error), `ConditionRuleInternalError` (Unknown),
//! `ConditionRuleInvalid` (Unknown, an unknown rule type).
//!
//! Expressions run in `ocm_cel`'s environment with OCM's `hasConditions()`, each admitted only
//! when its cost bound is within Kubernetes' per-call limit and what is left of the one budget
//! all rules of a manifest share.

use std::sync::LazyLock;

use ocm_cel::cel::common::ast::CallExpr;
use ocm_cel::cel::objects::Key;
use ocm_cel::cel::{Context, Program, Value};
use ocm_cel::cost::{self, Budget, Calls, Refused, Size, Unbounded};
use ocm_proto::api::meta::{
    CONDITION_FALSE, CONDITION_TRUE, CONDITION_UNKNOWN, Condition, condition,
};
use ocm_proto::api::work::v1::{
    CONDITION_COMPLETE, CONDITION_RULE_CEL, CONDITION_RULE_WELL_KNOWN_CONDITIONS, ConditionRule,
    REASON_CONDITION_RULE_EVALUATED, REASON_CONDITION_RULE_EXPRESSION_ERROR,
    REASON_CONDITION_RULE_INTERNAL_ERROR, REASON_CONDITION_RULE_INVALID,
};

/// The live object, in every expression.
const OBJECT: &str = "object";
/// The rule's outcome, in message expressions.
const RESULT: &str = "result";

/// OCM's environment: Kubernetes' libraries and `hasConditions()`.
static ROOT: LazyLock<Context<'static>> = LazyLock::new(|| {
    let mut ctx = ocm_cel::environment();
    ctx.add_function("hasConditions", has_conditions);
    ctx
});

/// `hasConditions(map)`: whether the map has a non-empty `conditions` list.
fn has_conditions(value: Value) -> bool {
    let Value::Map(map) = value else { return false };
    matches!(map.map.get(&Key::from("conditions")), Some(Value::List(l)) if !l.is_empty())
}

/// The sizes of OCM's functions for the cost bound.
struct OcmCalls;

impl Calls for OcmCalls {
    fn result_size(
        &self,
        call: &CallExpr,
        _: Option<(&str, &[&str])>,
    ) -> Option<Result<Size, Unbounded>> {
        (call.func_name == "hasConditions").then_some(Ok(Size::ONE))
    }
}

/// The built-in rule of `WellKnownConditions` for `condition` on an object of `apiVersion` and
/// `kind`, if there is one.
fn built_in(api_version: &str, kind: &str, condition: &str) -> Option<ConditionRule> {
    let rule = |expression: &str, message_expression: &str| ConditionRule {
        condition: CONDITION_COMPLETE.to_owned(),
        type_: CONDITION_RULE_CEL.to_owned(),
        cel_expressions: vec![expression.to_owned()],
        message: None,
        message_expression: Some(message_expression.to_owned()),
    };
    match (api_version, kind, condition) {
        ("batch/v1", "Job", CONDITION_COMPLETE) => Some(rule(
            "hasConditions(object.status) ? object.status.conditions.filter(c, c.type == \
             'Complete' || c.type == 'Failed').exists(c, c.status == 'True') : false",
            "result ? \"Job is finished\" : \"Job is not finished\"",
        )),
        ("v1", "Pod", CONDITION_COMPLETE) => Some(rule(
            "object.status.phase in ['Succeeded', 'Failed']",
            "\"Pod is in phase \" + object.status.phase",
        )),
        _ => None,
    }
}

/// The conditions `rules` give for the live `object`, in rule order and without
/// `observedGeneration` (a `WellKnownConditions` rule with no built-in for the object gives
/// none). Every rule of the manifest draws on one budget. Run it on `ocm_cel::on_cel_stack`:
/// the parser and the interpreter recurse.
pub fn evaluate(object: &serde_json::Value, rules: &[ConditionRule]) -> Vec<Condition> {
    let mut run = Run { json: object, value: ocm_cel::to_value(object), budget: Budget::default() };
    rules.iter().filter_map(|rule| run.rule(rule)).filter(|c| !c.type_.is_empty()).collect()
}

/// The conditions of rules that could not run at all (`why`): Unknown, `ConditionRuleInternalError`.
pub fn not_evaluated(rules: &[ConditionRule], why: &str) -> Vec<Condition> {
    rules
        .iter()
        .filter(|r| !r.condition.is_empty())
        .map(|r| {
            condition(&r.condition, CONDITION_UNKNOWN, REASON_CONDITION_RULE_INTERNAL_ERROR, why)
        })
        .collect()
}

/// Evaluates the rules of several manifests, each over its live object ([`evaluate`]), on CEL's
/// stack and off the async workers. A failure to run them at all makes every rule's condition a
/// `ConditionRuleInternalError`.
pub async fn evaluate_all(
    jobs: Vec<(serde_json::Value, Vec<ConditionRule>)>,
) -> Vec<Vec<Condition>> {
    if jobs.is_empty() {
        return Vec::new();
    }
    let rules: Vec<Vec<ConditionRule>> = jobs.iter().map(|(_, r)| r.clone()).collect();
    let run = tokio::task::spawn_blocking(move || {
        ocm_cel::on_cel_stack(move || jobs.iter().map(|(o, r)| evaluate(o, r)).collect::<Vec<_>>())
    });
    let why = match run.await {
        Ok(Ok(conditions)) => return conditions,
        Ok(Err(e)) => e.to_string(),
        Err(e) => format!("the evaluation failed: {e}"),
    };
    rules.iter().map(|r| not_evaluated(r, &why)).collect()
}

/// One manifest's evaluation: the object as JSON (what the cost bound measures) and as a CEL
/// value, and the budget left.
struct Run<'a> {
    json: &'a serde_json::Value,
    value: Value,
    budget: Budget,
}

impl Run<'_> {
    /// The condition `rule` gives, if any.
    fn rule(&mut self, rule: &ConditionRule) -> Option<Condition> {
        match rule.type_.as_str() {
            CONDITION_RULE_CEL => Some(self.cel_rule(rule)),
            CONDITION_RULE_WELL_KNOWN_CONDITIONS => {
                let text = |p: &str| self.json.pointer(p).and_then(|v| v.as_str()).unwrap_or("");
                let mut built = built_in(text("/apiVersion"), text("/kind"), &rule.condition)?;
                if let Some(m) = rule.message.as_ref().filter(|m| !m.is_empty()) {
                    built.message = Some(m.clone());
                }
                if let Some(m) = rule.message_expression.as_ref().filter(|m| !m.is_empty()) {
                    built.message_expression = Some(m.clone());
                }
                Some(self.cel_rule(&built))
            }
            other => Some(condition(
                &rule.condition,
                CONDITION_UNKNOWN,
                REASON_CONDITION_RULE_INVALID,
                format!("unrecognized condition rule type {other}"),
            )),
        }
    }

    /// The condition of a `CEL` rule: its expressions, then its message.
    fn cel_rule(&mut self, rule: &ConditionRule) -> Condition {
        let (status, reason, message) = match self.expressions(&rule.cel_expressions) {
            Ok(result) => {
                let status = if result { CONDITION_TRUE } else { CONDITION_FALSE };
                (status, REASON_CONDITION_RULE_EVALUATED, self.message(rule, result))
            }
            // An expression that does not compile, fails, returns no bool or is over the budget.
            Err(e) => (CONDITION_FALSE, REASON_CONDITION_RULE_EXPRESSION_ERROR, e),
        };
        condition(&rule.condition, status, reason, message)
    }

    /// The expressions ANDed in order, stopping at the first `false`; `Err` says why one gave
    /// no bool.
    fn expressions(&mut self, expressions: &[String]) -> Result<bool, String> {
        let mut ctx = ROOT.new_inner_scope();
        ctx.add_variable_from_value(OBJECT, self.value.clone());
        for source in expressions {
            match self.run(source, &[OBJECT], &ctx) {
                Ok(Value::Bool(true)) => {}
                Ok(Value::Bool(false)) => return Ok(false),
                Ok(other) => {
                    return Err(format!("expected bool result, got {}", go_type(&other)));
                }
                Err(Failed::Budget) => return Err("CEL evaluation budget exceeded".into()),
                Err(Failed::Error(e)) => return Err(e),
            }
        }
        Ok(true)
    }

    /// The message of a rule that evaluated to `result`: its message expression's string when
    /// that is not empty (or the expression's error), else its message, else OCM's default.
    fn message(&mut self, rule: &ConditionRule, result: bool) -> String {
        if let Some(source) = rule.message_expression.as_deref().filter(|m| !m.is_empty()) {
            match self.message_expression(source, result) {
                Ok(Some(message)) => return message,
                Ok(None) => {}
                Err(e) => return e,
            }
        }
        match rule.message.as_deref().filter(|m| !m.is_empty()) {
            Some(m) => m.to_owned(),
            None if result => format!("Manifest is {}", rule.condition),
            None => format!("Manifest is not {}", rule.condition),
        }
    }

    /// A message expression's string (`None` when empty), or why there is none. One over the
    /// budget spends what is left of it, as OCM's does.
    fn message_expression(&mut self, source: &str, result: bool) -> Result<Option<String>, String> {
        let mut ctx = ROOT.new_inner_scope();
        ctx.add_variable_from_value(OBJECT, self.value.clone());
        ctx.add_variable_from_value(RESULT, result);
        match self.run(source, &[OBJECT, RESULT], &ctx) {
            Ok(Value::String(s)) => Ok((!s.is_empty()).then(|| s.to_string())),
            Ok(other) => Err(format!(
                "expected message expression to have a string result, got {}",
                go_type(&other)
            )),
            Err(Failed::Budget) => {
                self.budget.exhaust();
                Err("CEL evaluation budget exceeded".into())
            }
            Err(Failed::Error(e)) => Err(e),
        }
    }

    /// Compiles `source` with `variables`, admits it by its cost bound and runs it in `ctx`.
    fn run(
        &mut self,
        source: &str,
        variables: &[&str],
        ctx: &Context<'_>,
    ) -> Result<Value, Failed> {
        let program: Program =
            ocm_cel::compile(source, variables).map_err(|e| Failed::Error(e.to_string()))?;
        let result = serde_json::Value::Bool(false);
        let bound = cost::estimate(
            program.expression(),
            &[(OBJECT, self.json), (RESULT, &result)],
            &OcmCalls,
        )
        .map_err(|e| Failed::Error(e.to_string()))?;
        match self.budget.admit(bound) {
            Ok(()) => {}
            Err(Refused::Budget) => return Err(Failed::Budget),
            Err(e) => return Err(Failed::Error(e.to_string())),
        }
        program.execute(ctx).map_err(|e| Failed::Error(e.to_string()))
    }
}

/// Why an expression gave no value.
enum Failed {
    /// Over what the manifest's budget has left.
    Budget,
    /// It did not compile, could not be bounded, was over the per-call limit, or failed.
    Error(String),
}

/// The Go type OCM names in its "expected ... result, got <type>" messages.
fn go_type(v: &Value) -> String {
    match v {
        Value::String(_) => "string".into(),
        Value::Int(_) => "int64".into(),
        Value::UInt(_) => "uint64".into(),
        Value::Float(_) => "float64".into(),
        Value::Bool(_) => "bool".into(),
        Value::Bytes(_) => "[]uint8".into(),
        Value::List(_) => "[]interface {}".into(),
        Value::Map(_) => "map[string]interface {}".into(),
        Value::Null => "<nil>".into(),
        other => other.type_of().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value as Json, json};

    /// The conditions `rules` (as JSON) give for `object`, evaluated on CEL's stack.
    fn eval(object: Json, rules: Json) -> Vec<Condition> {
        let rules: Vec<ConditionRule> = serde_json::from_value(rules).unwrap();
        ocm_cel::on_cel_stack(move || evaluate(&object, &rules)).unwrap()
    }

    /// The one condition `rule` gives: (type, status, reason, message).
    fn one(object: Json, rule: Json) -> (String, String, String, String) {
        let mut got = eval(object, json!([rule]));
        assert_eq!(got.len(), 1, "{got:?}");
        let c = got.remove(0);
        (c.type_, c.status, c.reason, c.message)
    }

    fn cel(condition: &str, expressions: &[&str]) -> Json {
        json!({"condition": condition, "type": "CEL", "celExpressions": expressions})
    }

    fn deployment() -> Json {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "status": {"readyReplicas": 1, "replicas": 2,
                       "conditions": [{"type": "Available", "status": "True"}]}})
    }

    fn quad(t: &str, s: &str, r: &str, m: &str) -> (String, String, String, String) {
        (t.into(), s.into(), r.into(), m.into())
    }

    #[test]
    fn true_rules_say_so_with_ocms_message_precedence() {
        let available =
            "object.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')";
        let mut rule = cel("Available", &[available, "object.status.replicas == 2"]);
        assert_eq!(
            one(deployment(), rule.clone()),
            quad("Available", "True", "ConditionRuleEvaluated", "Manifest is Available")
        );
        rule["message"] = json!("static");
        assert_eq!(one(deployment(), rule.clone()).3, "static");
        rule["messageExpression"] =
            json!("result ? 'up ' + string(object.status.readyReplicas) : 'down'");
        assert_eq!(one(deployment(), rule.clone()).3, "up 1");
        // An empty message expression's string gives way to the message.
        rule["messageExpression"] = json!("''");
        assert_eq!(one(deployment(), rule).3, "static");
    }

    #[test]
    fn the_first_false_expression_decides_and_the_rest_are_not_run() {
        let rule = cel(
            "Degraded",
            &["object.status.readyReplicas < object.status.replicas", "false", "object.nope"],
        );
        assert_eq!(
            one(deployment(), rule),
            quad("Degraded", "False", "ConditionRuleEvaluated", "Manifest is not Degraded")
        );
        let mut rule = cel("Ready", &["object.status.readyReplicas == object.status.replicas"]);
        rule["messageExpression"] =
            json!("result ? 'ready' : 'not ready: ' + string(object.status.readyReplicas)");
        assert_eq!(one(deployment(), rule).3, "not ready: 1");
    }

    #[test]
    fn expression_errors_are_false_with_the_error() {
        let error = |expr: &str| one(deployment(), cel("X", &[expr]));
        let (_, status, reason, message) = error("object.status.nope == 1");
        assert_eq!((status.as_str(), reason.as_str()), ("False", "ConditionRuleExpressionError"));
        assert!(message.contains("nope"), "{message}");
        let (_, _, reason, message) = error("object.status ==");
        assert_eq!(reason, "ConditionRuleExpressionError");
        assert!(!message.is_empty());
        assert_eq!(error("object.kind").3, "expected bool result, got string");
        assert_eq!(error("object.status.replicas").3, "expected bool result, got int64");
        // `result` is a message expression's alone.
        assert_eq!(error("result").3, "undeclared reference to 'result'");
        let hundred =
            format!("[{}]", (0..100).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
        let over = format!("{hundred}.all(x, {hundred}.all(y, {hundred}.all(z, x + y + z >= 0)))");
        let (_, status, _, message) = error(&over);
        assert_eq!(status, "False");
        assert!(message.contains("exceeds the per-expression limit"), "{message}");
    }

    #[test]
    fn one_budget_serves_every_rule_of_a_manifest() {
        let hundred =
            format!("[{}]", (0..100).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
        let under = format!("{hundred}.all(x, {hundred}.all(y, x + y >= 0))");
        let rules: Vec<Json> = (0..40).map(|i| cel(&format!("C{i}"), &[&under])).collect();
        let got = eval(deployment(), json!(rules));
        assert_eq!(got.len(), 40);
        assert_eq!(got[0].status, "True", "the first rules fit");
        let last = got.last().unwrap();
        assert_eq!(
            (last.status.as_str(), last.reason.as_str(), last.message.as_str()),
            ("False", "ConditionRuleExpressionError", "CEL evaluation budget exceeded")
        );
        // Another manifest has a budget of its own.
        assert_eq!(eval(deployment(), json!([rules[0]]))[0].status, "True");
    }

    #[test]
    fn message_expression_errors_keep_the_status_and_say_why() {
        let mut rule = cel("Available", &["true"]);
        rule["messageExpression"] = json!("badcel");
        assert_eq!(
            one(deployment(), rule.clone()),
            quad("Available", "True", "ConditionRuleEvaluated", "undeclared reference to 'badcel'")
        );
        rule["messageExpression"] = json!("1");
        assert_eq!(
            one(deployment(), rule.clone()).3,
            "expected message expression to have a string result, got int64"
        );
        rule["messageExpression"] = json!("object.nope");
        assert!(one(deployment(), rule).3.contains("nope"));
    }

    #[test]
    fn unknown_rule_types_are_invalid_and_rules_that_cannot_run_are_internal_errors() {
        assert_eq!(
            one(deployment(), json!({"condition": "X", "type": "Magic"})),
            quad("X", "Unknown", "ConditionRuleInvalid", "unrecognized condition rule type Magic")
        );
        let rules: Vec<ConditionRule> =
            serde_json::from_value(json!([cel("A", &["true"])])).unwrap();
        let got = not_evaluated(&rules, "no thread to evaluate CEL on");
        assert_eq!(
            (got[0].status.as_str(), got[0].reason.as_str()),
            ("Unknown", "ConditionRuleInternalError")
        );
    }

    #[test]
    fn well_known_complete_covers_jobs_and_pods_only() {
        let complete = json!({"condition": "Complete", "type": "WellKnownConditions"});
        let job = |conditions: Json| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "status": {"conditions": conditions}});
        let finished = quad("Complete", "True", "ConditionRuleEvaluated", "Job is finished");
        assert_eq!(
            one(job(json!([{"type": "Complete", "status": "True"}])), complete.clone()),
            finished
        );
        assert_eq!(
            one(job(json!([{"type": "Failed", "status": "True"}])), complete.clone()),
            finished
        );
        let (_, status, _, message) =
            one(job(json!([{"type": "Complete", "status": "False"}])), complete.clone());
        assert_eq!((status.as_str(), message.as_str()), ("False", "Job is not finished"));
        assert_eq!(one(job(json!([])), complete.clone()).1, "False", "no conditions yet");
        let pod = |phase: &str| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": phase}});
        assert_eq!(
            one(pod("Succeeded"), complete.clone()),
            quad("Complete", "True", "ConditionRuleEvaluated", "Pod is in phase Succeeded")
        );
        assert_eq!(one(pod("Failed"), complete.clone()).1, "True");
        assert_eq!(
            one(pod("Running"), complete.clone()),
            quad("Complete", "False", "ConditionRuleEvaluated", "Pod is in phase Running")
        );
        // The rule's message or message expression replaces the built-in one.
        let mut mine = complete.clone();
        mine["message"] = json!("done or not");
        mine["messageExpression"] = json!("result ? 'over' : ''");
        assert_eq!(one(pod("Running"), mine.clone()).3, "done or not");
        assert_eq!(one(pod("Failed"), mine).3, "over");
        // No built-in: no condition at all.
        assert!(eval(deployment(), json!([complete])).is_empty());
        assert!(
            eval(pod("Running"), json!([{"condition": "Ready", "type": "WellKnownConditions"}]))
                .is_empty()
        );
        let batch_v2 = json!({"apiVersion": "batch/v2", "kind": "Job", "status": {}});
        assert!(
            eval(batch_v2, json!([{"condition": "Complete", "type": "WellKnownConditions"}]))
                .is_empty()
        );
    }

    #[test]
    fn has_conditions_wants_a_map_with_a_non_empty_list() {
        let rule = cel(
            "HasConditions",
            &["hasConditions(object.status) && !hasConditions({}) && !hasConditions('badtype') \
               && !hasConditions({'conditions': []}) && !hasConditions({'conditions': null})"],
        );
        assert_eq!(one(deployment(), rule).1, "True");
    }
}
