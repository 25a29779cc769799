//! Trace lines: the [`TraceEvent`] an emitter builds and the [`TraceLog`] that writes them.
//!
//! Emitters mint each event's id (time-ordered, so no round trip is needed to learn a parent id)
//! and append it through the session's writer, which owns the order of lines and their
//! durability. Each line reaches the file whole in one `write(2)` (several whole lines may share
//! one), so a killed process can only leave a torn *last* line, which the readers tolerate. The
//! file (and its folder) is created after the first line is appended, so starting a writer costs
//! no I/O: a child session's first model call does not wait for the disk.
//!
//! Durability policy ([`TraceLog::sync`] with a [`Durability`]): lines are written as they
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
use crate::json_str;

pub mod events;

pub use events::EventType;

/// One trace line before it is written: the envelope plus the event's own fields, in order.
#[derive(Clone, Debug)]
pub struct TraceEvent {
    /// `session_start`, `inference`, `tool_call`, …
    pub event_type: EventType,
    /// `evt_…`, minted when the event is built.
    pub event_id: String,
    /// The event this one hangs off; `None` only for `session_start`.
    pub parent_id: Option<String>,
    /// Unix milliseconds when the event was built.
    pub timestamp: u64,
    /// The event's own fields, already written as JSON members (`,"key":value` each), in
    /// insertion order: a field costs one write into this buffer, not a key `String`, a
    /// `Value` tree and a map entry (a fan-out builds ten events per child). [`Self::fields`]
    /// reads them back.
    members: Vec<u8>,
    /// Where each member's key starts and ends in `members` (for replacing a repeated key).
    keys: Vec<(u32, u32)>,
}

impl TraceEvent {
    /// A new event of `event_type` under `parent`.
    pub fn new(event_type: EventType, parent: Option<&str>) -> Self {
        TraceEvent::minted(event_type, ids::mint("evt_"), parent)
    }

    /// A new event whose id was minted earlier: an emitter that hands the id out (as a parent)
    /// before it builds the event.
    pub fn minted(event_type: EventType, event_id: String, parent: Option<&str>) -> Self {
        TraceEvent {
            event_type,
            event_id,
            parent_id: parent.map(str::to_string),
            timestamp: ids::now_ms(),
            members: Vec::with_capacity(256),
            // Most events have 5 to 16 fields: one allocation, not four growths.
            keys: Vec::with_capacity(16),
        }
    }

    /// Add one field (serialization failures become `null`, never a panic). A key given again
    /// keeps its place and takes the new value, as in a JSON map.
    pub fn with(mut self, key: &str, value: impl Serialize) -> Self {
        let start = self.members.len();
        self.members.push(b',');
        json_str::push_str(&mut self.members, key);
        let key_span = (start as u32 + 1, self.members.len() as u32);
        self.members.push(b':');
        if !json_str::push_value(&mut self.members, &value) {
            self.members.extend_from_slice(b"null");
        }
        let new_key = &self.members[key_span.0 as usize..key_span.1 as usize];
        let repeated = self
            .keys
            .iter()
            .any(|(a, b)| &self.members[*a as usize..*b as usize] == new_key);
        if repeated {
            // Rare: rebuild through a map, which keeps the first place and the last value.
            let fields = self.fields();
            self.members.clear();
            self.keys.clear();
            for (k, v) in &fields {
                self = self.with(k, v);
            }
        } else {
            self.keys.push(key_span);
        }
        self
    }

    /// The event's own fields, read back from the written members, in order.
    pub fn fields(&self) -> Map<String, Value> {
        let mut object = Vec::with_capacity(self.members.len() + 2);
        object.push(b'{');
        object.extend_from_slice(self.members.get(1..).unwrap_or_default());
        object.push(b'}');
        serde_json::from_slice(&object).unwrap_or_default()
    }

    /// One field, read back (`None` when absent).
    pub fn field(&self, key: &str) -> Option<Value> {
        self.fields().remove(key)
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
        out.reserve(160 + self.members.len());
        out.extend_from_slice(b"{\"event_type\":");
        json_str::push_str(out, self.event_type.as_str());
        out.extend_from_slice(b",\"event_id\":");
        json_str::push_str(out, &self.event_id);
        out.extend_from_slice(b",\"parent_id\":");
        match &self.parent_id {
            Some(parent) => json_str::push_str(out, parent),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"session_id\":");
        json_str::push_str(out, session_id);
        out.extend_from_slice(b",\"timestamp\":");
        out.extend_from_slice(itoa::Buffer::new().format(self.timestamp).as_bytes());
        out.extend_from_slice(&self.members);
        out.extend_from_slice(b"}\n");
    }
}

mod observe;
mod writer;

pub use observe::{set_observer, Observer};
pub use writer::{written_all, written_all_blocking, Durability, TraceLog};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_keys_come_first_in_order() {
        let ev = TraceEvent::new(EventType::ToolCall, Some("evt_parent"))
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

    #[test]
    fn a_repeated_key_keeps_its_place_and_takes_the_last_value() {
        let ev = TraceEvent::new(EventType::ToolCall, None)
            .with("turn", 0)
            .with("status", "ok")
            .with("tool_name", "bash")
            .with("status", "error");
        let line = ev.to_line("ses_x");
        assert!(
            line.ends_with(",\"turn\":0,\"status\":\"error\",\"tool_name\":\"bash\"}\n"),
            "{line}"
        );
        assert_eq!(ev.field("status"), Some(Value::from("error")));
        assert_eq!(ev.fields().len(), 3);
        // A value that cannot be serialized is null, and the line stays whole JSON.
        let mut bad = std::collections::HashMap::new();
        bad.insert(vec![1u8], 2);
        let line = TraceEvent::new(EventType::Body, None)
            .with("bad", bad)
            .with("after", 1)
            .to_line("s");
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["bad"], Value::Null);
        assert_eq!(v["after"], 1);
    }
}
