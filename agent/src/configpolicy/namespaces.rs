//! The namespaces a ConfigurationPolicy's `namespaceSelector` selects (config-policy's
//! `Target`, ocm-wave2.md §3.5): labels as a label selector, `include` and `exclude` as globs
//! (`*` for any run of characters); a selector with neither labels nor `include` selects
//! nothing, labels without `include` include every namespace. Sorted.

use ocm_proto::api::meta::LabelSelector;
use ocm_proto::api::policy::v1::Target;
use ocm_proto::selector::LabelSelector as Selector;
use serde_json::Value;

use crate::status::wildcard;

/// Why a selector selects nothing useful.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadSelector(pub String);

/// The names of `namespaces` (live Namespace objects) `target` selects.
pub fn selected(target: &Target, namespaces: &[Value]) -> Result<Vec<String>, BadSelector> {
    let labelled = target.match_labels.as_ref().is_some_and(|m| !m.is_empty())
        || !target.match_expressions.is_empty();
    if !labelled && target.include.is_empty() {
        return Ok(Vec::new());
    }
    let selector = Selector::from_api(&LabelSelector {
        match_labels: target.match_labels.clone(),
        match_expressions: Some(target.match_expressions.clone()),
    })
    .map_err(|e| BadSelector(e.to_string()))?;
    let include: Vec<&str> = if target.include.is_empty() {
        vec!["*"]
    } else {
        target.include.iter().map(String::as_str).collect()
    };
    let mut out: Vec<String> = namespaces
        .iter()
        .filter(|ns| {
            let name = ns.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
            let labels = ns.pointer("/metadata/labels");
            include.iter().any(|p| wildcard(name, p))
                && !target.exclude.iter().any(|p| wildcard(name, p))
                && selector.matches(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
        })
        .filter_map(|ns| ns.pointer("/metadata/name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ns(name: &str, labels: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels}})
    }

    #[test]
    fn include_exclude_and_labels() {
        let all = [
            ns("default", json!({})),
            ns("team-a", json!({"env": "prod"})),
            ns("team-b", json!({"env": "dev"})),
            ns("kube-system", json!({})),
        ];
        let t = |v: Value| serde_json::from_value::<Target>(v).unwrap();
        assert_eq!(selected(&t(json!({})), &all).unwrap(), Vec::<String>::new());
        assert_eq!(
            selected(&t(json!({"include": ["*"], "exclude": ["kube-*"]})), &all).unwrap(),
            ["default", "team-a", "team-b"]
        );
        assert_eq!(
            selected(&t(json!({"matchLabels": {"env": "prod"}})), &all).unwrap(),
            ["team-a"]
        );
        assert_eq!(
            selected(
                &t(json!({"include": ["team-*"], "matchExpressions":
                [{"key": "env", "operator": "NotIn", "values": ["prod"]}]})),
                &all
            )
            .unwrap(),
            ["team-b"]
        );
    }
}
