//! The metadata rules every kind shares: names, labels, annotations, finalizers; what counts
//! as the spec (a change there moves `generation`); copying a field by its dotted path.

use super::*;

/// Everything of an object but `metadata` and `status`: a change here bumps `generation`.
pub(super) fn spec_part(obj: &Value) -> Map<String, Value> {
    obj.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// Copies the value at a dotted `path` from `from` into `to` (removing it when `from` lacks it).
pub(super) fn copy_path(to: &mut Value, from: &Value, path: &str) {
    let steps: Vec<&str> = path.split('.').collect();
    let (last, parents) = steps.split_last().expect("paths are never empty");
    let source = object::at_path(from, path).cloned();
    let mut cur = to;
    for step in parents {
        if !cur.is_object() {
            if source.is_none() {
                return;
            }
            *cur = Value::Object(Map::new());
        }
        let map = cur.as_object_mut().expect("made an object above");
        if source.is_none() && !map.contains_key(*step) {
            return;
        }
        cur = map.entry(*step).or_insert_with(|| Value::Object(Map::new()));
    }
    if let Some(map) = cur.as_object_mut() {
        match source {
            Some(v) => {
                map.insert((*last).to_owned(), v);
            }
            None => {
                map.remove(*last);
            }
        }
    } else if let Some(v) = source {
        *cur = json!({ *last: v });
    }
}

/// Checks the metadata every kind shares: name, labels, annotations, finalizers.
pub(super) fn validate_meta(rt: &ResourceType, obj: &Value, errs: &mut Vec<FieldError>) {
    let name = object::name(obj);
    let check = match rt.strategy.name_rule() {
        NameRule::Subdomain => object::check_dns_subdomain(name),
        NameRule::Label => object::check_dns_label(name),
        NameRule::PathSegment => object::check_path_segment(name),
    };
    if let Err(msg) = check {
        errs.push(FieldError::invalid("metadata.name", name, msg));
    }
    let Some(meta) = object::meta(obj) else { return };
    for (field, kind) in [("labels", true), ("annotations", false)] {
        let Some(map) = meta.get(field) else { continue };
        let Some(map) = map.as_object() else {
            errs.push(FieldError::new(
                ocm_proto::validation::FieldErrorKind::TypeInvalid,
                format!("metadata.{field}"),
                Some(map.clone()),
                "must be a map of strings",
            ));
            continue;
        };
        let mut total = 0;
        for (k, v) in map {
            if let Err(e) = ocm_proto::selector::validate_key(k) {
                errs.push(FieldError::invalid(format!("metadata.{field}"), k.as_str(), e.reason));
            }
            match v.as_str() {
                Some(s) if kind => {
                    if let Err(e) = ocm_proto::selector::validate_value(s) {
                        errs.push(FieldError::invalid(format!("metadata.{field}"), s, e.reason));
                    }
                }
                Some(s) => total += k.len() + s.len(),
                None => errs.push(FieldError::invalid(
                    format!("metadata.{field}[{k}]"),
                    v.clone(),
                    "must be a string",
                )),
            }
        }
        if total > 256 * 1024 {
            errs.push(FieldError::new(
                ocm_proto::validation::FieldErrorKind::TooLong,
                "metadata.annotations",
                None,
                "may not have more than 262144 bytes",
            ));
        }
    }
    if let Some(list) = meta.get("finalizers") {
        match list.as_array() {
            Some(items) => {
                for (i, f) in items.iter().enumerate() {
                    let ok =
                        f.as_str().is_some_and(|s| ocm_proto::selector::validate_key(s).is_ok());
                    if !ok {
                        errs.push(FieldError::invalid(
                            format!("metadata.finalizers[{i}]"),
                            f.clone(),
                            "must be a qualified name",
                        ));
                    }
                }
            }
            None => errs.push(FieldError::invalid(
                "metadata.finalizers",
                list.clone(),
                "must be a list",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_path_sets_and_removes() {
        let mut to = json!({"status": {"a": 1}, "spec": {"x": 1}});
        copy_path(&mut to, &json!({"spec": {"x": 2}}), "status");
        assert_eq!(to, json!({"spec": {"x": 1}}));
        copy_path(&mut to, &json!({"status": {"conditions": [1]}}), "status.conditions");
        assert_eq!(to["status"]["conditions"], json!([1]));
    }
}
