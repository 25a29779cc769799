//! Asking a peer's door who it is, and the one HTTP client both peer tools use.
//!
//! The card is what `GET /<ses_id>` answers on the peer's door; its `name` is the capsule name
//! the audience is built from. A peer that is not live (or not there at all) cannot be minted
//! for: there is nobody to bind the handle to.

use std::sync::LazyLock;
use std::time::Duration;

use super::address::PeerAddr;

/// How long one request to a peer's door may take.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(30);

static CLIENT: LazyLock<Result<reqwest::Client, String>> = LazyLock::new(|| {
    // Peers' doors are plain http on loopback: no certificate is ever verified.
    crate::tls::client_builder("http://127.0.0.1")
        .connect_timeout(Duration::from_secs(5))
        .timeout(PEER_TIMEOUT)
        .no_proxy()
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))
});

/// The process's client for peer doors (plain http to loopback, no proxy).
pub fn client() -> Result<reqwest::Client, String> {
    CLIENT.clone()
}

/// The `name` on `peer`'s card, or why it could not be read.
pub async fn card_name(peer: &PeerAddr) -> Result<String, String> {
    let url = format!("{}/{}", peer.door_url(), peer.session_id);
    let response = client()?
        .get(&url)
        .send()
        .await
        .map_err(|e| format!("cannot reach {peer}: {}", root_cause(&e)))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "{peer} has no live session there (its door answered {})",
            status.as_u16()
        ));
    }
    let card: serde_json::Value = response
        .json()
        .await
        .map_err(|e| format!("{peer} answered with something that is not an agent card: {e}"))?;
    match card.get("name").and_then(|n| n.as_str()) {
        Some(n) if !n.trim().is_empty() => Ok(n.trim().to_string()),
        _ => Err(format!("{peer}'s agent card has no name")),
    }
}

/// The innermost error of a chain, which is the one that says what happened.
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}
