//! The record of each request the fake received, and its golden-file rendering.

use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Header names whose values are secrets: recorded as a digest, never verbatim.
const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "api-key",
    "proxy-authorization",
    "cookie",
];

/// The stand-in recorded for a secret header value: `[secret sha256:<12 hex>]`.
///
/// Tests compare a recorded header with `secret_digest("test-key")` to prove the right key was
/// sent without the key itself ever being stored.
pub fn secret_digest(value: &str) -> String {
    let digest = Sha256::digest(value.as_bytes());
    format!("[secret sha256:{}]", &hex::encode(digest)[..12])
}

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// 0-based arrival index.
    pub index: usize,
    /// `POST`, `GET`, …
    pub method: String,
    /// Path and query, e.g. `/v1/messages`.
    pub path: String,
    /// Lowercased header names with values in arrival order; secret values replaced by
    /// [`secret_digest`].
    pub headers: Vec<(String, String)>,
    /// The body as text (lossy UTF-8); empty when the server keeps no bodies
    /// ([`crate::FakeProvider::keep_bodies`]).
    pub raw_body: String,
    /// The body parsed as JSON, when it is JSON (and bodies are kept).
    pub body: Option<Value>,
    /// When the request head arrived.
    pub arrived: Instant,
    /// Time the server spent on it: reading the body, recording, building the reply (not
    /// scripted pauses or delays, not writing the reply).
    pub handled: Duration,
}

impl RecordedRequest {
    /// The value of the first header with this (lowercase) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// How many times a header appears.
    pub fn header_count(&self, name: &str) -> usize {
        self.headers.iter().filter(|(k, _)| k == name).count()
    }

    /// A stable text form for golden files: request line, headers sorted by name (the port in
    /// `host` replaced by `<port>`), a blank line, and the body pretty-printed.
    pub fn golden(&self, port: u16) -> String {
        let mut headers = self.headers.clone();
        headers.sort();
        let port_text = format!(":{port}");
        let mut out = format!("{} {}\n", self.method, self.path);
        for (k, v) in headers {
            out.push_str(&format!("{k}: {}\n", v.replace(&port_text, ":<port>")));
        }
        out.push('\n');
        match &self.body {
            Some(v) => out.push_str(&serde_json::to_string_pretty(v).unwrap_or_default()),
            None => out.push_str(&self.raw_body),
        }
        out.push('\n');
        out
    }
}

/// Records a header value, hiding it when its name marks a secret.
pub(crate) fn record_header(name: &str, value: &[u8]) -> String {
    let text = String::from_utf8_lossy(value);
    if SECRET_HEADERS.contains(&name) {
        secret_digest(&text)
    } else {
        text.into_owned()
    }
}
