//! Peer addresses: `localhost:<port>/<ses_id>`, the allow-list check and the audience string.
//!
//! Every session is addressed on its process's door by id, so a peer address is the door's
//! `host:port` plus the session id. Handles only ever travel between processes on this machine:
//! the door listens on loopback and plain `http://` is allowed only there, so a peer on any
//! other host is refused before anything connects. The audience always spells the loopback host
//! `localhost` so the minter (who was given an address) and the receiver (who knows its own
//! door) derive the same string whichever loopback spelling the model used.

use std::fmt;

/// A parsed peer address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerAddr {
    /// The host as written, lowercased (`localhost`, `127.0.0.1`, `[::1]`).
    pub host: String,
    /// The door's port.
    pub port: u16,
    /// The session addressed on that door (`ses_…`).
    pub session_id: String,
}

impl PeerAddr {
    /// Parse `localhost:<port>/<ses_id>`, optionally with an `http://` prefix and a trailing `/`.
    pub fn parse(text: &str) -> Result<PeerAddr, String> {
        let t = text.trim();
        let rest = t
            .strip_prefix("http://")
            .or_else(|| t.strip_prefix("HTTP://"))
            .unwrap_or(t);
        if rest.contains("://") {
            return Err(format!(
                "'{t}' is not a peer address: peers are reached over plain http on this machine (localhost:<port>/<session id>)"
            ));
        }
        let rest = rest.trim_end_matches('/');
        let Some((hostport, session)) = rest.split_once('/') else {
            return Err(format!(
                "'{t}' is not a peer address: it needs the session id after the port (localhost:<port>/<session id>)"
            ));
        };
        let (host, port) = split_host_port(hostport).ok_or_else(|| {
            format!("'{t}' is not a peer address: it needs host:port before the session id")
        })?;
        let port = port.ok_or_else(|| {
            format!("'{t}' is not a peer address: it needs the door's port (localhost:<port>/<session id>)")
        })?;
        if !is_session_id(session) {
            return Err(format!(
                "'{t}' is not a peer address: '{session}' is not a session id (ses_ and 32 hex digits)"
            ));
        }
        if !is_loopback(&host) {
            return Err(format!(
                "'{t}' is not on this machine: peer files are handed over only between capsules on loopback (localhost)"
            ));
        }
        Ok(PeerAddr {
            host,
            port,
            session_id: session.to_string(),
        })
    }

    /// `http://host:port`, the door this peer is reached on.
    pub fn door_url(&self) -> String {
        format!("http://{}:{}", self.host, self.port)
    }

    /// True when an entry of `capabilities.peer_fetch.allow` admits this peer: same host
    /// (case-insensitive) and, when the entry names a port, the same port.
    pub fn allowed_by(&self, allow: &[String]) -> bool {
        allow.iter().any(|entry| {
            let e = entry.trim();
            let e = e
                .strip_prefix("http://")
                .or_else(|| e.strip_prefix("https://"))
                .unwrap_or(e)
                .trim_end_matches('/');
            match split_host_port(e) {
                Some((host, port)) => host == self.host && port.is_none_or(|p| p == self.port),
                None => false,
            }
        })
    }
}

impl fmt::Display for PeerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}/{}", self.host, self.port, self.session_id)
    }
}

/// The audience a handle is bound to: `<card name>@localhost:<port>/<ses_id>`, lowercased.
pub fn audience(card_name: &str, port: u16, session_id: &str) -> String {
    format!("{card_name}@localhost:{port}/{session_id}").to_lowercase()
}

/// Split `host[:port]`; `None` when the port is not a number or the host is empty.
fn split_host_port(text: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(end) = text.strip_prefix('[').and_then(|r| r.find(']')) {
        let host = &text[..end + 2];
        let after = &text[end + 2..];
        match after.strip_prefix(':') {
            Some(p) => (host, Some(p)),
            None if after.is_empty() => (host, None),
            None => return None,
        }
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((host.to_ascii_lowercase(), port))
}

fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host == "[::1]"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `ses_` followed by 32 lowercase hex digits.
pub fn is_session_id(s: &str) -> bool {
    s.strip_prefix("ses_")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SES: &str = "ses_0192f0c3a1b27c3d8e9f00112233aabb";

    #[test]
    fn parses_the_printed_forms() {
        let a = PeerAddr::parse(&format!("localhost:4100/{SES}")).unwrap();
        assert_eq!(a.port, 4100);
        assert_eq!(a.to_string(), format!("localhost:4100/{SES}"));
        let b = PeerAddr::parse(&format!("http://127.0.0.1:4100/{SES}/")).unwrap();
        assert_eq!(b.host, "127.0.0.1");
        assert_eq!(b.door_url(), "http://127.0.0.1:4100");
    }

    #[test]
    fn refuses_what_is_not_a_local_peer() {
        for bad in [
            "localhost:4100".to_string(),
            format!("localhost/{SES}"),
            "localhost:4100/ses_nothex".to_string(),
            format!("example.com:443/{SES}"),
            format!("https://localhost:4100/{SES}"),
            format!("localhost:99999/{SES}"),
        ] {
            assert!(PeerAddr::parse(&bad).is_err(), "{bad} should be refused");
        }
        let err = PeerAddr::parse(&format!("example.com:443/{SES}")).unwrap_err();
        assert!(err.contains("not on this machine"), "{err}");
    }

    #[test]
    fn allow_entries_match_host_and_optional_port() {
        let a = PeerAddr::parse(&format!("localhost:4100/{SES}")).unwrap();
        assert!(a.allowed_by(&["localhost".into()]));
        assert!(a.allowed_by(&["LOCALHOST:4100".into()]));
        assert!(a.allowed_by(&["http://localhost:4100".into()]));
        assert!(!a.allowed_by(&["localhost:4101".into()]));
        assert!(!a.allowed_by(&["127.0.0.1".into(), "example.com".into()]));
    }

    #[test]
    fn audience_is_lowercased_and_uses_localhost() {
        assert_eq!(
            audience("Outbox", 4100, SES),
            format!("outbox@localhost:4100/{SES}")
        );
    }
}
