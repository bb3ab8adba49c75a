//! Walks over a compiled expression's tree: its children, its depth, the names it reads that
//! nothing declares, and paths into a variable (`object.a.b["c"]`).

use kube_cel::cel::IdedExpr;
use kube_cel::cel::common::ast::{EntryExpr, Expr, LiteralValue};

/// The function namespaces cel-rust 0.13 and kube-cel 0.8 register (`strings.quote`, ...).
const NAMESPACES: [&str; 8] =
    ["format", "ip", "jsonpatch", "lists", "math", "optional", "sets", "strings"];

/// Type names an expression may compare with (`type(x) == string`).
const TYPES: [&str; 11] =
    ["bool", "bytes", "double", "int", "list", "map", "null_type", "string", "type", "uint", "dyn"];

/// The direct subexpressions of `e`.
pub fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
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

/// The depth of an expression tree, and whether it builds a message (`Type{field: ...}`,
/// which cel-rust cannot evaluate), in one walk without recursion.
pub fn shape(root: &IdedExpr) -> (usize, bool) {
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

/// The first name `e` reads that neither `variables` nor a comprehension in scope declares, and
/// that is no type name or function namespace.
pub fn undeclared<'e>(e: &'e IdedExpr, variables: &[&str]) -> Option<&'e str> {
    undeclared_in(e, variables, &mut Vec::new())
}

/// [`undeclared`] with `bound` holding the comprehension variables in scope.
fn undeclared_in<'e>(
    e: &'e IdedExpr,
    variables: &[&str],
    bound: &mut Vec<&'e str>,
) -> Option<&'e str> {
    match &e.expr {
        Expr::Ident(name) => (!variables.contains(&name.as_str())
            && !TYPES.contains(&name.as_str())
            && !bound.contains(&name.as_str()))
        .then_some(name.as_str()),
        // `sets.contains(...)`, `math.greatest(...)`: the target names a function namespace
        // (one the libraries register; any other target is a name like any other).
        Expr::Call(c)
            if matches!(c.target.as_deref().map(|t| &t.expr),
            Some(Expr::Ident(ns)) if NAMESPACES.contains(&ns.as_str()) && !bound.contains(&ns.as_str())) =>
        {
            c.args.iter().find_map(|a| undeclared_in(a, variables, bound))
        }
        Expr::Comprehension(c) => {
            if let Some(name) = undeclared_in(&c.iter_range, variables, bound)
                .or_else(|| undeclared_in(&c.accu_init, variables, bound))
            {
                return Some(name);
            }
            let outer = bound.len();
            bound.push(&c.accu_var);
            let result = undeclared_in(&c.result, variables, bound);
            bound.push(&c.iter_var);
            bound.extend(c.iter_var2.as_deref());
            let inner = undeclared_in(&c.loop_cond, variables, bound)
                .or_else(|| undeclared_in(&c.loop_step, variables, bound));
            bound.truncate(outer);
            inner.or(result)
        }
        _ => children(e).into_iter().find_map(|child| undeclared_in(child, variables, bound)),
    }
}

/// `e` as a path from an identifier (`object.a.b["c"]` is `("object", ["a", "b", "c"])`), when it
/// is one: field selections and indexes by literal strings only.
pub fn path(e: &IdedExpr) -> Option<(&str, Vec<&str>)> {
    match &e.expr {
        Expr::Ident(name) => Some((name.as_str(), Vec::new())),
        Expr::Select(s) if !s.test => {
            let (root, mut p) = path(&s.operand)?;
            p.push(&s.field);
            Some((root, p))
        }
        Expr::Call(c) if c.func_name == "_[_]" && c.target.is_none() && c.args.len() == 2 => {
            let Expr::Literal(LiteralValue::String(key)) = &c.args[1].expr else {
                return None;
            };
            let (root, mut p) = path(&c.args[0])?;
            p.push(key.inner());
            Some((root, p))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_cel::cel::Program;

    #[test]
    fn paths_follow_fields_and_literal_indexes() {
        let p = Program::compile("object.a['b'].c").unwrap();
        assert_eq!(path(p.expression()), Some(("object", vec!["a", "b", "c"])));
        let p = Program::compile("object.a[x]").unwrap();
        assert_eq!(path(p.expression()), None);
        let p = Program::compile("has(object.a)").unwrap();
        assert_eq!(path(p.expression()), None, "a presence test reads no value");
        let p = Program::compile("[1, [2, 3]]").unwrap();
        assert_eq!(shape(p.expression()), (3, false));
    }
}
