//! The typed capsule manifest: what `mur run` starts, after every load-time rule has passed.
//!
//! Values here are already validated, so callers never re-check shapes; defaults are applied
//! (or offered through accessors) so that every part of `mur` agrees on them.

use super::artifacts::{ArtifactDecl, ArtifactRuntime, BuiltinDriver};
use super::capabilities::Capabilities;
use super::exports::Exports;
use super::inference::{Inference, Transport};
use super::lifecycle::{Lifecycle, TraceConfig};
use super::names::ArtifactName;
use super::other::OtherBlocks;
use crate::diagnostic::Diagnostic;

/// A capsule manifest (`murmur.yaml`).
#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    /// `name` of the capsule (non-blank, trimmed).
    pub name: String,
    /// `version` of the capsule (non-blank, trimmed).
    pub version: String,
    /// `artifacts:` in the order written.
    pub artifacts: Vec<ArtifactDecl>,
    /// `capabilities:` (everything `None`/default when absent).
    pub capabilities: Capabilities,
    /// `exports:`.
    pub exports: Option<Exports>,
    /// `inference:`; `None` for a capsule with no model.
    pub inference: Option<Inference>,
    /// `lifecycle:` with defaults applied.
    pub lifecycle: Lifecycle,
    /// `trace:` with defaults applied.
    pub trace: TraceConfig,
    /// Blocks parsed for compatibility but not acted on.
    pub other: OtherBlocks,
}

impl Manifest {
    /// The declared artifact with exactly this full name.
    pub fn artifact(&self, name: &ArtifactName) -> Option<&ArtifactDecl> {
        self.artifacts.iter().find(|a| &a.name == name)
    }

    /// The `artifacts:` entry of the inference driver, if there is inference.
    pub fn driver(&self) -> Option<&ArtifactDecl> {
        self.artifact(&self.inference.as_ref()?.driver_artifact)
    }

    /// Artifacts the model is offered (tools and skills).
    pub fn model_visible_artifacts(&self) -> impl Iterator<Item = &ArtifactDecl> {
        self.artifacts
            .iter()
            .filter(|a| a.runtime.is_model_visible())
    }

    /// Whether a session of this capsule may start a command: a shell grant, a pull grant, or
    /// any artifact besides its driver (a tool, a hook, a sub-capsule that may). Broad on
    /// purpose: it only decides whether a run probes the host's namespaces early.
    pub fn may_run_commands(&self) -> bool {
        let caps = &self.capabilities;
        caps.shell.is_some()
            || caps.install.is_some()
            || self
                .artifacts
                .iter()
                .any(|a| a.runtime != ArtifactRuntime::Driver)
    }

    /// Declared hook artifacts.
    pub fn hooks(&self) -> impl Iterator<Item = &ArtifactDecl> {
        self.artifacts
            .iter()
            .filter(|a| a.runtime == ArtifactRuntime::Hook)
    }

    /// Artifacts that must come from a store: not built-in drivers, not `source:` skills.
    pub fn installable_artifacts(&self) -> impl Iterator<Item = &ArtifactDecl> {
        self.artifacts
            .iter()
            .filter(|a| a.source.is_none() && a.builtin_driver().is_none())
    }

    /// The shell binaries granted (`capabilities.shell.allow`), in order.
    pub fn shell_binaries(&self) -> &[String] {
        self.capabilities
            .shell
            .as_ref()
            .map(|s| s.allow.as_slice())
            .unwrap_or(&[])
    }

    /// Names of the runtime-provided tools this manifest grants (not shell tools): the grant
    /// is the tool's existence.
    pub fn granted_runtime_tools(&self) -> Vec<&'static str> {
        let caps = &self.capabilities;
        let http = self
            .inference
            .as_ref()
            .is_none_or(|i| i.transport == Transport::Http);
        use mur_actors::tool::RuntimeTool;
        RuntimeTool::ALL
            .into_iter()
            .filter(|tool| match tool {
                RuntimeTool::ShareFile => self
                    .exports
                    .as_ref()
                    .is_some_and(|e| e.peer_files.is_some()),
                RuntimeTool::FetchPeerFile => caps.peer_fetch.is_some(),
                RuntimeTool::DelegateTask => {
                    caps.spawn.as_ref().is_some_and(|s| !s.allow.is_empty())
                }
                RuntimeTool::SubmitPlan => caps.plan_submit(),
                RuntimeTool::PullArtifact | RuntimeTool::RemoveArtifact => {
                    caps.install.is_some() && http
                }
            })
            .map(RuntimeTool::name)
            .collect()
    }

    /// What would stop `mur run` from starting this (valid) manifest: a transport or driver
    /// this runtime does not run. Empty when it can run.
    pub fn launch_problems(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let Some(inf) = &self.inference else {
            return out;
        };
        if inf.transport == Transport::Process {
            out.push(
                Diagnostic::error(
                    "E-RUN-005",
                    "inference.transport: process is not supported by mur; it runs transport: \
                     http with a built-in driver",
                )
                .with_hint(
                    "use murmur/driver-anthropic, murmur/driver-openai or mur/driver-script with \
                     transport: http",
                ),
            );
        } else if BuiltinDriver::of(&inf.driver_artifact).is_none() {
            out.push(
                Diagnostic::error(
                    "E-RUN-006",
                    format!(
                        "driver '{}' is not built into mur; mur runs {}",
                        inf.driver_artifact,
                        BuiltinDriver::NAMES.join(", ")
                    ),
                )
                .with_hint("name one of the built-in drivers in inference.driver.artifact"),
            );
        }
        // A driver entry nothing uses would be skipped: say so rather than ignore it.
        for a in &self.artifacts {
            if a.runtime == ArtifactRuntime::Driver
                && a.builtin_driver().is_none()
                && a.name != inf.driver_artifact
            {
                out.push(
                    Diagnostic::error(
                        "E-RUN-006",
                        format!(
                            "artifacts: declares the driver '{}', which is not built into mur; mur runs {}",
                            a.name,
                            BuiltinDriver::NAMES.join(", ")
                        ),
                    )
                    .with_hint("remove the entry, or name a built-in driver"),
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    const DRIVER: &str = "name: t\nversion: \"1\"\nartifacts:\n  - name: mur/driver-script\n    version: \"0.1.0\"\n    runtime: driver\n    config:\n      script: s.yaml\ninference:\n  transport: http\n  model: scripted\n  driver:\n    artifact: mur/driver-script\n";

    fn may_run(extra: &str) -> bool {
        crate::manifest::parse_str(&format!("{DRIVER}{extra}"))
            .expect("a valid manifest")
            .0
            .may_run_commands()
    }

    #[test]
    fn only_a_capsule_with_a_driver_and_nothing_else_cannot_run_a_command() {
        assert!(!may_run(""));
        assert!(may_run("capabilities:\n  shell:\n    allow: [ls]\n"));
        assert!(may_run(
            "capabilities:\n  install:\n    tool: [\"local/tool-*\"]\n"
        ));
    }
}
