//! The mur kernel: the actors a capsule runs on and the traits they call through.
//!
//! No HTTP, no CLI, no YAML here: the edges (drivers, executors, stores) live in the `mur`
//! crate and reach the kernel only through the traits in [`model`], [`tool`] and [`gate`]. The
//! actors: [`supervisor::Supervisor`] (one per process), [`session::Session`] (one per
//! capsule), [`dispatcher::Dispatcher`] (one per session that calls tools),
//! [`registry::Registry`] (one per process, the only writer of `murmur.lock`) and
//! [`trace_writer::TraceWriter`] (one per Supervisor: a failed trace write ends its session).
//! Lines themselves go through [`trace::TraceLog`], a handle shared by everything that writes a
//! session's trace. Start reading at [`session`] (its `Life` enum is a session's state machine).

pub mod artifact_error;
pub mod continuation;
pub mod delegation;
pub mod dispatcher;
pub mod durable;
pub mod fence;
pub mod file_lane;
pub mod gate;
pub mod grants;
pub mod ids;
pub mod inventory;
pub mod json_str;
pub mod model;
pub mod placement;
pub mod plan;
pub mod prompt;
pub mod protocol;
pub mod provided;
pub mod record_error;
pub mod registry;
pub mod session;
pub mod solo;
pub mod spec;
pub mod staging;
pub mod supervisor;
pub mod task;
pub mod testkit;
pub mod text;
pub mod tool;
pub mod totals;
pub mod trace;
pub mod trace_writer;
pub mod workers;
