//! `mur/driver-script`: a model that plays its turns from a script file.
//!
//! It is the built-in default that lets every example and test run offline with no key, and it
//! is a real driver behind the same [`ModelDriver`] trait as the HTTP ones: the Session cannot
//! tell it apart. It is stateless: the turn it plays is the number of assistant messages already
//! in the conversation, so the same script gives the same run every time.
//!
//! The format is documented in `docs/scripted-model.md`.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use mur_actors::model::{
    joined_text, ContentBlock, InferError, InferErrorKind, InferReply, InferRequest, Message,
    ModelDriver, RetrySink, StopReason, Usage,
};
use serde::Deserialize;
use serde_json::Value;

/// The scripted driver's artifact name.
pub const SCRIPT_DRIVER: &str = "mur/driver-script";

/// A whole script: the turns, played in order.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// One entry per model turn.
    pub turns: Vec<ScriptTurn>,
}

/// One scripted model turn.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptTurn {
    /// Text the model says. `{{task}}` becomes the task text and `{{last}}` the text of the last
    /// message the model was sent (a tool result or an injected outcome).
    #[serde(default)]
    pub say: Option<String>,
    /// Tool calls, made in order.
    #[serde(default)]
    pub call: Vec<ScriptCall>,
    /// Override the stop reason (`end_turn`, `tool_call`, `max_tokens`, or anything else to test
    /// how the runtime handles an unknown one).
    #[serde(default)]
    pub stop: Option<String>,
    /// Fail this call with this message instead of answering (a driver error).
    #[serde(default)]
    pub error: Option<String>,
    /// The call fails unless the last message the model was sent contains this text: a script
    /// can check that it is reacting to what the tools really returned.
    #[serde(default)]
    pub expect: Option<String>,
    /// The call fails unless the tool array the model is offered on this turn contains each of
    /// these texts (a tool name, a description marker): checks what the model is shown.
    #[serde(default)]
    pub expect_tools: Vec<String>,
    /// The call fails if the tool array contains any of these texts.
    #[serde(default)]
    pub expect_no_tools: Vec<String>,
    /// Make the driver panic with this message: the session crashes (its parent sees
    /// `crashed`). For supervision demos and tests.
    #[serde(default)]
    pub panic: Option<String>,
    /// Wait this long before answering, in milliseconds (to test cancels and deadlines).
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Token usage to report; absent means the runtime estimates.
    #[serde(default)]
    pub usage: Option<ScriptUsage>,
}

/// Reported usage for one scripted turn.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptUsage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

/// One scripted tool call.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptCall {
    /// The tool name.
    pub tool: String,
    /// Its input; `{}` when absent.
    #[serde(default)]
    pub input: Option<Value>,
}

/// The scripted driver.
#[derive(Debug)]
pub struct ScriptDriver {
    script: Script,
    path: PathBuf,
}

impl ScriptDriver {
    /// Read and parse a script file. Errors name the file and what is wrong with it.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = crate::files::read_text(path, crate::files::TEXT_CAP)
            .map_err(|e| format!("cannot read the model script {}: {e}", path.display()))?;
        Self::from_str(&text, path)
    }

    /// Parse a script given as text; `path` is only used in messages.
    pub fn from_str(text: &str, path: &Path) -> Result<Self, String> {
        if let Some((line, col, why)) = crate::manifest::depth::too_costly(text) {
            return Err(format!(
                "{} is not a valid model script: line {line}, column {col}: {why}",
                path.display()
            ));
        }
        let script: Script = serde_norway::from_str(text)
            .map_err(|e| format!("{} is not a valid model script: {e}", path.display()))?;
        if script.turns.is_empty() {
            return Err(format!(
                "{} is not a valid model script: it has no turns",
                path.display()
            ));
        }
        Ok(ScriptDriver {
            script,
            path: path.to_path_buf(),
        })
    }
}

fn message_text(m: &Message) -> String {
    joined_text(m.content())
}

/// Fill the placeholders in every string of a call's input: `{{task}}` and `{{last}}` as in
/// `say`, and `{{task.KEY}}` / `{{last.KEY}}`, the field KEY of the first JSON object in that text
/// which has one (so a script can pass on a value a tool really returned, such as a handle).
fn fill(v: &Value, task: &str, last: &str) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => Value::String(fill_str(s, task, last)?),
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| fill(x, task, last))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| Ok((k.clone(), fill(x, task, last)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

fn fill_str(s: &str, task: &str, last: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        let name = &rest[start + 2..start + len];
        let (source, key) = match name.split_once('.') {
            Some((src, key)) => (src, Some(key)),
            None => (name, None),
        };
        let text = match source {
            "task" => task,
            "last" => last,
            _ => {
                out.push_str(&rest[..start + 2]);
                rest = &rest[start + 2..];
                continue;
            }
        };
        out.push_str(&rest[..start]);
        match key {
            None => out.push_str(text),
            Some(key) => out.push_str(&json_field(text, key).ok_or_else(|| {
                format!("{{{{{name}}}}} needs a JSON object with '{key}' in the {source} message, and it has none")
            })?),
        }
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The field `key` of the first JSON object in `text` that has it (strings unquoted).
fn json_field(text: &str, key: &str) -> Option<String> {
    text.match_indices('{').find_map(|(i, _)| {
        let mut objects = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        match objects.next()?.ok()?.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    })
}

#[async_trait]
impl ModelDriver for ScriptDriver {
    fn name(&self) -> &str {
        SCRIPT_DRIVER
    }

    async fn infer(
        &self,
        request: &InferRequest,
        _retries: &dyn RetrySink,
    ) -> Result<InferReply, InferError> {
        let index = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let Some(turn) = self.script.turns.get(index) else {
            return Err(InferError::new(
                InferErrorKind::Driver,
                format!(
                    "the model script {} has {} turn(s) and the session asked for turn {}",
                    self.path.display(),
                    self.script.turns.len(),
                    index + 1
                ),
            ));
        };
        if let Some(ms) = turn.delay_ms {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        let last = request
            .messages
            .last()
            .map(message_text)
            .unwrap_or_default();
        if !turn.expect_tools.is_empty() || !turn.expect_no_tools.is_empty() {
            let offered = serde_json::to_string(&*request.tools).unwrap_or_default();
            let missing = turn
                .expect_tools
                .iter()
                .find(|t| !offered.contains(t.as_str()));
            let present = turn
                .expect_no_tools
                .iter()
                .find(|t| offered.contains(t.as_str()));
            if let Some(t) = missing.or(present) {
                let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
                return Err(InferError::new(
                    InferErrorKind::Driver,
                    format!(
                        "the model script {} expected turn {} {} a tool array with {:?}; it was offered: {}",
                        self.path.display(),
                        index + 1,
                        if missing.is_some() { "to be offered" } else { "not to be offered" },
                        t,
                        names.join(", ")
                    ),
                ));
            }
        }
        if let Some(expect) = &turn.expect {
            // Anything the model was given since its previous turn: tool results, and outcomes
            // of sub-capsules the runtime injected after them (which may arrive in any order).
            let since: Vec<String> = request
                .messages
                .iter()
                .rev()
                .take_while(|m| !matches!(m, Message::Assistant { .. }))
                .map(message_text)
                .collect();
            if !since.iter().any(|m| m.contains(expect.as_str())) {
                return Err(InferError::new(
                    InferErrorKind::Driver,
                    format!(
                        "the model script {} expected turn {} to follow a message containing {:?}, but none since its previous turn did; the last message was: {}",
                        self.path.display(),
                        index + 1,
                        expect,
                        mur_actors::text::truncate(&last, 400)
                    ),
                ));
            }
        }
        if let Some(message) = &turn.panic {
            panic!("{message}");
        }
        if let Some(error) = &turn.error {
            return Err(InferError::new(InferErrorKind::Driver, error.clone()));
        }
        let mut content = Vec::new();
        if let Some(say) = &turn.say {
            let task = request
                .messages
                .first()
                .map(message_text)
                .unwrap_or_default();
            let text = say.replace("{{task}}", &task).replace("{{last}}", &last);
            content.push(ContentBlock::Text { text });
        }
        let task = request
            .messages
            .first()
            .map(message_text)
            .unwrap_or_default();
        for (n, call) in turn.call.iter().enumerate() {
            let input = match &call.input {
                Some(v) => fill(v, &task, &last).map_err(|why| {
                    InferError::new(
                        InferErrorKind::Driver,
                        format!(
                            "the model script {} turn {}: {why}",
                            self.path.display(),
                            index + 1
                        ),
                    )
                })?,
                None => Value::Object(Default::default()),
            };
            content.push(ContentBlock::ToolCall {
                id: format!("call_{index}_{n}"),
                name: call.tool.clone(),
                input,
            });
        }
        let stop_reason = match turn.stop.as_deref() {
            Some("end_turn") => StopReason::EndTurn,
            Some("tool_call") => StopReason::ToolCall,
            Some("max_tokens") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_string()),
            None if turn.call.is_empty() => StopReason::EndTurn,
            None => StopReason::ToolCall,
        };
        Ok(InferReply {
            stop_reason,
            content,
            usage: turn
                .usage
                .as_ref()
                .map(|u| Usage {
                    input_tokens: Some(u.input_tokens),
                    output_tokens: Some(u.output_tokens),
                    ..Usage::default()
                })
                .unwrap_or_default(),
            attempts: 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mur_actors::model::NoRetrySink;
    use std::sync::Arc;

    fn request(messages: Vec<Message>) -> InferRequest {
        InferRequest {
            model: "scripted".into(),
            max_tokens: 100,
            system: "".into(),
            messages: messages.into(),
            tools: Arc::new(vec![]),
            prompt_cache_key: None,
        }
    }

    #[tokio::test]
    async fn plays_turns_by_position_and_fills_placeholders() {
        let d = ScriptDriver::from_str(
            "turns:\n  - call: [{tool: bash, input: {command: ls}}]\n  - say: 'saw {{last}} for {{task}}'\n",
            Path::new("s.yaml"),
        )
        .unwrap();
        let first = d
            .infer(&request(vec![Message::user_text("T")]), &NoRetrySink)
            .await
            .unwrap();
        assert_eq!(first.stop_reason, StopReason::ToolCall);
        let second = d
            .infer(
                &request(vec![
                    Message::user_text("T"),
                    Message::Assistant {
                        content: first.content,
                    },
                    Message::Tool {
                        tool_call_id: "call_0_0".into(),
                        is_error: false,
                        content: vec![ContentBlock::text("R")],
                    },
                ]),
                &NoRetrySink,
            )
            .await
            .unwrap();
        assert_eq!(second.stop_reason, StopReason::EndTurn);
        assert_eq!(second.content, vec![ContentBlock::text("saw R for T")]);
    }

    #[tokio::test]
    async fn expect_sees_every_message_since_the_previous_turn_in_any_order() {
        let d = ScriptDriver::from_str(
            "turns:\n  - say: go\n  - expect: '\"status\":\"started\"'\n    say: ok\n",
            Path::new("s.yaml"),
        )
        .unwrap();
        // An outcome the runtime injected after the tool result: the result is still seen.
        let messages = vec![
            Message::user_text("T"),
            Message::Assistant { content: vec![] },
            Message::Tool {
                tool_call_id: "call_0_0".into(),
                is_error: false,
                content: vec![ContentBlock::text(r#"{"status":"started"}"#)],
            },
            Message::user_text("[delegate-task] delegation dlg_1 ended ok"),
        ];
        let reply = d.infer(&request(messages), &NoRetrySink).await.unwrap();
        assert_eq!(reply.content, vec![ContentBlock::text("ok")]);
        // What came before the previous turn does not count.
        let stale = vec![
            Message::Tool {
                tool_call_id: "call_0_0".into(),
                is_error: false,
                content: vec![ContentBlock::text(r#"{"status":"started"}"#)],
            },
            Message::Assistant { content: vec![] },
            Message::user_text("something else"),
        ];
        let e = d.infer(&request(stale), &NoRetrySink).await.unwrap_err();
        assert!(
            e.message.contains("none since its previous turn did"),
            "{}",
            e.message
        );
    }

    #[tokio::test]
    async fn running_out_of_turns_and_failed_expectations_are_driver_errors() {
        let d = ScriptDriver::from_str(
            "turns:\n  - expect: nope\n    say: x\n",
            Path::new("s.yaml"),
        )
        .unwrap();
        let e = d
            .infer(&request(vec![Message::user_text("T")]), &NoRetrySink)
            .await
            .unwrap_err();
        assert!(e.message.contains("expected turn 1"), "{}", e.message);
        let e = d
            .infer(
                &request(vec![
                    Message::user_text("T"),
                    Message::Assistant { content: vec![] },
                ]),
                &NoRetrySink,
            )
            .await
            .unwrap_err();
        assert!(e.message.contains("has 1 turn(s)"), "{}", e.message);
    }

    #[test]
    fn call_inputs_take_values_from_the_task_and_the_last_message() {
        let task = r#"{"peer": "localhost:1/ses_x", "n": 3}"#;
        let last = "<untrusted-content source=tool:share-file>\nMinted\n{\"handle\":\"mh1.a.b\"}\n</untrusted-content>";
        let input = serde_json::json!({"peer": "{{task.peer}}", "h": ["{{last.handle}}", "n={{task.n}} {{x}}"]});
        assert_eq!(
            fill(&input, task, last).unwrap(),
            serde_json::json!({"peer": "localhost:1/ses_x", "h": ["mh1.a.b", "n=3 {{x}}"]})
        );
        let err = fill(&serde_json::json!("{{last.nope}}"), task, last).unwrap_err();
        assert!(err.contains("'nope'"), "{err}");
    }

    #[test]
    fn bad_scripts_name_the_file() {
        let e = ScriptDriver::from_str("turns: []\n", Path::new("x/script.yaml")).unwrap_err();
        assert!(e.contains("x/script.yaml") && e.contains("no turns"), "{e}");
        let e = ScriptDriver::from_str("turn: []\n", Path::new("s.yaml")).unwrap_err();
        assert!(e.contains("s.yaml is not a valid model script"), "{e}");
    }
}
