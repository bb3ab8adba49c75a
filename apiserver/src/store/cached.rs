//! One object as the watch cache holds it: its JSON at one revision, serialized once, with
//! the few fields readers need without a parse (only its metadata is parsed when it arrives),
//! the parsed form while the object is recent, the renderings watchers asked for, and its JSON
//! deflated once it is at rest.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use serde_json::Value;

use crate::machinery::error::ApiError;
use crate::machinery::intern;
use crate::machinery::object;
use crate::machinery::scheme::kind_prefix;

/// One object as stored, at one revision: its JSON (storage version, resourceVersion set),
/// serialized once. The parsed form is made at the first read and kept only while the object
/// is recent (see [`CacheConfig::hot_bytes`]): a fleet's objects at rest cost their JSON, not a
/// tree of maps five times its size; the readers of a fresh event (watchers, controllers)
/// share one parse, and an object nobody reads whole (a watch sends its JSON) is never parsed.
#[derive(Debug)]
pub struct CachedObject {
    /// The storage key.
    pub key: String,
    /// The revision this state was written at.
    pub rev: u64,
    /// The object as JSON (see [`CachedObject::json`]); replaced only by [`CachedObject::pack`].
    json: RwLock<Json>,
    /// `metadata.uid` (the garbage collector's index, without a parse).
    pub uid: Box<str>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Whether `metadata.ownerReferences` names an owner.
    pub owned: bool,
    /// `metadata.labels`, sorted by key: label selectors (lists, watches, cluster sets) match
    /// without a parse.
    labels: Box<[(Box<str>, Box<str>)]>,
    /// The parsed object while it is hot (once read).
    parsed: Mutex<Parsed>,
    /// Other renderings watchers asked for (a one-row Table, the metadata), made once for all
    /// of them: `(form, version)` → bytes. A handful at most.
    rendered: std::sync::Mutex<Vec<(&'static str, String, Bytes)>>,
}

/// Whether an object's parsed form may be kept, and the one kept.
#[derive(Debug)]
enum Parsed {
    /// Recent: the first read's parse is kept and shared (`None` until then).
    Hot(Option<Arc<Value>>),
    /// At rest: every read parses for itself.
    Cold,
}

impl CachedObject {
    /// Reads stored bytes, stamping `rev` as the resourceVersion. Only `metadata` is parsed
    /// (and written again with the resourceVersion); the other top-level fields are kept as
    /// stored. JSON that is not an object with one `metadata` object is parsed whole.
    pub fn from_stored(key: String, bytes: &[u8], rev: u64) -> Result<CachedObject, ApiError> {
        if let Some(obj) = CachedObject::from_fields(&key, bytes, rev) {
            return Ok(obj);
        }
        let mut value: Value = serde_json::from_slice(bytes)
            .map_err(|e| ApiError::internal(format!("stored object {key} is not JSON: {e}")))?;
        object::set_resource_version(&mut value, rev);
        Ok(CachedObject::new(key, value, rev))
    }

    /// The object from its top-level fields as stored, with only its metadata parsed; `None`
    /// for JSON that is not an object of distinct fields holding a `metadata` object.
    fn from_fields(key: &str, bytes: &[u8], rev: u64) -> Option<CachedObject> {
        let TopLevel(fields) = serde_json::from_slice::<TopLevel<'_>>(bytes).ok()?;
        let mut names: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return None;
        }
        let (_, raw) = fields.iter().find(|(k, _)| k == "metadata")?;
        let metadata: Value = serde_json::from_str(raw.get()).ok()?;
        if !metadata.is_object() {
            return None;
        }
        let mut head = Value::Object(serde_json::Map::from_iter([("metadata".into(), metadata)]));
        object::set_resource_version(&mut head, rev);
        let json = Json::of_fields(&fields, &head["metadata"]);
        Some(CachedObject::with_facts(key.to_owned(), &head, json, rev, Parsed::Hot(None)))
    }

    /// Wraps an object whose resourceVersion is already `rev` (kept parsed until cooled).
    pub fn new(key: String, value: Value, rev: u64) -> CachedObject {
        let json = Json::of(&value);
        let parsed = Parsed::Hot(None);
        let mut obj = CachedObject::with_facts(key, &value, json, rev, parsed);
        obj.parsed = Mutex::new(Parsed::Hot(Some(Arc::new(value))));
        obj
    }

    /// An object with its facts read from `value` (its `metadata` is all that is read).
    fn with_facts(
        key: String,
        value: &Value,
        json: Json,
        rev: u64,
        parsed: Parsed,
    ) -> CachedObject {
        CachedObject {
            key,
            rev,
            json: RwLock::new(json),
            uid: object::uid(value).into(),
            deleting: object::is_deleting(value),
            owned: !object::owner_uids(value).is_empty(),
            labels: value
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|m| {
                    let mut l: Vec<(Box<str>, Box<str>)> = m
                        .iter()
                        .filter_map(|(k, v)| Some((k.as_str().into(), v.as_str()?.into())))
                        .collect();
                    l.sort_unstable();
                    l.into_boxed_slice()
                })
                .unwrap_or_default(),
            parsed: Mutex::new(parsed),
            rendered: Default::default(),
        }
    }

    fn parsed(&self) -> std::sync::MutexGuard<'_, Parsed> {
        self.parsed.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The object, parsed: while hot, the first read's parse, shared; otherwise parsed again
    /// from its JSON (and then not kept: the caller holds it as long as it needs it).
    pub fn value(&self) -> Arc<Value> {
        if let Some(v) = self.hot() {
            return v;
        }
        // The JSON was made from a Value, so it parses; Null would only follow a bug.
        let value = Arc::new(serde_json::from_slice(&self.json()).unwrap_or(Value::Null));
        // Parsed outside the lock; kept if still hot and no other reader kept one meanwhile.
        match &mut *self.parsed() {
            Parsed::Hot(Some(kept)) => Arc::clone(kept),
            Parsed::Hot(slot @ None) => Arc::clone(slot.insert(value)),
            Parsed::Cold => value,
        }
    }

    /// The parsed object, while it is kept.
    fn hot(&self) -> Option<Arc<Value>> {
        match &*self.parsed() {
            Parsed::Hot(kept) => kept.clone(),
            Parsed::Cold => None,
        }
    }

    /// The object without its top-level field `key` when that is one of its large values
    /// (a ManifestWork's manifests) and the object is not kept parsed: what readers of its
    /// metadata and status need, parsed without the large value (which reads as `null`).
    /// While hot, the whole object as parsed.
    pub fn value_without(&self, key: &str) -> Arc<Value> {
        if let Some(v) = self.hot() {
            return v;
        }
        let json = self.json_read();
        let Json::Parts(parts, keys) = &*json else {
            drop(json);
            return self.value();
        };
        let mut out = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            // Parts alternate: the runs between large values (even), the large values (odd).
            let skip = i % 2 == 1 && keys.get(i / 2).is_some_and(|k| &**k == key);
            out.extend_from_slice(if skip { b"null" } else { p });
        }
        Arc::new(serde_json::from_slice(&out).unwrap_or(Value::Null))
    }

    fn json_read(&self) -> std::sync::RwLockReadGuard<'_, Json> {
        self.json.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The object as JSON: its storage version, resourceVersion set.
    pub fn json(&self) -> Bytes {
        match &*self.json_read() {
            Json::Whole(bytes) => bytes.clone(),
            Json::Parts(parts, _) => {
                let mut out = Vec::with_capacity(parts.iter().map(Bytes::len).sum());
                for p in parts {
                    out.extend_from_slice(p);
                }
                Bytes::from(out)
            }
            Json::Packed(packed, len) => Bytes::from(inflate(packed, *len)),
        }
    }

    /// The length of [`CachedObject::json`].
    pub fn json_len(&self) -> usize {
        match &*self.json_read() {
            Json::Whole(bytes) => bytes.len(),
            Json::Parts(parts, _) => parts.iter().map(Bytes::len).sum(),
            Json::Packed(_, len) => *len,
        }
    }

    /// Keeps the JSON of an object at rest deflated when that saves at least a quarter of it:
    /// a whole JSON of [`PACK_MIN`] bytes or more (parts are left as they are: their large
    /// values are shared already). Each later read inflates it, a few microseconds a kilobyte.
    pub(crate) fn pack(&self) {
        let bytes = match &*self.json_read() {
            Json::Whole(bytes) if bytes.len() >= PACK_MIN => bytes.clone(),
            _ => return,
        };
        let Some(packed) = deflate(&bytes) else { return };
        let mut json = self.json.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if matches!(&*json, Json::Whole(_)) {
            *json = Json::Packed(packed.into_boxed_slice(), bytes.len());
        }
    }

    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        let i = self.labels.binary_search_by(|(k, _)| (**k).cmp(key)).ok()?;
        Some(&self.labels[i].1)
    }

    /// The namespace (`""` for a cluster-scoped kind) and name, read from the key (no parse).
    pub fn namespace_name(&self) -> (&str, &str) {
        let rest = &self.key[kind_prefix(&self.key).len().min(self.key.len())..];
        rest.split_once('/').unwrap_or(("", rest))
    }

    /// Whether `other` has the same labels (no parse).
    pub fn same_labels(&self, other: &CachedObject) -> bool {
        self.labels == other.labels
    }

    /// Drops the parsed form (the JSON stays).
    pub(crate) fn cool(&self) {
        *self.parsed() = Parsed::Cold;
    }

    /// The object rendered as `form` at `version`: made by `make` the first time, shared by
    /// every later caller (every watcher of the same form sees the same bytes).
    pub fn rendered<E>(
        &self,
        form: &'static str,
        version: &str,
        make: impl FnOnce() -> Result<Bytes, E>,
    ) -> Result<Bytes, E> {
        let mut done = self.rendered.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, _, bytes)) = done.iter().find(|(f, v, _)| *f == form && v == version) {
            return Ok(bytes.clone());
        }
        let bytes = make()?;
        done.push((form, version.to_owned(), bytes.clone()));
        Ok(bytes)
    }
}

/// JSON shorter than this is not packed: deflate saves little on it.
const PACK_MIN: usize = 512;

/// An object's JSON, whole or in parts that concatenate to it: a large top-level value (a
/// ManifestWork's `spec`, a ConfigMap's `data`) is its own part, interned, so the objects and
/// versions that share it (one work for a thousand clusters, a spec across its status
/// updates in the history) hold one copy. At rest, a whole JSON may be packed.
#[derive(Debug)]
enum Json {
    Whole(Bytes),
    /// The runs between large values and the large values, alternating (a run first and
    /// last); the keys of the large values.
    Parts(Box<[Bytes]>, Box<[Box<str>]>),
    /// The whole JSON deflated (raw DEFLATE, fastest level), and its length.
    Packed(Box<[u8]>, usize),
}

thread_local! {
    /// Each thread's deflate and inflate state (hundreds of kilobytes between them), reset for
    /// each object rather than made for it.
    static CODEC: RefCell<(Compress, Decompress)> =
        RefCell::new((Compress::new(Compression::fast(), false), Decompress::new(false)));
}

/// `bytes` deflated, or `None` when that does not save a quarter of them.
fn deflate(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    CODEC.with_borrow_mut(|(compress, _)| {
        compress.reset();
        // An output buffer that fills up before the end means too little is saved.
        let status = compress.compress_vec(bytes, &mut out, FlushCompress::Finish);
        matches!(status, Ok(Status::StreamEnd)).then_some(out)
    })
}

/// The bytes [`deflate`] packed, `len` of them. Packed bytes come from [`deflate`] in this
/// process, so they inflate; empty bytes (read as `null`) would only follow a bug.
fn inflate(packed: &[u8], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    CODEC.with_borrow_mut(|(_, decompress)| {
        decompress.reset(false);
        match decompress.decompress_vec(packed, &mut out, FlushDecompress::Finish) {
            Ok(Status::StreamEnd) if out.len() == len => out,
            other => {
                tracing::error!(?other, "watch cache: a packed object does not inflate");
                Vec::new()
            }
        }
    })
}

impl Json {
    /// Serializes `value` exactly as `serde_json::to_vec` would, cut around its large
    /// top-level values.
    fn of(value: &Value) -> Json {
        let Some(map) = value.as_object() else {
            return Json::Whole(intern::tight(serde_json::to_vec(value).unwrap_or_default()));
        };
        let mut cut = Cut::default();
        for (k, v) in map {
            let at = cut.key(k);
            // Writing JSON into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut cut.run, v);
            if cut.run.len() - at >= intern::MIN_BYTES {
                let value = cut.run.split_off(at);
                cut.large(k, value);
            }
        }
        cut.finish()
    }

    /// What [`Json::of`] makes of an object, cut from its stored top-level `fields` (the
    /// store's JSON, which lacks only the resourceVersion) instead of written again: the
    /// top-level values are taken as they are stored, and only `metadata` is written.
    fn of_fields(fields: &[(String, &serde_json::value::RawValue)], metadata: &Value) -> Json {
        let mut cut = Cut::default();
        for (k, raw) in fields {
            cut.key(k);
            let raw = raw.get().as_bytes();
            if k == "metadata" {
                let _ = serde_json::to_writer(&mut cut.run, metadata);
            } else if raw.len() >= intern::MIN_BYTES {
                cut.large(k, raw.to_vec());
            } else {
                cut.run.extend_from_slice(raw);
            }
        }
        cut.finish()
    }
}

/// An object's JSON being cut: the parts so far, the keys of the large values among them, and
/// the run of small fields since the last large value.
struct Cut {
    parts: Vec<Bytes>,
    keys: Vec<Box<str>>,
    run: Vec<u8>,
}

impl Default for Cut {
    fn default() -> Cut {
        Cut { parts: Vec::new(), keys: Vec::new(), run: vec![b'{'] }
    }
}

impl Cut {
    /// Writes the next field's key; where its value starts in the run.
    fn key(&mut self, k: &str) -> usize {
        if self.run.len() > 1 || !self.parts.is_empty() {
            self.run.push(b',');
        }
        // Writing JSON into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut self.run, k);
        self.run.push(b':');
        self.run.len()
    }

    /// The value of field `k` as its own interned part. Only the large value can be shared:
    /// the run carries this object's metadata.
    fn large(&mut self, k: &str, value: Vec<u8>) {
        self.parts.push(intern::tight(std::mem::take(&mut self.run)));
        self.parts.push(intern::intern(value));
        self.keys.push(Box::from(k));
    }

    fn finish(mut self) -> Json {
        self.run.push(b'}');
        if self.parts.is_empty() {
            return Json::Whole(intern::tight(self.run));
        }
        self.parts.push(intern::tight(self.run));
        Json::Parts(self.parts.into_boxed_slice(), self.keys.into_boxed_slice())
    }
}

/// An object's top-level fields as the slices of its JSON that hold them, in order.
struct TopLevel<'a>(Vec<(String, &'a serde_json::value::RawValue)>);

impl<'de> serde::Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = m.next_entry()? {
                    out.push(entry);
                }
                Ok(TopLevel(out))
            }
        }
        d.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_object_reads_as_it_did() {
        let conditions: Vec<Value> = (0..16)
            .map(|i| {
                serde_json::json!({"type": format!("T{i}"), "status": "True", "reason": "Done",
                "message": "every resource is applied and available"})
            })
            .collect();
        let v = serde_json::json!({"metadata": {"name": "w", "namespace": "ns", "uid": "u1",
            "labels": {"a": "1"}}, "status": {"conditions": conditions}});
        let obj = CachedObject::new("/registry/k/ns/w".into(), v.clone(), 3);
        let (json, len) = (obj.json(), obj.json_len());
        assert!(len >= PACK_MIN);
        obj.cool();
        obj.pack();
        assert!(matches!(*obj.json_read(), Json::Packed(ref p, _) if p.len() * 4 <= len * 3));
        assert_eq!((obj.json(), obj.json_len()), (json, len));
        assert_eq!(*obj.value(), v);
        assert_eq!((obj.label("a"), &*obj.uid), (Some("1"), "u1"));
        obj.pack();
        assert_eq!(obj.json_len(), len, "packing twice changes nothing");
        // Small JSON and JSON in parts are left as they are.
        let small = CachedObject::new("/registry/k/ns/s".into(), serde_json::json!({"a": 1}), 4);
        small.pack();
        assert!(matches!(*small.json_read(), Json::Whole(_)));
        let big =
            serde_json::json!({"metadata": {"name": "b"}, "spec": "x".repeat(intern::MIN_BYTES)});
        let parts = CachedObject::new("/registry/k/ns/b".into(), big, 5);
        parts.pack();
        assert!(matches!(*parts.json_read(), Json::Parts(..)));
    }

    #[test]
    fn what_is_kept_unparsed_reads_as_the_object_does() {
        let v = serde_json::json!({"metadata": {"name": "a", "namespace": "ns", "uid": "u1",
            "labels": {"b": "2", "a": "1"}, "ownerReferences": [{"uid": "o1"}]}});
        let obj = CachedObject::new("/registry/core/secrets/ns/a".into(), v.clone(), 7);
        assert_eq!(obj.namespace_name(), ("ns", "a"));
        assert_eq!((obj.label("a"), obj.label("b"), obj.label("c")), (Some("1"), Some("2"), None));
        assert_eq!((&*obj.uid, obj.owned, obj.deleting), ("u1", true, false));
        let scoped = CachedObject::new("/registry/core/namespaces/ns".into(), v.clone(), 7);
        assert_eq!(scoped.namespace_name(), ("", "ns"));
        assert!(obj.same_labels(&scoped));
        let other = serde_json::json!({"metadata": {"name": "a", "labels": {"a": "1"}}});
        assert!(!obj.same_labels(&CachedObject::new("/registry/g/p/a".into(), other, 8)));
        // Cooled, the object parses again from its JSON, to the same value.
        let hot = obj.value();
        obj.cool();
        let cold = obj.value();
        assert!(!Arc::ptr_eq(&hot, &cold));
        assert_eq!(*cold, v);
    }

    #[test]
    fn large_top_level_values_are_held_once_and_the_json_is_exact() {
        let big = "x".repeat(intern::MIN_BYTES);
        let work = |ns: &str, status: Value| {
            serde_json::json!({"apiVersion": "v1", "kind": "K",
                "metadata": {"name": "w", "namespace": ns, "labels": {"a": "é\"q"}},
                "spec": {"manifests": [{"data": big}]}, "status": status})
        };
        let (a, b) = (work("a", serde_json::json!({})), work("b", serde_json::json!({"s": 1})));
        let (ca, cb) = (
            CachedObject::new("/registry/k/a/w".into(), a.clone(), 1),
            CachedObject::new("/registry/k/b/w".into(), b.clone(), 2),
        );
        assert_eq!(ca.json(), serde_json::to_vec(&a).unwrap());
        assert_eq!(cb.json(), serde_json::to_vec(&b).unwrap());
        assert_eq!(ca.json_len(), ca.json().len());
        let spec = |o: &CachedObject| match &*o.json_read() {
            Json::Parts(p, _) => p[1].as_ptr(),
            _ => panic!("a large spec is its own part"),
        };
        assert_eq!(spec(&ca), spec(&cb), "both objects hold one copy of the spec");
        assert!(Arc::ptr_eq(&ca.value_without("spec"), &ca.value()), "hot: the whole object");
        ca.cool();
        assert_eq!(*ca.value(), a, "a cooled object parses back");
        let mut headless = a.clone();
        headless["spec"] = Value::Null;
        assert_eq!(*ca.value_without("spec"), headless, "cold: parsed without the large spec");
        assert_eq!(*ca.value_without("status"), a, "only a large value is left out");
        // Cut from the stored JSON (no resourceVersion), the same bytes and parts.
        for (v, rev) in [(&a, 1), (&b, 2)] {
            let mut stored = v.clone();
            crate::machinery::object::meta_mut(&mut stored).remove("resourceVersion");
            let obj = CachedObject::from_stored(
                "/registry/k/x/w".into(),
                &serde_json::to_vec(&stored).unwrap(),
                rev,
            )
            .unwrap();
            let mut expected = v.clone();
            crate::machinery::object::set_resource_version(&mut expected, rev);
            assert_eq!(obj.json(), serde_json::to_vec(&expected).unwrap());
            assert_eq!(spec(&obj), spec(&ca), "the stored spec is interned too");
            obj.cool();
            assert_eq!(*obj.value(), expected);
        }
        let small = serde_json::json!({"metadata": {"name": "s"}, "data": {"k": "v"}});
        let cs = CachedObject::new("/registry/k/s".into(), small.clone(), 3);
        assert!(matches!(*cs.json_read(), Json::Whole(_)));
        assert_eq!(cs.json(), serde_json::to_vec(&small).unwrap());
    }

    /// A stored object arrives with only its metadata read: its facts are there, its JSON is
    /// exact, and it is parsed at the first read, that parse shared while it is hot; cooled,
    /// every read parses for itself. Stored JSON without a metadata object is parsed whole.
    #[test]
    fn a_stored_object_is_parsed_at_its_first_read() {
        let stored = serde_json::json!({"kind": "K", "metadata": {"name": "a", "uid": "u1",
            "labels": {"x": "y"}}, "status": {"n": 1}});
        let bytes = serde_json::to_vec(&stored).unwrap();
        let obj = CachedObject::from_stored("/registry/g/k/a".into(), &bytes, 5).unwrap();
        assert!(matches!(*obj.parsed(), Parsed::Hot(None)), "nothing parsed but metadata");
        assert_eq!((&*obj.uid, obj.label("x")), ("u1", Some("y")));
        let mut expected = stored.clone();
        object::set_resource_version(&mut expected, 5);
        assert_eq!(obj.json(), serde_json::to_vec(&expected).unwrap());
        let first = obj.value();
        assert_eq!(*first, expected);
        assert!(Arc::ptr_eq(&first, &obj.value()), "the first read's parse is shared");
        obj.cool();
        assert!(!Arc::ptr_eq(&obj.value(), &obj.value()), "a cold object keeps no parse");
        for odd in [&b"[1]"[..], br#"{"metadata": 1}"#, br#"{"metadata": {}, "metadata": {}}"#] {
            let whole = CachedObject::from_stored("/registry/g/k/b".into(), odd, 6);
            assert!(whole.is_ok_and(|o| matches!(*o.parsed(), Parsed::Hot(Some(_)))));
        }
    }

    #[test]
    fn renderings_are_made_once_per_form_and_version() {
        let obj = CachedObject::new("/registry/k/a".into(), serde_json::json!({"a": 1}), 1);
        let made = std::cell::Cell::new(0);
        let make = |text: &'static str| {
            made.set(made.get() + 1);
            Ok::<_, ()>(Bytes::from_static(text.as_bytes()))
        };
        assert_eq!(obj.rendered("table/v1/metadata", "v1", || make("row")).unwrap(), "row");
        assert_eq!(obj.rendered("table/v1/metadata", "v1", || make("again")).unwrap(), "row");
        assert_eq!(obj.rendered("table/v1/metadata", "v2", || make("v2")).unwrap(), "v2");
        assert_eq!(obj.rendered("v1", "", || make("meta")).unwrap(), "meta");
        assert_eq!(made.get(), 3);
    }
}
