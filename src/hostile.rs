//! Every parser of `mur`, entered the way the program enters it, for hostile input.
//!
//! One function per parser takes raw bytes and runs them down the same path `mur` would: the
//! manifest through `mur doctor`'s check, a trace file through `mur trace show|steps|report|diff`,
//! a zip through the archive reader and unpacker, and so on. Each returns nothing and must never
//! panic, hang or allocate without bound, whatever the bytes; where a parser also writes (a lock,
//! a handle) the function checks that what it writes reads back the same, and panics if not.
//!
//! The fuzz targets in `fuzz/` call these functions, and `tests/hostile_inputs.rs` replays every
//! input the fuzzers ever found through them, so a regression is a failing test in the normal
//! suite. Files the paths need (a manifest, a trace) are written under one private scratch
//! folder per thread, removed when the thread ends.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::artifact::Lock;
use crate::drivers::ReplyApi;
use crate::trace::cli::{execute, TraceCommand};
use crate::trace::format::Style;
use crate::trace::lenient::Checked;
use crate::trace::summary::{Builder, Detail};

thread_local! {
    static SCRATCH: RefCell<Option<tempfile::TempDir>> = const { RefCell::new(None) };
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime builds");
}

/// This thread's scratch folder (made on first use).
fn scratch() -> PathBuf {
    SCRATCH.with(|s| {
        s.borrow_mut()
            .get_or_insert_with(|| {
                tempfile::Builder::new()
                    .prefix("mur-hostile-")
                    .tempdir()
                    .expect("a scratch folder can be made")
            })
            .path()
            .to_path_buf()
    })
}

/// Writes `bytes` to `rel` under the scratch folder (parents made), returning its path.
fn write_scratch(rel: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch().join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("the scratch folder is writable");
    }
    std::fs::write(&path, bytes).expect("the scratch folder is writable");
    path
}

/// A manifest, as `mur doctor` checks it (YAML, env references, every field, the files it
/// names, the containment decision).
pub fn manifest(bytes: &[u8]) {
    let path = write_scratch("capsule/murmur.yaml", bytes);
    let _ = crate::manifest::doctor::check(&path);
}

/// `murmur.lock` text. A lock that parses must write out and read back as the same lock.
pub fn lock(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let Ok(lock) = Lock::parse(text) else {
        return;
    };
    let written = lock.to_yaml();
    match Lock::parse(&written) {
        Ok(again) => assert_eq!(again, lock, "the lock changed on a round trip:\n{written}"),
        Err(e) => panic!("a lock mur wrote does not read back: {e}\n{written}"),
    }
}

/// Trace lines, read and folded in memory as every `mur trace` view does, then rendered by
/// `show`, `steps` (plain and verbose) and their JSON forms.
pub fn trace_lines(bytes: &[u8]) {
    // Each line reads as the derived `Deserialize` reads it from the bytes alone: the faster
    // ways (the line scanner, serde from a `str`) only ever give the same event or error.
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        same_event::<Checked>(line);
        same_event::<serde_json::Value>(line);
    }
    let path = Path::new("trace.jsonl");
    same_on_two_cores(path, bytes);
    let mut reader = crate::trace::reader::TraceReader::new(path, bytes);
    let mut builder = Builder::new(path, Detail::Full);
    loop {
        let mut ev = crate::trace::event::Event::<serde_json::Value>::default();
        match reader.read_event(&mut ev) {
            Ok(true) => builder.push(&mut ev),
            Ok(false) => break,
            Err(_) => return,
        }
    }
    let Ok(summary) = builder.finish() else {
        return;
    };
    let _ = crate::trace::show::render(&summary, &Style::PLAIN);
    let _ = crate::trace::show::json(&summary);
    let _ = crate::trace::steps::render(&summary, true, &Style::PLAIN);
    let _ = crate::trace::steps::json(&summary, false);
    let _ = crate::trace::diff::render(&summary, &summary, &Style::PLAIN);
}

/// The trace read on two cores, in blocks small enough to cut its lines anywhere, parsed all
/// by the reading thread or all by the folding one, folds to the same summary or the same
/// diagnostic as on one.
fn same_on_two_cores(path: &Path, bytes: &[u8]) {
    use crate::trace::reader::TraceReader;
    use crate::trace::summary::{fold, fold_on_two_cores};
    use crate::trace::two_cores::Split;
    let reader = TraceReader::new(path, bytes);
    let one = format!("{:?}", fold::<_, Checked>(reader, path, Detail::Turns));
    // Two splits: a thread spawned per split is most of a fuzz execution's time.
    for (block, unparsed_ahead) in [(1, 0), (7, usize::MAX)] {
        let split = Split {
            block,
            unparsed_ahead,
        };
        let two = fold_on_two_cores(bytes, path, Detail::Turns, split);
        assert_eq!(format!("{two:?}"), one, "{split:?}");
    }
}

fn same_event<I: crate::trace::lenient::ToolInput + std::fmt::Debug + PartialEq>(line: &[u8]) {
    use crate::trace::event::Event;
    let fast = Event::<I>::parse(line).map_err(|e| e.to_string());
    let serde = Event::<I>::parse_with_serde(line).map_err(|e| e.to_string());
    assert_eq!(fast, serde, "{}", String::from_utf8_lossy(line));
}

/// A trace file on disk, through `mur trace show`, `steps`, `report` and `diff` by path: the
/// delegation tree walk follows whatever children it names.
pub fn trace_file(bytes: &[u8]) {
    let path = write_scratch("workdir/ses_hostile/trace.jsonl", bytes);
    let session = Some(path.display().to_string());
    let workdir = Some(scratch().join("workdir"));
    let commands = [
        TraceCommand::Show {
            session: session.clone(),
            workdir: workdir.clone(),
            json: false,
            body: None,
            turn: None,
        },
        TraceCommand::Show {
            session: session.clone(),
            workdir: workdir.clone(),
            json: true,
            body: None,
            turn: None,
        },
        TraceCommand::Show {
            session: session.clone(),
            workdir: workdir.clone(),
            json: false,
            body: Some("response".into()),
            turn: Some(0),
        },
        TraceCommand::Steps {
            session: session.clone(),
            verbose: true,
            workdir: workdir.clone(),
            json: false,
        },
        TraceCommand::Report {
            sessions: session.clone().into_iter().collect(),
            last: None,
            workdir: workdir.clone(),
            json: false,
        },
        TraceCommand::Diff {
            sessions: vec![path.display().to_string(), path.display().to_string()],
            workdir,
            json: true,
        },
    ];
    for cmd in commands {
        let _ = execute(cmd, &Style::PLAIN);
    }
}

/// A `submit-plan` input (JSON), validated and run to its end against a session whose tools
/// answer at once: `echo` succeeds with its input, `fail` fails; shell `echo` succeeds, shell
/// `false` fails; capsule `child` answers its task.
pub fn plan(bytes: &[u8]) {
    use mur_actors::plan::{run_plan, PlanContext, StepOutcome, StepRunner};
    struct Instant;
    #[async_trait::async_trait]
    impl StepRunner for Instant {
        async fn run_tool(&self, tool: &str, input: Value) -> StepOutcome {
            match tool {
                "fail" => StepOutcome::Failed {
                    error: "tool step failed".into(),
                },
                _ => StepOutcome::Success {
                    output: input.to_string(),
                },
            }
        }
        async fn run_shell(&self, argv: Vec<String>) -> StepOutcome {
            match argv.first().map(String::as_str) {
                Some("false") => StepOutcome::Failed {
                    error: "exit code 1".into(),
                },
                _ => StepOutcome::Success {
                    output: argv.join(" "),
                },
            }
        }
        async fn run_capsule(&self, capsule: &str, version: &str, task: &str) -> StepOutcome {
            StepOutcome::Success {
                output: format!("{capsule}@{version}: {task}"),
            }
        }
        fn trace(&self, _event: mur_actors::trace::TraceEvent) {}
    }
    let Ok(input) = serde_json::from_slice::<Value>(bytes) else {
        return;
    };
    let ctx = PlanContext {
        tools: vec!["echo".into(), "fail".into(), "submit-plan".into()],
        shell_allow: vec!["echo".into(), "false".into()],
        capsules: vec!["child".into()],
        parent_event: "ev_hostile".into(),
    };
    let (_cancel, canceled) = tokio::sync::watch::channel(false);
    RUNTIME.with(|rt| {
        rt.block_on(run_plan(&input, &ctx, Arc::new(Instant), canceled));
    });
}

/// A `.mur.zip` archive, read as `mur install` and pulls read one (entries, limits, the packed
/// manifest) and, when it is accepted, unpacked into a fresh folder.
pub fn archive(bytes: &[u8]) {
    let Ok(payload) = crate::artifact::unpack(bytes, "hostile.mur.zip") else {
        return;
    };
    let dest = scratch().join("unpacked");
    let _ = std::fs::remove_dir_all(&dest);
    let _ = payload.extract_to(&dest);
    let _ = std::fs::remove_dir_all(&dest);
}

/// A scripted model's script (`config.script`).
pub fn script(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let _ = crate::drivers::script::ScriptDriver::from_str(text, Path::new("script.yaml"));
}

/// A model reply body, decoded by the driver the first byte picks (Anthropic Messages, OpenAI
/// Chat, OpenAI Responses), under the content-type the second byte picks (JSON, event stream,
/// none), split into chunks wherever a `0xff` byte stands: the network may split a reply anywhere.
/// Chat Completions and Anthropic bodies are also decoded with the typed fast paths off, as
/// `Value`s only: both decodings must give the same reply or the same error.
pub fn reply(bytes: &[u8]) {
    let [api, kind, body @ ..] = bytes else {
        return;
    };
    let api = match api % 3 {
        0 => ReplyApi::AnthropicMessages,
        1 => ReplyApi::OpenAiChat,
        _ => ReplyApi::OpenAiResponses,
    };
    let content_type = match kind % 3 {
        0 => "application/json",
        1 => "text/event-stream; charset=utf-8",
        _ => "",
    };
    let _ = crate::drivers::decode_reply(api, content_type, body.split(|b| *b == 0xff));
    crate::drivers::check_readings_agree(api, content_type, body.split(|b| *b == 0xff));
}

/// A peer handle as `mur` receives one (`fetch-peer-file`, the door's redeem), and a peer
/// address. A random key must never accept a token it did not mint; a payload minted with a
/// key must verify back to itself.
pub fn peer(bytes: &[u8]) {
    use crate::peer::handle::{self, Key, Payload, Rejection};
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let _ = crate::peer::address::PeerAddr::parse(text);
    let _ = handle::handle_id(text);
    let key = Key::random().expect("/dev/urandom is readable");
    if let Ok(parsed) = handle::parse(text) {
        let _ = parsed.unverified();
        let verdict = parsed.verify(&key, "aud", "ses_hostile", 0);
        assert_eq!(
            verdict.err(),
            Some(Rejection::NotValid),
            "a key accepted a token it never minted"
        );
    }
    if let Ok(payload) = serde_json::from_slice::<Payload>(bytes) {
        let token = handle::mint(&key, &payload, "aud");
        let parsed = handle::parse(&token).expect("a minted token parses");
        let verdict = parsed.verify(&key, "aud", &payload.iss, 0);
        match verdict {
            Ok(back) => assert_eq!(back, payload, "a minted payload changed"),
            Err(Rejection::NotValid) => assert_ne!(payload.v, 1, "a valid mint was refused"),
            Err(Rejection::Expired) => assert_eq!(payload.exp, 0, "an unexpired mint expired"),
            Err(Rejection::Malformed) => panic!("a minted token is malformed"),
        }
    }
}
