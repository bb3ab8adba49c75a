//! The deploy step of a set's run: per placement, the clusters its decisions name (in their
//! decision groups), each cluster's work as rendered from the set, the rollout's plan over the
//! works that already run the update revision, and the writes that follow: works created or
//! updated for the clusters the plan rolls to, works deleted for clusters that left. A rollout
//! whose failures exceed `maxFailures` is aborted when the placement asks for it, and with
//! `RollbackAll` the clusters already updated go back to the current revision, all at once.
//!
//! Where OCM's classification needs a `Progressing` condition rule (ocm-wave2.md §7: without
//! one a work never counts as Succeeded), a template without such a rule reads `Applied` at the
//! work's generation: True is Succeeded, False (the agent could not apply it) is Failed.

mod memo;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use futures::StreamExt as _;
use ocm_proto::api::meta::{CONDITION_TRUE, Condition, ObjectMeta};
use ocm_proto::api::work::v1::{
    CONDITION_APPLIED, CONDITION_AVAILABLE, CONDITION_DEGRADED, CONDITION_PROGRESSING,
};
use ocm_proto::api::work::v1alpha1::{
    FAILURE_STRATEGY_ROLLBACK_ALL, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec, Override,
    PlacementRolloutStrategy,
};
use ocm_proto::api::work::{
    LABEL_CONTROLLER_HASH, LABEL_MANIFEST_WORK_REPLICA_SET, LABEL_PLACEMENT_NAME,
};
use serde_json::{Value, json};

pub(super) use memo::Memo;
use memo::{Facts, WorkFacts};

use super::revisions::Revisions;
use super::{Controller, WRITES_AT_ONCE};
use crate::controllers::rollout::{self, ClusterStatus, Decisions, Groups, Status};
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::machinery::template::{self as render, ClusterValues, RenderError};
use crate::store::cache::CachedObject;

/// What the deploy step found and did, for the status step.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    pub placements: Vec<PlacementOutcome>,
    /// The earliest a waiting rollout needs the set run again.
    pub recheck: Option<Duration>,
    /// The first clusters whose work cannot be rendered.
    pub render_errors: Vec<RenderError>,
    /// Whether a rollout's failures exceed what its placement tolerates.
    pub breached: bool,
    /// Which revision each cluster's work runs.
    pub cluster_revisions: BTreeMap<String, Vec<String>>,
}

/// One placement's figures.
#[derive(Debug, Default)]
pub(super) struct PlacementOutcome {
    pub name: String,
    /// Whether the Placement exists.
    pub found: bool,
    pub groups: usize,
    /// The placement's `numberOfSelectedClusters`.
    pub selected: i64,
    /// Works that run the update revision.
    pub total: i64,
    pub applied: i64,
    pub available: i64,
    pub progressing: i64,
    pub degraded: i64,
    /// Works of the update revision that succeeded.
    pub succeeded: i64,
}

/// The decisions of placement `name` in `ns`, or `None` when the Placement does not exist.
pub(super) fn decisions(c: &Controller, ns: &str, name: &str) -> Option<Decisions> {
    rollout::decided(&c.registry, &c.kinds.placements, &c.kinds.decisions, ns, name)
}

/// The placement (of the set's refs) whose decisions name `cluster`, if any.
pub(super) fn placement_of(
    c: &Controller,
    ns: &str,
    spec: &ManifestWorkReplicaSetSpec,
    cluster: &str,
) -> Option<String> {
    spec.placement_refs
        .iter()
        .map(|p| p.name.clone())
        .find(|p| decisions(c, ns, p).is_some_and(|d| d.clusters().any(|x| x == cluster)))
}

/// The ManifestWork the set gives one cluster at one revision: the rendered spec, the set's
/// labels and OCM's two, and the revision's hash; `generateName` as OCM names new works.
pub(super) fn desired_work(
    c: &Controller,
    owner: &str,
    meta: &ObjectMeta,
    spec: &ManifestWorkReplicaSetSpec,
    cluster: &ClusterValues,
    revision: &str,
) -> Result<Value, RenderError> {
    Template::new(c, owner, meta, spec, revision).work(cluster)
}

/// What [`desired_work`] needs of the set, prepared once for all the clusters of a run.
struct Template<'a> {
    c: &'a Controller,
    template: Value,
    overrides: &'a [Override],
    labels: Value,
    generate_name: String,
    progressing_rule: bool,
}

impl<'a> Template<'a> {
    fn new(
        c: &'a Controller,
        owner: &str,
        meta: &ObjectMeta,
        spec: &'a ManifestWorkReplicaSetSpec,
        revision: &str,
    ) -> Template<'a> {
        let template =
            serde_json::to_value(spec.manifest_work_template.clone().unwrap_or_default())
                .unwrap_or_default();
        let mut labels = serde_json::to_value(&meta.labels).unwrap_or_else(|_| json!({}));
        if !labels.is_object() {
            labels = json!({});
        }
        labels[LABEL_MANIFEST_WORK_REPLICA_SET] = json!(owner);
        labels[LABEL_CONTROLLER_HASH] = json!(revision);
        Template {
            c,
            template,
            overrides: &spec.overrides,
            labels,
            generate_name: meta.name.clone().unwrap_or_default(),
            progressing_rule: has_progressing_rule(spec),
        }
    }

    /// The work of one cluster.
    fn work(&self, cluster: &ClusterValues) -> Result<Value, RenderError> {
        let rendered = render::render(&self.template, self.overrides, cluster)?;
        let rt = &self.c.kinds.works;
        let mut work = json!({
            "apiVersion": rt.storage_api_version(), "kind": rt.kind,
            "metadata": {"generateName": self.generate_name, "namespace": cluster.name, "labels": self.labels},
            "spec": rendered,
        });
        rt.strategy.default(&mut work);
        Ok(work)
    }
}

/// A stored work's condition of `type_`.
fn condition(work: &Value, type_: &str) -> Option<Condition> {
    let conditions = work.pointer("/status/conditions")?.as_array()?;
    let c = conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(type_))?;
    serde_json::from_value(c.clone()).ok()
}

/// Whether a condition speaks of the work's current generation.
fn current(c: &Condition, generation: i64) -> bool {
    c.observed_generation == Some(generation)
}

/// When the controller last wrote the work (its managedFields entry's time): when the work got
/// its current revision.
fn written_at(work: &Value) -> Option<Timestamp> {
    let entries = work.pointer("/metadata/managedFields")?.as_array()?;
    let ours = entries.iter().find(|e| {
        e.get("manager").and_then(Value::as_str) == Some(super::MANAGER)
            && e.get("subresource").and_then(Value::as_str).unwrap_or_default().is_empty()
    })?;
    ours.get("time")?.as_str()?.parse().ok()
}

/// A work's rollout status (ocm.md §4.6) and the time it entered it: the condition's
/// transition, or when the work got its revision if that is later (a condition that kept its
/// status across a new revision still carries the old revision's time, which would cut a
/// soak or a deadline short).
fn classify(work: &Value, progressing_rule: bool) -> (Status, Option<Timestamp>) {
    let generation = object::generation(work);
    let written = written_at(work);
    let at = |c: &Condition| {
        Some(written.map_or(c.last_transition_time.0, |w| w.max(c.last_transition_time.0)))
    };
    let Some(applied) = condition(work, CONDITION_APPLIED).filter(|c| current(c, generation))
    else {
        return (Status::ToApply, None);
    };
    match (progressing_rule, applied.status == CONDITION_TRUE) {
        (false, true) => return (Status::Succeeded, at(&applied)),
        (false, false) => return (Status::Failed, at(&applied)),
        (true, false) => return (Status::ToApply, None),
        (true, true) => {}
    }
    let Some(progressing) =
        condition(work, CONDITION_PROGRESSING).filter(|c| current(c, generation))
    else {
        return (Status::ToApply, None);
    };
    let degraded = condition(work, CONDITION_DEGRADED);
    if degraded.as_ref().is_some_and(|d| !current(d, generation)) {
        return (Status::ToApply, None);
    }
    let progressing_true = progressing.status == CONDITION_TRUE;
    match degraded {
        Some(d) if progressing_true && d.status == CONDITION_TRUE => (Status::Failed, at(&d)),
        _ if progressing_true => (Status::Progressing, at(&progressing)),
        _ if progressing.status == ocm_proto::api::meta::CONDITION_FALSE => {
            (Status::Succeeded, at(&progressing))
        }
        _ => (Status::Progressing, at(&progressing)),
    }
}

/// Whether the template has a condition rule producing `Progressing`.
fn has_progressing_rule(spec: &ManifestWorkReplicaSetSpec) -> bool {
    spec.manifest_work_template
        .iter()
        .flat_map(|t| &t.manifest_configs)
        .any(|mc| mc.condition_rules.iter().any(|r| r.condition == CONDITION_PROGRESSING))
}

/// Whether a stored work is the desired one: the same spec and revision.
fn matches(stored: &Value, desired: &Value) -> bool {
    stored.get("spec") == desired.get("spec")
        && object::label(stored, LABEL_CONTROLLER_HASH)
            == object::label(desired, LABEL_CONTROLLER_HASH)
}

/// Runs the deploy step of a set over all its placements.
pub(super) async fn deploy(
    c: &Controller,
    ns: &str,
    owner: &str,
    set: &ManifestWorkReplicaSet,
    spec: &ManifestWorkReplicaSetSpec,
    revs: &Revisions,
) -> Result<Outcome, ApiError> {
    let mut outcome = Outcome::default();
    let listed: Vec<&str> = spec.placement_refs.iter().map(|p| p.name.as_str()).collect();
    c.memo.retain(owner, &listed, |other| {
        // `<namespace>.<name>`: a namespace has no dot, so the first dot splits them.
        other
            .split_once('.')
            .is_some_and(|(ns, name)| c.registry.cached(&c.kinds.sets, ns, name).is_some())
    });
    let works = c.works_of(owner);
    // Works of placements the set no longer lists go.
    let stray: Vec<Arc<CachedObject>> = works
        .iter()
        .filter(|w| !w.label(LABEL_PLACEMENT_NAME).is_some_and(|p| listed.contains(&p)))
        .filter(|w| !w.deleting)
        .cloned()
        .collect();
    c.delete_works(&stray).await?;
    let status = set.status.clone().unwrap_or_default();
    let aborted =
        status.aborted_time.is_some() && status.update_revision.as_deref() == Some(&revs.update);
    for pref in &spec.placement_refs {
        let placement_works: HashMap<String, Arc<CachedObject>> = works
            .iter()
            .filter(|w| w.label(LABEL_PLACEMENT_NAME) == Some(pref.name.as_str()))
            .map(|w| (w.namespace_name().0.to_owned(), Arc::clone(w)))
            .collect();
        let mut strategy = pref.rollout_strategy.clone().unwrap_or_default();
        if strategy.strategy.type_.is_none() {
            strategy.strategy.type_ =
                Some(ocm_proto::api::cluster::v1alpha1::ROLLOUT_ALL.to_owned());
        }
        let run =
            PlacementRun { c, owner, set, spec, revs, aborted, strategy, placement: &pref.name };
        run.deploy(ns, &placement_works, &mut outcome).await?;
    }
    Ok(outcome)
}

/// What a placement's run read of its clusters.
#[derive(Default)]
struct Reading {
    /// Per decided cluster that exists.
    read: HashMap<String, Facts>,
    /// The works rendered this run that are not stored as they are.
    desired: HashMap<String, Value>,
    /// The rollout status of every work at the update revision.
    statuses: Vec<ClusterStatus>,
}

/// One placement's part of a run.
struct PlacementRun<'a> {
    c: &'a Controller,
    owner: &'a str,
    set: &'a ManifestWorkReplicaSet,
    spec: &'a ManifestWorkReplicaSetSpec,
    revs: &'a Revisions,
    aborted: bool,
    strategy: PlacementRolloutStrategy,
    placement: &'a str,
}

impl PlacementRun<'_> {
    async fn deploy(
        &self,
        ns: &str,
        works: &HashMap<String, Arc<CachedObject>>,
        outcome: &mut Outcome,
    ) -> Result<(), ApiError> {
        let name = self.placement;
        let mut po = PlacementOutcome { name: name.to_owned(), ..PlacementOutcome::default() };
        let Some(decisions) = decisions(self.c, ns, name) else {
            outcome.placements.push(po);
            return Ok(());
        };
        po.found = true;
        po.groups = decisions.groups.len();
        po.selected = decisions.selected;
        // Works of clusters that left the placement go.
        let decided: HashSet<&str> = decisions.clusters().map(String::as_str).collect();
        let gone: Vec<Arc<CachedObject>> = works
            .iter()
            .filter(|(cluster, w)| !w.deleting && !decided.contains(cluster.as_str()))
            .map(|(_, w)| Arc::clone(w))
            .collect();
        self.c.delete_works(&gone).await?;
        let template = self.template_key();
        let memo = self.c.memo.take(self.owner, self.placement, &template);
        let Reading { read, desired, statuses } =
            self.read(&decisions, works, memo, outcome, &mut po);
        let groups = Groups::new(decisions.groups.clone());
        let plan = rollout::plan(
            &self.strategy.strategy,
            &groups,
            &statuses,
            crate::machinery::clock::timestamp(),
        )
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
        outcome.recheck = rollout::earliest(outcome.recheck, plan.recheck_after);
        let failures =
            statuses.iter().filter(|s| s.status == Status::Failed).count() + plan.timed_out.len();
        let breached = plan.max_failure_breach
            || failures
                > rollout::max_failures(&self.strategy.strategy, decisions.clusters().count())
                    .map_err(|e| ApiError::bad_request(e.to_string()))?;
        outcome.breached |= breached && self.strategy.failure_strategy.is_some();
        outcome.placements.push(po);
        // The clusters the plan rolls to whose work is not the desired one yet.
        let pending = |cluster: &str| {
            read.get(cluster)
                .filter(|f| f.rendered.is_ok() && !f.work.as_ref().is_some_and(|w| w.matches))
        };
        let to_write: Vec<(String, ClusterValues)> = plan
            .to_rollout
            .iter()
            .filter_map(|s| Some((s.cluster.clone(), pending(&s.cluster)?.values.clone())))
            .collect();
        self.c.memo.keep(self.owner, self.placement, template, read);
        if self.spec.paused == Some(true) {
            return Ok(());
        }
        if self.aborted {
            if self.strategy.failure_strategy.as_deref() == Some(FAILURE_STRATEGY_ROLLBACK_ALL) {
                return self.roll_back(works, outcome).await;
            }
            return Ok(());
        }
        let to_write = self.desired_of(to_write, desired);
        self.write(works, to_write).await
    }

    /// Reads every decided cluster in group order: its facts (from `memo` where nothing
    /// changed), the render errors and revisions into `outcome`, the figures of the works at the
    /// update revision into `po`, and their rollout statuses.
    fn read(
        &self,
        decisions: &Decisions,
        works: &HashMap<String, Arc<CachedObject>>,
        mut memo: HashMap<String, Facts>,
        outcome: &mut Outcome,
        po: &mut PlacementOutcome,
    ) -> Reading {
        let mut r = Reading::default();
        let t = self.template();
        for (group, clusters) in &decisions.groups {
            for cluster in clusters {
                let old = memo.remove(cluster.as_str());
                let stored = works.get(cluster);
                let Some(facts) = self.facts(&t, cluster, stored, old, &mut r.desired) else {
                    continue;
                };
                if let Err(e) = &facts.rendered {
                    if outcome.render_errors.len() < 5 {
                        outcome.render_errors.push(e.clone());
                    }
                }
                if let Some(w) = &facts.work {
                    let clusters = outcome.cluster_revisions.entry(w.revision.clone()).or_default();
                    clusters.push(cluster.clone());
                    if w.matches {
                        count(po, w);
                        r.statuses.push(ClusterStatus {
                            cluster: cluster.clone(),
                            group: group.clone(),
                            status: w.status,
                            last_transition: w.since,
                            recheck: None,
                        });
                    }
                }
                r.read.insert(cluster.clone(), facts);
            }
        }
        r
    }

    /// What identifies the template a run renders from: everything [`desired_work`] reads of
    /// the set (its owner label, name, labels, template, overrides and update revision).
    fn template_key(&self) -> Vec<u8> {
        let spec = self.spec;
        let key = json!([
            self.owner,
            self.set.metadata.name,
            self.set.metadata.labels,
            spec.manifest_work_template,
            spec.overrides,
            self.revs.update,
        ]);
        serde_json::to_vec(&key).unwrap_or_default()
    }

    /// The template of the update revision.
    fn template(&self) -> Template<'_> {
        Template::new(self.c, self.owner, &self.set.metadata, self.spec, &self.revs.update)
    }

    /// What this run reads of a decided cluster (`None` when it does not exist): `old` when
    /// neither the ManagedCluster nor its work changed since; without a render when only the
    /// work changed and not its spec or revision; else its work rendered and compared with the
    /// stored one. A rendered work that is not stored as it is goes into `desired`.
    fn facts(
        &self,
        t: &Template<'_>,
        cluster: &str,
        stored: Option<&Arc<CachedObject>>,
        old: Option<Facts>,
        desired: &mut HashMap<String, Value>,
    ) -> Option<Facts> {
        let c = self.c.registry.cached(&self.c.kinds.clusters, "", cluster)?;
        let work_rev = stored.map(|w| w.rev);
        let (values, known) = match old.filter(|f| f.cluster_rev == c.rev) {
            Some(f) if f.work_rev == work_rev => return Some(f),
            // The same cluster and template render the same way.
            Some(f) if f.rendered.is_err() => return Some(Facts { work_rev, ..f }),
            Some(f) => (f.values, f.work),
            None => (ClusterValues::of(&c.value()), None),
        };
        let mut facts =
            Facts { cluster_rev: c.rev, values, work_rev, rendered: Ok(()), work: None };
        if let (Some(k), Some(s)) = (&known, stored) {
            // Its status changed: read without its manifests when they are large.
            let v = s.value_without("spec");
            if k.same_spec(s, &v) {
                facts.work = Some(work_facts(s, &v, k.matches, t.progressing_rule));
                return Some(facts);
            }
        }
        let stored = stored.map(|s| (s, s.value()));
        match t.work(&facts.values) {
            Err(e) => facts.rendered = Err(e),
            Ok(work) => {
                facts.work =
                    stored.map(|(s, v)| work_facts(s, &v, matches(&v, &work), t.progressing_rule));
                if !facts.work.as_ref().is_some_and(|w| w.matches) {
                    desired.insert(cluster.to_owned(), work);
                }
            }
        }
        Some(facts)
    }

    /// The rendered works of `clusters`: this run's renders, or rendered now from the values
    /// an earlier run read.
    fn desired_of(
        &self,
        clusters: Vec<(String, ClusterValues)>,
        mut desired: HashMap<String, Value>,
    ) -> Vec<Value> {
        let t = self.template();
        clusters
            .into_iter()
            .filter_map(|(cluster, values)| match desired.remove(&cluster) {
                Some(work) => Some(work),
                None => t.work(&values).ok(),
            })
            .collect()
    }

    /// A decided cluster's values, if it exists.
    fn values(&self, cluster: &str) -> Option<ClusterValues> {
        let c = self.c.registry.cached(&self.c.kinds.clusters, "", cluster)?;
        Some(ClusterValues::of(&c.value()))
    }

    /// Returns every cluster whose work runs the update revision to the current one.
    async fn roll_back(
        &self,
        works: &HashMap<String, Arc<CachedObject>>,
        outcome: &mut Outcome,
    ) -> Result<(), ApiError> {
        let Some(current) = self.revs.current.as_deref().filter(|c| *c != self.revs.update) else {
            return Ok(()); // nothing succeeded everywhere yet: the rollout only stops
        };
        let Some(spec) = self.revs.spec_at(self.spec, current) else { return Ok(()) };
        let t = Template::new(self.c, self.owner, &self.set.metadata, &spec, current);
        let mut to_write = Vec::new();
        for (cluster, w) in works {
            if w.label(LABEL_CONTROLLER_HASH) != Some(self.revs.update.as_str()) {
                continue;
            }
            let Some(values) = self.values(cluster) else { continue };
            match t.work(&values) {
                Ok(work) => to_write.push(work),
                Err(e) => outcome.render_errors.push(e),
            }
        }
        self.write(works, to_write).await
    }

    /// Creates or updates works, several at once.
    async fn write(
        &self,
        works: &HashMap<String, Arc<CachedObject>>,
        to_write: Vec<Value>,
    ) -> Result<(), ApiError> {
        let c = self.c;
        let results: Vec<Result<(), ApiError>> = futures::stream::iter(to_write)
            .map(|mut work| async move {
                let cluster = object::namespace(&work).to_owned();
                work["metadata"]["labels"][LABEL_PLACEMENT_NAME] = json!(self.placement);
                let rt = &c.kinds.works;
                match works.get(&cluster) {
                    Some(stored) => {
                        let stored = stored.value();
                        let mut updated = Value::clone(&stored);
                        updated["spec"] = work["spec"].take();
                        updated["metadata"]["labels"] = work["metadata"]["labels"].take();
                        let name = object::name(&stored).to_owned();
                        c.registry
                            .update(rt, &cluster, &name, updated, None, &Controller::opts())
                            .await
                            .map(drop)
                    }
                    None => {
                        c.registry.create(rt, &cluster, work, &Controller::opts()).await.map(drop)
                    }
                }
            })
            .buffer_unordered(WRITES_AT_ONCE)
            .collect()
            .await;
        results.into_iter().collect()
    }
}

/// What a run reads of a stored work, whether it is the desired one being known.
fn work_facts(
    stored: &CachedObject,
    work: &Value,
    matches: bool,
    progressing_rule: bool,
) -> WorkFacts {
    let is_true = |t: &str| condition(work, t).is_some_and(|c| c.status == CONDITION_TRUE);
    let (status, since) = classify(work, progressing_rule);
    WorkFacts {
        uid: stored.uid.clone(),
        generation: object::generation(work),
        revision: object::label(work, LABEL_CONTROLLER_HASH).unwrap_or_default().to_owned(),
        matches,
        status,
        since,
        applied: is_true(CONDITION_APPLIED),
        available: is_true(CONDITION_AVAILABLE),
        progressing: is_true(CONDITION_PROGRESSING),
        degraded: is_true(CONDITION_DEGRADED),
    }
}

/// Counts a work of the update revision into its placement's figures.
fn count(po: &mut PlacementOutcome, w: &WorkFacts) {
    po.total += 1;
    po.applied += i64::from(w.applied);
    po.available += i64::from(w.available);
    po.progressing += i64::from(w.progressing);
    po.degraded += i64::from(w.degraded);
    po.succeeded += i64::from(w.status == Status::Succeeded);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(conditions: Value, generation: i64) -> Value {
        json!({"metadata": {"generation": generation, "managedFields": [
            {"manager": super::super::MANAGER, "operation": "Update", "time": "2026-01-01T00:00:10Z"}]},
            "status": {"conditions": conditions}})
    }

    fn cond(type_: &str, status: &str, generation: i64, at: &str) -> Value {
        json!({"type": type_, "status": status, "reason": "R", "message": "",
               "observedGeneration": generation, "lastTransitionTime": at})
    }

    #[test]
    fn without_a_progressing_rule_applied_decides() {
        let early = "2026-01-01T00:00:00Z";
        let ok = work(json!([cond("Applied", "True", 2, early)]), 2);
        let (status, at) = classify(&ok, false);
        assert_eq!(status, Status::Succeeded);
        // The condition kept its old time across the new revision: the write's time counts.
        assert_eq!(at.map(|t| t.to_string()), Some("2026-01-01T00:00:10Z".to_owned()));
        let failed = work(json!([cond("Applied", "False", 2, early)]), 2);
        assert_eq!(classify(&failed, false).0, Status::Failed);
        let stale = work(json!([cond("Applied", "True", 1, early)]), 2);
        assert_eq!(classify(&stale, false).0, Status::ToApply);
        assert_eq!(classify(&work(json!([]), 1), false).0, Status::ToApply);
    }

    #[test]
    fn with_a_progressing_rule_ocm_classification_holds() {
        let t = "2026-01-01T00:01:00Z";
        let applied = cond("Applied", "True", 3, t);
        let case = |extra: Vec<Value>| {
            let mut cs = vec![applied.clone()];
            cs.extend(extra);
            classify(&work(Value::Array(cs), 3), true).0
        };
        assert_eq!(case(vec![]), Status::ToApply, "Progressing missing");
        assert_eq!(case(vec![cond("Progressing", "True", 2, t)]), Status::ToApply, "stale");
        assert_eq!(case(vec![cond("Progressing", "True", 3, t)]), Status::Progressing);
        assert_eq!(case(vec![cond("Progressing", "False", 3, t)]), Status::Succeeded);
        assert_eq!(case(vec![cond("Progressing", "Unknown", 3, t)]), Status::Progressing);
        let failed = vec![cond("Progressing", "True", 3, t), cond("Degraded", "True", 3, t)];
        assert_eq!(case(failed), Status::Failed);
        let stale_degraded =
            vec![cond("Progressing", "False", 3, t), cond("Degraded", "False", 2, t)];
        assert_eq!(case(stale_degraded), Status::ToApply);
        let not_applied = work(json!([cond("Applied", "False", 3, t)]), 3);
        assert_eq!(classify(&not_applied, true).0, Status::ToApply);
    }
}
