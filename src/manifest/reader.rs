//! Walking the parsed YAML tree and reporting what is wrong with it.
//!
//! The manifest is read from a generic YAML value rather than derived structs so that every
//! problem can be reported in upstream's words, naming the dotted field, and so that unknown
//! keys become warnings (W-SEC-019) instead of failures. `Block` is one mapping with its dotted
//! path; its getters report a bad value into `Ctx` and return `None`, so parsing goes on and a
//! user sees every independent problem at once.

use serde_norway::{Mapping, Value};

use crate::diagnostic::Diagnostic;

use super::names::NameError;

/// Where unknown-key warnings point the reader.
const W_SEC_019_DOCS: &str = "https://docs.murmur.nexus/reference/diagnostics/#w-sec-019";

/// The area word in `invalid <area> config for '<field>'`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Area {
    Manifest,
    Capability,
    Inference,
    Exports,
    Lifecycle,
    Trace,
    Network,
    Control,
    Context,
    Observability,
    Deploy,
}

impl Area {
    /// The area of a top-level block, by its key.
    pub fn of_block(key: &str) -> Option<Area> {
        Some(match key {
            "capabilities" => Area::Capability,
            "inference" => Area::Inference,
            "exports" => Area::Exports,
            "lifecycle" => Area::Lifecycle,
            "trace" => Area::Trace,
            "network" => Area::Network,
            "control" => Area::Control,
            "context" => Area::Context,
            "observability" => Area::Observability,
            "deploy" => Area::Deploy,
            _ => return None,
        })
    }

    fn word(self) -> &'static str {
        match self {
            Area::Manifest => "manifest",
            Area::Capability => "capability",
            Area::Inference => "inference",
            Area::Exports => "exports",
            Area::Lifecycle => "lifecycle",
            Area::Trace => "trace",
            Area::Network => "network",
            Area::Control => "control",
            Area::Context => "context",
            Area::Observability => "observability",
            Area::Deploy => "deploy",
        }
    }
}

/// Collects diagnostics while a manifest is read.
pub(crate) struct Ctx {
    /// The file name used as message prefix (`murmur.yaml`).
    pub label: String,
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
}

impl Ctx {
    pub fn new(label: &str) -> Ctx {
        Ctx {
            label: label.to_string(),
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Pushes an error `<label>: <message>` and returns it for a hint.
    pub fn error(&mut self, code: &str, message: impl AsRef<str>) -> &mut Diagnostic {
        let d = Diagnostic::error(code, format!("{}: {}", self.label, message.as_ref()));
        self.errors.push(d);
        self.errors.last_mut().expect("just pushed")
    }

    /// E-MAN-003 `invalid <area> config for '<field>': <why>`.
    pub fn invalid(&mut self, area: Area, field: &str, why: impl AsRef<str>) -> &mut Diagnostic {
        let msg = format!(
            "invalid {} config for '{field}': {}",
            area.word(),
            why.as_ref()
        );
        self.error("E-MAN-003", msg)
    }

    /// E-MAN-003 `invalid artifact declaration at index <i>: <why>` (or another code).
    pub fn invalid_artifact(&mut self, code: &str, index: usize, why: impl AsRef<str>) {
        let msg = format!(
            "invalid artifact declaration at index {index}: {}",
            why.as_ref()
        );
        self.error(code, msg);
    }

    /// E-MAN-003 `invalid artifact name in '<field>': <why>` with the name error's hint.
    pub fn invalid_name(&mut self, field: &str, err: &NameError) {
        let msg = format!("invalid artifact name in '{field}': {}", err.message);
        let d = self.error("E-MAN-003", msg);
        if let Some(hint) = &err.hint {
            d.hint = Some(hint.clone());
        }
    }

    /// Reports every key of `map` not in `known` as W-SEC-019 with a did-you-mean.
    pub fn unknown_keys(&mut self, map: &Mapping, path: &str, known: &[&str]) {
        for key in map.keys() {
            let key = key_text(key);
            if known.contains(&key.as_str()) {
                continue;
            }
            let place = if path.is_empty() {
                "at the top level".to_string()
            } else {
                format!("in {path}")
            };
            let msg = match suggest(&key, known) {
                Some(near) => format!(
                    "unrecognized key '{key}' {place} — did you mean '{near}'? The manifest has a \
                     spelling problem here: the key was parsed and ignored, so whatever it \
                     declared is not in effect. Correct it in {} ({W_SEC_019_DOCS})",
                    self.label
                ),
                None => format!(
                    "unrecognized key '{key}' {place} — it is not a key this block knows: the key \
                     was parsed and ignored, so whatever it declared is not in effect. Remove it \
                     or move it to where it belongs in {} ({W_SEC_019_DOCS})",
                    self.label
                ),
            };
            self.warnings.push(Diagnostic::warning("W-SEC-019", msg));
        }
    }
}

/// The nearest known key by optimal-string-alignment distance, within max(len)/3 (at least 1).
pub fn suggest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let mut best: Option<(usize, &'k str)> = None;
    for cand in known {
        let dist = strsim::osa_distance(key, cand);
        let longest = key.chars().count().max(cand.chars().count());
        let limit = (longest / 3).max(1);
        if dist <= limit && best.is_none_or(|(d, _)| dist < d) {
            best = Some((dist, cand));
        }
    }
    best.map(|(_, c)| c)
}

/// A mapping key as text (non-string keys in their YAML form).
pub fn key_text(key: &Value) -> String {
    match key {
        Value::String(s) => s.clone(),
        Value::Sequence(_) | Value::Mapping(_) | Value::Tagged(_) => to_json(key)
            .map(|j| j.to_string())
            .unwrap_or_else(|_| scalar_text(key)),
        other => scalar_text(other),
    }
}

/// A short text for a scalar, used in messages.
pub fn scalar_text(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(t) => format!("!{}", t.tag),
    }
}

/// What kind of value this is, for "must be a … (found …)" messages.
pub fn kind(v: &Value) -> String {
    match v {
        Value::Null => "nothing".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the text '{s}'"),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(t) => format!("a value tagged !{}", t.tag),
    }
}

/// Reads a string value; numbers get a "quote it" advice since YAML reads `0.1` as a number.
pub fn as_string(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Err(format!(
            "must be a string (found the number {n}; quote it: \"{n}\")"
        )),
        other => Err(format!("must be a string (found {})", kind(other))),
    }
}

/// Converts a YAML value to JSON (for `config:` blocks and other pass-through data).
pub fn to_json(v: &Value) -> Result<serde_json::Value, String> {
    serde_json::to_value(v).map_err(|e| format!("cannot be read as JSON data: {e}"))
}

/// One YAML mapping, with its dotted path and the area its errors belong to.
#[derive(Clone)]
pub(crate) struct Block<'a> {
    pub map: &'a Mapping,
    pub path: String,
    pub area: Area,
}

impl<'a> Block<'a> {
    /// A block for `map` at `path` (empty path = the top level).
    pub fn new(map: &'a Mapping, path: &str, area: Area) -> Block<'a> {
        Block {
            map,
            path: path.to_string(),
            area,
        }
    }

    /// The dotted field name of `key` in this block.
    pub fn field(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// The value of `key`; `None` when absent or written with nothing after it.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        match self.map.get(key) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    /// True when `key` is written, even with an empty value.
    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// Reports `why` against `key` in this block's area.
    pub fn invalid(&self, ctx: &mut Ctx, key: &str, why: impl AsRef<str>) {
        ctx.invalid(self.area, &self.field(key), why);
    }

    /// Reports `why` against `key`, with what to write instead.
    pub fn invalid_with_hint(&self, ctx: &mut Ctx, key: &str, why: &str, hint: &str) {
        ctx.invalid(self.area, &self.field(key), why).hint = Some(hint.to_string());
    }

    /// An optional string.
    pub fn str(&self, ctx: &mut Ctx, key: &str) -> Option<String> {
        let v = self.get(key)?;
        as_string(v).map_err(|why| self.invalid(ctx, key, why)).ok()
    }

    /// An optional string where blank counts as absent.
    pub fn nonblank(&self, ctx: &mut Ctx, key: &str) -> Option<String> {
        self.str(ctx, key).filter(|s| !s.trim().is_empty())
    }

    /// An optional boolean.
    pub fn bool(&self, ctx: &mut Ctx, key: &str) -> Option<bool> {
        match self.get(key)? {
            Value::Bool(b) => Some(*b),
            other => {
                let why = format!("must be true or false (found {})", kind(other));
                self.invalid(ctx, key, why);
                None
            }
        }
    }

    /// An optional non-negative whole number.
    pub fn u64(&self, ctx: &mut Ctx, key: &str) -> Option<u64> {
        let v = self.get(key)?;
        match v.as_u64() {
            Some(n) => Some(n),
            None => {
                let why = format!("must be a whole number of 0 or more (found {})", kind(v));
                self.invalid(ctx, key, why);
                None
            }
        }
    }

    /// An optional whole number greater than zero.
    pub fn positive(&self, ctx: &mut Ctx, key: &str) -> Option<u64> {
        match self.u64(ctx, key)? {
            0 => {
                self.invalid(ctx, key, "must be greater than zero");
                None
            }
            n => Some(n),
        }
    }

    /// An optional whole number greater than zero that fits in `u32`.
    pub fn positive_u32(&self, ctx: &mut Ctx, key: &str) -> Option<u32> {
        let n = self.positive(ctx, key)?;
        match u32::try_from(n) {
            Ok(n) => Some(n),
            Err(_) => {
                self.invalid(ctx, key, format!("must be at most {}", u32::MAX));
                None
            }
        }
    }

    /// An optional list of strings.
    pub fn str_list(&self, ctx: &mut Ctx, key: &str) -> Option<Vec<String>> {
        let v = self.get(key)?;
        let Value::Sequence(items) = v else {
            let why = format!("must be a list of strings (found {})", kind(v));
            self.invalid(ctx, key, why);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match as_string(item) {
                Ok(s) => out.push(s),
                Err(why) => {
                    ctx.invalid(self.area, &format!("{}[{i}]", self.field(key)), why);
                    return None;
                }
            }
        }
        Some(out)
    }

    /// An optional value from a fixed set of words (trimmed).
    pub fn word(&self, ctx: &mut Ctx, key: &str, allowed: &[&str]) -> Option<String> {
        let s = self.str(ctx, key)?;
        let t = s.trim();
        if allowed.contains(&t) {
            Some(t.to_string())
        } else {
            let why = format!("must be one of: {}; got '{s}'", allowed.join(", "));
            self.invalid(ctx, key, why);
            None
        }
    }

    /// An optional nested mapping; its unknown keys are reported against `known`.
    pub fn child(&self, ctx: &mut Ctx, key: &str, known: &[&str]) -> Option<Block<'a>> {
        let v = self.get(key)?;
        let area = if self.path.is_empty() {
            Area::of_block(key).unwrap_or(self.area)
        } else {
            self.area
        };
        let path = self.field(key);
        let Value::Mapping(map) = v else {
            let why = format!("must be a mapping of keys (found {})", kind(v));
            ctx.invalid(area, &path, why);
            return None;
        };
        ctx.unknown_keys(map, &path, known);
        Some(Block::new(map, &path, area))
    }

    /// An optional value passed through as JSON (e.g. `driver.config`).
    pub fn json(&self, ctx: &mut Ctx, key: &str) -> Option<serde_json::Value> {
        let v = self.get(key)?;
        to_json(v).map_err(|why| self.invalid(ctx, key, why)).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_use_osa_distance_within_a_third_of_the_length() {
        let known = ["capabilities", "inference", "artifacts", "name", "version"];
        assert_eq!(suggest("capabilitys", &known), Some("capabilities"));
        assert_eq!(suggest("inferense", &known), Some("inference"));
        assert_eq!(suggest("nmae", &known), Some("name")); // a transposition is one edit
        assert_eq!(suggest("vresion", &known), Some("version"));
        assert_eq!(suggest("hooks", &known), None);
        assert_eq!(suggest("x", &["y"]), Some("y")); // threshold is at least 1
        assert_eq!(suggest("xy", &["ab"]), None);
    }

    #[test]
    fn unknown_key_warnings_name_the_block_and_suggest() {
        let yaml: Value = serde_norway::from_str("shel: 1\nhooks: []\n").unwrap();
        let mut ctx = Ctx::new("murmur.yaml");
        ctx.unknown_keys(
            yaml.as_mapping().unwrap(),
            "capabilities",
            &["shell", "spawn"],
        );
        assert_eq!(ctx.warnings.len(), 2);
        assert!(ctx.warnings[0].message.starts_with(
            "unrecognized key 'shel' in capabilities — did you mean 'shell'? The manifest has a spelling problem here"
        ));
        assert!(ctx.warnings[1]
            .message
            .starts_with("unrecognized key 'hooks' in capabilities — it is not a key"));
        assert!(ctx.errors.is_empty());
    }
}
