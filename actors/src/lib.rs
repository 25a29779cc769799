//! The mur kernel: the actors a capsule runs on and the traits they call through.
//!
//! No HTTP, no CLI, no YAML here: the edges (drivers, executors, stores) live in the `mur`
//! crate and reach the kernel only through the traits in [`model`] and [`tool`]. The actors:
//! [`supervisor::Supervisor`] (one per process), [`session::Session`] (one per capsule),
//! [`dispatcher::Dispatcher`] (one per session that calls tools) and [`registry::Registry`] (one per process, the
//! only writer of `murmur.lock`). Not an actor: [`trace::TraceWriter`], the shared handle that
//! writes one trace file.

pub mod continuation;
pub mod delegation;
pub mod dispatcher;
pub mod durable;
pub mod fence;
pub mod file_lane;
pub mod ids;
pub mod model;
pub mod plan;
pub mod plan_steps;
pub mod prompt;
pub mod provided;
pub mod registry;
pub mod session;
pub mod spec;
pub mod staging;
pub mod supervisor;
pub mod task;
pub mod text;
pub mod tool;
pub mod trace;
