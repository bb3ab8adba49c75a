//! The hub's signed bearer tokens: service-account tokens in Kubernetes' shape (`kubectl create
//! token`), signed with the hub's Ed25519 key through `jsonwebtoken` on a ring provider of our
//! own (the workspace keeps one crypto provider), and verified with every claim required.

use std::path::Path;
use std::sync::Once;

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use rustls::pki_types::pem::PemObject as _;
use serde::{Deserialize, Serialize};

use crate::auth::pki::PkiError;

/// The issuer and audience tokens carry unless configured (kube-apiserver's usual
/// `--service-account-issuer`; its API audiences default to the issuer).
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// Shortest token a TokenRequest may ask for (kube-apiserver: 10 minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// Longest token the hub signs (kube-apiserver's `--service-account-max-token-expiration`
/// analogue): two days.
pub const MAX_EXPIRATION_SECONDS: i64 = 48 * 3600;
/// Clock skew tolerated on `exp` and `nbf`.
const LEEWAY_SECONDS: u64 = 30;

/// Signs with ring's Ed25519 (the key is PKCS#8 DER).
struct RingSigner(Ed25519KeyPair);

impl signature::Signer<Vec<u8>> for RingSigner {
    fn try_sign(&self, msg: &[u8]) -> Result<Vec<u8>, signature::Error> {
        Ok(self.0.sign(msg).as_ref().to_vec())
    }
}

impl JwtSigner for RingSigner {
    fn algorithm(&self) -> Algorithm {
        Algorithm::EdDSA
    }
}

/// Verifies with ring's Ed25519 (the key is the raw 32-byte public key).
struct RingVerifier(Vec<u8>);

impl signature::Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, msg: &[u8], sig: &Vec<u8>) -> Result<(), signature::Error> {
        UnparsedPublicKey::new(&ED25519, &self.0)
            .verify(msg, sig)
            .map_err(|_| signature::Error::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        Algorithm::EdDSA
    }
}

/// The provider: EdDSA only. Any other algorithm (HS256 "signed" with our public key, RS256,
/// ...) has no signer or verifier, so such a token cannot validate.
static PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: |alg, key| match alg {
        Algorithm::EdDSA => Ed25519KeyPair::from_pkcs8_maybe_unchecked(key.as_bytes())
            .map(|k| Box::new(RingSigner(k)) as Box<dyn JwtSigner>)
            .map_err(|_| ErrorKind::InvalidEddsaKey.into()),
        _ => Err(ErrorKind::InvalidAlgorithm.into()),
    },
    verifier_factory: |alg, key| match alg {
        Algorithm::EdDSA => Ok(Box::new(RingVerifier(key.try_get_as_bytes()?.to_vec()))),
        _ => Err(ErrorKind::InvalidAlgorithm.into()),
    },
    key_utils: KeyUtils::new_unimplemented(),
};

fn install_provider() {
    static ONCE: Once = Once::new();
    // Only this module installs one; a second install in the process would be the same.
    ONCE.call_once(|| {
        let _ = PROVIDER.install_default();
    });
}

/// The `kubernetes.io` private claim of a service-account token.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct KubeClaims {
    /// The service account's namespace.
    pub namespace: String,
    /// The service account.
    pub serviceaccount: ObjectRef,
}

/// A name and uid.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ObjectRef {
    /// Its name.
    pub name: String,
    /// Its uid (a token for a deleted and re-created account stops working).
    pub uid: String,
}

/// The claims of a hub token, all required.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// Issuer.
    pub iss: String,
    /// Subject: `system:serviceaccount:<ns>:<name>`.
    pub sub: String,
    /// Audiences.
    pub aud: Vec<String>,
    /// Expiry (seconds since the epoch).
    pub exp: i64,
    /// Not before.
    pub nbf: i64,
    /// Issued at.
    pub iat: i64,
    /// Token id.
    pub jti: String,
    /// Whom it was issued for.
    #[serde(rename = "kubernetes.io")]
    pub kube: KubeClaims,
}

/// Why a token was refused (the client only ever sees 401; the reason is logged).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Signature, algorithm, claims or times.
    #[error("invalid token: {0}")]
    Invalid(#[from] jsonwebtoken::errors::Error),
    /// `jti` empty or the subject not the account of the private claims.
    #[error("invalid token: {0}")]
    Claims(&'static str),
}

/// The hub's token signer and verifier.
pub struct TokenAuthority {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    any_audience: Validation,
    /// The `iss` the hub writes and requires.
    pub issuer: String,
    /// The audiences a token must name one of to be accepted here.
    pub audiences: Vec<String>,
}

impl std::fmt::Debug for TokenAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAuthority").field("issuer", &self.issuer).finish_non_exhaustive()
    }
}

impl TokenAuthority {
    /// Loads the signing key `dir/sa.key` (PKCS#8 PEM), creating it on first start.
    pub fn load_or_create(dir: &Path, issuer: &str) -> Result<TokenAuthority, PkiError> {
        let path = dir.join("sa.key");
        let pem = if path.exists() {
            std::fs::read_to_string(&path)
                .map_err(|source| PkiError::Io { path: path.clone(), source })?
        } else {
            let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
                .map_err(|source| PkiError::Cert { what: "token signing key", source })?;
            let pem = key.serialize_pem();
            crate::auth::pki::write_file(&path, &pem, true)?;
            pem
        };
        let bad = |detail: &str| PkiError::BadPem { path: path.clone(), detail: detail.into() };
        let der = rustls::pki_types::PrivatePkcs8KeyDer::from_pem_slice(pem.as_bytes())
            .map_err(|e| bad(&e.to_string()))?;
        TokenAuthority::from_pkcs8(der.secret_pkcs8_der(), issuer)
            .ok_or_else(|| bad("not an Ed25519 PKCS#8 key"))
    }

    /// A token authority for an Ed25519 key in PKCS#8 DER.
    pub fn from_pkcs8(der: &[u8], issuer: &str) -> Option<TokenAuthority> {
        install_provider();
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der).ok()?;
        let mut validation = Validation::new(Algorithm::EdDSA);
        validation.set_required_spec_claims(&["exp", "nbf", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECONDS;
        validation.set_issuer(&[issuer]);
        validation.set_audience(&[issuer]);
        let mut any_audience = validation.clone();
        any_audience.validate_aud = false;
        Some(TokenAuthority {
            any_audience,
            encoding: EncodingKey::from_ed_der(der),
            decoding: DecodingKey::from_ed_der(pair.public_key().as_ref()),
            validation,
            issuer: issuer.to_owned(),
            audiences: vec![issuer.to_owned()],
        })
    }

    /// Signs a token for service account `namespace/name` (uid `uid`) valid from `now` for
    /// `seconds`, for `audiences` (the hub's when empty).
    pub fn issue(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        audiences: &[String],
        now: i64,
        seconds: i64,
    ) -> Result<(String, Claims), TokenError> {
        let claims = Claims {
            iss: self.issuer.clone(),
            sub: format!("{}{namespace}:{name}", crate::auth::authz::SERVICE_ACCOUNT_USER_PREFIX),
            aud: if audiences.is_empty() { self.audiences.clone() } else { audiences.to_vec() },
            exp: now + seconds,
            nbf: now,
            iat: now,
            jti: uuid::Uuid::new_v4().to_string(),
            kube: KubeClaims {
                namespace: namespace.to_owned(),
                serviceaccount: ObjectRef { name: name.to_owned(), uid: uid.to_owned() },
            },
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), &claims, &self.encoding)?;
        Ok((token, claims))
    }

    /// Signs arbitrary claims with the hub's key (EdDSA). The hub only accepts what
    /// [`TokenAuthority::verify`] accepts, whatever was signed.
    pub fn sign_claims(&self, claims: &serde_json::Value) -> Result<String, TokenError> {
        Ok(jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), claims, &self.encoding)?)
    }

    /// The raw Ed25519 public key (what a verifier elsewhere would be given).
    pub fn public_key(&self) -> Vec<u8> {
        self.decoding.try_get_as_bytes().map(<[u8]>::to_vec).unwrap_or_default()
    }

    /// Verifies a token: EdDSA signature by this hub, `iss`, one of our audiences, `exp` and
    /// `nbf` as numbers and in range, `jti` present, and a subject naming the service account
    /// of the private claims. Whether that account still exists is the caller's question.
    pub fn verify(&self, token: &str) -> Result<Claims, TokenError> {
        self.verify_with(token, &self.validation)
    }

    /// [`TokenAuthority::verify`] whatever the token's audience (TokenReview compares the
    /// audiences with those it was asked about).
    pub fn verify_any_audience(&self, token: &str) -> Result<Claims, TokenError> {
        self.verify_with(token, &self.any_audience)
    }

    fn verify_with(&self, token: &str, validation: &Validation) -> Result<Claims, TokenError> {
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, validation)?;
        let c = data.claims;
        if c.jti.is_empty() {
            return Err(TokenError::Claims("jti is empty"));
        }
        if c.exp - c.iat > MAX_EXPIRATION_SECONDS {
            return Err(TokenError::Claims("lifetime longer than the hub issues"));
        }
        let expected = format!(
            "{}{}:{}",
            crate::auth::authz::SERVICE_ACCOUNT_USER_PREFIX,
            c.kube.namespace,
            c.kube.serviceaccount.name
        );
        if c.sub != expected || c.kube.serviceaccount.uid.is_empty() {
            return Err(TokenError::Claims("subject and service account differ"));
        }
        Ok(c)
    }
}

/// Whether a bearer token looks like a JWT (three base64url parts).
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn authority() -> TokenAuthority {
        let dir = tempfile::tempdir().unwrap();
        TokenAuthority::load_or_create(dir.path(), DEFAULT_ISSUER).unwrap()
    }

    fn now() -> i64 {
        crate::machinery::clock::now().unix_timestamp()
    }

    fn b64(v: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v)
    }

    /// A token with `header` and `claims` and the signature of `good`, re-encoded.
    fn forge(header: serde_json::Value, claims: serde_json::Value, sig: &str) -> String {
        format!(
            "{}.{}.{sig}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        )
    }

    fn claims_of(token: &str) -> serde_json::Value {
        let part = token.split('.').nth(1).unwrap();
        serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn issued_tokens_verify_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let a = TokenAuthority::load_or_create(dir.path(), DEFAULT_ISSUER).unwrap();
        let (token, claims) = a.issue("ns", "sa", "uid-1", &[], now(), 3600).unwrap();
        assert_eq!(claims.sub, "system:serviceaccount:ns:sa");
        let b = TokenAuthority::load_or_create(dir.path(), DEFAULT_ISSUER).unwrap();
        let back = b.verify(&token).unwrap();
        assert_eq!(back.kube.serviceaccount.uid, "uid-1");
        assert_eq!(back.aud, [DEFAULT_ISSUER]);
        // Another hub's key does not verify it.
        assert!(authority().verify(&token).is_err());
    }

    #[test]
    fn attacks_are_refused() {
        let a = authority();
        let (good, _) = a.issue("ns", "sa", "uid", &[], now(), 3600).unwrap();
        let sig = good.rsplit('.').next().unwrap();
        let claims = claims_of(&good);
        // alg none, with and without a signature.
        let none = serde_json::json!({"alg": "none", "typ": "JWT"});
        assert!(a.verify(&forge(none.clone(), claims.clone(), "")).is_err());
        assert!(a.verify(&forge(none, claims.clone(), sig)).is_err());
        // HS256 "signed" with the public key (algorithm confusion).
        let public = a.decoding.try_get_as_bytes().unwrap().to_vec();
        let hs = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(&public),
        );
        if let Ok(hs) = hs {
            assert!(a.verify(&hs).is_err());
        }
        let hs_header = serde_json::json!({"alg": "HS256", "typ": "JWT"});
        assert!(a.verify(&forge(hs_header, claims.clone(), sig)).is_err());
        // Tampered claims under the original signature.
        let header = serde_json::json!({"alg": "EdDSA", "typ": "JWT"});
        let mut other = claims.clone();
        other["sub"] = "system:serviceaccount:ns:admin".into();
        assert!(a.verify(&forge(header.clone(), other, sig)).is_err());
        // Wrong audience, wrong issuer, expired, not yet valid: signed by the right key.
        let signed = |edit: &dyn Fn(&mut Claims)| {
            let (_, mut c) = a.issue("ns", "sa", "uid", &[], now(), 3600).unwrap();
            edit(&mut c);
            jsonwebtoken::encode(&Header::new(Algorithm::EdDSA), &c, &a.encoding).unwrap()
        };
        assert!(a.verify(&signed(&|c| c.aud = vec!["someone-else".into()])).is_err());
        assert!(a.verify(&signed(&|c| c.iss = "https://evil".into())).is_err());
        assert!(a.verify(&signed(&|c| c.exp = now() - 120)).is_err());
        assert!(a.verify(&signed(&|c| c.nbf = now() + 600)).is_err());
        assert!(a.verify(&signed(&|c| c.jti.clear())).is_err());
        assert!(a.verify(&signed(&|c| c.sub = "system:serviceaccount:ns:other".into())).is_err());
        assert!(a.verify(&signed(&|_| {})).is_ok(), "the control must pass");
        // exp / nbf as strings, or missing: refused, never treated as absent.
        for (field, value) in [
            ("exp", serde_json::json!("99999999999")),
            ("nbf", serde_json::json!("0")),
            ("exp", serde_json::Value::Null),
            ("nbf", serde_json::Value::Null),
        ] {
            let mut c = claims.clone();
            if value.is_null() {
                c.as_object_mut().unwrap().remove(field);
            } else {
                c[field] = value.clone();
            }
            let raw =
                format!("{}.{}", b64(header.to_string().as_bytes()), b64(c.to_string().as_bytes()));
            let sig =
                jsonwebtoken::crypto::sign(raw.as_bytes(), &a.encoding, Algorithm::EdDSA).unwrap();
            assert!(a.verify(&format!("{raw}.{sig}")).is_err(), "{field} = {value}");
        }
    }
}
