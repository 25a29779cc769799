//! Tool executors: how a shell binary, a native tool artifact or a skill actually runs.
//!
//! The kernel's Dispatcher decides whether a call may run and which executor gets it; these
//! decide how. Each is a real thing: a subprocess, a program speaking JSON on stdin/stdout, a file.

pub mod capture;
pub mod hooks;
pub mod native;
pub mod process;
pub mod shell;
pub mod skill;

use std::sync::Arc;
use std::time::Duration;

use mur_actors::tool::Executors;

/// The executors `mur run` uses; `deadline` bounds one shell command or native tool call, and
/// every process they start runs in `sandbox`.
pub fn executors(deadline: Duration, sandbox: Arc<crate::contain::Sandbox>) -> Executors {
    Executors {
        shell: Arc::new(shell::ShellExecutor {
            deadline,
            sandbox: sandbox.clone(),
        }),
        native: Arc::new(native::NativeExecutor { sandbox }),
        skill: Arc::new(skill::SkillExecutor),
        runtime: Default::default(),
    }
}
