//! `capabilities.shell`: the binaries the model may run, one tool per name.
//!
//! Entries are bare binary names looked up on `PATH`, never paths: the tool the model sees is
//! named after the entry, and dispatch re-checks a call against this same list.

use super::reader::{Block, Ctx};

/// `capabilities.shell`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShellCap {
    /// Bare binary names, in the order written, without duplicates.
    pub allow: Vec<String>,
    /// `strip_env` glob patterns of variables removed from a command's environment.
    pub strip_env: Vec<String>,
    /// `baseline_env` glob patterns of variables always kept.
    pub baseline_env: Vec<String>,
    /// `interpreter_runtime` as written (parsed, not acted on by this runtime).
    pub interpreter_runtime: serde_json::Value,
    /// `staged_runtime` as written (parsed, not acted on by this runtime).
    pub staged_runtime: serde_json::Value,
}

const SHELL_KEYS: &[&str] = &[
    "allow",
    "strip_env",
    "baseline_env",
    "interpreter_runtime",
    "staged_runtime",
];

/// Why `entry` is not a bare binary name, or `None` when it is one.
pub fn bad_binary_name(entry: &str) -> Option<&'static str> {
    if entry.is_empty() {
        Some("is empty")
    } else if entry.contains('\0') {
        Some("contains a NUL byte")
    } else if entry.contains('/') {
        Some("is a path")
    } else if entry == "." || entry == ".." {
        Some("is not a file name")
    } else if entry.chars().any(char::is_whitespace) {
        Some("contains whitespace")
    } else {
        None
    }
}

pub(crate) fn parse_shell(ctx: &mut Ctx, caps: &Block<'_>) -> Option<ShellCap> {
    if caps.has("shell") && caps.get("shell").is_none() {
        caps.invalid(ctx, "shell.allow", "must contain at least one binary");
        return None;
    }
    let s = caps.child(ctx, "shell", SHELL_KEYS)?;
    let raw = match s.get("allow") {
        None => Vec::new(),
        Some(_) => s.str_list(ctx, "allow")?,
    };
    if raw.is_empty() {
        s.invalid(ctx, "allow", "must contain at least one binary");
        return None;
    }
    let mut allow: Vec<String> = Vec::new();
    for (i, entry) in raw.iter().enumerate() {
        if let Some(why) = bad_binary_name(entry) {
            let field = format!("{}[{i}]", s.field("allow"));
            let msg = format!("'{entry}' {why}; an entry is a bare binary name");
            ctx.invalid(s.area, &field, msg).hint =
                Some("name the binary alone (e.g. 'git'), and put its directory on PATH".into());
        } else if !allow.contains(entry) {
            allow.push(entry.clone());
        }
    }
    Some(ShellCap {
        allow,
        strip_env: s.str_list(ctx, "strip_env").unwrap_or_default(),
        baseline_env: s.str_list(ctx, "baseline_env").unwrap_or_default(),
        interpreter_runtime: s.json(ctx, "interpreter_runtime").unwrap_or_default(),
        staged_runtime: s.json(ctx, "staged_runtime").unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::bad_binary_name;

    #[test]
    fn only_bare_binary_names_pass() {
        assert_eq!(bad_binary_name("git"), None);
        assert_eq!(bad_binary_name("python3.12"), None);
        assert_eq!(bad_binary_name("/usr/bin/git"), Some("is a path"));
        assert_eq!(bad_binary_name("bin/git"), Some("is a path"));
        assert_eq!(bad_binary_name(".."), Some("is not a file name"));
        assert_eq!(bad_binary_name("git status"), Some("contains whitespace"));
        assert_eq!(bad_binary_name(""), Some("is empty"));
    }
}
