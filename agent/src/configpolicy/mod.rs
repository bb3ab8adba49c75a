//! A ConfigurationPolicy evaluated, and with `enforce` made so, on the agent's own cluster
//! with the agent's own rights (config-policy-controller's semantics, ocm-wave2.md §3.5): each
//! object template's objects are found by name (or, unnamed, by listing and matching) in the
//! namespaces it names or its `namespaceSelector` selects, compared (`compare.rs`), created,
//! updated or deleted under `enforce`, and reported with OCM's reasons and messages
//! (`message.rs`) and related objects. Nothing in the template decides whose rights are used.

pub mod compare;
pub mod message;
pub mod namespaces;

use ocm_proto::api::policy::v1::{
    ConfigurationPolicySpec, ObjectMetadata, ObjectProperties, ObjectResource, ObjectTemplate,
    RelatedObject,
};
use ocm_proto::api::policy::{COMPLIANT, NON_COMPLIANT};
use serde_json::{Value, json};

use crate::cluster::{Applied, Cluster, Strategy};
use crate::error::AgentError;
use compare::Compliance;
use message::{Outcome, Seen};

/// One object template's result.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateResult {
    pub compliant: bool,
    /// OCM's condition reason.
    pub reason: String,
    /// OCM's message.
    pub message: String,
}

/// A ConfigurationPolicy's evaluation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    pub templates: Vec<TemplateResult>,
    pub related: Vec<RelatedObject>,
    /// What this evaluation created (for `pruneObjectBehavior: DeleteIfCreated`).
    pub created: Vec<Applied>,
    /// The named objects the `musthave`/`mustonlyhave` templates keep that exist now (for
    /// `pruneObjectBehavior: DeleteAll`).
    pub managed: Vec<Applied>,
}

impl Evaluation {
    /// Compliant when every object template is.
    pub fn compliant(&self) -> bool {
        self.templates.iter().all(|t| t.compliant)
    }

    /// `Compliant` or `NonCompliant`.
    pub fn state(&self) -> &'static str {
        if self.compliant() { COMPLIANT } else { NON_COMPLIANT }
    }

    /// The compliance message OCM's event carries: `<State>; <type> - <message>[; ...]`.
    pub fn message(&self) -> String {
        let mut out = self.state().to_owned();
        for t in &self.templates {
            let kind = if t.compliant { "notification" } else { "violation" };
            out.push_str(&format!("; {kind} - {}", t.message));
        }
        out
    }
}

/// A template that could not be evaluated.
fn invalid(reason: &str, message: String) -> TemplateResult {
    TemplateResult { compliant: false, reason: reason.to_owned(), message }
}

/// Evaluates `spec` on `cluster`, enforcing when `enforce`.
pub async fn evaluate(
    cluster: &dyn Cluster,
    spec: &ConfigurationPolicySpec,
    enforce: bool,
) -> Evaluation {
    let mut out = Evaluation::default();
    for t in &spec.object_templates {
        let result = match one_template(cluster, spec, t, enforce, &mut out).await {
            Ok(r) => r,
            Err(e) => invalid("K8s error", e.to_string()),
        };
        out.templates.push(result);
    }
    out
}

/// Evaluates one object template, adding its related objects and creations to `out`.
async fn one_template(
    cluster: &dyn Cluster,
    spec: &ConfigurationPolicySpec,
    t: &ObjectTemplate,
    enforce: bool,
    out: &mut Evaluation,
) -> Result<TemplateResult, AgentError> {
    let Some(content) = Compliance::parse(&t.compliance_type) else {
        return Ok(invalid("K8s error", format!("invalid complianceType {:?}", t.compliance_type)));
    };
    let meta = t.metadata_compliance_type.as_deref().and_then(Compliance::parse).unwrap_or(
        if content == Compliance::MustOnlyHave { content } else { Compliance::MustHave },
    );
    let def = &t.object_definition.0;
    let kind = def.get("kind").and_then(Value::as_str).unwrap_or("").to_owned();
    let name = def.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_owned();
    let resolved = match cluster.resolve(def).await {
        Ok(r) => r,
        Err(_) => {
            return Ok(invalid(
                "K8s error",
                format!(
                    "couldn't find mapping resource with kind {kind}, please check if you have CRD deployed"
                ),
            ));
        }
    };
    let namespaced = resolved.namespace.is_some();
    let namespaces = match def.pointer("/metadata/namespace").and_then(Value::as_str) {
        _ if !namespaced => vec![String::new()],
        Some(ns) if !ns.is_empty() => vec![ns.to_owned()],
        _ => {
            let all = cluster.list(&json!({"apiVersion": "v1", "kind": "Namespace"})).await?;
            let target = spec.namespace_selector.clone().unwrap_or_default();
            namespaces::selected(&target, &all).map_err(|e| AgentError::Invalid(e.0))?
        }
    };
    if namespaces.is_empty() {
        return Ok(invalid(
            "K8s missing namespace",
            format!(
                "namespaced object {name} of kind {kind} has no namespace specified from the policy namespaceSelector nor the object metadata"
            ),
        ));
    }
    let mut seen = Vec::new();
    for ns in &namespaces {
        let mut obj = def.clone();
        if !ns.is_empty() {
            obj["metadata"]["namespace"] = json!(ns);
        }
        let found = if name.is_empty() {
            unnamed(cluster, &obj, content, meta, enforce).await?
        } else {
            vec![named(cluster, &obj, content, meta, enforce).await?]
        };
        for f in found {
            out.related.push(related(def, &f.seen, f.uid.clone(), f.created));
            if let Some(mut kept) = f.kept {
                kept.uid = f.uid;
                if f.created {
                    out.created.push(kept.clone());
                }
                out.managed.push(kept);
            }
            seen.push(f.seen);
        }
    }
    let compliant = seen.iter().all(|s| s.outcome.compliant());
    let reason = seen
        .iter()
        .find(|s| s.outcome.compliant() == compliant)
        .map(|s| s.outcome.reason())
        .unwrap_or_default();
    Ok(TemplateResult {
        compliant,
        reason: reason.to_owned(),
        message: message::message(&resolved.resource, &seen),
    })
}

/// What one object came to: its outcome, its uid, whether enforce created it, and (a named
/// object a template keeps, now there) what names it on the cluster.
struct Found {
    seen: Seen,
    uid: Option<String>,
    created: bool,
    kept: Option<Applied>,
}

impl Found {
    fn of(outcome: Outcome, obj: &Value, uid: Option<String>) -> Found {
        Found { seen: seen(outcome, obj), uid, created: false, kept: None }
    }
}

fn seen(outcome: Outcome, obj: &Value) -> Seen {
    let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("").to_owned();
    Seen { outcome, name: text("/metadata/name"), namespace: text("/metadata/namespace") }
}

fn uid_of(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_owned)
}

/// A named object: found, compared, and under enforce created, updated or deleted.
async fn named(
    cluster: &dyn Cluster,
    obj: &Value,
    content: Compliance,
    meta: Compliance,
    enforce: bool,
) -> Result<Found, AgentError> {
    let live = cluster.get(obj).await?;
    let mut found = match (content, live) {
        (Compliance::MustNotHave, None) => Found::of(Outcome::Absent, obj, None),
        (Compliance::MustNotHave, Some(live)) if enforce => {
            let mut target = cluster.resolve(obj).await?;
            target.uid = uid_of(&live);
            cluster.delete(&target).await?;
            Found::of(Outcome::Deleted, obj, None)
        }
        (Compliance::MustNotHave, Some(live)) => Found::of(Outcome::Present, obj, uid_of(&live)),
        (_, None) if enforce => {
            let (_, live) = cluster.apply(obj, None, &Strategy::CreateOnly).await?;
            let mut f = Found::of(Outcome::Created, obj, uid_of(&live));
            f.created = true;
            f
        }
        (_, None) => Found::of(Outcome::Missing, obj, None),
        (_, Some(live)) if compare::matches(&live, obj, content, meta) => {
            Found::of(Outcome::Matches, obj, uid_of(&live))
        }
        (_, Some(live)) if enforce => {
            let fixed = compare::enforced(&live, obj, content, meta);
            let (_, written) = cluster.apply(&fixed, None, &Strategy::Replace).await?;
            Found::of(Outcome::Updated, obj, uid_of(&written))
        }
        (_, Some(live)) => Found::of(Outcome::Mismatch, obj, uid_of(&live)),
    };
    if content != Compliance::MustNotHave && found.uid.is_some() {
        found.kept = Some(cluster.resolve(obj).await?);
    }
    Ok(found)
}

/// An unnamed object template: the live objects of its kind in the namespace that match it.
async fn unnamed(
    cluster: &dyn Cluster,
    obj: &Value,
    content: Compliance,
    meta: Compliance,
    enforce: bool,
) -> Result<Vec<Found>, AgentError> {
    let live = cluster.list(obj).await?;
    let matching: Vec<&Value> =
        live.iter().filter(|l| compare::matches(l, obj, content, meta)).collect();
    let mut out = Vec::new();
    if matching.is_empty() {
        let outcome =
            if content == Compliance::MustNotHave { Outcome::Absent } else { Outcome::Missing };
        out.push(Found::of(outcome, obj, None));
    }
    for l in matching {
        let outcome = match content {
            Compliance::MustNotHave if enforce => {
                let mut target = cluster.resolve(l).await?;
                target.uid = uid_of(l);
                cluster.delete(&target).await?;
                Outcome::Deleted
            }
            Compliance::MustNotHave => Outcome::Present,
            _ => Outcome::Matches,
        };
        out.push(Found::of(outcome, l, uid_of(l)));
    }
    Ok(out)
}

/// A `relatedObjects[]` entry (`-` for the name of an object the template names none of).
fn related(def: &Value, s: &Seen, uid: Option<String>, created: bool) -> RelatedObject {
    let text = |p: &str| def.pointer(p).and_then(Value::as_str).map(str::to_owned);
    let name = if s.name.is_empty() { "-".to_owned() } else { s.name.clone() };
    RelatedObject {
        compliant: Some(if s.outcome.compliant() { COMPLIANT } else { NON_COMPLIANT }.to_owned()),
        object: Some(ObjectResource {
            api_version: text("/apiVersion"),
            kind: text("/kind"),
            metadata: Some(ObjectMetadata {
                name: Some(name),
                namespace: (!s.namespace.is_empty()).then(|| s.namespace.clone()),
            }),
        }),
        properties: Some(ObjectProperties {
            created_by_policy: created.then_some(true),
            diff: None,
            matches_after_dry_run: None,
            uid,
        }),
        reason: Some(s.outcome.reason().to_owned()),
    }
}
