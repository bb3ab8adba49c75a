//! The data types the gRPC server speaks (ocm.md §8.2, §8.6) as kinds of the scheme: which kind
//! each names, how an object of it names its cluster, and how an object becomes an event
//! (ManifestWorks as OCM's ManifestBundle, every other kind, replicated policies included, as
//! its JSON).

use std::sync::Arc;

use ocm_proto::cloudevents::v1::CloudEvent;
use ocm_proto::cloudevents::{Action, Attr, EventType, Subresource, data_type, ext, timestamp};
use serde_json::{Value, json};

use crate::auth::cluster_rbac::CLUSTER_NAME_LABEL;
use crate::auth::visibility::requesting_cluster;
use crate::machinery::error::ApiError;
use crate::machinery::object;
use crate::machinery::scheme::{ResourceType, Scheme};
use crate::store::cache::CachedObject;
use crate::store::registry::Registry;

/// The `source` of every event the hub sends (OCM's hub services use `kube`).
pub const SOURCE: &str = "kube";

/// How an object names the cluster it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// Its name is the cluster (ManagedCluster).
    Name,
    /// Its namespace is the cluster (works, Leases, add-ons, Events).
    Namespace,
    /// The cluster whose agent requested it, as the server recorded the requester; else (a
    /// bootstrap identity's request) its `open-cluster-management.io/cluster-name` label
    /// (CSRs). A label alone never makes another cluster's agent's request this cluster's.
    Label,
}

/// One data type.
#[derive(Debug)]
pub struct Route {
    /// `<group>.<version>.<resource>`.
    pub data_type: &'static str,
    /// The kind it names.
    pub rt: Arc<ResourceType>,
    /// The version objects travel at.
    pub version: String,
    /// ManifestWorks as ManifestBundles.
    pub bundles: bool,
    /// How an object names its cluster.
    pub owner: Owner,
    /// Whether agents may subscribe to it (Events are published only).
    pub subscribe: bool,
    /// Its event type (the subresource and action are set per event).
    template: EventType,
}

/// Every data type this hub serves.
#[derive(Debug)]
pub struct Routes(Vec<Arc<Route>>);

impl Routes {
    /// The data types whose kinds `scheme` serves.
    pub fn new(scheme: &Scheme) -> Routes {
        let table: [(&'static str, &str, &str, &str, Owner, bool); 8] = [
            (
                data_type::MANIFEST_BUNDLES,
                "work.open-cluster-management.io",
                "v1",
                "manifestworks",
                Owner::Namespace,
                true,
            ),
            (
                data_type::MANAGED_CLUSTERS,
                "cluster.open-cluster-management.io",
                "v1",
                "managedclusters",
                Owner::Name,
                true,
            ),
            (data_type::LEASES, "coordination.k8s.io", "v1", "leases", Owner::Namespace, true),
            (
                data_type::CSRS,
                "certificates.k8s.io",
                "v1",
                "certificatesigningrequests",
                Owner::Label,
                true,
            ),
            (
                data_type::ADDONS,
                "addon.open-cluster-management.io",
                "v1alpha1",
                "managedclusteraddons",
                Owner::Namespace,
                true,
            ),
            (
                data_type::ADDONS_V1BETA1,
                "addon.open-cluster-management.io",
                "v1beta1",
                "managedclusteraddons",
                Owner::Namespace,
                true,
            ),
            (data_type::EVENTS, "events.k8s.io", "v1", "events", Owner::Namespace, false),
            (
                data_type::POLICIES,
                "policy.open-cluster-management.io",
                "v1",
                "policies",
                Owner::Namespace,
                true,
            ),
        ];
        Routes(
            table
                .into_iter()
                .filter_map(|(dt, group, version, plural, owner, subscribe)| {
                    let template =
                        EventType::new(dt, Subresource::Spec, Action::CreateRequest).ok()?;
                    Some(Arc::new(Route {
                        template,
                        data_type: dt,
                        rt: Arc::clone(scheme.lookup(group, version, plural)?),
                        version: version.to_owned(),
                        bundles: dt == data_type::MANIFEST_BUNDLES,
                        owner,
                        subscribe,
                    }))
                })
                .collect(),
        )
    }

    /// The route of a data type.
    pub fn get(&self, data_type: &str) -> Option<&Arc<Route>> {
        self.0.iter().find(|r| r.data_type == data_type)
    }

    /// Every route.
    pub fn all(&self) -> &[Arc<Route>] {
        &self.0
    }
}

impl Route {
    /// The cluster an object belongs to.
    pub fn cluster_of(&self, obj: &CachedObject) -> String {
        match self.owner {
            Owner::Name => obj.namespace_name().1.to_owned(),
            Owner::Namespace => obj.namespace_name().0.to_owned(),
            Owner::Label => match requesting_cluster(&obj.value()) {
                Some(cluster) => cluster.to_owned(),
                None => obj.label(CLUSTER_NAME_LABEL).unwrap_or("").to_owned(),
            },
        }
    }

    /// The cluster an object in a request names (it must be the event's cluster).
    pub fn cluster_in<'a>(&self, obj: &'a Value) -> &'a str {
        match self.owner {
            Owner::Name => object::name(obj),
            Owner::Namespace => object::namespace(obj),
            Owner::Label => object::label(obj, CLUSTER_NAME_LABEL).unwrap_or(""),
        }
    }

    /// The namespace of this data type's objects of `cluster` (`""` for cluster-scoped kinds).
    pub fn namespace(&self, cluster: &str) -> String {
        if self.rt.namespaced { cluster.to_owned() } else { String::new() }
    }

    /// The objects of `cluster`, from the watch cache.
    pub fn objects(&self, registry: &Registry, cluster: &str) -> Vec<Arc<CachedObject>> {
        match self.owner {
            Owner::Namespace => registry.cached_list(&self.rt, cluster),
            Owner::Name => registry.cached(&self.rt, "", cluster).into_iter().collect(),
            Owner::Label => registry
                .cached_list(&self.rt, "")
                .into_iter()
                .filter(|o| self.cluster_of(o) == cluster)
                .collect(),
        }
    }

    /// The version an object is at on the wire: the generation of a work, the
    /// resourceVersion of anything else.
    pub fn version_of(&self, obj: &Value) -> i64 {
        if self.bundles {
            object::generation(obj)
        } else {
            object::meta_str(obj, "resourceVersion").parse().unwrap_or(0)
        }
    }

    /// The event type of `action` on this data type's spec.
    pub fn spec_type(&self, action: Action) -> EventType {
        self.event_type(Subresource::Spec, action)
    }

    /// The event type of `action` on `subresource`.
    pub fn event_type(&self, subresource: Subresource, action: Action) -> EventType {
        let mut t = self.template.clone();
        t.subresource = subresource;
        t.action = action;
        t
    }

    /// An event about `obj` (a stored object) for `cluster`: with its data, or, when it is
    /// being deleted or gone (`deleted`), only the deletion timestamp.
    pub fn encode(
        &self,
        obj: &Value,
        cluster: &str,
        action: Action,
        deleted: bool,
    ) -> Result<CloudEvent, ApiError> {
        let mut event = new_event(&self.spec_type(action), cluster);
        event.set(ext::RESOURCE_ID, Attr::CeString(object::uid(obj).to_owned()));
        let version = self.version_of(obj);
        if self.bundles {
            event.set(
                ext::RESOURCE_VERSION,
                Attr::CeInteger(i32::try_from(version).unwrap_or(i32::MAX)),
            );
            let mut meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
            if let Some(m) = meta.as_object_mut() {
                m.remove("managedFields");
            }
            event.set(ext::METADATA, Attr::CeString(meta.to_string()));
        } else if version != 0 {
            // A string for every other kind, omitted when empty (OCM's generic codec).
            event.set(ext::RESOURCE_VERSION, Attr::CeString(version.to_string()));
        }
        let deletion = obj.pointer("/metadata/deletionTimestamp").and_then(Value::as_str);
        if deleted || deletion.is_some() {
            let at = deletion.and_then(parse_time).unwrap_or_else(now);
            event.set(ext::DELETION_TIMESTAMP, Attr::CeTimestamp(at));
            return Ok(event);
        }
        let data = if self.bundles {
            let spec = obj.get("spec").unwrap_or(&Value::Null);
            let mut bundle = serde_json::Map::new();
            let manifests = spec.pointer("/workload/manifests").cloned().unwrap_or(json!([]));
            bundle.insert("manifests".into(), manifests);
            for (from, to) in [
                ("deleteOption", "deleteOption"),
                ("manifestConfigs", "manifestConfigs"),
                // OCM's ManifestBundle spells it this way.
                ("executor", "executer"),
            ] {
                if let Some(v) = spec.get(from) {
                    bundle.insert(to.into(), v.clone());
                }
            }
            // One work sent to many clusters carries the same bundle: held once for every
            // subscriber's buffer.
            crate::machinery::intern::intern(
                serde_json::to_vec(&bundle).map_err(ApiError::internal)?,
            )
        } else {
            let mut out = self.rt.to_version(&self.version, obj.clone())?;
            if let Some(m) = out.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
            bytes::Bytes::from(serde_json::to_vec(&out).map_err(ApiError::internal)?)
        };
        event.set_json(data);
        Ok(event)
    }

    /// The deletion of an object the agent holds and the hub does not.
    pub fn encode_gone(&self, id: &str, cluster: &str, action: Action) -> CloudEvent {
        let mut event = new_event(&self.spec_type(action), cluster);
        event
            .set(ext::RESOURCE_ID, Attr::CeString(id.to_owned()))
            .set(ext::DELETION_TIMESTAMP, Attr::CeTimestamp(now()));
        event
    }
}

/// A new event from the hub about `cluster`: source `kube`, now, no original source (OCM's
/// hub sends it empty).
pub fn new_event(t: &EventType, cluster: &str) -> CloudEvent {
    CloudEvent::ocm(SOURCE, t, cluster, crate::machinery::clock::now())
}

/// Now, as a protobuf timestamp.
fn now() -> prost_types::Timestamp {
    timestamp(crate::machinery::clock::now())
}

fn parse_time(s: &str) -> Option<prost_types::Timestamp> {
    object::parse_rfc3339(s).map(timestamp)
}
