//! Reading session traces (`trace.jsonl`) and the `mur trace` views.
//!
//! The layers, each in its own module:
//! - [`reader`] streams a trace one line at a time into [`event::Event`]s (lenient about
//!   unknown keys and events, tolerant of a torn last line), a plain line taken apart by a
//!   scanner made for them (`scan`) and any other by serde_json;
//! - [`summary`] folds those events into a [`record::Summary`] in one pass, a large trace read
//!   and parsed on two cores (`two_cores`) but folded in order all the same;
//! - [`address`] turns a session address (`@N`, id suffix, full id, path) into a trace path;
//! - [`tree`] follows delegations into children's traces;
//! - [`show`], [`steps`], [`diff`], [`report`] render; [`body`] prints recorded bodies
//!   (`--body`); [`cli`] parses arguments.

pub mod address;
pub mod body;
pub mod cli;
pub mod diff;
pub mod event;
pub mod format;
pub mod lenient;
pub mod reader;
pub mod record;
pub mod report;
mod scan;
pub mod show;
pub mod steps;
pub mod summary;
pub mod tree;
pub(crate) mod two_cores;

pub use address::resolve;
