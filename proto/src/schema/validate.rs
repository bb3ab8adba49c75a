//! Validation of an object against a structural schema: every error at once, in kube's
//! order, with its formats (date, date-time, byte) and list-type duplicate checks.

use std::collections::HashSet;
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

use crate::validation::{FieldError, FieldErrorKind};

use super::*;

/// A field path being walked, in apimachinery notation (`spec.taints[0].effect`,
/// `spec.selector[app]`), grown and shrunk in place so a walk allocates only on errors.
pub(super) struct FieldPath(pub(super) String);

impl FieldPath {
    pub(super) fn field(&mut self, name: &str) -> usize {
        let mark = self.0.len();
        if !self.0.is_empty() {
            self.0.push('.');
        }
        self.0.push_str(name);
        mark
    }

    pub(super) fn index(&mut self, i: usize) -> usize {
        let mark = self.0.len();
        // Writing to a String cannot fail.
        let _ = write!(self.0, "[{i}]");
        mark
    }

    pub(super) fn key(&mut self, key: &str) -> usize {
        let mark = self.0.len();
        self.0.push('[');
        self.0.push_str(key);
        self.0.push(']');
        mark
    }

    pub(super) fn reset(&mut self, mark: usize) {
        self.0.truncate(mark);
    }

    pub(super) fn child(&self, name: &str) -> String {
        if self.0.is_empty() { name.to_owned() } else { format!("{}.{name}", self.0) }
    }

    /// The subject of kube-openapi's messages: `spec.size in body`.
    pub(super) fn in_body(&self) -> String {
        if self.0.is_empty() { "in body".to_owned() } else { format!("{} in body", self.0) }
    }
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

/// Errors in the order kube reports them: schema errors, then embedded-resource errors, then
/// list-type uniqueness errors (each a separate pass in kube, one walk here).
#[derive(Default)]
pub(super) struct Errors {
    schema: Vec<FieldError>,
    embedded: Vec<FieldError>,
    lists: Vec<FieldError>,
}

impl Errors {
    fn is_empty(&self) -> bool {
        self.schema.is_empty() && self.embedded.is_empty() && self.lists.is_empty()
    }

    fn append(&mut self, mut other: Errors) {
        self.schema.append(&mut other.schema);
        self.embedded.append(&mut other.embedded);
        self.lists.append(&mut other.lists);
    }
}

/// The JSON type of a value as kube-openapi names it; integral floats count as integers.
pub(super) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub(super) fn is_integer(n: &Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
pub(super) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| json_eq(a, b)))
        }
        _ => a == b,
    }
}

/// A limit as Go's `%v` prints a float64 that holds it.
pub(super) fn fmt_limit(f: f64) -> String {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 {
        // Exact: the value is integral and well inside i64.
        format!("{}", f as i64)
    } else {
        format!("{f}")
    }
}

impl Schema {
    /// Validates a whole resource against this (root) schema and returns every violation at
    /// once, in document order: schema errors first, then embedded-resource errors, then
    /// list-type duplicates, as kube orders its passes. `metadata` at the root and at
    /// embedded-resource nodes is not looked at. Unknown fields are not errors here (that is
    /// [`Schema::prune`]'s business). Messages follow apiextensions: a wrong type is
    /// `TypeInvalid` with the actual type as value and `spec.size in body must be of type
    /// integer: "string"` as detail; enum misses are `NotSupported`; `maxLength` is `TooLong`,
    /// `maxItems` is `TooMany`; a bad `format` is `TypeInvalid` (kube-openapi reports formats
    /// as types); other range failures are `Invalid`. A `null` where the node is not nullable
    /// is a type error (run [`Schema::apply_defaults`] first to drop such nulls as kube does).
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errors = Errors::default();
        let mut path = FieldPath(String::new());
        validate_node(self, obj, true, &mut path, &mut errors);
        let mut out = errors.schema;
        out.append(&mut errors.embedded);
        out.append(&mut errors.lists);
        out
    }
}

pub(super) fn type_error(path: &FieldPath, expected: &str, actual: &str) -> FieldError {
    FieldError::new(
        FieldErrorKind::TypeInvalid,
        path.0.clone(),
        Some(Value::String(actual.to_owned())),
        format!("{} must be of type {expected}: {actual:?}", path.in_body()),
    )
}

pub(super) fn invalid(path: &FieldPath, value: Value, what: &str) -> FieldError {
    FieldError::invalid(path.0.clone(), value, format!("{} {what}", path.in_body()))
}

/// Validates `v` against `s` at `path`; `resource_root` marks the root and embedded-resource
/// nodes, whose `metadata` is skipped.
pub(super) fn validate_node(
    s: &Schema,
    v: &Value,
    resource_root: bool,
    path: &mut FieldPath,
    errors: &mut Errors,
) {
    let actual = json_type(v);
    if actual == "null" {
        if s.nullable {
            return;
        }
        if s.int_or_string {
            errors.schema.push(type_error(path, "integer,string", actual));
        } else if let Some(t) = s.type_ {
            errors.schema.push(type_error(path, t.as_str(), actual));
        }
        return;
    }

    let mut type_ok = true;
    if s.int_or_string {
        if actual != "integer" && actual != "string" {
            errors.schema.push(type_error(path, "integer,string", actual));
            type_ok = false;
        }
    } else if let Some(t) = s.type_.filter(|t| !t.accepts(actual)) {
        errors.schema.push(type_error(path, t.as_str(), actual));
        type_ok = false;
    }

    if !s.enum_.is_empty() && !s.enum_.iter().any(|e| json_eq(e, v)) {
        let supported: Vec<String> = s
            .enum_
            .iter()
            .map(|e| match e {
                Value::String(text) => format!("{text:?}"),
                other => format!("{:?}", other.to_string()),
            })
            .collect();
        errors.schema.push(FieldError::new(
            FieldErrorKind::NotSupported,
            path.0.clone(),
            Some(v.clone()),
            format!("supported values: {}", supported.join(", ")),
        ));
    }

    if !type_ok {
        // kube-openapi's kind-specific validators do not apply to a value of the wrong kind in
        // any useful way; one type error per field is what users see.
        return;
    }

    match v {
        Value::String(text) => validate_string(s, text, path, errors),
        Value::Number(n) => validate_number(s, n, v, path, errors),
        Value::Array(items) => validate_array(s, items, path, errors),
        Value::Object(map) => {
            validate_object(s, map, resource_root, path, errors);
            if s.embedded_resource {
                validate_embedded(map, path, errors);
            }
        }
        Value::Bool(_) | Value::Null => {}
    }

    validate_combinators(s, v, path, errors);
}

pub(super) fn validate_string(s: &Schema, text: &str, path: &FieldPath, errors: &mut Errors) {
    let b = &s.bounds;
    if b.max_length.is_some() || b.min_length.is_some() {
        let len = text.chars().count() as u64;
        if let Some(max) = b.max_length.filter(|&max| len > max) {
            let unit = if max == 1 { "byte" } else { "bytes" };
            errors.schema.push(FieldError::new(
                FieldErrorKind::TooLong,
                path.0.clone(),
                None,
                format!("may not be more than {max} {unit}"),
            ));
        }
        if let Some(min) = b.min_length.filter(|&min| len < min) {
            errors.schema.push(invalid(
                path,
                Value::String(text.to_owned()),
                &format!("should be at least {min} chars long"),
            ));
        }
    }
    if let Some(p) = &s.pattern {
        // Unanchored, like Go's `regexp.MatchString` (the patterns anchor themselves);
        // after the length checks, in kube-openapi's order.
        if !p.re.is_match(text) {
            errors.schema.push(invalid(
                path,
                Value::String(text.to_owned()),
                &format!("should match '{}'", p.source),
            ));
        }
    }
    if let Some(format) = s.format.as_deref() {
        let ok = match format {
            "date-time" | "datetime" => is_date_time(text),
            "date" => is_date(text),
            "byte" => is_base64(text),
            _ => true,
        };
        if !ok {
            errors.schema.push(FieldError::new(
                FieldErrorKind::TypeInvalid,
                path.0.clone(),
                Some(Value::String(text.to_owned())),
                format!("{} must be of type {format}: {text:?}", path.in_body()),
            ));
        }
    }
}

pub(super) fn validate_number(
    s: &Schema,
    n: &Number,
    v: &Value,
    path: &FieldPath,
    errors: &mut Errors,
) {
    let b = &s.bounds;
    let Some(x) = n.as_f64() else { return };
    if let Some(max) = b.maximum {
        let (bad, what) = if b.exclusive_maximum {
            (x >= max, "should be less than")
        } else {
            (x > max, "should be less than or equal to")
        };
        if bad {
            errors.schema.push(invalid(path, v.clone(), &format!("{what} {}", fmt_limit(max))));
        }
    }
    if let Some(min) = b.minimum {
        let (bad, what) = if b.exclusive_minimum {
            (x <= min, "should be greater than")
        } else {
            (x < min, "should be greater than or equal to")
        };
        if bad {
            errors.schema.push(invalid(path, v.clone(), &format!("{what} {}", fmt_limit(min))));
        }
    }
    if let Some(m) = b.multiple_of {
        let q = x / m;
        if q.is_finite() && q.fract() != 0.0 {
            errors.schema.push(invalid(
                path,
                v.clone(),
                &format!("should be a multiple of {}", fmt_limit(m)),
            ));
        }
    }
}

pub(super) fn validate_array(
    s: &Schema,
    items: &[Value],
    path: &mut FieldPath,
    errors: &mut Errors,
) {
    let b = &s.bounds;
    let len = items.len() as u64;
    if let Some(max) = b.max_items.filter(|&max| len > max) {
        errors.schema.push(FieldError::new(
            FieldErrorKind::TooMany,
            path.0.clone(),
            Some(Value::from(len)),
            format!("must have at most {max} items"),
        ));
    }
    if let Some(min) = b.min_items.filter(|&min| len < min) {
        errors.schema.push(invalid(
            path,
            Value::from(len),
            &format!("should have at least {min} items"),
        ));
    }
    if let Some(item_schema) = s.items.as_deref() {
        for (i, item) in items.iter().enumerate() {
            let mark = path.index(i);
            validate_node(item_schema, item, item_schema.embedded_resource, path, errors);
            path.reset(mark);
        }
    }
    match &s.list_type {
        ListType::Atomic => {}
        ListType::Set => validate_set(items, path, errors),
        ListType::Map(keys) => validate_list_map(s.items.as_deref(), keys, items, path, errors),
    }
}

/// Lists shorter than this are checked for duplicates pairwise, longer ones through a hash set.
pub(super) const PAIRWISE_LIMIT: usize = 32;

/// Reports every item that repeats an earlier one, given each item's identity.
pub(super) fn report_duplicates(
    identities: &[Value],
    path: &mut FieldPath,
    errors: &mut Errors,
    shown: impl Fn(usize) -> Value,
) {
    let mut seen: HashSet<String> = HashSet::new();
    for (i, id) in identities.iter().enumerate() {
        let repeated = if identities.len() < PAIRWISE_LIMIT {
            identities[..i].iter().any(|earlier| json_eq(earlier, id))
        } else {
            !seen.insert(id.to_string())
        };
        if repeated {
            let mark = path.index(i);
            errors.lists.push(FieldError::new(
                FieldErrorKind::Duplicate,
                path.0.clone(),
                Some(shown(i)),
                "",
            ));
            path.reset(mark);
        }
    }
}

pub(super) fn validate_set(items: &[Value], path: &mut FieldPath, errors: &mut Errors) {
    report_duplicates(items, path, errors, |i| items[i].clone());
}

pub(super) fn validate_list_map(
    item_schema: Option<&Schema>,
    keys: &[String],
    items: &[Value],
    path: &mut FieldPath,
    errors: &mut Errors,
) {
    let mut identities = Vec::with_capacity(items.len());
    let mut all_objects = true;
    for (i, item) in items.iter().enumerate() {
        let Value::Object(map) = item else {
            let mark = path.index(i);
            errors.lists.push(FieldError::invalid(
                path.0.clone(),
                item.clone(),
                "must be an object for an array of list-type map",
            ));
            path.reset(mark);
            all_objects = false;
            continue;
        };
        let identity: Map<String, Value> = keys
            .iter()
            .map(|key| {
                let value = map
                    .get(key)
                    .or_else(|| item_schema.and_then(|s| s.property(key)?.default.as_ref()))
                    .cloned()
                    .unwrap_or(Value::Null);
                (key.clone(), value)
            })
            .collect();
        identities.push(Value::Object(identity));
    }
    if all_objects {
        report_duplicates(&identities, path, errors, |i| identities[i].clone());
    }
}

pub(super) fn validate_object(
    s: &Schema,
    map: &Map<String, Value>,
    resource_root: bool,
    path: &mut FieldPath,
    errors: &mut Errors,
) {
    for name in &s.required {
        if !map.contains_key(name) {
            errors.schema.push(FieldError::required(path.child(name), ""));
        }
    }
    let b = &s.bounds;
    let len = map.len() as u64;
    if let Some(max) = b.max_properties.filter(|&max| len > max) {
        errors.schema.push(FieldError::new(
            FieldErrorKind::TooMany,
            path.0.clone(),
            Some(Value::from(len)),
            format!("must have at most {max} items"),
        ));
    }
    if let Some(min) = b.min_properties.filter(|&min| len < min) {
        errors.schema.push(invalid(
            path,
            Value::from(len),
            &format!("should have at least {min} properties"),
        ));
    }
    for (key, value) in map {
        if resource_root && key == "metadata" {
            continue;
        }
        if let Some(prop) = s.properties.get(key) {
            let mark = path.field(key);
            validate_node(prop, value, prop.embedded_resource, path, errors);
            path.reset(mark);
            continue;
        }
        match &s.additional_properties {
            Some(AdditionalProperties::Schema(values)) => {
                let mark = path.key(key);
                validate_node(values, value, values.embedded_resource, path, errors);
                path.reset(mark);
            }
            Some(AdditionalProperties::Allowed(false)) => {
                let what = format!("{}.{key} in body is a forbidden property", path.0);
                errors.schema.push(FieldError::invalid(
                    path.0.clone(),
                    key.clone(),
                    what.trim_start_matches('.'),
                ));
            }
            Some(AdditionalProperties::Allowed(true)) | None => {}
        }
    }
}

/// The checks kube's objectmeta pass makes on an `x-kubernetes-embedded-resource` object.
pub(super) fn validate_embedded(map: &Map<String, Value>, path: &FieldPath, errors: &mut Errors) {
    for field in ["apiVersion", "kind"] {
        let at = path.child(field);
        match map.get(field) {
            None => errors.embedded.push(FieldError::required(at, "must not be empty")),
            Some(Value::String(text)) if text.is_empty() => {
                errors.embedded.push(FieldError::invalid(at, text.clone(), "must not be empty"));
            }
            Some(Value::String(text)) if field == "apiVersion" && text.matches('/').count() > 1 => {
                let detail = format!("unexpected GroupVersion string: {text}");
                errors.embedded.push(FieldError::invalid(at, text.clone(), detail));
            }
            Some(Value::String(_)) => {}
            Some(other) => {
                errors.embedded.push(FieldError::invalid(at, other.clone(), "must be a string"));
            }
        }
    }
}

pub(super) fn validate_combinators(
    s: &Schema,
    v: &Value,
    path: &mut FieldPath,
    errors: &mut Errors,
) {
    for branch in &s.all_of {
        validate_node(branch, v, false, path, errors);
    }
    let run = |branch: &Schema, path: &mut FieldPath| {
        let mut scratch = Errors::default();
        validate_node(branch, v, false, path, &mut scratch);
        scratch
    };
    // An int-or-string node's anyOf is the int-or-string type check already made.
    if !s.any_of.is_empty() && !s.int_or_string {
        let mut first_failure = None;
        let mut matched = false;
        for branch in &s.any_of {
            let result = run(branch, path);
            if result.is_empty() {
                matched = true;
                break;
            }
            first_failure.get_or_insert(result);
        }
        if !matched {
            errors.schema.push(invalid(
                path,
                Value::String(String::new()),
                "must validate at least one schema (anyOf)",
            ));
            if let Some(failure) = first_failure {
                errors.append(failure);
            }
        }
    }
    if !s.one_of.is_empty() {
        let mut first_failure = None;
        let mut matches = 0;
        for branch in &s.one_of {
            let result = run(branch, path);
            if result.is_empty() {
                matches += 1;
            } else {
                first_failure.get_or_insert(result);
            }
        }
        if matches == 0 {
            errors.schema.push(invalid(
                path,
                Value::String(String::new()),
                "must validate one and only one schema (oneOf)",
            ));
            if let Some(failure) = first_failure {
                errors.append(failure);
            }
        } else if matches > 1 {
            errors.schema.push(invalid(
                path,
                Value::String(String::new()),
                "must validate one and only one schema (oneOf). Found more than one",
            ));
        }
    }
    if s.not.as_deref().is_some_and(|not| run(not, path).is_empty()) {
        errors.schema.push(invalid(
            path,
            Value::String(String::new()),
            "must not validate the schema (not)",
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// Formats
// ---------------------------------------------------------------------------------------------

pub(super) fn two_digits(b: &[u8]) -> Option<u32> {
    match b {
        [a @ b'0'..=b'9', c @ b'0'..=b'9'] => Some(u32::from(a - b'0') * 10 + u32::from(c - b'0')),
        _ => None,
    }
}

/// `YYYY-MM-DD` with a real day of the month, as Go's `time.Parse("2006-01-02", ..)` accepts.
pub(super) fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let Some(year) = b[..4]
        .iter()
        .try_fold(0u32, |acc, c| c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0')))
    else {
        return false;
    };
    let (Some(month), Some(day)) = (two_digits(&b[5..7]), two_digits(&b[8..10])) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// RFC 3339 `date-time` as kube-openapi's strfmt checks it: lower-cased and split at `t`, a
/// valid date, then `HH:MM:SS`, an optional fraction and `z` or a `±HH:MM` offset.
pub(super) fn is_date_time(text: &str) -> bool {
    if text.len() < 4 {
        return false;
    }
    let lower = text.to_ascii_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let b = time.as_bytes();
    if b.len() < 9 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let (Some(h), Some(m), Some(sec)) =
        (two_digits(&b[0..2]), two_digits(&b[3..5]), two_digits(&b[6..8]))
    else {
        return false;
    };
    if h > 23 || m > 59 || sec > 59 {
        return false;
    }
    let mut rest = &b[8..];
    // An optional fraction: any one character (the pattern's unescaped '.') and digits.
    if rest.len() > 1 && rest[1].is_ascii_digit() && rest[0] != b'+' && rest[0] != b'-' {
        let digits = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        rest = &rest[1 + digits..];
    }
    match rest {
        [b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

/// Standard base64 with padding, as Go's `base64.StdEncoding` decodes it (CR and LF ignored).
pub(super) fn is_base64(text: &str) -> bool {
    let data: Vec<u8> = text.bytes().filter(|&c| c != b'\r' && c != b'\n').collect();
    if data.len() % 4 != 0 {
        return false;
    }
    let padding = data.iter().rev().take_while(|&&c| c == b'=').count();
    if padding > 2 {
        return false;
    }
    data[..data.len() - padding]
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
}

// ---------------------------------------------------------------------------------------------
// Defaulting
// ---------------------------------------------------------------------------------------------
