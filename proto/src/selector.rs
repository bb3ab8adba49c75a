//! Label and field selectors: the `labelSelector=` and `fieldSelector=` query grammars of the
//! Kubernetes API, parsed by hand (no regex, no recursion), validated, matched and printed.
//!
//! Label selectors (`k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>1`, `k<1`,
//! comma = AND) follow `k8s.io/apimachinery/pkg/labels`: `!=` and `notin` also match when the key
//! is absent; keys are an optional DNS-subdomain prefix plus `/` plus a name of at most 63
//! characters; values are at most 63 characters of `[A-Za-z0-9._-]`, alphanumeric at both ends, or
//! empty. Field selectors (`f=v`, `f==v`, `f!=v`, comma = AND, `\,` `\=` `\\` escapes) follow
//! `k8s.io/apimachinery/pkg/fields`; which fields exist is for the caller to check.

use std::fmt;

/// The longest selector accepted, in bytes (the whole query string is bounded elsewhere; this
/// keeps a single parameter from costing more than a page of work).
pub const MAX_SELECTOR_BYTES: usize = 16 * 1024;

/// A selector that does not parse, with the reason (shown to the client in a 400 `BadRequest`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse requirement: {reason}")]
pub struct SelectorError {
    /// What is wrong, quoting the offending part.
    pub reason: String,
}

fn error(reason: impl Into<String>) -> SelectorError {
    SelectorError { reason: reason.into() }
}

fn check_length(input: &str) -> Result<(), SelectorError> {
    if input.len() > MAX_SELECTOR_BYTES {
        return Err(error(format!("selector longer than {MAX_SELECTOR_BYTES} bytes")));
    }
    Ok(())
}

/// A label requirement's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelOp {
    /// `k=v` or `k==v`.
    Equals,
    /// `k!=v` (true when the key is absent).
    NotEquals,
    /// `k in (a,b)`.
    In,
    /// `k notin (a,b)` (true when the key is absent).
    NotIn,
    /// `k`.
    Exists,
    /// `!k`.
    DoesNotExist,
    /// `k>n` (the label's value is an integer greater than n).
    GreaterThan,
    /// `k<n`.
    LessThan,
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRequirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub op: LabelOp,
    /// The values (one for `=`, `!=`, `>`, `<`; one or more for `in`/`notin`; none otherwise).
    pub values: Vec<String>,
}

/// A parsed label selector: every requirement must hold. Empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// The requirements, in the order written.
    pub requirements: Vec<LabelRequirement>,
}

impl LabelSelector {
    /// Parses the `labelSelector` grammar.
    pub fn parse(input: &str) -> Result<LabelSelector, SelectorError> {
        check_length(input)?;
        let mut lexer = Lexer { input, pos: 0 };
        let mut requirements = Vec::new();
        if lexer.at_end() {
            return Ok(LabelSelector { requirements });
        }
        loop {
            requirements.push(lexer.requirement()?);
            lexer.skip_space();
            if lexer.at_end() {
                break;
            }
            lexer.expect(',')?;
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether `labels` (looked up by key) satisfy every requirement.
    pub fn matches<'a>(&self, labels: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| {
            let value = labels(&r.key);
            match r.op {
                LabelOp::Equals => value == Some(r.values[0].as_str()),
                LabelOp::NotEquals => value != Some(r.values[0].as_str()),
                LabelOp::In => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                LabelOp::NotIn => !value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                LabelOp::Exists => value.is_some(),
                LabelOp::DoesNotExist => value.is_none(),
                LabelOp::GreaterThan | LabelOp::LessThan => {
                    let (Some(v), Ok(bound)) = (value, r.values[0].parse::<i64>()) else {
                        return false;
                    };
                    let Ok(v) = v.parse::<i64>() else { return false };
                    if r.op == LabelOp::GreaterThan { v > bound } else { v < bound }
                }
            }
        })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// A `metav1.LabelSelector` (`matchLabels` and `matchExpressions`, as apimachinery's
    /// `LabelSelectorAsSelector` reads it): an unknown operator, or `In`/`NotIn` without values,
    /// or `Exists`/`DoesNotExist` with values, is an error.
    pub fn from_api(
        sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    ) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            validate_key(k)?;
            validate_value(v)?;
            requirements.push(LabelRequirement {
                key: k.clone(),
                op: LabelOp::Equals,
                values: vec![v.clone()],
            });
        }
        for e in sel.match_expressions.iter().flatten() {
            validate_key(&e.key)?;
            let values = e.values.clone().unwrap_or_default();
            let op = match e.operator.as_str() {
                "In" => LabelOp::In,
                "NotIn" => LabelOp::NotIn,
                "Exists" => LabelOp::Exists,
                "DoesNotExist" => LabelOp::DoesNotExist,
                other => {
                    return Err(error(format!("{other:?} is not a valid label selector operator")));
                }
            };
            let wants_values = matches!(op, LabelOp::In | LabelOp::NotIn);
            if wants_values == values.is_empty() {
                return Err(error(format!(
                    "operator {:?} of key {:?} {} values",
                    e.operator,
                    e.key,
                    if wants_values { "needs" } else { "takes no" }
                )));
            }
            for v in &values {
                validate_value(v)?;
            }
            requirements.push(LabelRequirement { key: e.key.clone(), op, values });
        }
        Ok(LabelSelector { requirements })
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r.op {
                LabelOp::Equals => write!(f, "{}={}", r.key, r.values[0])?,
                LabelOp::NotEquals => write!(f, "{}!={}", r.key, r.values[0])?,
                LabelOp::In => write!(f, "{} in ({})", r.key, r.values.join(","))?,
                LabelOp::NotIn => write!(f, "{} notin ({})", r.key, r.values.join(","))?,
                LabelOp::Exists => write!(f, "{}", r.key)?,
                LabelOp::DoesNotExist => write!(f, "!{}", r.key)?,
                LabelOp::GreaterThan => write!(f, "{}>{}", r.key, r.values[0])?,
                LabelOp::LessThan => write!(f, "{}<{}", r.key, r.values[0])?,
            }
        }
        Ok(())
    }
}

struct Lexer<'a> {
    input: &'a str,
    pos: usize,
}

fn is_word_char(c: char) -> bool {
    !c.is_whitespace() && !matches!(c, ',' | '=' | '!' | '(' | ')' | '<' | '>')
}

impl Lexer<'_> {
    fn rest(&self) -> &str {
        &self.input[self.pos..]
    }

    fn at_end(&mut self) -> bool {
        self.skip_space();
        self.pos == self.input.len()
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_space();
        if self.rest().starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), SelectorError> {
        if self.eat(c.encode_utf8(&mut [0; 4])) {
            Ok(())
        } else {
            Err(error(format!("expected {c:?} at {:?}", self.shown())))
        }
    }

    fn shown(&self) -> String {
        let rest = self.rest();
        if rest.is_empty() { "end of input".into() } else { rest.chars().take(32).collect() }
    }

    /// A run of identifier characters (possibly empty).
    fn word(&mut self) -> &str {
        self.skip_space();
        let start = self.pos;
        let len = self.rest().find(|c: char| !is_word_char(c)).unwrap_or(self.rest().len());
        self.pos += len;
        &self.input[start..start + len]
    }

    fn requirement(&mut self) -> Result<LabelRequirement, SelectorError> {
        if self.eat("!") {
            let key = self.word().to_owned();
            validate_key(&key)?;
            return Ok(LabelRequirement { key, op: LabelOp::DoesNotExist, values: Vec::new() });
        }
        let key = self.word().to_owned();
        validate_key(&key)?;
        self.skip_space();
        let (op, values) = if self.eat("==") || self.eat("=") {
            (LabelOp::Equals, vec![self.value()?])
        } else if self.eat("!=") {
            (LabelOp::NotEquals, vec![self.value()?])
        } else if self.eat(">") {
            (LabelOp::GreaterThan, vec![self.integer()?])
        } else if self.eat("<") {
            (LabelOp::LessThan, vec![self.integer()?])
        } else if self.at_end() || self.rest().starts_with(',') {
            (LabelOp::Exists, Vec::new())
        } else {
            let word = self.word();
            let op = match word {
                "in" => LabelOp::In,
                "notin" => LabelOp::NotIn,
                other => {
                    return Err(error(format!(
                        "found {other:?}, expected one of '=', '==', '!=', 'in', 'notin', '>', '<' after {key:?}"
                    )));
                }
            };
            (op, self.set()?)
        };
        Ok(LabelRequirement { key, op, values })
    }

    fn value(&mut self) -> Result<String, SelectorError> {
        let value = self.word().to_owned();
        validate_value(&value)?;
        Ok(value)
    }

    fn integer(&mut self) -> Result<String, SelectorError> {
        let value = self.word().to_owned();
        value.parse::<i64>().map_err(|_| {
            error(format!("for '>' and '<' the value must be an integer, not {value:?}"))
        })?;
        Ok(value)
    }

    fn set(&mut self) -> Result<Vec<String>, SelectorError> {
        self.expect('(')?;
        let mut values = Vec::new();
        loop {
            values.push(self.value()?);
            if self.eat(")") {
                break;
            }
            self.expect(',')?;
        }
        if values.iter().all(String::is_empty) && values.len() == 1 {
            return Err(error("for 'in' and 'notin' the set of values can't be empty"));
        }
        Ok(values)
    }
}

fn is_name(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// Checks a label key: `[prefix/]name`.
pub fn validate_key(key: &str) -> Result<(), SelectorError> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if prefix.is_some_and(|p| !is_dns_subdomain(p)) {
        return Err(error(format!(
            "invalid label key {key:?}: the prefix must be a DNS subdomain"
        )));
    }
    if !is_name(name, 63) {
        return Err(error(format!(
            "invalid label key {key:?}: name part must be 63 characters or less, consist of \
             alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric"
        )));
    }
    Ok(())
}

/// Checks a label value: empty, or a name of at most 63 characters.
pub fn validate_value(value: &str) -> Result<(), SelectorError> {
    if value.is_empty() || is_name(value, 63) {
        Ok(())
    } else {
        Err(error(format!(
            "invalid label value {value:?}: must be 63 characters or less, consist of alphanumeric \
             characters, '-', '_' or '.', and start and end with an alphanumeric"
        )))
    }
}

/// A field requirement's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOp {
    /// `f=v` or `f==v`.
    Equals,
    /// `f!=v`.
    NotEquals,
}

/// One requirement of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field path, such as `metadata.name`.
    pub field: String,
    /// The operator.
    pub op: FieldOp,
    /// The value (unescaped).
    pub value: String,
}

/// A parsed field selector: every requirement must hold. Empty selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// The requirements, in the order written.
    pub requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses the `fieldSelector` grammar.
    pub fn parse(input: &str) -> Result<FieldSelector, SelectorError> {
        check_length(input)?;
        let mut requirements = Vec::new();
        if input.trim().is_empty() {
            return Ok(FieldSelector { requirements });
        }
        for term in split_unescaped(input, ',') {
            let (field, op, raw) = if let Some((f, v)) = split_once_unescaped(&term, "!=") {
                (f, FieldOp::NotEquals, v)
            } else if let Some((f, v)) = split_once_unescaped(&term, "==") {
                (f, FieldOp::Equals, v)
            } else if let Some((f, v)) = split_once_unescaped(&term, "=") {
                (f, FieldOp::Equals, v)
            } else {
                return Err(error(format!(
                    "invalid field selector term {term:?}: expected '=', '==' or '!='"
                )));
            };
            let field = field.trim();
            if field.is_empty() {
                return Err(error(format!("invalid field selector term {term:?}: empty field")));
            }
            let value = unescape(raw.trim())?;
            requirements.push(FieldRequirement { field: field.to_owned(), op, value });
        }
        Ok(FieldSelector { requirements })
    }

    /// Whether the fields (looked up by path) satisfy every requirement; an absent field is
    /// the empty string, as in Kubernetes.
    pub fn matches<'a>(&self, fields: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| {
            let value = fields(&r.field).unwrap_or("");
            match r.op {
                FieldOp::Equals => value == r.value,
                FieldOp::NotEquals => value != r.value,
            }
        })
    }

    /// The value a requirement `field=value` pins, if there is exactly such a requirement (used
    /// to authorize `metadata.name=x` lists as gets of `x`).
    pub fn pinned(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && r.op == FieldOp::Equals)
            .map(|r| r.value.as_str())
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// Splits at `sep` where it is not escaped by a backslash; escapes are kept for `unescape`.
fn split_unescaped(input: &str, sep: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = input.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let last = parts.last_mut().expect("never empty");
                last.push('\\');
                if let Some(next) = chars.next() {
                    last.push(next);
                }
            }
            c if c == sep => parts.push(String::new()),
            c => parts.last_mut().expect("never empty").push(c),
        }
    }
    parts
}

/// Splits at the first unescaped occurrence of `op`.
fn split_once_unescaped<'a>(term: &'a str, op: &str) -> Option<(&'a str, &'a str)> {
    let mut escaped = false;
    for (i, c) in term.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if c == '\\' {
            escaped = true;
            continue;
        }
        if term[i..].starts_with(op) {
            // `=` must not be the second half of `!=` or `==` handled by the caller's order.
            return Some((&term[..i], &term[i + op.len()..]));
        }
    }
    None
}

fn unescape(raw: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(other) => {
                    return Err(error(format!("invalid escape sequence \\{other} in {raw:?}")));
                }
                None => return Err(error(format!("unterminated escape in {raw:?}"))),
            },
            ',' | '=' => {
                return Err(error(format!(
                    "invalid field selector value {raw:?}: unescaped {c:?}"
                )));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn selects(selector: &str, pairs: &[(&str, &str)]) -> bool {
        let map = labels(pairs);
        LabelSelector::parse(selector).unwrap().matches(|k| map.get(k).map(String::as_str))
    }

    #[test]
    fn every_label_form_parses_and_matches() {
        let l = [("tier", "front"), ("env", "prod"), ("n", "7")];
        assert!(selects("tier=front", &l));
        assert!(selects("tier==front", &l));
        assert!(selects(" tier = front , env == prod ", &l));
        assert!(!selects("tier=back", &l));
        assert!(selects("tier!=back", &l));
        assert!(selects("missing!=x", &l), "!= matches an absent key");
        assert!(selects("tier in (front,back)", &l));
        assert!(selects("tier in ( back , front )", &l));
        assert!(!selects("tier notin (front)", &l));
        assert!(selects("missing notin (front)", &l), "notin matches an absent key");
        assert!(selects("tier", &l));
        assert!(!selects("missing", &l));
        assert!(selects("!missing", &l));
        assert!(!selects("!tier", &l));
        assert!(selects("n>5,n<8", &l));
        assert!(!selects("n>7", &l));
        assert!(!selects("tier>1", &l), "a non-integer label never compares");
        assert!(selects("example.com/role=x", &[("example.com/role", "x")]));
        assert!(selects("tier=", &[("tier", "")]), "an empty value is allowed");
        assert!(selects("", &l), "the empty selector selects everything");
    }

    #[test]
    fn bad_label_selectors_are_refused() {
        for bad in [
            "tier in ()",
            "tier in (a",
            "tier in a",
            "tier ~ a",
            "tier=a b",
            "=a",
            "!",
            "tier=a,",
            ",tier",
            "tier=-a",
            "Upper.Prefix/x=1",
            "x/y/z=1",
            "n>x",
            "tier=(a)",
            &format!("k={}", "v".repeat(64)),
            &format!("{}=v", "k".repeat(64)),
        ] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn label_selector_prints_what_it_parsed() {
        for s in
            ["a=b", "a!=b", "a in (x,y)", "a notin (x)", "a", "!a", "a>1", "a<2", "a=b,!c,d in (e)"]
        {
            let parsed = LabelSelector::parse(s).unwrap();
            assert_eq!(LabelSelector::parse(&parsed.to_string()).unwrap(), parsed, "{s}");
        }
    }

    #[test]
    fn field_selectors() {
        let f = FieldSelector::parse("metadata.name=c1,metadata.namespace!=kube-system").unwrap();
        let fields = |p: &str| match p {
            "metadata.name" => Some("c1"),
            "metadata.namespace" => Some("default"),
            _ => None,
        };
        assert!(f.matches(fields));
        assert_eq!(f.pinned("metadata.name"), Some("c1"));
        assert!(!FieldSelector::parse("metadata.name==c2").unwrap().matches(fields));
        assert!(FieldSelector::parse("spec.x=").unwrap().matches(fields), "absent is empty");
        let escaped = FieldSelector::parse(r"metadata.name=a\,b\=c\\d").unwrap();
        assert_eq!(escaped.requirements[0].value, r"a,b=c\d");
        for bad in ["metadata.name", "=x", r"a=b\q", r"a=b\", "a=b=c"] {
            assert!(FieldSelector::parse(bad).is_err(), "{bad:?} should not parse");
        }
        assert!(FieldSelector::parse(" ").unwrap().is_empty());
    }

    #[test]
    fn huge_or_hostile_input_is_refused_without_panicking() {
        assert!(LabelSelector::parse(&"a,".repeat(MAX_SELECTOR_BYTES)).is_err());
        assert!(FieldSelector::parse(&"a=b,".repeat(MAX_SELECTOR_BYTES)).is_err());
        for s in ["((((", "!!!!", "a in ((", "é=ü", "a=\u{0}", "\\", "a\\"] {
            let _ = LabelSelector::parse(s);
            let _ = FieldSelector::parse(s);
        }
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any input either parses or is refused; parsing never panics.
        #[test]
        fn parsing_never_panics(input in "\\PC{0,64}") {
            let _ = LabelSelector::parse(&input);
            let _ = FieldSelector::parse(&input);
        }

        /// Whatever parses prints back to an equivalent selector.
        #[test]
        fn printed_selectors_parse_back(input in "[a-z!=,() ]{0,24}") {
            if let Ok(parsed) = LabelSelector::parse(&input) {
                prop_assert_eq!(LabelSelector::parse(&parsed.to_string()).unwrap(), parsed);
            }
        }
    }
}
