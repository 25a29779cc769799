//! Artifacts: `.mur.zip` payloads, the project and global stores, GitHub sources,
//! `murmur.lock`, `mur build|install|list`, staging at launch and the in-session pull service.
//!
//! Everything a capsule runs besides the runtime's own tools is an artifact pinned by hash, so
//! this module is where trust is decided: every payload read is checked against its sidecar
//! and its pin, every zip is unpacked defensively, every write is all-or-nothing, and the lock
//! is merged under a cross-process lock so concurrent sessions never lose a pin.

pub mod build;
pub mod config;
pub mod decls;
pub mod github;
pub mod index;
pub mod install;
pub mod install_cmd;
pub mod install_ref;
pub mod list;
mod listing;
pub mod lock;
pub mod payload;
pub mod pull;
mod remove;
mod restore;
pub mod service;
pub mod stage;
pub mod store;
pub mod version;

pub use decls::{pull_tool_decl, remove_tool_decl};
pub use lock::{Lock, LockEntry, Origin, PinHash};
pub use payload::{unpack, PackedManifest, Payload};
pub use service::PullService;
pub use stage::{
    check_declared, extract_capsule, find_capsule, stage_declared, stored_capsule, StagedArtifacts,
    StagedHook,
};
pub use store::Store;
