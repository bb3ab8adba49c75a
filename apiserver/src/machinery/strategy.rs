//! What makes one kind different from another: the `Strategy` trait the generic registry calls
//! (pruning, defaulting, validation, per-kind preparation, version conversion, Table columns), and the few
//! strategies every kind is built from: typed core kinds, schema-checked OCM kinds and
//! schemaless workload kinds.

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

use ocm_proto::api::SchemaFn;
use ocm_proto::validation::FieldError;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::machinery::error::ApiError;
use crate::machinery::known_fields::KnownFields;
use crate::machinery::table::Column;

/// How names of a kind are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain (most kinds).
    Subdomain,
    /// DNS-1123 label (namespaces, managed clusters: a cluster name is a namespace name).
    Label,
    /// Any path segment: not `.` or `..`, no `/` or `%` (RBAC kinds: `system:discovery`).
    PathSegment,
}

/// A check of a write against the rest of the hub's state, as Kubernetes' validating
/// admission plugins: registered on the registry for one kind by the layer that holds that
/// state (a controller), and run on every create and main-resource update of the kind after
/// the kind's own validation.
pub trait Validating: Send + Sync {
    /// The errors of `obj`, given what else the hub holds now.
    fn validate(&self, obj: &Value) -> Vec<FieldError>;
}

/// The per-kind part of the registry's recipe. Every method has a neutral default, so a kind
/// states only what differs.
pub trait Strategy: Send + Sync {
    /// Drops fields the kind does not know, returning their paths (for `fieldValidation`).
    fn prune(&self, _obj: &mut Value) -> Vec<String> {
        Vec::new()
    }

    /// Fills defaults (after pruning, before validation).
    fn default(&self, _obj: &mut Value) {}

    /// Checks the whole object (metadata is checked by the registry) and returns every error
    /// at once. A body whose types do not fit the kind at all may instead be a 400 `BadRequest`.
    fn validate(&self, _obj: &Value) -> Result<Vec<FieldError>, ApiError> {
        Ok(Vec::new())
    }

    /// Checks an update against the stored object; by default the same as [`Strategy::validate`].
    fn validate_update(&self, obj: &Value, _old: &Value) -> Result<Vec<FieldError>, ApiError> {
        self.validate(obj)
    }

    /// Adjusts a new object before validation (status reset to its initial state, ...).
    fn prepare_create(&self, _obj: &mut Value) {}

    /// Admission: the rules that depend on the old object or on who writes (OCM's webhooks,
    /// kube's CSR admission). Runs after defaulting and before validation, on creates (`old` is
    /// `None`) and updates (`sub`: the subresource written). `who` is `None` for the hub's own
    /// writes. May fill fields in; refuses with its own error (403 for permissions).
    fn admit(
        &self,
        _obj: &mut Value,
        _old: Option<&Value>,
        _sub: Option<&str>,
        _who: Option<&crate::machinery::requester::Requester>,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// How names are checked.
    fn name_rule(&self) -> NameRule {
        NameRule::Subdomain
    }

    /// Whether a marked-for-deletion object may go now that `metadata.finalizers` is empty
    /// (namespaces also wait for `spec.finalizers`).
    fn ready_to_remove(&self, _obj: &Value) -> bool {
        true
    }

    /// Marks an object being deleted (namespaces turn `Terminating`); called once, when
    /// `deletionTimestamp` is first set.
    fn on_delete_mark(&self, _obj: &mut Value) {}

    /// Refuses deleting this object (a 403 with the reason), e.g. the namespaces every cluster
    /// must have.
    fn check_delete(&self, _obj: &Value) -> Result<(), String> {
        Ok(())
    }

    /// Whether objects carry `metadata.generation` (custom resources and workload kinds do;
    /// ConfigMaps, Secrets, Namespaces, RBAC and the other core kinds here do not).
    fn tracks_generation(&self) -> bool {
        true
    }

    /// Whether an update may omit `metadata.resourceVersion` (core kinds allow it; custom
    /// kinds, like the OCM ones, do not).
    fn allow_unconditional_update(&self) -> bool {
        true
    }

    /// Where a selectable field lives in the stored object (a kind stored as another kind's
    /// names some fields differently).
    fn field_path<'a>(&self, field: &'a str) -> &'a str {
        field
    }

    /// The Table columns after `Name` for objects of `version` (kube-apiserver's default
    /// convertor, `Created At`, unless the kind has a printer).
    fn columns(&self, _version: &str) -> Arc<[Column]> {
        crate::machinery::table::default_columns()
    }

    /// Where the published OpenAPI v3 schema of objects of `version` comes from, when the kind
    /// has one (`/openapi/v3`; kinds without one are published as objects of any shape).
    fn openapi_schema(&self, _version: &str) -> Option<OpenApiSchema> {
        None
    }

    /// Converts a stored object (storage version) to `version` of the same kind; the default
    /// rewrites `apiVersion` only, which is right when the versions' schemas are identical.
    fn storage_to_version(&self, mut obj: Value, api_version: &str) -> Result<Value, ApiError> {
        set_api_version(&mut obj, api_version);
        Ok(obj)
    }

    /// Converts an object of some served version to the storage version.
    fn version_to_storage(
        &self,
        mut obj: Value,
        storage_api_version: &str,
    ) -> Result<Value, ApiError> {
        set_api_version(&mut obj, storage_api_version);
        Ok(obj)
    }
}

/// The source of a kind's published OpenAPI schema (`openapi.rs` turns it into components).
#[derive(Clone, Copy)]
pub enum OpenApiSchema {
    /// Derived from the kind's Rust type (`schemars`): descriptions from its doc comments,
    /// upstream types as named components.
    Derived(SchemaFn),
    /// A CRD's own `openAPIV3Schema`, for a served version with no Rust type.
    Crd(&'static Value),
}

/// Rewrites `apiVersion` (keeping it right after nothing else; order is cosmetic).
pub fn set_api_version(obj: &mut Value, api_version: &str) {
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), Value::String(api_version.to_owned()));
    }
}

/// A kind stored as it comes: only metadata is checked (the cluster profile's workload kinds).
/// It may still publish its upstream type's schema, for `kubectl explain`; fields that schema
/// does not declare are then unknown (pruned, and reported for `fieldValidation`).
#[derive(Default)]
pub struct Schemaless {
    published: Option<SchemaFn>,
    known: OnceLock<KnownFields>,
}

impl Schemaless {
    /// Stored as it comes, published as `T` describes it.
    pub fn published_as<T: JsonSchema>() -> Schemaless {
        Schemaless { published: Some(T::json_schema), known: OnceLock::new() }
    }
}

impl Strategy for Schemaless {
    fn prune(&self, obj: &mut Value) -> Vec<String> {
        match self.published {
            Some(schema) => self.known.get_or_init(|| KnownFields::of(schema)).prune(obj),
            None => Vec::new(),
        }
    }

    fn openapi_schema(&self, _version: &str) -> Option<OpenApiSchema> {
        self.published.map(OpenApiSchema::Derived)
    }
}

/// Extra checks a typed kind adds after its types fit.
pub type Check = fn(&Value) -> Vec<FieldError>;

/// A core kind from `k8s-openapi`: the body must deserialize into `T` (else 400, the way
/// kube-apiserver refuses an undecodable body), then `check` runs.
pub struct Typed<T> {
    kind: &'static str,
    check: Option<Check>,
    defaults: Option<fn(&mut Value)>,
    name_rule: NameRule,
    columns: Option<Arc<[Column]>>,
    known: OnceLock<KnownFields>,
    _t: PhantomData<fn() -> T>,
}

impl<T> Typed<T> {
    /// A typed strategy for `kind` with optional extra checks.
    pub const fn new(kind: &'static str, check: Option<Check>) -> Typed<T> {
        Typed {
            kind,
            check,
            defaults: None,
            name_rule: NameRule::Subdomain,
            columns: None,
            known: OnceLock::new(),
            _t: PhantomData,
        }
    }

    /// The kind's printer (its Table columns after `Name`).
    pub fn columns(mut self, columns: Arc<[Column]>) -> Typed<T> {
        self.columns = Some(columns);
        self
    }

    /// What the kind's defaulting (and kube-apiserver's conversion) does on every write.
    pub fn defaults(mut self, f: fn(&mut Value)) -> Typed<T> {
        self.defaults = Some(f);
        self
    }

    /// Names are path segments (RBAC kinds).
    pub fn path_segment_names(mut self) -> Typed<T> {
        self.name_rule = NameRule::PathSegment;
        self
    }

    /// Names must be DNS labels.
    pub fn label_names(mut self) -> Typed<T> {
        self.name_rule = NameRule::Label;
        self
    }
}

impl<T: DeserializeOwned + JsonSchema> Strategy for Typed<T> {
    fn tracks_generation(&self) -> bool {
        false
    }

    fn prune(&self, obj: &mut Value) -> Vec<String> {
        self.known.get_or_init(|| KnownFields::of(T::json_schema)).prune(obj)
    }

    fn default(&self, obj: &mut Value) {
        if let Some(f) = self.defaults {
            f(obj);
        }
    }

    fn openapi_schema(&self, _version: &str) -> Option<OpenApiSchema> {
        Some(OpenApiSchema::Derived(T::json_schema))
    }

    fn validate(&self, obj: &Value) -> Result<Vec<FieldError>, ApiError> {
        if let Err(e) = T::deserialize(obj) {
            return Err(ApiError::bad_request(format!(
                "{} in version \"v1\" cannot be handled as a {}: {e}",
                self.kind, self.kind
            )));
        }
        Ok(self.check.map(|c| c(obj)).unwrap_or_default())
    }

    fn name_rule(&self) -> NameRule {
        self.name_rule
    }

    fn columns(&self, _version: &str) -> Arc<[Column]> {
        self.columns.clone().unwrap_or_else(crate::machinery::table::default_columns)
    }
}

/// Required string fields: a `Required` error for each absent or empty one.
pub fn require(obj: &Value, paths: &[&str]) -> Vec<FieldError> {
    paths
        .iter()
        .filter(|p| {
            crate::machinery::object::at_path(obj, p)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        })
        .map(|p| FieldError::required(*p, ""))
        .collect()
}
