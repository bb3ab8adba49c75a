//! `celSelector` (ocm.md §5.3): a placement's CEL expressions compiled once per pass and evaluated
//! against one ManagedCluster in OCM's environment (the `managedCluster` variable, the
//! `scores(name)` and `parseJSON()` functions, Kubernetes' extension libraries), each evaluation
//! admitted only when a cost bound computed from the cluster's actual data is within limits.
//!
//! cel-rust is a tree-walking interpreter without cost accounting, so the bound is computed
//! before evaluating: [`estimate`] walks the expression with the sizes of the values it reads and
//! charges each node at least the work the interpreter does for it (a comprehension its body
//! times the length of its range, a function the size of its inputs). Kubernetes' limits apply to
//! that bound: [`PER_CALL_LIMIT`] per expression, [`CLUSTER_BUDGET`] per cluster.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::{EntryExpr, Expr, LiteralValue};
use kube_cel::cel::context::VariableResolver;
use kube_cel::cel::extractors::This;
use kube_cel::cel::objects::Key;
use kube_cel::cel::{self, Context, ExecutionError, FunctionContext, IdedExpr, Program, Value};

use super::schedule::ScoreLookup;

/// Kubernetes' `PerCallLimit`, which OCM sets on each expression.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// Kubernetes' `RuntimeCELCostBudget`, which OCM gives each cluster for all its expressions.
pub const CLUSTER_BUDGET: u64 = 10_000_000;
/// The longest expression compiled (the parser recurses on it).
pub const MAX_LEN: usize = 10 * 1024;
/// The deepest expression tree accepted (the interpreter recurses on it).
pub const MAX_DEPTH: usize = 250;
/// The stack CEL is compiled and evaluated on: the parser and the interpreter recurse, and a
/// legal expression can be deeper than a tokio worker's 2 MiB allows. Only touched pages count.
const STACK: usize = 64 << 20;

/// The variable a cluster is bound to.
const CLUSTER: &str = "managedCluster";
/// The hidden variables `scores()` reads, `\0scores/<cluster>/<name>`: no CEL identifier can
/// spell them.
const SCORES: &str = "\u{0}scores/";

/// The functions: the standard ones, Kubernetes' libraries, and OCM's.
static ROOT: LazyLock<Context<'static>> = LazyLock::new(|| {
    let mut ctx = Context::default().with_all();
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

/// Runs `f` on a thread with a stack deep enough for CEL (on this one if no thread can be had:
/// the length and depth limits keep a release build within 2 MiB).
pub fn on_cel_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let job = std::sync::Mutex::new(Some(f));
    let run = || job.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take().map(|f| f());
    let out = std::thread::scope(|s| {
        let spawned =
            std::thread::Builder::new().name("cel".into()).stack_size(STACK).spawn_scoped(s, run);
        match spawned {
            Ok(handle) => match handle.join() {
                Ok(v) => v,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(e) => {
                tracing::warn!(error = %e, "no thread for CEL; evaluating on the caller's stack");
                None
            }
        }
    });
    match out {
        Some(v) => v,
        None => run().unwrap_or_else(|| unreachable!("the job runs once")),
    }
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
        if source.len() > MAX_LEN {
            return Err(format!(
                "compilation failed: the expression is {} bytes long; at most {MAX_LEN} are allowed",
                source.len()
            ));
        }
        let program = Program::compile(source).map_err(|e| format!("compilation failed: {e}"))?;
        let depth = depth(program.expression());
        if depth > MAX_DEPTH {
            return Err(format!(
                "compilation failed: the expression nests {depth} deep; at most {MAX_DEPTH} \
                 levels are allowed"
            ));
        }
        if let Some(name) = undeclared(program.expression(), &mut Vec::new()) {
            return Err(format!("compilation failed: undeclared reference to '{name}'"));
        }
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
    /// The part of it converted for CEL: what the expressions read.
    reads: &'a Reads,
    /// The CEL form, made on first use.
    value: std::cell::OnceCell<Result<Value, String>>,
}

impl<'a> Subject<'a> {
    pub fn new(name: &'a str, json: &'a serde_json::Value, reads: &'a Reads) -> Subject<'a> {
        Subject { name, json, reads, value: std::cell::OnceCell::new() }
    }

    fn value(&self) -> Result<&Value, String> {
        self.value
            .get_or_init(|| {
                cel::to_value(&*self.reads.select(self.json))
                    .map_err(|e| format!("failed to convert the cluster for CEL: {e}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// What the interpreter may read while evaluating one cluster.
struct Bindings<'a> {
    cluster: &'a Value,
    scores: ScoreLookup<'a>,
}

impl VariableResolver for Bindings<'_> {
    fn resolve(&self, variable: &str) -> Option<Value> {
        if variable == CLUSTER {
            return Some(self.cluster.clone());
        }
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
        let cluster = subject.value()?;
        let bindings = Bindings { cluster, scores };
        let mut ctx = ROOT.new_inner_scope();
        ctx.set_variable_resolver(&bindings);
        let mut spent: u64 = 0;
        for (source, program) in &self.programs {
            let source = short(source);
            let cost = estimate(program.expression(), subject, scores)
                .map_err(|e| format!("{source}: {e}"))?;
            if cost > PER_CALL_LIMIT {
                return Err(format!(
                    "{source}: estimated cost {cost} exceeds the per-expression limit \
                     {PER_CALL_LIMIT}"
                ));
            }
            spent += cost;
            if spent > CLUSTER_BUDGET {
                return Err(format!(
                    "{source}: the cluster's expressions exceed the cost budget {CLUSTER_BUDGET}"
                ));
            }
            match program.execute(&ctx) {
                Ok(Value::Bool(true)) => {}
                Ok(Value::Bool(false)) => return Err(format!("{source}: false")),
                Ok(other) => {
                    return Err(format!("{source}: returned {}, not a bool", other.type_of()));
                }
                Err(e) => return Err(format!("{source}: {e}")),
            }
        }
        Ok(())
    }
}

/// The first name `e` reads that nothing declares (cel-go refuses these when compiling; cel-rust
/// only when it runs, so a typo would select nothing instead of saying so). `bound` holds the
/// comprehension variables in scope.
fn undeclared<'e>(e: &'e IdedExpr, bound: &mut Vec<&'e str>) -> Option<&'e str> {
    /// Type names an expression may compare with (`type(x) == string`).
    const TYPES: [&str; 11] = [
        "bool",
        "bytes",
        "double",
        "int",
        "list",
        "map",
        "null_type",
        "string",
        "type",
        "uint",
        "dyn",
    ];
    match &e.expr {
        Expr::Ident(name) => {
            (name != CLUSTER && !TYPES.contains(&name.as_str()) && !bound.contains(&name.as_str()))
                .then_some(name.as_str())
        }
        Expr::Comprehension(c) => {
            if let Some(name) =
                undeclared(&c.iter_range, bound).or_else(|| undeclared(&c.accu_init, bound))
            {
                return Some(name);
            }
            let outer = bound.len();
            bound.push(&c.accu_var);
            let result = undeclared(&c.result, bound);
            bound.push(&c.iter_var);
            bound.extend(c.iter_var2.as_deref());
            let inner = undeclared(&c.loop_cond, bound).or_else(|| undeclared(&c.loop_step, bound));
            bound.truncate(outer);
            inner.or(result)
        }
        _ => children(e).into_iter().find_map(|child| undeclared(child, bound)),
    }
}

/// An expression as messages name it: its first 80 characters.
fn short(source: &str) -> std::borrow::Cow<'_, str> {
    match source.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &source[..cut]).into(),
        None => source.into(),
    }
}

/// The depth of an expression tree, without recursion.
fn depth(root: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((e, d)) = stack.pop() {
        deepest = deepest.max(d);
        for child in children(e) {
            stack.push((child, d + 1));
        }
    }
    deepest
}

/// The direct subexpressions of `e`.
fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(c) => c.target.as_deref().into_iter().chain(&c.args).collect(),
        Expr::Comprehension(c) => {
            vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result]
        }
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => m.entries.iter().flat_map(|e| entry(&e.expr)).collect(),
        Expr::Struct(s) => s.entries.iter().flat_map(|e| entry(&e.expr)).collect(),
        Expr::Select(s) => vec![&*s.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

fn entry(e: &EntryExpr) -> Vec<&IdedExpr> {
    match e {
        EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
        EntryExpr::StructField(f) => vec![&f.value],
    }
}

/// An upper bound of a value's size: `len` bounds its length (entries, characters, bytes),
/// `weight` its whole size (one per node plus string lengths), `elem` the weight of any one
/// element.
#[derive(Debug, Clone, Copy)]
struct Size {
    len: u64,
    weight: u64,
    elem: u64,
}

impl Size {
    const ONE: Size = Size { len: 1, weight: 1, elem: 1 };

    /// A value known only by its weight: anything inside it can be as large.
    fn within(weight: u64) -> Size {
        Size { len: weight, weight, elem: weight }
    }

    /// The measured size of a JSON value.
    fn of(v: &serde_json::Value) -> Size {
        match v {
            serde_json::Value::String(s) => {
                let n = s.len() as u64;
                Size { len: n, weight: n + 1, elem: 1 }
            }
            serde_json::Value::Array(items) => {
                let elem = items.iter().map(weight).max().unwrap_or(0);
                Size {
                    len: items.len() as u64,
                    weight: 1 + items.iter().map(weight).sum::<u64>(),
                    elem,
                }
            }
            serde_json::Value::Object(m) => {
                let elem = m.iter().map(|(k, v)| (k.len() as u64 + 1).max(weight(v))).max();
                let total: u64 = m.iter().map(|(k, v)| k.len() as u64 + 1 + weight(v)).sum();
                Size { len: m.len() as u64, weight: 1 + total, elem: elem.unwrap_or(0) }
            }
            _ => Size::ONE,
        }
    }
}

/// The weight of a JSON value (see [`Size`]).
fn weight(v: &serde_json::Value) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        total += 1;
        match v {
            serde_json::Value::String(s) => total += s.len() as u64,
            serde_json::Value::Array(items) => stack.extend(items),
            serde_json::Value::Object(m) => {
                total += m.keys().map(|k| k.len() as u64 + 1).sum::<u64>();
                stack.extend(m.values());
            }
            _ => {}
        }
    }
    total
}

/// `e` as a path into the cluster (`managedCluster.a.b["c"]`), when it is one; `shadowed` when a
/// comprehension variable named `managedCluster` hides the cluster.
fn path(e: &IdedExpr, shadowed: bool) -> Option<Vec<&str>> {
    match &e.expr {
        Expr::Ident(name) if name == CLUSTER && !shadowed => Some(Vec::new()),
        Expr::Select(s) if !s.test => {
            let mut p = path(&s.operand, shadowed)?;
            p.push(&s.field);
            Some(p)
        }
        Expr::Call(c) if c.func_name == "_[_]" && c.target.is_none() && c.args.len() == 2 => {
            let Expr::Literal(LiteralValue::String(key)) = &c.args[1].expr else {
                return None;
            };
            let mut p = path(&c.args[0], shadowed)?;
            p.push(key.inner());
            Some(p)
        }
        _ => None,
    }
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
        _ => children(e).into_iter().all(|child| collect(child, shadowed, out)),
    }
}

/// The variables in scope while estimating: comprehension variables shadow the cluster.
struct Scope<'s> {
    vars: Vec<(&'s str, Size)>,
}

impl<'s> Scope<'s> {
    fn get(&self, name: &str) -> Option<Size> {
        self.vars.iter().rev().find(|(n, _)| *n == name).map(|(_, s)| *s)
    }
}

/// The cost bound of evaluating `e` against `subject`.
fn estimate(e: &IdedExpr, subject: &Subject<'_>, scores: ScoreLookup<'_>) -> Result<u64, String> {
    let mut scope = Scope { vars: Vec::new() };
    Estimator { subject, scores }.walk(e, &mut scope).map(|(cost, _)| cost)
}

struct Estimator<'a, 'b> {
    subject: &'a Subject<'b>,
    scores: ScoreLookup<'a>,
}

impl Estimator<'_, '_> {
    /// The measured size of a path into the cluster (a missing field is an error, size 1).
    fn measure(&self, path: &[&str]) -> Size {
        let mut v = self.subject.json;
        for key in path {
            let next = match v {
                serde_json::Value::Object(m) => m.get(*key),
                serde_json::Value::Array(items) => {
                    key.parse::<usize>().ok().and_then(|i| items.get(i))
                }
                _ => None,
            };
            match next {
                Some(n) => v = n,
                None => return Size::ONE,
            }
        }
        Size::of(v)
    }

    /// (cost, result size) of `e`.
    fn walk<'e>(&self, e: &'e IdedExpr, scope: &mut Scope<'e>) -> Result<(u64, Size), String> {
        if let Some(path) = path(e, scope.get(CLUSTER).is_some()) {
            return Ok((1 + path.len() as u64, self.measure(&path)));
        }
        Ok(match &e.expr {
            Expr::Ident(name) => (1, scope.get(name).unwrap_or(Size::ONE)),
            Expr::Literal(LiteralValue::String(s)) => {
                let n = s.inner().len() as u64;
                (1, Size { len: n, weight: n + 1, elem: 1 })
            }
            Expr::Literal(LiteralValue::Bytes(b)) => {
                let n = b.inner().len() as u64;
                (1, Size { len: n, weight: n + 1, elem: 1 })
            }
            Expr::Literal(_) | Expr::Unspecified => (1, Size::ONE),
            Expr::Select(s) => {
                let (cost, from) = self.walk(&s.operand, scope)?;
                (cost + 1, if s.test { Size::ONE } else { Size::within(from.elem) })
            }
            Expr::List(_) | Expr::Map(_) | Expr::Struct(_) => {
                let mut cost = 1u64;
                let mut size = Size { len: 0, weight: 1, elem: 0 };
                for child in children(e) {
                    let (c, s) = self.walk(child, scope)?;
                    cost = cost.saturating_add(c);
                    size.len += 1;
                    size.weight = size.weight.saturating_add(s.weight);
                    size.elem = size.elem.max(s.weight);
                }
                (cost, size)
            }
            Expr::Call(call) => self.call(e, call, scope)?,
            Expr::Comprehension(c) => {
                let (range_cost, range) = self.walk(&c.iter_range, scope)?;
                let (init_cost, init) = self.walk(&c.accu_init, scope)?;
                let n = range.len;
                let element = Size::within(range.elem);
                let iteration = |this: &Self, scope: &mut Scope<'e>, accu: Size| {
                    scope.vars.push((&c.iter_var, element));
                    if let Some(v2) = &c.iter_var2 {
                        scope.vars.push((v2, element));
                    }
                    scope.vars.push((&c.accu_var, accu));
                    let step = this.walk(&c.loop_step, scope);
                    let cond = this.walk(&c.loop_cond, scope);
                    scope.vars.truncate(scope.vars.len() - 2 - usize::from(c.iter_var2.is_some()));
                    Ok::<_, String>((step?, cond?.0))
                };
                // What one step adds to the accumulator (a list for `map` and `filter`, nothing
                // for the boolean ones), then the accumulator at its largest.
                let ((_, first), _) = iteration(self, scope, init)?;
                let accu = Size {
                    len: init
                        .len
                        .max(first.len)
                        .saturating_add(n.saturating_mul(first.len.saturating_sub(init.len))),
                    weight: init
                        .weight
                        .max(first.weight)
                        .saturating_add(n.saturating_mul(first.weight.saturating_sub(init.weight))),
                    elem: init.elem.max(first.elem),
                };
                let ((step_cost, _), cond_cost) = iteration(self, scope, accu)?;
                scope.vars.push((&c.accu_var, accu));
                let result = self.walk(&c.result, scope);
                scope.vars.pop();
                let (result_cost, size) = result?;
                let cost = n
                    .saturating_mul(step_cost.saturating_add(cond_cost))
                    .saturating_add(range_cost)
                    .saturating_add(init_cost)
                    .saturating_add(result_cost);
                (cost, size)
            }
        })
    }

    /// (cost, result size) of a function call: its arguments, plus work as large as its inputs.
    fn call<'e>(
        &self,
        e: &'e IdedExpr,
        call: &'e cel::common::ast::CallExpr,
        scope: &mut Scope<'e>,
    ) -> Result<(u64, Size), String> {
        let mut cost = 1u64;
        let mut inputs = Vec::new();
        for child in children(e) {
            let (c, s) = self.walk(child, scope)?;
            cost = cost.saturating_add(c);
            inputs.push(s);
        }
        let total: u64 = inputs.iter().fold(0u64, |a, s| a.saturating_add(s.weight));
        cost = cost.saturating_add(total);
        let size = match call.func_name.as_str() {
            // Answers of one bit, whatever they read.
            "_==_"
            | "_!=_"
            | "_<_"
            | "_<=_"
            | "_>_"
            | "_>=_"
            | "_&&_"
            | "_||_"
            | "!_"
            | "@in"
            | "@not_strictly_false"
            | "size"
            | "contains"
            | "startsWith"
            | "endsWith"
            | "matches"
            | "has"
            | "exists"
            | "all"
            | "exists_one" => Size::ONE,
            // Every occurrence of the second argument replaced by the third.
            "replace" => Size::within(
                inputs.iter().fold(1u64, |a, s| a.saturating_mul(s.weight.saturating_add(1))),
            ),
            "scores" => self.scores_size(call, scope)?,
            // Otherwise (`+`, `split`, `join`, `parseJSON`, conversions, indexing...) nothing
            // larger than the inputs together.
            _ => Size::within(total),
        };
        Ok((cost, size))
    }

    /// The size of `scores("name")`: the named object's items. Its cost can be bounded only when
    /// the name is a literal and the cluster is the one being evaluated.
    fn scores_size(
        &self,
        call: &cel::common::ast::CallExpr,
        scope: &Scope<'_>,
    ) -> Result<Size, String> {
        let on_subject = call
            .target
            .as_deref()
            .is_some_and(|t| path(t, scope.get(CLUSTER).is_some()).is_some_and(|p| p.is_empty()));
        let name = match call.args.as_slice() {
            [IdedExpr { expr: Expr::Literal(LiteralValue::String(s)), .. }] if on_subject => {
                s.inner()
            }
            _ => {
                return Err("scores() is bounded only as managedCluster.scores(\"<literal \
                            name>\")"
                    .into());
            }
        };
        let object = (self.scores)(self.subject.name, name);
        let items = object.as_ref().map_or(0, |o| o.items.len() as u64);
        // An item: a map of a name, an int and a short string.
        let elem = object
            .and_then(|o| o.items.iter().map(|(n, _)| n.len() as u64 + 32).max())
            .unwrap_or(0);
        Ok(Size { len: items, weight: 1 + items * elem, elem })
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
