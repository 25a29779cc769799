//! Reading a manifest text into a [`Manifest`], in upstream's order of checks.
//!
//! Errors are collected rather than stopping at the first, so `mur doctor` can show every
//! independent problem; the order matches upstream's so the first one is the one it shows.

use serde_norway::{Mapping, Value};

use super::artifacts::parse_artifacts;
use super::capabilities::parse_capabilities;
use super::checks;
use super::exports::parse_exports;
use super::inference::parse_inference;
use super::lifecycle::{parse_lifecycle, parse_trace};
use super::model::Manifest;
use super::names::check_version;
use super::other::parse_other;
use super::reader::{kind, Area, Block, Ctx};
use crate::diagnostic::Diagnostic;

/// Keys a capsule manifest may have at the top level.
pub(crate) const TOP_KEYS: &[&str] = &[
    "name",
    "version",
    "artifacts",
    "capabilities",
    "inference",
    "context",
    "observability",
    "trace",
    "network",
    "lifecycle",
    "exports",
    "control",
    "deploy",
    "mur_version",
    "config",
    "runtime",
    "implementation",
    "execution",
    "requires_files",
];

/// Parses manifest text; `label` is the file name used in messages.
pub(crate) fn parse_labeled(
    text: &str,
    label: &str,
) -> Result<(Manifest, Vec<Diagnostic>), Vec<Diagnostic>> {
    let mut ctx = Ctx::new(label);
    let value = match read_yaml(text) {
        Ok(v) => v,
        Err((line, col, why)) => {
            ctx.error(
                "E-MAN-002",
                format!("YAML syntax error at line {line}, column {col}: {why}"),
            );
            return Err(ctx.errors);
        }
    };
    let empty = Mapping::new();
    let map = match &value {
        Value::Null => &empty,
        Value::Mapping(m) => m,
        other => {
            let why = format!(
                "the manifest must be a mapping of keys such as name: and version: (found {})",
                kind(other)
            );
            ctx.error(
                "E-MAN-002",
                format!("YAML syntax error at line 1, column 1: {why}"),
            );
            return Err(ctx.errors);
        }
    };
    let top = Block::new(map, "", Area::Manifest);
    if top.has("registry") {
        ctx.error("E-MAN-003", "'registry' is not a manifest key")
            .hint = Some(
            "artifacts resolve from the stores, then from the sources named in registry.sources \
             of ~/.murmur/config.yaml"
                .into(),
        );
    }
    ctx.unknown_keys(map, "", &[TOP_KEYS, &["registry"]].concat());
    if top.has("mur_version") {
        ctx.error(
            "E-MAN-003",
            "'mur_version' is not a top-level key — the mur release a deploy installs is pinned \
             as 'deploy.mur_version'",
        );
    }
    let name = required(&mut ctx, &top, "name");
    let version = required(&mut ctx, &top, "version");
    if let Some(v) = &version {
        if let Err(why) = check_version(v) {
            ctx.invalid(Area::Manifest, "version", why);
        }
    }
    let before = ctx.errors.len();
    let artifacts = parse_artifacts(&mut ctx, top.get("artifacts"));
    let artifacts_complete = ctx.errors.len() == before;
    if top.has("config") {
        ctx.invalid(
            Area::Capability,
            "config",
            "is declared per artifact: put it under the artifacts: entry it configures",
        );
    }
    let capabilities = parse_capabilities(&mut ctx, &top);
    let inference = parse_inference(&mut ctx, &top);
    checks::install_vs_transport(&mut ctx, &capabilities, inference.as_ref());
    if let Some(inf) = &inference {
        // With a broken artifacts: entry, "not declared" would only repeat that error.
        if artifacts_complete {
            checks::driver_rules(&mut ctx, &artifacts, inf);
        }
    }
    let trace = parse_trace(&mut ctx, &top);
    let spawn = capabilities.spawn.is_some();
    let other = parse_other(&mut ctx, &top, spawn);
    let lifecycle = parse_lifecycle(&mut ctx, &top);
    let exports = parse_exports(&mut ctx, &top);
    checks::tool_names(&mut ctx, &artifacts);

    let warnings = std::mem::take(&mut ctx.warnings);
    match (name, version) {
        (Some(name), Some(version)) if ctx.errors.is_empty() => Ok((
            Manifest {
                name,
                version,
                artifacts,
                capabilities,
                exports,
                inference,
                lifecycle,
                trace,
                other,
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

/// A required top-level string: E-MAN-001 when missing or blank.
fn required(ctx: &mut Ctx, top: &Block<'_>, key: &str) -> Option<String> {
    let missing = |ctx: &mut Ctx| {
        let example = if key == "version" {
            "\"0.1.0\""
        } else {
            "my-capsule"
        };
        ctx.error("E-MAN-001", format!("missing required field '{key}'"))
            .hint = Some(format!("add a top-level line such as {key}: {example}"));
        None
    };
    match top.get(key) {
        None => missing(ctx),
        Some(Value::String(s)) if s.trim().is_empty() => missing(ctx),
        Some(_) => top.str(ctx, key).map(|s| s.trim().to_string()),
    }
}

/// Parses YAML text; on failure gives 1-based line and column and the parser's message.
fn read_yaml(text: &str) -> Result<Value, (usize, usize, String)> {
    if let Some(deep) = super::depth::too_costly(text) {
        return Err(deep);
    }
    let mut value: Value = serde_norway::from_str(text).map_err(|e| locate(text, &e))?;
    value.apply_merge().map_err(|e| locate(text, &e))?;
    Ok(value)
}

/// Where a YAML error is, and its message without that position.
pub(crate) fn locate(text: &str, e: &serde_norway::Error) -> (usize, usize, String) {
    let msg = e.to_string();
    // For a duplicate key the parser points at the start of the mapping; the key's own line
    // is more useful.
    if let Some((line, col)) = duplicate_key_position(text, &msg) {
        let msg = match msg.rfind(" at line ") {
            Some(i) => msg[..i].to_string(),
            None => msg,
        };
        return (line, col, msg);
    }
    let (line, col) = e
        .location()
        .map(|l| (l.line(), l.column()))
        .unwrap_or((1, 1));
    // The parser's own text repeats the position; the original Murmur prints it so, and the
    // conformance corpus holds its first lines as they are.
    (line, col, msg)
}

/// Where a duplicate key is written the second time in the same mapping, judged by indentation.
fn duplicate_key_position(text: &str, msg: &str) -> Option<(usize, usize)> {
    const MARK: &str = "duplicate entry with key \"";
    let key = msg[msg.find(MARK)? + MARK.len()..].split('"').next()?;
    // Indentations of open mappings in which the key has been seen.
    let mut seen: Vec<usize> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let body = line.trim_start();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        let indent = line.len() - body.len();
        let (depth, body) = match body.strip_prefix("- ") {
            // A list item opens a new mapping two columns in.
            Some(rest) => {
                seen.retain(|&d| d < indent + 2);
                (indent + 2, rest)
            }
            None => {
                seen.retain(|&d| d <= indent);
                (indent, body)
            }
        };
        let is_key = [
            format!("{key}:"),
            format!("\"{key}\":"),
            format!("'{key}':"),
        ]
        .iter()
        .any(|k| body.starts_with(k.as_str()));
        if is_key {
            if seen.contains(&depth) {
                return Some((i + 1, depth + 1));
            }
            seen.push(depth);
        }
    }
    None
}
