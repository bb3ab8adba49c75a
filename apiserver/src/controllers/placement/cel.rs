//! `celSelector` (ocm.md §5.3): a placement's CEL expressions compiled once per pass and evaluated
//! against one ManagedCluster in OCM's environment (the `managedCluster` variable, the
//! `scores(name)` and `parseJSON()` functions, Kubernetes' extension libraries), each evaluation
//! admitted only when a cost bound computed from the cluster's actual data is within limits.
//!
//! The environment, the compile limits, the cost bound and its limits are `ocm_cel`'s; this
//! module adds what is OCM's placement: the cluster as the variable (converted only where the
//! expressions read it, [`Reads`]), `scores()` and its size, `parseJSON()`, and Kubernetes'
//! limits per cluster: [`PER_CALL_LIMIT`] per expression, [`CLUSTER_BUDGET`] per cluster.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use ocm_cel::cel::common::ast::{CallExpr, Expr, LiteralValue};
use ocm_cel::cel::context::VariableResolver;
use ocm_cel::cel::extractors::This;
use ocm_cel::cel::objects::Key;
use ocm_cel::cel::{self, Context, ExecutionError, FunctionContext, IdedExpr, Program, Value};
use ocm_cel::cost::{self, Budget, Calls, Refused, Size, Unbounded};

use super::schedule::ScoreLookup;

pub use ocm_cel::{MAX_DEPTH, MAX_LEN, PER_CALL_LIMIT};
/// Kubernetes' `RuntimeCELCostBudget`, which OCM gives each cluster for all its expressions.
pub const CLUSTER_BUDGET: u64 = ocm_cel::RUNTIME_BUDGET;

/// The variable a cluster is bound to.
const CLUSTER: &str = "managedCluster";
/// The hidden variables `scores()` reads, `\0scores/<cluster>/<name>`: no CEL identifier can
/// spell them.
const SCORES: &str = "\u{0}scores/";

/// The functions: the standard ones, Kubernetes' libraries, and OCM's.
static ROOT: LazyLock<Context<'static>> = LazyLock::new(|| {
    let mut ctx = ocm_cel::environment();
    ctx.add_function("scores", scores);
    ctx.add_function("parseJSON", parse_json);
    ctx
});

/// `managedCluster.scores("<AddOnPlacementScore name>")`: the object's `status.scores` as a list
/// of `{name, value, quantity}` (OCM's documented form; `quantity` is the value as a string).
fn scores(
    ftx: &FunctionContext,
    This(cluster): This<Value>,
    name: Arc<String>,
) -> Result<Value, ExecutionError> {
    let Some(cluster_name) = name_of(&cluster) else {
        return Err(ftx.error("failed to get cluster name"));
    };
    let hidden = IdedExpr { id: 0, expr: Expr::Ident(format!("{SCORES}{cluster_name}/{name}")) };
    match ftx.ptx.resolve(&hidden)? {
        Value::Null => Err(ftx.error(format!(
            "failed to get score: addonplacementscores.cluster.open-cluster-management.io \
             \"{name}\" not found"
        ))),
        v => Ok(v),
    }
}

/// `"<json>".parseJSON()`: the JSON text as a CEL value.
fn parse_json(
    ftx: &FunctionContext,
    This(text): This<Arc<String>>,
) -> Result<Value, ExecutionError> {
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| ftx.error(format!("failed to parse json: {e}")))?;
    cel::to_value(json).map_err(|e| ftx.error(format!("failed to parse json: {e}")))
}

/// `metadata.name` of a cluster value.
fn name_of(cluster: &Value) -> Option<String> {
    let Value::Map(m) = cluster else { return None };
    let Some(Value::Map(meta)) = m.map.get(&Key::from("metadata")) else { return None };
    match meta.map.get(&Key::from("name")) {
        Some(Value::String(s)) => Some(s.to_string()),
        _ => None,
    }
}

/// Runs `f` on a thread with a stack deep enough for CEL; `Err` when no thread can be had (CEL is
/// never run on a worker's small stack).
pub fn on_cel_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, String> {
    ocm_cel::on_cel_stack(f).map_err(|e| e.to_string())
}

/// One selector's expressions, ANDed.
#[derive(Debug)]
pub struct Expressions {
    programs: Vec<(String, Program)>,
    /// What of the cluster they read.
    pub reads: Reads,
}

/// Compiles a selector's expressions; the error is the Misconfigured message's detail.
pub fn compile(sources: &[String]) -> Result<Expressions, String> {
    let mut programs = Vec::with_capacity(sources.len());
    for source in sources {
        let program =
            ocm_cel::compile(source, &[CLUSTER]).map_err(|e| format!("compilation failed: {e}"))?;
        programs.push((source.clone(), program));
    }
    let reads =
        Reads::union(&programs.iter().map(|(_, p)| Reads::of(p.expression())).collect::<Vec<_>>());
    Ok(Expressions { programs, reads })
}

/// One cluster as the expressions see it.
pub struct Subject<'a> {
    name: &'a str,
    json: &'a serde_json::Value,
    /// What the expressions read of it.
    reads: &'a Reads,
    /// That part, as JSON (what the estimator measures): made on first use.
    selected: std::cell::OnceCell<std::borrow::Cow<'a, serde_json::Value>>,
    /// That part in its CEL form (what the interpreter reads): made on first use.
    value: std::cell::OnceCell<Value>,
}

impl<'a> Subject<'a> {
    pub fn new(name: &'a str, json: &'a serde_json::Value, reads: &'a Reads) -> Subject<'a> {
        Subject {
            name,
            json,
            reads,
            selected: std::cell::OnceCell::new(),
            value: std::cell::OnceCell::new(),
        }
    }

    fn selected(&self) -> &serde_json::Value {
        self.selected.get_or_init(|| self.reads.select(self.json))
    }

    fn value(&self) -> &Value {
        self.value.get_or_init(|| ocm_cel::to_value(self.selected()))
    }
}

/// The AddOnPlacementScores `scores()` reads while evaluating one cluster.
struct Bindings<'a> {
    scores: ScoreLookup<'a>,
}

impl VariableResolver for Bindings<'_> {
    fn resolve(&self, variable: &str) -> Option<Value> {
        let (cluster, name) = variable.strip_prefix(SCORES)?.split_once('/')?;
        Some(match (self.scores)(cluster, name) {
            None => Value::Null,
            Some(object) => Value::List(Arc::new(
                object
                    .items
                    .iter()
                    .map(|(name, value)| {
                        let item: HashMap<&str, Value> = HashMap::from([
                            ("name", Value::from(name.as_str())),
                            ("value", Value::Int(i64::from(*value))),
                            ("quantity", Value::from(value.to_string())),
                        ]);
                        Value::from(item)
                    })
                    .collect(),
            )),
        })
    }
}

impl Expressions {
    /// Whether `subject` satisfies every expression; `Err` says which did not and why. An
    /// expression that fails or returns something other than a bool does not match (as in OCM).
    pub fn matches(&self, subject: &Subject<'_>, scores: ScoreLookup<'_>) -> Result<(), String> {
        let cluster = subject.value();
        let bindings = Bindings { scores };
        let mut ctx = ROOT.new_inner_scope();
        // Bound once: every read of it borrows (a resolver would rebuild it per read).
        ctx.add_variable_from_value(CLUSTER, cluster.clone());
        ctx.set_variable_resolver(&bindings);
        let mut budget = Budget::new(CLUSTER_BUDGET);
        let sizes = ScoresSize { cluster: subject.name, scores };
        for (source, program) in &self.programs {
            let source = short(source);
            let cost =
                cost::estimate(program.expression(), &[(CLUSTER, subject.selected())], &sizes)
                    .map_err(|e| format!("{source}: {e}"))?;
            match budget.admit(cost) {
                Ok(()) => {}
                Err(Refused::Budget) => {
                    return Err(format!(
                        "{source}: the cluster's expressions exceed the cost budget \
                         {CLUSTER_BUDGET}"
                    ));
                }
                Err(e) => return Err(format!("{source}: {e}")),
            }
            match program.execute(&ctx) {
                Ok(Value::Bool(true)) => {}
                Ok(Value::Bool(false)) => return Err(format!("{source}: false")),
                Ok(other) => {
                    return Err(format!("{source}: returned {}, not a bool", other.type_of()));
                }
                Err(e) => return Err(format!("{source}: {}", clip(&e.to_string(), 300))),
            }
        }
        Ok(())
    }
}

/// An expression as messages name it: its first 80 characters.
fn short(source: &str) -> std::borrow::Cow<'_, str> {
    clip(source, 80)
}

/// `text` cut at `n` characters.
fn clip(text: &str, n: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(n) {
        Some((cut, _)) => format!("{}...", &text[..cut]).into(),
        None => text.into(),
    }
}

/// `e` as a path into the cluster (`managedCluster.a.b["c"]`), when it is one; `shadowed` when a
/// comprehension variable named `managedCluster` hides the cluster.
fn path(e: &IdedExpr, shadowed: bool) -> Option<Vec<&str>> {
    let (root, steps) = ocm_cel::ast::path(e)?;
    (root == CLUSTER && !shadowed).then_some(steps)
}

/// What of the cluster an expression reads: the subtrees at these paths, or (`None`) all of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads(Option<Vec<Vec<String>>>);

impl Reads {
    /// What `e` reads.
    fn of(e: &IdedExpr) -> Reads {
        let mut paths = Vec::new();
        if !collect(e, false, &mut paths) {
            return Reads(None);
        }
        Reads(Some(paths)).tidy()
    }

    /// What any of `all` reads.
    pub fn union<'r>(all: impl IntoIterator<Item = &'r Reads>) -> Reads {
        let mut paths = Vec::new();
        for r in all {
            match &r.0 {
                None => return Reads(None),
                Some(p) => paths.extend(p.iter().cloned()),
            }
        }
        Reads(Some(paths)).tidy()
    }

    /// Sorted, without the paths another one contains.
    fn tidy(self) -> Reads {
        let Some(mut paths) = self.0 else { return self };
        paths.sort();
        let mut kept: Vec<Vec<String>> = Vec::with_capacity(paths.len());
        for p in paths {
            if !kept.iter().any(|k| p.starts_with(k)) {
                kept.push(p);
            }
        }
        Reads(Some(kept))
    }

    /// The part of `json` read.
    fn select<'j>(&self, json: &'j serde_json::Value) -> std::borrow::Cow<'j, serde_json::Value> {
        let Some(paths) = &self.0 else { return std::borrow::Cow::Borrowed(json) };
        let mut out = serde_json::Value::Object(serde_json::Map::new());
        for p in paths {
            copy(json, &mut out, p);
        }
        std::borrow::Cow::Owned(out)
    }
}

/// Copies the subtree of `from` at `path` into `to`, creating the objects on the way.
fn copy(from: &serde_json::Value, to: &mut serde_json::Value, path: &[String]) {
    let (Some((key, rest)), serde_json::Value::Object(from_map), serde_json::Value::Object(to_map)) =
        (path.split_first(), from, &mut *to)
    else {
        // The end of the path, or a list or scalar on the way: all of it.
        *to = from.clone();
        return;
    };
    let Some(child) = from_map.get(key) else { return };
    let slot = to_map
        .entry(key.clone())
        .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    copy(child, slot, rest);
}

/// Adds to `out` the paths into the cluster `e` reads; false when it reads the cluster whole.
fn collect(e: &IdedExpr, shadowed: bool, out: &mut Vec<Vec<String>>) -> bool {
    let owned = |p: Vec<&str>| p.into_iter().map(str::to_owned).collect::<Vec<_>>();
    if let Some(p) = path(e, shadowed) {
        if p.is_empty() {
            return false;
        }
        out.push(owned(p));
        return true;
    }
    match &e.expr {
        // `has(managedCluster.a.b)` reads `a.b`.
        Expr::Select(s) if s.test => {
            if let Some(mut p) = path(&s.operand, shadowed) {
                p.push(&s.field);
                out.push(owned(p));
                return true;
            }
            collect(&s.operand, shadowed, out)
        }
        // `managedCluster.scores(...)` reads the cluster's name.
        Expr::Call(c)
            if c.func_name == "scores"
                && c.target
                    .as_deref()
                    .and_then(|t| path(t, shadowed))
                    .is_some_and(|p| p.is_empty()) =>
        {
            out.push(vec!["metadata".to_owned(), "name".to_owned()]);
            c.args.iter().all(|a| collect(a, shadowed, out))
        }
        Expr::Comprehension(c) => {
            let hides = |v: &str| v == CLUSTER;
            let inner = shadowed
                || hides(&c.iter_var)
                || c.iter_var2.as_deref().is_some_and(hides)
                || hides(&c.accu_var);
            let result = shadowed || hides(&c.accu_var);
            collect(&c.iter_range, shadowed, out)
                && collect(&c.accu_init, shadowed, out)
                && collect(&c.loop_cond, inner, out)
                && collect(&c.loop_step, inner, out)
                && collect(&c.result, result, out)
        }
        _ => ocm_cel::ast::children(e).into_iter().all(|child| collect(child, shadowed, out)),
    }
}

/// The size of `scores("name")` for the cost bound: the named object's items. Its cost can be
/// bounded only when the name is a literal and the cluster is the one being evaluated.
struct ScoresSize<'a> {
    cluster: &'a str,
    scores: ScoreLookup<'a>,
}

impl Calls for ScoresSize<'_> {
    fn result_size(
        &self,
        call: &CallExpr,
        target: Option<(&str, &[&str])>,
    ) -> Option<Result<Size, Unbounded>> {
        if call.func_name != "scores" {
            return None;
        }
        let name = match (call.args.as_slice(), target) {
            (
                [IdedExpr { expr: Expr::Literal(LiteralValue::String(s)), .. }],
                Some((CLUSTER, [])),
            ) => s.inner(),
            _ => {
                return Some(Err(Unbounded(
                    "scores() is bounded only as managedCluster.scores(\"<literal name>\")".into(),
                )));
            }
        };
        let object = (self.scores)(self.cluster, name);
        let items = object.as_ref().map_or(0, |o| o.items.len() as u64);
        // An item: a map of a name, an int and a short string.
        let elem = object
            .and_then(|o| o.items.iter().map(|(n, _)| n.len() as u64 + 64).max())
            .unwrap_or(0);
        Some(Ok(Size { len: items, weight: 1 + items * elem, elem }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reads(exprs: &[&str]) -> Option<Vec<String>> {
        let sources: Vec<String> = exprs.iter().map(|s| (*s).to_owned()).collect();
        compile(&sources).unwrap().reads.0.map(|p| p.iter().map(|p| p.join(".")).collect())
    }

    #[test]
    fn only_what_is_read_is_converted() {
        assert_eq!(
            reads(&[
                "managedCluster.metadata.labels.env == 'a'",
                "has(managedCluster.status.version) && managedCluster.metadata.labels['x'] == 'y'",
                "managedCluster.scores('s').size() > 0",
            ]),
            Some(vec![
                "metadata.labels.env".into(),
                "metadata.labels.x".into(),
                "metadata.name".into(),
                "status.version".into()
            ])
        );
        // Names nothing declares are refused when compiling, as cel-go does.
        let err = compile(&["managedcluster.metadata.name == 'a'".into()]).unwrap_err();
        assert_eq!(err, "compilation failed: undeclared reference to 'managedcluster'");
        let err = compile(&["[1].all(x, y > 0)".into()]).unwrap_err();
        assert!(err.ends_with("'y'"), "{err}");
        compile(&["[1].all(x, [2].exists(y, x < y)) && type(1) == int".into()]).unwrap();
        // The cluster whole: passed on, or named by a computed key.
        assert_eq!(reads(&["size(managedCluster) > 0"]), None);
        assert_eq!(reads(&["managedCluster['meta' + 'data'].name == 'a'"]), None);
        // A comprehension variable of the same name hides the cluster.
        assert_eq!(
            reads(&["[{'a': 1}].all(managedCluster, managedCluster.a == 1)"]),
            Some(Vec::new())
        );
        let json = json!({"metadata": {"name": "c", "labels": {"a": "b"}, "managedFields": [1]},
            "status": {"version": {"kubernetes": "v1"}, "conditions": [1, 2]}});
        let r = compile(&[
            "managedCluster.metadata.labels.a == 'b'".into(),
            "managedCluster.status.version.kubernetes == 'v1' && managedCluster.status.nope == 1"
                .into(),
        ])
        .unwrap()
        .reads;
        assert_eq!(
            *r.select(&json),
            json!({"metadata": {"labels": {"a": "b"}}, "status": {"version": {"kubernetes": "v1"}}})
        );
    }
}

#[cfg(test)]
mod bound_tests {
    //! The cost bound against expressions built to outrun it.

    use super::*;
    use serde_json::json;

    /// Whether `expr` selects a small cluster, or why not (compiled and run on CEL's stack).
    fn run(expr: &str) -> Result<(), String> {
        let expr = expr.to_owned();
        on_cel_stack(move || {
            let json = json!({"metadata": {"name": "c", "labels": {"a": "b"}}});
            let exprs = compile(&[expr])?;
            let subject = Subject::new("c", &json, &exprs.reads);
            exprs.matches(&subject, &|_: &str, _: &str| None)
        })
        .unwrap()
    }

    #[test]
    fn the_clusters_numbers_are_ints_as_in_ocm() {
        let json = json!({"metadata": {"name": "c", "generation": 3}});
        let matched = on_cel_stack(move || {
            let exprs = compile(&["managedCluster.metadata.generation == 3".into()])?;
            let subject = Subject::new("c", &json, &exprs.reads);
            exprs.matches(&subject, &|_: &str, _: &str| None)
        });
        assert_eq!(matched, Ok(Ok(())));
    }

    #[test]
    fn namespaced_functions_are_not_undeclared_names() {
        assert_eq!(run("strings.quote('a') == '\"a\"'"), Ok(()));
        // A target that names no registered namespace is a name like any other.
        let err = run("nosuch.fn(1) == 1").unwrap_err();
        assert!(err.contains("undeclared reference to 'nosuch'"), "{err}");
        let err = run("managedcluster.scores('x').size() == 0").unwrap_err();
        assert!(err.contains("undeclared reference to 'managedcluster'"), "{err}");
    }

    #[test]
    fn message_literals_do_not_compile() {
        let err = run("Foo{a: 1} == 1").unwrap_err();
        assert!(err.contains("message literals"), "{err}");
    }

    #[test]
    fn nested_comprehensions_are_estimated_in_linear_time() {
        let nested = format!("{}true{}", "[].all(x, ".repeat(40), ")".repeat(40));
        assert_eq!(run(&nested), Ok(()));
    }

    #[test]
    fn results_larger_than_their_inputs_are_bounded() {
        let hundred = format!("[{}]", vec!["''"; 100].join(","));
        let join =
            format!("[{hundred}].all(a, a.join(a.join(a.join(a.join(a.join('x'))))).size() > 0)");
        let err = run(&join).unwrap_err();
        assert!(err.contains("exceeds the per-expression limit"), "{err}");
        let err = run("'%.65535f'.format([1.0]) != ''").unwrap_err();
        assert!(err.contains("precision 65535 is over 1000"), "{err}");
        let err = run("size(lists.range(size(managedCluster.metadata.labels))) > 0").unwrap_err();
        assert!(err.contains("literal count"), "{err}");
        // Reads of the cluster inside loops are charged for the copies they make.
        let zeros = format!("[{}]", vec!["0"; 150].join(","));
        let reads = format!("{zeros}.all(x, {zeros}.all(y, managedCluster.metadata.name != ''))");
        assert_eq!(run(&reads), Ok(()), "a small cluster stays within the limit");
    }
}
