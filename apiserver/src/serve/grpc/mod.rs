//! The hub's gRPC server: OCM's CloudEvents protocol (ocm.md §8) on the gRPC listener, over the
//! same TLS and PKI as HTTPS. Callers authenticate as on REST (client certificate, then a bearer
//! token) and are authorized by the hub's RBAC as ocm.md §8.7 maps events to verbs, so an
//! agent may do over gRPC exactly what it may do over REST. `Subscribe` streams a cluster's
//! objects of one data type (`broker.rs`); `Publish` writes what agents report through the
//! registry, with the agent as the requester.

pub mod broker;
pub mod routes;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::Stream;
use ocm_proto::api::meta::CONDITION_TRUE;
use ocm_proto::api::work::FINALIZER_MANIFEST_WORK_CLEANUP;
use ocm_proto::api::work::v1::ManifestWorkStatus;
use ocm_proto::cloudevents::v1::cloud_event_service_server::{
    CloudEventService, CloudEventServiceServer,
};
use ocm_proto::cloudevents::v1::{CloudEvent, PublishRequest, SubscriptionRequest};
use ocm_proto::cloudevents::{
    Action, EventType, HeldStatus, HeldVersion, SpecResync, StatusResync, Subresource, ext,
};
use ocm_proto::payload::{ManifestBundleStatus, status_hash};
use serde::Deserialize;
use serde_json::{Value, json};
use tonic::{Request, Response, Status};

use crate::auth::tls::PeerInfo;
use crate::auth::visibility::Visibility;
use crate::machinery::background::Background;
use crate::machinery::error::ApiError;
use crate::machinery::metrics::GrpcCall;
use crate::machinery::requester::Attributes;
use crate::machinery::requester::Identity;
use crate::serve::rest::ApiState;
use crate::store::cache::EventType as Change;
use crate::store::follow::{Resume, Seen, follow};
use crate::store::registry::{Patch, WriteOptions};
use broker::Broker;
use routes::{Route, Routes};

/// How often every subscriber gets a heartbeat by default (OCM's `--broker-heartbeat-interval`).
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);
/// Largest message the server reads (OCM's `max receive`, 4 MiB).
pub const MAX_RECEIVE_BYTES: usize = ocm_proto::frame::MAX_MESSAGE;
/// The one method served outside tonic's encoder ([`subscribe_shared`]).
const SUBSCRIBE_PATH: &str = "/io.cloudevents.v1.CloudEventService/Subscribe";
/// How long a resync answer waits for room in a subscriber that does not read before dropping
/// it.
const RESYNC_PATIENCE: Duration = Duration::from_secs(30);

/// The CloudEvents service of one hub.
#[derive(Debug, Clone)]
pub struct Grpc {
    state: Arc<ApiState>,
    routes: Arc<Routes>,
    broker: Arc<Broker>,
    /// The hub's background tasks, which resync answers join (ended with the hub).
    background: Background,
}

/// A handler's failure as OCM's server reports it: `FailedPrecondition` carrying the
/// Kubernetes `Status` as JSON (a denial stays `PermissionDenied`).
fn failed(e: ApiError) -> Status {
    if e.code == 403 {
        return Status::permission_denied(e.message.clone());
    }
    Status::failed_precondition(e.to_status().to_string())
}

impl Grpc {
    /// The service over a hub's state; starts the fan-out of every data type and the
    /// heartbeats (every `heartbeat`) under `background`.
    pub fn start(state: Arc<ApiState>, heartbeat: Duration, background: &Background) -> Grpc {
        let routes = Arc::new(Routes::new(&state.registry.scheme));
        let broker = Arc::new(Broker::default());
        let grpc = Grpc { state, routes, broker, background: background.clone() };
        for route in grpc.routes.all().iter().filter(|r| r.subscribe) {
            let now = grpc.state.registry.cache.revision();
            background.spawn(grpc.clone().fan_out(Arc::clone(route), now));
        }
        background.spawn(Arc::clone(&grpc.broker).heartbeats(heartbeat));
        grpc
    }

    /// The tonic service.
    pub fn service(&self) -> CloudEventServiceServer<Grpc> {
        CloudEventServiceServer::new(self.clone()).max_decoding_message_size(MAX_RECEIVE_BYTES)
    }

    /// The caller, as REST would authenticate it: the connection's client certificate, then
    /// `authorization: Bearer`.
    fn authenticate<T>(&self, req: &Request<T>) -> Result<Identity, Status> {
        let peer: PeerInfo = req
            .extensions()
            .get::<PeerInfo>()
            .cloned()
            .ok_or_else(|| Status::unauthenticated("no connection identity"))?;
        let mut headers = req.metadata().clone().into_headers();
        self.state
            .authn
            .authenticate(&peer, &mut headers)
            .map_err(|_| Status::unauthenticated("the request is not authenticated"))
    }

    fn authorize(&self, user: &Identity, attrs: &Attributes) -> Result<(), Status> {
        self.state.access.check(user, attrs).map_err(|e| Status::permission_denied(e.message))
    }

    fn options(&self, user: &Identity, route: &Route) -> WriteOptions {
        WriteOptions {
            field_manager: if route.bundles { "work-agent" } else { "registration-agent" }.into(),
            requester: Some(crate::serve::rest::requester(&self.state, user)),
            api_version: route.rt.api_version(&route.version),
            ..WriteOptions::default()
        }
    }

    /// Follows one data type's kind in the watch cache from revision `from` and sends each
    /// change to the subscribers of its cluster. After falling behind the cache it resumes from the last
    /// change it sent (the cache's history holds it); only when that is gone are the
    /// subscribers dropped (they resubscribe and resync).
    async fn fan_out(self, route: Arc<Route>, from: u64) {
        let (cache, prefix) = (Arc::clone(&self.state.registry.cache), route.rt.prefix.clone());
        follow(cache, prefix, Resume::After(from), |seen| match seen {
            Seen::Change(ev) => self.forward(&route, ev),
            Seen::Lost => {
                tracing::warn!(
                    data_type = route.data_type,
                    "gRPC fan-out lost its place; subscribers resync"
                );
                self.broker.drop_all(route.data_type);
            }
            Seen::Snapshot(_) => {}
        })
        .await
    }

    /// The event a change makes for its subscribers, if any: works only when their spec,
    /// labels or annotations changed or their deletion began (not for status reports).
    fn forward(&self, route: &Route, ev: &crate::store::cache::CacheEvent) {
        let cluster = route.cluster_of(&ev.object);
        let cluster = cluster.as_str();
        if route.data_type == ocm_proto::cloudevents::data_type::MANAGED_CLUSTERS
            && ev.kind == Change::Deleted
        {
            let data_types: Vec<&'static str> =
                self.routes.all().iter().map(|r| r.data_type).collect();
            self.state.metrics.forget_consumer(cluster, &data_types);
        }
        if cluster.is_empty() || !self.broker.has(cluster, route.data_type) {
            return;
        }
        let obj = ev.object.value();
        // A deletion carries only the object's id, which no subscriber's view can judge: it goes
        // out only if the cluster's agents see the object, so an agent never learns the id of a
        // request it may not read (a bootstrap CSR labelled with its cluster).
        let (group, resource) = (&route.rt.group, &route.rt.plural);
        if ev.kind == Change::Deleted
            && !crate::auth::visibility::cluster_agents_see(cluster, group, resource, &obj)
        {
            return;
        }
        let action = match (ev.kind, &ev.prev) {
            (Change::Deleted, _) => Action::DeleteRequest,
            (Change::Added, _) | (Change::Modified, None) => Action::CreateRequest,
            (Change::Modified, Some(prev)) => {
                // A status write changes none of these: nothing to send.
                if route.bundles
                    && ev.object.same_labels(prev)
                    && ev.object.deleting == prev.deleting
                    && {
                        let prev = prev.value_without("spec");
                        let meta = |o| {
                            crate::machinery::object::meta(o).and_then(|m| m.get("annotations"))
                        };
                        crate::machinery::object::generation(&obj)
                            == crate::machinery::object::generation(&prev)
                            && meta(&obj) == meta(&prev)
                    }
                {
                    return;
                }
                Action::UpdateRequest
            }
        };
        match route.encode(&obj, cluster, action, ev.kind == Change::Deleted) {
            Ok(event) => self.broker.deliver(cluster, route.data_type, &event, None),
            Err(e) => tracing::warn!(error = %e, key = %ev.object.key, "not sent over gRPC"),
        }
    }

    /// Answers a spec resync request (ocm.md §8.5) to the subscribers of `cluster`: every
    /// object that is deleting, newer than the agent's or unknown to it, and a deletion for
    /// every object the agent holds that the hub does not.
    fn resync(
        &self,
        route: &Route,
        cluster: &str,
        held: &[HeldVersion],
        view: Option<&Visibility>,
    ) -> Result<(), ApiError> {
        let mut answer = Vec::new();
        let mut unseen: std::collections::HashMap<&str, i64> =
            held.iter().map(|h| (h.resource_id.as_str(), h.resource_version)).collect();
        for obj in route.objects(&self.state.registry, cluster) {
            let value = obj.value();
            if view.is_some_and(|v| !v.sees(&value)) {
                continue;
            }
            let agent = unseen.remove(&*obj.uid);
            let hub = route.version_of(&value);
            if obj.deleting || hub == 0 || agent.is_none_or(|a| hub > a) {
                answer.push(route.encode(&value, cluster, Action::ResyncResponse, false)?);
            }
        }
        for id in unseen.keys() {
            answer.push(route.encode_gone(id, cluster, Action::ResyncResponse));
        }
        // The answer may be longer than a subscriber's buffer (a cluster with hundreds of
        // works): it waits for the agent to read rather than dropping it into another resync,
        // and waits apart from the request, whose agent may read only once it is answered.
        let (broker, cluster, data_type) =
            (Arc::clone(&self.broker), cluster.to_owned(), route.data_type);
        self.background.spawn(async move {
            broker.deliver_waiting(&cluster, data_type, answer, RESYNC_PATIENCE).await;
        });
        Ok(())
    }

    /// A work's status from its agent (ocm.md §8.6): `Deleted` releases the work (the
    /// finalizer goes); a report about an older generation is ignored; otherwise the
    /// finalizer is ensured and the status written.
    async fn bundle_status(
        &self,
        user: &Identity,
        route: &Route,
        cluster: &str,
        event: &CloudEvent,
    ) -> Result<(), Status> {
        let uid = event
            .string(ext::RESOURCE_ID)
            .ok_or_else(|| Status::invalid_argument("the event has no resourceid"))?;
        let reported =
            i64::from(event.integer(ext::RESOURCE_VERSION).ok_or_else(|| {
                Status::invalid_argument("the event has no integer resourceversion")
            })?);
        // OCM's `ManifestBundleStatus` (its spec echo ignored), or the object shape of earlier
        // agents.
        let body: ManifestBundleStatus = serde_json::from_slice(event.bytes().unwrap_or(b"{}"))
            .map_err(|e| Status::invalid_argument(format!("the status does not parse: {e}")))?;
        let reported_status = body.into_work_status();
        let deleted = reported_status
            .conditions
            .iter()
            .any(|c| c.type_ == "Deleted" && c.status == CONDITION_TRUE);
        let registry = &self.state.registry;
        let rt = &route.rt;
        // The namespace first, so a caller learns nothing of another cluster's works (not even
        // whether a uid exists there); then the work itself.
        let in_namespace = Attributes::resource("update", &rt.group, &rt.plural, cluster, "");
        self.authorize(user, &Attributes { subresource: "status".into(), ..in_namespace })?;
        let Some(work) = registry.cached_list(rt, cluster).into_iter().find(|o| &*o.uid == uid)
        else {
            // A work already gone has nothing left to release.
            if deleted {
                return Ok(());
            }
            return Err(failed(ApiError::not_found(crate::store::registry::subject(rt, uid))));
        };
        let (_, name) = work.namespace_name();
        let name = name.to_owned();
        let attrs = Attributes::resource("update", &rt.group, &rt.plural, cluster, &name);
        self.authorize(user, &Attributes { subresource: "status".into(), ..attrs.clone() })?;
        let opts = self.options(user, route);
        // The manifests are not needed here: a work no longer kept parsed is read without
        // them (a fan-out's thousand reports would each parse all of its manifests again).
        let current = work.value_without("spec");
        let has = crate::machinery::object::finalizers(&current)
            .contains(&FINALIZER_MANIFEST_WORK_CLEANUP);
        let finalizer_patch = |present| {
            Patch::Merge(crate::machinery::object::finalizer_patch(
                &current,
                FINALIZER_MANIFEST_WORK_CLEANUP,
                present,
            ))
        };
        if deleted {
            if has {
                self.authorize(user, &attrs)?;
                let patch = finalizer_patch(false);
                registry.patch(rt, cluster, &name, &patch, None, &opts).await.map_err(failed)?;
            }
            return Ok(());
        }
        let generation = route.version_of(&current);
        if generation > reported {
            tracing::debug!(work = %name, generation, reported, "status of an older generation");
            return Ok(());
        }
        let add_finalizer = !has && !work.deleting;
        if add_finalizer {
            self.authorize(user, &attrs)?;
        }
        let stored: ManifestWorkStatus = current
            .get("status")
            .and_then(|s| ManifestWorkStatus::deserialize(s).ok())
            .unwrap_or_default();
        // The agent re-reports on every reconnect and resync: an unchanged status is not sent
        // through the registry (which would parse, merge and compare the whole work to find
        // that out).
        let status =
            (stored != reported_status).then(|| Patch::Merge(json!({"status": reported_status})));
        let finalizer = add_finalizer.then(|| finalizer_patch(true));
        // The first report adds the finalizer and writes the status as one revision (a work's
        // every write stores, caches and compares all of its manifests).
        let parts: Vec<(&Patch, Option<&crate::machinery::scheme::Subresource>)> = finalizer
            .iter()
            .map(|p| (p, None))
            .chain(status.iter().map(|p| (p, rt.subresource("status"))))
            .collect();
        if !parts.is_empty() {
            registry.patch_parts(rt, cluster, &name, &parts, &opts).await.map_err(failed)?;
        }
        Ok(())
    }

    /// An object an agent creates or updates (its spec or status): it must belong to the
    /// event's cluster, and the agent needs the verb on it.
    async fn object(
        &self,
        user: &Identity,
        route: &Route,
        cluster: &str,
        t: &EventType,
        event: &CloudEvent,
    ) -> Result<(), Status> {
        let obj: Value = serde_json::from_slice(event.bytes().unwrap_or(b"null"))
            .map_err(|e| Status::invalid_argument(format!("the data is not JSON: {e}")))?;
        if !obj.is_object() {
            return Err(Status::invalid_argument("the data must be a JSON object"));
        }
        if route.cluster_in(&obj) != cluster {
            return Err(Status::permission_denied(format!(
                "the object does not belong to cluster {cluster:?}"
            )));
        }
        let rt = &route.rt;
        let name = crate::machinery::object::meta_str(&obj, "name").to_owned();
        let namespace = route.namespace(cluster);
        let (verb, sub) = match (t.subresource, t.action) {
            (Subresource::Spec, Action::CreateRequest) => ("create", None),
            (Subresource::Spec, Action::UpdateRequest) => ("update", None),
            (Subresource::Status, Action::UpdateRequest) if rt.has_status() => {
                ("update", rt.subresource("status"))
            }
            _ => return Err(Status::invalid_argument(format!("{t} is not supported"))),
        };
        let mut attrs = Attributes::resource(verb, &rt.group, &rt.plural, &namespace, &name);
        if let Some(s) = sub {
            attrs.subresource = s.name.into();
        }
        if verb == "create" {
            attrs.name.clear();
        }
        self.authorize(user, &attrs)?;
        let obj = rt.to_storage(&route.version, obj).map_err(failed)?;
        let opts = self.options(user, route);
        let registry = &self.state.registry;
        if verb == "create" {
            registry.create(rt, &namespace, obj, &opts).await.map_err(failed)?;
        } else {
            registry.update(rt, &namespace, &name, obj, sub, &opts).await.map_err(failed)?;
        }
        Ok(())
    }
}

type EventStream = Pin<Box<dyn Stream<Item = Result<CloudEvent, Status>> + Send>>;

/// What `user` may see of `route`'s objects of `cluster`, where that is narrower than RBAC (a
/// cluster's agent: only its own cluster's CSRs, `auth::visibility`). An agent asking for
/// another cluster's objects of such a kind is refused outright.
fn own_view(user: &Identity, route: &Route, cluster: &str) -> Result<Option<Visibility>, Status> {
    let view = Visibility::of(user, &route.rt.group, &route.rt.plural);
    match &view {
        Some(Visibility::OwnClusterRequests(own)) if own != cluster => {
            Err(Status::permission_denied(format!(
                "the agent of cluster {own:?} may not read cluster {cluster:?}'s {}",
                route.rt.plural
            )))
        }
        _ => Ok(view),
    }
}

/// Whether an event is in `view`: its object seen, or a deletion (which carries only an id, and
/// is sent only for objects the cluster's agents see: [`Grpc::forward`]).
fn sees_event(view: &Visibility, event: &CloudEvent) -> bool {
    match event.bytes().map(serde_json::from_slice::<Value>) {
        Some(Ok(obj)) => view.sees(&obj),
        Some(Err(_)) => false,
        None => true,
    }
}

impl Grpc {
    /// The served data type `name` names, as a bounded metrics label (`unknown` otherwise).
    fn data_type_label(&self, name: &str) -> &'static str {
        self.routes.get(name).map_or("unknown", |r| r.data_type)
    }

    /// The cluster a call names, as a bounded metrics label: its name when the caller is that
    /// registered ManagedCluster's agent, `unknown` otherwise. The caller's identity decides,
    /// not what the call claims, so no caller mints series or counts under another cluster.
    fn consumer_label<'a>(&self, cluster: Option<&'a str>, caller: Option<&Identity>) -> &'a str {
        let Some(cluster) = cluster.filter(|c| !c.is_empty()) else { return "unknown" };
        let own = caller.and_then(|user| crate::auth::visibility::agent_cluster(user));
        let registered = || {
            self.routes
                .get(ocm_proto::cloudevents::data_type::MANAGED_CLUSTERS)
                .is_some_and(|r| self.state.registry.cached(&r.rt, "", cluster).is_some())
        };
        if own == Some(cluster) && registered() { cluster } else { "unknown" }
    }

    /// Publish by `user` (as authenticated), measured by its caller.
    async fn publish_event(
        &self,
        user: Result<Identity, Status>,
        req: Request<PublishRequest>,
    ) -> Result<(), Status> {
        let user = user?;
        let event = req.into_inner().event.ok_or_else(|| Status::invalid_argument("no event"))?;
        let t =
            EventType::parse(&event.r#type).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let dt = t.data_type();
        let route = self
            .routes
            .get(&dt)
            .ok_or_else(|| Status::invalid_argument(format!("unsupported data type {dt:?}")))?;
        let cluster = event
            .string(ext::CLUSTER_NAME)
            .filter(|c| !c.is_empty())
            .ok_or_else(|| Status::permission_denied("the event names no cluster"))?
            .to_owned();
        match (t.subresource, t.action) {
            (Subresource::Spec, Action::ResyncRequest) => {
                let rt = &route.rt;
                let ns = route.namespace(&cluster);
                let name = if route.owner == routes::Owner::Name { cluster.as_str() } else { "" };
                self.authorize(
                    &user,
                    &Attributes::resource("list", &rt.group, &rt.plural, &ns, name),
                )?;
                let req: SpecResync = serde_json::from_slice(event.bytes().unwrap_or(b"{}"))
                    .map_err(|e| {
                        Status::invalid_argument(format!("the resync request does not parse: {e}"))
                    })?;
                let view = own_view(&user, route, &cluster)?;
                self.resync(route, &cluster, &req.resource_versions, view.as_ref())
                    .map_err(failed)?;
            }
            // OCM's agents answer a status resync request with resync responses.
            (Subresource::Status, Action::UpdateRequest | Action::ResyncResponse)
                if route.bundles =>
            {
                self.bundle_status(&user, route, &cluster, &event).await?;
            }
            _ if route.bundles => {
                return Err(Status::invalid_argument(format!("{t} is not supported")));
            }
            _ => self.object(&user, route, &cluster, &t, &event).await?,
        }
        Ok(())
    }

    /// Subscribe by `user` (as authenticated), measured by `call`, which its stream ends.
    async fn subscribe_measured(
        &self,
        user: Result<Identity, Status>,
        req: Request<SubscriptionRequest>,
        call: Arc<GrpcCall>,
    ) -> Result<Response<EventStream>, Status> {
        let user = user?;
        let sr = req.into_inner();
        if sr.cluster_name.is_empty() {
            return Err(Status::invalid_argument("the subscription names no cluster"));
        }
        let route = self.routes.get(&sr.data_type).filter(|r| r.subscribe).ok_or_else(|| {
            Status::invalid_argument(format!("unsupported data type {:?}", sr.data_type))
        })?;
        let rt = &route.rt;
        let cluster = sr.cluster_name.as_str();
        let ns = route.namespace(cluster);
        let name = if route.owner == routes::Owner::Name { cluster } else { "" };
        let attrs = Attributes::resource("watch", &rt.group, &rt.plural, &ns, name);
        // Taken before the check, so no RBAC change between the two goes unseen.
        let mut rbac = self.state.access.changes();
        self.authorize(&user, &attrs)?;
        let view = own_view(&user, route, cluster)?;
        let sub = self.broker.subscribe(cluster, route.data_type);
        if route.bundles {
            // The hub asks for the statuses it lacks (OCM's sources do on connect): the agent
            // answers with every work whose status hash differs.
            let status_hashes = route
                .objects(&self.state.registry, cluster)
                .iter()
                .map(|o| {
                    let status: ManifestWorkStatus = o
                        .value()
                        .get("status")
                        .and_then(|s| ManifestWorkStatus::deserialize(s).ok())
                        .unwrap_or_default();
                    HeldStatus { resource_id: o.uid.to_string(), status_hash: status_hash(&status) }
                })
                .collect();
            let mut ask = routes::new_event(
                &route.event_type(Subresource::Status, Action::ResyncRequest),
                cluster,
            );
            ask.set_json(serde_json::to_vec(&StatusResync { status_hashes }).unwrap_or_default());
            self.broker.deliver(cluster, route.data_type, &ask, Some(sub.id()));
        }
        let id = uuid::Uuid::new_v4().to_string();
        tracing::debug!(cluster, data_type = route.data_type, user = %user.name, "subscribed");
        // As a REST watch does, an open stream is authorized again whenever RBAC changes: a
        // cluster denied or deleted (its agent's RBAC removed) loses its streams at once.
        let state = Arc::clone(&self.state);
        let stream = async_stream::stream! {
            let mut sub = sub;
            loop {
                tokio::select! {
                    event = sub.events.recv() => match event {
                        Some(event) if view.as_ref().is_none_or(|v| sees_event(v, &event)) => {
                            call.sent();
                            yield Ok(event)
                        }
                        Some(_) => {}
                        None => break,
                    },
                    Ok(()) = rbac.changed() => {
                        if let Err(e) = state.access.check(&user, &attrs) {
                            tracing::info!(user = %user.name, "subscription ended: no longer authorized");
                            call.end(tonic::Code::PermissionDenied);
                            yield Err(Status::permission_denied(e.message));
                            return;
                        }
                    }
                }
            }
            if sub.dropped.load(Ordering::Acquire) {
                call.end(tonic::Code::Unavailable);
                yield Err(Status::unavailable("the subscriber fell behind: subscribe again and resync"));
            } else {
                call.end(tonic::Code::Ok);
            }
        };
        let mut resp = Response::new(Box::pin(stream) as EventStream);
        if let Ok(v) = id.parse() {
            resp.metadata_mut().insert(ocm_proto::cloudevents::SUBSCRIPTION_ID, v);
        }
        Ok(resp)
    }
}

#[tonic::async_trait]
impl CloudEventService for Grpc {
    async fn publish(&self, req: Request<PublishRequest>) -> Result<Response<()>, Status> {
        let event = req.get_ref().event.as_ref();
        let data_type = event
            .and_then(|e| EventType::parse(&e.r#type).ok())
            .map_or("unknown", |t| self.data_type_label(&t.data_type()));
        let user = self.authenticate(&req);
        let cluster = event.and_then(|e| e.string(ext::CLUSTER_NAME));
        let consumer = self.consumer_label(cluster, user.as_ref().ok());
        let call = self.state.metrics.grpc_call(consumer, data_type, "Publish");
        let result = self.publish_event(user, req).await;
        match &result {
            Ok(()) => {
                call.sent();
                call.end(tonic::Code::Ok);
            }
            Err(status) => call.end(status.code()),
        }
        result.map(Response::new)
    }

    type SubscribeStream = EventStream;

    async fn subscribe(
        &self,
        req: Request<SubscriptionRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let data_type = self.data_type_label(&req.get_ref().data_type);
        let user = self.authenticate(&req);
        let consumer = self.consumer_label(Some(&req.get_ref().cluster_name), user.as_ref().ok());
        let call = Arc::new(self.state.metrics.grpc_call(consumer, data_type, "Subscribe"));
        let result = self.subscribe_measured(user, req, Arc::clone(&call)).await;
        if let Err(status) = &result {
            call.end(status.code());
        }
        result
    }
}

/// `Subscribe`, with its events framed here (`ocm_proto::frame`) rather than by tonic: tonic
/// copies each message into its stream's buffer, so one 500 KiB ManifestBundle sent to 1,000
/// clusters would be held 1,000 times while the agents read; framed here, every stream sends
/// the same shared payload after a small header. The request is read and checked as tonic
/// would (one uncompressed message within the size limit), and the handler is the service's own.
async fn subscribe_shared(
    grpc: Grpc,
    req: http::Request<hyper::body::Incoming>,
) -> http::Response<tonic::body::Body> {
    use http_body_util::BodyExt;
    use ocm_proto::frame::{self, FrameError};

    let response = async {
        let (parts, body) = req.into_parts();
        if parts.headers.get("grpc-encoding").is_some_and(|v| v != "identity") {
            let mut status = Status::unimplemented("compressed messages are not supported");
            status
                .metadata_mut()
                .insert("grpc-accept-encoding", "identity".parse().expect("ASCII"));
            return Err(status);
        }
        // The codes tonic gives for the same faults.
        let body = http_body_util::Limited::new(body, MAX_RECEIVE_BYTES + 5)
            .collect()
            .await
            .map_err(|e| match e.downcast_ref::<http_body_util::LengthLimitError>() {
                Some(_) => Status::out_of_range("the request is larger than the message limit"),
                None => Status::cancelled(format!("cannot read the request: {e}")),
            })?
            .to_bytes();
        let message = frame::decode_message::<SubscriptionRequest>(&body).map_err(|e| match e {
            FrameError::TooLarge(_) => Status::out_of_range(e.to_string()),
            e => Status::internal(e.to_string()),
        })?;
        let metadata = tonic::metadata::MetadataMap::from_headers(parts.headers);
        let request = Request::from_parts(metadata, parts.extensions, message);
        let (metadata, mut events, _) = grpc.subscribe(request).await?.into_parts();
        let frames = async_stream::stream! {
            let mut end = Status::ok("");
            while let Some(event) = futures::StreamExt::next(&mut events).await {
                match event {
                    Ok(event) => {
                        let (head, payload) = frame::event_message(event);
                        yield Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(head));
                        if let Some(payload) = payload {
                            yield Ok(hyper::body::Frame::data(payload));
                        }
                    }
                    Err(status) => {
                        end = status;
                        break;
                    }
                }
            }
            let mut trailers = http::HeaderMap::new();
            if end.add_header(&mut trailers).is_err() {
                trailers.insert(Status::GRPC_STATUS, http::HeaderValue::from_static("13"));
            }
            yield Ok(hyper::body::Frame::trailers(trailers));
        };
        let body = tonic::body::Body::new(http_body_util::StreamBody::new(frames));
        let mut response = http::Response::new(body);
        *response.headers_mut() = metadata.into_headers();
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/grpc"));
        Ok(response)
    };
    response.await.unwrap_or_else(Status::into_http)
}

/// Serves gRPC on `listener` until the hub stops: HTTPS's acceptor (TLS, the shared
/// connection cap), HTTP/2 only with HTTPS's limits, every request carrying its connection's
/// identity to the service.
pub(crate) async fn serve(
    grpc: Grpc,
    listener: tokio::net::TcpListener,
    acceptor: crate::serve::server::connections::Acceptor,
    timeouts: crate::serve::server::Timeouts,
    background: Background,
) {
    use hyper_util::rt::TokioIo;
    use hyper_util::service::TowerToHyperService;
    use tower::ServiceExt as _;

    let service = grpc.service();
    let never = std::future::pending::<()>();
    crate::serve::server::connections::accept_loop(
        listener,
        acceptor,
        &background,
        never,
        move |stream, who, peer| {
            let (service, grpc) = (service.clone(), grpc.clone());
            async move {
                let svc =
                    tower::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
                        req.extensions_mut().insert(Arc::clone(&who));
                        let (service, grpc) = (service.clone(), grpc.clone());
                        async move {
                            if req.uri().path() == SUBSCRIBE_PATH {
                                return Ok(subscribe_shared(grpc, req).await);
                            }
                            service.oneshot(req).await
                        }
                    });
                let http = crate::serve::server::connections::http_builder(timeouts);
                if let Err(e) = http
                    .http2_only()
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(svc))
                    .await
                {
                    tracing::debug!(%peer, error = %e, "gRPC connection ended");
                }
            }
        },
    )
    .await;
}
