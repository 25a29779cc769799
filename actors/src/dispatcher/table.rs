//! The routing table: where a call goes, in precedence order, and what answers it.

use super::*;

/// What a call can be routed to: the held tools, the grants and the executors. Shared with a
/// running plan, whose steps route through the same table.
pub struct ToolTable {
    pub(super) tools: HashMap<String, Arc<ToolDecl>>,
    pub(super) grants: Grants,
    pub(super) executors: Executors,
    pub(super) paths: SessionPaths,
}

/// Where a call goes.
#[derive(Clone)]
pub enum Route {
    /// A runtime-provided tool.
    Runtime(&'static str),
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
        if let Some(rt) = RUNTIME_TOOLS.iter().find(|t| **t == name) {
            // Held (so granted) and answered by an edge executor: run it like any tool.
            if let Some(t) = self.tools.get(name) {
                if self.executors.runtime.contains_key(name) {
                    return Route::Exec(t.clone(), CallKind::Tool);
                }
            }
            return Route::Runtime(rt);
        }
        let held = self.tools.get(name);
        if let Some(t) = held {
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
            return Route::Exec(decl, CallKind::Shell);
        }
        match held {
            Some(t) if matches!(t.kind, ToolKind::Skill { .. }) => {
                Route::Exec(t.clone(), CallKind::Skill)
            }
            Some(t) if matches!(t.kind, ToolKind::Shell { .. }) => Route::Refuse(format!(
                "binary '{name}' is not in capabilities.shell.allow"
            )),
            _ => Route::Refuse(format!(
                "tool '{name}' is not declared in manifest allowlist"
            )),
        }
    }

    /// The answer of a runtime-provided tool whose grant is absent, or `None` when granted.
    pub fn runtime_refusal(&self, tool: &str, input: &Value) -> Option<String> {
        let artifact = input
            .get("artifact")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let missing = match tool {
            "share-file" if !self.grants.peer_files_export => {
                "'share-file' needs an exports.peer_files block in murmur.yaml; this capsule declares none".to_string()
            }
            "fetch-peer-file" if self.grants.peer_fetch_allow.is_empty() => {
                "'fetch-peer-file' needs a capabilities.peer_fetch.allow list in murmur.yaml; this capsule declares none".to_string()
            }
            "delegate-task" if self.grants.spawn_allow.is_empty() => {
                "'delegate-task' needs a capabilities.spawn.allow list in murmur.yaml; this capsule declares none".to_string()
            }
            "submit-plan" if !self.grants.plan_submit => {
                "'submit-plan' needs a capabilities.plan.submit: true declaration in murmur.yaml; this capsule declares none".to_string()
            }
            "pull-artifact" if !self.grants.install => format!(
                "not-granted: this capsule declares no capabilities.install, so pulling '{artifact}' is refused"
            ),
            "remove-artifact" if !self.grants.install => format!(
                "not-granted: this capsule declares no capabilities.install, so removing '{artifact}' is refused"
            ),
            _ => return None,
        };
        Some(missing)
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
    pub fn sink(trace: &TraceWriter, parent: &str) -> crate::tool::TraceSink {
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
