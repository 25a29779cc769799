//! The request bodies the drivers write straight to bytes, with the history's encoding kept
//! between calls, are byte for byte what the former `serde_json::Value` builders printed.
//!
//! The former builders live on here, only as the oracle. Every history is grown one message
//! at a time, as a session grows it, and encoded after each push, so every point where a kept
//! prefix could end (inside a run of tool results, after a message with nothing to send, with
//! the Anthropic cache marker inside the kept part or in the re-encoded tail) is checked; one
//! driver serving several interleaved histories, one history encoded by several driver shapes,
//! and shared (cloned) histories are checked too.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use mur::drivers::{AnthropicDriver, HttpDriverConfig, OpenAiDriver};
use mur_actors::model::{
    ContentBlock, History, InferError, InferReply, InferRequest, Message, ModelDriver, RetrySink,
    StopReason, ToolSpec, Usage,
};
use mur_actors::session::ExitStatus;
use mur_actors::spec::{Grants, SessionPaths, SessionSpec};
use mur_actors::supervisor::{Supervisor, SupervisorArgs, SupervisorMsg};
use ractor::Actor;
use serde_json::{json, Map, Value};

// ---- the oracle: the former Value builders, options passed in ----

#[derive(Clone, Copy, Debug)]
struct AnthropicOpts {
    prompt_cache: bool,
    thinking: bool,
    thinking_budget: u32,
}

mod oracle_anthropic {
    use super::*;

    pub fn body(req: &InferRequest, o: AnthropicOpts) -> Value {
        let cache = o.prompt_cache;
        let mut body = Map::new();
        body.insert("model".into(), json!(req.model));
        body.insert("max_tokens".into(), json!(req.max_tokens));
        let system = req.system.trim();
        if !system.is_empty() {
            let mut block = json!({"type": "text", "text": system});
            if cache {
                block["cache_control"] = json!({"type": "ephemeral"});
            }
            body.insert("system".into(), json!([block]));
        }
        let mut messages = self::messages(&req.messages, o);
        if cache {
            mark_last_cacheable(&mut messages);
        }
        body.insert("messages".into(), Value::Array(messages));
        if !req.tools.is_empty() {
            let mut tools: Vec<Value> = req.tools.iter().map(tool).collect();
            if cache {
                if let Some(last) = tools.last_mut() {
                    last["cache_control"] = json!({"type": "ephemeral"});
                }
            }
            body.insert("tools".into(), Value::Array(tools));
        }
        if o.thinking {
            let budget = o
                .thinking_budget
                .min(req.max_tokens.saturating_sub(1))
                .max(1);
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        body.insert("stream".into(), json!(true));
        Value::Object(body)
    }

    fn messages(messages: &[Message], o: AnthropicOpts) -> Vec<Value> {
        let mut out: Vec<Value> = Vec::new();
        let mut results: Vec<Value> = Vec::new();
        for m in messages {
            let (role, content) = match m {
                Message::Tool {
                    tool_call_id,
                    is_error,
                    content,
                } => {
                    results.push(tool_result(tool_call_id, *is_error, content));
                    continue;
                }
                Message::User { content } => ("user", content),
                Message::Assistant { content } => ("assistant", content),
            };
            if !results.is_empty() {
                out.push(json!({"role": "user", "content": std::mem::take(&mut results)}));
            }
            let blocks: Vec<Value> = content.iter().filter_map(|b| block(b, o)).collect();
            if !blocks.is_empty() {
                out.push(json!({"role": role, "content": blocks}));
            }
        }
        if !results.is_empty() {
            out.push(json!({"role": "user", "content": results}));
        }
        out
    }

    fn block(block: &ContentBlock, o: AnthropicOpts) -> Option<Value> {
        match block {
            ContentBlock::Text { text } if text.is_empty() => None,
            ContentBlock::Text { text } => Some(json!({"type": "text", "text": text})),
            ContentBlock::ToolCall { id, name, input } => {
                let input = match input {
                    Value::Object(_) => input.clone(),
                    other => json!({"raw_arguments": other}),
                };
                Some(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
            }
            ContentBlock::Thinking {
                text,
                signature: Some(sig),
            } if o.thinking => {
                Some(json!({"type": "thinking", "thinking": text, "signature": sig}))
            }
            ContentBlock::Thinking { .. } => None,
        }
    }

    fn tool(spec: &ToolSpec) -> Value {
        let mut t = Map::new();
        t.insert("name".into(), json!(spec.name));
        if let Some(d) = spec.description.as_ref().filter(|d| !d.is_empty()) {
            t.insert("description".into(), json!(d));
        }
        t.insert("input_schema".into(), spec.parameters.clone());
        Value::Object(t)
    }

    fn tool_result(id: &str, is_error: bool, content: &[ContentBlock]) -> Value {
        let texts: Vec<Value> = content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } if !text.is_empty() => {
                    Some(json!({"type": "text", "text": text}))
                }
                _ => None,
            })
            .collect();
        let mut r = json!({"type": "tool_result", "tool_use_id": id});
        if !texts.is_empty() {
            r["content"] = Value::Array(texts);
        }
        if is_error {
            r["is_error"] = json!(true);
        }
        r
    }

    fn mark_last_cacheable(messages: &mut [Value]) {
        for m in messages.iter_mut().rev() {
            let Some(blocks) = m.get_mut("content").and_then(Value::as_array_mut) else {
                continue;
            };
            for b in blocks.iter_mut().rev() {
                let kind = b.get("type").and_then(Value::as_str).unwrap_or("");
                if matches!(kind, "text" | "tool_use" | "tool_result" | "image") {
                    b["cache_control"] = json!({"type": "ephemeral"});
                    return;
                }
            }
        }
    }
}

#[derive(Clone, Debug, Default)]
struct OpenAiOpts {
    reasoning_effort: Option<String>,
    verbosity: Option<String>,
    thinking: bool,
    store: bool,
}

mod oracle_openai {
    use super::*;
    use mur_actors::model::joined_text;

    fn arguments_string(input: &Value) -> String {
        match input {
            Value::String(raw) => raw.clone(),
            other => other.to_string(),
        }
    }

    pub fn chat_body(req: &InferRequest, o: &OpenAiOpts) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(req.model));
        body.insert("max_completion_tokens".into(), json!(req.max_tokens));
        body.insert("messages".into(), Value::Array(chat_messages(req)));
        if !req.tools.is_empty() {
            let tools: Vec<Value> = req
                .tools
                .iter()
                .map(|t| {
                    let mut f = Map::new();
                    f.insert("name".into(), json!(t.name));
                    if let Some(d) = t.description.as_ref().filter(|d| !d.is_empty()) {
                        f.insert("description".into(), json!(d));
                    }
                    f.insert("parameters".into(), t.parameters.clone());
                    json!({"type": "function", "function": f})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(key) = &req.prompt_cache_key {
            body.insert("prompt_cache_key".into(), json!(key));
        }
        if let Some(effort) = &o.reasoning_effort {
            body.insert("reasoning_effort".into(), json!(effort));
        }
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
        Value::Object(body)
    }

    fn chat_messages(req: &InferRequest) -> Vec<Value> {
        let mut out = Vec::with_capacity(req.messages.len() + 1);
        let system = req.system.trim();
        if !system.is_empty() {
            out.push(json!({"role": "system", "content": system}));
        }
        for m in req.messages.iter() {
            match m {
                Message::User { content } => {
                    out.push(json!({"role": "user", "content": joined_text(content)}))
                }
                Message::Assistant { content } => {
                    let text = joined_text(content);
                    let calls: Vec<Value> = content
                        .iter()
                        .filter_map(|b| match b {
                            ContentBlock::ToolCall { id, name, input } => Some(json!({
                                "id": id, "type": "function",
                                "function": {"name": name, "arguments": arguments_string(input)}
                            })),
                            _ => None,
                        })
                        .collect();
                    if calls.is_empty() {
                        out.push(json!({"role": "assistant", "content": text}));
                    } else {
                        let content = if text.is_empty() {
                            Value::Null
                        } else {
                            json!(text)
                        };
                        out.push(
                            json!({"role": "assistant", "content": content, "tool_calls": calls}),
                        );
                    }
                }
                Message::Tool {
                    tool_call_id,
                    content,
                    ..
                } => out.push(json!({
                    "role": "tool", "tool_call_id": tool_call_id, "content": joined_text(content)
                })),
            }
        }
        out
    }

    pub fn responses_body(req: &InferRequest, opts: &OpenAiOpts) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(req.model));
        let system = req.system.trim();
        if !system.is_empty() {
            body.insert("instructions".into(), json!(system));
        }
        let mut input = Vec::new();
        for m in req.messages.iter() {
            match m {
                Message::User { content } => input.push(json!({
                    "role": "user",
                    "content": [{"type": "input_text", "text": joined_text(content)}]
                })),
                Message::Assistant { content } => {
                    let text = joined_text(content);
                    if !text.is_empty() {
                        input.push(json!({
                            "type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": text}]
                        }));
                    }
                    for b in content {
                        if let ContentBlock::ToolCall {
                            id,
                            name,
                            input: args,
                        } = b
                        {
                            input.push(json!({
                                "type": "function_call", "call_id": id, "name": name,
                                "arguments": arguments_string(args)
                            }));
                        }
                    }
                }
                Message::Tool {
                    tool_call_id,
                    content,
                    ..
                } => input.push(json!({
                    "type": "function_call_output", "call_id": tool_call_id,
                    "output": joined_text(content)
                })),
            }
        }
        body.insert("input".into(), Value::Array(input));
        body.insert("max_output_tokens".into(), json!(req.max_tokens));
        if !req.tools.is_empty() {
            let tools: Vec<Value> = req
                .tools
                .iter()
                .map(|t| {
                    let mut f = Map::new();
                    f.insert("type".into(), json!("function"));
                    f.insert("name".into(), json!(t.name));
                    if let Some(d) = t.description.as_ref().filter(|d| !d.is_empty()) {
                        f.insert("description".into(), json!(d));
                    }
                    f.insert("parameters".into(), t.parameters.clone());
                    Value::Object(f)
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(key) = &req.prompt_cache_key {
            body.insert("prompt_cache_key".into(), json!(key));
        }
        let mut reasoning = Map::new();
        if let Some(e) = &opts.reasoning_effort {
            reasoning.insert("effort".into(), json!(e));
        }
        if opts.thinking {
            reasoning.insert("summary".into(), json!("auto"));
        }
        if !reasoning.is_empty() {
            body.insert("reasoning".into(), Value::Object(reasoning));
        }
        if let Some(v) = &opts.verbosity {
            body.insert("text".into(), json!({"verbosity": v}));
        }
        body.insert("store".into(), json!(opts.store));
        body.insert("stream".into(), json!(true));
        Value::Object(body)
    }
}

// ---- the drivers under test ----

/// A driver under test and the oracle for its bodies.
enum Encoder {
    Anthropic(AnthropicDriver, AnthropicOpts),
    Chat(OpenAiDriver, OpenAiOpts),
    Responses(OpenAiDriver, OpenAiOpts),
}

impl Encoder {
    fn anthropic(o: AnthropicOpts) -> Encoder {
        let mut cfg = HttpDriverConfig::new(
            "murmur/driver-anthropic",
            "http://127.0.0.1:9",
            Some("k".into()),
        );
        cfg.driver_config = Some(json!({
            "prompt_cache": o.prompt_cache,
            "thinking": o.thinking,
            "thinking_budget_tokens": o.thinking_budget,
        }));
        Encoder::Anthropic(AnthropicDriver::new(&cfg).unwrap(), o)
    }

    fn openai(api: &str, o: OpenAiOpts) -> Encoder {
        let mut cfg = HttpDriverConfig::new(
            "murmur/driver-openai",
            "http://127.0.0.1:9/v1",
            Some("k".into()),
        );
        let mut config = json!({"api": api, "thinking": o.thinking, "store": o.store});
        if let Some(e) = &o.reasoning_effort {
            config["reasoning_effort"] = json!(e);
        }
        if let Some(v) = &o.verbosity {
            config["verbosity"] = json!(v);
        }
        cfg.driver_config = Some(config);
        let d = OpenAiDriver::new(&cfg).unwrap();
        match api {
            "chat" => Encoder::Chat(d, o),
            _ => Encoder::Responses(d, o),
        }
    }

    fn encode(&self, req: &InferRequest) -> String {
        let bytes = match self {
            Encoder::Anthropic(d, _) => d.request_body(req),
            Encoder::Chat(d, _) | Encoder::Responses(d, _) => d.request_body(req),
        }
        .unwrap();
        String::from_utf8(bytes).unwrap()
    }

    fn oracle(&self, req: &InferRequest) -> String {
        match self {
            Encoder::Anthropic(_, o) => oracle_anthropic::body(req, *o),
            Encoder::Chat(_, o) => oracle_openai::chat_body(req, o),
            Encoder::Responses(_, o) => oracle_openai::responses_body(req, o),
        }
        .to_string()
    }

    /// Encodes `req` and checks it against the oracle.
    fn check(&self, req: &InferRequest, what: &str) {
        let got = self.encode(req);
        let want = self.oracle(req);
        assert!(
            got == want,
            "{what}: {} messages\n got: {got}\nwant: {want}",
            req.messages.len()
        );
    }
}

/// Every driver shape: Anthropic with and without the prompt cache and thinking, Chat and
/// Responses with and without their options.
fn encoders() -> Vec<(String, Encoder)> {
    let mut out = Vec::new();
    for prompt_cache in [true, false] {
        for thinking in [false, true] {
            let o = AnthropicOpts {
                prompt_cache,
                thinking,
                thinking_budget: 4096,
            };
            out.push((format!("anthropic {o:?}"), Encoder::anthropic(o)));
        }
    }
    let plain = OpenAiOpts::default();
    let rich = OpenAiOpts {
        reasoning_effort: Some("high".into()),
        verbosity: Some("low".into()),
        thinking: true,
        store: true,
    };
    for o in [plain, rich] {
        out.push((format!("chat {o:?}"), Encoder::openai("chat", o.clone())));
        out.push((format!("responses {o:?}"), Encoder::openai("responses", o)));
    }
    out
}

// ---- histories ----

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "bash".into(),
            description: Some("Run a \"shell\" command.\n\tTabs, é, 🦀.".into()),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}},
                               "required": ["command"]}),
        },
        ToolSpec {
            name: "pull-artifact".into(),
            description: Some(String::new()),
            parameters: json!({"type": "object", "properties": {}, "n": 1.5e300, "m": -0.0}),
        },
        ToolSpec {
            name: "noop".into(),
            description: None,
            parameters: json!({}),
        },
    ]
}

fn request(messages: History, system: &str, tools: &Arc<Vec<ToolSpec>>) -> InferRequest {
    InferRequest {
        model: "some-model".into(),
        max_tokens: 2048,
        system: system.into(),
        messages,
        tools: tools.clone(),
        prompt_cache_key: Some("demo:1.0.0".into()),
    }
}

fn call(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolCall {
        id: id.into(),
        name: name.into(),
        input,
    }
}

fn result(id: &str, is_error: bool, texts: &[&str]) -> Message {
    Message::Tool {
        tool_call_id: id.into(),
        is_error,
        content: texts.iter().map(|t| ContentBlock::text(*t)).collect(),
    }
}

fn thinking(text: &str, signature: Option<&str>) -> ContentBlock {
    ContentBlock::Thinking {
        text: text.into(),
        signature: signature.map(str::to_string),
    }
}

/// A long conversation with every kind of block and every odd case the drivers translate.
fn rich_history() -> Vec<Message> {
    vec![
        Message::user_text("List the files.\n\"Quoted\", back\\slash, \u{1} control, é, 🦀."),
        Message::Assistant {
            content: vec![
                thinking("Let me look.", Some("sig-1")),
                ContentBlock::text("Looking."),
                call(
                    "call_1",
                    "bash",
                    json!({"command": "ls -la", "z": 1, "a": [1, 2.5, null]}),
                ),
                call("call_2", "pull-artifact", json!("{\"name\": \"x\"")),
                call("call_3", "noop", json!([1, "two"])),
                call("call_4", "noop", Value::Null),
                call("call_5", "noop", json!(3.25)),
                call("call_6", "noop", json!("")),
            ],
        },
        result(
            "call_1",
            false,
            &["<untrusted-content source=tool:bash>\n$ ls\n</untrusted-content>"],
        ),
        result("call_2", true, &["not-granted: no install block"]),
        result("call_3", false, &[]),
        result("call_4", true, &["", "second text", ""]),
        result("call_5", false, &[""]),
        result("call_6", false, &["a", "b"]),
        Message::user_text("Go on."),
        // Only thinking: Anthropic sends it (signed, thinking on) or nothing at all.
        Message::Assistant {
            content: vec![thinking("Hmm.", Some("sig-2")), thinking("unsigned", None)],
        },
        Message::user_text("Continue."),
        Message::Assistant {
            content: vec![ContentBlock::text(""), call("call_7", "bash", json!({}))],
        },
        result("call_7", false, &["ok"]),
        Message::Assistant {
            content: vec![ContentBlock::text(""), ContentBlock::text("")],
        },
        Message::User { content: vec![] },
        Message::Assistant {
            content: vec![
                ContentBlock::text("Two calls."),
                ContentBlock::text("Second paragraph."),
                call("call_8", "bash", json!({"command": "cat \"a b\""})),
                call("call_9", "bash", json!({"command": "true"})),
            ],
        },
        result("call_8", false, &["x"]),
        result("call_9", true, &["y"]),
        // The conversation ends on a message Anthropic marks nowhere in itself.
        Message::Assistant {
            content: vec![thinking("Done thinking.", Some("sig-3"))],
        },
        Message::Assistant {
            content: vec![ContentBlock::text("All done.")],
        },
        result("call_10", false, &["late result"]),
        result("call_11", false, &["later result"]),
        Message::user_text("Thanks."),
    ]
}

/// A small deterministic generator, so the long random histories are the same every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// A history of `len` messages drawn from the shapes of [`rich_history`].
fn random_history(seed: u64, len: usize) -> Vec<Message> {
    let mut rng = Lcg(seed);
    let rich = rich_history();
    (0..len)
        .map(|i| {
            let mut m = rich[rng.next(rich.len() as u64) as usize].clone();
            if let Message::Tool { tool_call_id, .. } = &mut m {
                tool_call_id.push_str(&format!("-{i}"));
            }
            m
        })
        .collect()
}

/// Grows a history as a session does, checking the body after every message.
fn grow_and_check(enc: &Encoder, what: &str, messages: &[Message], system: &str) {
    let tools = Arc::new(tools());
    let mut history = History::default();
    for m in messages {
        history.push(m.clone());
        enc.check(&request(history.clone(), system, &tools), what);
    }
}

#[test]
fn every_shape_matches_the_value_builders_as_the_history_grows() {
    let messages = rich_history();
    for (what, enc) in encoders() {
        grow_and_check(
            &enc,
            &what,
            &messages,
            "[Capsule]\nName: demo\n\nBe brief.\n",
        );
        grow_and_check(&enc, &format!("{what}, blank system"), &messages, "  \n");
    }
}

#[test]
fn random_histories_match_the_value_builders() {
    for seed in 0..24 {
        let messages = random_history(seed, 60);
        for (what, enc) in encoders() {
            grow_and_check(&enc, &format!("{what}, seed {seed}"), &messages, "S");
        }
    }
}

#[test]
fn no_tools_and_no_cache_key() {
    for (what, enc) in encoders() {
        let mut history = History::default();
        for m in rich_history() {
            history.push(m);
            let mut req = request(history.clone(), "system", &Arc::new(Vec::new()));
            req.prompt_cache_key = None;
            req.max_tokens = 1;
            enc.check(&req, &what);
        }
    }
}

#[test]
fn one_driver_serving_interleaved_sessions_encodes_each_one_right() {
    let tools = Arc::new(tools());
    let a_msgs = rich_history();
    let b_msgs = random_history(7, a_msgs.len());
    for (what, enc) in encoders() {
        let (mut a, mut b) = (History::default(), History::default());
        for (ma, mb) in a_msgs.iter().zip(&b_msgs) {
            a.push(ma.clone());
            enc.check(
                &request(a.clone(), "A", &tools),
                &format!("{what}, session a"),
            );
            b.push(mb.clone());
            enc.check(
                &request(b.clone(), "B", &tools),
                &format!("{what}, session b"),
            );
            // And again, with nothing new: the kept prefix is served as it is.
            enc.check(
                &request(a.clone(), "A", &tools),
                &format!("{what}, session a again"),
            );
        }
    }
}

/// A session's tool array changes (a pull adds a tool, a removal takes one away): each body
/// carries the array its request offers, not the one whose encoding the history kept, and the
/// same array offered again (an equal copy in a new `Arc`, or the first one) is right too.
#[test]
fn a_tool_array_that_changes_between_calls_is_encoded_anew() {
    let first = Arc::new(tools());
    let mut more = tools();
    more.push(ToolSpec {
        name: "pulled".into(),
        description: Some("A tool pulled at runtime.".into()),
        parameters: json!({"type": "object", "properties": {"x": {"type": "integer"}}}),
    });
    let more = Arc::new(more);
    let fewer = Arc::new(tools()[..1].to_vec());
    let equal_copy = Arc::new(tools());
    let offers = [&first, &first, &more, &fewer, &first, &equal_copy, &more];
    for (what, enc) in encoders() {
        let mut history = History::default();
        for (m, tools) in rich_history().into_iter().zip(offers.iter().cycle()) {
            history.push(m);
            enc.check(&request(history.clone(), "S", tools), &what);
        }
    }
}

/// The system prompt's encoding is kept while requests carry the same prompt (the same `Arc`):
/// the same prompt again, another one, an empty one, the first one back and an equal copy in a
/// new `Arc` are each encoded as the oracle writes them.
#[test]
fn a_system_prompt_that_changes_between_calls_is_encoded_anew() {
    let tools = Arc::new(tools());
    let first: Arc<str> = "You are careful.\n\"Quote\" and é, <tags>.".into();
    let other: Arc<str> = "  Another prompt, with spaces around it.\n".into();
    let equal_copy: Arc<str> = "You are careful.\n\"Quote\" and é, <tags>.".into();
    let empty: Arc<str> = "  \n ".into();
    let prompts = [&first, &first, &other, &empty, &first, &equal_copy, &other];
    for (what, enc) in encoders() {
        let mut history = History::default();
        for (m, system) in rich_history().into_iter().zip(prompts.iter().cycle()) {
            history.push(m);
            let mut req = request(history.clone(), "", &tools);
            req.system = Arc::clone(system);
            enc.check(&req, &what);
        }
    }
}

#[test]
fn one_history_encoded_by_several_shapes_in_turn() {
    let tools = Arc::new(tools());
    let encoders = encoders();
    let mut history = History::default();
    for (i, m) in rich_history().into_iter().enumerate() {
        history.push(m);
        // A different shape first each time, so every shape sees a slot another one left.
        for k in 0..encoders.len() {
            let (what, enc) = &encoders[(i + k) % encoders.len()];
            enc.check(&request(history.clone(), "S", &tools), what);
        }
    }
}

#[test]
fn a_shared_history_pushed_by_one_holder_stays_right_for_both() {
    let tools = Arc::new(tools());
    let messages = rich_history();
    for (what, enc) in encoders() {
        let mut base = History::default();
        for m in &messages[..5] {
            base.push(m.clone());
        }
        enc.check(&request(base.clone(), "S", &tools), &what);
        // A fork: each side pushes its own messages after the shared ones.
        let mut fork = base.clone();
        for (i, m) in messages[5..].iter().enumerate() {
            fork.push(m.clone());
            enc.check(
                &request(fork.clone(), "S", &tools),
                &format!("{what}, fork"),
            );
            base.push(messages[messages.len() - 1 - i].clone());
            enc.check(
                &request(base.clone(), "S", &tools),
                &format!("{what}, base"),
            );
        }
    }
}

#[test]
fn an_empty_history_still_makes_a_body() {
    for (what, enc) in encoders() {
        enc.check(&request(History::default(), "S", &Arc::new(tools())), &what);
    }
}

/// A model that calls an undeclared tool for `turns` turns, then ends; each call notes how many
/// messages the history's encoding slot said it covered, and how many the history holds.
struct SlotWatcher {
    turns: usize,
    calls: Mutex<Vec<(usize, usize)>>,
}

#[async_trait]
impl ModelDriver for SlotWatcher {
    fn name(&self) -> &str {
        "test/slot-watcher"
    }

    async fn infer(&self, req: &InferRequest, _: &dyn RetrySink) -> Result<InferReply, InferError> {
        let seen = req.messages.with_encoding(|covered: &mut usize, messages| {
            (std::mem::replace(covered, messages.len()), messages.len())
        });
        let n = {
            let mut calls = self.calls.lock().unwrap();
            calls.push(seen);
            calls.len()
        };
        let (stop_reason, content) = if n <= self.turns {
            let call = call(&format!("call_{n}"), "noop", json!({}));
            (StopReason::ToolCall, vec![call])
        } else {
            (StopReason::EndTurn, vec![ContentBlock::text("done")])
        };
        Ok(InferReply {
            stop_reason,
            content,
            usage: Usage::default(),
            attempts: 1,
        })
    }
}

/// The kernel appends to the history it sent in place (it holds no other handle when it
/// pushes), so a driver's kept encoding survives from one call to the next.
#[tokio::test]
async fn a_session_keeps_its_history_unshared_so_the_encoding_survives_each_turn() {
    let dir = tempfile::tempdir().unwrap();
    let driver = Arc::new(SlotWatcher {
        turns: 5,
        calls: Mutex::new(Vec::new()),
    });
    let records = dir.path().join("records");
    let paths = SessionPaths {
        workdir: records.clone(),
        records_dir: records,
    };
    let spec = SessionSpec::new(
        mur_actors::ids::session_id(),
        "slot",
        driver.clone(),
        Grants::default(),
        "Call noop.".into(),
        paths,
        mur::tools::executors(
            Duration::from_secs(30),
            Arc::new(mur::contain::Sandbox::uncontained(std::env::temp_dir())),
        ),
    );
    let (sup, handle) = Actor::spawn(None, Supervisor, SupervisorArgs::default())
        .await
        .unwrap();
    let rx = ractor::call!(sup, |reply| SupervisorMsg::StartRoot {
        spec: Box::new(spec),
        reply
    })
    .unwrap()
    .unwrap();
    let report = rx.await.unwrap();
    sup.stop(None);
    handle.await.unwrap();
    assert_eq!(report.exit_status, ExitStatus::Ok, "{}", report.result);
    let calls = driver.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 6);
    assert_eq!(calls[0], (0, 1));
    for pair in calls.windows(2) {
        let ((_, before), (covered, now)) = (pair[0], pair[1]);
        assert_eq!(
            covered, before,
            "the slot the last call left is still there: {calls:?}"
        );
        assert_eq!(
            now,
            before + 2,
            "one tool call and its result per turn: {calls:?}"
        );
    }
}
