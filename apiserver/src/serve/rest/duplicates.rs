//! JSON bodies parsed with their duplicate fields noted, as kube-apiserver's strict decoder
//! notes them for `fieldValidation` (`duplicate field "data"`, `duplicate field
//! "spec.containers[0].name"`); the last value of a repeated key wins, as in Go.

use std::cell::RefCell;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parses `bytes` as JSON and returns the value and the paths of the keys that repeat within
/// one object, in the order met.
pub(super) fn parse(bytes: &[u8]) -> serde_json::Result<(Value, Vec<String>)> {
    let duplicates = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Node { at: None, duplicates: &duplicates }.deserialize(&mut de)?;
    de.end()?;
    Ok((value, duplicates.into_inner()))
}

/// Where a value sits: its parent's place and its own key or index. Rendered only when a
/// duplicate is met, so parsing allocates no paths otherwise.
struct Place<'p> {
    parent: Option<&'p Place<'p>>,
    step: Step<'p>,
}

enum Step<'p> {
    Key(&'p str),
    Index(usize),
}

impl Place<'_> {
    fn render(&self) -> String {
        let mut steps = Vec::new();
        let mut at = Some(self);
        while let Some(place) = at {
            steps.push(&place.step);
            at = place.parent;
        }
        let mut out = String::new();
        for step in steps.into_iter().rev() {
            match step {
                Step::Key(k) if out.is_empty() => out.push_str(k),
                Step::Key(k) => {
                    out.push('.');
                    out.push_str(k);
                }
                Step::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }
}

/// The value at one place, parsed into a `Value`.
struct Node<'p, 'd> {
    at: Option<&'p Place<'p>>,
    duplicates: &'d RefCell<Vec<String>>,
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let place = Place { parent: self.at, step: Step::Index(items.len()) };
            let node = Node { at: Some(&place), duplicates: self.duplicates };
            match seq.next_element_seed(node)? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            let place = Place { parent: self.at, step: Step::Key(&key) };
            let value =
                access.next_value_seed(Node { at: Some(&place), duplicates: self.duplicates })?;
            if map.contains_key(&key) {
                self.duplicates.borrow_mut().push(place.render());
            }
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repeated_keys_are_named_by_path_and_the_last_wins() {
        let body = br#"{"data": {"a": "1"}, "spec": {"containers": [{"name": "x", "name": "y"}]},
                        "data": {"a": "2", "a": "3"}}"#;
        let (value, dups) = parse(body).unwrap();
        assert_eq!(dups, ["spec.containers[0].name", "data.a", "data"]);
        assert_eq!(value, json!({"data": {"a": "3"}, "spec": {"containers": [{"name": "y"}]}}));
    }

    #[test]
    fn a_body_without_repeats_parses_as_serde_json_does() {
        let body = br#"{"a": [1, -2, 2.5, true, null, "s", {"b": {}}], "n": 18446744073709551615}"#;
        let (value, dups) = parse(body).unwrap();
        assert!(dups.is_empty());
        assert_eq!(value, serde_json::from_slice::<Value>(body).unwrap());
        assert!(parse(b"{\"a\": 1} x").is_err());
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(parse(deep.as_bytes()).is_err(), "serde_json's depth limit holds");
    }
}
