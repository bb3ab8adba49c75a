//! CEL as OCM runs it, shared by the hub's placement `celSelector` and the agent's condition
//! rules: cel-rust with Kubernetes' extension libraries ([`environment`]), expressions compiled
//! within length and depth limits with every name they read declared ([`compile`]), a cost
//! bound computed before an expression runs ([`cost`]) and Kubernetes' limits on it
//! ([`cost::Budget`]), and a stack deep enough for the recursive parser and interpreter
//! ([`on_cel_stack`]).
//!
//! The crate knows nothing of clusters or manifests: a caller names its variables, registers
//! its own functions on the environment and, where they make large results, says how large
//! ([`cost::Calls`]). `cel` is re-exported so every user runs the same CEL runtime.

pub mod ast;
pub mod cost;

pub use kube_cel::cel;

use kube_cel::KubeCelExt;
use std::collections::HashMap;

use kube_cel::cel::{Context, Program, Value};

/// Kubernetes' `PerCallLimit`: the most one expression may cost.
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// Kubernetes' `RuntimeCELCostBudget`: the most the expressions of one evaluation may cost
/// together (OCM gives one to each cluster a placement selects from, and to each manifest's
/// condition rules).
pub const RUNTIME_BUDGET: u64 = 10_000_000;
/// The longest expression compiled (the parser recurses on it).
pub const MAX_LEN: usize = 10 * 1024;
/// The deepest expression tree accepted (the interpreter recurses on it).
pub const MAX_DEPTH: usize = 250;
/// The stack CEL is compiled and evaluated on: the parser and the interpreter recurse, and a
/// legal expression can be deeper than a tokio worker's 2 MiB allows. Only touched pages count.
const STACK: usize = 64 << 20;

/// The standard functions and Kubernetes' libraries (strings, lists, regex, URLs, IP and CIDR,
/// semver, format, quantity): the functions OCM's environments enable. A caller adds its own
/// functions and binds its variables in a scope of this.
pub fn environment() -> Context<'static> {
    Context::default().with_all()
}

/// Why an expression does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// Longer than [`MAX_LEN`].
    #[error("the expression is {0} bytes long; at most {MAX_LEN} are allowed")]
    TooLong(usize),
    /// The parser refused it.
    #[error("{0}")]
    Syntax(String),
    /// Deeper than [`MAX_DEPTH`].
    #[error("the expression nests {0} deep; at most {MAX_DEPTH} levels are allowed")]
    TooDeep(usize),
    /// It builds a message (`Type{field: ...}`), which cel-rust cannot evaluate.
    #[error("message literals (`Type{{...}}`) are not supported")]
    MessageLiteral,
    /// It reads a name nothing declares (cel-go refuses these when compiling; cel-rust only
    /// when it runs, so a typo would fail every evaluation instead of saying so once).
    #[error("undeclared reference to '{0}'")]
    Undeclared(String),
}

/// Compiles `source` in an environment whose variables are `variables`, within [`MAX_LEN`] and
/// [`MAX_DEPTH`]. Run it on [`on_cel_stack`]: the parser recurses.
pub fn compile(source: &str, variables: &[&str]) -> Result<Program, CompileError> {
    if source.len() > MAX_LEN {
        return Err(CompileError::TooLong(source.len()));
    }
    let program = Program::compile(source).map_err(|e| CompileError::Syntax(e.to_string()))?;
    let (depth, has_struct) = ast::shape(program.expression());
    if depth > MAX_DEPTH {
        return Err(CompileError::TooDeep(depth));
    }
    if has_struct {
        return Err(CompileError::MessageLiteral);
    }
    if let Some(name) = ast::undeclared(program.expression(), variables) {
        return Err(CompileError::Undeclared(name.to_owned()));
    }
    Ok(program)
}

/// A JSON value as CEL sees a Kubernetes object (an unstructured one, as cel-go gets it):
/// integers are `int` where they fit in 64 signed bits (`uint` only beyond), other numbers
/// `double`; `serde`'s conversion would make every non-negative integer a `uint`, which no
/// `int` literal equals. Run it on [`on_cel_stack`] for deep values: it recurses.
pub fn to_value(json: &serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(u)) => Value::UInt(u),
            _ => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::from(s.as_str()),
        serde_json::Value::Array(items) => {
            Value::List(std::sync::Arc::new(items.iter().map(to_value).collect()))
        }
        serde_json::Value::Object(m) => Value::from(
            m.iter().map(|(k, v)| (k.as_str(), to_value(v))).collect::<HashMap<&str, Value>>(),
        ),
    }
}

/// No thread with CEL's stack could be had.
#[derive(Debug, thiserror::Error)]
#[error("no thread to evaluate CEL on: {0}")]
pub struct NoStack(#[source] std::io::Error);

/// Runs `f` on a thread with a stack deep enough for CEL (CEL is never run on a worker's small
/// stack). A panic in `f` is resumed on the caller's thread.
pub fn on_cel_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, NoStack> {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("cel".into())
            .stack_size(STACK)
            .spawn_scoped(s, f)
            .map_err(NoStack)?;
        match handle.join() {
            Ok(v) => Ok(v),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(source: &str, variables: &[&str]) -> Result<(), CompileError> {
        let source = source.to_owned();
        let variables: Vec<String> = variables.iter().map(|v| (*v).to_owned()).collect();
        on_cel_stack(move || {
            let names: Vec<&str> = variables.iter().map(String::as_str).collect();
            compile(&source, &names).map(|_| ())
        })
        .unwrap()
    }

    #[test]
    fn limits_and_declarations_are_checked_when_compiling() {
        let long = format!("'{}' == ''", "x".repeat(MAX_LEN));
        assert!(matches!(compiled(&long, &[]), Err(CompileError::TooLong(_))));
        let deep = vec!["1"; MAX_DEPTH + 1].join(" + ") + " > 0";
        assert!(matches!(compiled(&deep, &[]), Err(CompileError::TooDeep(_))));
        let just = vec!["1"; MAX_DEPTH - 10].join(" + ") + " > 0";
        assert_eq!(compiled(&just, &[]), Ok(()));
        assert!(matches!(compiled("1 +", &[]), Err(CompileError::Syntax(_))));
        assert_eq!(compiled("Foo{a: 1} == 1", &[]), Err(CompileError::MessageLiteral));
        // Names: the declared variables, comprehension variables in scope, type names and
        // function namespaces; nothing else.
        assert_eq!(compiled("object.a == 1", &["object"]), Ok(()));
        assert_eq!(
            compiled("object.a == result", &["object"]),
            Err(CompileError::Undeclared("result".into()))
        );
        assert_eq!(compiled("[1].all(x, [2].exists(y, x < y)) && type(1) == int", &[]), Ok(()));
        assert_eq!(compiled("strings.quote('a') == '\"a\"'", &[]), Ok(()));
        assert_eq!(
            compiled("nosuch.fn(1) == 1", &[]),
            Err(CompileError::Undeclared("nosuch".into()))
        );
        assert_eq!(
            compiled("[1].all(x, y > 0)", &[]).unwrap_err().to_string(),
            "undeclared reference to 'y'"
        );
    }

    #[test]
    fn json_numbers_are_ints_as_in_kubernetes_objects() {
        let object = serde_json::json!({"n": 2, "big": u64::MAX, "f": 1.5, "s": "x", "l": [1, null], "b": true});
        let value = to_value(&object);
        let mut ctx = environment();
        ctx.add_variable_from_value("object", value);
        for (expr, want) in [
            ("object.n == 2", true),
            ("object.big == 18446744073709551615u", true),
            ("object.f == 1.5", true),
            ("object.s == 'x' && object.b", true),
            ("size(object.l) == 2 && object.l[1] == null", true),
        ] {
            let got = Program::compile(expr).unwrap().execute(&ctx).unwrap();
            assert_eq!(got, Value::Bool(want), "{expr}");
        }
    }

    #[test]
    fn a_panic_on_the_cel_stack_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| on_cel_stack(|| panic!("inside")));
        assert!(caught.is_err());
        assert_eq!(on_cel_stack(|| 7).unwrap(), 7);
    }
}
