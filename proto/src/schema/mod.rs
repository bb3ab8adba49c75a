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

mod defaults;
mod validate;

use std::collections::BTreeMap;

use serde_json::Value;

/// A compiled `pattern` (RE2 syntax, which the `regex` crate shares); compared by its source.
#[derive(Debug, Clone)]
pub(super) struct Pattern {
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

pub(super) fn keyword_error(path: &str, keyword: &str, reason: &str) -> SchemaError {
    SchemaError::InvalidKeyword {
        path: path.to_owned(),
        keyword: keyword.to_owned(),
        reason: reason.to_owned(),
    }
}

pub(super) fn want_bool(v: &Value, path: &str, keyword: &str) -> Result<bool, SchemaError> {
    v.as_bool().ok_or_else(|| keyword_error(path, keyword, "must be a boolean"))
}

pub(super) fn want_str(v: &Value, path: &str, keyword: &str) -> Result<String, SchemaError> {
    v.as_str().map(str::to_owned).ok_or_else(|| keyword_error(path, keyword, "must be a string"))
}

pub(super) fn want_count(v: &Value, path: &str, keyword: &str) -> Result<u64, SchemaError> {
    v.as_u64().ok_or_else(|| keyword_error(path, keyword, "must be a non-negative integer"))
}

pub(super) fn want_number(v: &Value, path: &str, keyword: &str) -> Result<f64, SchemaError> {
    v.as_f64().ok_or_else(|| keyword_error(path, keyword, "must be a number"))
}

pub(super) fn want_strings(
    v: &Value,
    path: &str,
    keyword: &str,
) -> Result<Vec<String>, SchemaError> {
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
pub(super) fn parse_child(
    v: &Value,
    path: &mut String,
    segment: &str,
) -> Result<Schema, SchemaError> {
    let mark = path.len();
    path.push('/');
    // JSON pointer escaping, so error paths stay unambiguous.
    path.push_str(&segment.replace('~', "~0").replace('/', "~1"));
    let parsed = parse_node(v, path);
    path.truncate(mark);
    parsed
}

pub(super) fn parse_list(
    v: &Value,
    path: &mut String,
    keyword: &str,
) -> Result<Vec<Schema>, SchemaError> {
    let items = v.as_array().ok_or_else(|| keyword_error(path, keyword, "must be a list"))?;
    let mark = path.len();
    path.push('/');
    path.push_str(keyword);
    let parsed =
        items.iter().enumerate().map(|(i, item)| parse_child(item, path, &i.to_string())).collect();
    path.truncate(mark);
    parsed
}

pub(super) fn parse_validations(v: &Value, path: &str) -> Result<Vec<ValidationRule>, SchemaError> {
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

pub(super) fn parse_node(v: &Value, path: &mut String) -> Result<Schema, SchemaError> {
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

#[cfg(test)]
mod tests;
