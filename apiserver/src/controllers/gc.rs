//! The in-process controllers of the API machinery itself: the garbage collector (ownerReference
//! cascades for the Background, Foreground and Orphan policies) and the namespace controller
//! (a deleted namespace is emptied, then released). Both are level-triggered sweeps over the
//! watch cache, one controller on the runtime, woken by deletions and run every few seconds
//! regardless.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::controllers::runtime::{Action, Runtime, Watch};
use crate::machinery::object;
use crate::machinery::scheme::ResourceType;
use crate::store::cache::CachedObject;
use crate::store::registry::{DeleteOptions, ListQuery, Patch, Registry, WriteOptions};

/// How often the sweeps run when nothing wakes them.
const RESYNC: Duration = Duration::from_secs(5);

/// How long a burst of deletions settles before the sweep it woke.
const SETTLE: Duration = Duration::from_millis(50);

/// The one key both sweeps run under: any deletion may let either of them act.
const SWEEP: &str = "sweep";

/// Starts the garbage collector and the namespace controller: one sweep of both, woken by
/// every deletion and every object marked for deletion, and run every [`RESYNC`] regardless.
pub fn start(runtime: &Runtime) {
    let watches = runtime
        .registry
        .scheme
        .stored_types()
        .map(|rt| {
            Watch::new(rt, |_| vec![SWEEP.to_owned()])
                .on_changes(|_, after| after.deleting)
                .not_on_creation()
                .debounced(SETTLE)
        })
        .collect();
    let registry = runtime.registry.clone();
    runtime.run("garbagecollector", watches, 1, move |_| {
        let registry = registry.clone();
        async move {
            collect_garbage(&registry).await;
            finish_namespaces(&registry).await;
            Ok(Action::RequeueAfter(RESYNC))
        }
    });
}

struct Live {
    rt: Arc<ResourceType>,
    obj: Arc<CachedObject>,
}

fn snapshot(registry: &Registry) -> Vec<Live> {
    let mut out = Vec::new();
    // A kind stored as another kind's (events.k8s.io Events) is the same objects: listed once.
    for rt in registry.scheme.stored_types() {
        if let Ok((items, _)) = registry.cache.list(&rt.prefix, &rt.prefix) {
            out.extend(items.into_iter().map(|obj| Live { rt: Arc::clone(rt), obj }));
        }
    }
    out
}

fn has_finalizer(obj: &Value, f: &str) -> bool {
    object::finalizers(obj).contains(&f)
}

/// A merge patch removing one finalizer, conditioned on the state we saw.
async fn remove_finalizer(registry: &Registry, live: &Live, finalizer: &str) {
    let v = live.obj.value();
    let patch = object::finalizer_patch(&v, finalizer, false);
    let _ = registry
        .patch(
            &live.rt,
            object::namespace(&v),
            object::name(&v),
            &Patch::Merge(patch),
            None,
            &WriteOptions::default(),
        )
        .await;
}

/// One garbage-collector pass over every object with ownerReferences.
async fn collect_garbage(registry: &Registry) {
    let all = snapshot(registry);
    // Only dependents and owners being deleted are parsed; the index reads the uids kept.
    let by_uid: HashMap<&str, &Live> = all.iter().map(|l| (&*l.obj.uid, l)).collect();
    let mut referenced: HashSet<String> = HashSet::new();
    for dep in all.iter().filter(|l| l.obj.owned) {
        let v = &*dep.obj.value();
        let owners = object::owner_uids(v);
        if owners.is_empty() {
            continue;
        }
        let mut gone_or_foreground = 0;
        let mut drop_refs: Vec<&str> = Vec::new();
        for uid in &owners {
            match by_uid.get(uid) {
                None => {
                    gone_or_foreground += 1;
                    drop_refs.push(uid);
                }
                Some(owner)
                    if owner.obj.deleting && has_finalizer(&owner.obj.value(), "orphan") =>
                {
                    drop_refs.push(uid);
                    referenced.insert((*uid).to_owned());
                }
                Some(owner)
                    if owner.obj.deleting
                        && has_finalizer(&owner.obj.value(), "foregroundDeletion") =>
                {
                    gone_or_foreground += 1;
                    referenced.insert((*uid).to_owned());
                }
                Some(_) => {
                    referenced.insert((*uid).to_owned());
                }
            }
        }
        if gone_or_foreground == owners.len() {
            if !object::is_deleting(v) {
                let opts = DeleteOptions {
                    uid: Some(object::uid(v).to_owned()),
                    propagation: Some("Background".into()),
                    ..DeleteOptions::default()
                };
                let _ =
                    registry.delete(&dep.rt, object::namespace(v), object::name(v), &opts).await;
            }
        } else if !drop_refs.is_empty() {
            let keep: Vec<Value> = v
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .map(|refs| {
                    refs.iter()
                        .filter(|r| {
                            !r.get("uid")
                                .and_then(Value::as_str)
                                .is_some_and(|u| drop_refs.contains(&u))
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            let patch = json!({"metadata": {"ownerReferences": keep, "resourceVersion": dep.obj.rev.to_string()}});
            let _ = registry
                .patch(
                    &dep.rt,
                    object::namespace(v),
                    object::name(v),
                    &Patch::Merge(patch),
                    None,
                    &WriteOptions::default(),
                )
                .await;
        }
    }
    for owner in all.iter().filter(|l| l.obj.deleting) {
        if referenced.contains(&*owner.obj.uid) {
            continue;
        }
        let v = owner.obj.value();
        for f in ["orphan", "foregroundDeletion"] {
            if has_finalizer(&v, f) {
                remove_finalizer(registry, owner, f).await;
                break;
            }
        }
    }
}

/// Empties every namespace being deleted and releases it (its `kubernetes` finalizer) once
/// nothing is left in it.
async fn finish_namespaces(registry: &Registry) {
    let Some(ns_rt) = registry.scheme.lookup("", "v1", "namespaces").cloned() else { return };
    let Ok((namespaces, _)) = registry.cache.list(&ns_rt.prefix, &ns_rt.prefix) else { return };
    for ns in namespaces.iter().filter(|n| n.deleting) {
        let ns = ns.value();
        let name = object::name(&ns).to_owned();
        let mut left = 0;
        for rt in registry.scheme.stored_types().filter(|rt| rt.namespaced) {
            let opts = DeleteOptions {
                propagation: Some("Background".into()),
                ..DeleteOptions::default()
            };
            let _ = registry.delete_collection(rt, &name, &ListQuery::default(), &opts).await;
            if let Ok((items, _)) = registry.cache.list(&rt.prefix, &rt.namespace_prefix(&name)) {
                left += items.len();
            }
        }
        let finalizers =
            ns.pointer("/spec/finalizers").and_then(Value::as_array).cloned().unwrap_or_default();
        if left == 0 && !finalizers.is_empty() {
            let rest: Vec<Value> =
                finalizers.into_iter().filter(|f| f.as_str() != Some("kubernetes")).collect();
            let mut body = Value::clone(&ns);
            body["spec"]["finalizers"] = Value::Array(rest);
            let finalize = ns_rt.subresource("finalize").cloned();
            let _ = registry
                .update(&ns_rt, "", &name, body, finalize.as_ref(), &WriteOptions::default())
                .await;
        }
    }
}
