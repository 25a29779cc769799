//! The typed view of one trace line.
//!
//! A trace line is a flat JSON object: the envelope (`event_type`, `event_id`, `parent_id`,
//! `session_id`, `timestamp`) and the fields of its event type. Rather than one Rust type per
//! event, [`Event`] is a single flat record of every field the views read, each optional and
//! each lenient (a field of an unexpected shape reads as absent). Unknown keys are skipped by
//! serde without being stored, so a line costs only what the views use.
//!
//! An event borrows its strings from the line it was read from (a string with escapes is the
//! exception: it has to be unescaped into its own buffer), so reading a million lines allocates
//! nothing per line for the fields a view only compares or counts. The tool call `input` is the
//! one field a view keeps whole; its type `I` says whether it is kept (`serde_json::Value`) or
//! only checked ([`lenient::Checked`]).
//!
//! The derived `Deserialize` is the definition of what a line means. [`Event::parse_from`]
//! first tries the line scanner (`super::scan`), many times faster on the plain lines writers
//! produce, straight into the event; whatever the scanner is not sure of goes to the derived
//! impl, so errors and odd lines read exactly as they always have. The two read each field by
//! the one rule its type has ([`lenient::Field`]), and a test checks they know the same keys.

use std::borrow::Cow;

use serde::Deserialize;

use super::lenient::{self, ToolInput, Usage};

/// One trace line, as far as the `mur trace` views need it: strings borrowed from the line
/// (`'a`), the tool input read as `I`.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(default, bound(deserialize = "I: ToolInput"))]
pub struct Event<'a, I = serde_json::Value> {
    /// The event discriminator (`session_start`, `inference`, `tool_call`, …).
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub event_type: Option<Cow<'a, str>>,
    /// `ses_…` id of the session that wrote the line.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub session_id: Option<Cow<'a, str>>,
    /// Unix milliseconds.
    #[serde(deserialize_with = "lenient::read")]
    pub timestamp: Option<i64>,

    // session_start
    /// `session_start.capsule_name`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub capsule_name: Option<Cow<'a, str>>,
    /// `session_start.capsule_version`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub capsule_version: Option<Cow<'a, str>>,
    /// `session_start.model` (also on hook inference lines).
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub model: Option<Cow<'a, str>>,
    /// `session_start.max_turns` (absent or null: no cap).
    #[serde(deserialize_with = "lenient::read")]
    pub max_turns: Option<i64>,
    /// `session_start.tools_declared`: the tool names offered to the model.
    #[serde(deserialize_with = "lenient::read")]
    pub tools_declared: Option<Vec<String>>,
    /// `session_start.containment_declared`: the floor asked for.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub containment_declared: Option<Cow<'a, str>>,
    /// `session_start.containment_achieved`: what the session's commands ran under.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub containment_achieved: Option<Cow<'a, str>>,
    /// `session_start.spawned_by`: the parent session of a delegated child.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub spawned_by: Option<Cow<'a, str>>,
    /// `delegation_id` on `session_start` (child), `delegation_start` and `delegation`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub delegation_id: Option<Cow<'a, str>>,

    // turn-level
    /// Zero-based turn number.
    #[serde(deserialize_with = "lenient::read")]
    pub turn: Option<i64>,
    /// `tsk_…` id of the task the line belongs to.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub task_id: Option<Cow<'a, str>>,
    /// Input tokens of an inference call, or a task's / child's input total.
    #[serde(deserialize_with = "lenient::read")]
    pub input_tokens: Option<i64>,
    /// Output tokens of an inference call, or a task's / child's output total.
    #[serde(deserialize_with = "lenient::read")]
    pub output_tokens: Option<i64>,
    /// The provider's own input count of an inference call (upstream's `input_tokens` is then
    /// the runtime's estimate).
    #[serde(deserialize_with = "lenient::read")]
    pub input_tokens_actual: Option<i64>,
    /// The provider's own output count of an inference call.
    #[serde(deserialize_with = "lenient::read")]
    pub output_tokens_actual: Option<i64>,
    /// `tool_call | end_turn | text | error`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub decision: Option<Cow<'a, str>>,
    /// Tool named by an inference decision or run by a `tool_call`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub tool_name: Option<Cow<'a, str>>,
    /// `hook:<name>` on hook inference lines; `runtime|operator` on pulls and skills.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub origin: Option<Cow<'a, str>>,
    /// Failure code of an inference call.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub error_code: Option<Cow<'a, str>>,
    /// HTTP status the provider answered with.
    #[serde(deserialize_with = "lenient::read")]
    pub provider_status: Option<i64>,
    /// The runtime's own failure text for a call it could not run.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub error: Option<Cow<'a, str>>,

    // tool_call / shell / skill_call
    /// The tool input as the model supplied it.
    #[serde(deserialize_with = "lenient::read")]
    pub input: Option<I>,
    /// Size of the input in bytes.
    #[serde(deserialize_with = "lenient::read")]
    pub input_bytes: Option<i64>,
    /// Size of the result in bytes.
    #[serde(deserialize_with = "lenient::read")]
    pub output_bytes: Option<i64>,
    /// Wall time of a call, a task, a session or a delegation.
    #[serde(deserialize_with = "lenient::read")]
    pub duration_ms: Option<i64>,
    /// `ok|error` on calls; `success|failed|skipped` on plan steps.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub status: Option<Cow<'a, str>>,
    /// `shell.binary`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub binary: Option<Cow<'a, str>>,
    /// `shell.command`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub command: Option<Cow<'a, str>>,
    /// `shell.exit_code`.
    #[serde(deserialize_with = "lenient::read")]
    pub exit_code: Option<i64>,
    /// `skill_call.skill_name`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub skill_name: Option<Cow<'a, str>>,

    // artifact_pulled / tools_refreshed
    /// Full name of a pulled artifact.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub name: Option<Cow<'a, str>>,
    /// Version of a pulled artifact or a delegated capsule.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub version: Option<Cow<'a, str>>,
    /// `tool|skill`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub runtime: Option<Cow<'a, str>>,
    /// `trusted|untrusted`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub trust: Option<Cow<'a, str>>,
    /// `project store | global store | github:<owner>/<repo>`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub fetched_from: Option<Cow<'a, str>>,
    /// GitHub owner id of the scope a pull came from.
    #[serde(deserialize_with = "lenient::read")]
    pub owner_id: Option<i64>,
    /// `compaction|agent|immediate`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub trigger: Option<Cow<'a, str>>,
    /// Tools added by a refresh.
    #[serde(deserialize_with = "lenient::read")]
    pub added: Option<Vec<String>>,
    /// Tools removed by a refresh.
    #[serde(deserialize_with = "lenient::read")]
    pub removed: Option<Vec<String>>,

    // call_denied / failures / retries
    /// `call_denied.event`: `on-shell|on-tool-call`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub event: Option<Cow<'a, str>>,
    /// Hook that decided.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub hook_name: Option<Cow<'a, str>>,
    /// What was denied.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub target: Option<Cow<'a, str>>,
    /// Why (denials, failures, retries, delegations).
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub reason: Option<Cow<'a, str>>,
    /// `task_failed.cause`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub cause: Option<Cow<'a, str>>,
    /// `inference_retry.attempt` (1-based).
    #[serde(deserialize_with = "lenient::read")]
    pub attempt: Option<i64>,
    /// `inference_retry.max_retries`.
    #[serde(deserialize_with = "lenient::read")]
    pub max_retries: Option<i64>,
    /// `inference_retry.delay_ms`.
    #[serde(deserialize_with = "lenient::read")]
    pub delay_ms: Option<i64>,

    // delegation
    /// Full name of a delegated capsule.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub capsule: Option<Cow<'a, str>>,
    /// `ses_…` id of a delegated child.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub child_session_id: Option<Cow<'a, str>>,
    /// The child's work folder.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub child_workdir: Option<Cow<'a, str>>,
    /// The child's records folder (its `trace.jsonl` lives there).
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub child_records_dir: Option<Cow<'a, str>>,
    /// `ok|error|crashed|terminated|refused|…`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub outcome: Option<Cow<'a, str>>,
    /// Per-delegation token usage, when the parent recorded it.
    #[serde(deserialize_with = "lenient::read")]
    pub usage: Option<Usage>,

    // task_continued
    /// `task_continued.delegations`: the delegations whose outcomes the task resumed with.
    #[serde(deserialize_with = "lenient::read")]
    pub delegations: Option<Vec<String>>,
    /// `task_continued.waited_ms`.
    #[serde(deserialize_with = "lenient::read")]
    pub waited_ms: Option<i64>,

    // plans
    /// `plan_*.plan_id`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub plan_id: Option<Cow<'a, str>>,
    /// `plan_start.step_count`.
    #[serde(deserialize_with = "lenient::read")]
    pub step_count: Option<i64>,
    /// `plan_step*.step_id`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub step_id: Option<Cow<'a, str>>,
    /// `plan_step*.kind`: `tool|shell|capsule`.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub kind: Option<Cow<'a, str>>,

    // task_end / session_end
    /// Exit status of a task or of the session.
    #[serde(borrow, deserialize_with = "lenient::read")]
    pub exit_status: Option<Cow<'a, str>>,
    /// `session_end.total_turns`.
    #[serde(deserialize_with = "lenient::read")]
    pub total_turns: Option<i64>,
    /// `session_end.total_input_tokens`.
    #[serde(deserialize_with = "lenient::read")]
    pub total_input_tokens: Option<i64>,
    /// `session_end.total_output_tokens`.
    #[serde(deserialize_with = "lenient::read")]
    pub total_output_tokens: Option<i64>,
    /// `session_end.total_tool_calls`.
    #[serde(deserialize_with = "lenient::read")]
    pub total_tool_calls: Option<i64>,
    /// `session_end.total_shell_calls`.
    #[serde(deserialize_with = "lenient::read")]
    pub total_shell_calls: Option<i64>,
}

impl<I> Default for Event<'_, I> {
    fn default() -> Self {
        Event {
            event_type: None,
            session_id: None,
            timestamp: None,
            capsule_name: None,
            capsule_version: None,
            model: None,
            max_turns: None,
            tools_declared: None,
            containment_declared: None,
            containment_achieved: None,
            spawned_by: None,
            delegation_id: None,
            turn: None,
            task_id: None,
            input_tokens: None,
            output_tokens: None,
            input_tokens_actual: None,
            output_tokens_actual: None,
            decision: None,
            tool_name: None,
            origin: None,
            error_code: None,
            provider_status: None,
            error: None,
            input: None,
            input_bytes: None,
            output_bytes: None,
            duration_ms: None,
            status: None,
            binary: None,
            command: None,
            exit_code: None,
            skill_name: None,
            name: None,
            version: None,
            runtime: None,
            trust: None,
            fetched_from: None,
            owner_id: None,
            trigger: None,
            added: None,
            removed: None,
            event: None,
            hook_name: None,
            target: None,
            reason: None,
            cause: None,
            attempt: None,
            max_retries: None,
            delay_ms: None,
            capsule: None,
            child_session_id: None,
            child_workdir: None,
            child_records_dir: None,
            outcome: None,
            usage: None,
            delegations: None,
            waited_ms: None,
            plan_id: None,
            step_count: None,
            step_id: None,
            kind: None,
            exit_status: None,
            total_turns: None,
            total_input_tokens: None,
            total_output_tokens: None,
            total_tool_calls: None,
            total_shell_calls: None,
        }
    }
}

impl<I> Event<'_, I> {
    /// The event type, or `""` when the line had none.
    pub fn kind(&self) -> &str {
        self.event_type.as_deref().unwrap_or("")
    }
}

impl Event<'_> {
    /// A non-negative integer field as `u64` (absent or negative: 0).
    pub fn n(v: Option<i64>) -> u64 {
        v.map(|x| x.max(0) as u64).unwrap_or(0)
    }
}

impl<'a, I: ToolInput> Event<'a, I> {
    /// Parse one trace line (its newline may be included).
    pub fn parse(line: &'a [u8]) -> Result<Self, serde_json::Error> {
        let mut ev = Event::default();
        ev.parse_from(line)?;
        Ok(ev)
    }

    /// Parse one trace line with the derived `Deserialize` alone: what a line means, which
    /// [`Event::parse`] gives faster. For tests and fuzzing, which hold the two to agreeing.
    pub fn parse_with_serde(line: &'a [u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(line)
    }

    /// Parse one trace line into this event, which must be a default one (fields the line does
    /// not have are left as they are). On an error the event is left default.
    ///
    /// The line scanner reads the plain lines writers produce; any other line, or one it is
    /// not sure of, is read by the derived `Deserialize`, from a `str` when the line is valid
    /// UTF-8 (so serde_json does not check each string again; it reads the same either way)
    /// and from the bytes otherwise. The scanner only ever gives the event serde would.
    pub fn parse_from(&mut self, line: &'a [u8]) -> Result<(), serde_json::Error> {
        if let Some(text) = utf8(line) {
            if super::scan::line(text, self) {
                return Ok(());
            }
        }
        self.read_with_serde(line)
    }

    /// The derived `Deserialize`, for the lines the scanner leaves. Out of line: the event it
    /// builds is a second wide struct on the stack, which the scanned path does without.
    #[cold]
    #[inline(never)]
    fn read_with_serde(&mut self, line: &'a [u8]) -> Result<(), serde_json::Error> {
        let again = match std::str::from_utf8(line) {
            Ok(text) => serde_json::from_str(text),
            Err(_) => serde_json::from_slice(line),
        };
        let (ev, result) = match again {
            Ok(ev) => (ev, Ok(())),
            Err(e) => (Event::default(), Err(e)),
        };
        *self = ev;
        result
    }
}

/// `line` as text, if it is UTF-8. Trace lines are nearly always ASCII (serde_json writes
/// non-ASCII text as it is, but ids, keys and numbers are ASCII), and the check for ASCII alone
/// is cheaper than `from_utf8`'s general one, which was a twentieth of `mur trace report`
/// (measured: 4 % of the report's time saved).
#[inline]
fn utf8(line: &[u8]) -> Option<&str> {
    if line.is_ascii() {
        // SAFETY: every ASCII byte sequence is valid UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(line) })
    } else {
        std::str::from_utf8(line).ok()
    }
}

/// The keys [`Event`] reads, in field order, for the line scanner: their names, and each one
/// set to what a scanned value reads as.
macro_rules! known_fields {
    ($($name:ident),* $(,)?) => {
        /// A key [`Event`] reads, in field order (the scanner keeps one bit per key it has seen).
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        pub(super) enum Known {
            $($name),*
        }

        // The scanner marks the keys it has seen in a `u128`; the key table holds indexes in a `u8`.
        const _: () = assert!([$(stringify!($name)),*].len() <= 128);

        /// Every key [`Event`] reads, in field order.
        pub(super) const KNOWN_NAMES: &[&str] = &[$(stringify!($name)),*];

        /// The [`Known`] of each of [`KNOWN_NAMES`].
        const KNOWN_ALL: &[Known] = &[$(Known::$name),*];

        impl Known {
            /// The field `key` names, if [`Event`] reads it: a slot of [`KEY_TABLE`] found from
            /// the key's length and three of its bytes, then one comparison. A `match` on the
            /// text was a tenth of `mur trace report`'s time: a chain of comparisons per length,
            /// whose branches the processor mispredicts from one key to the next.
            #[inline]
            pub(super) fn of(key: &str) -> Option<Known> {
                let mut slot = key_slot(key.as_bytes());
                loop {
                    let index = KEY_TABLE[slot];
                    if index == NO_KEY {
                        return None;
                    }
                    if same_key(KNOWN_NAMES[index as usize].as_bytes(), key.as_bytes()) {
                        return Some(KNOWN_ALL[index as usize]);
                    }
                    slot = (slot + 1) % KEY_SLOTS;
                }
            }

            /// Set this field to what reading `value` gives; `None` when serde must read it.
            pub(super) fn scanned<'de, I: ToolInput>(
                self,
                ev: &mut Event<'de, I>,
                value: lenient::Scanned<'de>,
            ) -> Option<()> {
                match self {
                    $(Known::$name => ev.$name = lenient::Field::scanned(value)?,)*
                }
                Some(())
            }
        }
    };
}

/// Slots of [`KEY_TABLE`]: a power of two, several times the number of keys, so that most
/// lookups, of known keys and of others, look at one slot.
const KEY_SLOTS: usize = 512;

/// An empty slot of [`KEY_TABLE`].
const NO_KEY: u8 = u8::MAX;

/// Where the search for `key` starts in [`KEY_TABLE`].
#[inline]
const fn key_slot(key: &[u8]) -> usize {
    let n = key.len();
    if n == 0 {
        return 0;
    }
    let h = (n as u32).wrapping_mul(0x9e37_79b1)
        ^ (key[0] as u32).wrapping_mul(0x85eb_ca77)
        ^ (key[n / 2] as u32).wrapping_mul(0xc2b2_ae3d)
        ^ (key[n - 1] as u32).wrapping_mul(0x27d4_eb2f);
    (h ^ (h >> 15)) as usize % KEY_SLOTS
}

/// `a == b` for keys (a few to twenty bytes), eight bytes at a time and without a call to
/// `memcmp` (which, called per key, was 7 % of `mur trace report`).
#[inline]
fn same_key(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut a, mut b) = (a, b);
    while let (Some((x, rest_a)), Some((y, rest_b))) =
        (a.split_first_chunk::<8>(), b.split_first_chunk::<8>())
    {
        if u64::from_ne_bytes(*x) != u64::from_ne_bytes(*y) {
            return false;
        }
        (a, b) = (rest_a, rest_b);
    }
    a.iter().zip(b).all(|(x, y)| x == y)
}

/// Each known key's index in [`KNOWN_NAMES`], at its slot or, when that is taken, at the next
/// free one (open addressing); [`NO_KEY`] elsewhere. Built when compiling.
const KEY_TABLE: [u8; KEY_SLOTS] = {
    let mut table = [NO_KEY; KEY_SLOTS];
    let mut i = 0;
    while i < KNOWN_NAMES.len() {
        let mut slot = key_slot(KNOWN_NAMES[i].as_bytes());
        while table[slot] != NO_KEY {
            slot = (slot + 1) % KEY_SLOTS;
        }
        table[slot] = i as u8;
        i += 1;
    }
    table
};

known_fields!(
    event_type,
    session_id,
    timestamp,
    capsule_name,
    capsule_version,
    model,
    max_turns,
    tools_declared,
    containment_declared,
    containment_achieved,
    spawned_by,
    delegation_id,
    turn,
    task_id,
    input_tokens,
    output_tokens,
    input_tokens_actual,
    output_tokens_actual,
    decision,
    tool_name,
    origin,
    error_code,
    provider_status,
    error,
    input,
    input_bytes,
    output_bytes,
    duration_ms,
    status,
    binary,
    command,
    exit_code,
    skill_name,
    name,
    version,
    runtime,
    trust,
    fetched_from,
    owner_id,
    trigger,
    added,
    removed,
    event,
    hook_name,
    target,
    reason,
    cause,
    attempt,
    max_retries,
    delay_ms,
    capsule,
    child_session_id,
    child_workdir,
    child_records_dir,
    outcome,
    usage,
    delegations,
    waited_ms,
    plan_id,
    step_count,
    step_id,
    kind,
    exit_status,
    total_turns,
    total_input_tokens,
    total_output_tokens,
    total_tool_calls,
    total_shell_calls,
);
