//! The merge shape of a kind: which objects merge field by field and which are replaced whole,
//! which lists are associative (and by which keys), sets, or atomic. Strategic merge patch and
//! server-side apply both walk objects with it. OCM kinds take it from their CRD's structural
//! schema (`x-kubernetes-list-type`, `-list-map-keys`, `-map-type`); core kinds from a table of
//! the facts Kubernetes' Go types declare (`patchMergeKey`, `listType`, `listMapKey`).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use ocm_proto::schema::{AdditionalProperties, ListType, MapType, Schema, SchemaType};

/// How a list merges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced whole (the default).
    Atomic,
    /// Scalars merged as a set.
    Set,
    /// Objects identified by these key fields (the first is strategic merge patch's
    /// `patchMergeKey`).
    Map(Vec<String>),
}

/// The merge shape of one node of an object.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// A scalar, or a value replaced whole (atomic lists and maps, int-or-string, ...).
    Atomic,
    /// A value of unknown structure: objects merge key by key, every key being a member of its
    /// own (structured-merge-diff's "deduced" type); lists are atomic.
    Deduced,
    /// An object with declared fields; keys that are not declared take `rest` (a map's value
    /// shape), or [`Shape::Deduced`].
    Struct {
        /// Declared fields.
        fields: BTreeMap<String, Arc<Shape>>,
        /// The shape of undeclared keys (map values).
        rest: Option<Arc<Shape>>,
    },
    /// A list.
    List {
        /// How it merges.
        kind: ListKind,
        /// The shape of its items.
        item: Arc<Shape>,
    },
}

/// The shape of a key that a struct does not declare.
static DEDUCED: OnceLock<Arc<Shape>> = OnceLock::new();
/// A scalar.
static ATOMIC: OnceLock<Arc<Shape>> = OnceLock::new();

fn deduced() -> Arc<Shape> {
    DEDUCED.get_or_init(|| Arc::new(Shape::Deduced)).clone()
}

fn atomic() -> Arc<Shape> {
    ATOMIC.get_or_init(|| Arc::new(Shape::Atomic)).clone()
}

impl Shape {
    /// The shape of field `name` of an object of this shape, and whether the field is declared
    /// (undeclared keys, like a map's, are members of their own in a field set).
    pub fn field(&self, name: &str) -> (Arc<Shape>, bool) {
        match self {
            Shape::Struct { fields, rest } => match fields.get(name) {
                Some(s) => (s.clone(), true),
                None => (rest.clone().unwrap_or_else(deduced), false),
            },
            Shape::Deduced => (deduced(), false),
            Shape::Atomic | Shape::List { .. } => (atomic(), false),
        }
    }

    /// The list kind and item shape, when this is a list.
    pub fn list(&self) -> Option<(&ListKind, &Arc<Shape>)> {
        match self {
            Shape::List { kind, item } => Some((kind, item)),
            _ => None,
        }
    }

    /// Whether values of this shape are objects merged key by key.
    pub fn is_granular_object(&self) -> bool {
        matches!(self, Shape::Struct { .. } | Shape::Deduced)
    }

    /// Builds the shape of a whole object from a CRD's structural schema; `metadata` always
    /// takes the standard [`object_meta`] shape.
    pub fn from_crd(schema: &Schema) -> Shape {
        let mut shape = from_schema(schema);
        if let Shape::Struct { fields, .. } = &mut shape {
            fields.insert("metadata".into(), Arc::new(object_meta()));
        }
        shape
    }
}

fn from_schema(s: &Schema) -> Shape {
    if s.int_or_string() {
        return Shape::Atomic;
    }
    if s.embedded_resource() || (s.preserve_unknown_fields() && s.properties().is_empty()) {
        return Shape::Deduced;
    }
    match s.type_() {
        Some(SchemaType::Array) => {
            let item = s.items().map(from_schema).unwrap_or(Shape::Deduced);
            let kind = match s.list_type() {
                ListType::Atomic => ListKind::Atomic,
                ListType::Set => ListKind::Set,
                ListType::Map(keys) => ListKind::Map(keys),
            };
            Shape::List { kind, item: Arc::new(item) }
        }
        Some(SchemaType::Object) => {
            if s.map_type() == MapType::Atomic {
                return Shape::Atomic;
            }
            let fields =
                s.properties().iter().map(|(k, v)| (k.clone(), Arc::new(from_schema(v)))).collect();
            let rest = match s.additional_properties() {
                Some(AdditionalProperties::Schema(v)) => Some(Arc::new(from_schema(v))),
                Some(AdditionalProperties::Allowed(true)) => Some(deduced()),
                _ if s.preserve_unknown_fields() => Some(deduced()),
                _ => None,
            };
            Shape::Struct { fields, rest }
        }
        _ => Shape::Atomic,
    }
}

// ---------------------------------------------------------------------------------------------
// The table of core shapes (Kubernetes' Go types: `patchStrategy`, `patchMergeKey`, `listType`)
// ---------------------------------------------------------------------------------------------

fn structure<const N: usize>(fields: [(&str, Shape); N]) -> Shape {
    Shape::Struct {
        fields: fields.into_iter().map(|(k, v)| (k.to_owned(), Arc::new(v))).collect(),
        rest: None,
    }
}

fn string_map() -> Shape {
    Shape::Struct { fields: BTreeMap::new(), rest: Some(atomic()) }
}

fn list_map(keys: &[&str], item: Shape) -> Shape {
    Shape::List {
        kind: ListKind::Map(keys.iter().map(|k| (*k).to_owned()).collect()),
        item: Arc::new(item),
    }
}

fn set() -> Shape {
    Shape::List { kind: ListKind::Set, item: atomic() }
}

fn atomic_list() -> Shape {
    Shape::List { kind: ListKind::Atomic, item: atomic() }
}

/// `metadata` of every kind (apimachinery's ObjectMeta).
pub fn object_meta() -> Shape {
    structure([
        ("labels", string_map()),
        ("annotations", string_map()),
        ("finalizers", set()),
        ("ownerReferences", list_map(&["uid"], structure([]))),
        ("managedFields", atomic_list()),
    ])
}

fn conditions() -> Shape {
    list_map(&["type"], structure([]))
}

fn label_selector() -> Shape {
    structure([("matchLabels", string_map()), ("matchExpressions", atomic_list())])
}

fn container() -> Shape {
    structure([
        ("env", list_map(&["name"], structure([("valueFrom", structure([]))]))),
        ("envFrom", atomic_list()),
        ("ports", list_map(&["containerPort", "protocol"], structure([]))),
        ("volumeMounts", list_map(&["mountPath"], structure([]))),
        ("volumeDevices", list_map(&["devicePath"], structure([]))),
        ("resources", structure([("limits", string_map()), ("requests", string_map())])),
        ("command", atomic_list()),
        ("args", atomic_list()),
    ])
}

fn pod_spec() -> Shape {
    structure([
        ("containers", list_map(&["name"], container())),
        ("initContainers", list_map(&["name"], container())),
        ("ephemeralContainers", list_map(&["name"], container())),
        ("volumes", list_map(&["name"], structure([]))),
        ("imagePullSecrets", list_map(&["name"], structure([]))),
        ("tolerations", atomic_list()),
        ("nodeSelector", string_map()),
        ("hostAliases", list_map(&["ip"], structure([]))),
    ])
}

fn pod_template() -> Shape {
    structure([("metadata", object_meta()), ("spec", pod_spec())])
}

fn workload(extra: Shape) -> Shape {
    let mut spec = structure([("selector", label_selector()), ("template", pod_template())]);
    if let (Shape::Struct { fields, .. }, Shape::Struct { fields: more, .. }) = (&mut spec, extra) {
        fields.extend(more);
    }
    structure([("spec", spec), ("status", structure([("conditions", conditions())]))])
}

/// The shape of a core (built-in) kind's objects, from what its Go type declares; kinds not in
/// the table are [`Shape::Deduced`] below `metadata`.
pub fn core(group: &str, kind: &str) -> Shape {
    let mut shape = match (group, kind) {
        ("", "ConfigMap") => structure([("data", string_map()), ("binaryData", string_map())]),
        ("", "Secret") => structure([("data", string_map()), ("stringData", string_map())]),
        ("", "Namespace") => structure([
            ("spec", structure([("finalizers", atomic_list())])),
            ("status", structure([("conditions", conditions())])),
        ]),
        ("", "ServiceAccount") => structure([
            ("secrets", list_map(&["name"], structure([]))),
            ("imagePullSecrets", atomic_list()),
        ]),
        ("", "Event") => structure([
            ("involvedObject", structure([])),
            ("source", structure([])),
            ("series", structure([])),
            ("related", structure([])),
        ]),
        ("coordination.k8s.io", "Lease") => structure([("spec", structure([]))]),
        ("certificates.k8s.io", "CertificateSigningRequest") => structure([
            (
                "spec",
                structure([
                    ("groups", atomic_list()),
                    ("usages", atomic_list()),
                    ("extra", string_map()),
                ]),
            ),
            ("status", structure([("conditions", conditions())])),
        ]),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => structure([
            ("rules", atomic_list()),
            ("aggregationRule", structure([("clusterRoleSelectors", atomic_list())])),
        ]),
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            structure([("subjects", atomic_list()), ("roleRef", structure([]))])
        }
        ("", "Pod") => {
            structure([("spec", pod_spec()), ("status", structure([("conditions", conditions())]))])
        }
        ("", "Service") => structure([(
            "spec",
            structure([
                ("ports", list_map(&["port", "protocol"], structure([]))),
                ("selector", string_map()),
            ]),
        )]),
        ("", "Node") => structure([
            ("spec", structure([("taints", atomic_list())])),
            ("status", structure([("conditions", conditions())])),
        ]),
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet") => workload(structure([])),
        ("batch", "Job") => workload(structure([])),
        _ => Shape::Struct { fields: BTreeMap::new(), rest: Some(deduced()) },
    };
    if let Shape::Struct { fields, rest } = &mut shape {
        fields.insert("metadata".into(), Arc::new(object_meta()));
        // Fields the table does not mention keep whatever structure they have.
        if rest.is_none() {
            *rest = Some(deduced());
        }
    }
    shape
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn crd_lists_and_maps_take_their_declared_semantics() {
        let schema = Schema::from_value(&json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object"},
                "spec": {"type": "object", "properties": {
                    "taints": {"type": "array", "x-kubernetes-list-type": "map",
                               "x-kubernetes-list-map-keys": ["key", "effect"],
                               "items": {"type": "object", "properties": {
                                   "key": {"type": "string"}, "effect": {"type": "string"}}}},
                    "names": {"type": "array", "x-kubernetes-list-type": "set",
                              "items": {"type": "string"}},
                    "plain": {"type": "array", "items": {"type": "string"}},
                    "sel": {"type": "object", "x-kubernetes-map-type": "atomic"},
                    "any": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "count": {"x-kubernetes-int-or-string": true},
                }}
            }
        }))
        .unwrap();
        let shape = Shape::from_crd(&schema);
        let (spec, declared) = shape.field("spec");
        assert!(declared);
        let (taints, _) = spec.field("taints");
        assert_eq!(taints.list().unwrap().0, &ListKind::Map(vec!["key".into(), "effect".into()]));
        assert_eq!(spec.field("names").0.list().unwrap().0, &ListKind::Set);
        assert_eq!(spec.field("plain").0.list().unwrap().0, &ListKind::Atomic);
        assert_eq!(*spec.field("sel").0, Shape::Atomic);
        assert_eq!(*spec.field("any").0, Shape::Deduced);
        assert_eq!(*spec.field("count").0, Shape::Atomic);
        let (labels, _) = shape.field("metadata").0.field("labels");
        assert_eq!(labels.field("app"), (atomic(), false));
    }

    #[test]
    fn core_kinds_declare_their_merge_keys() {
        let deployment = core("apps", "Deployment");
        let (spec, _) = deployment.field("spec");
        let (containers, _) = spec.field("template").0.field("spec").0.field("containers");
        assert_eq!(containers.list().unwrap().0, &ListKind::Map(vec!["name".into()]));
        let cm = core("", "ConfigMap");
        assert!(cm.field("data").1);
        assert_eq!(*cm.field("data").0.field("k").0, Shape::Atomic);
        // Undeclared parts of a known kind are deduced.
        assert_eq!(*cm.field("other").0, Shape::Deduced);
    }
}
