//! Structural OpenAPI v3 schemas (a CRD version's `openAPIV3Schema`) and the three operations the
//! apiextensions apiserver performs with one on a custom resource: pruning unknown fields,
//! applying defaults and validating.
//!
//! Kubernetes runs them in this order on a write: decode, [`Schema::prune`], then
//! [`Schema::apply_defaults`] (which also drops non-nullable `null`s that have no default, as
//! kube's defaulter does), then [`Schema::validate`]. The schema is parsed once
//! ([`Schema::from_value`]) and every operation is a single walk over the object, so nothing is
//! recompiled per call.
//!
//! What is enforced and what is not:
//!
//! - Enforced: `type` (with `nullable`), `enum`, `required`, `properties`,
//!   `additionalProperties` (schema or `false`), `items`, `maxLength`/`minLength` (counted in
//!   characters, as kube counts runes), `maxItems`/`minItems`, `maxProperties`/`minProperties`,
//!   `maximum`/`minimum` with the OpenAPI 3.0 boolean `exclusiveMaximum`/`exclusiveMinimum`,
//!   `multipleOf`, string `format`s `date-time`, `date` and `byte`, `x-kubernetes-int-or-string`,
//!   `x-kubernetes-embedded-resource` (`apiVersion` and `kind` required and well formed),
//!   `x-kubernetes-list-type: set|map` uniqueness (with `x-kubernetes-list-map-keys`),
//!   `allOf`/`anyOf`/`oneOf`/`not`, `pattern` (compiled once with the `regex` crate, whose syntax
//!   is RE2's like Go's; matched unanchored like `regexp.MatchString`).
//! - Kept but not enforced: `x-kubernetes-validations` (CEL is not evaluated;
//!   the rules are available through [`Schema::cel_rules`]), `x-kubernetes-map-type` (merge
//!   semantics only), numeric `format`s such as `int32` (kube does not range-check them either)
//!   and string formats other than the three above (kube knows more; OCM uses none of them).
//! - Metadata: `metadata` at the resource root and at embedded-resource nodes is left alone by
//!   validation and pruning; object metadata has its own rules elsewhere.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

use crate::validation::{FieldError, FieldErrorKind};

/// A compiled `pattern` (RE2 syntax, which the `regex` crate shares); compared by its source.
#[derive(Debug, Clone)]
struct Pattern {
    source: String,
    re: regex::Regex,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.source == other.source
    }
}

/// Why a JSON value is not a schema this module can work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A schema node (or a keyword that must hold one) is not a JSON object.
    #[error("schema at {path:?}: a schema must be a JSON object")]
    NotAnObject {
        /// JSON pointer of the node within the schema.
        path: String,
    },
    /// A keyword has a value of the wrong shape.
    #[error("schema at {path:?}: {keyword}: {reason}")]
    InvalidKeyword {
        /// JSON pointer of the node within the schema.
        path: String,
        /// The offending keyword.
        keyword: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A keyword that structural schemas forbid (`$ref`, `patternProperties`, ...).
    #[error("schema at {path:?}: {keyword} is not allowed in a structural schema")]
    Unsupported {
        /// JSON pointer of the node within the schema.
        path: String,
        /// The offending keyword.
        keyword: String,
    },
}

/// The JSON type a schema node declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaType {
    /// `object`
    Object,
    /// `array`
    Array,
    /// `string`
    String,
    /// `integer`
    Integer,
    /// `number` (integers are numbers too)
    Number,
    /// `boolean`
    Boolean,
}

impl SchemaType {
    /// The name as written in the schema.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaType::Object => "object",
            SchemaType::Array => "array",
            SchemaType::String => "string",
            SchemaType::Integer => "integer",
            SchemaType::Number => "number",
            SchemaType::Boolean => "boolean",
        }
    }

    fn parse(name: &str) -> Option<SchemaType> {
        Some(match name {
            "object" => SchemaType::Object,
            "array" => SchemaType::Array,
            "string" => SchemaType::String,
            "integer" => SchemaType::Integer,
            "number" => SchemaType::Number,
            "boolean" => SchemaType::Boolean,
            _ => return None,
        })
    }

    /// Whether a JSON value of type `actual` (as named by [`json_type`]) satisfies this type.
    fn accepts(self, actual: &str) -> bool {
        match self {
            SchemaType::Number => actual == "number" || actual == "integer",
            other => other.as_str() == actual,
        }
    }
}

/// `additionalProperties`: a boolean or the schema of every map value.
#[derive(Debug, Clone, PartialEq)]
pub enum AdditionalProperties {
    /// `true` (any value, whose own fields are pruned) or `false` (no extra keys).
    Allowed(bool),
    /// The schema every value of the map must satisfy.
    Schema(Box<Schema>),
}

/// `x-kubernetes-list-type`: how an array merges and whether its items must be unique.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ListType {
    /// Replaced as a whole (the default).
    #[default]
    Atomic,
    /// Scalar items, unique.
    Set,
    /// Objects identified by these keys (`x-kubernetes-list-map-keys`), unique per key tuple.
    Map(Vec<String>),
}

/// `x-kubernetes-map-type`: how an object merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapType {
    /// Each key merges on its own (the default).
    #[default]
    Granular,
    /// Replaced as a whole.
    Atomic,
}

/// One `x-kubernetes-validations` entry, kept verbatim; the CEL is not evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationRule {
    /// The CEL expression.
    pub rule: String,
    /// The message shown when the rule fails.
    pub message: Option<String>,
    /// A CEL expression producing the message.
    pub message_expression: Option<String>,
    /// The `reason` reported when the rule fails.
    pub reason: Option<String>,
    /// The field path reported when the rule fails.
    pub field_path: Option<String>,
    /// Whether the rule also runs on create (with `oldSelf` absent).
    pub optional_old_self: Option<bool>,
}

/// The numeric and size constraints of a schema node, all optional.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bounds {
    /// `maxLength` of a string, in characters.
    pub max_length: Option<u64>,
    /// `minLength` of a string, in characters.
    pub min_length: Option<u64>,
    /// `maxItems` of an array.
    pub max_items: Option<u64>,
    /// `minItems` of an array.
    pub min_items: Option<u64>,
    /// `maxProperties` of an object.
    pub max_properties: Option<u64>,
    /// `minProperties` of an object.
    pub min_properties: Option<u64>,
    /// `maximum` of a number.
    pub maximum: Option<f64>,
    /// Whether `maximum` is exclusive.
    pub exclusive_maximum: bool,
    /// `minimum` of a number.
    pub minimum: Option<f64>,
    /// Whether `minimum` is exclusive.
    pub exclusive_minimum: bool,
    /// `multipleOf` of a number.
    pub multiple_of: Option<f64>,
}

/// A structural schema node, parsed once from a CRD's `openAPIV3Schema` (see the module docs
/// for which keywords are enforced).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Schema {
    type_: Option<SchemaType>,
    description: Option<String>,
    properties: BTreeMap<String, Schema>,
    required: Vec<String>,
    items: Option<Box<Schema>>,
    additional_properties: Option<AdditionalProperties>,
    enum_: Vec<Value>,
    default: Option<Value>,
    nullable: bool,
    format: Option<String>,
    pattern: Option<Pattern>,
    bounds: Bounds,
    preserve_unknown_fields: bool,
    int_or_string: bool,
    embedded_resource: bool,
    list_type: ListType,
    map_type: MapType,
    validations: Vec<ValidationRule>,
    all_of: Vec<Schema>,
    any_of: Vec<Schema>,
    one_of: Vec<Schema>,
    not: Option<Box<Schema>>,
}

impl<'de> serde::Deserialize<'de> for Schema {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Schema, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Schema::from_value(&value).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<&Value> for Schema {
    type Error = SchemaError;

    fn try_from(value: &Value) -> Result<Schema, SchemaError> {
        Schema::from_value(value)
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

impl Schema {
    /// Parses a schema from its JSON form. Unknown keywords (`description` aside, which is kept)
    /// such as `title` or `example` are ignored; keywords structural schemas forbid are errors.
    pub fn from_value(v: &Value) -> Result<Schema, SchemaError> {
        parse_node(v, &mut String::new())
    }
}

fn keyword_error(path: &str, keyword: &str, reason: &str) -> SchemaError {
    SchemaError::InvalidKeyword {
        path: path.to_owned(),
        keyword: keyword.to_owned(),
        reason: reason.to_owned(),
    }
}

fn want_bool(v: &Value, path: &str, keyword: &str) -> Result<bool, SchemaError> {
    v.as_bool().ok_or_else(|| keyword_error(path, keyword, "must be a boolean"))
}

fn want_str(v: &Value, path: &str, keyword: &str) -> Result<String, SchemaError> {
    v.as_str().map(str::to_owned).ok_or_else(|| keyword_error(path, keyword, "must be a string"))
}

fn want_count(v: &Value, path: &str, keyword: &str) -> Result<u64, SchemaError> {
    v.as_u64().ok_or_else(|| keyword_error(path, keyword, "must be a non-negative integer"))
}

fn want_number(v: &Value, path: &str, keyword: &str) -> Result<f64, SchemaError> {
    v.as_f64().ok_or_else(|| keyword_error(path, keyword, "must be a number"))
}

fn want_strings(v: &Value, path: &str, keyword: &str) -> Result<Vec<String>, SchemaError> {
    let items = v.as_array().ok_or_else(|| keyword_error(path, keyword, "must be a list"))?;
    items
        .iter()
        .map(|item| {
            item.as_str()
                .map(str::to_owned)
                .ok_or_else(|| keyword_error(path, keyword, "must be a list of strings"))
        })
        .collect()
}

/// Parses the schema at `v`; `path` is its JSON pointer, restored before returning.
fn parse_child(v: &Value, path: &mut String, segment: &str) -> Result<Schema, SchemaError> {
    let mark = path.len();
    path.push('/');
    // JSON pointer escaping, so error paths stay unambiguous.
    path.push_str(&segment.replace('~', "~0").replace('/', "~1"));
    let parsed = parse_node(v, path);
    path.truncate(mark);
    parsed
}

fn parse_list(v: &Value, path: &mut String, keyword: &str) -> Result<Vec<Schema>, SchemaError> {
    let items = v.as_array().ok_or_else(|| keyword_error(path, keyword, "must be a list"))?;
    let mark = path.len();
    path.push('/');
    path.push_str(keyword);
    let parsed =
        items.iter().enumerate().map(|(i, item)| parse_child(item, path, &i.to_string())).collect();
    path.truncate(mark);
    parsed
}

fn parse_validations(v: &Value, path: &str) -> Result<Vec<ValidationRule>, SchemaError> {
    const KEYWORD: &str = "x-kubernetes-validations";
    let items = v.as_array().ok_or_else(|| keyword_error(path, KEYWORD, "must be a list"))?;
    items
        .iter()
        .map(|item| {
            let obj = item
                .as_object()
                .ok_or_else(|| keyword_error(path, KEYWORD, "must hold objects"))?;
            let text = |key: &str| -> Result<Option<String>, SchemaError> {
                obj.get(key).map(|v| want_str(v, path, KEYWORD)).transpose()
            };
            Ok(ValidationRule {
                rule: text("rule")?
                    .ok_or_else(|| keyword_error(path, KEYWORD, "every entry needs a rule"))?,
                message: text("message")?,
                message_expression: text("messageExpression")?,
                reason: text("reason")?,
                field_path: text("fieldPath")?,
                optional_old_self: obj
                    .get("optionalOldSelf")
                    .map(|v| want_bool(v, path, KEYWORD))
                    .transpose()?,
            })
        })
        .collect()
}

fn parse_node(v: &Value, path: &mut String) -> Result<Schema, SchemaError> {
    let obj = v.as_object().ok_or_else(|| SchemaError::NotAnObject { path: path.clone() })?;
    let mut s = Schema::default();
    let mut list_type: Option<String> = None;
    let mut list_map_keys: Option<Vec<String>> = None;
    for (keyword, value) in obj {
        let p = path.as_str();
        match keyword.as_str() {
            "type" => {
                let name = want_str(value, p, keyword)?;
                s.type_ =
                    Some(SchemaType::parse(&name).ok_or_else(|| {
                        keyword_error(p, keyword, &format!("unknown type {name:?}"))
                    })?);
            }
            "description" => s.description = Some(want_str(value, p, keyword)?),
            "properties" => {
                let props = value
                    .as_object()
                    .ok_or_else(|| keyword_error(p, keyword, "must be an object"))?;
                let mark = path.len();
                path.push_str("/properties");
                for (name, prop) in props {
                    let parsed = parse_child(prop, path, name);
                    match parsed {
                        Ok(parsed) => {
                            s.properties.insert(name.clone(), parsed);
                        }
                        Err(e) => {
                            path.truncate(mark);
                            return Err(e);
                        }
                    }
                }
                path.truncate(mark);
            }
            "required" => s.required = want_strings(value, p, keyword)?,
            "items" => {
                if value.is_array() {
                    return Err(SchemaError::Unsupported {
                        path: p.to_owned(),
                        keyword: "items (as a list)".to_owned(),
                    });
                }
                s.items = Some(Box::new(parse_child(value, path, "items")?));
            }
            "additionalProperties" => {
                s.additional_properties = Some(match value {
                    Value::Bool(allowed) => AdditionalProperties::Allowed(*allowed),
                    other => AdditionalProperties::Schema(Box::new(parse_child(
                        other,
                        path,
                        "additionalProperties",
                    )?)),
                });
            }
            "enum" => {
                s.enum_ = value
                    .as_array()
                    .ok_or_else(|| keyword_error(p, keyword, "must be a list"))?
                    .clone();
            }
            "default" => s.default = Some(value.clone()),
            "nullable" => s.nullable = want_bool(value, p, keyword)?,
            "format" => s.format = Some(want_str(value, p, keyword)?),
            "pattern" => {
                let source = want_str(value, p, keyword)?;
                let re = regex::Regex::new(&source).map_err(|e| {
                    keyword_error(p, keyword, &format!("not a regular expression: {e}"))
                })?;
                s.pattern = Some(Pattern { source, re });
            }
            "maxLength" => s.bounds.max_length = Some(want_count(value, p, keyword)?),
            "minLength" => s.bounds.min_length = Some(want_count(value, p, keyword)?),
            "maxItems" => s.bounds.max_items = Some(want_count(value, p, keyword)?),
            "minItems" => s.bounds.min_items = Some(want_count(value, p, keyword)?),
            "maxProperties" => s.bounds.max_properties = Some(want_count(value, p, keyword)?),
            "minProperties" => s.bounds.min_properties = Some(want_count(value, p, keyword)?),
            "maximum" => s.bounds.maximum = Some(want_number(value, p, keyword)?),
            "minimum" => s.bounds.minimum = Some(want_number(value, p, keyword)?),
            "exclusiveMaximum" => s.bounds.exclusive_maximum = want_bool(value, p, keyword)?,
            "exclusiveMinimum" => s.bounds.exclusive_minimum = want_bool(value, p, keyword)?,
            "multipleOf" => {
                let m = want_number(value, p, keyword)?;
                if m <= 0.0 {
                    return Err(keyword_error(p, keyword, "must be greater than zero"));
                }
                s.bounds.multiple_of = Some(m);
            }
            "x-kubernetes-preserve-unknown-fields" => {
                s.preserve_unknown_fields = want_bool(value, p, keyword)?;
            }
            "x-kubernetes-int-or-string" => s.int_or_string = want_bool(value, p, keyword)?,
            "x-kubernetes-embedded-resource" => {
                s.embedded_resource = want_bool(value, p, keyword)?;
            }
            "x-kubernetes-list-type" => list_type = Some(want_str(value, p, keyword)?),
            "x-kubernetes-list-map-keys" => list_map_keys = Some(want_strings(value, p, keyword)?),
            "x-kubernetes-map-type" => {
                s.map_type = match want_str(value, p, keyword)?.as_str() {
                    "granular" => MapType::Granular,
                    "atomic" => MapType::Atomic,
                    _ => return Err(keyword_error(p, keyword, "must be granular or atomic")),
                };
            }
            "x-kubernetes-validations" => s.validations = parse_validations(value, p)?,
            "allOf" => s.all_of = parse_list(value, path, "allOf")?,
            "anyOf" => s.any_of = parse_list(value, path, "anyOf")?,
            "oneOf" => s.one_of = parse_list(value, path, "oneOf")?,
            "not" => s.not = Some(Box::new(parse_child(value, path, "not")?)),
            "uniqueItems" if want_bool(value, p, keyword)? => {
                return Err(SchemaError::Unsupported {
                    path: p.to_owned(),
                    keyword: "uniqueItems: true".to_owned(),
                });
            }
            "$ref" | "patternProperties" | "dependencies" | "additionalItems" | "definitions" => {
                return Err(SchemaError::Unsupported {
                    path: p.to_owned(),
                    keyword: keyword.clone(),
                });
            }
            // title, example, externalDocs, x-kubernetes-* we do not act on, ...
            _ => {}
        }
    }
    let p = path.as_str();
    s.list_type = match (list_type.as_deref(), list_map_keys) {
        (None | Some("atomic"), None) => ListType::Atomic,
        (Some("set"), None) => ListType::Set,
        (Some("map"), Some(keys)) if !keys.is_empty() => ListType::Map(keys),
        (Some("map"), _) => {
            return Err(keyword_error(
                p,
                "x-kubernetes-list-map-keys",
                "a list of type map needs at least one key",
            ));
        }
        (Some("atomic" | "set") | None, Some(_)) => {
            return Err(keyword_error(
                p,
                "x-kubernetes-list-map-keys",
                "only allowed with x-kubernetes-list-type: map",
            ));
        }
        (Some(_), _) => {
            return Err(keyword_error(p, "x-kubernetes-list-type", "must be atomic, set or map"));
        }
    };
    Ok(s)
}

// ---------------------------------------------------------------------------------------------
// Accessors
// ---------------------------------------------------------------------------------------------

impl Schema {
    /// The declared `type`, if any (int-or-string and preserve-unknown-fields nodes may have
    /// none).
    pub fn type_(&self) -> Option<SchemaType> {
        self.type_
    }

    /// The `description`.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// The declared `properties`, by name.
    pub fn properties(&self) -> &BTreeMap<String, Schema> {
        &self.properties
    }

    /// One declared property.
    pub fn property(&self, name: &str) -> Option<&Schema> {
        self.properties.get(name)
    }

    /// The `required` property names, in declaration order.
    pub fn required(&self) -> &[String] {
        &self.required
    }

    /// The schema of an array's items.
    pub fn items(&self) -> Option<&Schema> {
        self.items.as_deref()
    }

    /// `additionalProperties`, if declared.
    pub fn additional_properties(&self) -> Option<&AdditionalProperties> {
        self.additional_properties.as_ref()
    }

    /// The `enum` values (empty when the node has no enum).
    pub fn enum_values(&self) -> &[Value] {
        &self.enum_
    }

    /// The `default`.
    pub fn default_value(&self) -> Option<&Value> {
        self.default.as_ref()
    }

    /// Whether `null` is allowed.
    pub fn nullable(&self) -> bool {
        self.nullable
    }

    /// The `format`.
    pub fn format(&self) -> Option<&str> {
        self.format.as_deref()
    }

    /// The `pattern` (an RE2 expression, matched unanchored like Go's `regexp.MatchString`).
    /// It is kept, not enforced: see the module docs.
    pub fn pattern(&self) -> Option<&str> {
        self.pattern.as_ref().map(|p| p.source.as_str())
    }

    /// Length, size and range constraints.
    pub fn bounds(&self) -> &Bounds {
        &self.bounds
    }

    /// `x-kubernetes-preserve-unknown-fields`.
    pub fn preserve_unknown_fields(&self) -> bool {
        self.preserve_unknown_fields
    }

    /// `x-kubernetes-int-or-string`.
    pub fn int_or_string(&self) -> bool {
        self.int_or_string
    }

    /// `x-kubernetes-embedded-resource`.
    pub fn embedded_resource(&self) -> bool {
        self.embedded_resource
    }

    /// The list semantics of an array node (`Atomic` when undeclared, or for non-arrays).
    pub fn list_type(&self) -> ListType {
        self.list_type.clone()
    }

    /// The `x-kubernetes-list-map-keys` of a list-type map (empty otherwise).
    pub fn list_map_keys(&self) -> &[String] {
        match &self.list_type {
            ListType::Map(keys) => keys,
            ListType::Atomic | ListType::Set => &[],
        }
    }

    /// The map semantics of an object node (`Granular` when undeclared).
    pub fn map_type(&self) -> MapType {
        self.map_type
    }

    /// The `x-kubernetes-validations` entries of this node.
    pub fn validations(&self) -> &[ValidationRule] {
        &self.validations
    }

    /// The raw CEL rule strings of this node's `x-kubernetes-validations` (not evaluated).
    pub fn cel_rules(&self) -> impl Iterator<Item = &str> {
        self.validations.iter().map(|v| v.rule.as_str())
    }

    /// `allOf` branches.
    pub fn all_of(&self) -> &[Schema] {
        &self.all_of
    }

    /// `anyOf` branches.
    pub fn any_of(&self) -> &[Schema] {
        &self.any_of
    }

    /// `oneOf` branches.
    pub fn one_of(&self) -> &[Schema] {
        &self.one_of
    }

    /// The `not` schema.
    pub fn not(&self) -> Option<&Schema> {
        self.not.as_deref()
    }

    /// The sub-schema at a path of property names. Arrays are transparent (a name is looked up
    /// in the items' schema), and a name that is not a declared property selects the
    /// `additionalProperties` schema, so `["spec", "taints", "effect"]` and
    /// `["status", "capacity", "cpu"]` both resolve. The empty path is `self`.
    pub fn at(&self, path: &[&str]) -> Option<&Schema> {
        path.iter().try_fold(self, |node, name| node.child(name))
    }

    fn child(&self, name: &str) -> Option<&Schema> {
        if let Some(prop) = self.properties.get(name) {
            return Some(prop);
        }
        if let Some(AdditionalProperties::Schema(values)) = &self.additional_properties {
            return Some(values);
        }
        self.items.as_deref().and_then(|items| items.child(name))
    }
}

// ---------------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------------

/// A field path being walked, in apimachinery notation (`spec.taints[0].effect`,
/// `spec.selector[app]`), grown and shrunk in place so a walk allocates only on errors.
struct FieldPath(String);

impl FieldPath {
    fn field(&mut self, name: &str) -> usize {
        let mark = self.0.len();
        if !self.0.is_empty() {
            self.0.push('.');
        }
        self.0.push_str(name);
        mark
    }

    fn index(&mut self, i: usize) -> usize {
        let mark = self.0.len();
        // Writing to a String cannot fail.
        let _ = write!(self.0, "[{i}]");
        mark
    }

    fn key(&mut self, key: &str) -> usize {
        let mark = self.0.len();
        self.0.push('[');
        self.0.push_str(key);
        self.0.push(']');
        mark
    }

    fn reset(&mut self, mark: usize) {
        self.0.truncate(mark);
    }

    fn child(&self, name: &str) -> String {
        if self.0.is_empty() { name.to_owned() } else { format!("{}.{name}", self.0) }
    }

    /// The subject of kube-openapi's messages: `spec.size in body`.
    fn in_body(&self) -> String {
        if self.0.is_empty() { "in body".to_owned() } else { format!("{} in body", self.0) }
    }
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

/// Errors in the order kube reports them: schema errors, then embedded-resource errors, then
/// list-type uniqueness errors (each a separate pass in kube, one walk here).
#[derive(Default)]
struct Errors {
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
fn json_type(v: &Value) -> &'static str {
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

fn is_integer(n: &Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.is_finite() && f.fract() == 0.0)
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
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
fn fmt_limit(f: f64) -> String {
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

fn type_error(path: &FieldPath, expected: &str, actual: &str) -> FieldError {
    FieldError::new(
        FieldErrorKind::TypeInvalid,
        path.0.clone(),
        Some(Value::String(actual.to_owned())),
        format!("{} must be of type {expected}: {actual:?}", path.in_body()),
    )
}

fn invalid(path: &FieldPath, value: Value, what: &str) -> FieldError {
    FieldError::invalid(path.0.clone(), value, format!("{} {what}", path.in_body()))
}

/// Validates `v` against `s` at `path`; `resource_root` marks the root and embedded-resource
/// nodes, whose `metadata` is skipped.
fn validate_node(
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

fn validate_string(s: &Schema, text: &str, path: &FieldPath, errors: &mut Errors) {
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

fn validate_number(s: &Schema, n: &Number, v: &Value, path: &FieldPath, errors: &mut Errors) {
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

fn validate_array(s: &Schema, items: &[Value], path: &mut FieldPath, errors: &mut Errors) {
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
const PAIRWISE_LIMIT: usize = 32;

/// Reports every item that repeats an earlier one, given each item's identity.
fn report_duplicates(
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

fn validate_set(items: &[Value], path: &mut FieldPath, errors: &mut Errors) {
    report_duplicates(items, path, errors, |i| items[i].clone());
}

fn validate_list_map(
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

fn validate_object(
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
fn validate_embedded(map: &Map<String, Value>, path: &FieldPath, errors: &mut Errors) {
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

fn validate_combinators(s: &Schema, v: &Value, path: &mut FieldPath, errors: &mut Errors) {
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

fn two_digits(b: &[u8]) -> Option<u32> {
    match b {
        [a @ b'0'..=b'9', c @ b'0'..=b'9'] => Some(u32::from(a - b'0') * 10 + u32::from(c - b'0')),
        _ => None,
    }
}

/// `YYYY-MM-DD` with a real day of the month, as Go's `time.Parse("2006-01-02", ..)` accepts.
fn is_date(text: &str) -> bool {
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
fn is_date_time(text: &str) -> bool {
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
fn is_base64(text: &str) -> bool {
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

impl Schema {
    /// Fills `default`s the way apiextensions does: for every object that exists, each absent
    /// property with a default gets a copy of it, and so does a property that is `null` but
    /// not nullable; a non-nullable `null` without a default is removed (kube's
    /// `PruneNonNullableNullsWithoutDefaults`). Defaulting runs top-down, so a default is
    /// itself defaulted, and reaches into array items and map values. A nullable `null` stays.
    pub fn apply_defaults(&self, obj: &mut Value) {
        default_node(self, obj);
    }
}

fn is_non_nullable_null(v: &Value, s: &Schema) -> bool {
    v.is_null() && !s.nullable
}

fn default_node(s: &Schema, v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|key, value| {
                let schema = match (s.properties.get(key), &s.additional_properties) {
                    (Some(prop), _) => prop,
                    (None, Some(AdditionalProperties::Schema(values))) => values,
                    _ => return true,
                };
                !(is_non_nullable_null(value, schema) && schema.default.is_none())
            });
            for (name, prop) in &s.properties {
                let Some(default) = &prop.default else { continue };
                match map.get_mut(name) {
                    None => {
                        map.insert(name.clone(), default.clone());
                    }
                    Some(value) if is_non_nullable_null(value, prop) => *value = default.clone(),
                    Some(_) => {}
                }
            }
            for (key, value) in map.iter_mut() {
                if let Some(prop) = s.properties.get(key) {
                    default_node(prop, value);
                } else if let Some(AdditionalProperties::Schema(values)) = &s.additional_properties
                {
                    if is_non_nullable_null(value, values) {
                        if let Some(default) = &values.default {
                            *value = default.clone();
                        }
                    }
                    default_node(values, value);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = s.items.as_deref() else { return };
            for item in items {
                if is_non_nullable_null(item, item_schema) {
                    if let Some(default) = &item_schema.default {
                        *item = default.clone();
                    }
                }
                default_node(item_schema, item);
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Pruning
// ---------------------------------------------------------------------------------------------

impl Schema {
    /// Drops every field the schema does not declare, as kube's structural pruning does, and
    /// returns the dropped fields' paths as kube reports them for `fieldValidation`
    /// (`spec.colour`, `spec.taints[0].colour`; map entries are dotted, `spec.selector.app.x`,
    /// since kube's pruner joins every key with a dot). Kept: subtrees under
    /// `x-kubernetes-preserve-unknown-fields` (their declared properties are still pruned),
    /// values of `additionalProperties`, and `apiVersion`/`kind` (strings) and `metadata`
    /// (an object) at the root and at embedded-resource nodes.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        let mut path = FieldPath(String::new());
        prune_node(Some(self), obj, true, &mut path, &mut pruned);
        pruned
    }
}

fn is_kept_meta_field(key: &str, value: &Value) -> bool {
    match key {
        "apiVersion" | "kind" => value.is_string(),
        "metadata" => value.is_object(),
        _ => false,
    }
}

fn prune_node(
    s: Option<&Schema>,
    v: &mut Value,
    resource_root: bool,
    path: &mut FieldPath,
    pruned: &mut Vec<String>,
) {
    if let Some(s) = s.filter(|s| s.preserve_unknown_fields) {
        skip_prune(s, v, path, pruned);
        return;
    }
    match v {
        Value::Object(map) => {
            let Some(s) = s else {
                for key in map.keys() {
                    pruned.push(path.child(key));
                }
                map.clear();
                return;
            };
            let meta_fields = resource_root || s.embedded_resource;
            map.retain(|key, value| {
                if meta_fields && is_kept_meta_field(key, value) {
                    return true;
                }
                let child = match (s.properties.get(key), &s.additional_properties) {
                    (Some(prop), _) => Some(prop),
                    (None, Some(AdditionalProperties::Schema(values))) => Some(&**values),
                    (None, Some(AdditionalProperties::Allowed(true))) => None,
                    (None, Some(AdditionalProperties::Allowed(false)) | None) => {
                        pruned.push(path.child(key));
                        return false;
                    }
                };
                let mark = path.field(key);
                prune_node(child, value, child.is_some_and(|c| c.embedded_resource), path, pruned);
                path.reset(mark);
                true
            });
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            let embedded = item_schema.is_some_and(|c| c.embedded_resource);
            for (i, item) in items.iter_mut().enumerate() {
                let mark = path.index(i);
                prune_node(item_schema, item, embedded, path, pruned);
                path.reset(mark);
            }
        }
        _ => {}
    }
}

/// Inside `x-kubernetes-preserve-unknown-fields`: unknown keys stay, declared ones are pruned
/// by their own schemas (kube's `skipPrune`).
fn skip_prune(s: &Schema, v: &mut Value, path: &mut FieldPath, pruned: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if s.embedded_resource && matches!(key.as_str(), "apiVersion" | "kind" | "metadata")
                {
                    continue;
                }
                let child = match (s.properties.get(key), &s.additional_properties) {
                    (Some(prop), _) => Some(prop),
                    (None, Some(AdditionalProperties::Schema(values))) => Some(&**values),
                    (None, Some(AdditionalProperties::Allowed(true))) => None,
                    (None, Some(AdditionalProperties::Allowed(false)) | None) => continue,
                };
                let mark = path.field(key);
                prune_node(child, value, child.is_some_and(|c| c.embedded_resource), path, pruned);
                path.reset(mark);
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = s.items.as_deref() else { return };
            for (i, item) in items.iter_mut().enumerate() {
                let mark = path.index(i);
                skip_prune(item_schema, item, path, pruned);
                path.reset(mark);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        Schema::from_value(&v).unwrap()
    }

    #[test]
    fn parse_errors_are_typed() {
        assert!(matches!(Schema::from_value(&json!(3)), Err(SchemaError::NotAnObject { .. })));
        let err = Schema::from_value(&json!({"properties": {"a": {"type": "strin"}}})).unwrap_err();
        assert_eq!(
            err,
            SchemaError::InvalidKeyword {
                path: "/properties/a".into(),
                keyword: "type".into(),
                reason: "unknown type \"strin\"".into(),
            }
        );
        assert!(matches!(
            Schema::from_value(&json!({"items": {"$ref": "#/x"}})),
            Err(SchemaError::Unsupported { ref path, .. }) if path == "/items"
        ));
        assert!(Schema::from_value(&json!({"x-kubernetes-list-type": "map"})).is_err());
        assert!(Schema::from_value(&json!({"x-kubernetes-list-map-keys": ["a"]})).is_err());
    }

    #[test]
    fn dates_and_bytes() {
        for ok in ["2024-02-29T10:00:00Z", "2023-01-01t00:00:00.123+01:00", "2023-12-31T23:59:59z"]
        {
            assert!(is_date_time(ok), "{ok}");
        }
        for bad in [
            "2023-02-29T10:00:00Z",
            "2023-01-01",
            "2023-01-01T24:00:00Z",
            "2023-01-01T10:00:00",
            "yesterday",
            "2023-1-01T10:00:00Z",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
        assert!(is_base64("aGVsbG8="));
        assert!(is_base64(""));
        assert!(is_base64("aGVs\nbG8="));
        assert!(!is_base64("aGVsbG8"));
        assert!(!is_base64("a===") && !is_base64("a*bc"));
    }

    #[test]
    fn type_errors_read_like_kube() {
        let s = schema(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}));
        let errs = s.validate(&json!({"spec": {"size": "x"}}));
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            r#"spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#
        );
        assert_eq!(errs[0].kind, FieldErrorKind::TypeInvalid);
        // Integral floats are integers; fractions are not.
        assert!(s.validate(&json!({"spec": {"size": 3.0}})).is_empty());
        assert_eq!(
            s.validate(&json!({"spec": {"size": 3.5}}))[0].kind,
            FieldErrorKind::TypeInvalid
        );
    }

    #[test]
    fn bounds_and_combinators() {
        let s = schema(json!({"type": "object", "properties": {
            "n": {"type": "integer", "maximum": 10, "minimum": 1, "exclusiveMinimum": true},
            "s": {"type": "string", "maxLength": 3, "minLength": 2},
            "l": {"type": "array", "maxItems": 1, "minItems": 1, "items": {"type": "string"},
                  "x-kubernetes-list-type": "set"},
            "m": {"type": "object", "additionalProperties": false, "properties": {"a": {}}},
            "o": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "x": {"not": {"type": "string"}}
        }}));
        let errs = s.validate(&json!({"n": 1, "s": "long", "l": ["a", "a"], "m": {"b": 1},
                                      "o": true, "x": "s"}));
        let got: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            got,
            [
                "n: Invalid value: 1: n in body should be greater than 1",
                "s: Too long: may not be more than 3 bytes",
                "l: Too many: 2: must have at most 1 items",
                r#"m: Invalid value: "b": m.b in body is a forbidden property"#,
                r#"o: Invalid value: "": o in body must validate one and only one schema (oneOf)"#,
                r#"o: Invalid value: "boolean": o in body must be of type string: "boolean""#,
                r#"x: Invalid value: "": x in body must not validate the schema (not)"#,
                r#"l[1]: Duplicate value: "a""#,
            ]
        );
    }

    #[test]
    fn int_or_string() {
        let s = schema(json!({"type": "object", "properties": {"v": {
            "anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true
        }}}));
        assert!(s.validate(&json!({"v": 3})).is_empty());
        assert!(s.validate(&json!({"v": "30%"})).is_empty());
        let errs = s.validate(&json!({"v": true}));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].detail, r#"v in body must be of type integer,string: "boolean""#);
    }

    #[test]
    fn defaults_replace_non_nullable_nulls_and_drop_the_rest() {
        let s = schema(json!({"type": "object", "properties": {
            "a": {"type": "string", "default": "x"},
            "b": {"type": "string"},
            "c": {"type": "string", "nullable": true, "default": "y"},
            "d": {"type": "object", "default": {}, "properties": {"e": {"type": "integer", "default": 1}}}
        }}));
        let mut v = json!({"a": null, "b": null, "c": null});
        s.apply_defaults(&mut v);
        assert_eq!(v, json!({"a": "x", "c": null, "d": {"e": 1}}));
    }

    #[test]
    fn at_walks_arrays_and_maps() {
        let s = schema(json!({"properties": {"l": {"type": "array", "items": {"properties": {
            "k": {"type": "string"}}}}, "m": {"additionalProperties": {"type": "integer"}}}}));
        assert_eq!(s.at(&["l", "k"]).and_then(Schema::type_), Some(SchemaType::String));
        assert_eq!(s.at(&["m", "anything"]).and_then(Schema::type_), Some(SchemaType::Integer));
        assert!(s.at(&["nope"]).is_none());
        assert_eq!(s.at(&[]), Some(&s));
    }
}
