//! `capabilities:`: what the capsule may do. Each grant is the existence of a tool.
//!
//! Shell binaries, delegation, plans, peer fetches and runtime pulls each become tools only
//! when declared here, so a block that is present must say exactly what it grants — an empty
//! list or a missing flag is refused rather than read as "nothing" or "everything".

use super::install::{parse_install, InstallCap};
use super::limits::{parse_limits, parse_resources, Limits, Resources};
use super::names::ArtifactName;
use super::reader::{Block, Ctx};
use super::shell::{parse_shell, ShellCap};

/// Keys the capsule-wide `capabilities:` block knows.
pub(crate) const CAPABILITY_KEYS: &[&str] = &[
    "network",
    "peer_fetch",
    "filesystem",
    "shell",
    "spawn",
    "env",
    "limits",
    "resources",
    "state",
    "task_io",
    "conversation",
    "plan",
    "install",
    "containment",
];

/// The capsule-wide grants.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Capabilities {
    /// `shell`: binaries the model may run, one tool each.
    pub shell: Option<ShellCap>,
    /// `install`: what the capsule may pull while it runs (`pull-artifact`, `remove-artifact`).
    pub install: Option<InstallCap>,
    /// `spawn`: capsules this one may delegate to (`delegate-task`).
    pub spawn: Option<SpawnCap>,
    /// `plan`: `submit: true` grants `submit-plan`.
    pub plan: Option<PlanCap>,
    /// `peer_fetch`: peers whose file handles may be redeemed (`fetch-peer-file`).
    pub peer_fetch: Option<PeerFetchCap>,
    /// `network`: destinations subprocesses may reach.
    pub network: Option<NetworkCap>,
    /// `filesystem`: scope and read-only paths inside the work folder.
    pub filesystem: Option<FilesystemCap>,
    /// `env.allow`: host variables a guest may see.
    pub env: Option<EnvCap>,
    /// `limits` (deadline, memory, …); all optional, with defaults.
    pub limits: Limits,
    /// `resources` (process limits); all optional.
    pub resources: Resources,
    /// `state.store` name, as written.
    pub state_store: Option<String>,
    /// `containment` floor.
    pub containment: Option<Containment>,
}

impl Capabilities {
    /// True when `submit-plan` exists.
    pub fn plan_submit(&self) -> bool {
        self.plan.as_ref().is_some_and(|p| p.submit)
    }
}

/// `capabilities.spawn`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpawnCap {
    /// Capsules this one may delegate to, by full name; their bare parts are distinct.
    pub allow: Vec<ArtifactName>,
}

/// `capabilities.plan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlanCap {
    /// Whether `submit-plan` exists; always written explicitly.
    pub submit: bool,
}

/// `capabilities.peer_fetch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerFetchCap {
    /// Peers (`https://host[:port]`, `host[:port]`, …) whose handles may be redeemed.
    pub allow: Vec<String>,
}

/// `capabilities.network`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetworkCap {
    /// Destinations (`https://host[:port]`, `http://host[:port]`, `host`, `host:port`).
    pub allow: Vec<String>,
    /// Whether shell subprocesses may use AF_UNIX sockets.
    pub unix_sockets: bool,
}

/// `capabilities.filesystem`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilesystemCap {
    /// Sub-folder of the work folder the capsule sees (`.` = all of it).
    pub scope: Option<String>,
    /// Whether files in the work folder may be executed.
    pub workdir_exec: bool,
    /// Work-folder paths that stay read-only.
    pub read_only: Vec<String>,
}

/// `capabilities.env`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnvCap {
    /// Host environment variable names passed through.
    pub allow: Vec<String>,
}

/// `capabilities.containment`: the isolation floor the operator asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Containment {
    /// No enforcement beyond the grants.
    Advisory,
    /// Subprocesses confined to the scope.
    Scoped,
    /// Fully sealed root.
    Sealed,
}

impl Containment {
    /// The level words, lowest first.
    pub const WORDS: [&'static str; 3] = ["advisory", "scoped", "sealed"];

    /// The level's word in manifests and traces.
    pub fn as_str(self) -> &'static str {
        Self::WORDS[self as usize]
    }

    /// Parse `advisory|scoped|sealed`.
    pub fn parse(word: &str) -> Option<Containment> {
        match word.trim() {
            "advisory" => Some(Containment::Advisory),
            "scoped" => Some(Containment::Scoped),
            "sealed" => Some(Containment::Sealed),
            _ => None,
        }
    }
}

/// Parses the top-level `capabilities:` block.
pub(crate) fn parse_capabilities(ctx: &mut Ctx, top: &Block<'_>) -> Capabilities {
    let mut caps = Capabilities::default();
    let Some(b) = top.child(ctx, "capabilities", CAPABILITY_KEYS) else {
        return caps;
    };
    if b.has("task_io") {
        b.invalid(
            ctx,
            "task_io",
            "is recognized only on 'runtime: hook' artifact entries; a capsule-wide task_io \
             grant means nothing",
        );
    }
    caps.network = parse_network(ctx, &b);
    caps.peer_fetch = parse_peer_fetch(ctx, &b);
    caps.filesystem = parse_filesystem(ctx, &b);
    caps.shell = parse_shell(ctx, &b);
    caps.spawn = parse_spawn(ctx, &b);
    caps.env = b.child(ctx, "env", &["allow"]).map(|e| EnvCap {
        allow: e.str_list(ctx, "allow").unwrap_or_default(),
    });
    caps.limits = parse_limits(ctx, &b);
    caps.resources = parse_resources(ctx, &b);
    caps.state_store = b
        .child(ctx, "state", &["store"])
        .and_then(|s| s.nonblank(ctx, "store"));
    let _ = b.child(ctx, "conversation", &["read"]);
    caps.plan = b.child(ctx, "plan", &["submit"]).and_then(|p| {
        if p.get("submit").is_none() {
            p.invalid(
                ctx,
                "submit",
                "must be set explicitly to true or false — a capability is never inferred",
            );
            return None;
        }
        p.bool(ctx, "submit").map(|submit| PlanCap { submit })
    });
    caps.install = parse_install(ctx, &b);
    caps.containment = b
        .word(ctx, "containment", &Containment::WORDS)
        .and_then(|w| Containment::parse(&w));
    caps
}

fn parse_network(ctx: &mut Ctx, b: &Block<'_>) -> Option<NetworkCap> {
    let n = b.child(ctx, "network", &["allow", "unix_sockets"])?;
    let allow = n.str_list(ctx, "allow").unwrap_or_default();
    for entry in &allow {
        if let Err(why) = check_destination(entry) {
            ctx.error(
                "E-CAP-001",
                format!("invalid network allow entry '{entry}': {why}"),
            );
        }
    }
    Some(NetworkCap {
        allow,
        unix_sockets: n.bool(ctx, "unix_sockets").unwrap_or(false),
    })
}

fn parse_peer_fetch(ctx: &mut Ctx, b: &Block<'_>) -> Option<PeerFetchCap> {
    if b.has("peer_fetch") && b.get("peer_fetch").is_none() {
        b.invalid(
            ctx,
            "peer_fetch.allow",
            "must be a non-empty list of network destinations",
        );
        return None;
    }
    let p = b.child(ctx, "peer_fetch", &["allow"])?;
    let allow = p.str_list(ctx, "allow").unwrap_or_default();
    if allow.is_empty() {
        p.invalid(
            ctx,
            "allow",
            "must be a non-empty list of network destinations",
        );
        return None;
    }
    for (i, entry) in allow.iter().enumerate() {
        if let Err(why) = check_destination(entry) {
            p.invalid(ctx, &format!("allow[{i}]"), format!("'{entry}' {why}"));
        }
    }
    Some(PeerFetchCap { allow })
}

fn parse_filesystem(ctx: &mut Ctx, b: &Block<'_>) -> Option<FilesystemCap> {
    let known = ["scope", "workdir_exec", "read_only", "records"];
    let f = b.child(ctx, "filesystem", &known)?;
    if f.has("records") {
        f.invalid(
            ctx,
            "records",
            "is recognized only on 'runtime: hook' artifact entries",
        );
    }
    let scope = f.nonblank(ctx, "scope");
    if let Some(s) = &scope {
        let why = if s.starts_with('/') || s.starts_with('\\') {
            Some("scope must be relative to the workdir")
        } else if s.split(['/', '\\']).any(|part| part == "..") {
            Some("scope cannot escape the workdir via '..'")
        } else {
            None
        };
        if let Some(why) = why {
            ctx.error(
                "E-CAP-002",
                format!("invalid filesystem scope '{s}': {why}"),
            );
        }
    }
    Some(FilesystemCap {
        scope,
        workdir_exec: f.bool(ctx, "workdir_exec").unwrap_or(false),
        read_only: f.str_list(ctx, "read_only").unwrap_or_default(),
    })
}

fn parse_spawn(ctx: &mut Ctx, b: &Block<'_>) -> Option<SpawnCap> {
    let s = b.child(ctx, "spawn", &["allow"])?;
    let raw = s.str_list(ctx, "allow").unwrap_or_default();
    if raw.is_empty() {
        s.invalid(
            ctx,
            "allow",
            "must name at least one capsule <scope>/<name> — a capability is never inferred; \
             omit the block to grant no delegation",
        );
        return None;
    }
    let mut allow: Vec<ArtifactName> = Vec::new();
    for (i, text) in raw.iter().enumerate() {
        match ArtifactName::parse(text.trim()) {
            Ok(name) => {
                if let Some(prev) = allow.iter().find(|p| p.name() == name.name()) {
                    if *prev != name {
                        let why = format!(
                            "'{prev}' and '{name}' share the name '{}'; the model picks a capsule \
                             by its bare name, so each must be distinct",
                            name.name()
                        );
                        s.invalid(ctx, "allow", why);
                    }
                    continue;
                }
                allow.push(name);
            }
            Err(err) => ctx.invalid_name(&format!("capabilities.spawn.allow[{i}]"), &err),
        }
    }
    Some(SpawnCap { allow })
}

/// Checks one network destination: `https://host[:port]`, `http://host[:port]`, `host`,
/// `host:port` (no path, query or fragment).
pub fn check_destination(entry: &str) -> Result<(), String> {
    let e = entry.trim();
    if e.is_empty() {
        return Err("is empty".into());
    }
    if e.contains("://") {
        let url = reqwest::Url::parse(e).map_err(|err| format!("is not a URL ({err})"))?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(format!("uses '{}'; expected http or https", url.scheme()));
        }
        if url.host_str().is_none_or(|h| h.is_empty()) {
            return Err("names no host".into());
        }
        if url.path() != "/" && !url.path().is_empty() {
            return Err("has a path; name only scheme, host and port".into());
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err("has a query or fragment; name only scheme, host and port".into());
        }
        return Ok(());
    }
    let (host, port) = if let Some(rest) = e.strip_prefix('[') {
        let (h, tail) = rest
            .split_once(']')
            .ok_or_else(|| "has an unclosed '['".to_string())?;
        (h, tail.strip_prefix(':'))
    } else {
        match e.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (e, None),
        }
    };
    if let Some(p) = port {
        p.parse::<u16>()
            .map_err(|_| format!("has port '{p}', which is not a number from 0 to 65535"))?;
    }
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
    if !host_ok {
        return Err(format!(
            "names '{host}', which is not a host name or IP address"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_destination;

    #[test]
    fn destinations_take_four_forms() {
        for ok in [
            "https://api.github.com",
            "http://127.0.0.1:9000",
            "https://example.com:8443/",
            "example.com",
            "example.com:443",
            "[::1]:80",
        ] {
            assert!(check_destination(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "ftp://x.org",
            "https://x.org/path",
            "https://x.org/?q=1",
            "x.org:99999",
            "x y",
        ] {
            assert!(check_destination(bad).is_err(), "{bad}");
        }
    }
}
