//! `mur/driver-replay`: a model driver that answers every call from a recorded session.
//!
//! It stands behind the same [`ModelDriver`] trait as the scripted and HTTP drivers, so the
//! Session runs exactly as it would live: only the answers come from the trace. Each request
//! carries the conversation so far, so the driver is also where the replay compares: before it
//! answers model call `k` it checks the results of the tool calls of call `k - 1` (as the model
//! would now read them) and the system prompt and tool array the runtime now sends against what
//! was recorded. The first difference is kept in the tree's [`ReplayLog`] and ends the session:
//! the driver answers with an error, so nothing more runs.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use mur_actors::model::{
    joined_text, InferError, InferErrorKind, InferReply, InferRequest, Message, ModelDriver,
    RetrySink,
};
use sha2::{Digest, Sha256};

use super::diverge::{Divergence, Kind};
use super::recording::Recording;

/// The replay driver's name (`session_start.driver`).
pub const REPLAY_DRIVER: &str = "mur/driver-replay";

/// What a replay of a whole tree found: the first divergence, and how much matched.
#[derive(Debug, Default)]
pub struct ReplayLog {
    first: Mutex<Option<Divergence>>,
    turns: AtomicU32,
    calls: AtomicU32,
}

impl ReplayLog {
    /// The first divergence, if any.
    pub fn divergence(&self) -> Option<Divergence> {
        self.first.lock().map(|d| d.clone()).unwrap_or(None)
    }

    /// Keep `d` unless an earlier divergence is kept already.
    pub fn diverged(&self, d: Divergence) {
        if let Ok(mut first) = self.first.lock() {
            first.get_or_insert(d);
        }
    }

    /// Model calls answered from the recordings (the whole tree).
    pub fn turns(&self) -> u32 {
        self.turns.load(Ordering::Relaxed)
    }

    /// Tool results compared and found the same (the whole tree).
    pub fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }
}

/// Paths of one side (recorded or replayed) that results may mention, and what they become
/// when results are compared.
#[derive(Clone, Debug, Default)]
pub struct Places {
    /// The work folder.
    pub workdir: Option<PathBuf>,
    /// The records folder.
    pub records: Option<PathBuf>,
}

impl Places {
    /// `text` with this side's folders and every minted id masked, so that two runs of the
    /// same commands compare equal.
    pub fn normalize(&self, text: &str) -> String {
        let mut out = text.to_string();
        // The longer path first: a work folder may sit inside the records folder.
        let mut paths: Vec<(&PathBuf, &str)> = Vec::new();
        if let Some(w) = &self.workdir {
            paths.push((w, "<workdir>"));
        }
        if let Some(r) = &self.records {
            paths.push((r, "<records>"));
        }
        paths.sort_by_key(|(p, _)| std::cmp::Reverse(p.as_os_str().len()));
        for (p, name) in paths {
            let p = p.display().to_string();
            if !p.is_empty() && p != "/" {
                out = out.replace(&p, name);
            }
        }
        mask_ids(&out)
    }
}

/// Every `ses_`, `dlg_`, `evt_`, `tsk_`, `ctx_` id (prefix + 32 hex) replaced by `<prefix>_…`.
pub fn mask_ids(text: &str) -> String {
    const PREFIXES: [&str; 5] = ["ses_", "dlg_", "evt_", "tsk_", "ctx_"];
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i + 36 <= bytes.len() {
        let hit = PREFIXES
            .iter()
            .any(|p| bytes[i..].starts_with(p.as_bytes()))
            && bytes[i + 4..i + 36]
                .iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
            && !bytes.get(i + 36).is_some_and(|b| b.is_ascii_hexdigit());
        if hit {
            out.push_str(&text[copied..i + 4]);
            out.push('…');
            i += 36;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Answers one session's model calls from its recording.
pub struct ReplayDriver {
    rec: Arc<Recording>,
    log: Arc<ReplayLog>,
    /// The replaying session's id (set once known; for divergences).
    session: Mutex<String>,
    recorded: Places,
    replayed: Mutex<Places>,
}

impl ReplayDriver {
    /// A driver replaying `rec`, reporting to `log`.
    pub fn new(rec: Arc<Recording>, log: Arc<ReplayLog>) -> ReplayDriver {
        let recorded = Places {
            workdir: rec.workdir.clone(),
            records: Some(rec.dir.clone()),
        };
        ReplayDriver {
            rec,
            log,
            session: Mutex::new(String::new()),
            recorded,
            replayed: Mutex::new(Places::default()),
        }
    }

    /// Name the replaying session and its folders (before it starts).
    pub fn bind(&self, session_id: &str, places: Places) {
        if let Ok(mut s) = self.session.lock() {
            *s = session_id.to_string();
        }
        if let Ok(mut p) = self.replayed.lock() {
            *p = places;
        }
    }

    fn divergence(&self, turn: u32, kind: Kind) -> InferError {
        let d = Divergence {
            session: self.session.lock().map(|s| s.clone()).unwrap_or_default(),
            replay_of: self.rec.session_id.clone(),
            turn,
            kind,
        };
        let sentence = d.render();
        let first = sentence.lines().next().unwrap_or("replay: diverged");
        let e = InferError::new(InferErrorKind::Driver, first.to_string());
        self.log.diverged(d);
        e
    }

    /// Compare the tool results the model now reads (after its last reply) with the recorded
    /// results of the model call `k - 1`.
    fn check_results(&self, request: &InferRequest, k: usize) -> Result<(), InferError> {
        let Some(prev) = self.rec.counted().nth(k - 1) else {
            return Ok(());
        };
        let results: Vec<(&str, bool, String)> = request
            .messages
            .iter()
            .rev()
            .take_while(|m| !matches!(m, Message::Assistant { .. }))
            .filter_map(|m| match m {
                Message::Tool {
                    tool_call_id,
                    is_error,
                    content,
                } => Some((tool_call_id.as_str(), *is_error, joined_text(content))),
                _ => None,
            })
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let recorded: Vec<_> = prev.calls.iter().filter(|c| c.output.is_some()).collect();
        let replayed = self.replayed.lock().map(|p| p.clone()).unwrap_or_default();
        for (n, call) in recorded.iter().enumerate() {
            let Some((_, is_error, text)) = results.get(n) else {
                return Err(self.divergence(
                    prev.turn,
                    Kind::Path {
                        what: format!(
                            "the recording has {} tool result(s) for this turn, the replay {}",
                            recorded.len(),
                            results.len()
                        ),
                    },
                ));
            };
            let old = self
                .recorded
                .normalize(call.output.as_deref().unwrap_or_default());
            let new = replayed.normalize(&mur_actors::provided::redact_handles_text(text));
            if old != new || call.is_error != *is_error {
                return Err(self.divergence(
                    prev.turn,
                    Kind::ToolResult {
                        tool: call.name.clone(),
                        tool_call_id: call.id.clone(),
                        input: call.input.clone(),
                        recorded: old,
                        replayed: new,
                    },
                ));
            }
            self.log.calls.fetch_add(1, Ordering::Relaxed);
        }
        if results.len() > recorded.len() {
            return Err(self.divergence(
                prev.turn,
                Kind::Path {
                    what: format!(
                        "the replay has {} tool result(s) for this turn, the recording {}",
                        results.len(),
                        recorded.len()
                    ),
                },
            ));
        }
        Ok(())
    }

    /// Compare the system prompt and the tool array with the ones model call `turn` was sent.
    fn check_request(
        &self,
        request: &InferRequest,
        turn: u32,
        system_sha: Option<&str>,
        tools_sha: Option<&str>,
    ) -> Result<(), InferError> {
        if let Some(sha) = system_sha {
            if sha256_hex(request.system.as_bytes()) != sha {
                return Err(self.divergence(
                    turn,
                    Kind::Request {
                        part: "system",
                        recorded: self.rec.bodies.get(sha).cloned().unwrap_or_default(),
                        replayed: request.system.to_string(),
                    },
                ));
            }
        }
        if let Some(sha) = tools_sha {
            let tools = serde_json::to_vec(&*request.tools).unwrap_or_default();
            if sha256_hex(&tools) != sha {
                return Err(self.divergence(
                    turn,
                    Kind::Request {
                        part: "tools",
                        recorded: self.rec.bodies.get(sha).cloned().unwrap_or_default(),
                        replayed: String::from_utf8_lossy(&tools).into_owned(),
                    },
                ));
            }
        }
        Ok(())
    }
}

#[async_trait]
impl ModelDriver for ReplayDriver {
    fn name(&self) -> &str {
        REPLAY_DRIVER
    }

    async fn infer(
        &self,
        request: &InferRequest,
        _retries: &dyn RetrySink,
    ) -> Result<InferReply, InferError> {
        if self.log.divergence().is_some() {
            return Err(InferError::new(
                InferErrorKind::Driver,
                "replay stopped: another session of the tree diverged from its recording",
            ));
        }
        let k = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        if k > 0 {
            self.check_results(request, k)?;
        }
        let Some(turn) = self.rec.call(k) else {
            let n = self.rec.counted().count();
            return Err(self.divergence(
                k as u32,
                Kind::Path {
                    what: format!(
                        "the runtime asked for model call {} and the recording holds {n}{}",
                        k + 1,
                        if self.rec.exit_status.is_none() {
                            " (it has no session_end: the recorded session was cut short)"
                        } else {
                            ""
                        }
                    ),
                },
            ));
        };
        self.check_request(
            request,
            turn.turn,
            turn.system_sha.as_deref(),
            turn.tools_sha.as_deref(),
        )?;
        match (&turn.reply, &turn.error) {
            (Some(reply), _) => {
                self.log.turns.fetch_add(1, Ordering::Relaxed);
                Ok(reply.clone())
            }
            (None, Some((code, message))) => {
                let kind = match code.as_str() {
                    "credential_rejected" => InferErrorKind::CredentialRejected,
                    "malformed_response" => InferErrorKind::Malformed,
                    _ => InferErrorKind::Driver,
                };
                Err(InferError::new(kind, message.clone()))
            }
            (None, None) => Err(InferError::new(
                InferErrorKind::Driver,
                "the recording holds no reply for this call",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_folders_are_masked() {
        let p = Places {
            workdir: Some("/w/ses_0123456789abcdef0123456789abcdef".into()),
            records: Some("/r".into()),
        };
        assert_eq!(
            p.normalize("in /w/ses_0123456789abcdef0123456789abcdef and dlg_0123456789abcdef0123456789abcdef, /r/x"),
            "in <workdir> and dlg_…, <records>/x"
        );
        assert_eq!(mask_ids("ses_12"), "ses_12");
    }
}
