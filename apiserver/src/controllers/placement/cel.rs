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

/// Runs `f` on a thread with a stack deep enough for CEL; `Err` when no thread can be had (CEL is
/// never run on a worker's small stack).
pub fn on_cel_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("cel".into())
            .stack_size(STACK)
            .spawn_scoped(s, f)
            .map_err(|e| format!("no thread to evaluate CEL on: {e}"))?;
        match handle.join() {
            Ok(v) => Ok(v),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
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
        let (depth, has_struct) = shape(program.expression());
        if depth > MAX_DEPTH {
            return Err(format!(
                "compilation failed: the expression nests {depth} deep; at most {MAX_DEPTH} \
                 levels are allowed"
            ));
        }
        if has_struct {
            return Err(
                "compilation failed: message literals (`Type{...}`) are not supported".into()
            );
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
    /// What the expressions read of it.
    reads: &'a Reads,
    /// That part, as JSON (what the estimator measures): made on first use.
    selected: std::cell::OnceCell<std::borrow::Cow<'a, serde_json::Value>>,
    /// That part in its CEL form (what the interpreter reads): made on first use.
    value: std::cell::OnceCell<Result<Value, String>>,
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

    fn value(&self) -> Result<&Value, String> {
        self.value
            .get_or_init(|| {
                cel::to_value(self.selected())
                    .map_err(|e| format!("failed to convert the cluster for CEL: {e}"))
            })
            .as_ref()
            .map_err(Clone::clone)
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
        let cluster = subject.value()?;
        let bindings = Bindings { scores };
        let mut ctx = ROOT.new_inner_scope();
        // Bound once: every read of it borrows (a resolver would rebuild it per read).
        ctx.add_variable_from_value(CLUSTER, cluster.clone());
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
                Err(e) => return Err(format!("{source}: {}", clip(&e.to_string(), 300))),
            }
        }
        Ok(())
    }
}

/// The function namespaces cel-rust 0.13 and kube-cel 0.8 register (`strings.quote`, ...).
const NAMESPACES: [&str; 8] =
    ["format", "ip", "jsonpatch", "lists", "math", "optional", "sets", "strings"];

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
        // `sets.contains(...)`, `math.greatest(...)`: the target names a function namespace
        // (one the libraries register; any other target is a name like any other).
        Expr::Call(c)
            if matches!(c.target.as_deref().map(|t| &t.expr),
            Some(Expr::Ident(ns)) if NAMESPACES.contains(&ns.as_str()) && !bound.contains(&ns.as_str())) =>
        {
            c.args.iter().find_map(|a| undeclared(a, bound))
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
    clip(source, 80)
}

/// `text` cut at `n` characters.
fn clip(text: &str, n: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(n) {
        Some((cut, _)) => format!("{}...", &text[..cut]).into(),
        None => text.into(),
    }
}

/// The depth of an expression tree, and whether it builds a message (`Type{field: ...}`,
/// which cel-rust cannot evaluate), in one walk without recursion.
fn shape(root: &IdedExpr) -> (usize, bool) {
    let mut deepest = 0;
    let mut has_struct = false;
    let mut stack = vec![(root, 1usize)];
    while let Some((e, d)) = stack.pop() {
        deepest = deepest.max(d);
        has_struct |= matches!(e.expr, Expr::Struct(_));
        for child in children(e) {
            stack.push((child, d + 1));
        }
    }
    (deepest, has_struct)
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
            serde_json::Value::Array(items) => Size::of_children(items.iter().map(|v| (0, v))),
            serde_json::Value::Object(m) => {
                Size::of_children(m.iter().map(|(k, v)| (k.len() as u64 + 1, v)))
            }
            _ => Size::ONE,
        }
    }
}

impl Size {
    /// A list or map of children `(key weight, value)`, each weighed once.
    fn of_children<'v>(children: impl Iterator<Item = (u64, &'v serde_json::Value)>) -> Size {
        let mut size = Size { len: 0, weight: 1, elem: 0 };
        for (key, v) in children {
            let w = weight(v);
            size.len += 1;
            size.weight = size.weight.saturating_add(key).saturating_add(w);
            size.elem = size.elem.max(key.max(w));
        }
        size
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
    /// The copies reading a path into the cluster makes (each step copies the value it
    /// selects) and the size of what it reads, in one descent (a missing field is an error:
    /// size 1, as is each step after it).
    fn measure(&self, path: &[&str]) -> (u64, Size) {
        // The part converted is the part read: its copies are what the interpreter makes.
        let mut v = self.subject.selected();
        let mut size = Size::of(v);
        let mut copies = 0u64;
        for (k, key) in path.iter().enumerate() {
            let next = match v {
                serde_json::Value::Object(m) => m.get(*key),
                serde_json::Value::Array(items) => {
                    key.parse::<usize>().ok().and_then(|i| items.get(i))
                }
                _ => None,
            };
            let Some(n) = next else {
                return (copies.saturating_add((path.len() - k) as u64), Size::ONE);
            };
            v = n;
            size = Size::of(v);
            copies = copies.saturating_add(size.weight);
        }
        (copies, size)
    }

    /// (cost, result size) of `e`.
    fn walk<'e>(&self, e: &'e IdedExpr, scope: &mut Scope<'e>) -> Result<(u64, Size), String> {
        if let Some(path) = path(e, scope.get(CLUSTER).is_some()) {
            let (copies, size) = self.measure(&path);
            return Ok((1u64.saturating_add(copies), size));
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
                if s.test {
                    (cost.saturating_add(1), Size::ONE)
                } else {
                    (cost.saturating_add(1).saturating_add(from.elem), Size::within(from.elem))
                }
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
                // Building it copies every element.
                (cost.saturating_add(size.weight), size)
            }
            Expr::Call(call) => self.call(e, call, scope)?,
            Expr::Comprehension(c) => {
                let (range_cost, range) = self.walk(&c.iter_range, scope)?;
                let (init_cost, init) = self.walk(&c.accu_init, scope)?;
                let n = range.len;
                let element = Size::within(range.elem);
                // One walk of the step and the condition (walking them again with the grown
                // accumulator would make nested comprehensions exponential to estimate): the
                // accumulator's growth is added arithmetically.
                scope.vars.push((&c.iter_var, element));
                if let Some(v2) = &c.iter_var2 {
                    scope.vars.push((v2, element));
                }
                scope.vars.push((&c.accu_var, init));
                let step = self.walk(&c.loop_step, scope);
                let cond = self.walk(&c.loop_cond, scope);
                scope.vars.truncate(scope.vars.len() - 2 - usize::from(c.iter_var2.is_some()));
                let ((step_cost, first), (cond_cost, _)) = (step?, cond?);
                // What one step adds to the accumulator (a list for `map` and `filter`, nothing
                // for the boolean ones), then the accumulator at its largest.
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
                // Each iteration copies its element and reads (and may copy) the accumulator in
                // both the step and the condition.
                let per_iteration = step_cost
                    .saturating_add(cond_cost)
                    .saturating_add(element.weight)
                    .saturating_add(accu.weight.saturating_mul(3));
                scope.vars.push((&c.accu_var, accu));
                let result = self.walk(&c.result, scope);
                scope.vars.pop();
                let (result_cost, size) = result?;
                let cost = n
                    .saturating_mul(per_iteration)
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
        let product: u64 =
            inputs.iter().fold(1u64, |a, s| a.saturating_mul(s.weight.saturating_add(1)));
        let literal_int = |i: usize| match call.args.get(i).map(|a| &a.expr) {
            Some(Expr::Literal(LiteralValue::Int(n))) => u64::try_from(*n.inner()).ok(),
            Some(Expr::Literal(LiteralValue::UInt(n))) => Some(*n.inner()),
            _ => None,
        };
        let name = call.func_name.as_str();
        // Work: linear in the inputs, but quadratic where the library compares all pairs or
        // compiles a pattern.
        let work = match name {
            "distinct" | "indexOf" | "lastIndexOf" | "contains" | "@in" | "matches" | "find"
            | "findAll" | "replace" | "split" | "intersects" | "equivalent" => product,
            _ => total,
        };
        cost = cost.saturating_add(work);
        let size = match name {
            // Answers of one bit or one number, whatever they read.
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
            | "exists_one"
            | "indexOf"
            | "lastIndexOf"
            | "intersects"
            | "equivalent"
            | "isSorted"
            | "isURL"
            | "isIP"
            | "isCIDR"
            | "isSemver"
            | "isQuantity" => Size::ONE,
            // Every occurrence of one argument replaced by another; every element joined by a
            // separator (non-strings printed escaped, so up to twice their size).
            "replace" | "join" | "split" => Size::within(product.saturating_mul(2)),
            // `lists.range(n)`: n numbers, so n must be known.
            "range" => match literal_int(0) {
                Some(n) => Size { len: n, weight: n.saturating_mul(2).saturating_add(1), elem: 1 },
                None => return Err("lists.range() is bounded only with a literal count".into()),
            },
            // Concatenation (strings, bytes, lists) is its inputs together; numbers are small.
            "_+_" => Size::within(total),
            "_-_" | "_*_" | "_/_" | "_%_" | "-_" => Size::ONE,
            // An element of the container, or one of the branches.
            "_[_]" => Size::within(inputs.first().map_or(1, |c| c.elem)),
            "_?_:_" => Size::within(inputs.iter().skip(1).map(|s| s.weight).max().unwrap_or(1)),
            "format" => self.format_size(call, total)?,
            "scores" => self.scores_size(call, scope)?,
            // Otherwise (`+`, `parseJSON`, quoting, conversions, indexing...) at most twice the
            // inputs (quoting doubles; a number prints in at most 330 characters).
            _ => Size::within(total.saturating_mul(2).saturating_add(330)),
        };
        // Making the result writes it.
        cost = cost.saturating_add(size.weight);
        Ok((cost, size))
    }

    /// The size of `"<literal>".format([...])`: the literal with each argument printed, each
    /// within its precision; a format that is not a literal, or a precision over 1,000, cannot be
    /// bounded.
    fn format_size(&self, call: &cel::common::ast::CallExpr, total: u64) -> Result<Size, String> {
        let Some(Expr::Literal(LiteralValue::String(f))) = call.target.as_deref().map(|t| &t.expr)
        else {
            return Err("format() is bounded only on a literal format string".into());
        };
        let f = f.inner();
        let mut widest = 0u64;
        for part in f.split('%').skip(1) {
            let digits: String =
                part.trim_start_matches('.').chars().take_while(char::is_ascii_digit).collect();
            let precision: u64 = digits.parse().unwrap_or(0);
            if precision > 1000 {
                return Err(format!("format() precision {precision} is over 1000"));
            }
            widest = widest.max(precision);
        }
        let pieces = f.matches('%').count() as u64;
        Ok(Size::within(
            total
                .saturating_mul(2)
                .saturating_add(pieces.saturating_mul(widest.saturating_add(330))),
        ))
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
            .and_then(|o| o.items.iter().map(|(n, _)| n.len() as u64 + 64).max())
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
