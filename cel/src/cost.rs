//! The cost bound of an expression, computed before it runs: cel-rust is a tree-walking
//! interpreter that counts nothing while it evaluates, so [`estimate`] walks the expression with
//! the sizes of the values it reads (measured on the values themselves) and charges every node
//! at least the interpreter's work for it (a comprehension its body times the length of its
//! range, a function the size of its inputs). [`Budget`] applies Kubernetes' limits to the
//! bounds: [`PER_CALL_LIMIT`] per expression, a runtime budget over all of one evaluation's.

use kube_cel::cel::IdedExpr;
use kube_cel::cel::common::ast::{CallExpr, Expr, LiteralValue};

use crate::{PER_CALL_LIMIT, RUNTIME_BUDGET, ast};

/// The sizes of the results of a caller's own functions.
pub trait Calls {
    /// The size of what `call` returns, for a function of the caller's (`Err` when it cannot be
    /// bounded); `None` leaves the call to the estimator's own rules. `target` is the call's
    /// target when that is a path into a variable: the variable's name and the steps.
    fn result_size(
        &self,
        call: &CallExpr,
        target: Option<(&str, &[&str])>,
    ) -> Option<Result<Size, Unbounded>>;
}

/// No functions of the caller's: every call sized by the estimator's own rules.
pub struct Builtins;

impl Calls for Builtins {
    fn result_size(
        &self,
        _: &CallExpr,
        _: Option<(&str, &[&str])>,
    ) -> Option<Result<Size, Unbounded>> {
        None
    }
}

/// An expression whose cost cannot be bounded before it runs, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unbounded(pub String);

/// Why an expression is not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Its bound is over [`PER_CALL_LIMIT`].
    #[error("estimated cost {0} exceeds the per-expression limit {PER_CALL_LIMIT}")]
    PerCall(u64),
    /// Its bound is over what the evaluation has left.
    #[error("the cost budget is exceeded")]
    Budget,
}

/// What the expressions of one evaluation may still cost together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    remaining: u64,
}

impl Default for Budget {
    /// Kubernetes' runtime budget, [`RUNTIME_BUDGET`].
    fn default() -> Self {
        Budget { remaining: RUNTIME_BUDGET }
    }
}

impl Budget {
    /// A budget of `total`.
    pub fn new(total: u64) -> Budget {
        Budget { remaining: total }
    }

    /// What is left.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Admits an expression bounded by `cost` and charges it; a refused one is not charged.
    pub fn admit(&mut self, cost: u64) -> Result<(), Refused> {
        if cost > PER_CALL_LIMIT {
            return Err(Refused::PerCall(cost));
        }
        if cost > self.remaining {
            return Err(Refused::Budget);
        }
        self.remaining -= cost;
        Ok(())
    }

    /// Leaves nothing: every later expression is refused.
    pub fn exhaust(&mut self) {
        self.remaining = 0;
    }
}

/// An upper bound of a value's size: `len` bounds its length (entries, characters, bytes),
/// `weight` its whole size (one per node plus string lengths), `elem` the weight of any one
/// element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    /// Entries, characters or bytes.
    pub len: u64,
    /// One per node plus string lengths.
    pub weight: u64,
    /// The weight of any one element.
    pub elem: u64,
}

impl Size {
    /// A scalar.
    pub const ONE: Size = Size { len: 1, weight: 1, elem: 1 };

    /// A value known only by its weight: anything inside it can be as large.
    pub fn within(weight: u64) -> Size {
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

/// The comprehension variables in scope while estimating (they shadow the caller's variables).
struct Scope<'s> {
    vars: Vec<(&'s str, Size)>,
}

impl<'s> Scope<'s> {
    fn get(&self, name: &str) -> Option<Size> {
        self.vars.iter().rev().find(|(n, _)| *n == name).map(|(_, s)| *s)
    }
}

/// The cost bound of evaluating `e` with `variables` bound to these values (measured: the
/// bound is for these values only), the sizes of the caller's functions' results from `calls`.
/// `Err` when the expression's cost cannot be bounded (a size only known at run time).
pub fn estimate(
    e: &IdedExpr,
    variables: &[(&str, &serde_json::Value)],
    calls: &dyn Calls,
) -> Result<u64, Unbounded> {
    let mut scope = Scope { vars: Vec::new() };
    Estimator { variables, calls }.walk(e, &mut scope).map(|(cost, _)| cost)
}

struct Estimator<'a> {
    variables: &'a [(&'a str, &'a serde_json::Value)],
    calls: &'a dyn Calls,
}

impl<'a> Estimator<'a> {
    /// `e` as a path into one of the variables (one no comprehension variable hides): its name,
    /// its value and the steps.
    fn variable_path<'e>(
        &self,
        e: &'e IdedExpr,
        scope: &Scope<'_>,
    ) -> Option<(&'a str, &'a serde_json::Value, Vec<&'e str>)> {
        let (root, steps) = ast::path(e)?;
        if scope.get(root).is_some() {
            return None;
        }
        let (name, value) = self.variables.iter().find(|(name, _)| *name == root)?;
        Some((name, value, steps))
    }

    /// The copies reading a path into a variable's value makes (each step copies the value it
    /// selects) and the size of what it reads, in one descent (a missing field is an error:
    /// size 1, as is each step after it).
    fn measure(&self, mut v: &serde_json::Value, path: &[&str]) -> (u64, Size) {
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
    fn walk<'e>(&self, e: &'e IdedExpr, scope: &mut Scope<'e>) -> Result<(u64, Size), Unbounded> {
        if let Some((_, value, path)) = self.variable_path(e, scope) {
            let (copies, size) = self.measure(value, &path);
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
                for child in ast::children(e) {
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
        call: &'e CallExpr,
        scope: &mut Scope<'e>,
    ) -> Result<(u64, Size), Unbounded> {
        let mut cost = 1u64;
        let mut inputs = Vec::new();
        for child in ast::children(e) {
            let (c, s) = self.walk(child, scope)?;
            cost = cost.saturating_add(c);
            inputs.push(s);
        }
        let total: u64 = inputs.iter().fold(0u64, |a, s| a.saturating_add(s.weight));
        let product: u64 =
            inputs.iter().fold(1u64, |a, s| a.saturating_mul(s.weight.saturating_add(1)));
        let name = call.func_name.as_str();
        // Work: linear in the inputs, but quadratic where the library compares all pairs or
        // compiles a pattern.
        let work = match name {
            "distinct" | "indexOf" | "lastIndexOf" | "contains" | "@in" | "matches" | "find"
            | "findAll" | "replace" | "split" | "intersects" | "equivalent" => product,
            _ => total,
        };
        cost = cost.saturating_add(work);
        let target = call.target.as_deref().and_then(|t| self.variable_path(t, scope));
        let target = target.as_ref().map(|(root, _, steps)| (*root, steps.as_slice()));
        let size = match self.calls.result_size(call, target) {
            Some(size) => size?,
            None => Self::builtin_size(name, call, &inputs, total, product)?,
        };
        // Making the result writes it.
        cost = cost.saturating_add(size.weight);
        Ok((cost, size))
    }

    /// The size of a built-in function's result: `name` called with inputs of these sizes
    /// (`total` their weights summed, `product` multiplied).
    fn builtin_size(
        name: &str,
        call: &CallExpr,
        inputs: &[Size],
        total: u64,
        product: u64,
    ) -> Result<Size, Unbounded> {
        let literal_int = |i: usize| match call.args.get(i).map(|a| &a.expr) {
            Some(Expr::Literal(LiteralValue::Int(n))) => u64::try_from(*n.inner()).ok(),
            Some(Expr::Literal(LiteralValue::UInt(n))) => Some(*n.inner()),
            _ => None,
        };
        Ok(match name {
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
                None => {
                    return Err(Unbounded(
                        "lists.range() is bounded only with a literal count".into(),
                    ));
                }
            },
            // Concatenation (strings, bytes, lists) is its inputs together; numbers are small.
            "_+_" => Size::within(total),
            "_-_" | "_*_" | "_/_" | "_%_" | "-_" => Size::ONE,
            // An element of the container, or one of the branches.
            "_[_]" => Size::within(inputs.first().map_or(1, |c| c.elem)),
            "_?_:_" => Size::within(inputs.iter().skip(1).map(|s| s.weight).max().unwrap_or(1)),
            "format" => Self::format_size(call, total)?,
            // Otherwise (`+`, `parseJSON`, quoting, conversions, indexing...) at most twice the
            // inputs (quoting doubles; a number prints in at most 330 characters).
            _ => Size::within(total.saturating_mul(2).saturating_add(330)),
        })
    }

    /// The size of `"<literal>".format([...])`: the literal with each argument printed, each
    /// within its precision; a format that is not a literal, or a precision over 1,000, cannot be
    /// bounded.
    fn format_size(call: &CallExpr, total: u64) -> Result<Size, Unbounded> {
        let Some(Expr::Literal(LiteralValue::String(f))) = call.target.as_deref().map(|t| &t.expr)
        else {
            return Err(Unbounded("format() is bounded only on a literal format string".into()));
        };
        let f = f.inner();
        let mut widest = 0u64;
        for part in f.split('%').skip(1) {
            let digits: String =
                part.trim_start_matches('.').chars().take_while(char::is_ascii_digit).collect();
            let precision: u64 = digits.parse().unwrap_or(0);
            if precision > 1000 {
                return Err(Unbounded(format!("format() precision {precision} is over 1000")));
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
}

#[cfg(test)]
mod tests {
    //! The bound against expressions built to outrun it.

    use super::*;
    use crate::{compile, on_cel_stack};
    use serde_json::json;

    /// The bound of `expr` with `object` bound to `value` and `calls` for its functions.
    fn bound(
        expr: &str,
        value: serde_json::Value,
        calls: &(dyn Calls + Sync),
    ) -> Result<u64, String> {
        let expr = expr.to_owned();
        on_cel_stack(move || {
            let program = compile(&expr, &["object"]).map_err(|e| e.to_string())?;
            estimate(program.expression(), &[("object", &value)], calls).map_err(|e| e.to_string())
        })
        .unwrap()
    }

    fn admitted(expr: &str) -> Result<(), String> {
        let cost = bound(expr, json!({"metadata": {"name": "c"}}), &Builtins)?;
        Budget::default().admit(cost).map_err(|e| e.to_string())
    }

    #[test]
    fn nested_comprehensions_are_estimated_in_linear_time() {
        let nested = format!("{}true{}", "[].all(x, ".repeat(40), ")".repeat(40));
        assert_eq!(admitted(&nested), Ok(()));
    }

    #[test]
    fn results_larger_than_their_inputs_are_bounded() {
        let hundred = format!("[{}]", vec!["''"; 100].join(","));
        let join =
            format!("[{hundred}].all(a, a.join(a.join(a.join(a.join(a.join('x'))))).size() > 0)");
        let err = admitted(&join).unwrap_err();
        assert!(err.contains("exceeds the per-expression limit"), "{err}");
        let err = admitted("'%.65535f'.format([1.0]) != ''").unwrap_err();
        assert!(err.contains("precision 65535 is over 1000"), "{err}");
        let err = admitted("size(lists.range(size(object.metadata))) > 0").unwrap_err();
        assert!(err.contains("literal count"), "{err}");
        // Three nested loops over 100 items are 10^6 iterations: over the per-call limit.
        let hundred =
            format!("[{}]", (0..100).map(|i| i.to_string()).collect::<Vec<_>>().join(","));
        let loops = format!("{hundred}.all(x, {hundred}.all(y, {hundred}.all(z, x + y + z >= 0)))");
        assert!(admitted(&loops).unwrap_err().contains("per-expression limit"));
    }

    #[test]
    fn reads_are_charged_by_the_size_of_what_they_read() {
        let small = bound("object.data.v == ''", json!({"data": {"v": "x"}}), &Builtins).unwrap();
        let large = json!({"data": {"v": "x".repeat(100_000)}});
        let read = bound("object.data.v == ''", large.clone(), &Builtins).unwrap();
        assert!(read > small + 100_000, "{small} {read}");
        // Reads inside loops are charged for the copies each iteration makes.
        let zeros = format!("[{}]", vec!["0"; 50].join(","));
        let looped = bound(&format!("{zeros}.all(x, object.data.v != '')"), large, &Builtins);
        assert!(looped.unwrap() > 50 * 100_000);
        // A comprehension variable of the same name hides the variable.
        let hidden = bound(
            "[{'v': 1}].all(object, object.v == 1)",
            json!({"v": "x".repeat(1000)}),
            &Builtins,
        );
        assert!(hidden.unwrap() < 1000);
    }

    /// A caller's function `big()` on `object` whose result is as large as it says.
    struct Big(u64);

    impl Calls for Big {
        fn result_size(
            &self,
            call: &CallExpr,
            target: Option<(&str, &[&str])>,
        ) -> Option<Result<Size, Unbounded>> {
            (call.func_name == "big").then(|| match target {
                Some(("object", [])) => Ok(Size::within(self.0)),
                _ => Err(Unbounded("big() is bounded only on object".into())),
            })
        }
    }

    #[test]
    fn a_callers_functions_are_sized_by_the_caller() {
        let small = bound("size(object.big()) > 0", json!({}), &Big(10)).unwrap();
        let large = bound("size(object.big()) > 0", json!({}), &Big(10_000)).unwrap();
        assert!(large >= small + 9_990, "{small} {large}");
        let err = bound("size([1].big()) > 0", json!({}), &Big(10)).unwrap_err();
        assert_eq!(err, "big() is bounded only on object");
    }

    #[test]
    fn a_budget_admits_until_it_is_spent() {
        let mut budget = Budget::new(10);
        assert_eq!(budget.admit(6), Ok(()));
        assert_eq!(budget.admit(6), Err(Refused::Budget), "refused, and not charged");
        assert_eq!(budget.remaining(), 4);
        assert_eq!(budget.admit(4), Ok(()));
        assert_eq!(
            Budget::default().admit(PER_CALL_LIMIT + 1),
            Err(Refused::PerCall(PER_CALL_LIMIT + 1))
        );
        let mut spent = Budget::default();
        spent.exhaust();
        assert_eq!(spent.admit(1), Err(Refused::Budget));
    }
}
