//! The `fake-provider` binary as a user runs it: it prints its endpoints, answers an OpenAI
//! request with the text it was given, and refuses bad arguments with exit code 2.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

#[test]
fn the_bin_serves_its_text_on_the_port_it_prints() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-provider"))
        .args(["--port", "0", "--text", "hi from the bin"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let endpoint = first
        .strip_prefix("fake-provider listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line: {first}"))
        .to_string();
    let body = r#"{"model":"m","messages":[{"role":"user","content":"x"}]}"#;
    let mut s = TcpStream::connect(&endpoint).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {endpoint}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    child.kill().unwrap();
    let _ = child.wait();
    assert!(reply.starts_with("HTTP/1.1 200 OK\r\n"), "{reply}");
    let json = reply.split("\r\n\r\n").nth(1).unwrap();
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "hi from the bin");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
}

#[test]
fn bad_arguments_exit_2_with_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_fake-provider"))
        .args(["--port", "eighty"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("fake-provider: --port wants a number, got 'eighty'\nusage: fake-provider"),
        "{err}"
    );
}
