//! The CloudEvents gRPC protocol of OCM's hub and agents (ocm.md §8): the generated messages and
//! `CloudEventService` client and server, and the event-type grammar
//! (`<group>.<version>.<resource>.<spec|status>.<action>`) with the data types OCM defines.

use std::fmt;

/// An attribute's value.
pub use v1::cloud_event_attribute_value::Attr;

/// `io.cloudevents.v1`, generated from `proto/io/cloudevents/v1/cloudevent.proto` by
/// tonic-prost-build (messages, client and server traits, no transport; `binary_data` as
/// `Bytes`). The generated file is committed so a build needs no `protoc`;
/// `generated_code_is_current` regenerates it and compares (`OCM_REGENERATE=1` rewrites it).
#[allow(unreachable_pub, missing_docs, clippy::all)]
#[rustfmt::skip]
pub mod v1 {
    include!("gen/io.cloudevents.v1.rs");
}

/// The CloudEvents `specversion` OCM sends.
pub const SPEC_VERSION: &str = "1.0";
/// The event type of the server's heartbeats on every Subscribe stream.
pub const HEARTBEAT: &str = "io.open-cluster-management.cloudevents.heartbeat";

/// The data types of OCM's resources on the wire (ocm.md §8.2).
pub mod data_type {
    pub const MANIFEST_BUNDLES: &str = "io.open-cluster-management.works.v1alpha1.manifestbundles";
    pub const MANAGED_CLUSTERS: &str = "cluster.open-cluster-management.io.v1.managedclusters";
    pub const LEASES: &str = "coordination.k8s.io.v1.leases";
    pub const CSRS: &str = "certificates.k8s.io.v1.certificatesigningrequests";
    pub const ADDONS: &str = "addon.open-cluster-management.io.v1alpha1.managedclusteraddons";
    pub const ADDONS_V1BETA1: &str =
        "addon.open-cluster-management.io.v1beta1.managedclusteraddons";
    pub const EVENTS: &str = "events.k8s.io.v1.events";
    pub const TOKEN_REQUESTS: &str = "authentication.k8s.io.v1.tokenrequests";
}

/// OCM's extension attributes (ocm.md §8.3), stored as `ce-<name>` in `attributes`.
pub mod ext {
    pub const CLUSTER_NAME: &str = "clustername";
    pub const ORIGINAL_SOURCE: &str = "originalsource";
    pub const RESOURCE_ID: &str = "resourceid";
    /// An integer for manifestbundles (the generation), a string for every other type.
    pub const RESOURCE_VERSION: &str = "resourceversion";
    pub const DELETION_TIMESTAMP: &str = "deletiontimestamp";
    pub const SEQUENCE_ID: &str = "sequenceid";
    pub const STATUS_HASH: &str = "statushash";
    pub const METADATA: &str = "metadata";
    /// The standard `time` attribute, stored like the extensions.
    pub const TIME: &str = "time";
}

/// The key of the data's content type (not `ce-` prefixed, as OCM stores it).
pub const CONTENT_TYPE: &str = "contenttype";
/// The content type of OCM's payloads.
pub const JSON: &str = "application/json";

impl v1::CloudEvent {
    /// An event of type `t` from `source`, with id `id` and no attributes or data.
    pub fn new(id: impl Into<String>, source: impl Into<String>, t: &EventType) -> v1::CloudEvent {
        v1::CloudEvent {
            id: id.into(),
            source: source.into(),
            spec_version: SPEC_VERSION.into(),
            r#type: t.to_string(),
            ..v1::CloudEvent::default()
        }
    }

    /// Sets attribute `name` (stored as `ce-<name>`).
    pub fn set(&mut self, name: &str, value: Attr) -> &mut v1::CloudEvent {
        let value = v1::CloudEventAttributeValue { attr: Some(value) };
        self.attributes.insert(format!("ce-{name}"), value);
        self
    }

    /// Attribute `name`, if set.
    pub fn get(&self, name: &str) -> Option<&Attr> {
        self.attributes.get(&format!("ce-{name}"))?.attr.as_ref()
    }

    /// Attribute `name` when it is a string.
    pub fn string(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            Attr::CeString(s) | Attr::CeUri(s) | Attr::CeUriRef(s) => Some(s),
            _ => None,
        }
    }

    /// Attribute `name` when it is an integer.
    pub fn integer(&self, name: &str) -> Option<i32> {
        match self.get(name)? {
            Attr::CeInteger(n) => Some(*n),
            _ => None,
        }
    }

    /// Sets the data to JSON `bytes`, with its content type. The bytes are shared, not copied,
    /// when one event goes to many subscribers.
    pub fn set_json(&mut self, bytes: impl Into<bytes::Bytes>) -> &mut v1::CloudEvent {
        let ct = v1::CloudEventAttributeValue { attr: Some(Attr::CeString(JSON.into())) };
        self.attributes.insert(CONTENT_TYPE.into(), ct);
        self.data = Some(v1::cloud_event::Data::BinaryData(bytes.into()));
        self
    }

    /// The data as bytes (binary or text), if any.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self.data.as_ref()? {
            v1::cloud_event::Data::BinaryData(b) => Some(b),
            v1::cloud_event::Data::TextData(t) => Some(t.as_bytes()),
            v1::cloud_event::Data::ProtoData(_) => None,
        }
    }
}

/// OCM's `statushash`: the lowercase hex SHA-256 of a status's JSON.
pub fn status_hash(status: &impl serde::Serialize) -> String {
    use sha2::Digest as _;
    let bytes = serde_json::to_vec(status).unwrap_or_default();
    sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Which half of a resource an event carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    Spec,
    Status,
}

/// What an event asks for or answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    CreateRequest,
    UpdateRequest,
    DeleteRequest,
    WatchRequest,
    ResyncRequest,
    ResyncResponse,
}

impl Action {
    const ALL: [(Action, &'static str); 6] = [
        (Action::CreateRequest, "create_request"),
        (Action::UpdateRequest, "update_request"),
        (Action::DeleteRequest, "delete_request"),
        (Action::WatchRequest, "watch_request"),
        (Action::ResyncRequest, "resync_request"),
        (Action::ResyncResponse, "resync_response"),
    ];

    fn as_str(self) -> &'static str {
        Action::ALL.iter().find(|(a, _)| *a == self).map_or("", |(_, s)| s)
    }
}

/// A parsed event type: `<data type>.<subresource>.<action>`, where the data type is
/// `<group>.<version>.<resource>` and the group may contain dots (so it is parsed from the right).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventType {
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: Subresource,
    pub action: Action,
}

/// Why an event type does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported event type {0:?}: want <group>.<version>.<resource>.<spec|status>.<action>")]
pub struct BadEventType(pub String);

impl EventType {
    /// Parses `t`.
    pub fn parse(t: &str) -> Result<EventType, BadEventType> {
        let bad = || BadEventType(t.to_owned());
        let mut parts = t.rsplitn(5, '.');
        let action = parts.next().ok_or_else(bad)?;
        let subresource = parts.next().ok_or_else(bad)?;
        let resource = parts.next().ok_or_else(bad)?;
        let version = parts.next().ok_or_else(bad)?;
        // The core group is empty: `.v1.leases...` is not a form OCM sends.
        let group = parts.next().filter(|g| !g.is_empty()).ok_or_else(bad)?;
        let action =
            Action::ALL.iter().find(|(_, s)| *s == action).map(|(a, _)| *a).ok_or_else(bad)?;
        let subresource = match subresource {
            "spec" => Subresource::Spec,
            "status" => Subresource::Status,
            _ => return Err(bad()),
        };
        if resource.is_empty() || version.is_empty() {
            return Err(bad());
        }
        Ok(EventType {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
            subresource,
            action,
        })
    }

    /// `<group>.<version>.<resource>`.
    pub fn data_type(&self) -> String {
        format!("{}.{}.{}", self.group, self.version, self.resource)
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sub = match self.subresource {
            Subresource::Spec => "spec",
            Subresource::Status => "status",
        };
        write!(f, "{}.{}.{}", self.data_type(), sub, self.action.as_str())
    }
}

/// How src/gen/ is generated: the one place its options are written.
#[cfg(test)]
fn generate(out_dir: &std::path::Path) -> std::io::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    tonic_prost_build::configure()
        .build_transport(false)
        .bytes(".io.cloudevents.v1.CloudEvent.binary_data")
        .out_dir(out_dir)
        .compile_protos(&[root.join("io/cloudevents/v1/cloudevent.proto")], &[root])
}

#[cfg(test)]
mod tests {
    use super::v1::{
        CloudEvent, CloudEventAttributeValue, cloud_event, cloud_event_attribute_value,
    };
    use super::*;
    use prost::Message as _;

    /// The committed generated code is what tonic-prost-build makes of the .proto today (with
    /// the real `protoc`, `$PROTOC` or on the PATH).
    #[test]
    fn generated_code_is_current() {
        let dir = tempfile::tempdir().unwrap();
        super::generate(dir.path()).unwrap_or_else(|e| {
            panic!("generating with protoc: {e} (apt-get install -y protobuf-compiler)")
        });
        let fresh = std::fs::read_to_string(dir.path().join("io.cloudevents.v1.rs")).unwrap();
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/gen/io.cloudevents.v1.rs");
        if std::env::var_os("OCM_REGENERATE").is_some() {
            std::fs::write(&path, &fresh).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap();
        assert!(
            committed == fresh,
            "{} is stale: run OCM_REGENERATE=1 cargo test -p ocm-proto generated_code_is_current",
            path.display()
        );
    }

    #[test]
    fn event_types_parse_from_the_right() {
        let t = EventType::parse(
            "io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request",
        )
        .unwrap();
        assert_eq!(t.group, "io.open-cluster-management.works");
        assert_eq!((t.version.as_str(), t.resource.as_str()), ("v1alpha1", "manifestbundles"));
        assert_eq!((t.subresource, t.action), (Subresource::Status, Action::UpdateRequest));
        assert_eq!(t.data_type(), data_type::MANIFEST_BUNDLES);
        assert_eq!(
            t.to_string(),
            "io.open-cluster-management.works.v1alpha1.manifestbundles.status.update_request"
        );
        for t in [
            "coordination.k8s.io.v1.leases.spec.resync_response",
            "cluster.open-cluster-management.io.v1.managedclusters.spec.watch_request",
        ] {
            assert_eq!(EventType::parse(t).unwrap().to_string(), t);
        }
        for bad in [
            "",
            HEARTBEAT,
            "v1.leases.spec.create_request",
            "coordination.k8s.io.v1.leases.body.create_request",
            "coordination.k8s.io.v1.leases.spec.create",
            "coordination.k8s.io..leases.spec.create_request",
        ] {
            assert_eq!(EventType::parse(bad), Err(BadEventType(bad.to_owned())), "{bad}");
        }
    }

    #[test]
    fn attributes_are_stored_as_ocm_stores_them() {
        let t = EventType::parse("coordination.k8s.io.v1.leases.spec.update_request").unwrap();
        let mut e = CloudEvent::new("id-1", "kube", &t);
        e.set(ext::CLUSTER_NAME, Attr::CeString("c1".into()))
            .set(ext::RESOURCE_VERSION, Attr::CeInteger(3))
            .set_json(b"{\"a\":1}".to_vec());
        assert_eq!(e.spec_version, SPEC_VERSION);
        assert_eq!(e.r#type, "coordination.k8s.io.v1.leases.spec.update_request");
        assert!(e.attributes.contains_key("ce-clustername"));
        assert_eq!(
            e.attributes[CONTENT_TYPE].attr,
            Some(Attr::CeString("application/json".into()))
        );
        assert_eq!(e.string(ext::CLUSTER_NAME), Some("c1"));
        assert_eq!(e.integer(ext::RESOURCE_VERSION), Some(3));
        assert_eq!(e.string(ext::RESOURCE_VERSION), None);
        assert_eq!(e.get(ext::STATUS_HASH), None);
        assert_eq!(e.bytes(), Some(&b"{\"a\":1}"[..]));
    }

    /// An event as OCM's agents send it, encoded by us and read back by `protoc --decode_raw`
    /// (a decoder nobody here wrote, that does not read our .proto): the field numbers and wire
    /// types must be ocm.md §8.1's, whatever the .proto says.
    #[test]
    fn events_encode_with_the_field_numbers_of_the_contract() {
        let attr = |v| CloudEventAttributeValue { attr: Some(v) };
        let event = CloudEvent {
            id: "0b6c1f5e".into(),
            source: "agent-1".into(),
            spec_version: SPEC_VERSION.into(),
            r#type: "coordination.k8s.io.v1.leases.status.update_request".into(),
            attributes: [
                (
                    "ce-clustername".to_owned(),
                    attr(cloud_event_attribute_value::Attr::CeString("c1".into())),
                ),
                (
                    "ce-resourceversion".to_owned(),
                    attr(cloud_event_attribute_value::Attr::CeInteger(7)),
                ),
            ]
            .into(),
            data: Some(cloud_event::Data::BinaryData(bytes::Bytes::from_static(b"{}"))),
        };
        let bytes = event.encode_to_vec();
        assert_eq!(CloudEvent::decode(bytes.as_slice()).unwrap(), event);
        // prost-build runs `$PROTOC` when set, else `protoc` on the PATH; so does this test.
        let protoc = std::env::var_os("PROTOC").unwrap_or_else(|| "protoc".into());
        let mut child = std::process::Command::new(&protoc)
            .arg("--decode_raw")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{protoc:?}: {e} (it builds this crate: apt-get install -y protobuf-compiler)"
                )
            });
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), &bytes).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        // 1 id, 2 source, 3 spec_version, 4 type, 5 attributes (map: 1 key, 2 value with the
        // oneof 2 ce_integer, 3 ce_string), 6 binary_data.
        for want in [
            r#"1: "0b6c1f5e""#,
            r#"2: "agent-1""#,
            r#"3: "1.0""#,
            r#"4: "coordination.k8s.io.v1.leases.status.update_request""#,
            r#"5 { 1: "ce-clustername" 2 { 3: "c1" } }"#,
            r#"5 { 1: "ce-resourceversion" 2 { 2: 7 } }"#,
            r#"6: "{}""#,
        ] {
            assert!(flat.contains(want), "protoc --decode_raw read:\n{text}\nmissing {want}");
        }
    }
}
