//! Schema fidelity (design.md §5 "Schemas"): OCM objects checked against the real OCM CRD schemas
//! (`ocm_proto::crd`, copied from `../shared/ocm-crds/`), and the published OpenAPI schemas
//! compared with those CRD schemas, difference by difference, against the explained-differences
//! file `conformance/schema-differences.yaml`.
//!
//! * [`check_against_crd`] / [`assert_matches_crd`]: an object the hub returned validates against
//!   its kind's CRD schema at its version, and carries no field the CRD does not declare.
//! * [`compare`]: every property path, type (with `x-kubernetes-int-or-string`), format, enum
//!   value, required property and structural extension of a CRD schema, looked up in a
//!   published schema (following `$ref`s and `allOf`), as a list of [`Difference`]s.
//! * [`Explained`]: the differences file, and the check that it lists exactly the differences
//!   found (no unexplained difference, no stale entry).

use std::collections::BTreeSet;
use std::fmt;

use anyhow::{Context as _, bail};
use ocm_proto::crd;
use serde::Deserialize;
use serde_json::{Map, Value};

/// Why `obj` (an OCM object as the API returned it) does not match its CRD: schema violations
/// and fields the CRD does not declare (which the server would have pruned). Empty when it
/// matches. Errors when `obj` is not an OCM kind at a version the CRDs define.
pub fn check_against_crd(obj: &Value) -> anyhow::Result<Vec<String>> {
    let api_version = obj["apiVersion"].as_str().context("object without apiVersion")?;
    let kind = obj["kind"].as_str().context("object without kind")?;
    let (group, version) = api_version.split_once('/').context("apiVersion without group")?;
    let crd = crd::find_kind(group, kind).with_context(|| format!("no CRD for {kind}.{group}"))?;
    let schema =
        &crd.version(version).with_context(|| format!("{kind}: no CRD version {version}"))?.schema;
    let mut problems: Vec<String> = schema.validate(obj).iter().map(ToString::to_string).collect();
    let mut pruned = obj.clone();
    problems.extend(
        schema
            .prune(&mut pruned)
            .into_iter()
            .map(|p| format!("{p}: field not declared by the CRD")),
    );
    Ok(problems)
}

/// Fails, naming the object and every problem, unless `obj` matches its CRD
/// ([`check_against_crd`]). For suites to call on OCM objects they read back.
pub fn assert_matches_crd(obj: &Value) -> anyhow::Result<()> {
    let problems = check_against_crd(obj)?;
    if !problems.is_empty() {
        bail!(
            "{} {}/{} does not match its CRD schema:\n  {}\nobject: {obj}",
            obj["kind"].as_str().unwrap_or("?"),
            obj["metadata"]["namespace"].as_str().unwrap_or(""),
            obj["metadata"]["name"].as_str().unwrap_or("?"),
            problems.join("\n  ")
        );
    }
    Ok(())
}

/// [`assert_matches_crd`] for every item of a list the API returned.
pub fn assert_items_match_crd(list: &Value) -> anyhow::Result<()> {
    let items = list["items"].as_array().context("list without items")?;
    let api_version = &list["apiVersion"];
    let kind = list["kind"].as_str().and_then(|k| k.strip_suffix("List")).context("list kind")?;
    for item in items {
        // Items of a list may leave out apiVersion/kind; they are the list's.
        let mut item = item.clone();
        item["apiVersion"] = api_version.clone();
        item["kind"] = Value::String(kind.to_owned());
        assert_matches_crd(&item)?;
    }
    Ok(())
}

/// What can differ at one schema node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Differs {
    /// The CRD declares a property ours does not have.
    MissingProperty,
    /// `type` differs.
    Type,
    /// `x-kubernetes-int-or-string` differs.
    IntOrString,
    /// `format` differs.
    Format,
    /// An `enum` value of the CRD is not in ours.
    Enum,
    /// `x-kubernetes-preserve-unknown-fields` differs.
    PreserveUnknownFields,
    /// `x-kubernetes-embedded-resource` differs.
    EmbeddedResource,
    /// `x-kubernetes-list-type` differs.
    ListType,
    /// `x-kubernetes-list-map-keys` differs.
    ListMapKeys,
    /// `x-kubernetes-map-type` differs.
    MapType,
    /// The `required` properties differ.
    Required,
}

impl Differs {
    fn as_str(self) -> &'static str {
        match self {
            Differs::MissingProperty => "missing-property",
            Differs::Type => "type",
            Differs::IntOrString => "int-or-string",
            Differs::Format => "format",
            Differs::Enum => "enum",
            Differs::PreserveUnknownFields => "preserve-unknown-fields",
            Differs::EmbeddedResource => "embedded-resource",
            Differs::ListType => "list-type",
            Differs::ListMapKeys => "list-map-keys",
            Differs::MapType => "map-type",
            Differs::Required => "required",
        }
    }
}

/// One difference between a CRD schema and a published schema.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Difference {
    /// Kind, e.g. `ManagedCluster`.
    pub kind: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Property path: `spec.taints[].effect`, map values as `status.capacity{}`.
    pub path: String,
    /// What differs.
    pub differs: Differs,
    /// The CRD's value and ours.
    pub detail: String,
}

impl Difference {
    fn key(&self) -> (&str, &str, &str, Differs) {
        (&self.kind, &self.version, &self.path, self.differs)
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {}: {} ({})",
            self.kind,
            self.version,
            if self.path.is_empty() { "<root>" } else { &self.path },
            self.differs.as_str(),
            self.detail
        )
    }
}

/// One published schema node with its `$ref`s followed and its `allOf` members merged (the
/// first member that says something wins, the node's own keys first).
#[derive(Default)]
struct Resolved {
    keys: Map<String, Value>,
    properties: Map<String, Value>,
    required: BTreeSet<String>,
}

fn resolve(doc: &Value, node: &Value, out: &mut Resolved, depth: usize) {
    if depth > 32 {
        return;
    }
    let Some(obj) = node.as_object() else { return };
    for (k, v) in obj {
        match k.as_str() {
            "properties" => {
                for (name, schema) in v.as_object().into_iter().flatten() {
                    out.properties.entry(name.clone()).or_insert_with(|| schema.clone());
                }
            }
            "required" => {
                let names = v.as_array().into_iter().flatten().filter_map(Value::as_str);
                out.required.extend(names.map(str::to_owned));
            }
            "$ref" | "allOf" => {}
            _ => {
                out.keys.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    if let Some(target) = obj.get("$ref").and_then(Value::as_str) {
        let name = target.strip_prefix("#/components/schemas/").unwrap_or(target);
        if let Some(s) = doc["components"]["schemas"].get(name) {
            resolve(doc, s, out, depth + 1);
        }
    }
    for member in obj.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        resolve(doc, member, out, depth + 1);
    }
}

/// Compares the CRD schema `crd` with the published schema `ours` (a node of `doc`, the
/// group-version document it lives in) for `kind` at `version`.
pub fn compare(
    kind: &str,
    version: &str,
    crd: &Value,
    doc: &Value,
    ours: &Value,
) -> Vec<Difference> {
    let mut out = Vec::new();
    let mut cx = Walk { kind, version, doc, out: &mut out };
    cx.node(crd, ours, String::new());
    out.sort();
    out
}

struct Walk<'a> {
    kind: &'a str,
    version: &'a str,
    doc: &'a Value,
    out: &'a mut Vec<Difference>,
}

fn flag(keys: &Map<String, Value>, key: &str) -> bool {
    keys.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn show(v: Option<&Value>) -> String {
    v.map_or_else(|| "none".to_owned(), ToString::to_string)
}

impl Walk<'_> {
    fn differ(&mut self, path: &str, differs: Differs, detail: String) {
        self.out.push(Difference {
            kind: self.kind.to_owned(),
            version: self.version.to_owned(),
            path: path.to_owned(),
            differs,
            detail,
        });
    }

    fn node(&mut self, crd: &Value, ours: &Value, path: String) {
        let mut resolved = Resolved::default();
        resolve(self.doc, ours, &mut resolved, 0);
        let ours = &resolved.keys;
        let Some(theirs) = crd.as_object() else { return };
        let int_or_string = flag(theirs, "x-kubernetes-int-or-string");
        if int_or_string != flag(ours, "x-kubernetes-int-or-string") {
            self.differ(
                &path,
                Differs::IntOrString,
                format!("CRD {int_or_string}, ours {}", !int_or_string),
            );
        } else if theirs.get("type") != ours.get("type") && !int_or_string {
            // An int-or-string has no type (or ours may say string): checked above.
            self.differ(
                &path,
                Differs::Type,
                format!("CRD {}, ours {}", show(theirs.get("type")), show(ours.get("type"))),
            );
        }
        if let Some(format) = theirs.get("format") {
            if ours.get("format") != Some(format) {
                self.differ(
                    &path,
                    Differs::Format,
                    format!("CRD {format}, ours {}", show(ours.get("format"))),
                );
            }
        }
        if let Some(values) = theirs.get("enum").and_then(Value::as_array) {
            let ours_values = ours.get("enum").and_then(Value::as_array);
            let missing: Vec<&Value> =
                values.iter().filter(|v| !ours_values.is_some_and(|o| o.contains(v))).collect();
            if !missing.is_empty() {
                let missing: Vec<String> = missing.iter().map(ToString::to_string).collect();
                self.differ(
                    &path,
                    Differs::Enum,
                    format!(
                        "CRD values {} not in ours ({})",
                        missing.join(", "),
                        show(ours.get("enum"))
                    ),
                );
            }
        }
        for (key, differs) in [
            ("x-kubernetes-preserve-unknown-fields", Differs::PreserveUnknownFields),
            ("x-kubernetes-embedded-resource", Differs::EmbeddedResource),
        ] {
            if flag(theirs, key) != flag(ours, key) {
                self.differ(
                    &path,
                    differs,
                    format!("CRD {}, ours {}", flag(theirs, key), flag(ours, key)),
                );
            }
        }
        for (key, differs) in [
            ("x-kubernetes-list-type", Differs::ListType),
            ("x-kubernetes-list-map-keys", Differs::ListMapKeys),
            ("x-kubernetes-map-type", Differs::MapType),
        ] {
            if let Some(value) = theirs.get(key) {
                if ours.get(key) != Some(value) {
                    self.differ(
                        &path,
                        differs,
                        format!("CRD {value}, ours {}", show(ours.get(key))),
                    );
                }
            }
        }
        if theirs.contains_key("properties") {
            let required: BTreeSet<String> = theirs
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            // One difference per property, so an explanation covers that property only.
            for name in required.symmetric_difference(&resolved.required) {
                let detail = if required.contains(name) {
                    "required by the CRD, optional in ours"
                } else {
                    "optional in the CRD, required in ours"
                };
                let at = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
                self.differ(&at, Differs::Required, detail.into());
            }
        }
        let child =
            |name: &str| if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") };
        for (name, schema) in
            theirs.get("properties").and_then(Value::as_object).into_iter().flatten()
        {
            // `metadata` is ObjectMeta in both (the CRD only says `type: object`).
            if path.is_empty() && name == "metadata" {
                continue;
            }
            match resolved.properties.get(name) {
                Some(o) => self.node(schema, o, child(name)),
                None => self.differ(&child(name), Differs::MissingProperty, "not in ours".into()),
            }
        }
        if let Some(items) = theirs.get("items") {
            let o = ours.get("items").cloned().unwrap_or(Value::Null);
            self.node(items, &o, format!("{path}[]"));
        }
        if let Some(values) = theirs.get("additionalProperties").filter(|v| v.is_object()) {
            let o = ours.get("additionalProperties").cloned().unwrap_or(Value::Null);
            self.node(values, &o, format!("{path}{{}}"));
        }
    }
}

/// One explained difference, as the differences file writes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Explanation {
    /// Kind.
    pub kind: String,
    /// Version.
    pub version: String,
    /// Property path (as [`Difference::path`]).
    pub path: String,
    /// What differs.
    pub differs: Differs,
    /// Why the difference is acceptable.
    pub reason: String,
}

/// The explained-differences file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Explained {
    /// The entries.
    pub differences: Vec<Explanation>,
}

/// Where the differences file lives.
pub const DIFFERENCES_FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/schema-differences.yaml");

impl Explained {
    /// Reads [`DIFFERENCES_FILE`].
    pub fn load() -> anyhow::Result<Explained> {
        let text = std::fs::read_to_string(DIFFERENCES_FILE)
            .with_context(|| format!("reading {DIFFERENCES_FILE}"))?;
        let explained: Explained =
            serde_saphyr::from_str(&text).with_context(|| format!("parsing {DIFFERENCES_FILE}"))?;
        for e in &explained.differences {
            anyhow::ensure!(
                !e.reason.trim().is_empty(),
                "{DIFFERENCES_FILE}: entry without a reason: {e:?}"
            );
        }
        Ok(explained)
    }

    /// Fails, listing them, when a difference found is not explained or an entry explains no
    /// difference found (so the file cannot go stale).
    pub fn check(&self, found: &[Difference]) -> anyhow::Result<()> {
        let listed: BTreeSet<(&str, &str, &str, Differs)> = self
            .differences
            .iter()
            .map(|e| (e.kind.as_str(), e.version.as_str(), e.path.as_str(), e.differs))
            .collect();
        let found_keys: BTreeSet<_> = found.iter().map(Difference::key).collect();
        let unexplained: Vec<String> =
            found.iter().filter(|d| !listed.contains(&d.key())).map(ToString::to_string).collect();
        let stale: Vec<String> = self
            .differences
            .iter()
            .filter(|e| {
                !found_keys.contains(&(
                    e.kind.as_str(),
                    e.version.as_str(),
                    e.path.as_str(),
                    e.differs,
                ))
            })
            .map(|e| format!("{} {} {}: {}", e.kind, e.version, e.path, e.differs.as_str()))
            .collect();
        let mut report = String::new();
        if !unexplained.is_empty() {
            report.push_str(&format!(
                "{} difference(s) between the CRD schemas and our OpenAPI are not explained in {DIFFERENCES_FILE}:\n  {}\n",
                unexplained.len(),
                unexplained.join("\n  ")
            ));
        }
        if !stale.is_empty() {
            report.push_str(&format!(
                "{} entr(y/ies) of {DIFFERENCES_FILE} match no difference any more (remove them):\n  {}\n",
                stale.len(),
                stale.join("\n  ")
            ));
        }
        if !report.is_empty() {
            bail!("{report}");
        }
        Ok(())
    }
}
