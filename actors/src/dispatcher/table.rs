//! The routing table: where a call goes, in precedence order, and what answers it.

use std::sync::Arc;

use serde_json::Value;

use crate::inventory::Inventory;
use crate::protocol::CallKind;
use crate::spec::{Grants, SessionPaths};
use crate::tool::{Executors, RuntimeTool, ToolDecl, ToolExecutor, ToolKind, ToolOrigin};
use crate::trace::TraceLog;

/// What a call can be routed to: the held tools (the session's one [`Inventory`]), the grants
/// and the executors. Shared with a running plan, whose steps route through the same table.
pub struct ToolTable {
    pub(super) tools: Inventory,
    pub(super) grants: Grants,
    pub(super) executors: Executors,
    pub(super) paths: SessionPaths,
}

/// Where a call goes.
#[derive(Clone)]
pub enum Route {
    /// A runtime-provided tool the runtime answers itself.
    Runtime(RuntimeTool),
    /// An executor runs it.
    Exec(Arc<ToolDecl>, CallKind),
    /// Refused with this sentence.
    Refuse(String),
}

impl ToolTable {
    /// The session's folders.
    pub fn paths(&self) -> &SessionPaths {
        &self.paths
    }

    /// The session's grants.
    pub fn grants(&self) -> &Grants {
        &self.grants
    }

    /// Decide where `name` goes, in precedence order.
    pub fn route(&self, name: &str) -> Route {
        if let Some(rt) = RuntimeTool::parse(name) {
            // Held (so granted) and answered by an edge executor: run it like any tool.
            if let Some(t) = self.tools.get(name) {
                if self.executors.runtime.contains_key(name) {
                    return Route::Exec(t, CallKind::Tool);
                }
            }
            return Route::Runtime(rt);
        }
        let held = self.tools.get(name);
        if let Some(t) = &held {
            if matches!(t.kind, ToolKind::Native { .. }) {
                return Route::Exec(t.clone(), CallKind::Tool);
            }
        }
        if self.grants.shell_allow.iter().any(|b| b == name) {
            let decl = match held {
                Some(t) if matches!(t.kind, ToolKind::Shell { .. }) => t.clone(),
                _ => Arc::new(ToolDecl {
                    name: name.to_string(),
                    full_name: None,
                    version: "0.0.0".into(),
                    description: String::new(),
                    input_schema: serde_json::json!({"type":"object"}),
                    kind: ToolKind::Shell {
                        binary: name.to_string(),
                    },
                    origin: ToolOrigin::Provided,
                }),
            };
            return Route::Exec(decl, CallKind::Tool);
        }
        match held {
            Some(t) if matches!(t.kind, ToolKind::Skill { .. }) => {
                Route::Exec(t.clone(), CallKind::Skill)
            }
            Some(t) if matches!(t.kind, ToolKind::Shell { .. }) => Route::Refuse(format!(
                "binary '{name}' is not in capabilities.shell.allow"
            )),
            _ if self.tools.was_removed(name) => Route::Refuse(format!(
                "tool '{name}' was removed from this session; it can no longer be called"
            )),
            // Upstream's sentence, then the declarations that would have made it exist (seed
            // 000: a refusal names the declaration that is missing).
            _ => Route::Refuse(format!(
                "tool '{name}' is not declared in manifest allowlist: no artifacts: entry, skill or capabilities.shell.allow entry names it"
            )),
        }
    }

    /// The answer of a runtime-provided tool whose grant is absent, or `None` when granted.
    pub fn runtime_refusal(&self, tool: RuntimeTool, input: &Value) -> Option<String> {
        (!tool.granted(&self.grants)).then(|| tool.refusal(input))
    }

    /// The executor for a tool.
    pub fn executor(&self, tool: &ToolDecl) -> Arc<dyn ToolExecutor> {
        match &tool.kind {
            ToolKind::Shell { .. } => self.executors.shell.clone(),
            ToolKind::Skill { .. } => self.executors.skill.clone(),
            ToolKind::Runtime => self
                .executors
                .runtime
                .get(&tool.name)
                .cloned()
                .unwrap_or_else(|| self.executors.native.clone()),
            ToolKind::Native { .. } => self.executors.native.clone(),
        }
    }

    /// A trace sink for calls whose lines hang off `parent`.
    pub fn sink(trace: &TraceLog, parent: &str) -> crate::tool::TraceSink {
        let trace = trace.clone();
        let parent = parent.to_string();
        Arc::new(move |mut e: crate::trace::TraceEvent| {
            if e.parent_id.is_none() {
                e.parent_id = Some(parent.clone());
            }
            trace.append(e);
        })
    }
}

/// The refusal for input missing fields the tool's schema requires, if any.
pub fn missing_required(tool: &ToolDecl, input: &Value) -> Option<String> {
    let required = tool.input_schema.get("required")?.as_array()?;
    let missing: Vec<&str> = required
        .iter()
        .filter_map(Value::as_str)
        .filter(|k| input.get(*k).is_none_or(Value::is_null))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let quoted: Vec<String> = missing.iter().map(|k| format!("\"{k}\"")).collect();
    let all: Vec<&str> = required.iter().filter_map(Value::as_str).collect();
    Some(format!(
        "{}: missing required field(s) {}\n\nThis call did not run. {}'s input_schema requires: {}.",
        tool.name,
        quoted.join(", "),
        tool.name,
        all.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    //! The routing table alone: precedence, refusals and executor choice, in the kernel crate.

    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::time::Duration;

    use async_trait::async_trait;
    use serde_json::json;

    use super::*;
    use crate::tool::{ExecRequest, ExecResult};

    /// An executor that is only ever compared by identity.
    struct Marker;

    #[async_trait]
    impl ToolExecutor for Marker {
        async fn execute(&self, _request: ExecRequest) -> ExecResult {
            Err(crate::tool::ExecError::new(
                crate::tool::ExecErrorKind::Failed,
                "not run in these tests",
            ))
        }
    }

    struct Fixture {
        table: ToolTable,
        shell: Arc<dyn ToolExecutor>,
        native: Arc<dyn ToolExecutor>,
        skill: Arc<dyn ToolExecutor>,
        share: Arc<dyn ToolExecutor>,
    }

    fn decl(name: &str, kind: ToolKind) -> Arc<ToolDecl> {
        Arc::new(ToolDecl {
            name: name.into(),
            full_name: Some(format!("acme/{name}")),
            version: "1.0.0".into(),
            description: format!("{name} tool"),
            input_schema: json!({"type": "object", "required": ["path", "mode"]}),
            kind,
            origin: ToolOrigin::Provided,
        })
    }

    fn fixture(grants: Grants) -> Fixture {
        let (shell, native, skill, share): (Arc<dyn ToolExecutor>, _, _, _) = (
            Arc::new(Marker),
            Arc::new(Marker) as Arc<dyn ToolExecutor>,
            Arc::new(Marker) as Arc<dyn ToolExecutor>,
            Arc::new(Marker) as Arc<dyn ToolExecutor>,
        );
        let tools = [
            decl(
                "edit",
                ToolKind::Native {
                    entrypoint: PathBuf::from("/bin/edit"),
                    deadline: Duration::from_secs(1),
                },
            ),
            decl(
                "style",
                ToolKind::Skill {
                    path: PathBuf::from("skill.md"),
                },
            ),
            decl(
                "ls",
                ToolKind::Shell {
                    binary: "ls".into(),
                },
            ),
            decl(
                "rm",
                ToolKind::Shell {
                    binary: "rm".into(),
                },
            ),
            decl("share-file", ToolKind::Runtime),
            decl("delegate-task", ToolKind::Runtime),
        ];
        let table = ToolTable {
            tools: Inventory::new(tools.iter().map(|t| (**t).clone())),
            grants,
            executors: Executors {
                shell: shell.clone(),
                native: native.clone(),
                skill: skill.clone(),
                runtime: HashMap::from([("share-file".to_string(), share.clone())]),
            },
            paths: SessionPaths {
                workdir: PathBuf::from("/w"),
                records_dir: PathBuf::from("/r"),
            },
        };
        Fixture {
            table,
            shell,
            native,
            skill,
            share,
        }
    }

    fn shell_grants() -> Grants {
        Grants {
            shell_allow: vec!["ls".into(), "cat".into()],
            ..Grants::default()
        }
    }

    fn route(table: &ToolTable, name: &str) -> String {
        match table.route(name) {
            Route::Runtime(n) => format!("runtime {}", n.name()),
            Route::Exec(t, kind) => format!(
                "{} {} ({})",
                match (kind, &t.kind) {
                    (CallKind::Tool, ToolKind::Shell { .. }) => "shell",
                    (CallKind::Tool, _) => "tool",
                    (CallKind::Skill, _) => "skill",
                },
                t.name,
                t.description
            ),
            Route::Refuse(why) => format!("refuse: {why}"),
        }
    }

    #[test]
    fn calls_route_in_precedence_order() {
        let f = fixture(shell_grants());
        let t = &f.table;
        // A held runtime tool with an edge executor runs as a tool; without one (or not held),
        // the runtime answers it.
        assert_eq!(route(t, "share-file"), "tool share-file (share-file tool)");
        assert_eq!(route(t, "delegate-task"), "runtime delegate-task");
        assert_eq!(route(t, "submit-plan"), "runtime submit-plan");
        // Held artifacts by kind.
        assert_eq!(route(t, "edit"), "tool edit (edit tool)");
        assert_eq!(route(t, "style"), "skill style (style tool)");
        // A granted binary: its held declaration, or one the table writes.
        assert_eq!(route(t, "ls"), "shell ls (ls tool)");
        assert_eq!(route(t, "cat"), "shell cat ()");
        // A held binary the grant lacks, and a name nobody holds.
        assert_eq!(
            route(t, "rm"),
            "refuse: binary 'rm' is not in capabilities.shell.allow"
        );
        assert_eq!(
            route(t, "curl"),
            "refuse: tool 'curl' is not declared in manifest allowlist: no artifacts: entry, skill or capabilities.shell.allow entry names it"
        );
    }

    #[test]
    fn a_removed_tool_is_answered_with_the_removal_sentence() {
        let f = fixture(shell_grants());
        f.table.tools.remove("edit", None);
        assert_eq!(
            route(&f.table, "edit"),
            "refuse: tool 'edit' was removed from this session; it can no longer be called"
        );
        // A removed name that is also a granted binary runs the binary.
        f.table.tools.remove("cat", None);
        assert_eq!(route(&f.table, "cat"), "shell cat ()");
    }

    #[test]
    fn a_held_tool_no_route_can_run_is_not_declared_not_a_binary() {
        // A runtime-kind tool under a name the runtime does not answer: no executor takes it.
        let f = fixture(shell_grants());
        f.table
            .tools
            .add((*decl("mystery", ToolKind::Runtime)).clone());
        assert_eq!(
            route(&f.table, "mystery"),
            "refuse: tool 'mystery' is not declared in manifest allowlist: no artifacts: entry, skill or capabilities.shell.allow entry names it"
        );
    }

    #[test]
    fn a_granted_binary_never_shadows_a_held_native_tool_or_a_runtime_tool() {
        let mut g = shell_grants();
        g.shell_allow
            .extend(["edit".into(), "delegate-task".into()]);
        let f = fixture(g);
        assert_eq!(route(&f.table, "edit"), "tool edit (edit tool)");
        assert_eq!(route(&f.table, "delegate-task"), "runtime delegate-task");
        // But a granted binary wins over a held skill of the same name.
        let mut g = shell_grants();
        g.shell_allow.push("style".into());
        let f = fixture(g);
        assert_eq!(route(&f.table, "style"), "shell style ()");
    }

    #[test]
    fn each_runtime_tool_without_its_grant_is_refused_with_its_sentence() {
        let f = fixture(Grants::default());
        let input = json!({"artifact": "murmur/tool-edit"});
        let want = [
            ("share-file", "'share-file' needs an exports.peer_files block in murmur.yaml; this capsule declares none"),
            ("fetch-peer-file", "'fetch-peer-file' needs a capabilities.peer_fetch.allow list in murmur.yaml; this capsule declares none"),
            ("delegate-task", "'delegate-task' needs a capabilities.spawn.allow list in murmur.yaml; this capsule declares none"),
            ("submit-plan", "'submit-plan' needs a capabilities.plan.submit: true declaration in murmur.yaml; this capsule declares none"),
            ("pull-artifact", "not-granted: this capsule declares no capabilities.install, so pulling 'murmur/tool-edit' is refused"),
            ("remove-artifact", "not-granted: this capsule declares no capabilities.install, so removing 'murmur/tool-edit' is refused"),
        ];
        assert_eq!(want.len(), RuntimeTool::ALL.len(), "every runtime tool");
        for (tool, sentence) in want {
            let tool = RuntimeTool::parse(tool).unwrap();
            assert_eq!(
                f.table.runtime_refusal(tool, &input).as_deref(),
                Some(sentence)
            );
        }
        assert_eq!(RuntimeTool::parse("ls"), None);
        // With every grant, none is refused.
        let f = fixture(Grants {
            peer_files_export: true,
            peer_fetch_allow: vec!["localhost:*".into()],
            spawn_allow: vec!["acme/child".into()],
            plan_submit: true,
            install: true,
            ..Grants::default()
        });
        for tool in RuntimeTool::ALL {
            assert_eq!(f.table.runtime_refusal(tool, &input), None, "{tool:?}");
        }
    }

    #[test]
    fn each_kind_of_tool_goes_to_its_executor() {
        let f = fixture(shell_grants());
        let pick = |name: &str| f.table.executor(&f.table.tools.get(name).unwrap());
        assert!(Arc::ptr_eq(&pick("ls"), &f.shell));
        assert!(Arc::ptr_eq(&pick("edit"), &f.native));
        assert!(Arc::ptr_eq(&pick("style"), &f.skill));
        assert!(Arc::ptr_eq(&pick("share-file"), &f.share));
        // A runtime tool with no edge executor falls back to the native one.
        assert!(Arc::ptr_eq(&pick("delegate-task"), &f.native));
        assert_eq!(f.table.paths().records_dir, PathBuf::from("/r"));
        assert_eq!(f.table.grants().shell_allow, ["ls", "cat"]);
    }

    #[test]
    fn missing_required_fields_are_named_and_null_counts_as_missing() {
        let f = fixture(shell_grants());
        let edit = &f.table.tools.get("edit").unwrap();
        assert_eq!(
            missing_required(edit, &json!({"path": "a", "mode": null})).as_deref(),
            Some("edit: missing required field(s) \"mode\"\n\nThis call did not run. edit's input_schema requires: path, mode.")
        );
        assert_eq!(
            missing_required(edit, &json!({})).as_deref(),
            Some("edit: missing required field(s) \"path\", \"mode\"\n\nThis call did not run. edit's input_schema requires: path, mode.")
        );
        assert_eq!(
            missing_required(edit, &json!({"path": "a", "mode": 0})),
            None
        );
        let free = decl("free", ToolKind::Runtime);
        let mut free = (*free).clone();
        free.input_schema = json!({"type": "object"});
        assert_eq!(missing_required(&free, &json!({})), None);
    }
}
