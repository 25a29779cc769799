//! Landlock rules: what a contained command may read, write, execute and connect to.
//!
//! Landlock grants are additive and hierarchical: a right given on a folder holds for all
//! beneath it, and nothing can take it back lower down. So the writable tree is exactly the
//! work folder (or its `filesystem.scope`) plus the session's scratch folder, and everything
//! the runtime must protect (records: traces, staged manifests, results) lives outside it.
//!
//! Reads: what programs need to run (system binaries and libraries, a short list of `/etc`
//! files, `/proc`, `/sys`, a few devices), the work folder, and the session's staged tool
//! manifests. Not home folders, not `/etc/shadow`, not other sessions.
//! Execution: each granted binary (by its resolved path), the helper programs and libraries
//! under `/usr/lib`, `/usr/libexec`, `/lib`, `/lib64` (the dynamic loader, `git-core`, the
//! compiler's back ends), and the folders `shell.interpreter_runtime` declares. Files the work
//! folder holds only with `filesystem.workdir_exec`.
//! Network: TCP connect only to the ports `network.allow` grants, never bind.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

use super::host::{LANDLOCK_NET_ABI, LANDLOCK_SCOPE_ABI};

/// Read-only system paths every command may read (those that exist).
pub const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/proc",
    "/sys",
    "/dev/urandom",
    "/dev/random",
    "/dev/pts",
    "/dev/fd",
    "/run/systemd/resolve",
];

/// The `/etc` entries programs read (name service, linker cache, locale, time zone,
/// certificates, alternatives). Everything else in `/etc` (`shadow`, `sudoers`, `ssh/`) is out.
pub const ETC_READ: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/hostname",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/alternatives",
    "/etc/terminfo",
    "/etc/inputrc",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/lsb-release",
    "/etc/debian_version",
    "/etc/gitconfig",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/default/locale",
    "/etc/environment",
    "/etc/profile",
    "/etc/bash.bashrc",
    "/etc/magic",
    "/etc/python3",
];

/// Devices a command may read and write.
pub const DEV_RW: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
];

/// System folders whose files may be executed (the loader, libraries, helper programs).
pub const SYSTEM_EXEC: &[&str] = &["/usr/lib", "/usr/lib64", "/usr/libexec", "/lib", "/lib64"];

/// One command profile's file and network rules.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    /// Readable trees.
    pub read: Vec<PathBuf>,
    /// Readable and writable trees.
    pub write: Vec<PathBuf>,
    /// Files (or trees) that may be executed (and read).
    pub exec: Vec<PathBuf>,
    /// Trees that may be read, listed and executed.
    pub exec_list: Vec<PathBuf>,
    /// TCP ports a command may connect to; `None` is any port.
    pub connect: Option<Vec<u16>>,
}

/// The rights to grant on `path`: `Ok(None)` when it does not exist on this host, or this user
/// cannot reach it (nothing to grant); any other failure to look at it (too many open files,
/// EIO) is an error, never a grant silently left out: a command would then be denied with no
/// word of why (a `bash` that cannot exec `sleep` exits 126).
fn rights_for(
    path: &Path,
    wanted: BitFlags<AccessFs>,
    abi: ABI,
) -> Result<Option<BitFlags<AccessFs>>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            ) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(format!("cannot grant {}: {e}", path.display())),
    };
    Ok(Some(if meta.is_dir() {
        wanted
    } else {
        wanted & AccessFs::from_file(abi)
    }))
}

/// Build the ruleset for `rules` on a kernel of `abi`; returns its descriptor, reusable for
/// every command of the profile.
pub fn ruleset(rules: &Rules, abi: i32) -> Result<OwnedFd, String> {
    let abi_v = ABI::from(abi);
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    // Device ioctls stay allowed (terminals, /dev/null); every other right is handled.
    let write = AccessFs::from_write(abi_v) & !AccessFs::IoctlDev;
    let exec = AccessFs::Execute | AccessFs::ReadFile;
    let handled = AccessFs::from_all(abi_v) & !AccessFs::IoctlDev;
    let err = |e: landlock::RulesetError| format!("cannot build the Landlock ruleset: {e}");
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(handled)
        .map_err(err)?;
    if abi >= LANDLOCK_NET_ABI {
        let net = match rules.connect {
            Some(_) => AccessNet::BindTcp | AccessNet::ConnectTcp,
            None => BitFlags::from(AccessNet::BindTcp),
        };
        rs = rs.handle_access(net).map_err(err)?;
    }
    if abi >= LANDLOCK_SCOPE_ABI {
        rs = rs
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(err)?;
    }
    let mut created = rs.create().map_err(err)?;
    let mut add = |path: &Path, wanted: BitFlags<AccessFs>| -> Result<(), String> {
        let Some(access) = rights_for(path, wanted, abi_v)? else {
            return Ok(()); // absent on this host: nothing to grant
        };
        let fd = match PathFd::new(path) {
            Ok(fd) => fd,
            // Removed since it was looked at, or out of this user's reach: nothing to grant.
            Err(_) if std::fs::metadata(path).is_err() => return Ok(()),
            Err(e) => return Err(format!("cannot grant {}: {e}", path.display())),
        };
        created
            .as_mut()
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("cannot grant {}: {e}", path.display()))?;
        Ok(())
    };
    for p in SYSTEM_READ.iter().chain(ETC_READ).map(Path::new) {
        add(p, read)?;
    }
    for p in DEV_RW.iter().map(Path::new) {
        add(p, read | AccessFs::WriteFile)?;
    }
    for p in SYSTEM_EXEC.iter().map(Path::new) {
        add(p, read | AccessFs::Execute)?;
    }
    for p in &rules.read {
        add(p, read)?;
    }
    for p in &rules.write {
        add(p, read | write)?;
    }
    for p in &rules.exec {
        add(p, exec)?;
    }
    for p in &rules.exec_list {
        add(p, exec | AccessFs::ReadDir)?;
    }
    if abi >= LANDLOCK_NET_ABI {
        if let Some(ports) = &rules.connect {
            for &port in ports {
                created
                    .as_mut()
                    .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                    .map_err(|e| format!("cannot grant TCP port {port}: {e}"))?;
            }
        }
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| "Landlock is not available on this host".to_string())
}

/// The ports `network.allow` entries grant: `https://h` 443, `http://h` 80, `h:p` p; a bare
/// host grants every port (`None`). Landlock enforces ports, not hosts.
pub fn granted_ports(allow: &[String]) -> Option<Vec<u16>> {
    let mut ports = Vec::new();
    for entry in allow {
        let (scheme, rest) = match entry.split_once("://") {
            Some((s, r)) => (Some(s), r),
            None => (None, entry.as_str()),
        };
        let explicit = rest
            .rsplit_once(':')
            .filter(|(host, _)| !host.ends_with(']') || rest.starts_with('['))
            .and_then(|(_, p)| p.trim_end_matches('/').parse::<u16>().ok());
        let port = explicit.or(match scheme {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        });
        match port {
            Some(p) => ports.push(p),
            None => return None,
        }
    }
    ports.sort_unstable();
    ports.dedup();
    Some(ports)
}

#[cfg(test)]
mod tests {
    use super::granted_ports;

    #[test]
    fn entries_grant_ports() {
        let v = |e: &[&str]| granted_ports(&e.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(v(&[]), Some(vec![]));
        assert_eq!(v(&["https://api.example.com"]), Some(vec![443]));
        assert_eq!(
            v(&["http://localhost:8080", "example.com:22"]),
            Some(vec![22, 8080])
        );
        assert_eq!(v(&["example.com"]), None);
    }
}
