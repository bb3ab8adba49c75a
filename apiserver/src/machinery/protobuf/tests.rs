//! End-to-end tests of the decoder: bodies as kubectl and client-go send them, hand-encoded per
//! the .proto field numbers, malformed and random bodies.

use proptest::prelude::*;
use serde_json::json;

use super::tables::KINDS;
use super::wire::{LEN, VARINT};
use super::*;

// A hand encoder, per the .proto field numbers.

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field.
fn len(num: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint((u64::from(num) << 3) | 2, &mut out);
    varint(body.len() as u64, &mut out);
    out.extend_from_slice(body);
    out
}

fn s(num: u32, text: &str) -> Vec<u8> {
    len(num, text.as_bytes())
}

/// A varint field.
fn int(num: u32, v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    varint(u64::from(num) << 3, &mut out);
    varint(v, &mut out);
    out
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

fn entry(num: u32, key: &str, value: &[u8]) -> Vec<u8> {
    len(num, &cat(&[s(1, key), len(2, value)]))
}

/// The whole body: prefix, then `runtime.Unknown{typeMeta, raw}`.
fn body(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend(len(1, &cat(&[s(1, api_version), s(2, kind)])));
    out.extend(len(2, raw));
    out.extend(s(3, ""));
    out.extend(s(4, ""));
    out
}

/// ObjectMeta as gogo-protobuf writes it for a new object: every non-pointer field, empty.
fn meta(name: &str, namespace: &str, extra: &[Vec<u8>]) -> Vec<u8> {
    let mut m = cat(&[
        s(1, name),
        s(2, ""),
        s(3, namespace),
        s(4, ""),
        s(5, ""),
        s(6, ""),
        int(7, 0),
        len(8, &[]),
    ]);
    for e in extra {
        m.extend_from_slice(e);
    }
    len(1, &m)
}

#[test]
fn namespace_as_kubectl_sends_it() {
    let raw = cat(&[meta("ns1", "", &[]), len(2, &[]), len(3, &s(1, ""))]);
    let v = decode(&body("v1", "Namespace", &raw)).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": "ns1"},
               "spec": {}, "status": {}})
    );
}

#[test]
fn config_map_data_binary_data_labels_and_immutable() {
    let raw = cat(&[
        meta("cm", "default", &[entry(11, "app", b"web"), entry(12, "note", b"")]),
        entry(2, "k", b"v"),
        entry(2, "empty", b""),
        entry(3, "bin", &[0, 0xff, 0x10]),
        int(4, 1),
    ]);
    let v = decode(&body("v1", "ConfigMap", &raw)).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "cm", "namespace": "default",
                            "labels": {"app": "web"}, "annotations": {"note": ""}},
               "data": {"k": "v", "empty": ""},
               "binaryData": {"bin": "AP8Q"},
               "immutable": true})
    );
}

#[test]
fn secret_data_is_base64_and_a_false_pointer_is_kept() {
    let raw = cat(&[
        meta("s", "default", &[]),
        entry(2, "password", b"hunter2"),
        entry(4, "plain", b"text"),
        s(3, "Opaque"),
        int(5, 0),
    ]);
    let v = decode(&body("v1", "Secret", &raw)).unwrap();
    assert_eq!(v["data"], json!({"password": "aHVudGVyMg=="}));
    assert_eq!(v["stringData"], json!({"plain": "text"}));
    assert_eq!(v["type"], "Opaque");
    assert_eq!(v["immutable"], false);
}

#[test]
fn service_account_references() {
    let raw = cat(&[
        meta("sa1", "default", &[]),
        len(2, &cat(&[s(3, "tok"), s(2, ""), s(1, "")])),
        len(3, &s(1, "pull")),
        int(4, 0),
    ]);
    let v = decode(&body("v1", "ServiceAccount", &raw)).unwrap();
    assert_eq!(v["secrets"], json!([{"name": "tok"}]));
    assert_eq!(v["imagePullSecrets"], json!([{"name": "pull"}]));
    assert_eq!(v["automountServiceAccountToken"], false);
}

#[test]
fn rbac_role_binding_and_cluster_role() {
    let subject = cat(&[s(1, "User"), s(2, "rbac.authorization.k8s.io"), s(3, "u"), s(4, "")]);
    let sa = cat(&[s(1, "ServiceAccount"), s(2, ""), s(3, "sa1"), s(4, "ns1")]);
    let role_ref = cat(&[s(1, "rbac.authorization.k8s.io"), s(2, "ClusterRole"), s(3, "view")]);
    let raw = cat(&[meta("x", "", &[]), len(2, &subject), len(2, &sa), len(3, &role_ref)]);
    let v = decode(&body("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", &raw)).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "x"},
               "subjects": [
                   {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "u"},
                   {"kind": "ServiceAccount", "name": "sa1", "namespace": "ns1"}],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "view"}})
    );

    let rule = cat(&[s(1, "get"), s(1, "list"), s(2, ""), s(3, "configmaps"), s(4, "a")]);
    let selector = len(1, &cat(&[entry(1, "agg", b"true")]));
    let raw = cat(&[meta("r", "", &[]), len(2, &rule), len(3, &selector)]);
    let v = decode(&body("rbac.authorization.k8s.io/v1", "ClusterRole", &raw)).unwrap();
    assert_eq!(
        v["rules"],
        json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"],
                "resourceNames": ["a"]}])
    );
    assert_eq!(
        v["aggregationRule"],
        json!({"clusterRoleSelectors": [{"matchLabels": {"agg": "true"}}]})
    );
}

#[test]
fn times_micro_times_owner_references_and_managed_fields() {
    // 2024-01-02T03:04:05Z plus 123456789ns.
    let ts = cat(&[int(1, 1_704_164_645), int(2, 123_456_789)]);
    let owner =
        cat(&[s(1, "Namespace"), s(3, "ns1"), s(4, "u-1"), s(5, "v1"), int(6, 1), int(7, 0)]);
    let mf = cat(&[
        s(1, "kubectl"),
        s(2, "Update"),
        s(3, "coordination.k8s.io/v1"),
        len(4, &int(1, 1_704_164_645)),
        s(6, "FieldsV1"),
        len(7, &s(1, r#"{"f:spec":{}}"#)),
        s(8, ""),
    ]);
    let extra = [len(9, &ts), int(10, 30), len(13, &owner), s(14, "f1"), len(17, &mf)];
    let spec = cat(&[s(1, "holder"), int(2, 15), len(3, &ts), len(4, &int(1, 0)), int(5, 0)]);
    let raw = cat(&[meta("l", "default", &extra), len(2, &spec)]);
    let v = decode(&body("coordination.k8s.io/v1", "Lease", &raw)).unwrap();
    assert_eq!(v["metadata"]["deletionTimestamp"], "2024-01-02T03:04:05Z");
    assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 30);
    assert_eq!(
        v["metadata"]["ownerReferences"],
        json!([{"kind": "Namespace", "name": "ns1", "uid": "u-1", "apiVersion": "v1",
                "controller": true, "blockOwnerDeletion": false}])
    );
    assert_eq!(v["metadata"]["finalizers"], json!(["f1"]));
    assert_eq!(
        v["metadata"]["managedFields"],
        json!([{"manager": "kubectl", "operation": "Update",
                "apiVersion": "coordination.k8s.io/v1", "time": "2024-01-02T03:04:05Z",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}])
    );
    assert_eq!(
        v["spec"],
        json!({"holderIdentity": "holder", "leaseDurationSeconds": 15,
               "acquireTime": "2024-01-02T03:04:05.123456Z",
               "renewTime": "1970-01-01T00:00:00.000000Z", "leaseTransitions": 0})
    );
}

#[test]
fn csr_request_bytes_usages_and_extra() {
    let spec = cat(&[
        len(1, b"PEM"),
        s(7, "kubernetes.io/kube-apiserver-client"),
        int(8, 600),
        s(5, "client auth"),
        s(2, ""),
        s(3, ""),
        entry(6, "scopes", &cat(&[s(1, "a"), s(1, "b")])),
    ]);
    let cond = cat(&[s(1, "Approved"), s(6, "True"), s(2, "ok"), s(3, ""), len(4, &[])]);
    let status = cat(&[len(1, &cond), len(2, &[])]);
    let raw = cat(&[meta("c", "", &[]), len(2, &spec), len(3, &status)]);
    let v = decode(&body("certificates.k8s.io/v1", "CertificateSigningRequest", &raw)).unwrap();
    assert_eq!(
        v["spec"],
        json!({"request": "UEVN", "signerName": "kubernetes.io/kube-apiserver-client",
               "expirationSeconds": 600, "usages": ["client auth"],
               "extra": {"scopes": ["a", "b"]}})
    );
    assert_eq!(
        v["status"],
        json!({"conditions": [{"type": "Approved", "status": "True", "reason": "ok"}]})
    );
}

#[test]
fn events_of_both_groups() {
    let source = cat(&[s(1, "kubelet"), s(2, "")]);
    let raw = cat(&[
        meta("e", "default", &[]),
        len(2, &cat(&[s(1, "Pod"), s(3, "p")])),
        s(3, "Started"),
        len(5, &source),
        len(6, &[]),
        int(8, 2),
        len(10, &[]),
        s(14, ""),
        s(15, ""),
    ]);
    let v = decode(&body("v1", "Event", &raw)).unwrap();
    assert_eq!(v["involvedObject"], json!({"kind": "Pod", "name": "p"}));
    assert_eq!(v["source"], json!({"component": "kubelet"}));
    assert_eq!(v["count"], 2);
    assert!(v.get("firstTimestamp").is_none() && v.get("eventTime").is_none());
    assert_eq!(v["reportingComponent"], "");

    let raw = cat(&[
        meta("e", "default", &[]),
        len(2, &int(1, 1)),
        s(4, "ctl"),
        len(8, &s(3, "p")),
        s(10, "hello"),
        int(15, 0),
    ]);
    let v = decode(&body("events.k8s.io/v1", "Event", &raw)).unwrap();
    assert_eq!(v["eventTime"], "1970-01-01T00:00:01.000000Z");
    assert_eq!(v["reportingController"], "ctl");
    assert_eq!(v["regarding"], json!({"name": "p"}));
    assert_eq!(v["note"], "hello");
    assert!(v.get("deprecatedCount").is_none());
}

#[test]
fn unknown_fields_of_every_wire_type_are_skipped() {
    let mut unknown = int(99, 7);
    unknown.extend(s(98, "x"));
    varint((97 << 3) | 1, &mut unknown);
    unknown.extend([0; 8]);
    varint((96 << 3) | 5, &mut unknown);
    unknown.extend([0; 4]);
    let raw = cat(&[meta("cm", "default", &[unknown.clone()]), unknown.clone()]);
    let mut b = body("v1", "ConfigMap", &raw);
    b.extend(&unknown); // in runtime.Unknown too
    let v = decode(&b).unwrap();
    assert_eq!(
        v["metadata"],
        json!({"name": "cm", "namespace": "default",
        })
    );
}

#[test]
fn a_message_sent_twice_is_merged_and_a_later_zero_clears() {
    let raw = cat(&[
        len(1, &cat(&[s(1, "a"), entry(11, "x", b"1")])),
        len(1, &cat(&[s(3, "default"), entry(11, "y", b"2")])),
        s(3, "Opaque"),
        s(3, ""),
    ]);
    let v = decode(&body("v1", "Secret", &raw)).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "a", "labels": {"x": "1", "y": "2"},
                            "namespace": "default"}})
    );
}

#[test]
fn malformed_bodies_are_bad_requests() {
    let ns = cat(&[meta("ns1", "", &[])]);
    let cases: Vec<(Vec<u8>, Error)> = vec![
        (b"{}".to_vec(), Error::Prefix),
        (MAGIC.to_vec(), Error::Empty),
        // A tag whose varint never ends.
        ([MAGIC, &[0x8a]].concat(), Error::Varint { message: "Unknown", offset: 0 }),
        // raw claims 100 bytes and has 1.
        ([MAGIC, &[0x12, 100, 0]].concat(), Error::Truncated { message: "Unknown", field: 2 }),
        // An 11-byte varint.
        ([MAGIC, &[0x10], &[0xff; 11]].concat(), Error::Varint { message: "Unknown", offset: 1 }),
        // Field number 0; a group.
        ([MAGIC, &[0x02, 0]].concat(), Error::BadTag { message: "Unknown", field: 0, wire: 2 }),
        ([MAGIC, &[0x0b]].concat(), Error::BadTag { message: "Unknown", field: 1, wire: 3 }),
        // metadata.name as a varint.
        (
            body("v1", "Namespace", &len(1, &int(1, 5))),
            Error::WireType {
                message: "ObjectMeta",
                name: "name",
                field: 1,
                got: VARINT,
                expected: LEN,
            },
        ),
        // labels as a varint.
        (
            body("v1", "Namespace", &len(1, &int(11, 5))),
            Error::WireType {
                message: "ObjectMeta",
                name: "labels",
                field: 11,
                got: VARINT,
                expected: LEN,
            },
        ),
        (
            body("v1", "Namespace", &len(1, &[0x0a, 1, 0xff])),
            Error::Value {
                message: "ObjectMeta",
                name: "name",
                detail: "the string is not valid UTF-8".into(),
            },
        ),
        (
            body("v1", "Namespace", &len(1, &len(8, &int(1, u64::MAX >> 1)))),
            Error::Value {
                message: "ObjectMeta",
                name: "creationTimestamp",
                detail: "the time 9223372036854775807s 0ns is out of range".into(),
            },
        ),
        ([MAGIC, &len(2, &ns)].concat(), Error::MissingKind),
    ];
    for (bytes, want) in cases {
        let got = decode(&bytes).unwrap_err();
        assert_eq!(got, want, "{bytes:?}");
        let api = ApiError::from(got);
        assert_eq!((api.code, api.reason), (400, "BadRequest"), "{api:?}");
        assert!(api.message.contains("not a valid Kubernetes protobuf message"), "{api:?}");
    }
}

#[test]
fn an_unsupported_kind_is_415_listing_the_accepted_ones() {
    let err = decode(&body("v1", "Pod", &meta("p", "default", &[]))).unwrap_err();
    assert!(matches!(&err, Error::UnsupportedKind { kind, .. } if kind == "Pod"));
    let api = ApiError::from(err);
    assert_eq!((api.code, api.reason), (415, "UnsupportedMediaType"));
    assert!(api.message.starts_with("protobuf bodies of v1, Kind=Pod are not supported"));
    assert!(api.message.contains("v1/ConfigMap"), "{}", api.message);
    assert!(api.message.contains("rbac.authorization.k8s.io/v1/ClusterRoleBinding"));
}
proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Random bytes, with or without the prefix: an error or an object, never a panic.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode(&bytes);
        let _ = decode(&[MAGIC, &bytes].concat());
    }

    /// Random typed messages of every kind: the decoder walks the tables on hostile input.
    #[test]
    fn random_objects_never_panic(
        kind in 0..KINDS.len(),
        raw in proptest::collection::vec(any::<u8>(), 0..512),
    ) {
        let (av, k, _) = KINDS[kind];
        if let Ok(v) = decode(&body(av, k, &raw)) {
            prop_assert_eq!(&v["kind"], k);
        }
    }

    /// Random well-formed metadata: whatever strings and labels, it decodes as sent.
    #[test]
    fn well_formed_metadata_round_trips(
        name in "[a-z0-9.-]{1,20}",
        labels in proptest::collection::btree_map("[a-z]{1,8}", ".{0,8}", 0..4),
    ) {
        let entries: Vec<Vec<u8>> =
            labels.iter().map(|(k, v)| entry(11, k, v.as_bytes())).collect();
        let v = decode(&body("v1", "ConfigMap", &meta(&name, "default", &entries))).unwrap();
        prop_assert_eq!(&v["metadata"]["name"], &Value::String(name));
        if !labels.is_empty() {
            prop_assert_eq!(&v["metadata"]["labels"], &json!(labels));
        }
    }
}
