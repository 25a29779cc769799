//! `exports:`: what this capsule offers its peers (files it may share by handle).
//!
//! `exports.peer_files` creates the `share-file` tool. Roots are work-folder-relative so a
//! handle can never point outside the capsule's own folder; sizes and lifetimes accept the
//! short human forms upstream accepts (`10m`, `10Mi`).

use std::path::PathBuf;

use serde_norway::Value;

use super::reader::{kind, Block, Ctx};

/// Default largest file a handle may serve: 10 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Default handle lifetime for an ephemeral capsule: one hour.
pub const DEFAULT_MAX_TTL_SECONDS: u64 = 3600;

/// `exports:`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exports {
    /// `exports.files`: a read-only file export.
    pub files: Option<FilesExport>,
    /// `exports.peer_files`: files shareable by handle (`share-file`).
    pub peer_files: Option<PeerFiles>,
    /// `exports.peer_tasks.accept`.
    pub peer_tasks_accept: Option<bool>,
}

/// `exports.files`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilesExport {
    /// Root folder, relative to the work folder.
    pub root: PathBuf,
    /// Largest file served, in bytes.
    pub max_bytes: u64,
}

/// `exports.peer_files`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerFiles {
    /// Root folder, relative to the work folder.
    pub root: PathBuf,
    /// Longest handle lifetime in seconds, as written (`None`: the default applies).
    pub max_ttl: Option<u64>,
    /// Largest file a handle may serve, in bytes.
    pub max_bytes: u64,
}

impl PeerFiles {
    /// The handle lifetime cap, default applied.
    pub fn ttl(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.max_ttl.unwrap_or(DEFAULT_MAX_TTL_SECONDS))
    }
}

pub(crate) fn parse_exports(ctx: &mut Ctx, top: &Block<'_>) -> Option<Exports> {
    let b = top.child(ctx, "exports", &["files", "peer_files", "peer_tasks"])?;
    let files = b
        .child(ctx, "files", &["root", "mode", "max_bytes"])
        .and_then(|f| {
            let root = parse_root(ctx, &f)?;
            match f.nonblank(ctx, "mode").as_deref().map(str::trim) {
                Some("read-only") => {}
                Some(other) => {
                    f.invalid(ctx, "mode", format!("must be read-only; got '{other}'"));
                }
                None => f.invalid(ctx, "mode", "missing required field (only read-only)"),
            }
            Some(FilesExport {
                root,
                max_bytes: parse_bytes(ctx, &f)?,
            })
        });
    let peer_files = b
        .child(ctx, "peer_files", &["root", "max_ttl", "max_bytes"])
        .and_then(|p| {
            let root = parse_root(ctx, &p);
            let max_ttl = match p.get("max_ttl") {
                None => None,
                Some(v) => match parse_duration(v) {
                    Ok(s) => Some(s),
                    Err(why) => {
                        p.invalid(ctx, "max_ttl", why);
                        return None;
                    }
                },
            };
            let max_bytes = parse_bytes(ctx, &p);
            Some(PeerFiles {
                root: root?,
                max_ttl,
                max_bytes: max_bytes?,
            })
        });
    let peer_tasks_accept = b.child(ctx, "peer_tasks", &["accept"]).and_then(|t| {
        if t.get("accept").is_none() {
            t.invalid(
                ctx,
                "accept",
                "must be set explicitly to true or false — a capability is never inferred",
            );
        }
        t.bool(ctx, "accept")
    });
    Some(Exports {
        files,
        peer_files,
        peer_tasks_accept,
    })
}

fn parse_root(ctx: &mut Ctx, b: &Block<'_>) -> Option<PathBuf> {
    let Some(root) = b.nonblank(ctx, "root") else {
        if b.get("root").is_none_or(Value::is_string) {
            b.invalid(ctx, "root", "missing required field");
        }
        return None;
    };
    let root = root.trim();
    if root.starts_with('/') || root.starts_with('\\') {
        b.invalid(
            ctx,
            "root",
            format!("'{root}' must be relative to the work folder"),
        );
        return None;
    }
    if root.split(['/', '\\']).any(|p| p == "..") {
        b.invalid(
            ctx,
            "root",
            format!("'{root}' cannot escape the work folder via '..'"),
        );
        return None;
    }
    Some(PathBuf::from(root))
}

fn parse_bytes(ctx: &mut Ctx, b: &Block<'_>) -> Option<u64> {
    match b.get("max_bytes") {
        None => Some(DEFAULT_MAX_BYTES),
        Some(v) => parse_size(v)
            .map_err(|why| b.invalid(ctx, "max_bytes", why))
            .ok(),
    }
}

/// A duration: whole seconds, or a number with `s`, `m`, `h` or `d`; greater than zero.
pub fn parse_duration(v: &Value) -> Result<u64, String> {
    let secs = match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| format!("must be whole seconds (found {n})"))?,
        Value::String(s) => {
            let t = s.trim();
            let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
            let unit = &t[digits.len()..];
            let n: u64 = digits
                .parse()
                .map_err(|_| format!("'{s}' is not a duration (e.g. 600, 90s, 10m, 1h, 1d)"))?;
            let mult = match unit {
                "" | "s" => 1,
                "m" => 60,
                "h" => 3600,
                "d" => 86400,
                _ => {
                    return Err(format!(
                        "'{s}' is not a duration (e.g. 600, 90s, 10m, 1h, 1d)"
                    ))
                }
            };
            n.checked_mul(mult)
                .ok_or_else(|| format!("'{s}' is too long"))?
        }
        other => {
            return Err(format!(
                "must be a duration such as 10m (found {})",
                kind(other)
            ))
        }
    };
    if secs == 0 {
        return Err("must be greater than zero".into());
    }
    Ok(secs)
}

/// A size: whole bytes, or a number with `Ki`, `Mi` or `Gi`; greater than zero.
pub fn parse_size(v: &Value) -> Result<u64, String> {
    let bytes = match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| format!("must be whole bytes (found {n})"))?,
        Value::String(s) => {
            let t = s.trim();
            let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
            let unit = &t[digits.len()..];
            let bad = || format!("'{s}' is not a size (e.g. 1048576, 512Ki, 10Mi, 1Gi)");
            let n: u64 = digits.parse().map_err(|_| bad())?;
            let mult = match unit {
                "" => 1,
                "Ki" => 1 << 10,
                "Mi" => 1 << 20,
                "Gi" => 1 << 30,
                _ => return Err(bad()),
            };
            n.checked_mul(mult)
                .ok_or_else(|| format!("'{s}' is too large"))?
        }
        other => {
            return Err(format!(
                "must be a size such as 10Mi (found {})",
                kind(other)
            ))
        }
    };
    if bytes == 0 {
        return Err("must be greater than zero".into());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Value {
        serde_norway::from_str(s).unwrap()
    }

    #[test]
    fn durations_accept_seconds_and_suffixes() {
        assert_eq!(parse_duration(&v("600")), Ok(600));
        assert_eq!(parse_duration(&v("10m")), Ok(600));
        assert_eq!(parse_duration(&v("90s")), Ok(90));
        assert_eq!(parse_duration(&v("2h")), Ok(7200));
        assert_eq!(parse_duration(&v("1d")), Ok(86400));
        assert!(parse_duration(&v("0")).is_err());
        assert!(parse_duration(&v("10 minutes")).is_err());
        assert!(parse_duration(&v("m")).is_err());
    }

    #[test]
    fn sizes_accept_bytes_and_binary_suffixes() {
        assert_eq!(parse_size(&v("1024")), Ok(1024));
        assert_eq!(parse_size(&v("10Mi")), Ok(10 << 20));
        assert_eq!(parse_size(&v("2Ki")), Ok(2048));
        assert_eq!(parse_size(&v("1Gi")), Ok(1 << 30));
        assert!(parse_size(&v("10MB")).is_err());
        assert!(parse_size(&v("0Mi")).is_err());
    }
}
