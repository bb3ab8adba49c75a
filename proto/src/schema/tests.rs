//! The structural schema's tests: parsing, validation, defaulting and pruning as
//! apiextensions-apiserver does them.

use super::validate::{is_base64, is_date_time};
use super::*;
use crate::validation::FieldErrorKind;
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
    for ok in ["2024-02-29T10:00:00Z", "2023-01-01t00:00:00.123+01:00", "2023-12-31T23:59:59z"] {
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
    assert_eq!(s.validate(&json!({"spec": {"size": 3.5}}))[0].kind, FieldErrorKind::TypeInvalid);
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
