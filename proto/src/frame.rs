//! gRPC's message framing (a compression flag byte, a big-endian `u32` length, the protobuf
//! message) for the hub's Subscribe streams, which bypass tonic's encoder: every event there
//! carries a payload shared by many streams (one ManifestWork's bundle sent to a thousand
//! clusters), and tonic would copy it into each stream's buffer. [`event_message`] writes the
//! event's other fields and leaves the payload a shared `Bytes` after them.

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};

use crate::cloudevents::v1::CloudEvent;
use crate::cloudevents::v1::cloud_event::Data;

/// The largest message the hub accepts or sends (tonic's default, the agent's too).
pub const MAX_MESSAGE: usize = 4 << 20;
/// `binary_data`'s field number in `CloudEvent`.
const BINARY_DATA: u32 = 6;
/// Payloads at least this large are passed on shared; smaller ones are cheaper to copy than to
/// send as a frame of their own.
const SHARE_BYTES: usize = 4096;

/// A malformed gRPC request message.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FrameError {
    #[error("the message is truncated ({0} bytes)")]
    Truncated(usize),
    #[error("the message is compressed, and no compression was negotiated")]
    Compressed,
    #[error("the message of {0} bytes is larger than the limit of {MAX_MESSAGE}")]
    TooLarge(usize),
    #[error("the body holds more than one message")]
    Trailing,
    #[error("the message does not decode: {0}")]
    Decode(#[from] prost::DecodeError),
}

/// `event` as one gRPC message, in one or two pieces to send in order: the frame header with
/// every field but a large `binary_data`, then that payload itself, not copied. (Protobuf
/// fields may come in any order; a reader sees the same message.)
pub fn event_message(mut event: CloudEvent) -> (Bytes, Option<Bytes>) {
    let payload = match event.data.take() {
        Some(Data::BinaryData(payload)) if payload.len() >= SHARE_BYTES => payload,
        other => {
            event.data = other;
            let len = event.encoded_len();
            let mut out = BytesMut::with_capacity(5 + len);
            out.put_u8(0);
            out.put_u32(len as u32);
            event.encode(&mut out).expect("the buffer was sized for the message");
            return (out.freeze(), None);
        }
    };
    let head = event.encoded_len();
    let field = key_len(BINARY_DATA) + encoded_len_varint(payload.len() as u64);
    let mut out = BytesMut::with_capacity(5 + head + field);
    out.put_u8(0);
    out.put_u32((head + field + payload.len()) as u32);
    event.encode(&mut out).expect("the buffer was sized for the message");
    encode_key(BINARY_DATA, WireType::LengthDelimited, &mut out);
    encode_varint(payload.len() as u64, &mut out);
    (out.freeze(), Some(payload))
}

/// The one uncompressed message of a unary request body.
pub fn decode_message<M: Message + Default>(body: &[u8]) -> Result<M, FrameError> {
    let Some((header, rest)) = body.split_first_chunk::<5>() else {
        return Err(FrameError::Truncated(body.len()));
    };
    if header[0] != 0 {
        return Err(FrameError::Compressed);
    }
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if len > MAX_MESSAGE {
        return Err(FrameError::TooLarge(len));
    }
    match rest.len() {
        n if n < len => Err(FrameError::Truncated(body.len())),
        n if n > len => Err(FrameError::Trailing),
        _ => Ok(M::decode(rest)?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloudevents::v1::SubscriptionRequest;
    use crate::cloudevents::{Attr, EventType};

    fn event(payload: Bytes) -> CloudEvent {
        let t = EventType::parse(
            "io.open-cluster-management.works.v1alpha1.manifestbundles.spec.create_request",
        )
        .unwrap();
        let mut event = CloudEvent::new("id-1", "hub", &t);
        event.set("clustername", Attr::CeString("c1".into())).set_json(payload);
        event
    }

    /// Framed with tonic's own framing (prost's encoding), the same event decodes the same;
    /// a large payload is the very buffer given, not a copy.
    #[test]
    fn events_decode_as_prost_encodes_them_and_large_payloads_are_shared() {
        for size in [0, 10, SHARE_BYTES - 1, SHARE_BYTES, 300 * 1024] {
            let payload = Bytes::from(vec![b'x'; size]);
            let original = event(payload.clone());
            let (head, shared) = event_message(original.clone());
            let mut whole = head.to_vec();
            if let Some(shared) = &shared {
                assert_eq!(shared.as_ptr(), payload.as_ptr(), "the payload is not copied");
                whole.extend_from_slice(shared);
            }
            assert_eq!(shared.is_some(), size >= SHARE_BYTES);
            assert_eq!(decode_message::<CloudEvent>(&whole).unwrap(), original, "{size} bytes");
        }
    }

    /// Truncated, compressed, oversized, trailing and garbage bodies are told apart.
    #[test]
    fn bad_request_bodies_are_refused() {
        let request = SubscriptionRequest { source: "a".into(), ..Default::default() };
        let mut body = vec![0, 0, 0, 0, request.encoded_len() as u8];
        body.extend(request.encode_to_vec());
        assert_eq!(decode_message::<SubscriptionRequest>(&body).unwrap(), request);
        let decode = |b: &[u8]| decode_message::<SubscriptionRequest>(b).unwrap_err();
        assert_eq!(decode(&body[..3]), FrameError::Truncated(3));
        assert_eq!(decode(&body[..body.len() - 1]), FrameError::Truncated(body.len() - 1));
        let mut trailing = body.clone();
        trailing.push(0);
        assert_eq!(decode(&trailing), FrameError::Trailing);
        let mut compressed = body.clone();
        compressed[0] = 1;
        assert_eq!(decode(&compressed), FrameError::Compressed);
        assert_eq!(decode(&[0, 0xff, 0, 0, 0]), FrameError::TooLarge(0xff00_0000));
        assert!(matches!(decode(&[0, 0, 0, 0, 2, 0xff, 0xff]), FrameError::Decode(_)));
    }
}
