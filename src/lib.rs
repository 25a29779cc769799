//! `mur`: the edges of the runtime and its CLI.
//!
//! The kernel (actors, messages, traits) is the `mur-actors` crate; this crate holds what talks
//! to the outside world: the manifest, drivers, tool executors, stores and the trace readers.

pub mod artifact;
pub mod capsule;
pub mod children;
pub mod diagnostic;
pub mod door;
pub mod drivers;
pub mod launch;
pub mod manifest;
pub mod peer;
pub mod run;
pub mod tools;
pub mod trace;
