//! Commits: several objects created, updated (status too) and deleted as one storage commit at
//! one revision, each made by the same steps as its single-object write (`prepare_new` and
//! `name_new` of create.rs, the stages of update.rs, `check_preconditions` and `deletion` of
//! delete.rs), and each compared with the revision it was read at: all are written, or none.

use std::collections::HashMap;

use ocm_storage::Write;

use super::create::prepare_new;
use super::delete::{check_preconditions, deletion};
use super::update::{Stage, carried_precondition, patched};
use super::*;

/// Patches to an object, each to the object or to what one subresource owns, applied in order.
pub type Parts<'a> = Vec<(Patch, Option<&'a Subresource>)>;

/// One object's part in a [`Registry::commit`].
#[derive(Debug)]
pub enum Change<'a> {
    /// Creates `object` in `namespace`, as [`Registry::create`], with `parts` (its status,
    /// above all) applied to it as updates before it is stored: the object is stored as a
    /// create followed by those patches would leave it.
    Create {
        /// The kind.
        rt: &'a ResourceType,
        /// The namespace (empty for a cluster-scoped kind).
        namespace: &'a str,
        /// The object to create.
        object: Value,
        /// What is patched onto it before it is stored.
        parts: Parts<'a>,
    },
    /// Patches the object `name`, as [`Registry::patch_parts`].
    Patch {
        /// The kind.
        rt: &'a ResourceType,
        /// The namespace (empty for a cluster-scoped kind).
        namespace: &'a str,
        /// The object's name.
        name: String,
        /// The patches, in order.
        parts: Parts<'a>,
    },
    /// Deletes the object `name`, as [`Registry::delete`].
    Delete {
        /// The kind.
        rt: &'a ResourceType,
        /// The namespace (empty for a cluster-scoped kind).
        namespace: &'a str,
        /// The object's name.
        name: String,
        /// The delete's options.
        options: DeleteOptions,
    },
}

/// What one change of a commit did.
#[derive(Debug, Clone)]
pub enum Changed {
    /// The object as written (resourceVersion the commit's revision), or as it is when the
    /// change changed nothing.
    Written(Written),
    /// What the delete did.
    Deleted(DeleteOutcome),
}

/// What a [`Registry::commit`] did.
#[derive(Debug, Clone)]
pub struct CommitOutcome {
    /// The one revision of every object written; `None` when nothing was (every change
    /// changed nothing, or a dry run).
    pub revision: Option<u64>,
    /// What each change did, in the order given.
    pub changed: Vec<Changed>,
}

/// One change made ready: what it stores (nothing when it changes nothing) and its outcome.
struct Prepared {
    write: Option<Write>,
    subject: Subject,
    changed: Changed,
}

impl Registry {
    /// Writes every change as one storage commit, at one revision, or none of them. Each
    /// object is read from the watch cache and compared at the revision it was read at, so a
    /// change made meanwhile (or not yet in the cache), an object created meanwhile under a
    /// name to be created, or one deleted meanwhile is a 409 Conflict naming it: the caller
    /// reads again and decides again. A change's own refusal (validation, admission, a
    /// missing object: 404) refuses the commit before anything is written. At most
    /// [`ocm_storage::MAX_COMMIT_KEYS`] objects, their stored JSON at most
    /// [`ocm_storage::MAX_COMMIT_BYTES`] together (413 past it).
    pub async fn commit(
        &self,
        changes: Vec<Change<'_>>,
        opts: &WriteOptions,
    ) -> Result<CommitOutcome, ApiError> {
        let mut prepared = Vec::with_capacity(changes.len());
        for change in changes {
            prepared.push(self.prepare_change(change, opts).await?);
        }
        let subjects: HashMap<String, Subject> = prepared
            .iter()
            .filter_map(|p| Some((p.write.as_ref()?.key().to_owned(), p.subject.clone())))
            .collect();
        let (writes, mut changed): (Vec<Option<Write>>, Vec<Changed>) =
            prepared.into_iter().map(|p| (p.write, p.changed)).unzip();
        let written: Vec<bool> = writes.iter().map(Option::is_some).collect();
        let writes: Vec<Write> = writes.into_iter().flatten().collect();
        if opts.dry_run || writes.is_empty() {
            return Ok(CommitOutcome { revision: None, changed });
        }
        let size = writes.iter().map(|w| w.value().len()).sum();
        let room = self.budget.reserve(size).await;
        let committed = self.storage.commit(writes).await.map_err(|e| refused(e, &subjects))?;
        let rev = committed.revision.get();
        for (outcome, _) in changed.iter_mut().zip(&written).filter(|(_, w)| **w) {
            let object = match outcome {
                Changed::Written(w) => &mut w.object,
                Changed::Deleted(DeleteOutcome::Marked(v) | DeleteOutcome::Gone(v)) => v,
            };
            object::set_resource_version(object, rev);
        }
        // Answered once this server's watch cache has the commit (bounded, as a large write's
        // room): the writer reads what it wrote next (a controller's next pass decides on it),
        // and a delete is acknowledged as a single delete is.
        self.cache.wait_for(rev, Duration::from_secs(10)).await;
        drop(room);
        Ok(CommitOutcome { revision: Some(rev), changed })
    }

    async fn prepare_change(
        &self,
        change: Change<'_>,
        opts: &WriteOptions,
    ) -> Result<Prepared, ApiError> {
        match change {
            Change::Create { rt, namespace, object, parts } => {
                self.prepare_create(rt, namespace, object, &parts, opts).await
            }
            Change::Patch { rt, namespace, name, parts } => {
                let name = name.as_str();
                let (current, rev) = self.current(rt, namespace, name)?;
                let mut precondition = None;
                for (patch, _) in &parts {
                    precondition = precondition.or(carried_precondition(patch)?);
                }
                if precondition.is_some_and(|p| p != rev) {
                    return Err(ApiError::stale(subject(rt, name)));
                }
                let makes = makes(rt, opts, &parts);
                let stages = stages(&parts, &makes);
                let (update, object, warnings) = self.next_state(rt, opts, &stages, current)?;
                let key = rt.key(namespace, name);
                let expected = Revision(rev);
                let write = match update {
                    Update::Put(value) => Some(Write::Update { key, value, expected }),
                    Update::Delete => Some(Write::Delete { key, expected }),
                    Update::Unchanged => None,
                };
                let changed = Changed::Written(Written { object, warnings, created: false });
                Ok(Prepared { write, subject: subject(rt, name), changed })
            }
            Change::Delete { rt, namespace, name, options } => {
                let name = name.as_str();
                let (current, rev) = self.current(rt, namespace, name)?;
                let pinned = match &options.resource_version {
                    Some(rv) if !rv.is_empty() => Some(parse_rv(rv)?),
                    _ => None,
                };
                check_preconditions(rt, name, &options, pinned, rev, &current)?;
                let (update, outcome) = deletion(rt, &options, current)?;
                let key = rt.key(namespace, name);
                let expected = Revision(rev);
                let write = match update {
                    Update::Put(value) => Some(Write::Update { key, value, expected }),
                    Update::Delete => Some(Write::Delete { key, expected }),
                    Update::Unchanged => None,
                };
                Ok(Prepared {
                    write,
                    subject: subject(rt, name),
                    changed: Changed::Deleted(outcome),
                })
            }
        }
    }

    /// A create of a commit: the create recipe, then `parts` as updates of the new object.
    async fn prepare_create(
        &self,
        rt: &ResourceType,
        namespace: &str,
        object: Value,
        parts: &Parts<'_>,
        opts: &WriteOptions,
    ) -> Result<Prepared, ApiError> {
        let (mut obj, mut warnings, generate) = prepare_new(rt, namespace, object, opts, false)?;
        let name = self.name_new(rt, namespace, &mut obj, generate.as_deref()).await?;
        let makes = makes(rt, opts, parts);
        let (changed, more) = self.run_stages(rt, opts, &stages(parts, &makes), &obj)?;
        warnings.extend(more);
        let mut obj = changed.unwrap_or(obj);
        let key = rt.key(namespace, &name);
        let write = if opts.dry_run {
            None
        } else {
            let value = to_stored(&mut obj)?.into();
            Some(Write::Create { key, value })
        };
        let changed = Changed::Written(Written { object: obj, warnings, created: true });
        Ok(Prepared { write, subject: subject(rt, &name), changed })
    }

    /// The object as the watch cache holds it (resourceVersion set) and its revision; 404 when
    /// the cache has none.
    fn current(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<(Value, u64), ApiError> {
        let cached = self
            .cache
            .get(&rt.prefix, &rt.key(namespace, name))?
            .ok_or_else(|| ApiError::not_found(subject(rt, name)))?;
        Ok((Arc::unwrap_or_clone(cached.value()), cached.rev))
    }
}

/// What builds each part's candidate: the patch applied to the object so far.
type Make<'a> = Box<dyn Fn(&Value) -> Result<Value, ApiError> + Sync + 'a>;

fn makes<'a>(rt: &'a ResourceType, opts: &'a WriteOptions, parts: &'a Parts<'_>) -> Vec<Make<'a>> {
    parts
        .iter()
        .map(|(patch, sub)| {
            let sub = *sub;
            Box::new(move |current: &Value| patched(rt, sub, opts, patch, current)) as Make<'a>
        })
        .collect()
}

fn stages<'a>(parts: &'a Parts<'_>, makes: &'a [Make<'a>]) -> Vec<Stage<'a>> {
    parts
        .iter()
        .zip(makes)
        .map(|((patch, sub), make)| Stage {
            sub: *sub,
            tracked: matches!(patch, Patch::Apply(_)),
            make: make.as_ref(),
        })
        .collect()
}

/// The store's refusal of a commit: a failed compare is a 409 Conflict naming its object, so
/// the caller reads again and retries; anything else as any storage error.
fn refused(e: ocm_storage::Error, subjects: &HashMap<String, Subject>) -> ApiError {
    use ocm_storage::Error as E;
    let (key, why) = match &e {
        E::Conflict { key, .. } => (key, "the object has been modified"),
        E::AlreadyExists { key } => (key, "an object of this name was created meanwhile"),
        E::NotFound { key } => (key, "the object was deleted meanwhile"),
        _ => return from_storage(e, Subject::default()),
    };
    let about = subjects.get(key).cloned().unwrap_or_default();
    ApiError::conflict(
        about,
        format!("{why}; please apply your changes to the latest version and try again"),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::machinery::background::Background;
    use crate::machinery::scheme::Profile;

    const GROUP: &str = "cluster.open-cluster-management.io";

    struct Setup {
        registry: Registry,
        decisions: Arc<ResourceType>,
        background: Background,
    }

    /// A memory-backed registry with namespace `ns` and a PlacementDecision `kept` there.
    async fn setup() -> Setup {
        let background = Background::new();
        let engine = ocm_storage::Engine::Memory(Default::default());
        let storage = Storage::open(engine).await.unwrap();
        let scheme = Arc::new(Scheme::new(Profile::Hub));
        let registry =
            Registry::new(storage, scheme, Default::default(), &background).await.unwrap();
        let namespaces = Arc::clone(registry.scheme.lookup("", "v1", "namespaces").unwrap());
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}});
        registry.create(&namespaces, "", ns, &WriteOptions::default()).await.unwrap();
        let decisions =
            Arc::clone(registry.scheme.lookup(GROUP, "v1beta1", "placementdecisions").unwrap());
        for name in ["kept", "gone"] {
            let obj = decision(name);
            registry.create(&decisions, "ns", obj, &WriteOptions::default()).await.unwrap();
        }
        registry.cache.sync().await.unwrap();
        Setup { registry, decisions, background }
    }

    fn decision(name: &str) -> Value {
        json!({"apiVersion": format!("{GROUP}/v1beta1"), "kind": "PlacementDecision",
            "metadata": {"name": name, "namespace": "ns"}})
    }

    fn status(clusters: &[&str]) -> Patch {
        let decisions: Vec<Value> =
            clusters.iter().map(|c| json!({"clusterName": c, "reason": "r"})).collect();
        Patch::Merge(json!({"status": {"decisions": decisions}}))
    }

    fn opts() -> WriteOptions {
        WriteOptions { field_manager: "tester".into(), ..WriteOptions::default() }
    }

    /// A create with its status, an update of labels and status, and a delete are written at
    /// one revision, each as its single-object write would leave it: system metadata, status
    /// through its subresource (managedFields entries for both), generation untouched by
    /// metadata and status.
    #[tokio::test]
    async fn creates_updates_and_deletes_are_one_revision() {
        let Setup { registry, decisions: rt, background } = setup().await;
        let status_sub = rt.subresource("status");
        let labels = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
        let mut labelled = decision("new");
        labelled["metadata"]["labels"] = json!({"x": "y"});
        let changes = vec![
            Change::Create {
                rt: &rt,
                namespace: "ns",
                object: labelled,
                parts: vec![(status(&["c1"]), status_sub)],
            },
            Change::Patch {
                rt: &rt,
                namespace: "ns",
                name: "kept".into(),
                parts: vec![(labels, None), (status(&["c2"]), status_sub)],
            },
            Change::Delete {
                rt: &rt,
                namespace: "ns",
                name: "gone".into(),
                options: Default::default(),
            },
        ];
        let out = registry.commit(changes, &opts()).await.unwrap();
        let rev = out.revision.expect("written");
        registry.cache.sync().await.unwrap();
        let read = |name: &str| registry.cached(&rt, "ns", name).map(|o| o.value());
        let new = read("new").expect("created");
        assert_eq!(object::meta_str(&new, "resourceVersion"), rev.to_string());
        assert!(!object::uid(&new).is_empty());
        assert_eq!(new.pointer("/metadata/generation"), Some(&json!(1)));
        assert_eq!(new.pointer("/status/decisions/0/clusterName"), Some(&json!("c1")));
        let managers: Vec<(&str, Option<&str>)> = new["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["manager"].as_str().unwrap(), e["subresource"].as_str()))
            .collect();
        assert_eq!(managers, [("tester", None), ("tester", Some("status"))]);
        let kept = read("kept").unwrap();
        assert_eq!(object::meta_str(&kept, "resourceVersion"), rev.to_string());
        assert_eq!(kept.pointer("/metadata/labels/a"), Some(&json!("b")));
        assert_eq!(kept.pointer("/status/decisions/0/clusterName"), Some(&json!("c2")));
        assert_eq!(kept.pointer("/metadata/generation"), Some(&json!(1)));
        assert!(read("gone").is_none());
        assert!(matches!(&out.changed[2], Changed::Deleted(DeleteOutcome::Gone(_))));
        // What changes nothing writes nothing.
        let again = vec![Change::Patch {
            rt: &rt,
            namespace: "ns",
            name: "kept".into(),
            parts: vec![(status(&["c2"]), status_sub)],
        }];
        assert_eq!(registry.commit(again, &opts()).await.unwrap().revision, None);
        background.stop().await;
    }

    /// A compare that fails in the store (a name created meanwhile) is a 409 Conflict naming
    /// the object, and nothing of the commit is written; a change's own refusal (an invalid
    /// name, a missing object) refuses the commit before the store is asked.
    #[tokio::test]
    async fn a_conflict_or_a_refusal_writes_nothing() {
        let Setup { registry, decisions: rt, background } = setup().await;
        let before = registry.storage.current_revision().await.unwrap();
        let update = || Change::Patch {
            rt: &rt,
            namespace: "ns",
            name: "kept".into(),
            parts: vec![(status(&["c9"]), rt.subresource("status"))],
        };
        let create = |name: &str| Change::Create {
            rt: &rt,
            namespace: "ns",
            object: decision(name),
            parts: Vec::new(),
        };
        let err = registry.commit(vec![update(), create("gone")], &opts()).await.unwrap_err();
        assert_eq!((err.code, err.reason), (409, "Conflict"), "{}", err.message);
        assert!(err.message.contains("\"gone\""), "{}", err.message);
        let err = registry.commit(vec![update(), create("Not_A_Name")], &opts()).await.unwrap_err();
        assert_eq!(err.code, 422, "{}", err.message);
        let missing = Change::Patch {
            rt: &rt,
            namespace: "ns",
            name: "missing".into(),
            parts: vec![(status(&["c1"]), rt.subresource("status"))],
        };
        let err = registry.commit(vec![update(), missing], &opts()).await.unwrap_err();
        assert_eq!(err.code, 404, "{}", err.message);
        assert_eq!(registry.storage.current_revision().await.unwrap(), before);
        let kept = registry.cached(&rt, "ns", "kept").unwrap().value();
        assert_eq!(kept.pointer("/status"), None);
        background.stop().await;
    }
}
