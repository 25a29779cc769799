//! Model drivers behind the kernel's `ModelDriver` trait: Anthropic and OpenAI over HTTP, and
//! the scripted model (`script`) that runs offline.
//!
//! All are built into `mur` (native Rust over reqwest for the HTTP ones): declaring
//! `murmur/driver-anthropic` or `murmur/driver-openai` with a `gateway:` is enough. Each driver owns one HTTP client, sends
//! the same request bytes on every attempt, retries transient failures itself (reporting each
//! retry through the kernel's `RetrySink`), and turns every bad reply into an `InferError` with a
//! sentence a user can act on; nothing here panics on provider input, and the key never appears
//! in an error, a log line or `Debug` output.
//!
//! Layout: [`config`] (the plain config struct and endpoint rules), `http` (client, status
//! classification, redaction), `retry` (backoff loop), `sse` (incremental event-stream parser),
//! `body` (JSON-or-stream sniffing), then one file per provider surface.

mod anthropic;
mod anthropic_reply;
mod anthropic_request;
mod body;
mod chat_completion;
pub mod config;
mod encode;
mod http;
mod openai;
mod openai_reply;
mod openai_request;
mod openai_responses;
mod options;
mod request_body;
mod retry;
pub mod script;
mod sse;
mod strict;

use std::sync::Arc;

use mur_actors::model::ModelDriver;

pub use anthropic::{AnthropicDriver, ANTHROPIC_VERSION};
pub use config::{
    validate_endpoint, HttpDriverConfig, RetryPolicy, DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT,
};
pub use openai::{OpenAiApi, OpenAiDriver};

/// The artifact name of the built-in Anthropic driver.
pub const ANTHROPIC_DRIVER: &str = "murmur/driver-anthropic";
/// The artifact name of the built-in OpenAI driver.
pub const OPENAI_DRIVER: &str = "murmur/driver-openai";

/// Builds `murmur/driver-anthropic` (Messages API at `{endpoint}/v1/messages`).
///
/// Fails with a sentence naming `cfg.artifact` when the endpoint, key or driver config is bad.
pub fn anthropic(cfg: HttpDriverConfig) -> Result<Arc<dyn ModelDriver>, String> {
    anthropic::build(&cfg)
}

/// Builds `murmur/driver-openai` (`{endpoint}/chat/completions`, or `{endpoint}/responses` for
/// models that need it).
pub fn openai(cfg: HttpDriverConfig) -> Result<Arc<dyn ModelDriver>, String> {
    openai::build(&cfg)
}

/// Builds the built-in HTTP driver named `name` (`murmur/driver-anthropic` or
/// `murmur/driver-openai`); `None` when the name is not one of them.
pub fn http_driver(
    name: &str,
    cfg: HttpDriverConfig,
) -> Option<Result<Arc<dyn ModelDriver>, String>> {
    match name {
        ANTHROPIC_DRIVER => Some(anthropic(cfg)),
        OPENAI_DRIVER => Some(openai(cfg)),
        _ => None,
    }
}

/// Panics unless a reply for `api` that arrived in `chunks` with this `content-type` decodes
/// to the same reply, or the same error, with the driver's typed fast paths (whole Chat
/// Completions replies and chunks, Anthropic's content deltas) as with the `Value` reading
/// that defines them. For the hostile-input harness.
#[doc(hidden)]
pub fn check_readings_agree<'c>(
    api: ReplyApi,
    content_type: &str,
    chunks: impl IntoIterator<Item = &'c [u8]> + Clone,
) {
    type Reply = Result<mur_actors::model::InferReply, retry::Failure>;
    /// Decodes with each of the two assemblers, then parses a JSON body with `parse`.
    fn both<'c, A: body::StreamAssembler>(
        content_type: &str,
        chunks: impl IntoIterator<Item = &'c [u8]> + Clone,
        [typed, by_value]: [A; 2],
        parse: fn(serde_json::Value) -> Reply,
    ) -> [Result<mur_actors::model::InferReply, String>; 2] {
        [typed, by_value].map(|assembler| {
            let decoder = body::ReplyDecoder::new(FUZZ_URL, content_type, assembler);
            feed(decoder, chunks.clone(), parse).map_err(failure_text)
        })
    }
    use anthropic_reply::AnthropicStream;
    use openai_reply::ChatStream;
    let [typed, by_value] = match api {
        ReplyApi::OpenAiChat => both(
            content_type,
            chunks,
            [ChatStream::new(FUZZ_URL), ChatStream::value_only(FUZZ_URL)],
            |v| openai_reply::parse_chat(FUZZ_URL, v),
        ),
        ReplyApi::AnthropicMessages => both(
            content_type,
            chunks,
            [
                AnthropicStream::new(FUZZ_URL),
                AnthropicStream::value_only(FUZZ_URL),
            ],
            |v| anthropic_reply::parse_message(FUZZ_URL, v),
        ),
        ReplyApi::OpenAiResponses => return,
    };
    assert_eq!(
        typed, by_value,
        "the typed and Value readings of a {api:?} reply differ"
    );
}

/// The URL replies decoded without a network are said to come from.
const FUZZ_URL: &str = "http://127.0.0.1:1/fuzz";

/// Feeds `chunks` to `decoder` and finishes it, as `body::read_reply` does off the network.
fn feed<'c, A: body::StreamAssembler>(
    mut decoder: body::ReplyDecoder<'_, A>,
    chunks: impl IntoIterator<Item = &'c [u8]>,
    parse_json: impl FnOnce(serde_json::Value) -> Result<mur_actors::model::InferReply, retry::Failure>,
) -> Result<mur_actors::model::InferReply, retry::Failure> {
    for chunk in chunks {
        if let Some(reply) = decoder.push(chunk)? {
            return Ok(reply);
        }
    }
    decoder.finish(parse_json)
}

/// The sentence a session would see for `f`.
fn failure_text(f: retry::Failure) -> String {
    match f {
        retry::Failure::Transient { message, .. } => message,
        retry::Failure::Fatal(e) => e.message,
    }
}

/// The provider surfaces whose replies [`decode_reply`] can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyApi {
    /// Anthropic Messages (`/v1/messages`).
    AnthropicMessages,
    /// OpenAI Chat Completions (`/chat/completions`).
    OpenAiChat,
    /// OpenAI Responses (`/responses`).
    OpenAiResponses,
}

/// Decodes a 2xx reply body that arrived in `chunks` with this `content-type`, exactly as the
/// driver for `api` reads one off the network (JSON or event stream, then the provider's
/// parser). `Err` is the sentence the session would see. For the hostile-input harness and its
/// regression tests: no network, no retries.
pub fn decode_reply<'c>(
    api: ReplyApi,
    content_type: &str,
    chunks: impl IntoIterator<Item = &'c [u8]>,
) -> Result<mur_actors::model::InferReply, String> {
    use body::ReplyDecoder;
    const URL: &str = FUZZ_URL;
    let result = match api {
        ReplyApi::AnthropicMessages => feed(
            ReplyDecoder::new(
                URL,
                content_type,
                anthropic_reply::AnthropicStream::new(URL),
            ),
            chunks,
            |v| anthropic_reply::parse_message(URL, v),
        ),
        ReplyApi::OpenAiChat => feed(
            ReplyDecoder::new(URL, content_type, openai_reply::ChatStream::new(URL)),
            chunks,
            |v| openai_reply::parse_chat(URL, v),
        ),
        ReplyApi::OpenAiResponses => feed(
            ReplyDecoder::new(
                URL,
                content_type,
                openai_responses::ResponsesStream::new(URL),
            ),
            chunks,
            |v| openai_responses::parse_response(URL, &v),
        ),
    };
    result.map_err(failure_text)
}
