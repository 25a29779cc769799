//! `murmur/driver-anthropic`: the Anthropic Messages API (`POST {endpoint}/v1/messages`).
//!
//! Translation choices (the neutral shapes are the kernel's, see `mur_actors::model`):
//! - the system prompt is one `text` block marked for the prompt cache, omitted when blank;
//! - tools go out as `{name, description, input_schema}`, the last one cache-marked;
//! - consecutive `tool` messages become one `user` message of `tool_result` blocks (the API wants
//!   every result of a turn together), and a failed or refused call carries `is_error: true`;
//! - `thinking` blocks go back only when `driver.config.thinking` is `enabled` and they carry a
//!   signature (the API refuses unsigned ones);
//! - a `tool_call` whose input is not an object (the model sent malformed JSON earlier, kept as a
//!   string) is sent back as `{"raw_arguments": <string>}`, since the API wants an object;
//! - the request always asks to stream; a plain JSON answer is accepted too.
//!
//! `driver.config` keys: `prompt_cache` (`enabled`/`disabled` or a bool; default enabled),
//! `thinking` (`enabled`/`disabled`), `thinking_budget_tokens` (default 1024, kept below
//! `max_tokens`), `beta_features` (a string or list, sent as `anthropic-beta`). Any other key is
//! refused when the driver is built, so a typo does not silently change nothing.

use std::sync::Arc;

use async_trait::async_trait;
use mur_actors::model::{
    InferError, InferErrorKind, InferReply, InferRequest, ModelDriver, RetrySink,
};
use serde_json::Value;

use super::anthropic_reply::{parse_message, AnthropicStream};
use super::anthropic_request::{self, BodyOptions};
use super::body::read_reply;
use super::config::{HttpDriverConfig, RetryPolicy};
use super::http::{AuthStyle, Target, Transport};
use super::options::Options;
use super::request_body::RequestBody;
use super::retry::with_retries;

/// The `anthropic-version` header value.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Options read from `inference.driver.config`.
#[derive(Clone, Debug)]
struct AnthropicOptions {
    prompt_cache: bool,
    thinking: bool,
    thinking_budget: u32,
    beta: Option<String>,
}

impl AnthropicOptions {
    fn parse(artifact: &str, config: Option<&Value>) -> Result<AnthropicOptions, String> {
        let opts = Options::new(
            artifact,
            config,
            &[
                "prompt_cache",
                "thinking",
                "thinking_budget_tokens",
                "beta_features",
            ],
        )?;
        Ok(AnthropicOptions {
            prompt_cache: opts.switch("prompt_cache")?.unwrap_or(true),
            thinking: opts.switch("thinking")?.unwrap_or(false),
            thinking_budget: opts.positive("thinking_budget_tokens")?.unwrap_or(1024),
            beta: opts.string_or_list("beta_features")?,
        })
    }
}

/// The Anthropic driver. Built by [`super::anthropic`].
pub struct AnthropicDriver {
    name: String,
    target: Target,
    transport: Transport,
    retry: RetryPolicy,
    options: AnthropicOptions,
}

impl std::fmt::Debug for AnthropicDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicDriver")
            .field("name", &self.name)
            .field("url", &self.target.as_str())
            .finish_non_exhaustive()
    }
}

impl AnthropicDriver {
    /// Builds the driver; the error names the artifact and what is wrong.
    pub fn new(cfg: &HttpDriverConfig) -> Result<AnthropicDriver, String> {
        let options = AnthropicOptions::parse(&cfg.artifact, cfg.driver_config.as_ref())?;
        let mut extra = vec![("anthropic-version", ANTHROPIC_VERSION.to_string())];
        if let Some(beta) = &options.beta {
            extra.push(("anthropic-beta", beta.clone()));
        }
        let transport = Transport::new(cfg, AuthStyle::XApiKey, &extra)?;
        Ok(AnthropicDriver {
            name: cfg.artifact.clone(),
            target: transport.target("/v1/messages"),
            transport,
            retry: cfg.retry,
            options,
        })
    }

    /// The Messages API request body for a neutral request, as the bytes sent.
    ///
    /// The history's encoding is kept in the history between calls (`super::encode`), so a
    /// call encodes only what was added since the last one.
    pub fn request_body(&self, req: &InferRequest) -> Result<Vec<u8>, InferError> {
        self.encode(req).map(|body| body.to_vec())
    }

    /// The request body as it is sent: in pieces, the history's kept encoding lent, not copied.
    fn encode(&self, req: &InferRequest) -> Result<RequestBody, InferError> {
        let opts = BodyOptions {
            prompt_cache: self.options.prompt_cache,
            thinking: self.options.thinking,
            thinking_budget: self.options.thinking_budget,
        };
        anthropic_request::body(req, &opts).map_err(|e| {
            InferError::new(
                InferErrorKind::Driver,
                format!("cannot encode the request to {}: {e}", self.target.as_str()),
            )
        })
    }
}

#[async_trait]
impl ModelDriver for AnthropicDriver {
    fn name(&self) -> &str {
        &self.name
    }

    async fn infer(
        &self,
        request: &InferRequest,
        retries: &dyn RetrySink,
    ) -> Result<InferReply, InferError> {
        let body = self.encode(request)?;
        let body = &body;
        with_retries(&self.retry, retries, |_| async move {
            let attempt = async {
                let url = self.target.as_str();
                let resp = self.transport.post(&self.target, body).await?;
                let stream = AnthropicStream::new(url);
                read_reply(&self.transport, url, resp, stream, |v| {
                    parse_message(url, v)
                })
                .await
            };
            attempt.await.map_err(|f| self.transport.redact_failure(f))
        })
        .await
    }
}

/// Builds `murmur/driver-anthropic` as a kernel driver.
pub fn build(cfg: &HttpDriverConfig) -> Result<Arc<dyn ModelDriver>, String> {
    Ok(Arc::new(AnthropicDriver::new(cfg)?))
}
