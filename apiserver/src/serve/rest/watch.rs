//! Watches: from the watch cache's snapshot or history, filtered by selectors and the requester's
//! view (`auth::visibility`), encoded per event as JSON or Table rows, with bookmarks,
//! `sendInitialEvents`, and re-authorization after RBAC changes.

use super::*;

/// A watch request after validation.
/// A watch the hub's RBAC allowed, with what it was allowed for.
#[derive(Clone)]
pub(super) struct Reauthorize(pub(super) crate::machinery::requester::Attributes);

pub(super) struct WatchRequest {
    /// Who watches and what was authorized, to check again on RBAC changes (`None`: allowed
    /// by the host cluster in aggregated mode, which the hub cannot re-ask cheaply).
    pub(super) reauthorize: Option<(Identity, crate::machinery::requester::Attributes)>,
    pub(super) target: Target,
    pub(super) output: Output,
    /// The kind's Table columns at the request's version (looked up once per watch).
    pub(super) columns: Arc<[table::Column]>,
    pub(super) query: ListQuery,
    pub(super) start: WatchStart,
    pub(super) bookmarks: bool,
    pub(super) send_initial: bool,
    pub(super) timeout: Duration,
    /// The requester's narrower view (an agent: its own cluster's CSRs), if any.
    pub(super) view: Option<Visibility>,
}

pub(super) enum WatchStart {
    Consistent,
    Any,
    After(u64),
    NotOlderThan(u64),
}

pub(super) async fn watch(
    state: &Arc<ApiState>,
    target: Target,
    q: &Query,
    output: Output,
    reauthorize: Option<(Identity, crate::machinery::requester::Attributes)>,
    view: Option<Visibility>,
) -> Result<Response, ApiError> {
    let query = list_query_selectors_only(&target, q)?;
    let send_initial = q.flag("sendInitialEvents")?;
    let rv_match = q.get("resourceVersionMatch").filter(|s| !s.is_empty());
    let mut errs = Vec::new();
    if q.get("sendInitialEvents").is_some() && rv_match != Some("NotOlderThan") {
        errs.push(FieldError::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
        ));
    }
    if rv_match.is_some() && q.get("sendInitialEvents").is_none() {
        errs.push(FieldError::forbidden(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    if let Some(m) = rv_match {
        if m != "NotOlderThan" {
            errs.push(FieldError::new(
                ocm_proto::validation::FieldErrorKind::NotSupported,
                "resourceVersionMatch",
                Some(Value::String(m.to_owned())),
                r#"supported values: "NotOlderThan""#,
            ));
        }
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid_options("ListOptions", &errs));
    }
    let rv = q.get("resourceVersion").filter(|s| !s.is_empty());
    let start = match (rv, send_initial) {
        (None, _) => WatchStart::Consistent,
        (Some("0"), _) => WatchStart::Any,
        (Some(rv), true) => WatchStart::NotOlderThan(parse_rv(rv)?),
        (Some(rv), false) => WatchStart::After(parse_rv(rv)?),
    };
    let timeout = match q.get("timeoutSeconds").filter(|s| !s.is_empty()) {
        // Capped at a year: a larger one would overflow the deadline.
        Some(t) => Duration::from_secs(
            t.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {t:?}")))?
                .min(365 * 24 * 3600),
        ),
        None => {
            use rand::Rng as _;
            Duration::from_secs(rand::rng().random_range(1800..3600))
        }
    };
    let wr = WatchRequest {
        reauthorize,
        columns: target.rt.strategy.columns(&target.version),
        target,
        output,
        query,
        start,
        bookmarks: q.flag("allowWatchBookmarks")?,
        send_initial,
        timeout,
        view,
    };
    let subscription = subscribe(state, &wr).await?;
    let body = Body::from_stream(watch_stream(Arc::clone(state), wr, subscription));
    let mut resp = json_response(StatusCode::OK, body);
    resp.extensions_mut().insert(encoding::Streaming);
    Ok(resp)
}

pub(super) fn event_line(kind: &str, object: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(object.len() + 32);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    out.extend_from_slice(object);
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

pub(super) fn bookmark_line(
    wr: &WatchRequest,
    rev: u64,
    initial_end: bool,
    headers: &mut bool,
) -> Bytes {
    let target = &wr.target;
    let mut meta = json!({"resourceVersion": rev.to_string(), "creationTimestamp": null});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({
        "kind": target.rt.kind,
        "apiVersion": target.rt.api_version(&target.version),
        "metadata": meta,
    });
    // A Table watch converts bookmarks too (a one-row Table), as kube-apiserver does.
    event_line("BOOKMARK", &table_or_json(wr, obj, headers).unwrap_or_default())
}

/// An event's object as this watch sends it: JSON at the request's version, or a one-row Table
/// whose `columnDefinitions` only the stream's first event carries.
/// One event's object as a watcher sees it. Renderings that every watcher of the same form
/// would make alike are made once per object and shared: JSON at another version, metadata,
/// and, for live events only, Table rows (their ages are of the moment; an object replayed
/// from the snapshot or history is rendered for its watcher, as kube-apiserver does).
pub(super) fn event_object(
    wr: &WatchRequest,
    obj: &CachedObject,
    headers: &mut bool,
    live: bool,
) -> Result<Bytes, ApiError> {
    match wr.output {
        Output::Json if is_storage_form(&wr.target) => Ok(obj.json()),
        Output::Json => obj.rendered("json", &wr.target.version, || wire_bytes(&wr.target, obj)),
        // Metadata is the same at every version: no conversion of the whole object. Made once
        // per event, for every watcher.
        Output::Metadata(version) => obj.rendered(version, "", || {
            let meta = table::partial_metadata(&obj.value(), version);
            Ok(Bytes::from(serde_json::to_vec(&meta).map_err(ApiError::internal)?))
        }),
        // A watcher's first Table carries the column definitions; later live rows are shared.
        Output::Table(_) if *headers || !live => {
            let value = to_wire(&wr.target, Arc::unwrap_or_clone(obj.value()))?;
            Ok(Bytes::from(table_or_json(wr, value, headers)?))
        }
        Output::Table(req) => obj.rendered(table_form(req), &wr.target.version, || {
            let value = to_wire(&wr.target, Arc::unwrap_or_clone(obj.value()))?;
            Ok(Bytes::from(table_or_json(wr, value, &mut false)?))
        }),
    }
}

/// The name of a Table rendering, for [`CachedObject::rendered`].
pub(super) fn table_form(req: TableRequest) -> &'static str {
    match (req.version, req.include) {
        ("v1", Include::Metadata) => "table/v1/metadata",
        ("v1", Include::Object) => "table/v1/object",
        ("v1", Include::None) => "table/v1/none",
        (_, Include::Metadata) => "table/v1beta1/metadata",
        (_, Include::Object) => "table/v1beta1/object",
        (_, Include::None) => "table/v1beta1/none",
    }
}

pub(super) fn table_or_json(
    wr: &WatchRequest,
    obj: Value,
    headers: &mut bool,
) -> Result<Vec<u8>, ApiError> {
    let value = match wr.output {
        Output::Json => obj,
        Output::Table(req) => {
            let meta = table::object_metadata(&obj);
            let t = table::build(&wr.columns, vec![obj], meta, req, *headers);
            *headers = false;
            t
        }
        Output::Metadata(version) => table::partial_metadata(&obj, version),
    };
    serde_json::to_vec(&value).map_err(ApiError::internal)
}

/// The lines of one revision's events that pass the watch's filters, as one chunk; each line
/// is counted as sent.
fn revision_lines(
    wr: &WatchRequest,
    events: &[Arc<CacheEvent>],
    headers: &mut bool,
    sent: &crate::machinery::metrics::WatchEvents,
) -> Result<Option<Bytes>, ApiError> {
    let mut lines: Vec<Bytes> = Vec::with_capacity(events.len());
    for ev in events {
        if let Some(line) = filter_event(wr, ev, headers, true)? {
            sent.sent(line.len());
            lines.push(line);
        }
    }
    Ok(match lines.len() {
        0 => None,
        1 => lines.pop(),
        _ => Some(Bytes::from(lines.concat())),
    })
}

pub(super) fn error_line(err: &ApiError) -> Bytes {
    event_line("ERROR", &serde_json::to_vec(&err.to_status()).unwrap_or_default())
}

/// Turns one cache event into this watcher's line, applying its namespace and selectors:
/// an object that stops matching is sent as DELETED (its previous state at the new revision).
pub(super) fn filter_event(
    wr: &WatchRequest,
    ev: &CacheEvent,
    headers: &mut bool,
    live: bool,
) -> Result<Option<Bytes>, ApiError> {
    let rt = &wr.target.rt;
    let prefix = rt.namespace_prefix(&wr.target.namespace);
    if !ev.object.key.starts_with(&prefix) {
        return Ok(None);
    }
    // What the view hangs on (a CSR's requester) never changes, so an object is in it or out
    // of it for its whole life: its current state decides every event.
    if wr.view.as_ref().is_some_and(|view| !view.sees(&ev.object.value())) {
        return Ok(None);
    }
    let labels = wr.query.labels.as_ref();
    let fields = wr.query.fields.as_ref();
    let now = selectors_match(rt, &ev.object, labels, fields);
    let before = ev.prev.as_ref().is_some_and(|p| selectors_match(rt, p, labels, fields));
    let line = match ev.kind {
        EventType::Added if now => {
            Some(event_line("ADDED", &event_object(wr, &ev.object, headers, live)?))
        }
        EventType::Modified if now && before => {
            Some(event_line("MODIFIED", &event_object(wr, &ev.object, headers, live)?))
        }
        EventType::Modified if now => {
            Some(event_line("ADDED", &event_object(wr, &ev.object, headers, live)?))
        }
        EventType::Modified if before => {
            let prev = ev.prev.as_ref().expect("before implies prev");
            let mut value = Arc::unwrap_or_clone(prev.value());
            object::set_resource_version(&mut value, ev.rev);
            let gone = CachedObject::new(ev.object.key.clone(), value, ev.rev);
            // A fresh object, seen by this watcher only: nothing to share.
            Some(event_line("DELETED", &event_object(wr, &gone, headers, false)?))
        }
        EventType::Deleted if now || before => {
            Some(event_line("DELETED", &event_object(wr, &ev.object, headers, live)?))
        }
        _ => None,
    };
    Ok(line)
}

/// Waits until the cache can serve the watch's start (a future resourceVersion is an HTTP 504
/// before any byte is streamed, as kube-apiserver answers), then registers it. A start older
/// than the kept history is not an HTTP error: it becomes the stream's one ERROR event.
pub(super) async fn subscribe(
    state: &ApiState,
    wr: &WatchRequest,
) -> Result<Result<crate::store::cache::Subscription, ApiError>, ApiError> {
    let cache = &state.registry.cache;
    let start = match wr.start {
        WatchStart::Consistent => {
            cache.sync().await?;
            Start::Snapshot
        }
        WatchStart::Any => Start::Snapshot,
        WatchStart::NotOlderThan(n) | WatchStart::After(n) => {
            if !cache.wait_for(n, Duration::from_secs(3)).await {
                return Err(ApiError::too_large_resource_version(n, cache.revision()));
            }
            if matches!(wr.start, WatchStart::After(_)) { Start::After(n) } else { Start::Snapshot }
        }
    };
    let only = wr.query.single_key(&wr.target.rt, &wr.target.namespace);
    Ok(cache.subscribe(&wr.target.rt.prefix, start, only.as_deref()))
}

pub(super) fn watch_stream(
    state: Arc<ApiState>,
    wr: WatchRequest,
    subscription: Result<crate::store::cache::Subscription, ApiError>,
) -> impl Stream<Item = Result<Bytes, Infallible>> {
    async_stream::stream! {
        let deadline = tokio::time::Instant::now() + wr.timeout;
        let mut sub = match subscription {
            Ok(s) => s,
            Err(e) => { yield Ok(error_line(&e)); return; }
        };
        let mut rev = sub.rev;
        let mut headers = true;
        let sent = state.metrics.watch_events(&wr.target.rt, &wr.target.version);
        for ev in std::mem::take(&mut sub.initial) {
            match filter_event(&wr, &ev, &mut headers, false) {
                Ok(Some(line)) => { sent.sent(line.len()); yield Ok(line) }
                Ok(None) => {}
                Err(e) => { yield Ok(error_line(&e)); return; }
            }
        }
        if wr.send_initial {
            yield Ok(bookmark_line(&wr, rev, true, &mut headers));
        }
        let mut last_bookmark = tokio::time::Instant::now();
        let final_bookmark = deadline.checked_sub(Duration::from_secs(2));
        let mut final_sent = false;
        let mut rbac = state.access.changes();
        loop {
            let final_at = final_bookmark.filter(|_| wr.bookmarks && !final_sent).unwrap_or(deadline);
            tokio::select! {
                Ok(()) = rbac.changed(), if wr.reauthorize.is_some() => {
                    if let Some((user, attrs)) = &wr.reauthorize {
                        if let Err(e) = state.access.check(user, attrs) {
                            yield Ok(error_line(&e));
                            return;
                        }
                    }
                }
                msg = sub.live.recv() => match msg {
                    None => return,
                    Some(Msg::Events(events)) => {
                        // One revision's events, sent as one chunk: the stream never ends (at
                        // its deadline) between two events of a revision, whose resourceVersion
                        // a client resumes after. Only a revision older than the stream's (the
                        // start's) is a repeat.
                        let Some(at) = events.first().map(|e| e.rev) else { continue };
                        if at < rev { continue; }
                        rev = at;
                        match revision_lines(&wr, &events, &mut headers, &sent) {
                            Ok(Some(chunk)) => yield Ok(chunk),
                            Ok(None) => {}
                            Err(e) => { yield Ok(error_line(&e)); return; }
                        }
                    }
                    Some(Msg::Progress(r)) => {
                        if r > rev { rev = r; }
                        if wr.bookmarks && last_bookmark.elapsed() >= state.bookmark_every {
                            last_bookmark = tokio::time::Instant::now();
                            yield Ok(bookmark_line(&wr, rev, false, &mut headers));
                        }
                    }
                },
                _ = tokio::time::sleep_until(final_at) => {
                    if final_at >= deadline { return; }
                    final_sent = true;
                    yield Ok(bookmark_line(&wr, rev, false, &mut headers));
                }
            }
        }
    }
}
