//! `fetch-peer-file {peer, handle}`: redeem a handle on an allowed peer's door and keep the file
//! under `peer-in/` in this capsule's work folder.
//!
//! The peer is checked against `capabilities.peer_fetch.allow` before anything connects. The
//! request asserts this session's own audience, so a handle minted for someone else is refused
//! by the minter. The body is checked against the `etag` the minter sent, written without
//! following links, and the model gets the stored path, size and sha256 — never the contents,
//! which it must read as a file like anything else it did not write.

use std::io::Write;
use std::path::Path;

use async_trait::async_trait;
use mur_actors::tool::{
    ExecError, ExecErrorKind, ExecOutput, ExecRequest, ExecResult, ExecStatus, ToolExecutor,
};
use mur_actors::trace::{EventType, TraceEvent};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::address::{self, PeerAddr};
use super::card::{client, root_cause};
use super::handle;
use super::registry;

/// The folder, inside the work folder, where fetched files land.
pub const PEER_IN: &str = "peer-in";

/// The most one fetch takes in, whatever the peer sends (a minter's own `max_bytes` is usually
/// far smaller): a misbehaving peer cannot fill this process's memory.
pub const MAX_FETCH_BYTES: u64 = 1 << 30;

/// The `fetch-peer-file` executor of one session.
pub struct FetchPeerFile {
    /// This session's id (its own audience).
    pub session_id: String,
    /// This capsule's name (its card name).
    pub name: String,
    /// `capabilities.peer_fetch.allow`.
    pub allow: Vec<String>,
}

/// A file name from the handle's (unverified) path hint: its last segment, characters outside
/// `[A-Za-z0-9._-]` replaced by `_`, at most 120 characters, `file` when nothing is left.
pub fn stored_name(hint: Option<&str>) -> String {
    let last = hint.and_then(|p| p.rsplit('/').next()).unwrap_or("");
    let clean: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect();
    if clean.trim_matches('.').is_empty() {
        "file".into()
    } else {
        clean
    }
}

fn text_arg<'a>(input: &'a Value, key: &str) -> Result<&'a str, ExecError> {
    match input.get(key).and_then(Value::as_str) {
        Some(s) if !s.trim().is_empty() => Ok(s.trim()),
        _ => Err(ExecError::new(
            ExecErrorKind::BadInput,
            format!("'fetch-peer-file' requires a non-empty '{key}'"),
        )),
    }
}

/// Write `bytes` to `workdir/peer-in/<name>` without following a link at either step.
fn store(workdir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = workdir.join(PEER_IN);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.file_type().is_symlink() || !m.is_dir() => {
            return Err(std::io::Error::other(format!(
                "{PEER_IN} in the work folder is not a plain folder"
            )))
        }
        Ok(_) => {}
        Err(_) => std::fs::create_dir_all(&dir)?,
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(name))?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[async_trait]
impl ToolExecutor for FetchPeerFile {
    async fn execute(&self, request: ExecRequest) -> ExecResult {
        let input = &request.input;
        let peer_text = text_arg(input, "peer")?;
        let token = text_arg(input, "handle")?;
        let handle_id = handle::handle_id(token);
        let trace = |outcome: &str, reason: Option<&str>| {
            (request.trace)(
                TraceEvent::new(EventType::PeerFileFetch, None)
                    .with("peer", peer_text)
                    .with("handle_id", &handle_id)
                    .with("outcome", outcome)
                    .with_opt("reason", reason),
            )
        };
        let not_allowed = || {
            trace("peer_not_allowed", None);
            ExecError::new(
                ExecErrorKind::NotAllowed,
                format!("network policy: '{peer_text}' not in capabilities.peer_fetch.allow"),
            )
        };
        let peer = PeerAddr::parse(peer_text).map_err(|why| {
            if why.contains("not on this machine") {
                not_allowed()
            } else {
                trace("bad_peer", Some(&why));
                ExecError::new(
                    ExecErrorKind::BadInput,
                    format!("'fetch-peer-file' was given an unusable peer: {why}"),
                )
            }
        })?;
        if !peer.allowed_by(&self.allow) {
            return Err(not_allowed());
        }
        let Some(own_port) = registry::door_port() else {
            trace("peer_unreachable", Some("this process has no door"));
            return Err(ExecError::new(ExecErrorKind::Unreachable, "'fetch-peer-file' cannot redeem here: this process has no door, so it has no audience"));
        };
        let audience = address::audience(&self.name, own_port, &self.session_id);
        let url = format!(
            "{}/{}/resources/peer/{token}",
            peer.door_url(),
            peer.session_id
        );
        let unreachable = |why: String| {
            trace("peer_unreachable", Some(&why));
            ExecError::new(
                ExecErrorKind::Unreachable,
                format!("'fetch-peer-file' could not reach {peer}: {why}"),
            )
        };
        let response = client()
            .map_err(unreachable)?
            .get(&url)
            .header("x-murmur-audience", &audience)
            .send()
            .await
            .map_err(|e| unreachable(root_cause(&e)))?;
        let status = response.status();
        let etag = response
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut response = response;
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| unreachable(root_cause(&e)))?
        {
            if (body.len() + chunk.len()) as u64 > MAX_FETCH_BYTES {
                trace("too_large", None);
                return Err(ExecError::new(ExecErrorKind::Failed, format!(
                    "'fetch-peer-file' failed: {peer} sent more than {MAX_FETCH_BYTES} bytes; nothing was stored"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let code = serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_else(|| format!("http_{}", status.as_u16()));
            trace(&code, None);
            return Err(ExecError::new(
                ExecErrorKind::Failed,
                format!("'fetch-peer-file' failed: {peer} refused the handle: {code}"),
            ));
        }
        let sha = hex::encode(Sha256::digest(&body));
        if etag.as_deref() != Some(format!("\"sha256:{sha}\"").as_str()) {
            trace("etag_mismatch", None);
            return Err(ExecError::new(ExecErrorKind::Failed, format!(
                "'fetch-peer-file' failed: {peer} served an etag that does not describe its own body"
            )));
        }
        let hint = handle::parse(token)
            .ok()
            .and_then(|p| p.unverified())
            .map(|p| p.p);
        let name = format!("{handle_id}-{}", stored_name(hint.as_deref()));
        let rel = format!("{PEER_IN}/{name}");
        if let Err(e) = store(&request.workdir, &name, &body) {
            trace("io_error", Some(&e.to_string()));
            return Err(ExecError::new(ExecErrorKind::Failed, format!(
                "'fetch-peer-file' fetched {} bytes from {peer} but could not store them at {rel}: {e}",
                body.len()
            )));
        }
        (request.trace)(
            TraceEvent::new(EventType::PeerFileFetch, None)
                .with("peer", peer.to_string())
                .with("handle_id", &handle_id)
                .with("stored_path", &rel)
                .with("bytes", body.len())
                .with("sha256", &sha)
                .with("outcome", "ok"),
        );
        let data = json!({
            "path": rel,
            "bytes": body.len(),
            "sha256": sha,
            "peer": peer.to_string(),
        });
        Ok(ExecOutput {
            status: ExecStatus::Passed,
            text: format!("Stored {} bytes from {peer} at {rel}\n{data}", body.len()),
            note: None,
            shell: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_are_tame() {
        assert_eq!(stored_name(Some("notes/report v2.md")), "report_v2.md");
        assert_eq!(stored_name(Some("..")), "file");
        assert_eq!(stored_name(None), "file");
        assert_eq!(stored_name(Some(&"a".repeat(300))).len(), 120);
    }
}
