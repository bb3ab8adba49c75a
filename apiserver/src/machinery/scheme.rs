//! The scheme: the one table of every kind the hub serves (group, versions, names, scope,
//! subresources, selectable fields and its [`Strategy`]), built per profile. Adding a kind means
//! adding a row here; nothing else in the hub is kind-specific.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::{certificates, coordination, core, rbac};
use ocm_proto::validation::FieldError;
use serde_json::{Value, json};

use crate::machinery::core_validation;
use crate::machinery::error::ApiError;
use crate::machinery::merge::shape::{self, Shape};
use crate::machinery::object;
use crate::machinery::strategy::{NameRule, OpenApiSchema, Schemaless, Strategy, Typed, require};
use crate::machinery::table;

/// A subresource and the parts of the object it writes.
#[derive(Debug, Clone)]
pub struct Subresource {
    /// `status`, `approval`, `finalize`.
    pub name: &'static str,
    /// The paths a write to this subresource replaces; everything else is kept from the stored
    /// object. The main resource keeps the stored value of every path of `status`.
    pub owns: &'static [&'static str],
    /// An action answered by the server instead of a part of the object (create only; the
    /// request and response are another kind).
    pub action: Option<Action>,
}

impl Subresource {
    /// A subresource that writes `owns` of the object.
    pub const fn part(name: &'static str, owns: &'static [&'static str]) -> Subresource {
        Subresource { name, owns, action: None }
    }
}

/// The action subresources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `serviceaccounts/token`: a `TokenRequest` answered with a signed token.
    TokenRequest,
    /// `placements/explain` (read): what each scheduling step kept or dropped, as a Table.
    ExplainPlacement,
    /// `manifestworkreplicasets/render` (read): the ManifestWork one cluster gets.
    RenderWork,
}

impl Action {
    /// The group, version and kind the action takes and answers.
    pub fn kind(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Action::TokenRequest => ("authentication.k8s.io", "v1", "TokenRequest"),
            Action::ExplainPlacement => ("meta.k8s.io", "v1", "Table"),
            Action::RenderWork => ("work.open-cluster-management.io", "v1", "ManifestWork"),
        }
    }

    /// The one verb the action answers: `create` (POST a request) or `get` (a computed view).
    pub fn verb(self) -> &'static str {
        match self {
            Action::TokenRequest => "create",
            Action::ExplainPlacement | Action::RenderWork => "get",
        }
    }
}

const STATUS: Subresource = Subresource::part("status", &["status"]);

/// Which kinds a hub serves (design §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The OCM hub: OCM kinds plus the core kinds they need.
    Hub,
    /// A plain Kubernetes API with workload kinds, stored schemaless (for the agent's tests).
    Cluster,
}

/// One served resource (all its versions).
pub struct ResourceType {
    /// API group (`""` = core).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Kind of its lists.
    pub list_kind: String,
    /// Plural resource name (URL segment).
    pub plural: String,
    /// Singular resource name.
    pub singular: String,
    /// Short names (`mcl`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Served versions, preferred first.
    pub versions: Vec<String>,
    /// The version objects are stored at.
    pub storage_version: String,
    /// The apiVersion objects are stored as when it belongs to another group: events.k8s.io
    /// Events are core Events underneath (one store, two views), as in Kubernetes.
    pub stored_as: Option<String>,
    /// Subresources (`status`, ...).
    pub subresources: Vec<Subresource>,
    /// Field-selector paths beyond `metadata.name` and `metadata.namespace`.
    pub selectable_fields: Vec<String>,
    /// The per-kind rules.
    pub strategy: Arc<dyn Strategy>,
    /// Storage prefix of every object of the kind (`/registry/<group>/<plural>/`).
    pub prefix: String,
    /// The merge shape of each served version (strategic merge patch, field management).
    pub shapes: HashMap<String, Arc<Shape>>,
    /// A review kind: created only, never stored, answered by the authorizer.
    pub review: Option<Review>,
}

impl std::fmt::Debug for ResourceType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ResourceType({}/{})", self.group, self.plural)
    }
}

impl ResourceType {
    /// `group/version` (or `version` for core) of a version.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() { version.to_owned() } else { format!("{}/{version}", self.group) }
    }

    /// The apiVersion stored objects carry.
    pub fn storage_api_version(&self) -> String {
        self.stored_as.clone().unwrap_or_else(|| self.api_version(&self.storage_version))
    }

    /// A body sent at `version` (apiVersion and kind set to this kind's), converted to the
    /// storage version.
    pub fn to_storage(&self, version: &str, mut body: Value) -> Result<Value, ApiError> {
        if let Some(map) = body.as_object_mut() {
            map.insert("apiVersion".into(), Value::String(self.api_version(version)));
            map.insert("kind".into(), Value::String(self.kind.clone()));
        }
        self.strategy.version_to_storage(body, &self.storage_api_version())
    }

    /// A stored object converted to `version`.
    pub fn to_version(&self, version: &str, obj: Value) -> Result<Value, ApiError> {
        let wanted = self.api_version(version);
        if obj.get("apiVersion").and_then(Value::as_str) == Some(wanted.as_str()) {
            return Ok(obj);
        }
        self.strategy.storage_to_version(obj, &wanted)
    }

    /// The storage key of an object.
    pub fn key(&self, namespace: &str, name: &str) -> String {
        if self.namespaced {
            format!("{}{namespace}/{name}", self.prefix)
        } else {
            format!("{}{name}", self.prefix)
        }
    }

    /// The storage prefix of one namespace's objects (or of all, for `""`).
    pub fn namespace_prefix(&self, namespace: &str) -> String {
        if self.namespaced && !namespace.is_empty() {
            format!("{}{namespace}/", self.prefix)
        } else {
            self.prefix.clone()
        }
    }

    /// The merge shape of objects of `version` (a version, or a whole apiVersion; the storage
    /// version's for an unknown one).
    pub fn shape(&self, version: &str) -> Arc<Shape> {
        let version = version.rsplit('/').next().unwrap_or(version);
        self.shapes
            .get(version)
            .or_else(|| self.shapes.get(&self.storage_version))
            .cloned()
            .unwrap_or_else(|| Arc::new(Shape::Deduced))
    }

    /// The subresource of this name.
    pub fn subresource(&self, name: &str) -> Option<&Subresource> {
        self.subresources.iter().find(|s| s.name == name)
    }

    /// Whether the kind has a status subresource.
    pub fn has_status(&self) -> bool {
        self.subresource("status").is_some()
    }

    /// Whether `field` may be used in a field selector.
    pub fn selectable(&self, field: &str) -> bool {
        field == "metadata.name"
            || (field == "metadata.namespace")
            || self.selectable_fields.iter().any(|f| f == field)
    }
}

/// The kinds a hub serves, looked up by group/version/plural and by kind.
#[derive(Debug, Default)]
pub struct Scheme {
    types: Vec<Arc<ResourceType>>,
    by_resource: HashMap<(String, String), usize>,
}

impl Scheme {
    /// The scheme of a profile.
    pub fn new(profile: Profile) -> Scheme {
        let mut scheme = Scheme::default();
        for rt in core_types(profile) {
            scheme.add(rt);
        }
        for rt in crate::machinery::ocm::ocm_types(profile) {
            scheme.add(rt);
        }
        scheme
    }

    fn add(&mut self, rt: ResourceType) {
        let idx = self.types.len();
        self.by_resource.insert((rt.group.clone(), rt.plural.clone()), idx);
        self.types.push(Arc::new(rt));
    }

    /// Every served kind.
    pub fn types(&self) -> &[Arc<ResourceType>] {
        &self.types
    }

    /// The kinds with objects in storage, each store once: not the review kinds (answered,
    /// never stored), not a view of another kind's objects (events.k8s.io Events).
    pub fn stored_types(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.types.iter().filter(|rt| rt.review.is_none() && rt.stored_as.is_none())
    }

    /// The kind served at `group/version/plural`, if that version is served.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<&Arc<ResourceType>> {
        let rt = &self.types[*self.by_resource.get(&(group.to_owned(), plural.to_owned()))?];
        rt.versions.iter().any(|v| v == version).then_some(rt)
    }

    /// The kind whose storage prefix starts `key`.
    pub fn for_key(&self, key: &str) -> Option<&Arc<ResourceType>> {
        let rest = key.strip_prefix(STORAGE_ROOT)?;
        let mut parts = rest.splitn(3, '/');
        let group = parts.next()?;
        let plural = parts.next()?;
        let group = if group == "core" { "" } else { group };
        Some(&self.types[*self.by_resource.get(&(group.to_owned(), plural.to_owned()))?])
    }

    /// Every group with its versions (preferred first), in a stable order: core first.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for rt in &self.types {
            let entry = match out.iter_mut().find(|(g, _)| *g == rt.group) {
                Some(e) => e,
                None => {
                    out.push((rt.group.clone(), Vec::new()));
                    out.last_mut().expect("pushed")
                }
            };
            for v in &rt.versions {
                if !entry.1.contains(v) {
                    entry.1.push(v.clone());
                }
            }
        }
        for (_, versions) in &mut out {
            versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out
    }
}

/// Kubernetes' version ordering: GA over beta over alpha, higher numbers first.
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else { return (0, 0, 0) };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (level, minor) = if tail.is_empty() {
        (3, 0)
    } else if let Some(n) = tail.strip_prefix("beta") {
        (2, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n.parse().unwrap_or(0))
    } else {
        (0, 0)
    };
    (level, major, minor)
}

/// A row of the table, with the defaults most kinds share.
pub struct Row {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    subresources: Vec<Subresource>,
    selectable: &'static [&'static str],
    strategy: Arc<dyn Strategy>,
    stored_as: Option<&'static str>,
    store_with: Option<&'static str>,
    review: Option<Review>,
}

impl Row {
    fn new(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
        namespaced: bool,
        strategy: Arc<dyn Strategy>,
    ) -> Row {
        Row {
            group,
            version,
            kind,
            plural,
            namespaced,
            short_names: &[],
            subresources: Vec::new(),
            selectable: &[],
            strategy,
            stored_as: None,
            store_with: None,
            review: None,
        }
    }

    /// A review kind (create only, answered, never stored).
    fn review(mut self, review: Review) -> Row {
        self.review = Some(review);
        self
    }

    /// Stores the kind's objects as another kind's (`plural` of the core group at `api_version`).
    fn stored_with(mut self, plural: &'static str, api_version: &'static str) -> Row {
        self.store_with = Some(plural);
        self.stored_as = Some(api_version);
        self
    }

    fn short(mut self, names: &'static [&'static str]) -> Row {
        self.short_names = names;
        self
    }

    fn sub(mut self, sub: Subresource) -> Row {
        self.subresources.push(sub);
        self
    }

    fn fields(mut self, fields: &'static [&'static str]) -> Row {
        self.selectable = fields;
        self
    }

    fn build(self) -> ResourceType {
        let group_dir = if self.group.is_empty() { "core" } else { self.group };
        ResourceType {
            group: self.group.to_owned(),
            kind: self.kind.to_owned(),
            list_kind: format!("{}List", self.kind),
            plural: self.plural.to_owned(),
            singular: self.kind.to_lowercase(),
            short_names: self.short_names.iter().map(|s| (*s).to_owned()).collect(),
            categories: Vec::new(),
            namespaced: self.namespaced,
            versions: vec![self.version.to_owned()],
            storage_version: self.version.to_owned(),
            stored_as: self.stored_as.map(str::to_owned),
            subresources: self.subresources,
            selectable_fields: self.selectable.iter().map(|s| (*s).to_owned()).collect(),
            strategy: self.strategy,
            prefix: match self.store_with {
                Some(plural) => prefix_of("", plural),
                None => format!("/registry/{group_dir}/{}/", self.plural),
            },
            shapes: HashMap::from([(
                self.version.to_owned(),
                Arc::new(shape::core(
                    if self.stored_as.is_some() { "" } else { self.group },
                    self.kind,
                )),
            )]),
            review: self.review,
        }
    }
}

/// The storage prefix of a kind, for kinds built outside this file.
pub fn prefix_of(group: &str, plural: &str) -> String {
    let group_dir = if group.is_empty() { "core" } else { group };
    format!("/registry/{group_dir}/{plural}/")
}

/// A Secret as kube-apiserver stores it: `stringData` merged into `data` (base64) and dropped,
/// `type` defaulted to `Opaque`. A `stringData` that is not all strings is left for validation
/// to refuse.
fn default_secret(obj: &mut Value) {
    use base64::Engine as _;
    let Some(m) = obj.as_object_mut() else { return };
    let all_strings = m
        .get("stringData")
        .and_then(Value::as_object)
        .is_some_and(|sd| sd.values().all(Value::is_string));
    if all_strings {
        if let Some(Value::Object(sd)) = m.remove("stringData") {
            let data = m.entry("data").or_insert_with(|| Value::Object(Default::default()));
            if !data.is_object() {
                *data = Value::Object(Default::default());
            }
            if let Some(d) = data.as_object_mut() {
                for (k, v) in sd {
                    let text = v.as_str().unwrap_or_default();
                    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                    d.insert(k, Value::String(encoded));
                }
            }
        }
    }
    if m.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
        m.insert("type".into(), Value::String("Opaque".into()));
    }
}

fn core_types(profile: Profile) -> Vec<ResourceType> {
    let mut rows = vec![
        Row::new("", "v1", "Namespace", "namespaces", false, Arc::new(NamespaceStrategy))
            .short(&["ns"])
            .sub(STATUS)
            .sub(Subresource::part("finalize", &["spec.finalizers"]))
            .fields(&["status.phase"]),
        Row::new(
            "",
            "v1",
            "Secret",
            "secrets",
            true,
            Arc::new(
                Typed::<core::v1::Secret>::new("Secret", Some(core_validation::secret))
                    .columns(table::secret_columns())
                    .defaults(default_secret),
            ),
        )
        .fields(&["type"]),
        Row::new(
            "",
            "v1",
            "ConfigMap",
            "configmaps",
            true,
            Arc::new(
                Typed::<core::v1::ConfigMap>::new("ConfigMap", Some(core_validation::config_map))
                    .columns(table::config_map_columns()),
            ),
        )
        .short(&["cm"]),
        Row::new(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            Arc::new(
                Typed::<core::v1::ServiceAccount>::new("ServiceAccount", None)
                    .columns(table::service_account_columns()),
            ),
        )
        .short(&["sa"])
        .sub(Subresource { name: "token", owns: &[], action: Some(Action::TokenRequest) }),
        Row::new(
            "",
            "v1",
            "Event",
            "events",
            true,
            Arc::new(
                Typed::<core::v1::Event>::new("Event", Some(check_core_event))
                    .columns(table::event_columns()),
            ),
        )
        .short(&["ev"])
        .fields(&[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]),
        // Leases: clusters' on the hub, add-ons' on a managed cluster.
        Row::new(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            true,
            Arc::new(
                Typed::<coordination::v1::Lease>::new("Lease", Some(core_validation::lease))
                    .columns(table::lease_columns()),
            ),
        ),
        // RBAC: the hub's authorization, and a managed cluster's (add-ons' bindings).
        rbac_row(
            "Role",
            "roles",
            true,
            Arc::new(Typed::<rbac::v1::Role>::new("Role", None).path_segment_names()),
        ),
        rbac_row(
            "RoleBinding",
            "rolebindings",
            true,
            Arc::new(
                Typed::<rbac::v1::RoleBinding>::new("RoleBinding", Some(check_binding))
                    .columns(table::binding_columns())
                    .path_segment_names(),
            ),
        ),
        rbac_row(
            "ClusterRole",
            "clusterroles",
            false,
            Arc::new(Typed::<rbac::v1::ClusterRole>::new("ClusterRole", None).path_segment_names()),
        ),
        rbac_row(
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            Arc::new(
                Typed::<rbac::v1::ClusterRoleBinding>::new(
                    "ClusterRoleBinding",
                    Some(check_binding),
                )
                .columns(table::binding_columns())
                .path_segment_names(),
            ),
        ),
    ];
    match profile {
        Profile::Hub => rows.extend([
            // A ManifestWorkReplicaSet's revisions (controllers/manifestworkreplicaset).
            Row::new(
                "apps",
                "v1",
                "ControllerRevision",
                "controllerrevisions",
                true,
                Arc::new(
                    Typed::<k8s_openapi::api::apps::v1::ControllerRevision>::new(
                        "ControllerRevision",
                        None,
                    )
                    .columns(table::controller_revision_columns()),
                ),
            ),
            Row::new(
                "events.k8s.io",
                "v1",
                "Event",
                "events",
                true,
                Arc::new(crate::machinery::events::EventsV1),
            )
            .stored_with("events", "v1")
            .short(&["ev"])
            .fields(&[
                "regarding.kind",
                "regarding.name",
                "regarding.namespace",
                "reason",
                "type",
            ]),
            Row::new(
                "certificates.k8s.io",
                "v1",
                "CertificateSigningRequest",
                "certificatesigningrequests",
                false,
                Arc::new(CsrStrategy),
            )
            .short(&["csr"])
            .sub(STATUS)
            .sub(Subresource::part("approval", &["status.conditions"]))
            .fields(&["spec.signerName"]),
        ]),
        Profile::Cluster => {
            use k8s_openapi::api::{apps, batch};
            use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
            fn schemaless<T: schemars::JsonSchema>() -> Arc<dyn Strategy> {
                Arc::new(Schemaless::published_as::<T>())
            }
            rows.extend([
                Row::new("", "v1", "Service", "services", true, schemaless::<core::v1::Service>())
                    .short(&["svc"])
                    .sub(STATUS),
                Row::new("", "v1", "Node", "nodes", false, schemaless::<core::v1::Node>())
                    .short(&["no"])
                    .sub(STATUS),
                Row::new("", "v1", "Pod", "pods", true, schemaless::<core::v1::Pod>())
                    .short(&["po"])
                    .sub(STATUS),
                Row::new(
                    "apps",
                    "v1",
                    "Deployment",
                    "deployments",
                    true,
                    schemaless::<apps::v1::Deployment>(),
                )
                .short(&["deploy"])
                .sub(STATUS),
                Row::new(
                    "apps",
                    "v1",
                    "StatefulSet",
                    "statefulsets",
                    true,
                    schemaless::<apps::v1::StatefulSet>(),
                )
                .short(&["sts"])
                .sub(STATUS),
                Row::new(
                    "apps",
                    "v1",
                    "DaemonSet",
                    "daemonsets",
                    true,
                    schemaless::<apps::v1::DaemonSet>(),
                )
                .short(&["ds"])
                .sub(STATUS),
                Row::new("batch", "v1", "Job", "jobs", true, schemaless::<batch::v1::Job>())
                    .sub(STATUS),
                Row::new(
                    "apiextensions.k8s.io",
                    "v1",
                    "CustomResourceDefinition",
                    "customresourcedefinitions",
                    false,
                    schemaless::<apiextensions::CustomResourceDefinition>(),
                )
                .short(&["crd", "crds"])
                .sub(STATUS),
            ]);
        }
    }
    // The review kinds every Kubernetes API serves (`kubectl auth can-i`, `auth whoami`).
    {
        use k8s_openapi::api::{authentication::v1 as authn, authorization::v1 as authz};
        let review = |group, kind, plural, strategy: Schemaless, review| {
            Row::new(group, "v1", kind, plural, false, Arc::new(strategy)).review(review)
        };
        rows.extend([
            review(
                "authorization.k8s.io",
                "SelfSubjectAccessReview",
                "selfsubjectaccessreviews",
                Schemaless::published_as::<authz::SelfSubjectAccessReview>(),
                Review::SelfSubjectAccess,
            ),
            review(
                "authorization.k8s.io",
                "SubjectAccessReview",
                "subjectaccessreviews",
                Schemaless::published_as::<authz::SubjectAccessReview>(),
                Review::SubjectAccess,
            ),
            review(
                "authorization.k8s.io",
                "SelfSubjectRulesReview",
                "selfsubjectrulesreviews",
                Schemaless::published_as::<authz::SelfSubjectRulesReview>(),
                Review::SelfSubjectRules,
            ),
            review(
                "authentication.k8s.io",
                "TokenReview",
                "tokenreviews",
                Schemaless::published_as::<authn::TokenReview>(),
                Review::Token,
            ),
            review(
                "authentication.k8s.io",
                "SelfSubjectReview",
                "selfsubjectreviews",
                Schemaless::published_as::<authn::SelfSubjectReview>(),
                Review::SelfSubject,
            ),
        ]);
    }
    rows.into_iter().map(Row::build).collect()
}

fn rbac_row(kind: &'static str, plural: &'static str, ns: bool, s: Arc<dyn Strategy>) -> Row {
    Row::new("rbac.authorization.k8s.io", "v1", kind, plural, ns, s)
}

fn check_core_event(obj: &Value) -> Vec<FieldError> {
    require(obj, &["involvedObject.name"])
}

fn check_binding(obj: &Value) -> Vec<FieldError> {
    require(obj, &["roleRef.kind", "roleRef.name"])
}

/// Namespaces: `spec.finalizers` holds `kubernetes` until the namespace controller has emptied
/// the namespace; deletion turns the phase `Terminating`.
struct NamespaceStrategy;

/// The typed rules Namespaces share with every core kind (decoding, known fields, schema).
static NAMESPACE: Typed<core::v1::Namespace> = Typed::new("Namespace", None);

impl Strategy for NamespaceStrategy {
    fn tracks_generation(&self) -> bool {
        false
    }

    fn prune(&self, obj: &mut Value) -> Vec<String> {
        NAMESPACE.prune(obj)
    }

    fn openapi_schema(&self, version: &str) -> Option<OpenApiSchema> {
        NAMESPACE.openapi_schema(version)
    }

    fn columns(&self, _version: &str) -> Arc<[table::Column]> {
        table::namespace_columns()
    }

    fn validate(&self, obj: &Value) -> Result<Vec<FieldError>, ApiError> {
        NAMESPACE.validate(obj)
    }

    fn prepare_create(&self, obj: &mut Value) {
        obj["spec"]["finalizers"] = serde_json::json!(["kubernetes"]);
        obj["status"] = serde_json::json!({"phase": "Active"});
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn on_delete_mark(&self, obj: &mut Value) {
        obj["status"]["phase"] = Value::String("Terminating".into());
    }

    fn check_delete(&self, obj: &Value) -> Result<(), String> {
        // kube-apiserver's NamespaceLifecycle admission keeps the system namespaces.
        match object::name(obj) {
            "default" | "kube-system" | "kube-public" => {
                Err("this namespace may not be deleted".into())
            }
            _ => Ok(()),
        }
    }

    fn ready_to_remove(&self, obj: &Value) -> bool {
        object::at_path(obj, "spec.finalizers").and_then(Value::as_array).is_none_or(Vec::is_empty)
    }
}

/// CertificateSigningRequests: a new request has no status and passes kube's spec checks
/// (`core_validation::csr`); the spec never changes after creation.
struct CsrStrategy;

/// The typed rules CSRs share with every core kind (decoding, known fields, schema).
static CSR: Typed<certificates::v1::CertificateSigningRequest> =
    Typed::new("CertificateSigningRequest", None);

impl Strategy for CsrStrategy {
    fn tracks_generation(&self) -> bool {
        false
    }

    fn prune(&self, obj: &mut Value) -> Vec<String> {
        CSR.prune(obj)
    }

    fn openapi_schema(&self, version: &str) -> Option<OpenApiSchema> {
        CSR.openapi_schema(version)
    }

    fn columns(&self, _version: &str) -> Arc<[table::Column]> {
        table::csr_columns()
    }

    fn validate(&self, obj: &Value) -> Result<Vec<FieldError>, ApiError> {
        let mut errs = CSR.validate(obj)?;
        errs.extend(core_validation::csr(obj));
        Ok(errs)
    }

    /// The spec is the stored one (`admit` keeps it), checked when it was created.
    fn validate_update(&self, obj: &Value, _old: &Value) -> Result<Vec<FieldError>, ApiError> {
        CSR.validate(obj)
    }

    fn prepare_create(&self, obj: &mut Value) {
        if let Some(map) = obj.as_object_mut() {
            map.remove("status");
        }
    }

    /// kube's CSR admission: a new request names its requester (`spec.username`, `uid`,
    /// `groups`, `extra`, whatever the body said); approving or denying needs `approve`, and
    /// issuing a certificate `sign`, on `certificates.k8s.io/signers` named for the signer (or
    /// its `<domain>/*`).
    fn admit(
        &self,
        obj: &mut Value,
        old: Option<&Value>,
        sub: Option<&str>,
        who: Option<&crate::machinery::requester::Requester>,
    ) -> Result<(), ApiError> {
        // A request's spec never changes after creation (kube's CSR strategy): its requester
        // and request are what approval and signing rely on.
        if let (Some(old), None) = (old, sub) {
            if let (Some(map), Some(spec)) = (obj.as_object_mut(), old.get("spec")) {
                map.insert("spec".into(), spec.clone());
            }
        }
        let Some(who) = who else { return Ok(()) };
        let Some(old) = old else {
            let user = &who.user;
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                for field in ["username", "uid", "groups", "extra"] {
                    spec.remove(field);
                }
                spec.insert("username".into(), json!(user.name));
                if !user.uid.is_empty() {
                    spec.insert("uid".into(), json!(user.uid));
                }
                if !user.groups.is_empty() {
                    spec.insert("groups".into(), json!(user.groups));
                }
                if !user.extra.is_empty() {
                    spec.insert("extra".into(), json!(user.extra));
                }
            }
            return Ok(());
        };
        let decisions = |v: &Value| -> Vec<Value> {
            v.pointer("/status/conditions")
                .and_then(Value::as_array)
                .map(|l| {
                    l.iter()
                        .filter(|c| matches!(c["type"].as_str(), Some("Approved" | "Denied")))
                        .map(|c| json!([c["type"], c["status"]]))
                        .collect()
                })
                .unwrap_or_default()
        };
        let (verb, changed) = match sub {
            Some("approval") => ("approve", decisions(obj) != decisions(old)),
            Some("status") => {
                // Approval and denial go through `approval` only (and its `approve` check).
                if decisions(obj) != decisions(old) {
                    let err = FieldError::forbidden(
                        "status.conditions",
                        "Approved and Denied conditions are set through the approval subresource",
                    );
                    return Err(ApiError::invalid(
                        "certificates.k8s.io",
                        "CertificateSigningRequest",
                        object::name(old),
                        &[err],
                    ));
                }
                ("sign", obj.pointer("/status/certificate") != old.pointer("/status/certificate"))
            }
            _ => return Ok(()),
        };
        if !changed {
            return Ok(());
        }
        let signer = object::field_string(old, "spec.signerName");
        let domain_wide = format!("{}/*", signer.split('/').next().unwrap_or(""));
        let allowed = [signer.as_str(), domain_wide.as_str()].into_iter().any(|name| {
            who.can(&crate::machinery::requester::Attributes::resource(
                verb,
                "certificates.k8s.io",
                "signers",
                "",
                name,
            ))
        });
        if allowed {
            return Ok(());
        }
        let subject = crate::machinery::error::Subject {
            group: "certificates.k8s.io".into(),
            kind: "certificatesigningrequests".into(),
            name: object::name(old).to_owned(),
        };
        Err(ApiError::forbidden(
            subject,
            format!("user not permitted to {verb} requests with signerName {signer:?}"),
        ))
    }
}

/// Which review a kind is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Review {
    /// May I do this?
    SelfSubjectAccess,
    /// May this user do this?
    SubjectAccess,
    /// What may I do in this namespace?
    SelfSubjectRules,
    /// Who am I?
    SelfSubject,
    /// Whom does this token name?
    Token,
}

/// The prefix of every object key: `/registry/<group|core>/<plural>/`.
pub const STORAGE_ROOT: &str = "/registry/";

/// The kind prefix of a key (`/registry/<group>/<plural>/`), or the key itself when malformed.
pub fn kind_prefix(key: &str) -> &str {
    let Some(rest) = key.strip_prefix(STORAGE_ROOT) else { return key };
    let mut slashes = rest.match_indices('/');
    match (slashes.next(), slashes.next()) {
        (Some(_), Some((end, _))) => &key[..STORAGE_ROOT.len() + end + 1],
        _ => key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_prefixes() {
        assert_eq!(kind_prefix("/registry/core/secrets/ns/a"), "/registry/core/secrets/");
        assert_eq!(kind_prefix("/registry/g/p/a"), "/registry/g/p/");
        assert_eq!(kind_prefix("/other/x"), "/other/x");
    }

    #[test]
    fn version_order() {
        let mut v = vec!["v1alpha1", "v1beta1", "v1", "v2beta2", "v1beta2", "v2"];
        v.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(v, ["v2", "v1", "v2beta2", "v1beta2", "v1beta1", "v1alpha1"]);
    }
}
