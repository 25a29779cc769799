//! `capabilities.limits` and `capabilities.resources`: numeric ceilings.
//!
//! Every value is optional and must be greater than zero when written; the defaults live in
//! accessor methods so that callers never re-invent them.

use super::reader::{Block, Ctx};

/// Default deadline of one native tool or shell call, in seconds.
pub const DEFAULT_DEADLINE_SECONDS: u64 = 600;

/// `capabilities.limits`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// `deadline_seconds`: how long one tool call may run (default 600).
    pub deadline_seconds: Option<u64>,
    /// `memory_bytes` for a guest.
    pub memory_bytes: Option<u64>,
    /// `table_elements` for a guest.
    pub table_elements: Option<u64>,
    /// `instances` for a guest.
    pub instances: Option<u64>,
}

impl Limits {
    /// The deadline for one tool call, default applied.
    pub fn deadline(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.deadline_seconds.unwrap_or(DEFAULT_DEADLINE_SECONDS))
    }
}

/// `capabilities.resources`: per-subprocess ceilings, as written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// `max_processes`.
    pub max_processes: Option<u64>,
    /// `max_open_files`.
    pub max_open_files: Option<u64>,
    /// `max_file_size_bytes`.
    pub max_file_size_bytes: Option<u64>,
    /// `cpu_seconds`.
    pub cpu_seconds: Option<u64>,
    /// `memory_bytes`.
    pub memory_bytes: Option<u64>,
    /// `workdir_max_bytes`.
    pub workdir_max_bytes: Option<u64>,
    /// Some `cgroup_*` key is written (they are read, not applied).
    pub cgroup_declared: bool,
}

const LIMIT_KEYS: &[&str] = &[
    "memory_bytes",
    "table_elements",
    "instances",
    "deadline_seconds",
];

const RESOURCE_KEYS: &[&str] = &[
    "max_processes",
    "max_open_files",
    "max_file_size_bytes",
    "cpu_seconds",
    "memory_bytes",
    "cgroup_memory_bytes",
    "cgroup_pids_max",
    "cgroup_cpu_percent",
    "cgroup_io_bytes_per_sec",
    "workdir_max_bytes",
];

pub(crate) fn parse_limits(ctx: &mut Ctx, caps: &Block<'_>) -> Limits {
    let Some(b) = caps.child(ctx, "limits", LIMIT_KEYS) else {
        return Limits::default();
    };
    Limits {
        deadline_seconds: b.positive(ctx, "deadline_seconds"),
        memory_bytes: b.positive(ctx, "memory_bytes"),
        table_elements: b.positive(ctx, "table_elements"),
        instances: b.positive(ctx, "instances"),
    }
}

pub(crate) fn parse_resources(ctx: &mut Ctx, caps: &Block<'_>) -> Resources {
    let Some(b) = caps.child(ctx, "resources", RESOURCE_KEYS) else {
        return Resources::default();
    };
    let mut cgroup_declared = false;
    for key in &RESOURCE_KEYS[5..9] {
        cgroup_declared |= b.positive(ctx, key).is_some();
    }
    Resources {
        max_processes: b.positive(ctx, "max_processes"),
        max_open_files: b.positive(ctx, "max_open_files"),
        max_file_size_bytes: b.positive(ctx, "max_file_size_bytes"),
        cpu_seconds: b.positive(ctx, "cpu_seconds"),
        memory_bytes: b.positive(ctx, "memory_bytes"),
        workdir_max_bytes: b.positive(ctx, "workdir_max_bytes"),
        cgroup_declared,
    }
}
