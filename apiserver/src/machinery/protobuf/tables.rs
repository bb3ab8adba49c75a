//! The decoded messages' fields: for each kind and each message it contains, field number →
//! JSON name, type and cardinality, from Kubernetes' `generated.proto` files.

/// How a field's value is read and written to JSON.
#[derive(Clone, Copy)]
pub(super) enum Ty {
    /// `string`.
    Str,
    /// `bytes`, written as base64.
    Bytes,
    /// `bool`.
    Bool,
    /// `int32`.
    Int32,
    /// `int64`.
    Int64,
    /// `metav1.Time`: RFC 3339 in whole seconds; an empty message is Go's zero time (left out).
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds.
    MicroTime,
    /// `metav1.FieldsV1`: its `Raw` (1) is JSON and is written as such.
    FieldsV1,
    /// A message with its own table.
    Msg(&'static Msg),
    /// A message `{repeated string items = 1}` written as a bare list (`ExtraValue`).
    StrList,
}

/// How often a field occurs and what Go's JSON does with its zero value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Card {
    /// A non-pointer `omitempty` scalar: dropped when zero.
    Opt,
    /// A pointer or required field (or any message): written as sent.
    Keep,
    /// `repeated`: a JSON list.
    Rep,
    /// `map<string, Ty>`: repeated entries `{key 1, value 2}`, a JSON object.
    Map,
}

/// One field of a message.
pub(super) struct F {
    pub(super) num: u32,
    pub(super) name: &'static str,
    pub(super) ty: Ty,
    pub(super) card: Card,
}

/// One message type.
pub(super) struct Msg {
    pub(super) name: &'static str,
    pub(super) fields: &'static [F],
}

const fn f(num: u32, name: &'static str, ty: Ty, card: Card) -> F {
    F { num, name, ty, card }
}

/// A message field (kept whenever sent, as Go writes non-pointer structs even when empty).
const fn m(num: u32, name: &'static str, msg: &'static Msg) -> F {
    F { num, name, ty: Ty::Msg(msg), card: Card::Keep }
}

use Card::{Keep, Map as MapOf, Opt, Rep};
use Ty::{Bool, Bytes, FieldsV1, Int32, Int64, MicroTime, Str, StrList, Time};

/// The kinds decoded: apiVersion, kind and table.
pub(super) static KINDS: &[(&str, &str, &Msg)] = &[
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Secret", &SECRET),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Event", &CORE_EVENT),
    ("events.k8s.io/v1", "Event", &EVENTS_EVENT),
    ("coordination.k8s.io/v1", "Lease", &LEASE),
    ("certificates.k8s.io/v1", "CertificateSigningRequest", &CSR),
    ("rbac.authorization.k8s.io/v1", "Role", &ROLE),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", &CLUSTER_ROLE),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", &ROLE_BINDING),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", &ROLE_BINDING),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview", &SELF_SUBJECT_ACCESS_REVIEW),
    ("authorization.k8s.io/v1", "SubjectAccessReview", &SUBJECT_ACCESS_REVIEW),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview", &SELF_SUBJECT_RULES_REVIEW),
    ("authentication.k8s.io/v1", "SelfSubjectReview", &SELF_SUBJECT_REVIEW),
    ("authentication.k8s.io/v1", "TokenReview", &TOKEN_REVIEW),
    ("authentication.k8s.io/v1", "TokenRequest", &TOKEN_REQUEST),
];

// meta/v1

static OBJECT_META: Msg = Msg {
    name: "ObjectMeta",
    fields: &[
        f(1, "name", Str, Opt),
        f(2, "generateName", Str, Opt),
        f(3, "namespace", Str, Opt),
        f(4, "selfLink", Str, Opt),
        f(5, "uid", Str, Opt),
        f(6, "resourceVersion", Str, Opt),
        f(7, "generation", Int64, Opt),
        f(8, "creationTimestamp", Time, Keep),
        f(9, "deletionTimestamp", Time, Keep),
        f(10, "deletionGracePeriodSeconds", Int64, Keep),
        f(11, "labels", Str, MapOf),
        f(12, "annotations", Str, MapOf),
        f(13, "ownerReferences", Ty::Msg(&OWNER_REFERENCE), Rep),
        f(14, "finalizers", Str, Rep),
        f(17, "managedFields", Ty::Msg(&MANAGED_FIELDS_ENTRY), Rep),
    ],
};

static OWNER_REFERENCE: Msg = Msg {
    name: "OwnerReference",
    fields: &[
        f(5, "apiVersion", Str, Keep),
        f(1, "kind", Str, Keep),
        f(3, "name", Str, Keep),
        f(4, "uid", Str, Keep),
        f(6, "controller", Bool, Keep),
        f(7, "blockOwnerDeletion", Bool, Keep),
    ],
};

static MANAGED_FIELDS_ENTRY: Msg = Msg {
    name: "ManagedFieldsEntry",
    fields: &[
        f(1, "manager", Str, Opt),
        f(2, "operation", Str, Opt),
        f(3, "apiVersion", Str, Opt),
        f(4, "time", Time, Keep),
        f(6, "fieldsType", Str, Opt),
        f(7, "fieldsV1", FieldsV1, Keep),
        f(8, "subresource", Str, Opt),
    ],
};

static LABEL_SELECTOR: Msg = Msg {
    name: "LabelSelector",
    fields: &[
        f(1, "matchLabels", Str, MapOf),
        f(2, "matchExpressions", Ty::Msg(&LABEL_SELECTOR_REQUIREMENT), Rep),
    ],
};

static LABEL_SELECTOR_REQUIREMENT: Msg = Msg {
    name: "LabelSelectorRequirement",
    fields: &[f(1, "key", Str, Keep), f(2, "operator", Str, Keep), f(3, "values", Str, Rep)],
};

// core/v1

static OBJECT_REFERENCE: Msg = Msg {
    name: "ObjectReference",
    fields: &[
        f(1, "kind", Str, Opt),
        f(2, "namespace", Str, Opt),
        f(3, "name", Str, Opt),
        f(4, "uid", Str, Opt),
        f(5, "apiVersion", Str, Opt),
        f(6, "resourceVersion", Str, Opt),
        f(7, "fieldPath", Str, Opt),
    ],
};

static LOCAL_OBJECT_REFERENCE: Msg =
    Msg { name: "LocalObjectReference", fields: &[f(1, "name", Str, Opt)] };

static NAMESPACE: Msg = Msg {
    name: "Namespace",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        m(2, "spec", &NAMESPACE_SPEC),
        m(3, "status", &NAMESPACE_STATUS),
    ],
};

static NAMESPACE_SPEC: Msg = Msg { name: "NamespaceSpec", fields: &[f(1, "finalizers", Str, Rep)] };

static NAMESPACE_STATUS: Msg = Msg {
    name: "NamespaceStatus",
    fields: &[f(1, "phase", Str, Opt), f(2, "conditions", Ty::Msg(&NAMESPACE_CONDITION), Rep)],
};

static NAMESPACE_CONDITION: Msg = Msg {
    name: "NamespaceCondition",
    fields: &[
        f(1, "type", Str, Keep),
        f(2, "status", Str, Keep),
        f(4, "lastTransitionTime", Time, Keep),
        f(5, "reason", Str, Opt),
        f(6, "message", Str, Opt),
    ],
};

static CONFIG_MAP: Msg = Msg {
    name: "ConfigMap",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        f(4, "immutable", Bool, Keep),
        f(2, "data", Str, MapOf),
        f(3, "binaryData", Bytes, MapOf),
    ],
};

static SECRET: Msg = Msg {
    name: "Secret",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        f(5, "immutable", Bool, Keep),
        f(2, "data", Bytes, MapOf),
        f(4, "stringData", Str, MapOf),
        f(3, "type", Str, Opt),
    ],
};

static SERVICE_ACCOUNT: Msg = Msg {
    name: "ServiceAccount",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        f(2, "secrets", Ty::Msg(&OBJECT_REFERENCE), Rep),
        f(3, "imagePullSecrets", Ty::Msg(&LOCAL_OBJECT_REFERENCE), Rep),
        f(4, "automountServiceAccountToken", Bool, Keep),
    ],
};

static CORE_EVENT: Msg = Msg {
    name: "Event",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        m(2, "involvedObject", &OBJECT_REFERENCE),
        f(3, "reason", Str, Opt),
        f(4, "message", Str, Opt),
        m(5, "source", &EVENT_SOURCE),
        f(6, "firstTimestamp", Time, Keep),
        f(7, "lastTimestamp", Time, Keep),
        f(8, "count", Int32, Opt),
        f(9, "type", Str, Opt),
        f(10, "eventTime", MicroTime, Keep),
        m(11, "series", &CORE_EVENT_SERIES),
        f(12, "action", Str, Opt),
        m(13, "related", &OBJECT_REFERENCE),
        f(14, "reportingComponent", Str, Keep),
        f(15, "reportingInstance", Str, Keep),
    ],
};

static EVENT_SOURCE: Msg =
    Msg { name: "EventSource", fields: &[f(1, "component", Str, Opt), f(2, "host", Str, Opt)] };

static CORE_EVENT_SERIES: Msg = Msg {
    name: "EventSeries",
    fields: &[f(1, "count", Int32, Opt), f(2, "lastObservedTime", MicroTime, Keep)],
};

// events/v1

static EVENTS_EVENT: Msg = Msg {
    name: "Event",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        f(2, "eventTime", MicroTime, Keep),
        m(3, "series", &EVENTS_EVENT_SERIES),
        f(4, "reportingController", Str, Opt),
        f(5, "reportingInstance", Str, Opt),
        f(6, "action", Str, Opt),
        f(7, "reason", Str, Opt),
        m(8, "regarding", &OBJECT_REFERENCE),
        m(9, "related", &OBJECT_REFERENCE),
        f(10, "note", Str, Opt),
        f(11, "type", Str, Opt),
        m(12, "deprecatedSource", &EVENT_SOURCE),
        f(13, "deprecatedFirstTimestamp", Time, Keep),
        f(14, "deprecatedLastTimestamp", Time, Keep),
        f(15, "deprecatedCount", Int32, Opt),
    ],
};

static EVENTS_EVENT_SERIES: Msg = Msg {
    name: "EventSeries",
    fields: &[f(1, "count", Int32, Keep), f(2, "lastObservedTime", MicroTime, Keep)],
};

// coordination/v1

static LEASE: Msg =
    Msg { name: "Lease", fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &LEASE_SPEC)] };

static LEASE_SPEC: Msg = Msg {
    name: "LeaseSpec",
    fields: &[
        f(1, "holderIdentity", Str, Keep),
        f(2, "leaseDurationSeconds", Int32, Keep),
        f(3, "acquireTime", MicroTime, Keep),
        f(4, "renewTime", MicroTime, Keep),
        f(5, "leaseTransitions", Int32, Keep),
        f(6, "strategy", Str, Keep),
        f(7, "preferredHolder", Str, Keep),
    ],
};

// certificates/v1

static CSR: Msg = Msg {
    name: "CertificateSigningRequest",
    fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &CSR_SPEC), m(3, "status", &CSR_STATUS)],
};

static CSR_SPEC: Msg = Msg {
    name: "CertificateSigningRequestSpec",
    fields: &[
        f(1, "request", Bytes, Keep),
        f(7, "signerName", Str, Keep),
        f(8, "expirationSeconds", Int32, Keep),
        f(5, "usages", Str, Rep),
        f(2, "username", Str, Opt),
        f(3, "uid", Str, Opt),
        f(4, "groups", Str, Rep),
        f(6, "extra", StrList, MapOf),
    ],
};

static CSR_STATUS: Msg = Msg {
    name: "CertificateSigningRequestStatus",
    fields: &[f(1, "conditions", Ty::Msg(&CSR_CONDITION), Rep), f(2, "certificate", Bytes, Opt)],
};

static CSR_CONDITION: Msg = Msg {
    name: "CertificateSigningRequestCondition",
    fields: &[
        f(1, "type", Str, Keep),
        f(6, "status", Str, Keep),
        f(2, "reason", Str, Opt),
        f(3, "message", Str, Opt),
        f(4, "lastUpdateTime", Time, Keep),
        f(5, "lastTransitionTime", Time, Keep),
    ],
};

// rbac/v1

static ROLE: Msg = Msg {
    name: "Role",
    fields: &[m(1, "metadata", &OBJECT_META), f(2, "rules", Ty::Msg(&POLICY_RULE), Rep)],
};

static CLUSTER_ROLE: Msg = Msg {
    name: "ClusterRole",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        f(2, "rules", Ty::Msg(&POLICY_RULE), Rep),
        m(3, "aggregationRule", &AGGREGATION_RULE),
    ],
};

static AGGREGATION_RULE: Msg = Msg {
    name: "AggregationRule",
    fields: &[f(1, "clusterRoleSelectors", Ty::Msg(&LABEL_SELECTOR), Rep)],
};

static POLICY_RULE: Msg = Msg {
    name: "PolicyRule",
    fields: &[
        f(1, "verbs", Str, Rep),
        f(2, "apiGroups", Str, Rep),
        f(3, "resources", Str, Rep),
        f(4, "resourceNames", Str, Rep),
        f(5, "nonResourceURLs", Str, Rep),
    ],
};

/// RoleBinding and ClusterRoleBinding share their fields.
static ROLE_BINDING: Msg = Msg {
    name: "RoleBinding",
    fields: &[
        m(1, "metadata", &OBJECT_META),
        f(2, "subjects", Ty::Msg(&SUBJECT), Rep),
        m(3, "roleRef", &ROLE_REF),
    ],
};

static SUBJECT: Msg = Msg {
    name: "Subject",
    fields: &[
        f(1, "kind", Str, Keep),
        f(2, "apiGroup", Str, Opt),
        f(3, "name", Str, Keep),
        f(4, "namespace", Str, Opt),
    ],
};

// authorization/v1 and authentication/v1 (k8s.io/api generated.proto): the review kinds
// `kubectl auth can-i` and `kubectl auth whoami` send. Only the request halves are decoded;
// a status sent by a client is ignored by the server anyway.

static SELF_SUBJECT_ACCESS_REVIEW: Msg = Msg {
    name: "SelfSubjectAccessReview",
    fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &SELF_SUBJECT_ACCESS_REVIEW_SPEC)],
};

static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Msg = Msg {
    name: "SelfSubjectAccessReviewSpec",
    fields: &[
        m(1, "resourceAttributes", &RESOURCE_ATTRIBUTES),
        m(2, "nonResourceAttributes", &NON_RESOURCE_ATTRIBUTES),
    ],
};

static SUBJECT_ACCESS_REVIEW: Msg = Msg {
    name: "SubjectAccessReview",
    fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &SUBJECT_ACCESS_REVIEW_SPEC)],
};

static SUBJECT_ACCESS_REVIEW_SPEC: Msg = Msg {
    name: "SubjectAccessReviewSpec",
    fields: &[
        m(1, "resourceAttributes", &RESOURCE_ATTRIBUTES),
        m(2, "nonResourceAttributes", &NON_RESOURCE_ATTRIBUTES),
        f(3, "user", Str, Opt),
        f(4, "groups", Str, Rep),
        f(5, "extra", StrList, MapOf),
        f(6, "uid", Str, Opt),
    ],
};

static RESOURCE_ATTRIBUTES: Msg = Msg {
    name: "ResourceAttributes",
    fields: &[
        f(1, "namespace", Str, Opt),
        f(2, "verb", Str, Opt),
        f(3, "group", Str, Opt),
        f(4, "version", Str, Opt),
        f(5, "resource", Str, Opt),
        f(6, "subresource", Str, Opt),
        f(7, "name", Str, Opt),
    ],
};

static NON_RESOURCE_ATTRIBUTES: Msg = Msg {
    name: "NonResourceAttributes",
    fields: &[f(1, "path", Str, Opt), f(2, "verb", Str, Opt)],
};

static SELF_SUBJECT_RULES_REVIEW: Msg = Msg {
    name: "SelfSubjectRulesReview",
    fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &SELF_SUBJECT_RULES_REVIEW_SPEC)],
};

static SELF_SUBJECT_RULES_REVIEW_SPEC: Msg =
    Msg { name: "SelfSubjectRulesReviewSpec", fields: &[f(1, "namespace", Str, Opt)] };

static SELF_SUBJECT_REVIEW: Msg =
    Msg { name: "SelfSubjectReview", fields: &[m(1, "metadata", &OBJECT_META)] };

static TOKEN_REVIEW: Msg = Msg {
    name: "TokenReview",
    fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &TOKEN_REVIEW_SPEC)],
};

static TOKEN_REVIEW_SPEC: Msg = Msg {
    name: "TokenReviewSpec",
    fields: &[f(1, "token", Str, Opt), f(2, "audiences", Str, Rep)],
};

static TOKEN_REQUEST: Msg = Msg {
    name: "TokenRequest",
    fields: &[m(1, "metadata", &OBJECT_META), m(2, "spec", &TOKEN_REQUEST_SPEC)],
};

static TOKEN_REQUEST_SPEC: Msg = Msg {
    name: "TokenRequestSpec",
    fields: &[
        f(1, "audiences", Str, Rep),
        m(3, "boundObjectRef", &BOUND_OBJECT_REFERENCE),
        f(4, "expirationSeconds", Int64, Opt),
    ],
};

static BOUND_OBJECT_REFERENCE: Msg = Msg {
    name: "BoundObjectReference",
    fields: &[
        f(1, "kind", Str, Opt),
        f(2, "apiVersion", Str, Opt),
        f(3, "name", Str, Opt),
        f(4, "uid", Str, Opt),
    ],
};

static ROLE_REF: Msg = Msg {
    name: "RoleRef",
    fields: &[f(1, "apiGroup", Str, Keep), f(2, "kind", Str, Keep), f(3, "name", Str, Keep)],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_is_consistent() {
        fn check(msg: &'static Msg, seen: &mut Vec<&'static str>) {
            if seen.contains(&msg.name) {
                return;
            }
            seen.push(msg.name);
            for (i, a) in msg.fields.iter().enumerate() {
                assert!(a.num > 0, "{}.{}", msg.name, a.name);
                for b in &msg.fields[i + 1..] {
                    assert!(a.num != b.num && a.name != b.name, "{}.{}", msg.name, a.name);
                }
                if let Ty::Msg(inner) = a.ty {
                    check(inner, seen);
                }
            }
        }
        let mut seen = Vec::new();
        for (_, _, msg) in KINDS {
            check(msg, &mut seen);
        }
    }
}
