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
    /// `interpreter_runtime`: folders (or files) a granted binary needs to read and execute,
    /// such as a toolchain under `~/.rustup`. Paths are absolute after `${NAME}` expansion.
    pub interpreter_runtime: Vec<InterpreterRuntime>,
    /// `staged_runtime` as written (parsed, not acted on by this runtime).
    pub staged_runtime: serde_json::Value,
}

/// One `shell.interpreter_runtime[]` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InterpreterRuntime {
    /// The binary (from `shell.allow`) that needs these paths.
    pub binary: String,
    /// The paths it may read and execute.
    pub dirs: Vec<RuntimeDir>,
}

/// One `dirs[]` entry of an `interpreter_runtime`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RuntimeDir {
    /// An absolute path (a folder or a file), `${NAME}` already expanded.
    pub path: std::path::PathBuf,
    /// Whether folders beneath it may be listed (else files are only opened by name).
    pub list_dir: bool,
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
    let mut seen = std::collections::HashSet::new();
    for (i, entry) in raw.iter().enumerate() {
        if let Some(why) = bad_binary_name(entry) {
            let field = format!("{}[{i}]", s.field("allow"));
            let msg = format!("'{entry}' {why}; an entry is a bare binary name");
            ctx.invalid(s.area, &field, msg).hint =
                Some("name the binary alone (e.g. 'git'), and put its directory on PATH".into());
        } else if seen.insert(entry.as_str()) {
            allow.push(entry.clone());
        }
    }
    let interpreter_runtime = parse_interpreter_runtime(ctx, &s, &allow);
    Some(ShellCap {
        allow,
        strip_env: s.str_list(ctx, "strip_env").unwrap_or_default(),
        baseline_env: s.str_list(ctx, "baseline_env").unwrap_or_default(),
        interpreter_runtime,
        staged_runtime: s.json(ctx, "staged_runtime").unwrap_or_default(),
    })
}

/// `interpreter_runtime: [{binary, dirs: [{path, list_dir}]}]`, each binary in `allow`, each
/// path absolute (after `${NAME}` / `~/` expansion from the environment), `list_dir` written.
fn parse_interpreter_runtime(
    ctx: &mut Ctx,
    s: &Block<'_>,
    allow: &[String],
) -> Vec<InterpreterRuntime> {
    let Some(raw) = s.json(ctx, "interpreter_runtime") else {
        return Vec::new();
    };
    let field = s.field("interpreter_runtime");
    let Some(entries) = raw.as_array() else {
        ctx.invalid(
            s.area,
            &field,
            "must be a list of {binary, dirs: [{path, list_dir}]} entries",
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let Some(binary) = e.get("binary").and_then(|b| b.as_str()) else {
            ctx.invalid(
                s.area,
                &format!("{at}.binary"),
                "is required: the binary from shell.allow these folders serve",
            );
            continue;
        };
        if !allow.iter().any(|a| a == binary) {
            ctx.invalid(
                s.area,
                &format!("{at}.binary"),
                format!("'{binary}' is not in capabilities.shell.allow; an interpreter runtime serves a granted binary"),
            )
            .hint = Some(format!("add '{binary}' to capabilities.shell.allow, or remove this entry"));
            continue;
        }
        let dirs = match e.get("dirs").and_then(|d| d.as_array()) {
            Some(d) if !d.is_empty() => d,
            _ => {
                ctx.invalid(
                    s.area,
                    &format!("{at}.dirs"),
                    "must be a non-empty list of {path, list_dir}",
                );
                continue;
            }
        };
        let mut parsed = Vec::new();
        for (j, d) in dirs.iter().enumerate() {
            let dat = format!("{at}.dirs[{j}]");
            let Some(path) = d.get("path").and_then(|p| p.as_str()) else {
                ctx.invalid(s.area, &format!("{dat}.path"), "is required");
                continue;
            };
            let Some(list_dir) = d.get("list_dir").and_then(|l| l.as_bool()) else {
                ctx.invalid(
                    s.area,
                    &format!("{dat}.list_dir"),
                    "is required: true lets the binary list folders beneath the path, false only open files by name",
                );
                continue;
            };
            match expand_path(path) {
                Ok(p) => parsed.push(RuntimeDir { path: p, list_dir }),
                Err(why) => {
                    ctx.invalid(s.area, &format!("{dat}.path"), format!("'{path}' {why}"))
                        .hint = Some(
                        "write an absolute path such as /usr/lib/jvm or ${HOME}/.rustup".into(),
                    );
                }
            }
        }
        out.push(InterpreterRuntime {
            binary: binary.to_string(),
            dirs: parsed,
        });
    }
    out
}

/// Expand a leading `~/` and `${NAME}` references from the environment; the result must be an
/// absolute path without `..`.
pub fn expand_path(raw: &str) -> Result<std::path::PathBuf, String> {
    let mut text = String::new();
    let mut rest = raw;
    if let Some(tail) = rest.strip_prefix("~/") {
        let home =
            std::env::var("HOME").map_err(|_| "starts with ~/ but HOME is not set".to_string())?;
        text.push_str(&home);
        text.push('/');
        rest = tail;
    }
    while let Some(start) = rest.find("${") {
        text.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err("has an unclosed ${".into());
        };
        let name = &after[..end];
        let value =
            std::env::var(name).map_err(|_| format!("names ${{{name}}}, which is not set"))?;
        text.push_str(&value);
        rest = &after[end + 1..];
    }
    text.push_str(rest);
    let path = std::path::PathBuf::from(&text);
    if !path.is_absolute() {
        return Err("is a relative path; an interpreter runtime path must be absolute".into());
    }
    if path
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Err("contains '..'".into());
    }
    Ok(path)
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
