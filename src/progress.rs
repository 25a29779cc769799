//! Live progress of `mur run` on a terminal, drawn with `indicatif` on stderr.
//!
//! When stderr is a terminal (and `-q` is not given), `mur run` installs an [`Observer`] in the
//! kernel's trace writer ([`mur_actors::trace::set_observer`]): every trace line of every
//! session is handed, as it is appended, to one thread of its own, which keeps the state of the
//! tree and draws it. So the kernel knows nothing of terminals, and a piped run (no observer)
//! pays one atomic load per line.
//!
//! What the thread draws:
//! - one line printed per finished event, indented by the session's depth: each model call
//!   (turn, tokens, time), each tool call (name, a short form of its input, `ok` / exit code /
//!   refused, time), pulls and removals, delegations, plan steps, retries; refusals and failures
//!   marked `✗` (red when colour is allowed);
//! - below them, redrawn in place, a spinner per live session saying what it waits for
//!   (the model, a tool, its sub-capsules), children indented under their parent;
//! - at the end, the tree of sub-capsules with each one's outcome.
//!
//! Ctrl-C asks the thread what the run still waits for ([`interrupted`]).

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use mur_actors::trace::{EventType, Observer, TraceEvent};
use serde_json::{Map, Value};

use crate::trace::format::{duration, thousands, Style};

/// Most spinners drawn for sub-capsules at once; the rest are counted on one line.
const MAX_CHILD_BARS: usize = 12;

/// Most sub-capsules whose own events get a printed line (a fan-out of thousands would
/// otherwise scroll for minutes); past it only their outcomes are counted.
const MAX_CHILD_LINES: usize = 16;

/// The longest short form of a tool call's input.
const INPUT_CHARS: usize = 60;

enum Msg {
    Line(String, TraceEvent),
    Interrupt(Sender<String>),
    Finish(Sender<()>),
}

struct Handle {
    tx: Mutex<Sender<Msg>>,
    multi: MultiProgress,
}

static PROGRESS: OnceLock<Handle> = OnceLock::new();

/// The observer: a clone of each event into the channel, nothing more, on the emitter's thread.
struct Forward(Sender<Msg>);

impl Observer for Forward {
    fn line(&self, session_id: &str, event: &TraceEvent) {
        let _ = self
            .0
            .send(Msg::Line(session_id.to_string(), event.clone()));
    }
}

/// Whether `mur run` should draw progress: stderr is a terminal that can redraw in place
/// (not `TERM=dumb`), and the run is not `-q`.
pub fn wanted(quiet: bool) -> bool {
    !quiet
        && std::io::stderr().is_terminal()
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// Start drawing progress for this process (once; later calls return the same handle).
/// Returns the [`MultiProgress`] that other stderr writers (logs) must print through.
pub fn start() -> MultiProgress {
    let handle = PROGRESS.get_or_init(|| {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let (tx, rx) = mpsc::channel();
        let style = Style {
            color: crate::output::color_stderr(),
        };
        let drawn = multi.clone();
        let spawned = std::thread::Builder::new()
            .name("mur-progress".into())
            .spawn(move || Tree::new(drawn, style).serve(rx));
        if spawned.is_ok() {
            mur_actors::trace::set_observer(Box::new(Forward(tx.clone())));
        }
        Handle {
            tx: Mutex::new(tx),
            multi,
        }
    });
    handle.multi.clone()
}

/// Ask the progress thread something, waiting at most `patience` for its answer (it answers
/// after every line queued before the question).
fn ask<T>(make: impl FnOnce(Sender<T>) -> Msg, patience: Duration) -> Option<T> {
    let handle = PROGRESS.get()?;
    let (tx, rx) = mpsc::channel();
    handle.tx.lock().ok()?.send(make(tx)).ok()?;
    rx.recv_timeout(patience).ok()
}

/// Ctrl-C: print, above the progress, what the run still waits for. `false` when no progress
/// is drawn (the caller logs its own line).
pub fn interrupted() -> bool {
    ask(Msg::Interrupt, Duration::from_secs(2)).is_some()
}

/// The run is over: draw every line still queued, clear the spinners, print the tree of
/// sub-capsules with their outcomes. A no-op without progress. A large fan-out can leave
/// many lines queued; the status line waits for them (within reason) so it is never drawn
/// over by a spinner.
pub fn finish() {
    let _ = ask(Msg::Finish, Duration::from_secs(30));
}

/// One session as the terminal shows it.
struct Node {
    capsule: String,
    depth: usize,
    parent: Option<String>,
    bar: Option<ProgressBar>,
    /// What it does now (`turn 1 · running bash`).
    doing: String,
    /// The timestamp of its last line (a model call's time is the gap before its line).
    last_ms: u64,
    /// Its final outcome, once known.
    outcome: Option<String>,
    /// Delegations started and not yet ended.
    waiting_children: usize,
    /// Its lines are printed (the root, and the first sub-capsules).
    printed: bool,
    /// A `tool_call` line waiting for the `shell` line that may follow it with the exit code.
    pending: Option<PendingCall>,
    /// Child session ids, in the order they started.
    children: Vec<String>,
    turn: i64,
}

struct PendingCall {
    name: String,
    input: String,
    duration_ms: u64,
    /// What a `remove-artifact` call removed.
    removed: Option<String>,
}

struct Tree {
    multi: MultiProgress,
    style: Style,
    nodes: HashMap<String, Node>,
    root: Option<String>,
    /// delegation_start seen before the child's session_start: child id → (capsule, parent).
    expected: HashMap<String, (String, String)>,
    child_bars: usize,
    child_lines: usize,
    /// Sub-capsules without a spinner of their own, live and ended.
    hidden_live: usize,
    hidden_done: usize,
    overflow: Option<ProgressBar>,
}

fn str_of<'a>(f: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    f.get(key).and_then(Value::as_str)
}

fn num_of(f: &Map<String, Value>, key: &str) -> Option<u64> {
    f.get(key).and_then(Value::as_u64)
}

fn short_id(id: &str) -> &str {
    // `ses_` + 32 hex: the last 8 are what `mur trace show` accepts as a suffix.
    id.get(id.len().saturating_sub(8)..).unwrap_or(id)
}

/// One line, at most `max` characters, `…` when cut.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        flat
    } else {
        let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// A tool call's input, short: the command of a shell tool, else the compact JSON.
fn short_input(input: Option<&Value>) -> String {
    match input {
        None | Some(Value::Null) => String::new(),
        Some(Value::Object(m))
            if m.len() == 1 && m.get("command").is_some_and(Value::is_string) =>
        {
            one_line(m["command"].as_str().unwrap_or(""), INPUT_CHARS)
        }
        Some(v) => one_line(&v.to_string(), INPUT_CHARS),
    }
}

impl Tree {
    fn new(multi: MultiProgress, style: Style) -> Tree {
        Tree {
            multi,
            style,
            nodes: HashMap::new(),
            root: None,
            expected: HashMap::new(),
            child_bars: 0,
            child_lines: 0,
            hidden_live: 0,
            hidden_done: 0,
            overflow: None,
        }
    }

    fn serve(mut self, rx: Receiver<Msg>) {
        while let Ok(msg) = rx.recv() {
            match msg {
                Msg::Line(session, event) => self.line(&session, &event),
                Msg::Interrupt(reply) => {
                    let text = self.waiting_for();
                    let _ = self.multi.println(self.style.yellow(&text));
                    let _ = reply.send(text);
                }
                Msg::Finish(reply) => {
                    // Lines appended before the report are already queued ahead of this.
                    while let Ok(Msg::Line(session, event)) = rx.try_recv() {
                        self.line(&session, &event);
                    }
                    self.finish();
                    let _ = reply.send(());
                }
            }
        }
    }

    fn spinner(&self, prefix: String) -> ProgressBar {
        let bar = ProgressBar::new_spinner().with_prefix(prefix);
        if let Ok(style) = ProgressStyle::with_template("{prefix}{spinner} {wide_msg} {elapsed}") {
            bar.set_style(style.tick_chars("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏ "));
        }
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }

    fn print(&self, depth: usize, text: &str) {
        let _ = self
            .multi
            .println(format!("{}{text}", "  ".repeat(depth + 1)));
    }

    fn set_doing(&mut self, session: &str, doing: String) {
        if let Some(n) = self.nodes.get_mut(session) {
            if let Some(bar) = &n.bar {
                bar.set_message(format!("{} · {doing}", n.capsule));
            }
            n.doing = doing;
        }
    }

    fn line(&mut self, session: &str, event: &TraceEvent) {
        if event.event_type == EventType::SessionStart {
            self.session_start(session, event);
            return;
        }
        let Some(node) = self.nodes.get(session) else {
            return;
        };
        let fields = event.fields();
        let f = &fields;
        let (depth, printed) = (node.depth, node.printed);
        // A shell tool's `tool_call` is followed by its `shell` line, which has the exit code.
        if event.event_type != EventType::Shell {
            self.flush_pending(session);
        }
        let gap = event
            .timestamp
            .saturating_sub(self.nodes.get(session).map_or(0, |n| n.last_ms));
        if let Some(n) = self.nodes.get_mut(session) {
            n.last_ms = event.timestamp;
        }
        let st = self.style;
        match event.event_type {
            EventType::TaskStart => {
                self.set_doing(session, "turn 0 · waiting for the model".into())
            }
            EventType::Inference => {
                let turn = f.get("turn").and_then(Value::as_i64).unwrap_or(0);
                if let Some(n) = self.nodes.get_mut(session) {
                    n.turn = turn;
                }
                if str_of(f, "decision") == Some("error") {
                    let what = [str_of(f, "error_code"), str_of(f, "error")]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join(": ");
                    if printed {
                        self.print(
                            depth,
                            &st.red(&format!(
                                "✗ turn {turn} · model call failed: {}",
                                one_line(&what, 160)
                            )),
                        );
                    }
                    return;
                }
                if printed {
                    self.print(
                        depth,
                        &format!("turn {turn} · model · {} · {}", tokens(f), duration(gap)),
                    );
                }
                let next = match (str_of(f, "decision"), str_of(f, "tool_name")) {
                    (Some("tool_call"), Some(tool)) => format!("turn {turn} · running {tool}"),
                    _ => format!("turn {turn} · finishing"),
                };
                self.set_doing(session, next);
            }
            EventType::InferenceRetry => {
                let turn = num_of(f, "turn").unwrap_or(0);
                if printed {
                    self.print(
                        depth,
                        &st.yellow(&format!(
                            "↻ turn {turn} · model call retried (attempt {} of {}) in {}: {}",
                            num_of(f, "attempt").unwrap_or(0),
                            num_of(f, "max_retries").unwrap_or(0),
                            duration(num_of(f, "delay_ms").unwrap_or(0)),
                            one_line(str_of(f, "reason").unwrap_or(""), 80)
                        )),
                    );
                }
                self.set_doing(session, format!("turn {turn} · waiting to retry the model"));
            }
            EventType::ToolCall => {
                let name = str_of(f, "tool_name").unwrap_or("?").to_string();
                let input = short_input(f.get("input"));
                let ms = num_of(f, "duration_ms").unwrap_or(0);
                let turn = self.nodes.get(session).map_or(0, |n| n.turn);
                self.set_doing(session, format!("turn {turn} · {name} done"));
                if !printed {
                    return;
                }
                if str_of(f, "status") == Some("ok") {
                    if let Some(n) = self.nodes.get_mut(session) {
                        let removed = (name == "remove-artifact")
                            .then(|| f.get("input").and_then(|i| i.get("artifact")))
                            .flatten()
                            .and_then(Value::as_str)
                            .map(str::to_string);
                        n.pending = Some(PendingCall {
                            name,
                            input,
                            duration_ms: ms,
                            removed,
                        });
                    }
                    return;
                }
                let text = match str_of(f, "error") {
                    Some(why) => format!(
                        "✗ {name}  {input} · refused: {} · {}",
                        one_line(why, 160),
                        duration(ms)
                    ),
                    None => format!("✗ {name}  {input} · failed · {}", duration(ms)),
                };
                self.print(depth, &st.red(&text));
            }
            EventType::Shell => {
                let pending = self.nodes.get_mut(session).and_then(|n| n.pending.take());
                if let Some(p) = pending {
                    let code = f.get("exit_code").and_then(Value::as_i64);
                    let text = match code {
                        Some(0) => format!(
                            "✓ {}  {} · exit 0 · {}",
                            p.name,
                            p.input,
                            duration(p.duration_ms)
                        ),
                        Some(c) => st.red(&format!(
                            "✗ {}  {} · exit {c} · {}",
                            p.name,
                            p.input,
                            duration(p.duration_ms)
                        )),
                        None => st.red(&format!(
                            "✗ {}  {} · killed · {}",
                            p.name,
                            p.input,
                            duration(p.duration_ms)
                        )),
                    };
                    self.print(depth, &text);
                }
            }
            EventType::SkillCall if printed => {
                let name = str_of(f, "skill_name").unwrap_or("?");
                if str_of(f, "status") == Some("ok") {
                    self.print(depth, &format!("✓ skill {name}"));
                } else {
                    self.print(
                        depth,
                        &st.red(&format!(
                            "✗ skill {name}: {}",
                            one_line(str_of(f, "error").unwrap_or("failed"), 160)
                        )),
                    );
                }
            }
            EventType::CallDenied if printed => {
                self.print(
                    depth,
                    &st.red(&format!(
                        "✗ {} · denied by {}: {}",
                        str_of(f, "target").unwrap_or("?"),
                        str_of(f, "hook_name").unwrap_or("a policy hook"),
                        one_line(str_of(f, "reason").unwrap_or(""), 160)
                    )),
                );
            }
            EventType::ArtifactPulled if printed => {
                self.print(
                    depth,
                    &format!(
                        "↓ pulled {}@{} ({}, from {})",
                        str_of(f, "name").unwrap_or("?"),
                        str_of(f, "version").unwrap_or("?"),
                        str_of(f, "runtime").unwrap_or("tool"),
                        str_of(f, "fetched_from").unwrap_or("?")
                    ),
                );
            }
            EventType::ToolsRefreshed if printed => {
                let list = |k: &str| {
                    f.get(k)
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                        .unwrap_or_default()
                };
                let (added, removed) = (list("added"), list("removed"));
                let mut parts = Vec::new();
                if !added.is_empty() {
                    parts.push(format!("+{added}"));
                }
                if !removed.is_empty() {
                    parts.push(format!("−{removed}"));
                }
                self.print(depth, &format!("tools now: {}", parts.join("  ")));
            }
            EventType::DelegationStart => {
                let child = str_of(f, "child_session_id").unwrap_or("").to_string();
                let capsule = str_of(f, "capsule").unwrap_or("?").to_string();
                if printed {
                    self.print(
                        depth,
                        &format!(
                            "→ delegated to {capsule}@{} ({})",
                            str_of(f, "version").unwrap_or("?"),
                            short_id(&child)
                        ),
                    );
                }
                self.expected.insert(child, (capsule, session.to_string()));
                if let Some(n) = self.nodes.get_mut(session) {
                    n.waiting_children += 1;
                }
            }
            EventType::Delegation => {
                let capsule = str_of(f, "capsule").unwrap_or("?");
                let outcome = str_of(f, "outcome").unwrap_or("?");
                let child = str_of(f, "child_session_id");
                if printed {
                    let mut text = format!("← {capsule} {outcome}");
                    if let Some(ms) = num_of(f, "duration_ms").filter(|_| child.is_some()) {
                        text.push_str(&format!(" · {}", duration(ms)));
                    }
                    if let Some(why) = str_of(f, "reason").filter(|_| outcome != "ok") {
                        text.push_str(&format!(": {}", one_line(why, 160)));
                    }
                    let text = if outcome == "ok" {
                        text
                    } else {
                        st.red(&text.replacen('←', "✗", 1))
                    };
                    self.print(depth, &text);
                }
                if let Some(child) = child {
                    // The parent's word wins over the child's own ending (a crashed
                    // child's session_end says `failed`; its outcome is `crashed`).
                    if let Some(c) = self.nodes.get_mut(child) {
                        c.outcome = Some(outcome.to_string());
                    }
                    if let Some(n) = self.nodes.get_mut(session) {
                        n.waiting_children = n.waiting_children.saturating_sub(1);
                    }
                }
            }
            EventType::TaskContinued => {
                let turn = self.nodes.get(session).map_or(0, |n| n.turn + 1);
                self.set_doing(session, format!("turn {turn} · waiting for the model"));
            }
            EventType::PlanStart if printed => {
                self.print(
                    depth,
                    &format!(
                        "plan {} · {} steps",
                        str_of(f, "plan_id").unwrap_or("?"),
                        num_of(f, "step_count").unwrap_or(0)
                    ),
                );
            }
            EventType::PlanStepStart => {
                let step = str_of(f, "step_id").unwrap_or("?");
                self.set_doing(session, format!("plan step {step}"));
            }
            EventType::PlanStep if printed => {
                let status = str_of(f, "status").unwrap_or("?");
                let mut text = format!(
                    "  step {} ({}) {status} · {}",
                    str_of(f, "step_id").unwrap_or("?"),
                    str_of(f, "kind").unwrap_or("?"),
                    duration(num_of(f, "duration_ms").unwrap_or(0))
                );
                if let Some(why) = str_of(f, "error") {
                    text.push_str(&format!(": {}", one_line(why, 160)));
                }
                let ok = matches!(status, "success" | "skipped");
                self.print(
                    depth,
                    &if ok {
                        text
                    } else {
                        st.red(&text.replacen("  step", "✗ step", 1))
                    },
                );
            }
            EventType::PlanEnd if printed => {
                let outcome = str_of(f, "outcome").unwrap_or("?");
                let text = format!(
                    "plan {} {outcome} · {} of {} steps succeeded",
                    str_of(f, "plan_id").unwrap_or("?"),
                    num_of(f, "steps_succeeded").unwrap_or(0),
                    num_of(f, "steps_total").unwrap_or(0)
                );
                self.print(
                    depth,
                    &if outcome == "ok" || outcome == "completed" {
                        text
                    } else {
                        st.red(&text)
                    },
                );
            }
            EventType::TaskFailed if printed => {
                self.print(
                    depth,
                    &st.red(&format!(
                        "✗ task failed ({}): {}",
                        str_of(f, "cause").unwrap_or("?"),
                        one_line(str_of(f, "reason").unwrap_or(""), 160)
                    )),
                );
            }
            EventType::TaskEnd => {
                let waiting = self.nodes.get(session).map_or(0, |n| n.waiting_children);
                if waiting > 0 {
                    self.set_doing(session, format!("ending {waiting} sub-capsules"));
                }
            }
            EventType::SessionEnd => self.session_end(session, f),
            _ => {}
        }
        if self
            .nodes
            .get(session)
            .is_some_and(|n| n.waiting_children > 0 && n.doing.ends_with("finishing"))
        {
            let waiting = self.nodes.get(session).map_or(0, |n| n.waiting_children);
            self.set_doing(session, format!("waiting for {waiting} sub-capsules"));
        }
    }

    fn flush_pending(&mut self, session: &str) {
        let Some(n) = self.nodes.get_mut(session) else {
            return;
        };
        if let Some(p) = n.pending.take() {
            let depth = n.depth;
            match p.removed {
                Some(name) => self.print(
                    depth,
                    &format!("− removed {name} · {}", duration(p.duration_ms)),
                ),
                None => self.print(
                    depth,
                    &format!(
                        "✓ {}  {} · ok · {}",
                        p.name,
                        p.input,
                        duration(p.duration_ms)
                    ),
                ),
            }
        }
    }

    fn session_start(&mut self, session: &str, event: &TraceEvent) {
        let f = event.fields();
        let capsule = str_of(&f, "capsule_name").unwrap_or("?").to_string();
        let parent = str_of(&f, "spawned_by")
            .map(str::to_string)
            .or_else(|| self.expected.get(session).map(|(_, p)| p.clone()))
            .filter(|p| self.nodes.contains_key(p));
        let depth = parent
            .as_ref()
            .and_then(|p| self.nodes.get(p))
            .map_or(0, |p| p.depth + 1);
        let is_root = parent.is_none() && self.root.is_none();
        let printed = is_root || (parent.is_some() && self.child_lines < MAX_CHILD_LINES);
        if !is_root && printed {
            self.child_lines += 1;
        }
        let bar = if is_root || (parent.is_some() && self.child_bars < MAX_CHILD_BARS) {
            let bar = self.spinner("  ".repeat(depth));
            let bar = self.multi.add(bar);
            if !is_root {
                self.child_bars += 1;
            }
            Some(bar)
        } else {
            self.hidden_live += 1;
            self.update_overflow();
            None
        };
        if is_root {
            self.root = Some(session.to_string());
        }
        if let Some(p) = parent.as_ref().and_then(|p| self.nodes.get_mut(p)) {
            p.children.push(session.to_string());
        }
        self.nodes.insert(
            session.to_string(),
            Node {
                capsule,
                depth,
                parent,
                bar,
                doing: "starting".into(),
                last_ms: event.timestamp,
                outcome: None,
                waiting_children: 0,
                printed,
                pending: None,
                children: Vec::new(),
                turn: 0,
            },
        );
        self.set_doing(session, "starting".into());
    }

    fn update_overflow(&mut self) {
        if self.hidden_live + self.hidden_done == 0 {
            return;
        }
        if self.overflow.is_none() {
            let bar = self.multi.add(self.spinner("  ".into()));
            self.overflow = Some(bar);
        }
        if let Some(bar) = &self.overflow {
            bar.set_message(format!(
                "{} more sub-capsules: {} running, {} ended",
                self.hidden_live + self.hidden_done,
                self.hidden_live,
                self.hidden_done
            ));
        }
    }

    fn session_end(&mut self, session: &str, f: &Map<String, Value>) {
        let status = str_of(f, "exit_status").unwrap_or("?").to_string();
        let Some(n) = self.nodes.get_mut(session) else {
            return;
        };
        n.outcome.get_or_insert(status);
        n.doing = "ended".into();
        match n.bar.take() {
            Some(bar) => {
                bar.finish_and_clear();
                self.multi.remove(&bar);
            }
            None if n.parent.is_some() => {
                self.hidden_live = self.hidden_live.saturating_sub(1);
                self.hidden_done += 1;
                self.update_overflow();
            }
            None => {}
        }
    }

    /// `waiting for hello (turn 1 · running bash) and 2 sub-capsules …`.
    fn waiting_for(&self) -> String {
        let live: Vec<&Node> = self
            .nodes
            .values()
            .filter(|n| n.outcome.is_none())
            .collect();
        let root = self.root.as_ref().and_then(|r| self.nodes.get(r));
        let mut text = String::from("Ctrl-C: canceling the run; ");
        match root.filter(|r| r.outcome.is_none()) {
            Some(r) => {
                text.push_str(&format!("waiting for {} ({})", r.capsule, r.doing));
                let children = live.len().saturating_sub(1);
                if children > 0 {
                    let noun = if children == 1 {
                        "sub-capsule"
                    } else {
                        "sub-capsules"
                    };
                    text.push_str(&format!(" and {children} {noun}"));
                }
                text.push_str(" to stop and write their last trace lines");
            }
            None => text.push_str("waiting for the session to write its last trace lines"),
        }
        text.push_str(" (Ctrl-C again exits at once)");
        text
    }

    fn finish(&mut self) {
        for n in self.nodes.values_mut() {
            if let Some(bar) = n.bar.take() {
                bar.finish_and_clear();
            }
        }
        if let Some(bar) = self.overflow.take() {
            bar.finish_and_clear();
        }
        let _ = self.multi.clear();
        let Some(root) = self.root.clone() else {
            return;
        };
        let has_children = self
            .nodes
            .get(&root)
            .is_some_and(|n| !n.children.is_empty());
        if !has_children {
            return;
        }
        let mut lines = vec![self.style.bold("sub-capsules:")];
        let mut shown = 0;
        self.tree_lines(&root, &mut lines, &mut shown);
        let all = self.nodes.values().filter(|n| n.parent.is_some()).count();
        if all > shown {
            let rest: Vec<&Node> = self.nodes.values().filter(|n| n.parent.is_some()).collect();
            let ok = rest
                .iter()
                .filter(|n| n.outcome.as_deref() == Some("ok"))
                .count();
            lines.push(format!(
                "  … and {} more; {ok} of {all} sub-capsules ended ok",
                all - shown
            ));
        }
        for line in lines {
            crate::errln!("{line}");
        }
    }

    fn tree_lines(&self, id: &str, out: &mut Vec<String>, shown: &mut usize) {
        let Some(n) = self.nodes.get(id) else {
            return;
        };
        for child in &n.children {
            let Some(c) = self.nodes.get(child) else {
                continue;
            };
            if *shown >= MAX_CHILD_BARS + MAX_CHILD_LINES {
                return;
            }
            *shown += 1;
            let outcome = c.outcome.as_deref().unwrap_or("still running");
            let mark = match outcome {
                "ok" => self.style.green("✓"),
                _ => self.style.red("✗"),
            };
            out.push(format!(
                "{}{mark} {} ({}) {}",
                "  ".repeat(c.depth),
                c.capsule,
                short_id(child),
                self.style.status(outcome)
            ));
            self.tree_lines(child, out, shown);
        }
    }
}

/// `1,234 in / 56 out` when the provider counted them; `~1,234 in / ~56 out (estimated)`
/// when the runtime estimated them from bytes.
fn tokens(f: &Map<String, Value>) -> String {
    let actual = (
        num_of(f, "input_tokens_actual"),
        num_of(f, "output_tokens_actual"),
    );
    match actual {
        (Some(i), Some(o)) => format!("{} in / {} out", thousands(i), thousands(o)),
        _ => format!(
            "~{} in / ~{} out (estimated)",
            thousands(num_of(f, "input_tokens").unwrap_or(0)),
            thousands(num_of(f, "output_tokens").unwrap_or(0))
        ),
    }
}

/// A writer for log lines while progress is drawn: each line is printed above the spinners
/// (`MultiProgress::suspend`), so logs and progress never overwrite each other.
#[derive(Clone)]
pub struct LogWriter(pub MultiProgress);

/// One log event's bytes, printed whole when the event is done.
pub struct LogLine {
    multi: MultiProgress,
    buf: Vec<u8>,
}

impl std::io::Write for LogLine {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        self.multi.suspend(|| {
            use std::io::Write;
            let _ = std::io::stderr().lock().write_all(&buf);
        });
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogLine;
    fn make_writer(&'a self) -> LogLine {
        LogLine {
            multi: self.0.clone(),
            buf: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_command_is_its_short_input_and_other_input_is_compact_json() {
        let cmd = serde_json::json!({"command": "ls -la\n/tmp"});
        assert_eq!(short_input(Some(&cmd)), "ls -la /tmp");
        let other = serde_json::json!({"path": "a.txt", "line": 3});
        assert_eq!(short_input(Some(&other)), r#"{"path":"a.txt","line":3}"#);
        let long = serde_json::json!({"command": "x".repeat(100)});
        let s = short_input(Some(&long));
        assert_eq!(s.chars().count(), INPUT_CHARS);
        assert!(s.ends_with('…'));
    }

    #[test]
    fn tokens_say_whose_count_they_are() {
        let both = serde_json::json!({"input_tokens": 1029, "output_tokens": 49, "input_tokens_actual": 100, "output_tokens_actual": 10});
        assert_eq!(tokens(both.as_object().unwrap()), "100 in / 10 out");
        let est = serde_json::json!({"input_tokens": 1029, "output_tokens": 49});
        assert_eq!(
            tokens(est.as_object().unwrap()),
            "~1,029 in / ~49 out (estimated)"
        );
    }
}
