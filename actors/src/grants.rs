//! [`Grants`]: what a capsule's manifest allows, as the kernel checks it at every call.
//!
//! A leaf module: the Dispatcher, the runtime tools and the delegation check all read grants,
//! and none of them needs the rest of a [`SessionSpec`](crate::spec::SessionSpec) for it.

/// The grants that decide which runtime-provided tools exist (seed 000: the grant is the tool's
/// existence) and what a call may do.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Grants {
    /// `capabilities.shell.allow`: binaries the capsule may run.
    pub shell_allow: Vec<String>,
    /// `capabilities.spawn.allow`: full names of capsules it may delegate to.
    pub spawn_allow: Vec<String>,
    /// `capabilities.plan.submit`.
    pub plan_submit: bool,
    /// `capabilities.peer_fetch.allow`.
    pub peer_fetch_allow: Vec<String>,
    /// `exports.peer_files` is declared.
    pub peer_files_export: bool,
    /// `capabilities.install` declares anything (tool or skill patterns).
    pub install: bool,
    /// `capabilities.network.allow`.
    pub network_allow: Vec<String>,
    /// `capabilities.install.tool` patterns, as written (`murmur/tool-*`).
    pub install_tool: Vec<String>,
    /// `capabilities.install.skill` patterns, as written.
    pub install_skill: Vec<String>,
    /// `capabilities.install.from` includes `sources`.
    pub install_sources: bool,
    /// `capabilities.filesystem.workdir_exec`: commands may execute what the work folder holds.
    pub workdir_exec: bool,
    /// `capabilities.network.unix_sockets`.
    pub unix_sockets: bool,
    /// The containment floor the session runs at (`advisory|scoped|sealed`): a child it
    /// delegates to runs at least this contained. `None` when the embedder decides nothing.
    pub containment_floor: Option<String>,
}
