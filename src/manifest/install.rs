//! `capabilities.install`: which artifacts the capsule may pull while it runs (seed 001).
//!
//! The grant creates the `pull-artifact` and `remove-artifact` tools. `tool:` and `skill:` are
//! lists of install patterns; `from:` says whether a pull may go past the stores to the scope's
//! source. Nothing is inferred: an empty grant is refused.

use super::names::InstallPattern;
use super::reader::{Block, Ctx};

/// `capabilities.install`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstallCap {
    /// Patterns admitting tool artifacts.
    pub tool: Vec<InstallPattern>,
    /// Patterns admitting skill artifacts.
    pub skill: Vec<InstallPattern>,
    /// Where a pull may look: always the stores first, then optionally sources.
    pub from: Vec<InstallFrom>,
}

impl InstallCap {
    /// True when a pull may fetch from the scope's GitHub source.
    pub fn from_sources(&self) -> bool {
        self.from.contains(&InstallFrom::Sources)
    }
}

/// One place a pull may be answered from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstallFrom {
    /// The project store, then the global store.
    Stores,
    /// The scope's GitHub source (fetched by the runtime, written to no store).
    Sources,
}

const FROM_EXPECTED: &str = "expected [stores] or [stores, sources]";

pub(crate) fn parse_install(ctx: &mut Ctx, caps: &Block<'_>) -> Option<InstallCap> {
    if caps.has("install") && caps.get("install").is_none() {
        caps.invalid(ctx, "install", empty_grant());
        return None;
    }
    let b = caps.child(ctx, "install", &["tool", "skill", "from"])?;
    let tool = patterns(ctx, &b, "tool");
    let skill = patterns(ctx, &b, "skill");
    let from = parse_from(ctx, &b);
    let (tool, skill, from) = (tool?, skill?, from?);
    if tool.is_empty() && skill.is_empty() {
        ctx.invalid(b.area, &b.path, empty_grant());
        return None;
    }
    Some(InstallCap { tool, skill, from })
}

fn empty_grant() -> &'static str {
    "must name at least one 'skill' or 'tool' entry — a capability is never inferred; omit the \
     block to grant no install at all"
}

fn patterns(ctx: &mut Ctx, b: &Block<'_>, key: &str) -> Option<Vec<InstallPattern>> {
    let raw = b.str_list(ctx, key);
    if raw.is_none() && b.get(key).is_some() {
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for (i, entry) in raw.unwrap_or_default().iter().enumerate() {
        match InstallPattern::parse(entry) {
            Ok(p) => out.push(p),
            Err(err) => {
                ctx.invalid_name(&format!("{}[{i}]", b.field(key)), &err);
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn parse_from(ctx: &mut Ctx, b: &Block<'_>) -> Option<Vec<InstallFrom>> {
    if !b.has("from") {
        return Some(vec![InstallFrom::Stores]);
    }
    let fail = |ctx: &mut Ctx, why: String| {
        b.invalid(ctx, "from", format!("{why}; {FROM_EXPECTED}"));
        None
    };
    let raw = match b.get("from") {
        None => return fail(ctx, "is empty".into()),
        Some(_) => b.str_list(ctx, "from")?,
    };
    if raw.is_empty() {
        return fail(ctx, "is empty".into());
    }
    let mut from = Vec::new();
    for word in &raw {
        let place = match word.trim() {
            "stores" => InstallFrom::Stores,
            "sources" => InstallFrom::Sources,
            _ => return fail(ctx, format!("names \"{word}\", which is not a place")),
        };
        if from.contains(&place) {
            return fail(ctx, format!("names \"{}\" twice", word.trim()));
        }
        from.push(place);
    }
    if !from.contains(&InstallFrom::Stores) {
        return fail(
            ctx,
            "does not name stores, which every pull is answered from first".into(),
        );
    }
    from.sort_by_key(|p| *p != InstallFrom::Stores);
    Some(from)
}
