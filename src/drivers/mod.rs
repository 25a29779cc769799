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
mod body;
pub mod config;
mod http;
mod openai;
mod openai_reply;
mod openai_responses;
mod options;
mod retry;
pub mod script;
mod sse;

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
