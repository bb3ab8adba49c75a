//! Reads: one object (from the store, or the watch cache at a resourceVersion), lists
//! (from the cache, or paged through the store at one pinned revision with continue tokens),
//! the cached reads controllers make, and selector matching.

use super::*;

/// A list request after parsing.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// `labelSelector`.
    pub labels: Option<LabelSelector>,
    /// `fieldSelector`.
    pub fields: Option<FieldSelector>,
    /// `limit` (0 = none).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
}

impl ListQuery {
    /// The one object key the query can match, when its field selector pins `metadata.name`
    /// (and `metadata.namespace`, for a namespaced kind across namespaces): such a list reads
    /// that key, as kube-apiserver's storage serves it as a get (`MatchesSingle`), and such a
    /// watch is offered that object's events only. The selectors still decide what matches.
    pub fn single_key(&self, rt: &ResourceType, namespace: &str) -> Option<String> {
        let fields = self.fields.as_ref()?;
        let name = fields.pinned("metadata.name")?;
        let namespace = match namespace {
            "" if rt.namespaced => fields.pinned("metadata.namespace")?,
            given => given,
        };
        Some(rt.key(namespace, name))
    }
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    /// Matching objects.
    pub items: Vec<Arc<CachedObject>>,
    /// The revision the page was read at.
    pub rev: u64,
    /// Token for the next page.
    pub continue_token: Option<String>,
    /// How many objects follow this page (`metadata.remainingItemCount`): known, as in
    /// kube-apiserver, only for a list without selectors that has a next page.
    pub remaining: Option<u64>,
}

impl Registry {
    /// Reads one object. `rv`: `None` reads the store (consistent); `Some(0)` the cache; `Some(n)`
    /// the cache once it has reached `n`.
    pub async fn get(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        rv: Option<u64>,
    ) -> Result<Value, ApiError> {
        let key = rt.key(namespace, name);
        match rv {
            None => {
                let kv =
                    self.storage.get(&key).await.map_err(|e| from_storage(e, subject(rt, name)))?;
                parse_stored(rt, &kv)
            }
            Some(n) => {
                if n > 0 && !self.cache.wait_for(n, Duration::from_secs(3)).await {
                    return Err(ApiError::too_large_resource_version(n, self.cache.revision()));
                }
                match self.cache.get(&rt.prefix, &key)? {
                    Some(obj) => Ok(Arc::unwrap_or_clone(obj.value())),
                    None => Err(ApiError::not_found(subject(rt, name))),
                }
            }
        }
    }

    /// Lists objects (see kube-api.md §6.3–§6.4 for the resourceVersion rules).
    pub async fn list(
        &self,
        rt: &ResourceType,
        namespace: &str,
        q: &ListQuery,
    ) -> Result<ListPage, ApiError> {
        let prefix = rt.namespace_prefix(namespace);
        let matches = |o: &CachedObject| self.matches(rt, o, q);
        // What the cache reads: only keys that start with the one key the selector pins, if it
        // does. Such a list has at most one item, so the cache serves it even when a page is
        // asked for (kube-rs' watcher lists with `limit=500`), where kube-apiserver reads the
        // one key from etcd; the store lists whole prefixes only.
        let scan = q.single_key(rt, namespace);
        let cached = || {
            let (items, rev) = self.cache.list(&rt.prefix, scan.as_deref().unwrap_or(&prefix))?;
            let items = items.into_iter().filter(|o| matches(o)).collect();
            Ok(ListPage { items, rev, continue_token: None, remaining: None })
        };
        if let Some(token) = &q.continue_token {
            let (rev, after) = decode_continue(token, &prefix)?;
            return self.list_from_store(rt, &prefix, q, rev, Some(after)).await;
        }
        let exact = q.resource_version_match.as_deref() == Some("Exact");
        match q.resource_version.as_deref().filter(|s| !s.is_empty()) {
            Some(rv) if exact => {
                let rev = parse_rv(rv)?;
                self.list_from_store(rt, &prefix, q, Some(rev), None).await
            }
            Some("0") => cached(),
            Some(rv) => {
                let n = parse_rv(rv)?;
                if !self.cache.wait_for(n, Duration::from_secs(3)).await {
                    return Err(ApiError::too_large_resource_version(n, self.cache.revision()));
                }
                // One key's list never needs a second page: the cache serves it whole.
                if q.limit > 0 && scan.is_none() {
                    return self.list_from_store(rt, &prefix, q, None, None).await;
                }
                cached()
            }
            None if q.limit > 0 && scan.is_none() => {
                self.list_from_store(rt, &prefix, q, None, None).await
            }
            None => {
                self.cache.sync().await?;
                cached()
            }
        }
    }

    /// Pages through the store at one revision until `limit` matches are found.
    pub(super) async fn list_from_store(
        &self,
        rt: &ResourceType,
        prefix: &str,
        q: &ListQuery,
        rev: Option<u64>,
        mut after: Option<String>,
    ) -> Result<ListPage, ApiError> {
        let mut items = Vec::new();
        let mut pinned = rev.map(Revision);
        loop {
            let need = if q.limit == 0 { 0 } else { q.limit - items.len() };
            // The objects that follow a page are counted in the watch cache (below): a store
            // counts them by scanning the rest of the range, once per page.
            let options = ListOptions {
                limit: need,
                revision: pinned,
                start_after: after.clone(),
                skip_remaining: true,
                ..ListOptions::default()
            };
            let page = self.storage.list(prefix, &options).await.map_err(|e| match e {
                ocm_storage::Error::Compacted { .. } if q.continue_token.is_some() => {
                    ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list \
                         result. You can start a new list without the continue parameter.",
                    )
                }
                ocm_storage::Error::Compacted { .. } => {
                    ApiError::expired("The resourceVersion for the provided list is too old.")
                }
                other => from_storage(other, Default::default()),
            })?;
            pinned = Some(page.revision);
            let more = page.continue_token.is_some();
            after = page.items.last().map(|kv| kv.key.clone()).or(after);
            for kv in &page.items {
                let obj =
                    CachedObject::from_stored(kv.key.clone(), &kv.value, kv.mod_revision.get())?;
                if self.matches(rt, &obj, q) {
                    items.push(Arc::new(obj));
                }
            }
            let rev = page.revision.get();
            if !more {
                return Ok(ListPage { items, rev, continue_token: None, remaining: None });
            }
            if q.limit > 0 && items.len() >= q.limit {
                let token = after.as_deref().map(|a| encode_continue(rev, a));
                // Without selectors every key is an item, so the keys after this page at its
                // revision are the objects that follow it.
                let unfiltered = q.labels.is_none() && q.fields.is_none();
                let remaining = match after.as_deref() {
                    Some(last) if unfiltered => self.remaining(rt, prefix, last, rev).await?,
                    _ => None,
                };
                return Ok(ListPage { items, rev, continue_token: token, remaining });
            }
        }
    }

    /// How many objects under `prefix` follow the key `last` at revision `rev`, from the watch
    /// cache once it has reached `rev`; `None` (the field left out, as kube-apiserver allows)
    /// when it does not in time or no longer holds the history since.
    async fn remaining(
        &self,
        rt: &ResourceType,
        prefix: &str,
        last: &str,
        rev: u64,
    ) -> Result<Option<u64>, ApiError> {
        if !self.cache.wait_for(rev, Duration::from_secs(3)).await {
            return Ok(None);
        }
        self.cache.count_after(&rt.prefix, prefix, last, rev)
    }

    /// One object from the watch cache (what a controller reads; no storage round trip).
    pub fn cached(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<CachedObject>> {
        self.cache.get(&rt.prefix, &rt.key(namespace, name)).ok().flatten()
    }

    /// The objects of a kind in a namespace (all namespaces for `""`), from the watch cache.
    pub fn cached_list(&self, rt: &ResourceType, namespace: &str) -> Vec<Arc<CachedObject>> {
        self.cache
            .list(&rt.prefix, &rt.namespace_prefix(namespace))
            .map(|(items, _)| items)
            .unwrap_or_default()
    }

    /// Whether an object passes a list's selectors.
    pub fn matches(&self, rt: &ResourceType, obj: &CachedObject, q: &ListQuery) -> bool {
        selectors_match(rt, obj, q.labels.as_ref(), q.fields.as_ref())
    }
}

/// Whether an object passes label and field selectors.
pub fn selectors_match(
    rt: &ResourceType,
    obj: &CachedObject,
    labels: Option<&LabelSelector>,
    fields: Option<&FieldSelector>,
) -> bool {
    if let Some(sel) = labels {
        if !sel.matches(|k| obj.label(k)) {
            return false;
        }
    }
    let Some(sel) = fields else { return true }; // labels need no parse
    let obj = &*obj.value();
    let values: Vec<(String, String)> = std::iter::once("metadata.name")
        .chain(std::iter::once("metadata.namespace"))
        .chain(rt.selectable_fields.iter().map(String::as_str))
        .map(|f| {
            let v = match f {
                "metadata.name" => object::name(obj).to_owned(),
                "metadata.namespace" => object::namespace(obj).to_owned(),
                other => object::field_string(obj, rt.strategy.field_path(other)),
            };
            (f.to_owned(), v)
        })
        .collect();
    sel.matches(|f| values.iter().find(|(k, _)| k == f).map(|(_, v)| v.as_str()))
}

pub(super) fn encode_continue(rev: u64, after: &str) -> String {
    let body = json!({"v": "meta.k8s.io/v1", "rv": rev, "start": after});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(body.to_string())
}

/// Decodes a continue token, refusing one that points outside the request's prefix.
pub(super) fn decode_continue(
    token: &str,
    prefix: &str,
) -> Result<(Option<u64>, String), ApiError> {
    let bad = || ApiError::bad_request("continue key is not valid: the token is malformed");
    let bytes =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rev = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_str).ok_or_else(bad)?;
    if !start.starts_with(prefix) || v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad());
    }
    Ok((Some(rev), start.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_stay_in_their_prefix() {
        let t = encode_continue(7, "/registry/core/secrets/ns1/a");
        assert_eq!(decode_continue(&t, "/registry/core/secrets/ns1/").unwrap().0, Some(7));
        assert!(decode_continue(&t, "/registry/core/secrets/ns2/").is_err());
        assert!(decode_continue("garbage!", "/").is_err());
    }
}
