//! The minter's side of a fetch: checking a presented handle and reading the file it names.
//!
//! Check order (reference §6.3): the session must have a peer plane (`no_peer_plane`), the token
//! its shape (`malformed_handle`), the request an audience (`missing_audience`), then the MAC and
//! the payload as one indivisible `handle_not_valid`, then the expiry (`handle_expired`), then
//! the path rules at the moment of serving. A handle is not single-use: the same handle serves
//! the file's current bytes until it expires or its session ends. Every answer is traced as
//! `peer_handle_redeem` in the minting session's trace, with the handle's id, never the token.

use mur_actors::trace::{EventType, TraceEvent};
use sha2::{Digest, Sha256};

use super::files;
use super::handle::{self, Rejection};
use super::registry::{self, Export};

/// A successful redeem.
#[derive(Debug)]
pub struct Served {
    /// The file's bytes.
    pub bytes: Vec<u8>,
    /// `"sha256:<hex>"`, quoted as an HTTP entity tag.
    pub etag: String,
    /// The handle's id.
    pub handle_id: String,
}

/// A refused redeem: HTTP status, error code and a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// HTTP status.
    pub status: u16,
    /// The `error` field of the JSON body.
    pub code: &'static str,
    /// Why, for people.
    pub message: String,
}

impl Refused {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Refused {
            status,
            code,
            message: message.into(),
        }
    }
}

/// Answer `GET /<session_id>/resources/peer/<token>` with `x-murmur-audience: <audience>`.
pub fn redeem(session_id: &str, token: &str, audience: Option<&str>) -> Result<Served, Refused> {
    let Some(export) = registry::global().lookup(session_id) else {
        return Err(Refused::new(
            404,
            "no_peer_plane",
            format!("session {session_id} is not live here or shares no files"),
        ));
    };
    let handle_id = handle::handle_id(token);
    let outcome = check(&export, token, audience);
    let mut line = TraceEvent::new(EventType::PeerHandleRedeem, None)
        .with("handle_id", &handle_id)
        .with_opt("audience", audience);
    match &outcome {
        Ok((path, bytes)) => {
            line = line
                .with("path", path)
                .with("bytes", bytes.len())
                .with("outcome", "ok");
        }
        Err(r) => line = line.with("outcome", r.code).with("reason", &r.message),
    }
    export.emit(line);
    let (_, bytes) = outcome?;
    let etag = format!("\"sha256:{}\"", hex::encode(Sha256::digest(&bytes)));
    Ok(Served {
        bytes,
        etag,
        handle_id,
    })
}

fn check(
    export: &Export,
    token: &str,
    audience: Option<&str>,
) -> Result<(String, Vec<u8>), Refused> {
    let parsed = handle::parse(token)
        .map_err(|_| Refused::new(400, "malformed_handle", "that is not a peer-file handle"))?;
    let Some(audience) = audience.map(str::trim).filter(|a| !a.is_empty()) else {
        return Err(Refused::new(
            400,
            "missing_audience",
            "the x-murmur-audience header is required",
        ));
    };
    let payload = parsed
        .verify(
            &export.key,
            &audience.to_lowercase(),
            &export.session_id,
            mur_actors::ids::now_ms(),
        )
        .map_err(|r| match r {
            Rejection::Expired => Refused::new(410, "handle_expired", "the handle has expired"),
            _ => Refused::new(
                403,
                "handle_not_valid",
                "the handle is not valid for this audience",
            ),
        })?;
    let rel =
        files::canonical(&payload.p).map_err(|r| Refused::new(r.status(), r.code(), r.reason()))?;
    let bytes = files::read(&export.root, &rel, export.max_bytes)
        .map_err(|r| Refused::new(r.status(), r.code(), r.reason()))?;
    Ok((rel, bytes))
}
