//! The pieces every OCM kind shares: the `apiVersion`/`kind` tags, the generic [`ObjectList`],
//! the embedded-manifest newtype, condition status values and the serde and JSON-schema helpers
//! the kind modules use.

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Deserializer};
use serde::ser::{SerializeStruct, Serializer};
use serde::{Deserialize, Serialize};

use super::Resource;

pub use k8s_openapi::ByteString;
pub use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
pub use k8s_openapi::api::rbac::v1::RoleRef;
pub use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, LabelSelector, LabelSelectorRequirement, ObjectMeta, Time,
};
pub use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// `metav1.Condition.status` value `True`.
pub const CONDITION_TRUE: &str = "True";
/// `metav1.Condition.status` value `False`.
pub const CONDITION_FALSE: &str = "False";
/// `metav1.Condition.status` value `Unknown`.
pub const CONDITION_UNKNOWN: &str = "Unknown";

/// The `apiVersion` of kind `K`: serializes as `K::API_VERSION`; on input it may be absent but,
/// when present, must equal `K::API_VERSION` (a v1alpha1 body is never read as v1beta1).
pub struct ApiVersionTag<K>(PhantomData<fn() -> K>);

/// The `kind` of kind `K`: serializes as `K::KIND`; on input it may be absent but, when present,
/// must equal `K::KIND`.
pub struct KindTag<K>(PhantomData<fn() -> K>);

macro_rules! tag {
    ($tag:ident, $konst:ident, $what:literal) => {
        impl<K> Default for $tag<K> {
            fn default() -> Self {
                Self(PhantomData)
            }
        }

        impl<K> Clone for $tag<K> {
            fn clone(&self) -> Self {
                *self
            }
        }

        impl<K> Copy for $tag<K> {}

        impl<K> PartialEq for $tag<K> {
            fn eq(&self, _: &Self) -> bool {
                true
            }
        }

        impl<K> Eq for $tag<K> {}

        impl<K: Resource> fmt::Debug for $tag<K> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(K::$konst, f)
            }
        }

        impl<K: Resource> $tag<K> {
            /// The value this tag stands for.
            pub fn as_str(&self) -> &'static str {
                K::$konst
            }
        }

        impl<K: Resource> Serialize for $tag<K> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(K::$konst)
            }
        }

        impl<'de, K: Resource> Deserialize<'de> for $tag<K> {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = String::deserialize(deserializer)?;
                if value == K::$konst {
                    Ok(Self(PhantomData))
                } else {
                    Err(de::Error::custom(format_args!(
                        concat!($what, " {:?} where {:?} was expected"),
                        value,
                        K::$konst
                    )))
                }
            }
        }
    };
}

/// A tag is a string, described by the field that holds it (always inlined: it has no name of
/// its own).
macro_rules! tag_schema {
    ($tag:ident) => {
        impl<K> JsonSchema for $tag<K> {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                "string".into()
            }

            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                json_schema!({"type": "string"})
            }
        }
    };
}

tag_schema!(ApiVersionTag);
tag_schema!(KindTag);

tag!(ApiVersionTag, API_VERSION, "apiVersion");
tag!(KindTag, KIND, "kind");

/// A list of objects of kind `T` as the API returns it: `apiVersion`, `kind: <Kind>List`,
/// `metadata` (resourceVersion, continue) and `items`. On input the list's own `apiVersion` and
/// `kind` are not checked; each item's are.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectList<T> {
    /// List metadata (`resourceVersion`, `continue`, `remainingItemCount`).
    pub metadata: ListMeta,
    /// The objects.
    pub items: Vec<T>,
}

impl<T> Default for ObjectList<T> {
    fn default() -> Self {
        Self { metadata: ListMeta::default(), items: Vec::new() }
    }
}

impl<T: Resource + Serialize> Serialize for ObjectList<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut list = serializer.serialize_struct("ObjectList", 4)?;
        list.serialize_field("apiVersion", T::API_VERSION)?;
        list.serialize_field("kind", T::LIST_KIND)?;
        list.serialize_field("metadata", &self.metadata)?;
        list.serialize_field("items", &self.items)?;
        list.end()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ObjectList<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(bound = "T: Deserialize<'de>")]
        struct Raw<T> {
            #[serde(default)]
            metadata: ListMeta,
            #[serde(default, deserialize_with = "null_as_default")]
            items: Vec<T>,
        }
        let raw = Raw::<T>::deserialize(deserializer)?;
        Ok(Self { metadata: raw.metadata, items: raw.items })
    }
}

/// One embedded Kubernetes object (a ManifestWork `workload.manifests[]` entry), kept verbatim:
/// the schema says `x-kubernetes-preserve-unknown-fields` and `x-kubernetes-embedded-resource`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Manifest(pub serde_json::Value);

impl JsonSchema for Manifest {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Manifest".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "A Kubernetes object, kept as written.",
            "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-embedded-resource": true,
        })
    }
}

impl From<serde_json::Value> for Manifest {
    fn from(value: serde_json::Value) -> Self {
        Self(value)
    }
}

/// Reads `null` as the type's default: Go clients send `"conditions": null` for a nil slice.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// The schema of a `[]metav1.Condition` field: a list keyed by `type` whose items are the
/// upstream Condition (inlined, so `status` can carry its enum, which the upstream schema leaves
/// out).
pub(crate) fn conditions_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut item = <Condition as JsonSchema>::json_schema(generator);
    if let Some(status) = item
        .get_mut("properties")
        .and_then(|p| p.get_mut("status"))
        .and_then(serde_json::Value::as_object_mut)
    {
        status.insert(
            "enum".into(),
            serde_json::json!([CONDITION_TRUE, CONDITION_FALSE, CONDITION_UNKNOWN]),
        );
    }
    json_schema!({
        "type": "array",
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}

/// The schema of a `[]byte` field: a base64 string (`ByteString` has no schema of its own).
pub(crate) fn bytes_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({"type": "string", "format": "byte"})
}

/// A Secret's `data[key]` (base64 on the wire) as text, if it is there and UTF-8.
pub fn secret_data(secret: &serde_json::Value, key: &str) -> Option<String> {
    let field = secret.get("data")?.get(key)?.clone();
    let bytes: ByteString = serde_json::from_value(field).ok()?;
    String::from_utf8(bytes.0).ok()
}

/// The condition of `type_` in a list, if any.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is there with status `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == CONDITION_TRUE)
}

/// Sets a condition with apimachinery's `meta.SetStatusCondition` semantics: an existing
/// condition of the same type keeps its `lastTransitionTime` unless its status changes; reason,
/// message and observedGeneration are overwritten. `now` stamps new transitions. Returns whether
/// the list changed.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition, now: Time) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        None => {
            conditions.push(Condition { last_transition_time: now, ..new });
            true
        }
        Some(old) => {
            let mut changed = false;
            if old.status != new.status {
                old.status = new.status;
                old.last_transition_time = now;
                changed = true;
            }
            if old.reason != new.reason {
                old.reason = new.reason;
                changed = true;
            }
            if old.message != new.message {
                old.message = new.message;
                changed = true;
            }
            if new.observed_generation.is_some()
                && old.observed_generation != new.observed_generation
            {
                old.observed_generation = new.observed_generation;
                changed = true;
            }
            changed
        }
    }
}

/// A condition with no transition time yet (for [`set_condition`]).
pub fn condition(type_: &str, status: &str, reason: &str, message: impl Into<String>) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        last_transition_time: Time(Default::default()),
        observed_generation: None,
    }
}

#[cfg(test)]
mod condition_tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("in range"))
    }

    #[test]
    fn transition_time_moves_only_with_status() {
        let mut list = Vec::new();
        assert!(set_condition(&mut list, condition("A", CONDITION_TRUE, "R", "m"), at(10)));
        assert_eq!(list[0].last_transition_time, at(10));
        assert!(!set_condition(&mut list, condition("A", CONDITION_TRUE, "R", "m"), at(20)));
        assert!(set_condition(&mut list, condition("A", CONDITION_TRUE, "R2", "m2"), at(30)));
        assert_eq!(list[0].last_transition_time, at(10), "a reason change is no transition");
        assert!(set_condition(&mut list, condition("A", CONDITION_FALSE, "R2", "m2"), at(40)));
        assert_eq!(list[0].last_transition_time, at(40));
        assert!(!is_condition_true(&list, "B") && find_condition(&list, "A").is_some());
    }
}
