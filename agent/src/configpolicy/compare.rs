//! How an object template compares with a live object and what enforcing it writes
//! (config-policy-controller's semantics, ocm-wave2.md §3.5): `musthave` asks that what the
//! template lists be a subset of the object (maps key by key, each listed item of a list present
//! in the live list), `mustonlyhave` that the object have exactly the template's values for the
//! keys the template names. Labels and annotations follow `metadataComplianceType`.

use serde_json::{Map, Value};

/// How an object template compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compliance {
    MustHave,
    MustOnlyHave,
    MustNotHave,
}

impl Compliance {
    /// `complianceType` in any of its spellings.
    pub fn parse(s: &str) -> Option<Compliance> {
        match s.to_ascii_lowercase().as_str() {
            "musthave" => Some(Compliance::MustHave),
            "mustonlyhave" => Some(Compliance::MustOnlyHave),
            "mustnothave" => Some(Compliance::MustNotHave),
            _ => None,
        }
    }
}

/// Keys of an object the comparison never looks at: identity and what the server owns.
const SKIPPED: &[&str] = &["apiVersion", "kind", "metadata", "status"];

/// Whether `live` holds `want`: with `only`, exactly (same keys, same list length); without,
/// as a subset (maps key by key, each wanted list item matched by some live item).
pub fn holds(live: &Value, want: &Value, only: bool) -> bool {
    match (live, want) {
        (Value::Object(l), Value::Object(w)) => {
            (!only || l.len() == w.len())
                && w.iter().all(|(k, wv)| l.get(k).is_some_and(|lv| holds(lv, wv, only)))
        }
        (Value::Array(l), Value::Array(w)) if only => {
            l.len() == w.len() && l.iter().zip(w).all(|(lv, wv)| holds(lv, wv, true))
        }
        (Value::Array(l), Value::Array(w)) => {
            w.iter().all(|wv| l.iter().any(|lv| holds(lv, wv, false)))
        }
        (l, w) => l == w,
    }
}

/// Whether the live object `live` matches the template `want` under `content` (the body) and
/// `meta` (labels and annotations).
pub fn matches(live: &Value, want: &Value, content: Compliance, meta: Compliance) -> bool {
    let only = content == Compliance::MustOnlyHave;
    let body = want
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !SKIPPED.contains(&k.as_str()))
        .all(|(k, wv)| live.get(k).is_some_and(|lv| holds(lv, wv, only)));
    let meta_only = meta == Compliance::MustOnlyHave;
    let metadata = ["labels", "annotations"].iter().all(|part| match want["metadata"].get(*part) {
        None => true,
        Some(wv) => {
            let lv = live["metadata"].get(*part).cloned().unwrap_or(Value::Object(Map::new()));
            holds(&lv, wv, meta_only)
        }
    });
    body && metadata
}

/// `live` brought to `want` as enforce writes it: under `musthave` the template merged in
/// (maps key by key, missing list items appended), under `mustonlyhave` the template's values
/// replacing the object's for the keys it names. Server-owned fields are left out.
pub fn enforced(live: &Value, want: &Value, content: Compliance, meta: Compliance) -> Value {
    let mut out = live.clone();
    if let Some(obj) = out.as_object_mut() {
        obj.remove("status");
    }
    if let Some(m) = out["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
    for (k, wv) in want.as_object().into_iter().flatten() {
        if SKIPPED.contains(&k.as_str()) {
            continue;
        }
        out[k] = bring(&live[k], wv, content == Compliance::MustOnlyHave);
    }
    for part in ["labels", "annotations"] {
        if let Some(wv) = want["metadata"].get(part) {
            let lv = live["metadata"].get(part).cloned().unwrap_or(Value::Null);
            out["metadata"][part] = bring(&lv, wv, meta == Compliance::MustOnlyHave);
        }
    }
    out
}

/// One value brought to `want`.
fn bring(live: &Value, want: &Value, only: bool) -> Value {
    if only {
        return want.clone();
    }
    match (live, want) {
        (Value::Object(l), Value::Object(w)) => {
            let mut out = l.clone();
            for (k, wv) in w {
                let merged = bring(l.get(k).unwrap_or(&Value::Null), wv, false);
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(w)) => {
            let mut out = l.clone();
            for wv in w {
                if !l.iter().any(|lv| holds(lv, wv, false)) {
                    out.push(wv.clone());
                }
            }
            Value::Array(out)
        }
        (_, w) => w.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "data": data})
    }

    #[test]
    fn musthave_is_a_subset_and_mustonlyhave_exact() {
        let live = cm(json!({"a": "1", "b": "2"}));
        let want = cm(json!({"a": "1"}));
        let (have, only) = (Compliance::MustHave, Compliance::MustOnlyHave);
        assert!(matches(&live, &want, have, have));
        assert!(!matches(&live, &want, only, have));
        assert!(!matches(&live, &cm(json!({"a": "2"})), have, have));
        let fixed = enforced(&live, &want, only, have);
        assert_eq!(fixed["data"], json!({"a": "1"}));
        assert!(matches(&fixed, &want, only, have));
        let merged = enforced(&live, &cm(json!({"c": "3"})), have, have);
        assert_eq!(merged["data"], json!({"a": "1", "b": "2", "c": "3"}));
    }

    #[test]
    fn lists_match_item_by_item() {
        let live = json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443}]}});
        assert!(holds(&live["spec"], &json!({"ports": [{"port": 443}]}), false));
        assert!(!holds(&live["spec"], &json!({"ports": [{"port": 443}]}), true));
        let merged = bring(&live["spec"], &json!({"ports": [{"port": 8080}]}), false);
        assert_eq!(merged["ports"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn labels_follow_the_metadata_compliance() {
        let live = cm(json!({}));
        let mut want = cm(json!({}));
        want["metadata"]["labels"] = json!({"x": "1"});
        assert!(matches(&live, &want, Compliance::MustHave, Compliance::MustHave));
        assert!(!matches(&live, &want, Compliance::MustHave, Compliance::MustOnlyHave));
        assert_eq!(Compliance::parse("Mustonlyhave"), Some(Compliance::MustOnlyHave));
    }
}
