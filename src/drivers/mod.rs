//! Model drivers behind the kernel's `ModelDriver` trait.
//!
//! All drivers are built into `mur` (SPEC §3): declaring one in `artifacts:` is enough, nothing
//! is fetched or pinned. `script` is the offline scripted model.

pub mod script;
