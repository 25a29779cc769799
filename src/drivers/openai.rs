//! `murmur/driver-openai`: OpenAI Chat Completions, and the Responses API for models that need it.
//!
//! The endpoint includes the API version (`https://api.openai.com/v1`, or a local server's
//! `http://127.0.0.1:8080/v1`), so requests go to `{endpoint}/chat/completions` and
//! `{endpoint}/responses`. Models named `gpt-<N>…` with N ≥ 5 use the Responses API, everything
//! else (o-series, `gpt-4.1`, and the model names of vLLM, llama.cpp, Ollama) uses Chat
//! Completions; `driver.config.api: chat|responses` overrides the choice.
//!
//! Translation choices:
//! - tool call arguments are a JSON *string* on the wire. Arguments that do not parse (a model
//!   emitting broken JSON) do not fail the call: the `tool_call` block's `input` is the raw
//!   string itself (a JSON string, not an object). Every tool takes an object, so the runtime
//!   refuses the call with a tool error the model can read and correct, and the turn goes on.
//!   Empty arguments (common from local servers for tools without parameters) mean `{}`. When
//!   such a call is sent back in the history, the raw string is sent verbatim as `arguments`.
//! - assistant text that came with tool calls is kept (both on the way in and out);
//! - tool results are `role: tool` messages; the API has no error flag, the text says it;
//! - a reply whose `finish_reason` is `stop` but which carries tool calls (some local servers do
//!   this) is a tool call turn;
//! - `reasoning_content` (vLLM, llama.cpp, DeepSeek) and `<think>…</think>` spans in the text
//!   (servers without a reasoning parser) become a `thinking` block, never sent back;
//! - the request always streams with `stream_options.include_usage`; a JSON answer is accepted.
//!
//! `driver.config` keys: `reasoning_effort` (string, forwarded), `verbosity` (Responses
//! `text.verbosity`), `thinking` (`enabled`: Responses reasoning summaries), `store` (Responses
//! `store`, default false), `api` (`chat` or `responses`). Other keys are refused at build time.

use std::sync::Arc;

use async_trait::async_trait;
use mur_actors::model::{
    InferError, InferErrorKind, InferReply, InferRequest, ModelDriver, RetrySink,
};
use serde_json::Value;

use super::body::read_reply;
use super::config::{HttpDriverConfig, RetryPolicy};
use super::http::{AuthStyle, Target, Transport};
use super::openai_reply::{parse_chat, ChatStream};
use super::openai_request;
use super::openai_responses::ResponsesStream;
use super::options::Options;
use super::request_body::RequestBody;
use super::retry::with_retries;

/// Which OpenAI surface a request goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenAiApi {
    /// `POST {endpoint}/chat/completions`.
    Chat,
    /// `POST {endpoint}/responses`.
    Responses,
}

impl OpenAiApi {
    /// The surface a model needs: Responses for `gpt-<N>` with N ≥ 5, else Chat Completions.
    pub fn for_model(model: &str) -> OpenAiApi {
        let name = model.rsplit('/').next().unwrap_or(model);
        let major = name
            .strip_prefix("gpt-")
            .map(|rest| {
                rest.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
            })
            .and_then(|d| d.parse::<u32>().ok());
        match major {
            Some(n) if n >= 5 => OpenAiApi::Responses,
            _ => OpenAiApi::Chat,
        }
    }
}

/// Options read from `inference.driver.config`.
#[derive(Clone, Debug, Default)]
pub(crate) struct OpenAiOptions {
    pub(crate) reasoning_effort: Option<String>,
    pub(crate) verbosity: Option<String>,
    pub(crate) thinking: bool,
    pub(crate) store: bool,
    pub(crate) api: Option<OpenAiApi>,
}

impl OpenAiOptions {
    fn parse(artifact: &str, config: Option<&Value>) -> Result<OpenAiOptions, String> {
        let opts = Options::new(
            artifact,
            config,
            &["reasoning_effort", "verbosity", "thinking", "store", "api"],
        )?;
        let api = match opts.string("api")?.as_deref() {
            None => None,
            Some("chat") => Some(OpenAiApi::Chat),
            Some("responses") => Some(OpenAiApi::Responses),
            Some(other) => {
                return Err(format!(
                "{artifact}: inference.driver.config.api must be chat or responses, not '{other}'"
            ))
            }
        };
        Ok(OpenAiOptions {
            reasoning_effort: opts.string("reasoning_effort")?,
            verbosity: opts.string("verbosity")?,
            thinking: opts.switch("thinking")?.unwrap_or(false),
            store: opts.switch("store")?.unwrap_or(false),
            api,
        })
    }
}

/// The OpenAI driver. Built by [`super::openai`].
pub struct OpenAiDriver {
    name: String,
    /// `/chat/completions` and `/responses` under the endpoint.
    chat: Target,
    responses: Target,
    transport: Transport,
    retry: RetryPolicy,
    options: OpenAiOptions,
}

impl std::fmt::Debug for OpenAiDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiDriver")
            .field("name", &self.name)
            .field("transport", &self.transport)
            .finish_non_exhaustive()
    }
}

impl OpenAiDriver {
    /// Builds the driver; the error names the artifact and what is wrong.
    pub fn new(cfg: &HttpDriverConfig) -> Result<OpenAiDriver, String> {
        let options = OpenAiOptions::parse(&cfg.artifact, cfg.driver_config.as_ref())?;
        let transport = Transport::new(cfg, AuthStyle::Bearer, &[])?;
        Ok(OpenAiDriver {
            name: cfg.artifact.clone(),
            chat: transport.target("/chat/completions"),
            responses: transport.target("/responses"),
            transport,
            retry: cfg.retry,
            options,
        })
    }

    /// The surface this driver uses for `model`.
    pub fn api_for(&self, model: &str) -> OpenAiApi {
        self.options
            .api
            .unwrap_or_else(|| OpenAiApi::for_model(model))
    }

    /// The request body for a neutral request, on the surface the model needs, as the bytes
    /// sent.
    ///
    /// The history's encoding is kept in the history between calls (`super::encode`), so a
    /// call encodes only what was added since the last one.
    pub fn request_body(&self, req: &InferRequest) -> Result<Vec<u8>, InferError> {
        self.encode(req).map(|body| body.to_vec())
    }

    /// The request body as it is sent: in pieces, the history's kept encoding lent, not copied.
    fn encode(&self, req: &InferRequest) -> Result<RequestBody, InferError> {
        let body = match self.api_for(&req.model) {
            OpenAiApi::Chat => openai_request::chat_body(req, &self.options),
            OpenAiApi::Responses => openai_request::responses_body(req, &self.options),
        };
        body.map_err(|e| {
            InferError::new(
                InferErrorKind::Driver,
                format!("cannot encode the request for {}: {e}", self.name),
            )
        })
    }
}

#[async_trait]
impl ModelDriver for OpenAiDriver {
    fn name(&self) -> &str {
        &self.name
    }

    async fn infer(
        &self,
        request: &InferRequest,
        retries: &dyn RetrySink,
    ) -> Result<InferReply, InferError> {
        let api = self.api_for(&request.model);
        let target = match api {
            OpenAiApi::Chat => &self.chat,
            OpenAiApi::Responses => &self.responses,
        };
        let url = target.as_str();
        let body = self.encode(request)?;
        let body = &body;
        with_retries(&self.retry, retries, |_| async move {
            let attempt = async {
                let resp = self.transport.post(target, body).await?;
                match api {
                    OpenAiApi::Chat => {
                        read_reply(&self.transport, url, resp, ChatStream::new(url), |v| {
                            parse_chat(url, v)
                        })
                        .await
                    }
                    OpenAiApi::Responses => {
                        read_reply(&self.transport, url, resp, ResponsesStream::new(url), |v| {
                            super::openai_responses::parse_response(url, &v)
                        })
                        .await
                    }
                }
            };
            attempt.await.map_err(|f| self.transport.redact_failure(f))
        })
        .await
    }
}

/// Builds `murmur/driver-openai` as a kernel driver.
pub fn build(cfg: &HttpDriverConfig) -> Result<Arc<dyn ModelDriver>, String> {
    Ok(Arc::new(OpenAiDriver::new(cfg)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surface_by_model_name() {
        for m in [
            "gpt-5",
            "gpt-5.1",
            "gpt-5.2-codex",
            "gpt-6-mini",
            "openai/gpt-5",
        ] {
            assert_eq!(OpenAiApi::for_model(m), OpenAiApi::Responses, "{m}");
        }
        for m in [
            "gpt-4.1",
            "gpt-4",
            "o3-mini-high",
            "llama3.1:8b",
            "qwen2.5",
            "gpt-oss-20b",
        ] {
            assert_eq!(OpenAiApi::for_model(m), OpenAiApi::Chat, "{m}");
        }
    }
}
