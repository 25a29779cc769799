//! What the fake answers: scripted replies and the fallback for requests past the script.

use std::time::Duration;

use serde_json::Value;

/// One server-sent event: an optional `event:` line and a `data:` payload.
#[derive(Clone, Debug, PartialEq)]
pub struct SseEvent {
    /// The `event:` name, if the line is sent.
    pub event: Option<String>,
    /// The `data:` payload (one line; JSON or `[DONE]`).
    pub data: String,
}

impl SseEvent {
    /// An event with both an `event:` line and a JSON `data:` line (Anthropic style).
    pub fn named(event: &str, data: Value) -> SseEvent {
        SseEvent {
            event: Some(event.to_string()),
            data: data.to_string(),
        }
    }

    /// A `data:`-only event (OpenAI style).
    pub fn data(data: impl Into<String>) -> SseEvent {
        SseEvent {
            event: None,
            data: data.into(),
        }
    }

    /// The bytes of this event on the wire, blank line included.
    pub fn to_wire(&self) -> String {
        match &self.event {
            Some(e) => format!("event: {e}\ndata: {}\n\n", self.data),
            None => format!("data: {}\n\n", self.data),
        }
    }
}

/// One scripted answer to one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A JSON body with a status and extra headers (e.g. `retry-after`).
    Json {
        /// HTTP status.
        status: u16,
        /// Extra response headers.
        headers: Vec<(String, String)>,
        /// The body.
        body: Value,
    },
    /// Any body with any content type: garbage, HTML error pages, plain text.
    Text {
        /// HTTP status.
        status: u16,
        /// The `content-type` header.
        content_type: String,
        /// Extra response headers.
        headers: Vec<(String, String)>,
        /// The body, verbatim.
        body: String,
    },
    /// A 200 `text/event-stream`, sent chunked, one chunk per event.
    Sse {
        /// The events, in order.
        events: Vec<SseEvent>,
        /// Pause this long after the n-th event (to prove the client parses incrementally).
        pause: Option<(usize, Duration)>,
        /// Abort the connection after this many events (a stream broken mid-way).
        cut_after: Option<usize>,
    },
    /// Read the request, then close the connection without a byte of reply.
    Drop,
    /// Send the head with a `content-length` 4096 bytes longer than `body`, send `body`, close.
    Partial {
        /// HTTP status.
        status: u16,
        /// The part of the body that is sent.
        body: String,
    },
    /// Never answer, until [`crate::FakeProvider::release_hangs`] or the server is dropped.
    Hang,
    /// Wait, then give the inner reply.
    Delay(Duration, Box<Reply>),
}

impl Reply {
    /// A 200 JSON reply.
    pub fn json(body: Value) -> Reply {
        Reply::Json {
            status: 200,
            headers: Vec::new(),
            body,
        }
    }

    /// A JSON reply with a given status (provider error bodies).
    pub fn status(status: u16, body: Value) -> Reply {
        Reply::Json {
            status,
            headers: Vec::new(),
            body,
        }
    }

    /// A JSON reply with a status and extra headers.
    pub fn status_with_headers(status: u16, headers: &[(&str, &str)], body: Value) -> Reply {
        Reply::Json {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body,
        }
    }

    /// A 200 event stream that ends cleanly after `events`.
    pub fn sse(events: Vec<SseEvent>) -> Reply {
        Reply::Sse {
            events,
            pause: None,
            cut_after: None,
        }
    }

    /// A body that is neither JSON nor an event stream.
    pub fn garbage(status: u16, body: &str) -> Reply {
        Reply::Text {
            status,
            content_type: "text/html".to_string(),
            headers: Vec::new(),
            body: body.to_string(),
        }
    }
}

/// How to answer requests once the script is used up (the bin uses this for every request).
#[derive(Clone, Debug)]
pub enum Fallback {
    /// Answer every inference request with this text, in the shape the path asks for
    /// (`/v1/messages`, `…/chat/completions`, `…/responses`), streamed when the request says
    /// `"stream": true`.
    Text(String),
}
