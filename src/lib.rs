//! `mur`: the edges of the runtime and its CLI.
//!
//! The kernel (actors, messages, traits) is the `mur-actors` crate; this crate holds what talks
//! to the outside world: the manifest, drivers, tool executors, stores and the trace readers.

mod allocator;
pub mod artifact;
pub mod capsule;
pub mod children;
pub mod cluster;
pub mod contain;
pub mod diagnostic;
pub mod door;
pub mod drivers;
pub mod explain;
pub mod files;
#[doc(hidden)]
pub mod hostile;
pub mod launch;
pub mod manifest;
pub mod output;
pub mod peer;
pub mod progress;
pub mod replay;
pub mod resume;
pub mod run;
pub mod runtime;
pub mod tls;
pub mod tools;
pub mod trace;
