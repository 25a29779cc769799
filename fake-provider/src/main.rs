//! `fake-provider`: run the scripted provider by hand, answering every request with one text.
//!
//! Useful to try a capsule against `murmur/driver-openai` or `murmur/driver-anthropic` offline:
//! `fake-provider --port 8089 --text "hello"` then point `gateway.endpoint` at
//! `http://127.0.0.1:8089/v1` (OpenAI) or `http://127.0.0.1:8089` (Anthropic).

use fake_provider::{FakeProvider, Fallback};

const USAGE: &str = "usage: fake-provider [--port N] [--text TEXT]\n\
  Answers POST /v1/messages, /v1/chat/completions and /v1/responses with TEXT\n\
  (JSON, or SSE when the request asks to stream) on 127.0.0.1:N (default 8089).";

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let mut port: u16 = 8089;
    let mut text = String::from("Hello from fake-provider.");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--port", Some(v)) => match v.parse() {
                Ok(p) => port = p,
                Err(_) => {
                    eprintln!("fake-provider: --port wants a number, got '{v}'\n{USAGE}");
                    return std::process::ExitCode::from(2);
                }
            },
            ("--text", Some(v)) => text = v,
            _ => {
                eprintln!("{USAGE}");
                return std::process::ExitCode::from(2);
            }
        }
    }
    let addr = format!("127.0.0.1:{port}");
    let server = match FakeProvider::start_on(&addr, [], Some(Fallback::Text(text))).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fake-provider: cannot listen on {addr}: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    println!("fake-provider listening on {}", server.endpoint());
    println!("  OpenAI endpoint:    {}", server.openai_endpoint());
    println!("  Anthropic endpoint: {}", server.endpoint());
    let _ = tokio::signal::ctrl_c().await;
    std::process::ExitCode::SUCCESS
}
