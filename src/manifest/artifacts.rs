//! `artifacts[]`: the tools, skills, hooks and drivers a capsule declares.
//!
//! Every entry is named `<scope>/<name>` and pinned to one exact version; its `runtime:` role
//! decides whether the model sees it (tool, skill) or not (hook, driver). The three built-in
//! drivers are declared here like any other driver, but nothing is ever fetched for them.

use std::path::PathBuf;

use serde_norway::Value;

use super::gateway::{parse_gateway, Gateway};
use super::names::{check_version, ArtifactName};
use super::reader::{as_string, kind, to_json, Area, Block, Ctx};

/// Largest `config:` an artifact may carry, as JSON bytes (E-CAP-010 beyond it).
pub const MAX_ARTIFACT_CONFIG_BYTES: usize = 65536;

/// Keys an `artifacts[]` entry may have.
pub(crate) const ARTIFACT_KEYS: &[&str] = &[
    "name",
    "version",
    "runtime",
    "source",
    "local_source",
    "prompt_payload",
    "capabilities",
    "on_overflow",
    "config",
    "gateway",
];

/// One `artifacts[]` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ArtifactDecl {
    /// Position in `artifacts:` (messages name it).
    pub index: usize,
    /// Full name. A `source:` skill, written bare, is named `local/<bare>` here.
    pub name: ArtifactName,
    /// Exact version; `local` for a `source:` skill; `0.0.0` when omitted on `mur/driver-script`.
    pub version: String,
    /// Role: tool (default), skill, hook or driver.
    pub runtime: ArtifactRuntime,
    /// `source:` path of a local skill, relative to the manifest directory (never locked).
    pub source: Option<PathBuf>,
    /// `local_source:` (default true for skills).
    pub local_source: bool,
    /// `prompt_payload:` (default true for skills): may serve as the system prompt.
    pub prompt_payload: bool,
    /// Per-artifact `capabilities:` narrowing, kept as written (Null when absent).
    pub capabilities: serde_json::Value,
    /// `on_overflow:` for hooks.
    pub on_overflow: Option<OnOverflow>,
    /// `config:` handed to the artifact (Null when absent).
    pub config: serde_json::Value,
    /// `gateway:`: endpoint and credential.
    pub gateway: Option<Gateway>,
}

impl ArtifactDecl {
    /// The tool name the model sees (the bare part of the name).
    pub fn tool_name(&self) -> &str {
        self.name.tool_name()
    }

    /// Which built-in driver this entry is, if any.
    pub fn builtin_driver(&self) -> Option<BuiltinDriver> {
        BuiltinDriver::of(&self.name)
    }

    /// For `mur/driver-script`: the `config.script` path as written (relative to the manifest).
    pub fn script_path(&self) -> Option<PathBuf> {
        self.config
            .get("script")
            .and_then(|v| v.as_str())
            .map(PathBuf::from)
    }
}

/// An artifact's role in the capsule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ArtifactRuntime {
    /// A tool the model calls (default).
    #[default]
    Tool,
    /// A `skill.md` whose text is the result.
    Skill,
    /// A hook the runtime calls on events (policy hooks decide on tool calls).
    Hook,
    /// An inference driver.
    Driver,
}

impl ArtifactRuntime {
    /// The word used in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactRuntime::Tool => "tool",
            ArtifactRuntime::Skill => "skill",
            ArtifactRuntime::Hook => "hook",
            ArtifactRuntime::Driver => "driver",
        }
    }

    /// Parses the manifest word.
    pub fn parse(word: &str) -> Option<ArtifactRuntime> {
        match word {
            "tool" => Some(ArtifactRuntime::Tool),
            "skill" => Some(ArtifactRuntime::Skill),
            "hook" => Some(ArtifactRuntime::Hook),
            "driver" => Some(ArtifactRuntime::Driver),
            _ => None,
        }
    }

    /// Tools and skills are offered to the model; hooks and drivers never are.
    pub fn is_model_visible(self) -> bool {
        matches!(self, ArtifactRuntime::Tool | ArtifactRuntime::Skill)
    }
}

impl std::fmt::Display for ArtifactRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a hook's queue does when full (`on_overflow:`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnOverflow {
    /// Drop the event (default).
    Drop,
    /// Wait for room.
    Block,
}

/// The drivers built into `mur`: declared like upstream, never fetched or pinned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuiltinDriver {
    /// `murmur/driver-anthropic`: Anthropic Messages API.
    Anthropic,
    /// `murmur/driver-openai`: OpenAI Chat Completions / Responses, or a compatible server.
    OpenAi,
    /// `mur/driver-script`: plays model turns from `config.script`.
    Script,
}

impl BuiltinDriver {
    /// Full names of the built-in drivers.
    pub const NAMES: [&'static str; 3] = [
        "murmur/driver-anthropic",
        "murmur/driver-openai",
        "mur/driver-script",
    ];

    /// The built-in driver with this name, if any.
    pub fn of(name: &ArtifactName) -> Option<BuiltinDriver> {
        match name.as_str() {
            "murmur/driver-anthropic" => Some(BuiltinDriver::Anthropic),
            "murmur/driver-openai" => Some(BuiltinDriver::OpenAi),
            "mur/driver-script" => Some(BuiltinDriver::Script),
            _ => None,
        }
    }

    /// True when this driver talks to a model over HTTP and so needs a `gateway:`.
    pub fn needs_gateway(self) -> bool {
        !matches!(self, BuiltinDriver::Script)
    }
}

/// Parses the `artifacts:` list. Entries with errors are reported and left out.
pub(crate) fn parse_artifacts(ctx: &mut Ctx, value: Option<&Value>) -> Vec<ArtifactDecl> {
    let items = match value {
        None => return Vec::new(),
        Some(Value::Sequence(items)) => items,
        Some(other) => {
            let msg = format!(
                "invalid artifact declaration: 'artifacts' must be a list of entries (found {})",
                kind(other)
            );
            ctx.error("E-MAN-003", msg);
            return Vec::new();
        }
    };
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| parse_entry(ctx, i, item))
        .collect()
}

fn parse_entry(ctx: &mut Ctx, index: usize, item: &Value) -> Option<ArtifactDecl> {
    let Value::Mapping(map) = item else {
        let why = format!(
            "an entry must be a mapping with name and version (found {})",
            kind(item)
        );
        ctx.invalid_artifact("E-MAN-003", index, why);
        return None;
    };
    let path = format!("artifacts[{index}]");
    ctx.unknown_keys(map, &path, ARTIFACT_KEYS);
    let b = Block::new(map, &path, Area::Manifest);
    let fail = |ctx: &mut Ctx, why: String| {
        ctx.invalid_artifact("E-MAN-003", index, why);
        None
    };

    let raw_name = match b.get("name").map(as_string) {
        None => return fail(ctx, "missing required field 'name'".into()),
        Some(Err(why)) => return fail(ctx, format!("'name' {why}")),
        Some(Ok(n)) => n.trim().to_string(),
    };
    let source = match b.get("source").map(as_string) {
        None => None,
        Some(Err(why)) => return fail(ctx, format!("'source' {why}")),
        Some(Ok(s)) => Some(PathBuf::from(s.trim())),
    };
    let name = if source.is_some() {
        if let Some((_, bare)) = raw_name.split_once('/') {
            let field = format!("{path}.name");
            let msg = format!(
                "invalid artifact name in '{field}': '{raw_name}' declares 'source:', so it is \
                 named without a scope"
            );
            ctx.error("E-MAN-003", msg).hint = Some(format!("drop the scope: name it '{bare}'"));
            return None;
        }
        if let Err(why) = super::names::check_name_part(&raw_name) {
            let msg = format!(
                "invalid artifact name in '{path}.name': '{raw_name}' is not a valid artifact \
                 name: the name {why}"
            );
            ctx.error("E-MAN-003", msg);
            return None;
        }
        match ArtifactName::from_parts("local", &raw_name) {
            Ok(n) => n,
            Err(err) => return fail(ctx, err.message),
        }
    } else {
        match ArtifactName::parse(&raw_name) {
            Ok(n) => n,
            Err(err) => {
                ctx.invalid_name(&format!("{path}.name"), &err);
                return None;
            }
        }
    };

    let runtime = match b.get("runtime").map(as_string) {
        None => ArtifactRuntime::Tool,
        Some(Err(why)) => return fail(ctx, format!("'runtime' {why}")),
        Some(Ok(word)) => match ArtifactRuntime::parse(word.trim()) {
            Some(r) => r,
            None if matches!(word.trim(), "wasm" | "native") => {
                return fail(
                    ctx,
                    format!(
                        "use 'runtime: tool'; implementation is declared in the artifact's own \
                         manifest (got '{word}')"
                    ),
                )
            }
            None => {
                return fail(
                    ctx,
                    format!("unknown runtime '{word}'; expected one of: tool, driver, hook, skill"),
                )
            }
        },
    };

    let version = if source.is_some() {
        "local".to_string()
    } else {
        match b.get("version").map(as_string) {
            None if BuiltinDriver::of(&name) == Some(BuiltinDriver::Script) => "0.0.0".into(),
            None => return fail(ctx, "missing required field 'version'".into()),
            Some(Err(why)) => return fail(ctx, format!("'version' {why}")),
            Some(Ok(v)) => {
                let v = v.trim().to_string();
                if let Err(why) = check_version(&v) {
                    return fail(ctx, format!("artifact '{name}' has version {why}"));
                }
                v
            }
        }
    };

    let is_skill = runtime == ArtifactRuntime::Skill;
    let local_source = match b.bool(ctx, "local_source") {
        Some(v) => v,
        None if b.get("local_source").is_some() => return None,
        None => is_skill,
    };
    if source.is_some() && !local_source {
        let why = format!(
            "artifact '{raw_name}' declares 'source:' but does not declare 'local_source: true' \
             (runtime: {runtime})"
        );
        return fail(ctx, why);
    }
    let prompt_payload = match b.bool(ctx, "prompt_payload") {
        Some(v) => v,
        None if b.get("prompt_payload").is_some() => return None,
        None => is_skill,
    };

    let capabilities = entry_capabilities(ctx, &b, index, &name, is_skill)?;
    let on_overflow = match b.get("on_overflow").map(as_string) {
        None => None,
        Some(Err(why)) => return fail(ctx, format!("'on_overflow' {why}")),
        Some(Ok(_)) if runtime != ArtifactRuntime::Hook => {
            return fail(
                ctx,
                format!("artifact '{name}' declares on_overflow, which only a hook takes"),
            )
        }
        Some(Ok(w)) => match w.trim() {
            "drop" => Some(OnOverflow::Drop),
            "block" => Some(OnOverflow::Block),
            _ => {
                return fail(
                    ctx,
                    format!("unknown on_overflow '{w}'; expected: drop, block"),
                )
            }
        },
    };

    let config = entry_config(ctx, &b, index, &name, is_skill)?;
    let gateway = match b.get("gateway") {
        None => None,
        Some(_) if is_skill => {
            return fail(
                ctx,
                format!("artifact '{name}' is a skill; a skill takes no 'gateway:'"),
            )
        }
        Some(v) => Some(parse_gateway(ctx, index, &name, v)?),
    };

    if BuiltinDriver::of(&name) == Some(BuiltinDriver::Script) {
        let script = config.get("script");
        if script.is_none_or(|s| s.as_str().is_none_or(|s| s.trim().is_empty())) {
            let why = format!(
                "artifact '{name}' is the scripted driver and needs config.script: the path of \
                 its script file, relative to {}",
                ctx.label
            );
            return fail(ctx, why);
        }
    }

    Some(ArtifactDecl {
        index,
        name,
        version,
        runtime,
        source,
        local_source,
        prompt_payload,
        capabilities,
        on_overflow,
        config,
        gateway,
    })
}

/// An entry's `capabilities:` narrowing, kept as JSON (Null when absent).
fn entry_capabilities(
    ctx: &mut Ctx,
    b: &Block<'_>,
    index: usize,
    name: &ArtifactName,
    is_skill: bool,
) -> Option<serde_json::Value> {
    let path = b.path.clone();
    let fail = |ctx: &mut Ctx, why: String| {
        ctx.invalid_artifact("E-MAN-003", index, why);
        None
    };
    Some(match b.get("capabilities") {
        None => serde_json::Value::Null,
        Some(_) if is_skill => {
            return fail(
                ctx,
                format!("artifact '{name}' is a skill; a skill takes no 'capabilities:'"),
            )
        }
        Some(Value::Mapping(m)) => {
            if m.contains_key("install") {
                return fail(
                    ctx,
                    format!(
                        "artifact '{name}' declares capabilities.install; the grant is \
                         capsule-wide: declare it under the top-level capabilities: block"
                    ),
                );
            }
            ctx.unknown_keys(
                m,
                &format!("{path}.capabilities"),
                super::capabilities::CAPABILITY_KEYS,
            );
            match to_json(&Value::Mapping(m.clone())) {
                Ok(j) => j,
                Err(why) => return fail(ctx, format!("capabilities {why}")),
            }
        }
        Some(other) => {
            return fail(
                ctx,
                format!("'capabilities' must be a mapping (found {})", kind(other)),
            )
        }
    })
}

/// An entry's `config:` as JSON (Null when absent); refused on skills, when empty, when not a
/// mapping, and beyond [`MAX_ARTIFACT_CONFIG_BYTES`] (E-CAP-010).
fn entry_config(
    ctx: &mut Ctx,
    b: &Block<'_>,
    index: usize,
    name: &ArtifactName,
    is_skill: bool,
) -> Option<serde_json::Value> {
    let fail = |ctx: &mut Ctx, why: String| {
        ctx.invalid_artifact("E-MAN-003", index, why);
        None
    };
    Some(if b.has("config") {
        match b.map.get("config") {
            _ if is_skill => {
                return fail(
                    ctx,
                    format!("artifact '{name}' is a skill; a skill takes no 'config:'"),
                )
            }
            Some(v @ Value::Mapping(_)) => match to_json(v) {
                Ok(j) => {
                    let bytes = j.to_string().len();
                    if bytes > MAX_ARTIFACT_CONFIG_BYTES {
                        let why = format!(
                            "artifact '{name}' declares a config: of {bytes} bytes as JSON; at \
                                 most {MAX_ARTIFACT_CONFIG_BYTES} can be delivered to it"
                        );
                        ctx.invalid_artifact("E-CAP-010", index, why);
                        return None;
                    }
                    j
                }
                Err(why) => return fail(ctx, format!("config {why}")),
            },
            Some(Value::Null) | None => {
                return fail(
                    ctx,
                    format!(
                        "artifact '{name}' declares 'config:' with no value; give it a mapping or \
                             leave it out"
                    ),
                )
            }
            Some(other) => {
                return fail(
                    ctx,
                    format!(
                        "artifact '{name}' declares 'config:' as {}; it must be a mapping",
                        kind(other)
                    ),
                )
            }
        }
    } else {
        serde_json::Value::Null
    })
}
