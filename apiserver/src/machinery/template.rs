//! Per-cluster values of ManifestWorkReplicaSet templates: a ManifestWorkReplicaSet's template rendered for one cluster, then the
//! overrides whose selector matches that cluster patched in, in the order the spec lists them.
//!
//! The one syntax is `{{ .clusterName }}`, `{{ .labels["key"] }}` and `{{ .claims["name"] }}`
//! inside a JSON string of the template: each reference is replaced by the cluster's value as
//! text, so the result is always a string and never code (no expressions, no conditionals, no
//! nesting). `{{` that does not start one of these is an error, so a typo never ships as a
//! literal. Keys are checked as label keys; a cluster lacking a label or claim a reference names
//! cannot be rendered, and the error names the field and the cluster.

use std::collections::BTreeMap;

use ocm_proto::api::work::v1::ManifestWorkSpec;
use ocm_proto::api::work::v1alpha1::Override;
use ocm_proto::selector::LabelSelector;
use serde_json::Value;

/// What a template may refer to of one cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterValues {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub claims: BTreeMap<String, String>,
}

impl ClusterValues {
    /// A stored ManagedCluster's name, labels and `status.clusterClaims`.
    pub fn of(cluster: &Value) -> ClusterValues {
        let labels = cluster
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect();
        let claims = cluster
            .pointer("/status/clusterClaims")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let name = c.get("name")?.as_str()?;
                Some((name.to_owned(), c.get("value")?.as_str()?.to_owned()))
            })
            .collect();
        let name = crate::machinery::object::name(cluster).to_owned();
        ClusterValues { name, labels, claims }
    }
}

/// Why a template cannot be rendered: the field (a JSON path into the ManifestWorkReplicaSet)
/// and what is wrong, and the cluster when it is that cluster's values that are missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {detail}")]
pub struct RenderError {
    pub field: String,
    pub detail: String,
    pub cluster: Option<String>,
}

/// One reference in a string.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reference {
    ClusterName,
    Label(String),
    Claim(String),
}

/// A string of the template split into text and references.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Ref(Reference),
}

/// Splits `s` into its pieces, or says what is wrong with its first `{{`.
fn pieces(s: &str) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            out.push(Piece::Text(rest[..start].to_owned()));
        }
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| "`{{` is not closed by `}}`".to_owned())?;
        out.push(Piece::Ref(reference(after[..end].trim())?));
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest.to_owned()));
    }
    Ok(out)
}

/// Parses what stands between `{{` and `}}`.
fn reference(inner: &str) -> Result<Reference, String> {
    if inner == ".clusterName" {
        return Ok(Reference::ClusterName);
    }
    let keyed = |prefix: &str| -> Option<Result<String, String>> {
        let body = inner.strip_prefix(prefix)?.strip_prefix('[')?.strip_suffix(']')?;
        let key = body.trim().strip_prefix('"')?.strip_suffix('"')?;
        Some(match ocm_proto::selector::validate_key(key) {
            Ok(()) => Ok(key.to_owned()),
            Err(e) => Err(format!("{key:?} is not a valid key: {e}")),
        })
    };
    if let Some(key) = keyed(".labels") {
        return key.map(Reference::Label);
    }
    if let Some(key) = keyed(".claims") {
        return key.map(Reference::Claim);
    }
    Err(format!(
        "`{{{{ {inner} }}}}` is not a value this template can use \
         (`{{{{ .clusterName }}}}`, `{{{{ .labels[\"key\"] }}}}`, `{{{{ .claims[\"name\"] }}}}`)"
    ))
}

/// Checks every string of a template without a cluster: each `{{ … }}` must be a reference.
pub fn check_template(template: &Value, field: &str) -> Vec<RenderError> {
    let mut errors = Vec::new();
    walk(template, field, &mut |path, s| {
        if let Err(detail) = pieces(s) {
            errors.push(RenderError { field: path.to_owned(), detail, cluster: None });
        }
    });
    errors
}

/// Visits every string in `v` with its path.
fn walk(v: &Value, path: &str, visit: &mut impl FnMut(&str, &str)) {
    match v {
        Value::String(s) => visit(path, s),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{path}[{i}]"), visit);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                walk(item, &format!("{path}.{k}"), visit);
            }
        }
        _ => {}
    }
}

/// Replaces every reference in the strings of `v` with the cluster's value.
fn fill(v: &mut Value, path: &str, cluster: &ClusterValues) -> Result<(), RenderError> {
    match v {
        Value::String(s) if s.contains("{{") => {
            let fail = |detail: String| RenderError {
                field: path.to_owned(),
                detail,
                cluster: Some(cluster.name.clone()),
            };
            let mut out = String::with_capacity(s.len());
            for piece in pieces(s).map_err(fail)? {
                match piece {
                    Piece::Text(t) => out.push_str(&t),
                    Piece::Ref(r) => out.push_str(value_of(&r, cluster).map_err(fail)?),
                }
            }
            *s = out;
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                fill(item, &format!("{path}[{i}]"), cluster)?;
            }
        }
        Value::Object(map) => {
            for (k, item) in map.iter_mut() {
                fill(item, &format!("{path}.{k}"), cluster)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn value_of<'a>(r: &Reference, cluster: &'a ClusterValues) -> Result<&'a str, String> {
    match r {
        Reference::ClusterName => Ok(&cluster.name),
        Reference::Label(k) => cluster
            .labels
            .get(k)
            .map(String::as_str)
            .ok_or_else(|| format!("the cluster has no label {k:?}")),
        Reference::Claim(k) => cluster
            .claims
            .get(k)
            .map(String::as_str)
            .ok_or_else(|| format!("the cluster has no claim {k:?}")),
    }
}

/// The template's field path in the ManifestWorkReplicaSet.
pub const TEMPLATE_FIELD: &str = "spec.manifestWorkTemplate";

/// The ManifestWork spec cluster `cluster` gets: the template with its references filled in,
/// then each matching override applied in order (a later one wins).
pub fn render(
    template: &Value,
    overrides: &[Override],
    cluster: &ClusterValues,
) -> Result<Value, RenderError> {
    let mut spec = template.clone();
    fill(&mut spec, TEMPLATE_FIELD, cluster)?;
    for (i, o) in overrides.iter().enumerate() {
        let field = format!("spec.overrides[{i}]");
        if !selects(o, cluster).map_err(|detail| RenderError {
            field: format!("{field}.clusterSelector"),
            detail,
            cluster: None,
        })? {
            continue;
        }
        apply_override(&mut spec, o, &field, cluster)?;
    }
    // The result must still be a ManifestWork spec.
    serde_json::from_value::<ManifestWorkSpec>(spec.clone()).map_err(|e| RenderError {
        field: TEMPLATE_FIELD.to_owned(),
        detail: format!("the rendered spec is not a ManifestWork spec: {e}"),
        cluster: Some(cluster.name.clone()),
    })?;
    Ok(spec)
}

/// Whether an override's selector matches the cluster's labels (no selector: every cluster).
fn selects(o: &Override, cluster: &ClusterValues) -> Result<bool, String> {
    let Some(sel) = &o.cluster_selector else { return Ok(true) };
    let sel = LabelSelector::from_api(sel).map_err(|e| e.to_string())?;
    Ok(sel.matches(|k| cluster.labels.get(k).map(String::as_str)))
}

/// Applies one override's patch (paths relative to the ManifestWork spec); its strings may use
/// the same references as the template.
fn apply_override(
    spec: &mut Value,
    o: &Override,
    field: &str,
    cluster: &ClusterValues,
) -> Result<(), RenderError> {
    let fail = |detail: String| RenderError {
        field: field.to_owned(),
        detail,
        cluster: Some(cluster.name.clone()),
    };
    if let Some(merge) = &o.merge_patch {
        let mut merge = merge.clone();
        fill(&mut merge, &format!("{field}.mergePatch"), cluster)?;
        json_patch::merge(spec, &merge);
    }
    if let Some(ops) = &o.json_patch {
        let mut ops = Value::Array(ops.clone());
        fill(&mut ops, &format!("{field}.jsonPatch"), cluster)?;
        let patch: json_patch::Patch =
            serde_json::from_value(ops).map_err(|e| fail(format!("not a JSON patch: {e}")))?;
        json_patch::patch(spec, &patch).map_err(|e| fail(format!("the JSON patch fails: {e}")))?;
    }
    Ok(())
}

/// Checks an override without a cluster: its selector parses, its patch is a JSON patch, and
/// its strings' references are well-formed.
pub fn check_override(o: &Override, field: &str) -> Vec<RenderError> {
    let mut errors = Vec::new();
    let err = |f: String, detail: String| RenderError { field: f, detail, cluster: None };
    if let Some(sel) = &o.cluster_selector {
        if let Err(e) = LabelSelector::from_api(sel) {
            errors.push(err(format!("{field}.clusterSelector"), e.to_string()));
        }
    }
    match (&o.merge_patch, &o.json_patch) {
        (None, None) => errors.push(err(
            field.to_owned(),
            "an override needs a mergePatch or a jsonPatch".to_owned(),
        )),
        (Some(m), _) if !m.is_object() => errors
            .push(err(format!("{field}.mergePatch"), "a merge patch is a JSON object".to_owned())),
        _ => {}
    }
    if let Some(ops) = &o.json_patch {
        let value = Value::Array(ops.clone());
        if let Err(e) = serde_json::from_value::<json_patch::Patch>(value) {
            errors.push(err(format!("{field}.jsonPatch"), format!("not a JSON patch: {e}")));
        }
        errors.extend(check_template(&Value::Array(ops.clone()), &format!("{field}.jsonPatch")));
    }
    if let Some(m) = &o.merge_patch {
        errors.extend(check_template(m, &format!("{field}.mergePatch")));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster() -> ClusterValues {
        ClusterValues {
            name: "east-1".into(),
            labels: [("region".to_owned(), "east".to_owned())].into(),
            claims: [("id.k8s.io".to_owned(), "abc".to_owned())].into(),
        }
    }

    fn template(data: Value) -> Value {
        json!({"workload": {"manifests": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "cm", "namespace": "default"}, "data": data}
        ]}})
    }

    #[test]
    fn references_are_replaced_as_text() {
        let t = template(json!({
            "who": "{{ .clusterName }}",
            "where": "region={{.labels[\"region\"]}}, id={{ .claims[ \"id.k8s.io\" ] }}",
            "plain": "no braces",
        }));
        let out = render(&t, &[], &cluster()).unwrap();
        let data = &out["workload"]["manifests"][0]["data"];
        assert_eq!(data["who"], "east-1");
        assert_eq!(data["where"], "region=east, id=abc");
        assert_eq!(data["plain"], "no braces");
    }

    #[test]
    fn a_missing_value_names_the_field_and_the_cluster() {
        let t = template(json!({"x": "{{ .labels[\"tier\"] }}"}));
        let e = render(&t, &[], &cluster()).unwrap_err();
        assert_eq!(e.field, "spec.manifestWorkTemplate.workload.manifests[0].data.x");
        assert_eq!(e.cluster.as_deref(), Some("east-1"));
        assert!(e.detail.contains("tier"), "{e}");
    }

    #[test]
    fn anything_else_between_braces_is_refused_without_a_cluster() {
        for bad in ["{{ .Values.x }}", "{{ .labels[region] }}", "{{ .clusterName", "{{ }}"] {
            let errs = check_template(&template(json!({"x": bad})), TEMPLATE_FIELD);
            assert_eq!(errs.len(), 1, "{bad}");
            assert!(errs[0].field.ends_with("data.x"));
        }
        assert!(check_template(&template(json!({"x": "{{ .clusterName }}"})), "f").is_empty());
    }

    #[test]
    fn overrides_apply_in_order_to_matching_clusters_only() {
        let t = template(json!({"color": "blue"}));
        let ov = |sel: Value, patch: Value| -> Override {
            serde_json::from_value(json!({"clusterSelector": sel, "mergePatch": patch})).unwrap()
        };
        let overrides = vec![
            ov(
                json!({"matchLabels": {"region": "east"}}),
                json!({"workload": {"manifests": [
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "cm", "namespace": "default"},
                 "data": {"color": "red"}}]}}),
            ),
            serde_json::from_value(json!({"jsonPatch": [
                {"op": "replace", "path": "/workload/manifests/0/data/color",
                 "value": "green-{{ .clusterName }}"}]}))
            .unwrap(),
            ov(json!({"matchLabels": {"region": "west"}}), json!({"x": 1})),
        ];
        let out = render(&t, &overrides, &cluster()).unwrap();
        assert_eq!(out["workload"]["manifests"][0]["data"]["color"], "green-east-1");
        assert!(out.get("x").is_none());
        let first_only = render(&t, &overrides[..1], &cluster()).unwrap();
        assert_eq!(first_only["workload"]["manifests"][0]["data"]["color"], "red");
    }

    #[test]
    fn a_failing_json_patch_names_the_override() {
        let o: Override = serde_json::from_value(
            json!({"jsonPatch": [{"op": "remove", "path": "/nothing/here"}]}),
        )
        .unwrap();
        let e = render(&template(json!({})), &[o], &cluster()).unwrap_err();
        assert_eq!(e.field, "spec.overrides[0]");
        assert_eq!(e.cluster.as_deref(), Some("east-1"));
    }

    #[test]
    fn cluster_values_come_from_labels_and_claims() {
        let c = json!({"metadata": {"name": "c1", "labels": {"a": "b"}},
            "status": {"clusterClaims": [{"name": "id.k8s.io", "value": "x"}]}});
        let v = ClusterValues::of(&c);
        assert_eq!(v.name, "c1");
        assert_eq!(v.labels["a"], "b");
        assert_eq!(v.claims["id.k8s.io"], "x");
    }
}
