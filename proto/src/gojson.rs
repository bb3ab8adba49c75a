//! JSON as Go's `encoding/json` writes a `map[string]interface{}`, and its SHA-256: the bytes
//! OCM hashes (add-on config spec hashes, work status hashes) must be reproduced exactly for
//! the hashes to agree with OCM's.

use serde_json::Value;

/// `value` as Go's `json.Marshal` writes it once everything is a map: keys sorted by bytes at
/// every level, no whitespace, `<`, `>`, `&`, U+2028 and U+2029 escaped as Go escapes them.
pub fn go_json(value: &Value) -> String {
    let text = serde_json::to_string(&sorted(value)).unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The lowercase hex SHA-256 of [`go_json`] of `value`.
pub fn go_json_sha256(value: &Value) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(go_json(value).as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// `v` with every object's keys in byte order (serde_json keeps insertion order here).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_at_every_level_and_html_is_escaped() {
        let v = json!({"b": {"z": 1, "a": [{"y": "<&>", "x": "\u{2028}"}]}, "a": null});
        assert_eq!(
            go_json(&v),
            r#"{"a":null,"b":{"a":[{"x":"\u2028","y":"\u003c\u0026\u003e"}],"z":1}}"#
        );
    }
}
