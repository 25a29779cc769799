//! `inference:`: which driver talks to which model, and the turn loop's limits.
//!
//! Absent means a capsule with no model. `transport: http` is the only transport this runtime
//! runs; `process` is parsed so that upstream manifests load, and refused at launch. Keys that
//! upstream removed (`endpoint`, `api_key`) are refused by name with where they moved to.

use std::path::PathBuf;

use serde_norway::Value;

use super::names::ArtifactName;
use super::reader::{kind, Area, Block, Ctx};

/// `inference:`.
#[derive(Clone, Debug, PartialEq)]
pub struct Inference {
    /// `transport`: `http` (default) or `process`.
    pub transport: Transport,
    /// `model` as written (empty when omitted under `transport: process`).
    pub model: String,
    /// `driver.artifact`: the driver's full name; it is declared in `artifacts:`.
    pub driver_artifact: ArtifactName,
    /// `driver.config` (Null when absent).
    pub driver_config: serde_json::Value,
    /// `command` overriding the process driver's binary.
    pub command: Option<String>,
    /// `max_turns`; absent = no cap, never 0.
    pub max_turns: Option<u32>,
    /// `max_tokens` per model reply.
    pub max_tokens: Option<u32>,
    /// `max_session_tokens` for the whole session.
    pub max_session_tokens: Option<u64>,
    /// `system_prompt` text.
    pub system_prompt: Option<String>,
    /// `system_prompt_file`, relative to the manifest directory.
    pub system_prompt_file: Option<PathBuf>,
    /// `system_prompt_artifact`: a declared skill with `prompt_payload: true`.
    pub system_prompt_artifact: Option<ArtifactName>,
    /// `retry` with upstream defaults.
    pub retry: RetryConfig,
    /// `tool_refresh`.
    pub tool_refresh: ToolRefresh,
    /// `compaction` as written (not run by this runtime).
    pub compaction: serde_json::Value,
    /// `alternates`.
    pub alternates: Vec<Alternate>,
}

/// How the driver is reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// The runtime calls the model over HTTP through the driver (the only one `mur` runs).
    #[default]
    Http,
    /// An external harness owns the loop (parsed, refused at launch).
    Process,
}

/// `inference.retry`: capped exponential backoff for model calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryConfig {
    /// Retries after the first attempt (0–20, default 6).
    pub max_retries: u32,
    /// First backoff in ms (1–60000, default 1000).
    pub initial_delay_ms: u64,
    /// Backoff cap in ms (1–3600000, default 60000, at least `initial_delay_ms`).
    pub max_delay_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_retries: 6,
            initial_delay_ms: 1000,
            max_delay_ms: 60000,
        }
    }
}

/// When a changed tool list reaches the model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ToolRefresh {
    /// At the next compaction point (default upstream).
    #[default]
    Compaction,
    /// Before the next model call.
    Immediate,
}

/// One `inference.alternates[]` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alternate {
    /// Name, `[a-z][a-z0-9-]{0,62}`, not `primary`.
    pub name: String,
    /// Model for this alternate.
    pub model: Option<String>,
    /// Its driver, declared in `artifacts:`.
    pub driver_artifact: Option<ArtifactName>,
}

const INFERENCE_KEYS: &[&str] = &[
    "transport",
    "model",
    "driver",
    "command",
    "system_prompt",
    "system_prompt_file",
    "system_prompt_artifact",
    "compaction",
    "max_turns",
    "max_tokens",
    "max_session_tokens",
    "tool_refresh",
    "alternates",
    "retry",
    "endpoint",
    "api_key",
    "max_task_reopens",
];

const COMPACTION_KEYS: &[&str] = &[
    "threshold",
    "model",
    "system_prompt",
    "system_prompt_file",
    "dump_summaries",
    "max_tokens",
    "driver_config",
];

/// Parses `inference:`; `None` when absent or unusable (errors reported).
pub(crate) fn parse_inference(ctx: &mut Ctx, top: &Block<'_>) -> Option<Inference> {
    let b = top.child(ctx, "inference", INFERENCE_KEYS)?;
    let driver_text = b
        .get("driver")
        .and_then(|d| d.get("artifact"))
        .and_then(Value::as_str)
        .map(str::to_string);
    for (key, target) in [
        ("endpoint", "gateway.endpoint"),
        ("api_key", "gateway.api_key"),
    ] {
        if b.has(key) {
            let entry = match &driver_text {
                Some(d) => format!("the artifacts: entry '{d}'"),
                None => "the driver's artifacts: entry".to_string(),
            };
            b.invalid(
                ctx,
                key,
                format!("was removed; set {target} on {entry} instead"),
            );
        }
    }
    if b.has("max_task_reopens") {
        b.invalid(
            ctx,
            "max_task_reopens",
            "was moved; set lifecycle.max_task_reopens instead",
        );
    }
    let transport = match b.nonblank(ctx, "transport").as_deref().map(str::trim) {
        None | Some("http") => Transport::Http,
        Some("process") => Transport::Process,
        Some(other) => {
            b.invalid(
                ctx,
                "transport",
                format!("unknown value '{other}'; expected http or process"),
            );
            return None;
        }
    };
    let http = transport == Transport::Http;
    let model = b.nonblank(ctx, "model").map(|m| m.trim().to_string());
    if http && model.is_none() && b.get("model").is_none_or(Value::is_string) {
        b.invalid(ctx, "model", "missing required field");
    }
    let driver = b.child(ctx, "driver", &["artifact", "config"]);
    let driver_artifact = match &driver {
        None => {
            if b.get("driver").is_none() {
                b.invalid_with_hint(
                    ctx,
                    "driver",
                    "missing required field",
                    "add driver: {artifact: <name>} naming a runtime: driver entry of artifacts:, e.g. mur/driver-script",
                );
            }
            None
        }
        Some(d) => match d.nonblank(ctx, "artifact") {
            None => {
                if d.get("artifact").is_none() {
                    d.invalid_with_hint(
                        ctx,
                        "artifact",
                        "missing required field",
                        "name the runtime: driver entry of artifacts: this capsule uses, e.g. artifact: mur/driver-script",
                    );
                }
                None
            }
            Some(text) => match ArtifactName::parse(text.trim()) {
                Ok(n) => Some(n),
                Err(err) => {
                    ctx.invalid_name(&d.field("artifact"), &err);
                    None
                }
            },
        },
    };
    let driver_config = driver
        .as_ref()
        .and_then(|d| match d.get("config") {
            Some(Value::Mapping(_)) => d.json(ctx, "config"),
            Some(other) => {
                d.invalid(
                    ctx,
                    "config",
                    format!("must be a mapping (found {})", kind(other)),
                );
                None
            }
            None => None,
        })
        .unwrap_or_default();

    let max_turns = match b.u64(ctx, "max_turns") {
        Some(0) => {
            b.invalid(
                ctx,
                "max_turns",
                "must be greater than zero; leave max_turns out for no cap",
            );
            None
        }
        Some(n) => Some(u32::try_from(n).unwrap_or(u32::MAX)),
        None => None,
    };
    let max_tokens = b.positive_u32(ctx, "max_tokens");
    let max_session_tokens = b.positive(ctx, "max_session_tokens");

    let system_prompt = b.str(ctx, "system_prompt");
    let system_prompt_file = b.nonblank(ctx, "system_prompt_file").map(PathBuf::from);
    let system_prompt_artifact = b.nonblank(ctx, "system_prompt_artifact").and_then(|t| {
        ArtifactName::parse(t.trim())
            .map_err(|err| ctx.invalid_name(&b.field("system_prompt_artifact"), &err))
            .ok()
    });
    let prompts = [
        "system_prompt",
        "system_prompt_file",
        "system_prompt_artifact",
    ];
    let set: Vec<&str> = prompts
        .iter()
        .copied()
        .filter(|k| b.get(k).is_some())
        .collect();
    if set.len() > 1 {
        b.invalid(
            ctx,
            set[1],
            format!(
                "cannot be set together with {}; declare at most one of system_prompt, \
                 system_prompt_file and system_prompt_artifact",
                set[0]
            ),
        );
    }

    let retry = parse_retry(ctx, &b);
    let tool_refresh = match b.word(ctx, "tool_refresh", &["compaction", "immediate"]) {
        Some(w) if w == "immediate" => ToolRefresh::Immediate,
        _ => ToolRefresh::Compaction,
    };
    let compaction = b
        .child(ctx, "compaction", COMPACTION_KEYS)
        .and_then(|c| {
            if !http {
                for key in ["max_tokens", "driver_config"] {
                    if c.has(key) {
                        c.invalid(ctx, key, "is not valid with transport: process");
                    }
                }
            }
            b.json(ctx, "compaction")
        })
        .unwrap_or_default();
    let alternates = parse_alternates(ctx, &b);
    if !http {
        for key in ["max_tokens", "tool_refresh", "alternates", "retry"] {
            if b.has(key) {
                b.invalid(ctx, key, "is not valid with transport: process");
            }
        }
    }
    Some(Inference {
        transport,
        model: model.unwrap_or_default(),
        driver_artifact: driver_artifact?,
        driver_config,
        command: b.nonblank(ctx, "command"),
        max_turns,
        max_tokens,
        max_session_tokens,
        system_prompt,
        system_prompt_file,
        system_prompt_artifact,
        retry,
        tool_refresh,
        compaction,
        alternates,
    })
}

fn parse_retry(ctx: &mut Ctx, b: &Block<'_>) -> RetryConfig {
    let mut retry = RetryConfig::default();
    let known = ["max_retries", "initial_delay_ms", "max_delay_ms"];
    let Some(r) = b.child(ctx, "retry", &known) else {
        return retry;
    };
    let ranged = |ctx: &mut Ctx, key: &str, lo: u64, hi: u64| -> Option<u64> {
        let n = r.u64(ctx, key)?;
        if n < lo || n > hi {
            r.invalid(ctx, key, format!("must be from {lo} to {hi} (found {n})"));
            return None;
        }
        Some(n)
    };
    if let Some(n) = ranged(ctx, "max_retries", 0, 20) {
        retry.max_retries = n as u32;
    }
    if let Some(n) = ranged(ctx, "initial_delay_ms", 1, 60_000) {
        retry.initial_delay_ms = n;
    }
    if let Some(n) = ranged(ctx, "max_delay_ms", 1, 3_600_000) {
        retry.max_delay_ms = n;
    }
    if retry.max_delay_ms < retry.initial_delay_ms {
        r.invalid(
            ctx,
            "max_delay_ms",
            format!(
                "must be at least initial_delay_ms ({}); found {}",
                retry.initial_delay_ms, retry.max_delay_ms
            ),
        );
    }
    retry
}

fn parse_alternates(ctx: &mut Ctx, b: &Block<'_>) -> Vec<Alternate> {
    let Some(v) = b.get("alternates") else {
        return Vec::new();
    };
    let Value::Sequence(items) = v else {
        b.invalid(
            ctx,
            "alternates",
            format!("must be a list (found {})", kind(v)),
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("inference.alternates[{i}]");
        let Value::Mapping(map) = item else {
            ctx.invalid(
                Area::Inference,
                &path,
                "must be a mapping with name, model and driver",
            );
            continue;
        };
        ctx.unknown_keys(map, &path, &["name", "model", "driver"]);
        let a = Block::new(map, &path, Area::Inference);
        let name = a.nonblank(ctx, "name").unwrap_or_default();
        let valid = name.len() <= 63
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !valid || name == "primary" {
            a.invalid(
                ctx,
                "name",
                format!(
                    "'{name}' is not a usable alternate name: [a-z][a-z0-9-]{{0,62}}, not \
                     'primary'"
                ),
            );
            continue;
        }
        let driver_artifact = a.child(ctx, "driver", &["artifact"]).and_then(|d| {
            let text = d.nonblank(ctx, "artifact")?;
            ArtifactName::parse(text.trim())
                .map_err(|err| ctx.invalid_name(&d.field("artifact"), &err))
                .ok()
        });
        out.push(Alternate {
            name,
            model: a.nonblank(ctx, "model"),
            driver_artifact,
        });
    }
    out
}
