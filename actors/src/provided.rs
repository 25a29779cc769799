//! The manifests of runtime-provided tools, built from the grants.
//!
//! Seed 000: the grant is the tool's existence. This module is the one place that decides which
//! runtime-provided tools a session holds: one shell tool per binary in
//! `capabilities.shell.allow`, `delegate-task` with `capabilities.spawn.allow`, and so on. Every
//! one carries `version: 0.0.0`, is never pinned and never listed by `mur list`.

use serde_json::{json, Value};

use crate::spec::Grants;
use crate::tool::{RuntimeTool, ToolDecl, ToolKind, ToolOrigin};

/// Binaries that take their command as `-c <command>`.
pub const INTERPRETERS: [&str; 6] = ["bash", "sh", "zsh", "fish", "dash", "ksh"];

/// The description of the shell tool for `binary`.
pub fn shell_description(binary: &str) -> String {
    if INTERPRETERS.contains(&binary) {
        format!("Run a shell command via {binary} in the capsule workdir. The `command` field is passed to {binary} via -c.")
    } else {
        format!("Run {binary} in the capsule workdir. The `command` field holds the arguments to {binary} (split like a shell, without expansion).")
    }
}

/// The input schema of every shell tool.
pub fn shell_schema() -> Value {
    json!({"type":"object","properties":{"command":{"type":"string"}},"required":["command"]})
}

/// The shell tool for one allowed binary.
pub fn shell_tool(binary: &str) -> ToolDecl {
    provided(
        binary,
        shell_description(binary),
        shell_schema(),
        ToolKind::Shell {
            binary: binary.to_string(),
        },
    )
}

fn provided(name: &str, description: String, schema: Value, kind: ToolKind) -> ToolDecl {
    ToolDecl {
        name: name.to_string(),
        full_name: None,
        version: "0.0.0".into(),
        description,
        input_schema: schema,
        kind,
        origin: ToolOrigin::Provided,
    }
}

/// The bare part of a full name (`scope/name` → `name`).
pub fn bare(full: &str) -> &str {
    full.rsplit_once('/').map(|(_, b)| b).unwrap_or(full)
}

/// `delegate-task`, its `capsule` enum built from the bare names of `spawn.allow`.
pub fn delegate_task(spawn_allow: &[String]) -> ToolDecl {
    let names: Vec<&str> = spawn_allow.iter().map(|s| bare(s)).collect();
    provided(
        RuntimeTool::DelegateTask.name(),
        format!(
            "Hand one task to one sub-capsule ({}). Returns as soon as the sub-capsule is running and holding the task, with status \"started\", its delegation_id, session_id and child_workdir; it does not return the answer. The outcome arrives later in this conversation, fenced as delegation:<capsule>, with the delegation_id, its final status (ok, error, crashed or terminated) and the answer under result:. If you end your turn while delegations are outstanding, the task waits for every one of them and continues once with all outcomes. A sub-capsule still running at the delegation deadline is ended and reported terminated. If this task ends any other way, its sub-capsules are ended with it.",
            names.join(", ")
        ),
        json!({
            "type": "object",
            "properties": {
                "capsule": {"type": "string", "enum": names},
                "version": {"type": "string", "description": "The exact version to run."},
                "task": {"type": "string", "description": "Everything the sub-capsule is told: its first message, verbatim."}
            },
            "required": ["capsule", "version", "task"]
        }),
        ToolKind::Runtime,
    )
}

/// `share-file`: mint a handle for one file under `exports.peer_files.root`, bound to one peer.
pub fn share_file() -> ToolDecl {
    provided(
        RuntimeTool::ShareFile.name(),
        "Share one file under this capsule's export root with one peer capsule. Give the file's path relative to the export root and the peer's address (localhost:<port>/<session id>); optionally a ttl such as 90s, 10m or 1h, which can only shorten the export's max_ttl. Returns a handle bound to that peer, its handle_id, expires_at_ms, the audience and from (this session's address, where the peer redeems it). Send the handle and from to the peer; only that peer can redeem it, until it expires or this session ends.".into(),
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file, relative to the export root."},
                "peer": {"type": "string", "description": "The receiving peer's address: localhost:<port>/<session id>."},
                "ttl": {"type": "string", "description": "Lifetime such as 90s, 10m or 1h; at most the export's max_ttl."}
            },
            "required": ["path", "peer"]
        }),
        ToolKind::Runtime,
    )
}

/// `fetch-peer-file`: redeem a handle from an allowed peer into `peer-in/`.
pub fn fetch_peer_file(peer_fetch_allow: &[String]) -> ToolDecl {
    provided(
        RuntimeTool::FetchPeerFile.name(),
        format!(
            "Redeem a file handle a peer capsule sent you. Give the peer's address (localhost:<port>/<session id>, the handle's from) and the handle. Allowed peers: {}. The file is stored under peer-in/ in your work folder; the result gives its path, bytes and sha256, not its contents: read the file to see them.",
            peer_fetch_allow.join(", ")
        ),
        json!({
            "type": "object",
            "properties": {
                "peer": {"type": "string", "description": "The minting peer's address: localhost:<port>/<session id>."},
                "handle": {"type": "string", "description": "The handle, exactly as received (mh1.…)."}
            },
            "required": ["peer", "handle"]
        }),
        ToolKind::Runtime,
    )
}

/// Replace every peer-file handle (`mh1.<b64url>.<b64url>`) in `text` by `[handle:<handle_id>]`,
/// where the id is the first 16 hex digits of the token's sha256: traces name handles by id only.
pub fn redact_handles_text(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let b64 = |c: u8| c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while let Some(found) = text[i..].find("mh1.") {
        let start = i + found;
        let boundary = start == 0 || !b64(bytes[start - 1]);
        let mut end = start + 4;
        let first = end;
        while end < bytes.len() && b64(bytes[end]) {
            end += 1;
        }
        let dot = end;
        if boundary && dot > first && dot < bytes.len() && bytes[dot] == b'.' {
            end = dot + 1;
            while end < bytes.len() && b64(bytes[end]) {
                end += 1;
            }
            if end > dot + 1 {
                let token = &text[start..end];
                let id = hex::encode(Sha256::digest(token.as_bytes()));
                out.push_str(&text[copied..start]);
                out.push_str(&format!("[handle:{}]", &id[..16]));
                copied = end;
                i = end;
                continue;
            }
        }
        i = start + 4;
    }
    out.push_str(&text[copied..]);
    out
}

/// [`redact_handles_text`] applied to every string in a JSON value (a call's input or output).
/// A value holding no handle is lent as it is: every tool call's line shows its input, and
/// rebuilding it cost a map with a hashed key per member each time.
pub fn redact_handles(value: &Value) -> std::borrow::Cow<'_, Value> {
    if holds_handle(value) {
        std::borrow::Cow::Owned(redacted(value))
    } else {
        std::borrow::Cow::Borrowed(value)
    }
}

/// Whether any string in `value` may hold a handle (it has the marker; the text decides).
fn holds_handle(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains("mh1."),
        Value::Array(a) => a.iter().any(holds_handle),
        Value::Object(o) => o.values().any(holds_handle),
        _ => false,
    }
}

fn redacted(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(redact_handles_text(s)),
        Value::Array(a) => Value::Array(a.iter().map(redacted).collect()),
        Value::Object(o) => {
            Value::Object(o.iter().map(|(k, v)| (k.clone(), redacted(v))).collect())
        }
        other => other.clone(),
    }
}

/// `submit-plan`.
pub fn submit_plan() -> ToolDecl {
    provided(
        RuntimeTool::SubmitPlan.name(),
        "Run one plan of steps against this session's own tools and return every step's result. The plan is an object with an id and a steps array; each step has an id and exactly one of tool, shell or capsule, with optional input, depends_on, if, on_error (fail, skip, continue) and retries (at most 20). Independent shell and capsule steps run concurrently, tool steps one at a time. Reference earlier results with $<step id>.output and $<step id>.status. The call returns when every step has finished.".into(),
        json!({"type":"object","properties":{"plan":{"type":"object"}},"required":["plan"]}),
        ToolKind::Runtime,
    )
}

/// Every runtime-provided tool the grants give: one per shell binary, `delegate-task`,
/// `share-file`, `fetch-peer-file`, `submit-plan`. (`pull-artifact` and `remove-artifact` are
/// added by the `mur` crate with the capsule's install grant in their descriptions.)
pub fn provided_tools(grants: &Grants) -> Vec<ToolDecl> {
    let mut out: Vec<ToolDecl> = grants.shell_allow.iter().map(|b| shell_tool(b)).collect();
    let order = [
        RuntimeTool::DelegateTask,
        RuntimeTool::ShareFile,
        RuntimeTool::FetchPeerFile,
        RuntimeTool::SubmitPlan,
        RuntimeTool::PullArtifact,
        RuntimeTool::RemoveArtifact,
    ];
    for tool in order.into_iter().filter(|t| t.granted(grants)) {
        match tool {
            RuntimeTool::DelegateTask => out.push(delegate_task(&grants.spawn_allow)),
            RuntimeTool::ShareFile => out.push(share_file()),
            RuntimeTool::FetchPeerFile => out.push(fetch_peer_file(&grants.peer_fetch_allow)),
            RuntimeTool::SubmitPlan => out.push(submit_plan()),
            // Their descriptions name the install grant's patterns: the `mur` crate adds them.
            RuntimeTool::PullArtifact | RuntimeTool::RemoveArtifact => {}
        }
    }
    out
}

#[cfg(test)]
mod peer_tests {
    use super::*;
    use sha2::Digest;

    #[test]
    fn each_grant_gives_exactly_its_runtime_tool() {
        let names =
            |g: &Grants| -> Vec<String> { provided_tools(g).into_iter().map(|t| t.name).collect() };
        assert!(names(&Grants::default()).is_empty());
        let all = Grants {
            shell_allow: vec!["ls".into(), "bash".into()],
            spawn_allow: vec!["acme/child".into()],
            peer_files_export: true,
            peer_fetch_allow: vec!["localhost:*".into()],
            plan_submit: true,
            ..Grants::default()
        };
        assert_eq!(
            names(&all),
            [
                "ls",
                "bash",
                "delegate-task",
                "share-file",
                "fetch-peer-file",
                "submit-plan"
            ]
        );
        let one = |g: Grants| names(&g);
        assert_eq!(
            one(Grants {
                spawn_allow: vec!["a/b".into()],
                ..Grants::default()
            }),
            ["delegate-task"]
        );
        assert_eq!(
            one(Grants {
                peer_files_export: true,
                ..Grants::default()
            }),
            ["share-file"]
        );
        assert_eq!(
            one(Grants {
                peer_fetch_allow: vec!["x".into()],
                ..Grants::default()
            }),
            ["fetch-peer-file"]
        );
        assert_eq!(
            one(Grants {
                plan_submit: true,
                ..Grants::default()
            }),
            ["submit-plan"]
        );
    }

    #[test]
    fn shell_tools_say_how_their_command_is_passed() {
        let bash = shell_tool("bash");
        assert_eq!(bash.description, "Run a shell command via bash in the capsule workdir. The `command` field is passed to bash via -c.");
        let ls = shell_tool("ls");
        assert_eq!(ls.description, "Run ls in the capsule workdir. The `command` field holds the arguments to ls (split like a shell, without expansion).");
        for t in [&bash, &ls] {
            assert_eq!(
                t.input_schema,
                json!({"type":"object","properties":{"command":{"type":"string"}},"required":["command"]})
            );
            assert_eq!(
                (t.version.as_str(), t.full_name.as_deref()),
                ("0.0.0", None)
            );
        }
    }

    #[test]
    fn handle_redaction_stops_exactly_at_the_token_bounds() {
        let id = |t: &str| {
            format!(
                "[handle:{}]",
                &hex::encode(sha2::Sha256::digest(t.as_bytes()))[..16]
            )
        };
        // At the very start and the very end of the text, and between other characters.
        assert_eq!(redact_handles_text("mh1.a.b"), id("mh1.a.b"));
        assert_eq!(
            redact_handles_text("x mh1.a.b"),
            format!("x {}", id("mh1.a.b"))
        );
        assert_eq!(
            redact_handles_text("(mh1.Ab_-9.c-D_)!"),
            format!("({})!", id("mh1.Ab_-9.c-D_"))
        );
        assert_eq!(
            redact_handles_text("mh1.a.b mh1.c.d"),
            format!("{} {}", id("mh1.a.b"), id("mh1.c.d"))
        );
        // Not a token: glued to a word before it, an empty part, a missing dot or second part.
        for kept in [
            "xmh1.a.b", "_mh1.a.b", "mh1..b", "mh1.a.", "mh1.a", "mh1.", "mh1", "mh2.a.b",
        ] {
            assert_eq!(redact_handles_text(kept), kept);
        }
        // A token is two parts: what follows the second is kept.
        assert_eq!(
            redact_handles_text("mh1.mh1.a.b"),
            format!("{}.b", id("mh1.mh1.a"))
        );
    }

    #[test]
    fn handles_are_redacted_to_their_id_and_other_text_is_kept() {
        let token = "mh1.eyJ2IjoxfQ.AbC-_9";
        let id = &hex::encode(sha2::Sha256::digest(token.as_bytes()))[..16];
        let input = json!({"peer": "localhost:1/ses_x", "handle": token, "n": 1,
            "cmd": format!("echo '{token}' mh1. xmh1.a.b")});
        let out = redact_handles(&input);
        assert_eq!(out["handle"], format!("[handle:{id}]"));
        assert_eq!(out["cmd"], format!("echo '[handle:{id}]' mh1. xmh1.a.b"));
        assert_eq!(out["peer"], "localhost:1/ses_x");
        assert_eq!(out["n"], 1);
        // Without a handle, the value is lent unchanged; with one deep inside, it is found.
        let plain = json!({"capsule": "leaf", "task": "mh1 is not a handle", "list": [1, "a"]});
        assert!(matches!(
            redact_handles(&plain),
            std::borrow::Cow::Borrowed(_)
        ));
        let deep = json!({"list": [{"x": format!("see {token}")}]});
        assert_eq!(
            redact_handles(&deep)["list"][0]["x"],
            format!("see [handle:{id}]")
        );
    }
}
