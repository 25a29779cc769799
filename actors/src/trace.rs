//! The [`TraceWriter`] actor: the only writer of one `trace.jsonl`.
//!
//! Emitters mint each event's id (time-ordered, so no round trip is needed to learn a parent id)
//! and send it here; the writer owns the order of lines and their durability. Each event is one
//! `write` of one whole line, so a killed process can only leave a torn *last* line, which the
//! readers tolerate. The file (and its folder) is created on the first line, so starting a writer
//! costs no I/O: a child session's first model call does not wait for the disk.
//!
//! Durability policy (`Sync` with a [`Durability`]): every line is written with one `write(2)`
//! as it arrives, so it survives the process (a crash or Ctrl-C of `mur` loses nothing already
//! written). Surviving the *machine* needs an fsync: the root session asks for
//! [`Durability::Filesystem`] once its `task_end` and `session_end` are written, which is one
//! `syncfs(2)` covering its own trace and every child's trace on that filesystem (a group commit:
//! ten thousand children cost one sync, not ten thousand). Children ask for
//! [`Durability::Written`]: their lines are in the kernel's page cache and reach the disk with
//! the root's sync. Syncs run on the blocking pool, never on a runtime thread.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::ids;

/// One trace line before it is written: the envelope plus the event's own fields, in order.
#[derive(Clone, Debug)]
pub struct TraceEvent {
    /// `session_start`, `inference`, `tool_call`, …
    pub event_type: &'static str,
    /// `evt_…`, minted when the event is built.
    pub event_id: String,
    /// The event this one hangs off; `None` only for `session_start`.
    pub parent_id: Option<String>,
    /// Unix milliseconds when the event was built.
    pub timestamp: u64,
    /// The event's own fields, written after the envelope in insertion order.
    pub fields: Map<String, Value>,
}

impl TraceEvent {
    /// A new event of `event_type` under `parent`.
    pub fn new(event_type: &'static str, parent: Option<&str>) -> Self {
        TraceEvent {
            event_type,
            event_id: ids::mint("evt_"),
            parent_id: parent.map(str::to_string),
            timestamp: ids::now_ms(),
            fields: Map::new(),
        }
    }

    /// Add one field (serialization failures become `null`, never a panic).
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        self.fields.insert(
            key.to_string(),
            serde_json::to_value(value).unwrap_or(Value::Null),
        );
        self
    }

    /// Add a field only when `value` is `Some`.
    pub fn with_opt<T: Serialize>(self, key: &str, value: Option<T>) -> Self {
        match value {
            Some(v) => self.with(key, v),
            None => self,
        }
    }

    /// Render the line (with its trailing newline) for `session_id`.
    pub fn to_line(&self, session_id: &str) -> String {
        let mut line = String::with_capacity(160 + self.fields.len() * 32);
        line.push_str("{\"event_type\":");
        push_json(&mut line, &Value::from(self.event_type));
        line.push_str(",\"event_id\":");
        push_json(&mut line, &Value::from(self.event_id.as_str()));
        line.push_str(",\"parent_id\":");
        match &self.parent_id {
            Some(p) => push_json(&mut line, &Value::from(p.as_str())),
            None => line.push_str("null"),
        }
        line.push_str(",\"session_id\":");
        push_json(&mut line, &Value::from(session_id));
        line.push_str(",\"timestamp\":");
        line.push_str(&self.timestamp.to_string());
        for (k, v) in &self.fields {
            line.push(',');
            push_json(&mut line, &Value::from(k.as_str()));
            line.push(':');
            push_json(&mut line, v);
        }
        line.push_str("}\n");
        line
    }
}

fn push_json(out: &mut String, v: &Value) {
    // Value's Display is compact JSON and cannot fail.
    use std::fmt::Write as _;
    let _ = write!(out, "{v}");
}

/// Messages the [`TraceWriter`] takes.
pub enum TraceMsg {
    /// Append one event as one line.
    Append(TraceEvent),
    /// Make every line so far durable to the given degree; answers the first write error seen.
    Sync(Durability, RpcReplyPort<Result<(), String>>),
}

/// How durable a [`TraceMsg::Sync`] makes the lines written so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// Written to the kernel (survives the process, not a power loss).
    Written,
    /// `fsync` of this file.
    File,
    /// `syncfs` of the filesystem holding this file (this trace and its children's).
    Filesystem,
}

/// Arguments to start a [`TraceWriter`].
pub struct TraceWriterArgs {
    /// The `trace.jsonl` to create (appended to if it exists).
    pub path: PathBuf,
    /// The session every line belongs to.
    pub session_id: String,
}

/// The actor writing one `trace.jsonl`.
pub struct TraceWriter;

/// The writer's state: the file once opened, and the first error met.
pub struct TraceWriterState {
    file: Option<File>,
    session_id: String,
    path: PathBuf,
    error: Option<String>,
}

/// `syncfs(2)` on the filesystem holding `file`.
fn syncfs(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: syncfs only reads the descriptor, which `file` keeps open for the call.
    if unsafe { libc::syncfs(file.as_raw_fd()) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Create (or open for appending) a trace file and its folder.
fn open_trace(path: &std::path::Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

#[ractor::async_trait]
impl Actor for TraceWriter {
    type Msg = TraceMsg;
    type State = TraceWriterState;
    type Arguments = TraceWriterArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: TraceWriterArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(TraceWriterState {
            file: None,
            session_id: args.session_id,
            path: args.path,
            error: None,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: TraceMsg,
        state: &mut TraceWriterState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            TraceMsg::Append(event) => {
                let line = event.to_line(&state.session_id);
                if state.file.is_none() && state.error.is_none() {
                    // Creating the file (and its folder) may wait on the filesystem: do it on
                    // the blocking pool, not on a runtime thread.
                    let path = state.path.clone();
                    match tokio::task::spawn_blocking(move || open_trace(&path)).await {
                        Ok(Ok(f)) => state.file = Some(f),
                        Ok(Err(e)) => {
                            state.error =
                                Some(format!("trace write failed: {}: {e}", state.path.display()))
                        }
                        Err(e) => state.error = Some(format!("trace write failed: {e}")),
                    }
                }
                let written = match state.file.as_mut() {
                    Some(f) => f.write_all(line.as_bytes()),
                    None => Ok(()),
                };
                if let Err(e) = written {
                    if state.error.is_none() {
                        state.error =
                            Some(format!("trace write failed: {}: {e}", state.path.display()));
                    }
                }
            }
            TraceMsg::Sync(durability, reply) => {
                let result = match (&state.error, state.file.as_ref().map(File::try_clone)) {
                    (Some(e), _) => Err(e.clone()),
                    (None, None) => Ok(()),
                    (None, Some(_)) if durability == Durability::Written => Ok(()),
                    (None, Some(Err(e))) => {
                        Err(format!("trace sync failed: {}: {e}", state.path.display()))
                    }
                    (None, Some(Ok(file))) => {
                        let path = state.path.clone();
                        tokio::task::spawn_blocking(move || match durability {
                            Durability::Filesystem => syncfs(&file),
                            _ => file.sync_data(),
                        })
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|r| r.map_err(|e| e.to_string()))
                        .map_err(|e| format!("trace sync failed: {}: {e}", path.display()))
                    }
                };
                let _ = reply.send(result);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_keys_come_first_in_order() {
        let ev = TraceEvent::new("tool_call", Some("evt_parent"))
            .with("turn", 0)
            .with("tool_name", "bash");
        let line = ev.to_line("ses_x");
        let prefix = format!(
            "{{\"event_type\":\"tool_call\",\"event_id\":\"{}\",\"parent_id\":\"evt_parent\",\"session_id\":\"ses_x\",\"timestamp\":{},\"turn\":0,\"tool_name\":\"bash\"}}\n",
            ev.event_id, ev.timestamp
        );
        assert_eq!(line, prefix);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["parent_id"], "evt_parent");
    }

    #[tokio::test]
    async fn writer_appends_whole_lines_and_syncs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let (w, h) = Actor::spawn(
            None,
            TraceWriter,
            TraceWriterArgs {
                path: path.clone(),
                session_id: "ses_1".into(),
            },
        )
        .await
        .unwrap();
        for i in 0..3 {
            w.send_message(TraceMsg::Append(
                TraceEvent::new("inference", None).with("turn", i),
            ))
            .unwrap();
        }
        let synced = ractor::call!(w, |r| TraceMsg::Sync(Durability::File, r)).unwrap();
        assert!(synced.is_ok());
        w.stop(None);
        h.await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(text.ends_with("\"turn\":2}\n"));
    }
}
