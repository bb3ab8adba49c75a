//! Objects as the registry handles them: JSON values with Kubernetes metadata, and the small
//! accessors and rules every kind shares (names, labels, finalizers, timestamps, paths).

use serde_json::{Map, Value};

/// The longest object name (DNS subdomain).
pub const MAX_NAME: usize = 253;

/// `metadata` of an object, if it has one.
pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata")?.as_object()
}

/// `metadata`, created empty when absent or not an object.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let root = obj.as_object_mut().expect("made an object above");
    let m = root.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    m.as_object_mut().expect("made an object above")
}

/// A string field of `metadata` (`""` when absent).
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    meta(obj).and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or("")
}

/// `metadata.name`.
pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name")
}

/// `metadata.namespace`.
pub fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace")
}

/// `metadata.uid`.
pub fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid")
}

/// A label's value.
pub fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    meta(obj)?.get("labels")?.get(key)?.as_str()
}

/// `metadata.finalizers` (strings only).
pub fn finalizers(obj: &Value) -> Vec<&str> {
    meta(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The merge patch that gives `obj` (as read) `finalizer` (`present`) or takes it away, at
/// `obj`'s resourceVersion so that a concurrent change makes it a conflict, not a loss.
pub fn finalizer_patch(obj: &Value, finalizer: &str, present: bool) -> Value {
    let mut list: Vec<&str> = finalizers(obj).into_iter().filter(|f| *f != finalizer).collect();
    if present {
        list.push(finalizer);
    }
    serde_json::json!({"metadata": {
        "finalizers": list,
        "resourceVersion": meta_str(obj, "resourceVersion"),
    }})
}

/// Replaces `metadata.finalizers` (removing the field when empty).
pub fn set_finalizers(obj: &mut Value, list: &[String]) {
    let m = meta_mut(obj);
    if list.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), Value::from(list.to_vec()));
    }
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    meta(obj).and_then(|m| m.get("deletionTimestamp")).is_some_and(|v| !v.is_null())
}

/// `metadata.generation` (0 when absent).
pub fn generation(obj: &Value) -> i64 {
    meta(obj).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0)
}

/// `metadata.ownerReferences` as (uid, kind, name) triples.
pub fn owner_uids(obj: &Value) -> Vec<&str> {
    meta(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|r| r.get("uid")?.as_str()).collect())
        .unwrap_or_default()
}

/// A controller owner reference to `owner` (its apiVersion, kind, name and uid), blocking the
/// owner's foreground deletion until the dependent is gone.
pub fn controller_ref(owner: &Value) -> Value {
    serde_json::json!({
        "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": name(owner),
        "uid": uid(owner), "controller": true, "blockOwnerDeletion": true,
    })
}

/// Sets `metadata.resourceVersion` to the decimal revision.
pub fn set_resource_version(obj: &mut Value, rev: u64) {
    meta_mut(obj).insert("resourceVersion".into(), Value::String(rev.to_string()));
}

/// The value at a dotted path (`spec.signerName`), if every step is an object field.
pub fn at_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').filter(|s| !s.is_empty()).try_fold(obj, |v, step| v.get(step))
}

/// A selectable field's value as a field selector compares it: strings as they are, numbers
/// and booleans printed, anything else (or absence) as `""`.
pub fn field_string(obj: &Value, path: &str) -> String {
    match at_path(obj, path) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// Now as Kubernetes writes times: RFC 3339, UTC, whole seconds.
pub fn now_rfc3339() -> String {
    rfc3339(crate::machinery::clock::now())
}

/// A time Kubernetes wrote (RFC 3339); `None` when it is not one.
pub fn parse_rfc3339(s: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()
}

/// A time as Kubernetes writes `metav1.Time`: RFC 3339, UTC, whole seconds.
pub fn rfc3339(t: time::OffsetDateTime) -> String {
    format!("{}Z", rfc3339_seconds(t))
}

/// A time as Kubernetes writes `metav1.MicroTime`: RFC 3339, UTC, microseconds.
pub fn rfc3339_micros(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!("{}.{:06}Z", rfc3339_seconds(t), t.nanosecond() / 1000)
}

fn rfc3339_seconds(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// The strings of a JSON array (other items skipped; `[]` for anything not an array).
pub fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Checks a DNS-1123 subdomain (names of most kinds): lowercase alphanumerics, `-` and `.`,
/// alphanumeric at both ends of every dot-separated part, at most 253 characters. Returns the
/// apimachinery message on failure.
pub fn check_dns_subdomain(s: &str) -> Result<(), String> {
    const MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                       characters, '-' or '.', and must start and end with an alphanumeric \
                       character (e.g. 'example.com', regex used for validation is \
                       '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    if s.len() > MAX_NAME {
        return Err(format!("must be no more than {MAX_NAME} characters"));
    }
    // Kubernetes checks the whole name against the regex: no per-part length limit.
    if s.is_empty() || !s.split('.').all(ocm_proto::validation::is_dns_label_chars) {
        return Err(MSG.to_owned());
    }
    Ok(())
}

/// Checks a path segment name (Kubernetes' `ValidatePathSegmentName`, RBAC kinds).
pub fn check_path_segment(s: &str) -> Result<(), String> {
    match s {
        "." | ".." => Err(format!("may not be '{s}'")),
        _ if s.contains('/') => Err("may not contain '/'".to_owned()),
        _ if s.contains('%') => Err("may not contain '%'".to_owned()),
        _ => Ok(()),
    }
}

/// Checks a DNS-1123 label (names of namespaces and managed clusters): at most 63 characters of
/// lowercase alphanumerics and `-`, alphanumeric at both ends.
pub fn check_dns_label(s: &str) -> Result<(), String> {
    if s.len() > 63 {
        return Err("must be no more than 63 characters".to_owned());
    }
    if !ocm_proto::validation::is_dns_label(s) {
        return Err("a lowercase RFC 1123 label must consist of lower case alphanumeric \
                    characters or '-', and must start and end with an alphanumeric character \
                    (e.g. 'my-name',  or '123-abc', regex used for validation is \
                    '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            .to_owned());
    }
    Ok(())
}

/// A name from `generateName`: the prefix (cut to 58 characters) plus five characters from
/// Kubernetes' alphabet.
pub fn generate_name(prefix: &str) -> String {
    use rand::Rng as _;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut cut = prefix.len().min(58);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut rng = rand::rng();
    let suffix: String =
        (0..5).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect();
    format!("{}{}", &prefix[..cut], suffix)
}

/// A JSON object of `fields`, moved in (`json!` would serialize each value into a copy, which
/// for large values such as list items is a second deep copy).
pub fn json_object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// The length of `serde_json::to_vec(value)`, counted without writing it (a size limit on
/// 500 KiB of manifests is checked on every write of a work).
pub fn json_len(value: &Value) -> usize {
    fn string(s: &str) -> usize {
        let special = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
        // Most strings escape nothing: a pass that counts in bytes per 255-byte chunk (which
        // the compiler turns into wide compares) finds that out at memory speed.
        let specials: usize = s
            .as_bytes()
            .chunks(255)
            .map(|c| usize::from(c.iter().map(|&b| u8::from(special(b))).sum::<u8>()))
            .sum();
        if specials == 0 {
            return s.len() + 2;
        }
        // serde_json escapes `"` and `\` and control characters: \b \f \n \r \t as two
        // bytes, the rest as `\u00XX`.
        let escapes: usize = s
            .bytes()
            .filter(|&b| special(b))
            .map(|b| match b {
                b'"' | b'\\' | 0x08 | 0x0c | b'\n' | b'\r' | b'\t' => 1,
                _ => 5,
            })
            .sum();
        s.len() + 2 + escapes
    }
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => string(s),
        Value::Array(items) => {
            2 + items.iter().map(json_len).sum::<usize>() + items.len().saturating_sub(1)
        }
        Value::Object(map) => {
            2 + map.iter().map(|(k, v)| string(k) + 1 + json_len(v)).sum::<usize>()
                + map.len().saturating_sub(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_dns_subdomain("a.b-c.d1").is_ok());
        for bad in ["", "A", "-a", "a-", "a..b", "a_b", &"a".repeat(254)] {
            assert!(check_dns_subdomain(bad).is_err(), "{bad:?}");
        }
        assert!(check_dns_label("c1").is_ok());
        assert!(check_dns_label("c.1").is_err());
        let g = generate_name(&"x".repeat(80));
        assert_eq!(g.len(), 63);
        assert!(check_dns_subdomain(&g).is_ok());
    }

    #[test]
    fn timestamps_are_whole_seconds_utc() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z'));
    }

    /// The counted length is what serde_json writes, escapes, numbers and nesting included.
    #[test]
    fn json_len_is_the_serialized_length() {
        let values = [
            serde_json::json!(null),
            serde_json::json!({"a": [1, -2.5, 1e300, true, false, null, "x\"y\\z\n\u{1}\u{7f}é😀"],
                "": {}, "k\t": [], "n": u64::MAX, "m": i64::MIN}),
            serde_json::json!(["", [[]], {"a": {"b": "\u{0}\u{8}\u{c}\r/"}}]),
            // Long strings, counted a chunk at a time: escapes across chunk boundaries, and
            // a chunk of nothing but escapes.
            serde_json::json!([
                (0..1000).map(|i| if i % 97 == 0 { '\u{1}' } else { 'a' }).collect::<String>(),
                "\"".repeat(600),
                "ok".repeat(5000)
            ]),
        ];
        for v in values {
            assert_eq!(json_len(&v), serde_json::to_vec(&v).unwrap().len(), "{v}");
        }
    }
}
