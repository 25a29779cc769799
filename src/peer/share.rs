//! `share-file {path, peer, ttl?}`: mint a handle for one file under the export root, bound to
//! the receiving peer.
//!
//! Minting reads nothing but the file's metadata: the bytes stay here until the receiver redeems
//! the handle on this process's door. The peer must be live (its card gives the name the audience
//! is built from), the path must pass every rule of [`super::files`], and the lifetime may only
//! narrow `exports.peer_files.max_ttl`. The model gets the handle, its id, the expiry, the
//! audience and `from` (this session's own peer address, where the receiver redeems it); no
//! filesystem path.

use std::sync::Arc;

use async_trait::async_trait;
use mur_actors::tool::{
    ExecError, ExecErrorKind, ExecOutput, ExecRequest, ExecResult, ExecStatus, ToolExecutor,
};
use mur_actors::trace::{EventType, TraceEvent};
use serde_json::{json, Value};

use super::address::{self, PeerAddr};
use super::card;
use super::files;
use super::handle::{self, Payload};
use super::registry::{self, Export, Registration};

/// The `share-file` executor of one session; dropping it ends the session's peer plane.
pub struct ShareFile {
    export: Arc<Export>,
    _registration: Registration,
}

impl ShareFile {
    /// Register `export` with the process's peer registry and answer `share-file` for it.
    pub fn new(export: Export) -> ShareFile {
        let export = Arc::new(export);
        let registration = registry::global().register(export.clone());
        ShareFile {
            export,
            _registration: registration,
        }
    }
}

/// Parse a `ttl` (`<digits>[s|m|h|d]`, bare = seconds, or a JSON number of seconds).
pub fn parse_ttl(v: &Value) -> Result<u64, String> {
    let secs = match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| format!("{n} is not a whole number of seconds"))?,
        Value::String(s) => {
            let t = s.trim();
            let digits = t.bytes().take_while(u8::is_ascii_digit).count();
            let n: u64 = t[..digits].parse().map_err(|_| {
                format!("'{s}' is not a duration (use e.g. 90, 90s, 10m, 1h or 1d)")
            })?;
            let mult = match &t[digits..] {
                "" | "s" => 1,
                "m" => 60,
                "h" => 3600,
                "d" => 86_400,
                _ => {
                    return Err(format!(
                        "'{s}' is not a duration (use e.g. 90, 90s, 10m, 1h or 1d)"
                    ))
                }
            };
            n.checked_mul(mult)
                .ok_or_else(|| format!("'{s}' is too long"))?
        }
        other => return Err(format!("{other} is not a duration")),
    };
    if secs == 0 {
        return Err("it must be greater than zero".into());
    }
    Ok(secs)
}

fn text_arg<'a>(input: &'a Value, key: &str) -> Result<&'a str, ExecError> {
    match input.get(key).and_then(Value::as_str) {
        Some(s) if !s.trim().is_empty() => Ok(s.trim()),
        _ => Err(ExecError::new(
            ExecErrorKind::BadInput,
            format!("'share-file' requires a non-empty '{key}'"),
        )),
    }
}

#[async_trait]
impl ToolExecutor for ShareFile {
    async fn execute(&self, request: ExecRequest) -> ExecResult {
        *self.export.trace.lock().expect("peer trace sink") = Some(request.trace.clone());
        let input = &request.input;
        let path = text_arg(input, "path")?;
        let peer_text = text_arg(input, "peer")?;
        let trace = |outcome: &str, reason: Option<&str>, audience: Option<&str>| {
            (request.trace)(
                TraceEvent::new(EventType::PeerHandleMint, None)
                    .with("path", path)
                    .with_opt("audience", audience)
                    .with("outcome", outcome)
                    .with_opt("reason", reason),
            )
        };
        let peer = PeerAddr::parse(peer_text).map_err(|why| {
            trace("bad_peer", Some(&why), None);
            ExecError::new(
                ExecErrorKind::BadInput,
                format!("'share-file' was given an unusable peer: {why}"),
            )
        })?;
        let max = self.export.max_ttl.as_secs();
        let ttl = match input.get("ttl").filter(|v| !v.is_null()) {
            None => max,
            Some(v) => parse_ttl(v)
                .map_err(|why| {
                    trace("bad_ttl", Some(&why), None);
                    ExecError::new(
                        ExecErrorKind::BadInput,
                        format!("'share-file' was given an unusable ttl: {why}"),
                    )
                })?
                .min(max),
        };
        let refuse = |r: files::PathRefusal| {
            trace(r.code(), Some(r.reason()), None);
            ExecError::new(ExecErrorKind::NotAllowed, format!(
                "'share-file' refused '{path}': {}. Only files under the declared exports.peer_files.root may be shared.",
                r.reason()
            ))
        };
        let rel = files::canonical(path).map_err(refuse)?;
        files::check(&self.export.root, &rel, self.export.max_bytes).map_err(refuse)?;
        let Some(own_port) = registry::door_port() else {
            trace("no_peer_plane", Some("this process has no door"), None);
            return Err(ExecError::new(
                ExecErrorKind::Unreachable,
                "'share-file' cannot mint here: this process has no door to serve the file from",
            ));
        };
        let name = card::card_name(&peer).await.map_err(|why| {
            trace("peer_unreachable", Some(&why), None);
            ExecError::new(
                ExecErrorKind::Unreachable,
                format!("peer_unreachable: {why}"),
            )
        })?;
        let audience = address::audience(&name, peer.port, &peer.session_id);
        let mut nonce = [0u8; 16];
        handle::read_urandom(&mut nonce).map_err(|e| {
            ExecError::new(
                ExecErrorKind::Failed,
                format!("'share-file' could not draw a nonce: {e}"),
            )
        })?;
        let expires_at_ms = mur_actors::ids::now_ms() + ttl * 1000;
        let token = handle::mint(
            &self.export.key,
            &Payload {
                v: 1,
                iss: self.export.session_id.clone(),
                p: rel.clone(),
                exp: expires_at_ms,
                n: hex::encode(nonce),
            },
            &audience,
        );
        let handle_id = handle::handle_id(&token);
        (request.trace)(
            TraceEvent::new(EventType::PeerHandleMint, None)
                .with("handle_id", &handle_id)
                .with("path", &rel)
                .with("audience", &audience)
                .with("expires_at_ms", expires_at_ms)
                .with("outcome", "ok"),
        );
        let data = json!({
            "handle": token,
            "handle_id": handle_id,
            "expires_at_ms": expires_at_ms,
            "audience": audience,
            "from": format!("localhost:{own_port}/{}", self.export.session_id),
        });
        Ok(ExecOutput {
            status: ExecStatus::Passed,
            text: format!("Minted a handle for '{rel}' addressed to {audience}\n{data}"),
            note: None,
            shell: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_take_the_short_forms() {
        assert_eq!(parse_ttl(&json!("90")), Ok(90));
        assert_eq!(parse_ttl(&json!("10m")), Ok(600));
        assert_eq!(parse_ttl(&json!("2h")), Ok(7200));
        assert_eq!(parse_ttl(&json!(30)), Ok(30));
        assert!(parse_ttl(&json!("0")).is_err());
        assert!(parse_ttl(&json!("soon")).is_err());
        assert!(parse_ttl(&json!("5 minutes")).is_err());
    }
}
