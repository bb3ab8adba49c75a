//! kubectl's JSONPath (client-go `util/jsonpath`) as CRD printer columns and ManifestWork status
//! feedback use it: fields (`.a.b`, `['a.b']`), indexes (`[0]`, `[-1]`), wildcards (`[*]`) and
//! filters (`[?(@.type=="Ready")]` with `==`, `!=`, `<`, `>`, `<=`, `>=` or existence). Missing
//! keys are no match, as both evaluate with `AllowMissingKeys(true)`.

use serde_json::Value;

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter { path: Vec<String>, test: Option<(Op, Literal)> },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Str(String),
    Num(f64),
    Bool(bool),
}

/// Why a path does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unrecognized JSONPath {path:?}: {reason}")]
pub struct JsonPathError {
    path: String,
    reason: &'static str,
}

impl JsonPath {
    /// Parses a printer-column path such as `.status.conditions[?(@.type=="Ready")].status`
    /// (with or without the surrounding `{}`).
    pub fn parse(text: &str) -> Result<JsonPath, JsonPathError> {
        let err = |reason| JsonPathError { path: text.to_owned(), reason };
        let inner = text.trim();
        let inner = inner.strip_prefix('{').and_then(|s| s.strip_suffix('}')).unwrap_or(inner);
        if !inner.starts_with('.') && !inner.starts_with('[') {
            return Err(err("must start with '.'"));
        }
        let b = inner.as_bytes();
        let mut steps = Vec::new();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'.' => {
                    if b.get(i + 1) == Some(&b'.') {
                        return Err(err("recursive descent is not supported"));
                    }
                    let start = i + 1;
                    let mut end = start;
                    while end < b.len() && b[end] != b'.' && b[end] != b'[' {
                        end += 1;
                    }
                    if end > start {
                        let name = &inner[start..end];
                        if name == "*" {
                            steps.push(Step::All);
                        } else {
                            steps.push(Step::Field(name.to_owned()));
                        }
                    } else if end < b.len() && b[end] == b'.' {
                        return Err(err("empty field name"));
                    }
                    i = end;
                }
                b'[' => {
                    let close = matching_bracket(inner, i).ok_or_else(|| err("unclosed '['"))?;
                    steps.push(bracket(&inner[i + 1..close]).ok_or_else(|| err("bad [...]"))?);
                    i = close + 1;
                }
                _ => return Err(err("unexpected character")),
            }
        }
        Ok(JsonPath { steps })
    }

    /// Every match, in document order (empty when nothing matches or a step does not apply).
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut current = vec![root];
        for step in &self.steps {
            let mut next = Vec::new();
            for v in current {
                match step {
                    Step::Field(name) => {
                        if let Some(x) = v.get(name.as_str()).filter(|x| !x.is_null()) {
                            next.push(x);
                        }
                    }
                    Step::Index(n) => {
                        if let Some(items) = v.as_array() {
                            let len = items.len() as i64;
                            let at = if *n < 0 { len + n } else { *n };
                            if (0..len).contains(&at) {
                                next.push(&items[at as usize]);
                            }
                        }
                    }
                    Step::All => match v {
                        Value::Array(items) => next.extend(items.iter()),
                        Value::Object(map) => next.extend(map.values()),
                        _ => {}
                    },
                    Step::Filter { path, test } => {
                        if let Some(items) = v.as_array() {
                            next.extend(items.iter().filter(|item| passes(item, path, test)));
                        }
                    }
                }
            }
            current = next;
        }
        current
    }
}

fn matching_bracket(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0;
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices().skip_while(|(i, _)| *i < open) {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn bracket(body: &str) -> Option<Step> {
    let body = body.trim();
    if body == "*" || body == ":" {
        return Some(Step::All);
    }
    if let Some(key) = unquote(body) {
        return Some(Step::Field(key));
    }
    if let Ok(n) = body.parse::<i64>() {
        return Some(Step::Index(n));
    }
    let expr = body.strip_prefix("?(")?.strip_suffix(')')?.trim();
    let ops = [
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];
    let (lhs, test) = match ops.iter().find_map(|(t, op)| expr.find(t).map(|at| (at, *t, *op))) {
        Some((at, token, op)) => {
            let rhs = expr[at + token.len()..].trim();
            (expr[..at].trim(), Some((op, literal(rhs)?)))
        }
        None => (expr, None),
    };
    let rest = lhs.strip_prefix('@')?;
    let path = if rest.is_empty() {
        Vec::new()
    } else {
        rest.strip_prefix('.')?.split('.').map(str::to_owned).collect::<Vec<_>>()
    };
    if path.iter().any(String::is_empty) {
        return None;
    }
    Some(Step::Filter { path, test })
}

fn unquote(s: &str) -> Option<String> {
    for q in ['\'', '"'] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return Some(inner.to_owned());
        }
    }
    None
}

fn literal(s: &str) -> Option<Literal> {
    if let Some(text) = unquote(s) {
        return Some(Literal::Str(text));
    }
    match s {
        "true" => Some(Literal::Bool(true)),
        "false" => Some(Literal::Bool(false)),
        _ => s.parse::<f64>().ok().map(Literal::Num),
    }
}

fn passes(item: &Value, path: &[String], test: &Option<(Op, Literal)>) -> bool {
    let Some(value) = path.iter().try_fold(item, |v, k| v.get(k.as_str())) else {
        return false;
    };
    let Some((op, lit)) = test else {
        return !value.is_null();
    };
    let ordering = match (value, lit) {
        (Value::String(a), Literal::Str(b)) => a.as_str().partial_cmp(b.as_str()),
        (Value::Number(a), Literal::Num(b)) => a.as_f64().and_then(|a| a.partial_cmp(b)),
        (Value::Bool(a), Literal::Bool(b)) => a.partial_cmp(b),
        _ => None, // a type mismatch is an error in client-go: no match
    };
    let Some(ord) = ordering else { return false };
    match op {
        Op::Eq => ord.is_eq(),
        Op::Ne => !ord.is_eq(),
        Op::Lt => ord.is_lt(),
        Op::Gt => ord.is_gt(),
        Op::Le => ord.is_le(),
        Op::Ge => ord.is_ge(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn found(path: &str, v: &Value) -> Vec<Value> {
        JsonPath::parse(path).unwrap().find(v).into_iter().cloned().collect()
    }

    #[test]
    fn fields_indexes_wildcards_and_filters() {
        let obj = json!({
            "spec": {"hubAcceptsClient": true, "managedClusterClientConfigs": [
                {"url": "https://a"}, {"url": "https://b"}]},
            "status": {"conditions": [
                {"type": "ManagedClusterJoined", "status": "True"},
                {"type": "ManagedClusterConditionAvailable", "status": "Unknown"}],
                "n": 3},
            "metadata": {"labels": {"a.b/c": "x"}},
        });
        assert_eq!(found(".spec.hubAcceptsClient", &obj), [json!(true)]);
        assert_eq!(found("{.spec.hubAcceptsClient}", &obj), [json!(true)]);
        assert_eq!(
            found(".spec.managedClusterClientConfigs[*].url", &obj),
            [json!("https://a"), json!("https://b")]
        );
        assert_eq!(found(".spec.managedClusterClientConfigs[-1].url", &obj), [json!("https://b")]);
        assert_eq!(
            found(
                r#".status.conditions[?(@.type=="ManagedClusterConditionAvailable")].status"#,
                &obj
            ),
            [json!("Unknown")]
        );
        assert_eq!(
            found(r#".status.conditions[?(@.type!="ManagedClusterJoined")].type"#, &obj).len(),
            1
        );
        assert_eq!(found(".status.conditions[?(@.status)].type", &obj).len(), 2);
        assert_eq!(found(".metadata.labels['a.b/c']", &obj), [json!("x")]);
        assert!(found(".status.missing.deeper", &obj).is_empty());
        assert!(found(".spec.managedClusterClientConfigs[5].url", &obj).is_empty());
        assert!(found(r#".status.conditions[?(@.type==3)].status"#, &obj).is_empty());
        assert_eq!(found(".status.n", &obj), [json!(3)]);
    }

    #[test]
    fn bad_paths_are_refused() {
        for bad in ["status", ".a..b", ".a[", ".a[?(x==1)]", ".a[?(@.b==)]"] {
            assert!(JsonPath::parse(bad).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        /// Any path either parses or is refused, and a parsed one evaluates, without a panic
        /// (feedback paths come from any ManifestWork author).
        #[test]
        fn any_path_parses_or_is_refused_without_a_panic(path in "[.\\[\\]?()@=!<>*'\"a-z0-9{}:-]{0,40}") {
            if let Ok(parsed) = JsonPath::parse(&path) {
                let _ = parsed.find(&json!({"a": [{"b": 1}, {"b": "x"}], "c": {"d": true}}));
            }
        }
    }
}
