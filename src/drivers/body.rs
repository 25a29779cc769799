//! Reading a 2xx reply: decide JSON or event stream, then hand it to the driver's parser.
//!
//! Drivers always ask to stream, but test servers and some OpenAI-compatible servers answer with
//! one JSON document anyway. The `content-type` decides when it is clear; otherwise the first
//! non-blank byte does (`{`/`[` is JSON, `event:`/`data:`/`:` is a stream). Anything else is a
//! malformed reply, reported with the start of the body so the user can see what came back.

use mur_actors::model::InferReply;
use serde_json::Value;

use super::http::{excerpt, Transport};
use super::retry::Failure;
use super::sse::{SseEvent, SseParser};

/// The most a JSON reply may hold before it is refused.
const MAX_JSON_BYTES: usize = 64 * 1024 * 1024;

/// A provider-specific builder of a reply from stream events.
pub(crate) trait StreamAssembler {
    /// Handles one event; `Ok(true)` when it was the terminal event.
    fn on_event(&mut self, event: SseEvent) -> Result<bool, Failure>;
    /// Builds the reply. `terminal` says whether the terminal event arrived; `events` is how
    /// many events were seen (for messages).
    fn finish(self, terminal: bool, events: usize) -> Result<InferReply, Failure>;
}

/// Reads `resp` to the end (or its terminal event) and builds the reply.
pub(crate) async fn read_reply<A: StreamAssembler>(
    transport: &Transport,
    url: &str,
    mut resp: reqwest::Response,
    mut assembler: A,
    parse_json: impl FnOnce(Value) -> Result<InferReply, Failure>,
) -> Result<InferReply, Failure> {
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut head: Vec<u8> = Vec::new();
    let first = loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                head.extend_from_slice(&c);
                if let Some(b) = head.iter().find(|b| !b.is_ascii_whitespace()) {
                    break Some(*b);
                }
            }
            Ok(None) => break None,
            Err(e) => return Err(transport.read_failure(url, &e)),
        }
    };
    let Some(first) = first else {
        return Err(Failure::malformed(format!(
            "the reply from {url} has an empty body"
        )));
    };
    let start = String::from_utf8_lossy(&head).trim_start().to_string();
    let looks_sse = ["event:", "data:", ":", "id:", "retry:"]
        .iter()
        .any(|p| start.starts_with(p));
    let is_sse = content_type.contains("text/event-stream")
        || (!content_type.contains("json") && first != b'{' && first != b'[' && looks_sse);
    let is_json = !is_sse && (content_type.contains("json") || first == b'{' || first == b'[');
    if is_json {
        let mut body = head;
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    body.extend_from_slice(&c);
                    if body.len() > MAX_JSON_BYTES {
                        return Err(Failure::malformed(format!(
                            "the reply from {url} is larger than {MAX_JSON_BYTES} bytes"
                        )));
                    }
                }
                Ok(None) => break,
                Err(e) => return Err(transport.read_failure(url, &e)),
            }
        }
        let value: Value = serde_json::from_slice(&body).map_err(|e| {
            Failure::malformed(format!(
                "the reply from {url} is not valid JSON ({e}); it starts with '{}'",
                excerpt(String::from_utf8_lossy(&body).trim(), 120)
            ))
        })?;
        return parse_json(value);
    }
    if !is_sse {
        return Err(Failure::malformed(format!(
            "the reply from {url} is neither JSON nor an event stream (content-type '{content_type}'); \
             it starts with '{}'",
            excerpt(start.trim(), 120)
        )));
    }
    let mut parser = SseParser::default();
    let mut events = Vec::new();
    parser.push(&head, &mut events);
    loop {
        for ev in events.drain(..) {
            if assembler.on_event(ev)? {
                return assembler.finish(true, parser.dispatched);
            }
        }
        match resp.chunk().await {
            Ok(Some(c)) => parser.push(&c, &mut events),
            Ok(None) => {
                parser.finish(&mut events);
                for ev in events.drain(..) {
                    if assembler.on_event(ev)? {
                        return assembler.finish(true, parser.dispatched);
                    }
                }
                return assembler.finish(false, parser.dispatched);
            }
            Err(e) => return Err(transport.read_failure(url, &e)),
        }
    }
}

/// A non-negative integer member, or `None` (never a made-up zero).
pub(crate) fn count(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}
