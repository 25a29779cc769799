//! Trace lines: the [`TraceEvent`] an emitter builds and the [`TraceWriter`] that writes them.
//!
//! Emitters mint each event's id (time-ordered, so no round trip is needed to learn a parent id)
//! and append it through the session's writer, which owns the order of lines and their
//! durability. Each line reaches the file whole in one `write(2)` (several whole lines may share
//! one), so a killed process can only leave a torn *last* line, which the readers tolerate. The
//! file (and its folder) is created after the first line is appended, so starting a writer costs
//! no I/O: a child session's first model call does not wait for the disk.
//!
//! Durability policy ([`TraceWriter::sync`] with a [`Durability`]): lines are written as they
//! arrive, so they survive the process (a crash or Ctrl-C of `mur` loses at most the lines
//! appended in the last moment, not yet handed to the kernel). Surviving the *machine* needs an
//! fsync: each session, once its `task_end` and `session_end` are written, hands its records to
//! [`crate::durable::RecordSync`], which flushes exactly those files and folders in the
//! background; the root waits for its whole tree once (a group commit: ten thousand children
//! cost about one barrier's worth of waiting, not ten thousand). Syncs never run on a runtime
//! thread.

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
        let mut line = Vec::new();
        self.write_line(session_id, &mut line);
        // serde_json writes UTF-8 only.
        String::from_utf8(line)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// Append the line (with its trailing newline) for `session_id` to `out`: straight to
    /// bytes, with no formatting machinery in between (a fan-out writes ten lines per child).
    pub fn write_line(&self, session_id: &str, out: &mut Vec<u8>) {
        out.reserve(160 + self.fields.len() * 32);
        out.extend_from_slice(b"{\"event_type\":");
        push_json(out, self.event_type);
        out.extend_from_slice(b",\"event_id\":");
        push_json(out, &self.event_id);
        out.extend_from_slice(b",\"parent_id\":");
        push_json(out, &self.parent_id);
        out.extend_from_slice(b",\"session_id\":");
        push_json(out, session_id);
        out.extend_from_slice(b",\"timestamp\":");
        push_json(out, self.timestamp);
        for (k, v) in &self.fields {
            out.push(b',');
            push_json(out, k);
            out.push(b':');
            push_json(out, v);
        }
        out.extend_from_slice(b"}\n");
    }
}

fn push_json(out: &mut Vec<u8>, v: impl Serialize) {
    // Writing to a Vec cannot fail, and these values (strings, numbers, JSON values) always
    // serialize.
    let _ = serde_json::to_writer(out, &v);
}

mod writer;

pub use writer::{written_all, written_all_blocking, Durability, TraceWriter};

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
}
