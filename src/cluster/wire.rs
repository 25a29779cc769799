//! What crosses between a parent and a node: two actors' message enums, and the JSON payloads
//! their string fields carry.
//!
//! The enums derive ractor_cluster's `RactorClusterMessage`: each variant is sent by name,
//! each field as bytes (`BytesConvertable`), an `#[rpc]` variant with its reply port. Payloads
//! are JSON inside a `String` field because a field's decoding cannot fail in that trait; a
//! handler parses the JSON and answers a malformed one with a refusal. Artifact and trace bytes
//! travel as `Vec<u8>` fields, unencoded.

use ractor::RpcReplyPort;
use ractor_cluster::RactorClusterMessage;
use serde::{Deserialize, Serialize};

use mur_actors::session::{ExitStatus, SessionReport, Totals};
use mur_actors::spec::Grants;

/// The version of the payloads below. A parent and a node with different versions do not
/// work together: the parent marks the node unavailable at its hello.
pub const PROTOCOL_VERSION: u32 = 1;

/// The process group every node's host actor joins.
pub const HOST_GROUP: &str = "mur.host";

/// The process group of the edge of the parent whose node name is `parent`.
pub fn edge_group(parent: &str) -> String {
    format!("mur.edge.{parent}")
}

/// The largest frame either side accepts: an artifact going out, a trace coming back.
pub const MAX_FRAME_BYTES: u64 = 256 * 1024 * 1024;

/// The largest trace a node sends back whole; past it the parent's copy says where it is.
pub const MAX_TRACE_BYTES: usize = 192 * 1024 * 1024;

/// Messages a node's host actor takes (sent by parents, across the network).
#[derive(RactorClusterMessage)]
pub enum HostMsg {
    /// Who are you: answers a [`Hello`] as JSON.
    #[rpc]
    Hello(String, RpcReplyPort<String>),
    /// Start a child: a [`StartRequest`] as JSON and the capsule's `.mur.zip`; answers a
    /// [`StartAnswer`] as JSON once the child holds its task (or was refused).
    #[rpc]
    Start(String, Vec<u8>, RpcReplyPort<String>),
    /// Cancel a child: its session id and the reason.
    Cancel(String, String),
}

/// Messages a parent's edge actor takes (sent by nodes, across the network).
#[derive(RactorClusterMessage)]
pub enum EdgeMsg {
    /// A child ended: an [`EndReport`] as JSON and the child's trace.
    Ended(String, Vec<u8>),
}

/// A node's answer to hello.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Hello {
    /// [`PROTOCOL_VERSION`] of the node.
    pub protocol: u32,
    /// The node's name.
    pub name: String,
    /// `--capacity`.
    pub capacity: u32,
    /// Children it hosts now.
    pub live: u32,
}

/// One child for a node to run: the kernel's `ChildRequest` minus the parent's paths.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StartRequest {
    /// [`PROTOCOL_VERSION`] of the parent.
    pub protocol: u32,
    /// The process group of the parent's edge, where the end goes.
    pub edge_group: String,
    /// Full capsule name.
    pub capsule: String,
    /// Exact version.
    pub version: String,
    /// The sha256 the parent's store pins the capsule's `.mur.zip` to.
    pub sha256: String,
    /// The child's first message.
    pub task: String,
    /// `ses_…`.
    pub session_id: String,
    /// `dlg_…`.
    pub delegation_id: String,
    /// The parent's session id.
    pub parent_session_id: String,
    /// The parent's grants: the node checks the child's again.
    pub parent_grants: Grants,
    /// Depth in the tree.
    pub depth: u32,
}

/// A node's answer to a start.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub enum StartAnswer {
    /// The child holds its task.
    Started {
        /// Its records folder on the node (named in the parent's copy if the node is lost).
        records_dir: String,
    },
    /// Not started, and it is no use trying elsewhere: the sentence.
    Refused(String),
    /// Not started: the node is at its `--capacity` (the parent runs it elsewhere).
    Full(String),
}

/// How a remote child ended, as its node reports it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EndReport {
    /// `ses_…`.
    pub session_id: String,
    /// `ok`, `failed`, `max_turns_reached`, `canceled`.
    pub exit_status: String,
    /// The answer (or the error text).
    pub result: String,
    /// Set when the session crashed (a panic): why.
    pub crashed: Option<String>,
    /// Counters.
    pub turns: u32,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Tool calls.
    pub tool_calls: u32,
    /// Shell calls.
    pub shell_calls: u32,
    /// Wall time.
    pub duration_ms: u64,
    /// Set when the trace was too large to send: where it is on the node.
    pub trace_left_at: Option<String>,
}

impl EndReport {
    /// The report of a session that ended on a node.
    pub fn of(r: &SessionReport, crashed: Option<String>) -> EndReport {
        EndReport {
            session_id: r.session_id.clone(),
            exit_status: r.exit_status.as_str().to_string(),
            result: r.result.clone(),
            crashed,
            turns: r.totals.turns,
            input_tokens: r.totals.input_tokens,
            output_tokens: r.totals.output_tokens,
            tool_calls: r.totals.tool_calls,
            shell_calls: r.totals.shell_calls,
            duration_ms: r.duration_ms,
            trace_left_at: None,
        }
    }

    /// Back into the kernel's report, as the parent's report sink takes it.
    pub fn to_report(&self) -> SessionReport {
        let exit_status = match self.exit_status.as_str() {
            "ok" => ExitStatus::Ok,
            "max_turns_reached" => ExitStatus::MaxTurnsReached,
            "canceled" => ExitStatus::Canceled,
            _ => ExitStatus::Failed,
        };
        SessionReport {
            session_id: self.session_id.clone(),
            exit_status,
            result: self.result.clone(),
            totals: Totals {
                turns: self.turns,
                input_tokens: self.input_tokens,
                output_tokens: self.output_tokens,
                tool_calls: self.tool_calls,
                shell_calls: self.shell_calls,
            },
            duration_ms: self.duration_ms,
            trace_error: None,
        }
    }
}

/// `value` as the JSON a string field carries.
pub fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("wire payloads always serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_report_keeps_status_and_counters() {
        let r = SessionReport {
            session_id: "ses_1".into(),
            exit_status: ExitStatus::MaxTurnsReached,
            result: "x".into(),
            totals: Totals {
                turns: 3,
                input_tokens: 10,
                output_tokens: 20,
                tool_calls: 1,
                shell_calls: 1,
            },
            duration_ms: 7,
            trace_error: None,
        };
        let back: EndReport = serde_json::from_str(&to_json(&EndReport::of(&r, None))).unwrap();
        assert_eq!(back.to_report(), r);
    }
}
