//! Peer-file handles: `mh1.<b64url(payload)>.<b64url(mac)>`.
//!
//! The payload names the minting session, the file (relative to the export root), the expiry
//! and a nonce; the MAC is HMAC-SHA256 under a 32-byte key that exists only in the minting
//! session's memory, over a domain tag, the audience and the payload. The audience is covered by
//! the MAC but is not in the token: a handle stolen in transit is useless to anyone who cannot
//! present the audience it was minted for, and it never reveals whom it was for. Only
//! [`handle_id`] (a digest prefix) is ever written to a trace.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The token prefix (format version 1).
pub const PREFIX: &str = "mh1";
/// The MAC's domain separation tag.
const DOMAIN: &[u8] = b"murmur-peer-handle-v1";

type HmacSha256 = Hmac<Sha256>;

/// A session's signing key: 32 random bytes, in memory only.
#[derive(Clone)]
pub struct Key([u8; 32]);

impl Key {
    /// A fresh key from the operating system's random source (`/dev/urandom`).
    pub fn random() -> std::io::Result<Key> {
        let mut k = [0u8; 32];
        read_urandom(&mut k)?;
        Ok(Key(k))
    }

    fn mac(&self, audience: &str, payload_b64: &str) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(DOMAIN);
        mac.update(&[0]);
        mac.update(audience.as_bytes());
        mac.update(&[0]);
        mac.update(payload_b64.as_bytes());
        mac
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

/// Fill `buf` from `/dev/urandom`.
pub fn read_urandom(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// What a handle says (inside the token, signed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Payload {
    /// Format version: 1.
    pub v: u32,
    /// The minting session's id.
    pub iss: String,
    /// The file, relative to the export root, `/`-separated.
    pub p: String,
    /// Expiry, unix milliseconds.
    pub exp: u64,
    /// 16 random bytes, hex: two handles for the same file never collide.
    pub n: String,
}

/// Sign `payload` for `audience` and return the token.
pub fn mint(key: &Key, payload: &Payload, audience: &str) -> String {
    let json = serde_json::to_vec(payload).expect("a payload always serializes");
    let payload_b64 = URL_SAFE_NO_PAD.encode(json);
    let tag = key.mac(audience, &payload_b64).finalize().into_bytes();
    format!("{PREFIX}.{payload_b64}.{}", URL_SAFE_NO_PAD.encode(tag))
}

/// The id a handle is known by in traces: the first 16 hex digits of sha256(token).
pub fn handle_id(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))[..16].to_string()
}

/// Why a token was not accepted, in check order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// Not `mh1.<b64>.<b64>` with a 32-byte MAC.
    Malformed,
    /// Wrong MAC (wrong key, wrong audience, altered payload) or an unreadable payload: one
    /// indivisible outcome, so a prober learns nothing about which.
    NotValid,
    /// Valid, but past its expiry.
    Expired,
}

/// A token split into its parts, shape-checked but not yet trusted.
pub struct Parsed<'a> {
    payload_b64: &'a str,
    payload: Vec<u8>,
    tag: Vec<u8>,
}

/// Check the token's shape.
pub fn parse(token: &str) -> Result<Parsed<'_>, Rejection> {
    let mut parts = token.split('.');
    let (Some(PREFIX), Some(p), Some(t), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Rejection::Malformed);
    };
    let payload = URL_SAFE_NO_PAD
        .decode(p)
        .map_err(|_| Rejection::Malformed)?;
    let tag = URL_SAFE_NO_PAD
        .decode(t)
        .map_err(|_| Rejection::Malformed)?;
    if payload.is_empty() || tag.len() != 32 {
        return Err(Rejection::Malformed);
    }
    Ok(Parsed {
        payload_b64: p,
        payload,
        tag,
    })
}

impl Parsed<'_> {
    /// The payload as the token claims it, unverified (the receiver's file-name hint only).
    pub fn unverified(&self) -> Option<Payload> {
        serde_json::from_slice(&self.payload).ok()
    }

    /// Check the MAC for `audience` (constant time), then the payload, then the expiry at
    /// `now_ms`, and that the handle was minted by `issuer`.
    pub fn verify(
        &self,
        key: &Key,
        audience: &str,
        issuer: &str,
        now_ms: u64,
    ) -> Result<Payload, Rejection> {
        key.mac(audience, self.payload_b64)
            .verify_slice(&self.tag)
            .map_err(|_| Rejection::NotValid)?;
        let payload: Payload =
            serde_json::from_slice(&self.payload).map_err(|_| Rejection::NotValid)?;
        if payload.v != 1 || payload.iss != issuer {
            return Err(Rejection::NotValid);
        }
        if now_ms >= payload.exp {
            return Err(Rejection::Expired);
        }
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(exp: u64) -> Payload {
        Payload {
            v: 1,
            iss: "ses_a".into(),
            p: "notes/report.md".into(),
            exp,
            n: "00".repeat(16),
        }
    }

    #[test]
    fn a_key_never_shows_its_bytes() {
        let key = Key::random().unwrap();
        assert_eq!(format!("{key:?}"), "Key(..)");
        assert_eq!(format!("{:?}", Some(key)), "Some(Key(..))");
    }

    #[test]
    fn a_minted_handle_verifies_only_for_its_audience_key_and_issuer() {
        let key = Key::random().unwrap();
        let token = mint(&key, &payload(2_000), "b@localhost:1/ses_b");
        assert!(token.starts_with("mh1."));
        assert_eq!(handle_id(&token).len(), 16);
        let parsed = parse(&token).unwrap();
        assert_eq!(
            parsed.verify(&key, "b@localhost:1/ses_b", "ses_a", 1_000),
            Ok(payload(2_000))
        );
        assert_eq!(
            parsed.verify(&key, "c@localhost:1/ses_c", "ses_a", 1_000),
            Err(Rejection::NotValid)
        );
        assert_eq!(
            parsed.verify(
                &Key::random().unwrap(),
                "b@localhost:1/ses_b",
                "ses_a",
                1_000
            ),
            Err(Rejection::NotValid)
        );
        assert_eq!(
            parsed.verify(&key, "b@localhost:1/ses_b", "ses_x", 1_000),
            Err(Rejection::NotValid)
        );
        assert_eq!(
            parsed.verify(&key, "b@localhost:1/ses_b", "ses_a", 2_000),
            Err(Rejection::Expired)
        );
    }

    #[test]
    fn a_tampered_payload_fails_the_mac_and_bad_shapes_are_malformed() {
        let key = Key::random().unwrap();
        let token = mint(&key, &payload(2_000), "aud");
        let mut forged = payload(9_999_999);
        forged.p = "../secret".into();
        let forged_b64 = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
        let tag = token.rsplit('.').next().unwrap();
        let tampered = format!("mh1.{forged_b64}.{tag}");
        let parsed = parse(&tampered).unwrap();
        assert_eq!(
            parsed.verify(&key, "aud", "ses_a", 1_000),
            Err(Rejection::NotValid)
        );
        for bad in [
            "",
            "mh1",
            "mh2.a.b",
            "mh1.!!.AAAA",
            "mh1.e30.AAAA",
            "mh1.a.b.c",
        ] {
            assert!(matches!(parse(bad), Err(Rejection::Malformed)), "{bad}");
        }
    }
}
