//! The hub's identity files sealed with a certificate key, as kubeadm's `--upload-certs` seals
//! the control plane's certificates: AES-256-GCM under a random 32-byte key that is shown once
//! and kept nowhere, with the seal's expiry bound into it, so a new replica that is given the
//! key can take the hub's identity from the store, and nothing else can.
//!
//! Layout: `ocm-hub-certs/1\n`, the expiry (seconds since the epoch, 8 bytes big-endian), a
//! 12-byte nonce, then the ciphertext and tag of the files (each: name length u16, name, mode
//! u32, contents length u32, contents; big-endian). The magic and expiry are the AEAD's
//! associated data.

use bytes::Bytes;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom as _, SystemRandom};

use super::identity::IdentityFile;

/// The first bytes of a seal.
const MAGIC: &[u8] = b"ocm-hub-certs/1\n";

/// Why a seal could not be made or opened.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The key is not 64 hexadecimal digits.
    #[error("the certificate key must be 64 hexadecimal digits")]
    BadKey,
    /// The key does not open the seal, or the seal was changed.
    #[error(
        "the certificate key does not open the uploaded certificates (another key, or they were uploaded again since)"
    )]
    WrongKey,
    /// The seal's time is over.
    #[error(
        "the uploaded certificates expired at {0} (seconds since the epoch): upload them again"
    )]
    Expired(u64),
    /// Not a seal this build reads.
    #[error("the uploaded certificates are not in a format this hub reads")]
    Format,
    /// The system's random source failed.
    #[error("no random bytes")]
    Random,
}

/// A certificate key.
#[derive(Clone, PartialEq, Eq)]
pub struct CertificateKey([u8; 32]);

impl std::fmt::Debug for CertificateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CertificateKey(..)")
    }
}

impl CertificateKey {
    /// A new random key.
    pub fn generate() -> Result<CertificateKey, SealError> {
        let mut key = [0u8; 32];
        SystemRandom::new().fill(&mut key).map_err(|_| SealError::Random)?;
        Ok(CertificateKey(key))
    }

    /// The key as 64 lower-case hexadecimal digits (as printed to the operator).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses 64 hexadecimal digits.
    pub fn parse(hex: &str) -> Result<CertificateKey, SealError> {
        let hex = hex.trim();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SealError::BadKey);
        }
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte =
                u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| SealError::BadKey)?;
        }
        Ok(CertificateKey(key))
    }

    fn aead(&self) -> Result<LessSafeKey, SealError> {
        let key = UnboundKey::new(&AES_256_GCM, &self.0).map_err(|_| SealError::BadKey)?;
        Ok(LessSafeKey::new(key))
    }
}

/// Seals `files` under `key`, good until `expires` (seconds since the epoch).
pub fn seal(
    files: &[IdentityFile],
    key: &CertificateKey,
    expires: u64,
) -> Result<Bytes, SealError> {
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new().fill(&mut nonce).map_err(|_| SealError::Random)?;
    let mut head = MAGIC.to_vec();
    head.extend_from_slice(&expires.to_be_bytes());
    let mut body = encode(files)?;
    key.aead()?
        .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(&head), &mut body)
        .map_err(|_| SealError::Format)?;
    let mut out = head;
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&body);
    Ok(Bytes::from(out))
}

/// Opens a seal with `key` at `now` (seconds since the epoch).
pub fn open(sealed: &[u8], key: &CertificateKey, now: u64) -> Result<Vec<IdentityFile>, SealError> {
    let rest = sealed.strip_prefix(MAGIC).ok_or(SealError::Format)?;
    if rest.len() < 8 + NONCE_LEN {
        return Err(SealError::Format);
    }
    let (expires, rest) = rest.split_at(8);
    let (nonce, body) = rest.split_at(NONCE_LEN);
    let head = &sealed[..MAGIC.len() + 8];
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Format)?;
    let mut body = body.to_vec();
    let plain = key
        .aead()?
        .open_in_place(nonce, Aad::from(head), &mut body)
        .map_err(|_| SealError::WrongKey)?;
    let expires = u64::from_be_bytes(expires.try_into().map_err(|_| SealError::Format)?);
    if now >= expires {
        return Err(SealError::Expired(expires));
    }
    decode(plain)
}

fn encode(files: &[IdentityFile]) -> Result<Vec<u8>, SealError> {
    let mut out = Vec::new();
    for f in files {
        let name_len = u16::try_from(f.name.len()).map_err(|_| SealError::Format)?;
        let len = u32::try_from(f.contents.len()).map_err(|_| SealError::Format)?;
        out.extend_from_slice(&name_len.to_be_bytes());
        out.extend_from_slice(f.name.as_bytes());
        out.extend_from_slice(&f.mode.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&f.contents);
    }
    Ok(out)
}

fn decode(mut plain: &[u8]) -> Result<Vec<IdentityFile>, SealError> {
    fn take<'a>(plain: &mut &'a [u8], n: usize) -> Result<&'a [u8], SealError> {
        if plain.len() < n {
            return Err(SealError::Format);
        }
        let (head, rest) = plain.split_at(n);
        *plain = rest;
        Ok(head)
    }
    let mut files = Vec::new();
    while !plain.is_empty() {
        let name_len =
            u16::from_be_bytes(take(&mut plain, 2)?.try_into().map_err(|_| SealError::Format)?);
        let name = std::str::from_utf8(take(&mut plain, usize::from(name_len))?)
            .map_err(|_| SealError::Format)?
            .to_owned();
        let mode =
            u32::from_be_bytes(take(&mut plain, 4)?.try_into().map_err(|_| SealError::Format)?);
        let len =
            u32::from_be_bytes(take(&mut plain, 4)?.try_into().map_err(|_| SealError::Format)?);
        let contents = Bytes::copy_from_slice(take(&mut plain, len as usize)?);
        files.push(IdentityFile { name, mode, contents });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Vec<IdentityFile> {
        vec![
            IdentityFile {
                name: "ca.crt".into(),
                mode: 0o644,
                contents: Bytes::from_static(b"cert"),
            },
            IdentityFile {
                name: "ca.key".into(),
                mode: 0o600,
                contents: Bytes::from_static(b"key"),
            },
        ]
    }

    #[test]
    fn a_seal_opens_with_its_key_until_it_expires() {
        let key = CertificateKey::generate().unwrap();
        let sealed = seal(&files(), &key, 1000).unwrap();
        assert_eq!(open(&sealed, &key, 999).unwrap(), files());
        assert!(matches!(open(&sealed, &key, 1000), Err(SealError::Expired(1000))));
        let other = CertificateKey::generate().unwrap();
        assert!(matches!(open(&sealed, &other, 0), Err(SealError::WrongKey)));
    }

    #[test]
    fn a_changed_seal_or_expiry_is_refused() {
        let key = CertificateKey::generate().unwrap();
        let sealed = seal(&files(), &key, 1000).unwrap();
        let mut later = sealed.to_vec();
        later[MAGIC.len() + 7] = 0xff;
        assert!(matches!(open(&later, &key, 0), Err(SealError::WrongKey)));
        let mut flipped = sealed.to_vec();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(matches!(open(&flipped, &key, 0), Err(SealError::WrongKey)));
        assert!(matches!(open(b"something else", &key, 0), Err(SealError::Format)));
    }

    #[test]
    fn keys_are_64_hex_digits() {
        let key = CertificateKey::generate().unwrap();
        assert_eq!(CertificateKey::parse(&key.to_hex()).unwrap(), key);
        assert!(CertificateKey::parse("abc").is_err());
        assert!(CertificateKey::parse(&"g".repeat(64)).is_err());
    }
}
