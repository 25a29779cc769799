//! Ordering of artifact versions and the platform tag of this host.
//!
//! "The newest version that fits this mur" needs one ordering everyone agrees on: semver
//! precedence first (pre-releases below their release, build metadata ignored), then plain text
//! to break ties; a string that is not semver sorts below every semver version.

use std::cmp::Ordering;

/// The platforms native payloads are tagged with.
pub const SUPPORTED_PLATFORMS: [&str; 4] = [
    "darwin-aarch64",
    "darwin-x86_64",
    "linux-aarch64",
    "linux-x86_64",
];

/// This host's platform tag, e.g. `linux-x86_64`.
pub fn host_platform() -> String {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    format!("{os}-{}", std::env::consts::ARCH)
}

/// True when `tag` is one of [`SUPPORTED_PLATFORMS`].
pub fn is_platform_tag(tag: &str) -> bool {
    SUPPORTED_PLATFORMS.contains(&tag)
}

#[derive(Debug, PartialEq, Eq)]
struct Semver<'a> {
    core: [u64; 3],
    pre: Vec<&'a str>,
}

fn parse_semver(v: &str) -> Option<Semver<'_>> {
    let v = v.split('+').next().unwrap_or(v);
    let (core, pre) = match v.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (v, None),
    };
    let mut parts = core.split('.');
    let mut nums = [0u64; 3];
    for n in &mut nums {
        let p = parts.next()?;
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *n = p.parse().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    let pre = match pre {
        Some("") => return None,
        Some(p) => p.split('.').collect(),
        None => Vec::new(),
    };
    Some(Semver { core: nums, pre })
}

fn cmp_pre(a: &[&str], b: &[&str]) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    for (x, y) in a.iter().zip(b.iter()) {
        let o = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(i), Ok(j)) => i.cmp(&j),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            _ => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Orders two versions: semver precedence, then text; non-semver below every semver.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    match (parse_semver(a), parse_semver(b)) {
        (Some(x), Some(y)) => x
            .core
            .cmp(&y.core)
            .then_with(|| cmp_pre(&x.pre, &y.pre))
            .then_with(|| a.cmp(b)),
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (None, None) => a.cmp(b),
    }
}

/// Sorts versions newest first and drops duplicates.
pub fn newest_first(versions: &mut Vec<String>) {
    versions.sort_by(|a, b| compare_versions(b, a));
    versions.dedup();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn semver_precedence_then_text() {
        let mut v: Vec<String> = ["0.2.0", "0.10.0", "1.0.0-rc.1", "1.0.0", "abc", "0.2.0"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        newest_first(&mut v);
        assert_eq!(v, ["1.0.0", "1.0.0-rc.1", "0.10.0", "0.2.0", "abc"]);
        assert_eq!(
            compare_versions("1.0.0-alpha", "1.0.0-alpha.1"),
            Ordering::Less
        );
        assert_eq!(compare_versions("1.0.0-2", "1.0.0-a"), Ordering::Less);
        assert_eq!(compare_versions("v1.0.0", "0.0.1"), Ordering::Less);
    }

    #[test]
    fn host_platform_is_supported_here() {
        assert!(is_platform_tag(&host_platform()), "{}", host_platform());
    }
}
