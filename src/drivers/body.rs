//! Reading a 2xx reply: decide JSON or event stream, then hand it to the driver's parser.
//!
//! Drivers always ask to stream, but test servers and some OpenAI-compatible servers answer with
//! one JSON document anyway. The `content-type` decides when it is clear; otherwise the first
//! non-blank bytes do (`{`/`[` is JSON, `event:`/`data:`/`:` is a stream). Anything else is a
//! malformed reply, reported with the start of the body so the user can see what came back.
//!
//! The decoding is a [`ReplyDecoder`] fed chunk by chunk, with no I/O of its own: `read_reply`
//! feeds it from the HTTP body, and the hostile-input harness (`crate::hostile`) feeds it bytes
//! split wherever the fuzzer likes, so both see the same parser.

use mur_actors::model::InferReply;
use serde_json::Value;

use super::http::{excerpt, Transport};
use super::retry::Failure;
use super::sse::{SseEvent, SseParser};

/// The most a JSON reply may hold before it is refused.
const MAX_JSON_BYTES: usize = 64 * 1024 * 1024;

/// The stream prefixes that make a body without a clear content-type an event stream.
const SSE_PREFIXES: [&str; 5] = ["event:", "data:", ":", "id:", "retry:"];

/// A provider-specific builder of a reply from stream events.
pub(crate) trait StreamAssembler {
    /// Handles one event; `Ok(true)` when it was the terminal event.
    fn on_event(&mut self, event: SseEvent) -> Result<bool, Failure>;
    /// Builds the reply. `terminal` says whether the terminal event arrived; `events` is how
    /// many events were seen (for messages).
    fn finish(self, terminal: bool, events: usize) -> Result<InferReply, Failure>;
    /// A whole JSON reply read without a `Value` tree, when it has the provider's common shape;
    /// `None` (the default) hands it to the driver's `Value` reading, which decides everything
    /// else. Whatever it answers must be what the `Value` reading would.
    fn parse_json_fast(&self, _body: &[u8]) -> Option<InferReply> {
        None
    }
}

/// What the decoder has decided about the body so far.
enum Mode {
    /// Not yet known: the bytes so far are blank or too few to tell.
    Sniffing(Vec<u8>),
    /// One JSON document, read whole.
    Json(Vec<u8>),
    /// An event stream, parsed as it arrives.
    Sse(SseParser),
}

/// Decodes one reply body, fed chunk by chunk.
pub(crate) struct ReplyDecoder<'u, A> {
    url: &'u str,
    content_type: String,
    mode: Mode,
    assembler: Option<A>,
    events: Vec<SseEvent>,
}

impl<'u, A: StreamAssembler> ReplyDecoder<'u, A> {
    /// A decoder for a reply from `url` with this `content-type` header (may be empty).
    pub(crate) fn new(url: &'u str, content_type: &str, assembler: A) -> Self {
        ReplyDecoder {
            url,
            content_type: content_type.to_ascii_lowercase(),
            mode: Mode::Sniffing(Vec::new()),
            assembler: Some(assembler),
            events: Vec::new(),
        }
    }

    /// Feeds one chunk. `Ok(Some(reply))` once a stream's terminal event has arrived (the rest
    /// of the body is not needed).
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Option<InferReply>, Failure> {
        match &mut self.mode {
            Mode::Sniffing(head) => {
                head.extend_from_slice(chunk);
                let head = std::mem::take(head);
                self.decide(head, false)
            }
            Mode::Json(body) => {
                body.extend_from_slice(chunk);
                self.check_json_size().map(|()| None)
            }
            Mode::Sse(parser) => {
                parser.push(chunk, &mut self.events);
                self.drain()
            }
        }
    }

    /// Ends the body: parses a JSON document with `parse_json`, or finishes the stream.
    pub(crate) fn finish(
        mut self,
        parse_json: impl FnOnce(Value) -> Result<InferReply, Failure>,
    ) -> Result<InferReply, Failure> {
        if let Mode::Sniffing(head) = &mut self.mode {
            let head = std::mem::take(head);
            if let Some(reply) = self.decide(head, true)? {
                return Ok(reply);
            }
        }
        match std::mem::replace(&mut self.mode, Mode::Sniffing(Vec::new())) {
            Mode::Sniffing(_) => Err(Failure::malformed(format!(
                "the reply from {} has an empty body",
                self.url
            ))),
            Mode::Json(body) => {
                let fast = self
                    .assembler
                    .as_ref()
                    .and_then(|a| a.parse_json_fast(&body));
                if let Some(reply) = fast {
                    return Ok(reply);
                }
                let value: Value = serde_json::from_slice(&body).map_err(|e| {
                    Failure::malformed(format!(
                        "the reply from {} is not valid JSON ({e}); it starts with '{}'",
                        self.url,
                        excerpt(String::from_utf8_lossy(&body).trim(), 120)
                    ))
                })?;
                parse_json(value)
            }
            Mode::Sse(mut parser) => {
                parser.finish(&mut self.events);
                if let Some(reply) = self.drain()? {
                    return Ok(reply);
                }
                match self.assembler.take() {
                    Some(assembler) => assembler.finish(false, parser.dispatched),
                    None => Err(Failure::malformed(format!(
                        "the reply from {} was finished twice",
                        self.url
                    ))),
                }
            }
        }
    }

    /// Chooses JSON or stream once the head tells (or the body has ended: `at_end`).
    fn decide(&mut self, head: Vec<u8>, at_end: bool) -> Result<Option<InferReply>, Failure> {
        let Some(first) = head.iter().position(|b| !b.is_ascii_whitespace()) else {
            self.mode = Mode::Sniffing(head);
            return Ok(None);
        };
        let start = &head[first..];
        let says_sse = self.content_type.contains("text/event-stream");
        let says_json = self.content_type.contains("json");
        let looks_sse = SSE_PREFIXES.iter().any(|p| start.starts_with(p.as_bytes()));
        // A stream prefix may still be arriving ("eve" of "event:"): wait for more bytes.
        let may_become_sse = SSE_PREFIXES
            .iter()
            .any(|p| p.len() > start.len() && p.as_bytes().starts_with(start));
        let json_first = start[0] == b'{' || start[0] == b'[';
        let is_sse = says_sse || (!says_json && !json_first && looks_sse);
        let is_json = !is_sse && (says_json || json_first);
        if is_json {
            self.mode = Mode::Json(head);
            return self.check_json_size().map(|()| None);
        }
        if is_sse {
            let mut parser = SseParser::default();
            parser.push(&head, &mut self.events);
            self.mode = Mode::Sse(parser);
            return self.drain();
        }
        if may_become_sse && !at_end {
            self.mode = Mode::Sniffing(head);
            return Ok(None);
        }
        let start = String::from_utf8_lossy(start);
        Err(Failure::malformed(format!(
            "the reply from {} is neither JSON nor an event stream (content-type '{}'); \
             it starts with '{}'",
            self.url,
            self.content_type,
            excerpt(start.trim(), 120)
        )))
    }

    fn check_json_size(&self) -> Result<(), Failure> {
        match &self.mode {
            Mode::Json(body) if body.len() > MAX_JSON_BYTES => Err(Failure::malformed(format!(
                "the reply from {} is larger than {MAX_JSON_BYTES} bytes",
                self.url
            ))),
            _ => Ok(()),
        }
    }

    /// Hands the events parsed so far to the assembler; the reply once the terminal one came.
    fn drain(&mut self) -> Result<Option<InferReply>, Failure> {
        let Mode::Sse(parser) = &self.mode else {
            return Ok(None);
        };
        let dispatched = parser.dispatched;
        for ev in std::mem::take(&mut self.events) {
            // After the terminal event the assembler is gone and the rest is ignored.
            let Some(assembler) = self.assembler.as_mut() else {
                return Ok(None);
            };
            if assembler.on_event(ev)? {
                if let Some(assembler) = self.assembler.take() {
                    return assembler.finish(true, dispatched).map(Some);
                }
            }
        }
        Ok(None)
    }
}

/// Reads `resp` to the end (or its terminal event) and builds the reply.
pub(crate) async fn read_reply<A: StreamAssembler>(
    transport: &Transport,
    url: &str,
    mut resp: reqwest::Response,
    assembler: A,
    parse_json: impl FnOnce(Value) -> Result<InferReply, Failure>,
) -> Result<InferReply, Failure> {
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let mut decoder = ReplyDecoder::new(url, &content_type, assembler);
    loop {
        match resp.chunk().await {
            Ok(Some(c)) => {
                if let Some(reply) = decoder.push(&c)? {
                    return Ok(reply);
                }
            }
            Ok(None) => return decoder.finish(parse_json),
            Err(e) => return Err(transport.read_failure(url, &e)),
        }
    }
}

/// A non-negative integer member, or `None` (never a made-up zero).
pub(crate) fn count(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}
