//! Shared helpers for the driver tests: a recording retry sink, request builders, golden files.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mur::drivers::{HttpDriverConfig, RetryPolicy};
use mur_actors::model::{
    ContentBlock, History, InferRequest, Message, RetryNote, RetrySink, ToolSpec,
};
use serde_json::{json, Value};

/// The key every test uses; it must never show up in an error or a retry note.
pub const KEY: &str = "test-key-5ecret";

/// Collects retry notes.
#[derive(Default)]
pub struct Notes(pub Mutex<Vec<RetryNote>>);

impl RetrySink for Notes {
    fn retrying(&self, note: RetryNote) {
        self.0.lock().unwrap().push(note);
    }
}

impl Notes {
    pub fn all(&self) -> Vec<RetryNote> {
        self.0.lock().unwrap().clone()
    }
}

/// A config with fast retries (10 ms initial, 2 s cap) and short timeouts.
pub fn config(artifact: &str, endpoint: &str) -> HttpDriverConfig {
    let mut cfg = HttpDriverConfig::new(artifact, endpoint, Some(KEY.to_string()));
    cfg.retry = RetryPolicy {
        max_retries: 3,
        initial_delay_ms: 10,
        max_delay_ms: 2000,
    };
    cfg.connect_timeout = Duration::from_secs(5);
    cfg.request_timeout = Duration::from_secs(10);
    cfg
}

/// A one-message request.
pub fn simple(model: &str, text: &str) -> InferRequest {
    InferRequest {
        model: model.to_string(),
        max_tokens: 1024,
        system: "You are a test.\n\n".into(),
        messages: vec![Message::user_text(text)].into(),
        tools: Arc::new(vec![]),
        prompt_cache_key: None,
    }
}

/// The tools of the golden requests.
pub fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "bash".into(),
            description: Some("Run a shell command.".into()),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}},
                               "required": ["command"]}),
        },
        ToolSpec {
            name: "pull-artifact".into(),
            description: None,
            parameters: json!({"type": "object", "properties": {}}),
        },
    ]
}

/// A conversation with a tool round: user, assistant (text + two calls), two results (one an
/// error), a follow-up user message. `second_input` is the second call's input.
pub fn conversation(model: &str, second_input: Value) -> InferRequest {
    InferRequest {
        model: model.to_string(),
        max_tokens: 2048,
        system: "[Capsule]\nName: demo\n\nBe brief.\n".into(),
        messages: History::from(vec![
            Message::user_text("List the files."),
            Message::Assistant {
                content: vec![
                    ContentBlock::text("Looking."),
                    ContentBlock::ToolCall {
                        id: "call_1".into(),
                        name: "bash".into(),
                        input: json!({"command": "ls"}),
                    },
                    ContentBlock::ToolCall {
                        id: "call_2".into(),
                        name: "pull-artifact".into(),
                        input: second_input,
                    },
                ],
            },
            Message::Tool {
                tool_call_id: "call_1".into(),
                is_error: false,
                content: vec![ContentBlock::text(
                    "<untrusted-content source=tool:bash>\n$ ls\nExit code: 0\n</untrusted-content>",
                )],
            },
            Message::Tool {
                tool_call_id: "call_2".into(),
                is_error: true,
                content: vec![ContentBlock::text("not-granted: no install block")],
            },
            Message::user_text("Go on."),
        ]),
        tools: Arc::new(tools()),
        prompt_cache_key: Some("demo:1.0.0".into()),
    }
}

/// Compares `actual` with `tests/golden/<name>`; `MUR_RECORD_GOLDEN=1` rewrites the file.
pub fn assert_golden(name: &str, actual: &str) {
    let actual = actual.replace(env!("CARGO_PKG_VERSION"), "<version>");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("MUR_RECORD_GOLDEN").is_some() {
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing golden file {}; run with MUR_RECORD_GOLDEN=1 to create it",
            path.display()
        )
    });
    assert_eq!(actual, expected, "golden file {} differs", path.display());
}

/// Runs a future with a wall-clock bound so a hang fails one test, not the suite.
pub async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f)
        .await
        .expect("the test took more than 30 s")
}
