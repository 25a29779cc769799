//! What crosses between a parent and a node: two actors' message enums, and the JSON payloads
//! their string fields carry.
//!
//! The enums derive ractor_cluster's `RactorClusterMessage`: each variant is sent by name,
//! each field as bytes (`BytesConvertable`), an `#[rpc]` variant with its reply port. Payloads
//! are JSON inside a `String` field because a field's decoding cannot fail in that trait; a
//! handler parses the JSON and answers a malformed one with a refusal. Artifact and trace bytes
//! travel as `Vec<u8>` fields, unencoded: several traces as one field, one after another, with
//! their paths and lengths in the JSON beside them ([`TracePart`]); an archive fetched by a node
//! as one reply, a JSON header and the bytes ([`pack_fetched`]).

use ractor::RpcReplyPort;
use ractor_cluster::RactorClusterMessage;
use serde::{Deserialize, Serialize};

use mur_actors::session::{ExitStatus, SessionReport, Totals};
use mur_actors::spec::Grants;

/// The version of the payloads below. A parent and a node with different versions do not
/// work together: the parent marks the node unavailable at its hello.
pub const PROTOCOL_VERSION: u32 = 2;

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
    /// A child ended: an [`EndReport`] as JSON and its traces ([`EndReport::traces`]).
    Ended(String, Vec<u8>),
    /// A child on the node delegates: a [`FetchRequest`] as JSON; answers the capsule's
    /// `.mur.zip` from the parent's stores, with its pin ([`pack_fetched`]).
    #[rpc]
    Fetch(String, RpcReplyPort<Vec<u8>>),
}

/// A node asks its parent for a capsule a child there delegates to.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FetchRequest {
    /// Full capsule name.
    pub capsule: String,
    /// Exact version.
    pub version: String,
}

/// The parent's answer to a fetch: the header before the archive's bytes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub enum Fetched {
    /// The archive follows; the node runs it only if its bytes hash to this.
    Found {
        /// The sha256 the parent's store pins it to.
        sha256: String,
    },
    /// Not in the parent's stores (or unreadable there): the sentence.
    Refused(String),
}

/// One reply: the header's length (4 bytes, big-endian), the header as JSON, the archive.
pub fn pack_fetched(header: &Fetched, archive: &[u8]) -> Vec<u8> {
    let json = to_json(header);
    let mut out = Vec::with_capacity(4 + json.len() + archive.len());
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(archive);
    out
}

/// The header and the archive of a [`pack_fetched`] reply; a sentence when it is malformed.
pub fn unpack_fetched(reply: &[u8]) -> Result<(Fetched, &[u8]), String> {
    let malformed = |why: &str| format!("the parent's answer to a fetch is malformed: {why}");
    let (len, rest) = reply
        .split_first_chunk::<4>()
        .ok_or_else(|| malformed("shorter than its header"))?;
    let len = u32::from_be_bytes(*len) as usize;
    if rest.len() < len {
        return Err(malformed("shorter than its header"));
    }
    let (json, archive) = rest.split_at(len);
    let header = serde_json::from_slice(json).map_err(|e| malformed(&e.to_string()))?;
    Ok((header, archive))
}

/// One trace of an [`EndReport`]: where it goes under the child's records folder, and how many
/// of the bytes that come with the report are its.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TracePart {
    /// `trace.jsonl` for the child's own, `children/<ses>/…/trace.jsonl` for a session it
    /// delegated to on the node.
    pub path: String,
    /// Its length in bytes.
    pub len: u64,
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
    /// The root's `--max-depth`: the bound of the child's own delegations on the node.
    pub max_depth: u32,
    /// The root's `--max-children`: live sub-capsules per session, on the node too.
    pub max_children: u32,
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
    /// Set when the traces were too large to send: where they are on the node.
    pub trace_left_at: Option<String>,
    /// The traces sent with the report, in the order of their bytes: the child's own, then
    /// those of the sessions it delegated to on the node.
    #[serde(default)]
    pub traces: Vec<TracePart>,
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
            traces: Vec::new(),
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

    #[test]
    fn a_fetch_reply_is_its_header_then_the_archive() {
        let header = Fetched::Found {
            sha256: "ab".repeat(32),
        };
        let reply = pack_fetched(&header, b"PK\x03\x04zip");
        assert_eq!(
            unpack_fetched(&reply).unwrap(),
            (header, &b"PK\x03\x04zip"[..])
        );
        // Short, lying about its length, or not JSON: a sentence, never a panic.
        for bad in [
            &b""[..],
            &b"\0\0"[..],
            &b"\0\0\0\x09{}"[..],
            &b"\0\0\0\x02no"[..],
        ] {
            let why = unpack_fetched(bad).unwrap_err();
            assert!(
                why.starts_with("the parent's answer to a fetch is malformed"),
                "{why}"
            );
        }
    }
}
