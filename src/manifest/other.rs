//! Blocks this runtime does not act on (`context`, `observability`, `network`, `control`,
//! `deploy`): their keys are still checked so a typo is reported, and their contents are kept
//! as JSON for whoever needs them later.

use super::reader::{Block, Ctx};

/// The top-level blocks kept as written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OtherBlocks {
    /// `context:` (record store, retention).
    pub context: serde_json::Value,
    /// `observability:` (OTel endpoint, evals).
    pub observability: serde_json::Value,
    /// Top-level `network:` (internal port, authentication).
    pub network: serde_json::Value,
    /// `control:` (settings, secrets).
    pub control: serde_json::Value,
    /// `deploy:` (`mur_version`).
    pub deploy: serde_json::Value,
}

const CONTEXT_KEYS: &[&str] = &[
    "max_tokens",
    "record",
    "record_store",
    "seed_budget",
    "seed_overflow_margin",
    "retain",
];

pub(crate) fn parse_other(ctx: &mut Ctx, top: &Block<'_>, spawn_declared: bool) -> OtherBlocks {
    let mut o = OtherBlocks::default();
    if let Some(b) = top.child(ctx, "context", CONTEXT_KEYS) {
        let _ = b.positive(ctx, "max_tokens");
        let _ = b.word(ctx, "record", &["on", "off"]);
        if let Some(store) = b.nonblank(ctx, "record_store") {
            if store.contains(['/', '\\']) || store == "." || store == ".." {
                ctx.error(
                    "E-CAP-011",
                    format!("context.record_store '{store}' must be one path segment"),
                );
            }
        }
        o.context = top.json(ctx, "context").unwrap_or_default();
    }
    if let Some(_b) = top.child(ctx, "observability", &["otel_endpoint", "eval"]) {
        o.observability = top.json(ctx, "observability").unwrap_or_default();
    }
    if let Some(b) = top.child(ctx, "network", &["internal_port", "authentication"]) {
        if let Some(port) = b.u64(ctx, "internal_port") {
            if port > u64::from(u16::MAX) {
                b.invalid(
                    ctx,
                    "internal_port",
                    format!("{port} is not a port (0-65535)"),
                );
            }
        }
        if b.get("authentication").is_some() && spawn_declared {
            b.invalid(
                ctx,
                "authentication",
                "cannot be declared together with capabilities.spawn.allow",
            );
        }
        o.network = top.json(ctx, "network").unwrap_or_default();
    }
    if let Some(_b) = top.child(ctx, "control", &["settings", "secrets", "agent_settings"]) {
        o.control = top.json(ctx, "control").unwrap_or_default();
    }
    if let Some(b) = top.child(ctx, "deploy", &["mur_version"]) {
        let _ = b.str(ctx, "mur_version");
        o.deploy = top.json(ctx, "deploy").unwrap_or_default();
    }
    o
}
