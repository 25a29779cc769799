//! What a request looks like on the wire, for every provider surface: the history's kept
//! encoding is lent to the body rather than copied into it (`src/drivers/request_body.rs`), so
//! a body is sent in pieces. A server must still receive one body, byte for byte what the driver
//! encodes, with its exact `content-length` and never `transfer-encoding: chunked` (which some
//! OpenAI-compatible servers refuse). The history grows between calls, as in a session, so the
//! second request lends an encoding the first one already lent.

mod driver_common;

use driver_common::*;
use fake_provider::builders::{anthropic, openai};
use fake_provider::{FakeProvider, RecordedRequest, Reply};
use mur::drivers::{AnthropicDriver, OpenAiDriver};
use mur_actors::model::{ContentBlock, History, InferRequest, Message, ModelDriver, NoRetrySink};
use serde_json::json;

/// The header `name` of `r`, if it came.
fn header<'r>(r: &'r RecordedRequest, name: &str) -> Option<&'r str> {
    r.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// One more turn of the conversation: the model's call, its result, the user's next word.
fn one_more_turn(req: &mut InferRequest) {
    req.messages.push(Message::Assistant {
        content: vec![ContentBlock::ToolCall {
            id: "call_9".into(),
            name: "bash".into(),
            input: json!({"command": "cat notes.txt"}),
        }],
    });
    req.messages.push(Message::Tool {
        tool_call_id: "call_9".into(),
        is_error: false,
        content: vec![ContentBlock::text("line one\nline \"two\"\n")],
    });
    req.messages.push(Message::user_text("And now?"));
}

/// Sends `req`, then the same conversation one turn longer, through `driver`, and checks each
/// body the server received against `encode` (a second driver of the same configuration, on a
/// fresh copy of the history, so nothing kept by the first is reused).
async fn check(
    fake: &FakeProvider,
    driver: &dyn ModelDriver,
    mut req: InferRequest,
    encode: impl Fn(&InferRequest) -> Vec<u8>,
) {
    let mut expected = Vec::new();
    for turn in 0..2 {
        if turn > 0 {
            // Grown in place, as a session grows it: this call lends the kept encoding again.
            one_more_turn(&mut req);
        }
        bounded(driver.infer(&req, &NoRetrySink)).await.unwrap();
        let fresh = InferRequest {
            messages: History::from(req.messages.iter().cloned().collect::<Vec<_>>()),
            ..req.clone()
        };
        expected.push(String::from_utf8(encode(&fresh)).unwrap());
    }
    let received = fake.requests();
    assert_eq!(received.len(), 2);
    for (expected, got) in expected.iter().zip(&received) {
        assert_eq!(&got.raw_body, expected, "the body on the wire");
        assert_eq!(
            header(got, "content-length"),
            Some(expected.len().to_string().as_str()),
            "{:?}",
            got.headers
        );
        assert_eq!(header(got, "transfer-encoding"), None, "{:?}", got.headers);
    }
    assert!(expected[1].len() > expected[0].len());
}

#[tokio::test]
async fn anthropic_bodies_arrive_whole_with_their_length() {
    let fake = FakeProvider::start([
        Reply::json(anthropic::text("one")),
        Reply::json(anthropic::text("two")),
    ])
    .await
    .unwrap();
    // The default configuration caches prompts: the marker is spliced into the lent encoding.
    let cfg = config("murmur/driver-anthropic", &fake.endpoint());
    let driver = AnthropicDriver::new(&cfg).unwrap();
    let oracle = AnthropicDriver::new(&cfg).unwrap();
    let first = conversation("claude-sonnet-4-5", json!({"name": "x"}));
    check(&fake, &driver, first, |r| oracle.request_body(r).unwrap()).await;
}

/// Both OpenAI surfaces: the model picks Chat Completions or Responses.
async fn openai_surface(replies: [serde_json::Value; 2], model: &str) {
    let fake = FakeProvider::start(replies.map(Reply::json)).await.unwrap();
    let cfg = config("murmur/driver-openai", &fake.openai_endpoint());
    let driver = OpenAiDriver::new(&cfg).unwrap();
    let oracle = OpenAiDriver::new(&cfg).unwrap();
    let first = conversation(model, json!({"name": "x"}));
    check(&fake, &driver, first, |r| oracle.request_body(r).unwrap()).await;
}

#[tokio::test]
async fn chat_completions_bodies_arrive_whole_with_their_length() {
    openai_surface(
        [openai::chat_text("one"), openai::chat_text("two")],
        "gpt-4.1",
    )
    .await;
}

#[tokio::test]
async fn responses_bodies_arrive_whole_with_their_length() {
    let replies = [openai::responses_text("one"), openai::responses_text("two")];
    openai_surface(replies, "gpt-5").await;
}
