//! Identifiers: `ses_`, `evt_`, `tsk_`, `ctx_`, `dlg_`, `msg_` + 32 hex of a UUIDv7.
//!
//! UUIDv7 ids sort by mint time as plain strings, which is what `mur trace` relies on to find the
//! newest session, and the first 12 hex digits are the mint time in Unix milliseconds.

use uuid::Uuid;

/// Mint a new id with the given prefix (`"ses_"`, `"evt_"`, …).
pub fn mint(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + 32);
    out.push_str(prefix);
    out.push_str(
        Uuid::now_v7()
            .simple()
            .encode_lower(&mut Uuid::encode_buffer()),
    );
    out
}

/// A new session id (`ses_…`).
pub fn session_id() -> String {
    mint("ses_")
}

/// True when `s` looks like a full session id: `ses_` + 32 lowercase hex digits.
pub fn is_session_id(s: &str) -> bool {
    s.len() == 36
        && s.starts_with("ses_")
        && s[4..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_prefix_and_sort_by_time() {
        let a = session_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = session_id();
        assert!(is_session_id(&a), "{a}");
        assert!(a < b);
        assert!(mint("evt_").starts_with("evt_"));
        assert!(!is_session_id("ses_XYZ"));
    }
}
