//! An artifact's own `murmur.yaml`: the file packed in a `.mur.zip` and staged as
//! `tools/<name>/murmur.yaml`.
//!
//! It says what the artifact is (role, implementation, description, input schema) and, for a
//! hook, which events it is bound to and what it may decide (`binding`, `execution_mode`,
//! `commit_policy`): upstream keeps these here, not on the capsule's `artifacts:` entry, so a
//! policy hook is recognised by reading this file. Runtime-provided tools get a synthetic one
//! (`version: 0.0.0`, `runtime: tool`, `implementation: native`) written with
//! [`ArtifactManifest::runtime_tool`] and [`ArtifactManifest::to_yaml`].

use serde::Serialize;
use serde_norway::{Mapping, Value};

use super::artifacts::ArtifactRuntime;
use super::names::check_name_part;
use super::reader::{as_string, kind, to_json, Area, Block, Ctx};
use crate::diagnostic::Diagnostic;

/// An artifact's own manifest.
#[derive(Clone, Debug, PartialEq)]
pub struct ArtifactManifest {
    /// Bare name (the scope comes from where it was installed from).
    pub name: String,
    /// Version.
    pub version: String,
    /// Role; legacy `wasm`/`native` are read as `tool`.
    pub runtime: ArtifactRuntime,
    /// How a tool runs.
    pub implementation: Implementation,
    /// The tool description the model reads.
    pub description: Option<String>,
    /// JSON Schema of the tool input (default: an object with no properties).
    pub input_schema: serde_json::Value,
    /// Files packed beside the manifest.
    pub requires_files: Vec<String>,
    /// Hook events this hook is bound to; empty = every event.
    pub binding: Vec<HookEvent>,
    /// Whether the runtime waits for the hook.
    pub execution_mode: ExecutionMode,
    /// What the hook may decide or change.
    pub commit_policy: CommitPolicy,
}

/// How a tool artifact runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Implementation {
    /// A WebAssembly component (upstream default; not run by `mur`).
    #[default]
    Wasm,
    /// A native executable at `bin/<name>`.
    Native,
}

/// An event a hook can be bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookEvent {
    /// `on-stage`.
    Stage,
    /// `on-session-start`.
    SessionStart,
    /// `on-task-start`.
    TaskStart,
    /// `on-inference`.
    Inference,
    /// `on-tool-call`: every tool call, runtime-provided ones included.
    ToolCall,
    /// `on-shell`: calls of shell-allowlist binaries.
    Shell,
    /// `on-compaction`.
    Compaction,
    /// `on-task-end`.
    TaskEnd,
    /// `on-session-end`.
    SessionEnd,
}

impl HookEvent {
    const ALL: [(&'static str, HookEvent); 9] = [
        ("on-stage", HookEvent::Stage),
        ("on-session-start", HookEvent::SessionStart),
        ("on-task-start", HookEvent::TaskStart),
        ("on-inference", HookEvent::Inference),
        ("on-tool-call", HookEvent::ToolCall),
        ("on-shell", HookEvent::Shell),
        ("on-compaction", HookEvent::Compaction),
        ("on-task-end", HookEvent::TaskEnd),
        ("on-session-end", HookEvent::SessionEnd),
    ];

    /// The manifest word, e.g. `on-tool-call`.
    pub fn as_str(self) -> &'static str {
        HookEvent::ALL
            .iter()
            .find(|(_, e)| *e == self)
            .map(|(w, _)| *w)
            .unwrap_or("on-tool-call")
    }

    /// Parses the manifest word.
    pub fn parse(word: &str) -> Option<HookEvent> {
        HookEvent::ALL
            .iter()
            .find(|(w, _)| *w == word)
            .map(|(_, e)| *e)
    }
}

/// Whether the runtime waits for a hook's answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExecutionMode {
    /// The runtime waits (required for a policy hook to decide). Default here.
    #[default]
    Blocking,
    /// Fire and forget: an observation only.
    Async,
}

/// What a hook may change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CommitPolicy {
    /// Observes only (default).
    #[default]
    None,
    /// May refuse a call: a policy hook.
    Deny,
    /// May write tool manifests.
    WriteManifests,
    /// May replace the conversation context.
    ReplaceContext,
    /// May reopen a finished task.
    ReopenTask,
    /// May seed the context at task start.
    SeedContext,
}

impl CommitPolicy {
    /// Every policy, in the order the manifest words are listed.
    pub const ALL: [CommitPolicy; 6] = [
        CommitPolicy::None,
        CommitPolicy::Deny,
        CommitPolicy::WriteManifests,
        CommitPolicy::ReplaceContext,
        CommitPolicy::ReopenTask,
        CommitPolicy::SeedContext,
    ];

    /// The manifest word, e.g. `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            CommitPolicy::None => "none",
            CommitPolicy::Deny => "deny",
            CommitPolicy::WriteManifests => "write-manifests",
            CommitPolicy::ReplaceContext => "replace-context",
            CommitPolicy::ReopenTask => "reopen-task",
            CommitPolicy::SeedContext => "seed-context",
        }
    }
}

impl ArtifactManifest {
    /// Why this runtime cannot run the artifact as its manifest declares it, if it cannot.
    ///
    /// `mur` runs native tools, skills, and native policy hooks (blocking, `commit_policy:
    /// deny`, bound to `on-tool-call` or `on-shell`); drivers are built in. Anything else
    /// declared would be skipped, and a guard an operator declared must never be skipped
    /// quietly: the launch refuses it instead (and `mur doctor` says so).
    pub fn unsupported(&self) -> Option<String> {
        const HOOKS: &str = "mur runs native hooks that are blocking, have commit_policy: deny, and are bound to on-tool-call or on-shell";
        match self.runtime {
            ArtifactRuntime::Skill => None,
            ArtifactRuntime::Driver => Some(
                "it packs a driver; mur runs only its built-in drivers (murmur/driver-anthropic, murmur/driver-openai, mur/driver-script)".into(),
            ),
            ArtifactRuntime::Tool | ArtifactRuntime::Hook
                if self.implementation == Implementation::Wasm =>
            {
                Some(format!(
                    "it is a WebAssembly {} (implementation: wasm); mur runs native tools and hooks (implementation: native)",
                    self.runtime
                ))
            }
            ArtifactRuntime::Tool => None,
            ArtifactRuntime::Hook => {
                if self.commit_policy != CommitPolicy::Deny {
                    let bound = match self.binding.as_slice() {
                        [] => String::new(),
                        b => format!(
                            " (binding {})",
                            b.iter().map(|e| e.as_str()).collect::<Vec<_>>().join(", ")
                        ),
                    };
                    return Some(format!(
                        "its commit_policy '{}'{bound} is not supported; {HOOKS}",
                        self.commit_policy.as_str()
                    ));
                }
                if self.execution_mode == ExecutionMode::Async {
                    return Some(format!("execution_mode: async is not supported; {HOOKS}"));
                }
                if self.binding.is_empty() {
                    return Some(format!(
                        "it names no binding, and a deny hook must name the events it decides on; {HOOKS}"
                    ));
                }
                let other: Vec<&str> = self
                    .binding
                    .iter()
                    .filter(|e| !matches!(e, HookEvent::ToolCall | HookEvent::Shell))
                    .map(|e| e.as_str())
                    .collect();
                (!other.is_empty()).then(|| {
                    format!(
                        "its binding {} is not supported with commit_policy: deny; {HOOKS}",
                        other.join(", ")
                    )
                })
            }
        }
    }

    /// The synthetic manifest of a runtime-provided tool (shell binary, `delegate-task`, …).
    pub fn runtime_tool(name: &str, description: &str, input_schema: serde_json::Value) -> Self {
        ArtifactManifest {
            name: name.to_string(),
            version: "0.0.0".to_string(),
            runtime: ArtifactRuntime::Tool,
            implementation: Implementation::Native,
            description: Some(description.to_string()),
            input_schema,
            requires_files: Vec::new(),
            binding: Vec::new(),
            execution_mode: ExecutionMode::Blocking,
            commit_policy: CommitPolicy::None,
        }
    }

    /// The manifest as YAML, in upstream's shape (`input_schema` as a string holding JSON).
    pub fn to_yaml(&self) -> String {
        #[derive(Serialize)]
        struct Out<'a> {
            name: &'a str,
            version: &'a str,
            runtime: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            implementation: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            description: Option<&'a str>,
            input_schema: String,
            #[serde(skip_serializing_if = "Vec::is_empty")]
            binding: Vec<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            execution_mode: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            commit_policy: Option<&'a str>,
        }
        let hook = self.runtime == ArtifactRuntime::Hook;
        let out = Out {
            name: &self.name,
            version: &self.version,
            runtime: self.runtime.as_str(),
            implementation: (self.runtime == ArtifactRuntime::Tool).then_some(
                match self.implementation {
                    Implementation::Wasm => "wasm",
                    Implementation::Native => "native",
                },
            ),
            description: self.description.as_deref(),
            input_schema: self.input_schema.to_string(),
            binding: self.binding.iter().map(|e| e.as_str()).collect(),
            execution_mode: hook.then_some(match self.execution_mode {
                ExecutionMode::Blocking => "blocking",
                ExecutionMode::Async => "async",
            }),
            commit_policy: hook.then_some(self.commit_policy.as_str()),
        };
        serde_norway::to_string(&out).unwrap_or_default()
    }
}

const ARTIFACT_MANIFEST_KEYS: &[&str] = &[
    "name",
    "version",
    "runtime",
    "implementation",
    "execution",
    "requires_files",
    "description",
    "input_schema",
    "input",
    "output_schema",
    "tags",
    "binding",
    "execution_mode",
    "commit_policy",
    "models",
    "upstream_auth",
    "capabilities",
];

/// Parses an artifact's own manifest; `label` names the file in messages (e.g.
/// `tools/tool-edit/murmur.yaml`). `Ok` carries warnings (unknown keys).
pub fn parse_artifact_manifest(
    text: &str,
    label: &str,
) -> Result<(ArtifactManifest, Vec<Diagnostic>), Vec<Diagnostic>> {
    let mut ctx = Ctx::new(label);
    if let Some((line, col, why)) = super::depth::too_costly(text) {
        ctx.error(
            "E-MAN-002",
            format!("YAML syntax error at line {line}, column {col}: {why}"),
        );
        return Err(ctx.errors);
    }
    let value: Value = match serde_norway::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            let (line, col, why) = super::parse::locate(text, &e);
            ctx.error(
                "E-MAN-002",
                format!("YAML syntax error at line {line}, column {col}: {why}"),
            );
            return Err(ctx.errors);
        }
    };
    let empty = Mapping::new();
    let map = match &value {
        Value::Mapping(m) => m,
        Value::Null => &empty,
        other => {
            ctx.error(
                "E-MAN-002",
                format!(
                    "the manifest must be a mapping of keys (found {})",
                    kind(other)
                ),
            );
            return Err(ctx.errors);
        }
    };
    ctx.unknown_keys(map, "", ARTIFACT_MANIFEST_KEYS);
    let b = Block::new(map, "", Area::Manifest);
    let required = |ctx: &mut Ctx, key: &str| -> Option<String> {
        match b.get(key).map(as_string) {
            None => {
                ctx.error("E-MAN-001", format!("missing required field '{key}'"));
                None
            }
            Some(Err(why)) => {
                ctx.invalid(Area::Manifest, key, why);
                None
            }
            Some(Ok(s)) if s.trim().is_empty() => {
                ctx.error("E-MAN-001", format!("missing required field '{key}'"));
                None
            }
            Some(Ok(s)) => Some(s.trim().to_string()),
        }
    };
    let name = required(&mut ctx, "name");
    let version = required(&mut ctx, "version");
    let runtime_word = required(&mut ctx, "runtime");
    if let Some(n) = &name {
        if let Err(why) = check_name_part(n) {
            ctx.invalid(Area::Manifest, "name", format!("'{n}' {why}"));
        }
    }
    let runtime = runtime_word.as_deref().and_then(|w| match w {
        "wasm" | "native" => Some(ArtifactRuntime::Tool),
        other => ArtifactRuntime::parse(other).or_else(|| {
            ctx.invalid(
                Area::Manifest,
                "runtime",
                format!("unknown runtime '{other}'; expected one of: tool, skill, hook, driver"),
            );
            None
        }),
    });
    let implementation = match b.word(&mut ctx, "implementation", &["wasm", "native"]) {
        Some(w) if w == "native" => Implementation::Native,
        Some(_) => Implementation::Wasm,
        None if runtime_word.as_deref() == Some("native") => Implementation::Native,
        None => Implementation::Wasm,
    };
    let description = b.str(&mut ctx, "description");
    let schema_key = if b.has("input_schema") {
        "input_schema"
    } else {
        "input"
    };
    let input_schema = match b.get(schema_key) {
        None => serde_json::json!({"type": "object", "properties": {}}),
        Some(Value::String(s)) => match serde_json::from_str(s) {
            Ok(j) => j,
            Err(e) => {
                b.invalid(&mut ctx, schema_key, format!("is not JSON: {e}"));
                serde_json::Value::Null
            }
        },
        Some(v @ Value::Mapping(_)) => to_json(v).unwrap_or_default(),
        Some(other) => {
            b.invalid(
                &mut ctx,
                schema_key,
                format!("must be a JSON Schema (found {})", kind(other)),
            );
            serde_json::Value::Null
        }
    };
    let requires_files = b.str_list(&mut ctx, "requires_files").unwrap_or_default();
    let mut binding = Vec::new();
    let words = match b.get("binding") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(_) => b.str_list(&mut ctx, "binding").unwrap_or_default(),
        None => Vec::new(),
    };
    for w in words {
        match HookEvent::parse(w.trim()) {
            Some(e) => binding.push(e),
            None => {
                let all: Vec<&str> = HookEvent::ALL.iter().map(|(w, _)| *w).collect();
                b.invalid(
                    &mut ctx,
                    "binding",
                    format!("unknown event '{w}'; expected one of: {}", all.join(", ")),
                );
            }
        }
    }
    let execution_mode = match b.word(&mut ctx, "execution_mode", &["blocking", "async"]) {
        Some(w) if w == "async" => ExecutionMode::Async,
        _ => ExecutionMode::Blocking,
    };
    let commit_policy = b
        .word(
            &mut ctx,
            "commit_policy",
            &CommitPolicy::ALL.map(CommitPolicy::as_str),
        )
        .and_then(|w| CommitPolicy::ALL.into_iter().find(|p| p.as_str() == w))
        .unwrap_or_default();
    let is_hook = runtime == Some(ArtifactRuntime::Hook);
    for key in ["binding", "execution_mode", "commit_policy"] {
        if !is_hook && runtime.is_some() && b.get(key).is_some() {
            b.invalid(
                &mut ctx,
                key,
                "is recognized only on 'runtime: hook' artifacts",
            );
        }
    }
    let warnings = std::mem::take(&mut ctx.warnings);
    match (name, version, runtime) {
        (Some(name), Some(version), Some(runtime)) if ctx.errors.is_empty() => Ok((
            ArtifactManifest {
                name,
                version,
                runtime,
                implementation,
                description,
                input_schema,
                requires_files,
                binding,
                execution_mode,
                commit_policy,
            },
            warnings,
        )),
        _ => {
            let mut all = ctx.errors;
            all.extend(warnings);
            Err(all)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_native_tools_skills_and_deny_hooks_on_calls_are_supported() {
        let hook = "name: no-rm\nversion: 1.0.0\nruntime: hook\nimplementation: native\n\
                    binding: [on-tool-call, on-shell]\nexecution_mode: blocking\ncommit_policy: deny\n";
        let why = |text: &str| {
            parse_artifact_manifest(text, "murmur.yaml")
                .unwrap()
                .0
                .unsupported()
        };
        assert_eq!(why(hook), None);
        assert_eq!(
            why("name: t\nversion: '1'\nruntime: tool\nimplementation: native\n"),
            None
        );
        assert_eq!(why("name: s\nversion: '1'\nruntime: skill\n"), None);
        let hooks = "mur runs native hooks that are blocking, have commit_policy: deny, and are bound to on-tool-call or on-shell";
        // The real murmur-hook-regression-verifier: a WebAssembly hook that reopens the task.
        assert_eq!(
            why("name: hook-regression-verifier\nversion: 0.1.0\nruntime: hook\nbinding: [on-task-end]\ncommit_policy: reopen-task\n"),
            Some("it is a WebAssembly hook (implementation: wasm); mur runs native tools and hooks (implementation: native)".into())
        );
        assert_eq!(
            why(&hook
                .replace("commit_policy: deny", "commit_policy: reopen-task")
                .replace("[on-tool-call, on-shell]", "[on-task-end]")),
            Some(format!(
                "its commit_policy 'reopen-task' (binding on-task-end) is not supported; {hooks}"
            ))
        );
        assert_eq!(
            why(&hook.replace("commit_policy: deny", "commit_policy: none")),
            Some(format!("its commit_policy 'none' (binding on-tool-call, on-shell) is not supported; {hooks}"))
        );
        assert_eq!(
            why(&hook.replace("binding: [on-tool-call, on-shell]\n", "")),
            Some(format!(
                "it names no binding, and a deny hook must name the events it decides on; {hooks}"
            ))
        );
        assert_eq!(
            why(&hook.replace("[on-tool-call, on-shell]", "[on-tool-call, on-inference]")),
            Some(format!(
                "its binding on-inference is not supported with commit_policy: deny; {hooks}"
            ))
        );
        assert_eq!(
            why(&hook.replace("execution_mode: blocking", "execution_mode: async")),
            Some(format!("execution_mode: async is not supported; {hooks}"))
        );
        assert_eq!(
            why("name: t\nversion: '1'\nruntime: tool\n"),
            Some("it is a WebAssembly tool (implementation: wasm); mur runs native tools and hooks (implementation: native)".into())
        );
        assert!(why("name: d\nversion: '1'\nruntime: driver\n")
            .unwrap()
            .starts_with("it packs a driver; "));
    }

    #[test]
    fn input_schema_is_a_string_holding_json_or_a_mapping() {
        let s = "name: tool-edit\nversion: 0.2.0\nruntime: tool\ninput_schema: '{\"type\":\"object\",\"required\":[\"path\"]}'\n";
        let (m, _) = parse_artifact_manifest(s, "murmur.yaml").unwrap();
        assert_eq!(m.input_schema["required"][0], "path");
        assert_eq!(m.implementation, Implementation::Wasm);
        let s = "name: t\nversion: '1'\nruntime: native\ninput_schema:\n  type: object\n";
        let (m, _) = parse_artifact_manifest(s, "murmur.yaml").unwrap();
        assert_eq!(m.runtime, ArtifactRuntime::Tool);
        assert_eq!(m.implementation, Implementation::Native);
        assert_eq!(m.input_schema, serde_json::json!({"type": "object"}));
        let s = "name: t\nversion: '1'\nruntime: skill\n";
        let (m, _) = parse_artifact_manifest(s, "murmur.yaml").unwrap();
        assert_eq!(
            m.input_schema,
            serde_json::json!({"type": "object", "properties": {}})
        );
    }

    #[test]
    fn bad_artifact_manifests_are_refused_with_the_field() {
        let errs =
            parse_artifact_manifest("name: T\nversion: '1'\nruntime: tool\n", "x/murmur.yaml")
                .unwrap_err();
        assert!(errs[0]
            .message
            .starts_with("x/murmur.yaml: invalid manifest config for 'name'"));
        let errs = parse_artifact_manifest(
            "name: h\nversion: '1'\nruntime: hook\nbinding: [on-everything]\n",
            "m",
        )
        .unwrap_err();
        assert!(errs[0].message.contains("unknown event 'on-everything'"));
        let errs = parse_artifact_manifest(
            "name: t\nversion: '1'\nruntime: tool\ncommit_policy: deny\n",
            "m",
        )
        .unwrap_err();
        assert!(errs[0]
            .message
            .contains("'commit_policy': is recognized only on 'runtime: hook'"));
        let errs = parse_artifact_manifest("version: '1'\n", "m").unwrap_err();
        assert_eq!(errs[0].code, "E-MAN-001");
    }

    #[test]
    fn runtime_tool_manifests_round_trip() {
        let schema = serde_json::json!({"type":"object","properties":{"command":{"type":"string"}},"required":["command"]});
        let m = ArtifactManifest::runtime_tool("git", "Runs git.", schema.clone());
        let yaml = m.to_yaml();
        assert!(yaml.contains("version: 0.0.0"), "{yaml}");
        assert!(yaml.contains("implementation: native"), "{yaml}");
        let (back, w) = parse_artifact_manifest(&yaml, "murmur.yaml").unwrap();
        assert!(w.is_empty());
        assert_eq!(back, m);
        assert_eq!(back.input_schema, schema);
    }
}
