//! Rules that relate one part of the manifest to another: the driver is declared, gateways
//! sit where a driver can use them, runtime pulls need the http transport, and no two
//! artifacts (or an artifact and the runtime) claim one tool name.
//!
//! They run after every block has been read, in upstream's order, so the first error a user
//! sees is the one upstream would show.

use super::artifacts::{ArtifactDecl, ArtifactRuntime, BuiltinDriver};
use super::capabilities::Capabilities;
use super::inference::{Inference, Transport};
use super::names::{is_reserved_tool_name, reserved_tool_names_list};
use super::reader::{Area, Ctx};
use crate::diagnostic::Diagnostic;

/// Docs page about runtime-provided tools (hint of E-CAP-013).
const RUNTIME_TOOLS_DOCS: &str = "https://docs.murmur.nexus/reference/runtime-provided-tools/";

/// `capabilities.install` with `transport: process` is refused (seed 001).
pub(crate) fn install_vs_transport(ctx: &mut Ctx, caps: &Capabilities, inf: Option<&Inference>) {
    let process = inf.is_some_and(|i| i.transport == Transport::Process);
    if process && caps.install.is_some() {
        ctx.invalid(
            Area::Capability,
            "capabilities.install",
            "is not valid with transport: process; the harness owns its tool list, so a pulled \
             artifact could never reach it",
        );
    }
}

/// The driver named by `inference.driver.artifact` is declared with `runtime: driver`, and
/// driver gateways sit only on the http driver (or an alternate).
pub(crate) fn driver_rules(ctx: &mut Ctx, artifacts: &[ArtifactDecl], inf: &Inference) {
    let name = &inf.driver_artifact;
    match artifacts.iter().find(|a| &a.name == name) {
        None => {
            let why = format!("artifact '{name}' is not declared in artifacts:");
            let near: Vec<&ArtifactDecl> = artifacts
                .iter()
                .filter(|a| a.name.name() == name.name())
                .collect();
            let hint = if near.len() == 1 {
                format!("refer to it as '{}'", near[0].name)
            } else {
                format!(
                    "declare it: add an artifacts: entry with name: {name}, its version, and \
                     runtime: driver"
                )
            };
            ctx.invalid(Area::Inference, "inference.driver.artifact", why)
                .hint = Some(hint);
        }
        Some(a) if a.runtime != ArtifactRuntime::Driver => {
            let why = format!(
                "artifact '{name}' is declared with runtime: {}; the inference driver's \
                 artifacts: entry needs runtime: driver",
                a.runtime
            );
            ctx.invalid(Area::Inference, "inference.driver.artifact", why)
                .hint = Some(format!(
                "add runtime: driver to the artifacts: entry '{name}'"
            ));
        }
        Some(a) => {
            let http = inf.transport == Transport::Http;
            if http && a.gateway.is_none() && BuiltinDriver::of(name) != Some(BuiltinDriver::Script)
            {
                let why = format!(
                    "artifact '{name}' is the transport: http inference driver but declares no \
                     gateway.endpoint"
                );
                ctx.invalid_artifact("E-MAN-003", a.index, why);
                if let Some(d) = ctx.errors.last_mut() {
                    d.hint = Some(
                        "add gateway: {endpoint: <URL>, api_key: ${YOUR_KEY_VARIABLE}} to this \
                         entry"
                            .into(),
                    );
                }
            }
            if !http && (!a.config.is_null() || !a.capabilities.is_null()) {
                let why = format!(
                    "artifact '{name}' is the transport: process driver and takes no config: or \
                     capabilities:"
                );
                ctx.invalid_artifact("E-MAN-003", a.index, why);
            }
        }
    }
    // A driver that is not declared was just reported; blaming other drivers' gateways for
    // it would only repeat that.
    let declared = artifacts.iter().any(|a| &a.name == name);
    for a in artifacts.iter().filter(|_| declared) {
        if a.runtime != ArtifactRuntime::Driver || a.gateway.is_none() {
            continue;
        }
        let is_alternate = inf
            .alternates
            .iter()
            .any(|alt| alt.driver_artifact.as_ref() == Some(&a.name));
        let why = if inf.transport == Transport::Process {
            Some(format!(
                "artifact '{}' declares gateway:, but under transport: process the harness \
                 binds its own credential",
                a.name
            ))
        } else if &a.name != name && !is_alternate {
            Some(format!(
                "artifact '{}' declares gateway:, but it is neither inference.driver.artifact \
                 nor an inference.alternates driver",
                a.name
            ))
        } else {
            None
        };
        if let Some(why) = why {
            ctx.invalid_artifact("E-MAN-003", a.index, why);
        }
    }
    for (i, alt) in inf.alternates.iter().enumerate() {
        if let Some(d) = &alt.driver_artifact {
            if !artifacts
                .iter()
                .any(|a| &a.name == d && a.runtime == ArtifactRuntime::Driver)
            {
                ctx.invalid(
                    Area::Inference,
                    &format!("inference.alternates[{i}].driver.artifact"),
                    format!("artifact '{d}' is not declared in artifacts: with runtime: driver"),
                );
            }
        }
    }
    if let Some(p) = &inf.system_prompt_artifact {
        if !artifacts.iter().any(|a| &a.name == p && a.prompt_payload) {
            ctx.invalid(
                Area::Inference,
                "inference.system_prompt_artifact",
                format!("artifact '{p}' is not declared in artifacts: with prompt_payload: true"),
            );
        }
    }
}

/// E-CAP-013 (an artifact claims a runtime-provided tool name) and E-CAP-020 (two artifacts
/// share a tool name). Upstream reports these at staging, without the file prefix.
pub(crate) fn tool_names(ctx: &mut Ctx, artifacts: &[ArtifactDecl]) {
    for a in artifacts {
        let tool = a.tool_name();
        if is_reserved_tool_name(tool) {
            let msg = format!(
                "artifact '{}' has the tool name '{tool}', which collides with a tool the runtime \
                 provides itself; the reserved names are {}",
                a.name,
                reserved_tool_names_list()
            );
            ctx.errors
                .push(Diagnostic::error("E-CAP-013", msg).with_hint(format!(
                    "rename the artifact, or drop it if the runtime's own '{tool}' is what you \
                 wanted ({RUNTIME_TOOLS_DOCS})"
                )));
        }
    }
    // The first declaration of each tool name (a map, not a scan: a manifest may list
    // thousands of artifacts).
    let mut first: std::collections::HashMap<&str, &ArtifactDecl> =
        std::collections::HashMap::with_capacity(artifacts.len());
    for a in artifacts {
        if let Some(b) = first.get(a.tool_name()).copied().or_else(|| {
            first.insert(a.tool_name(), a);
            None
        }) {
            if b.name == a.name {
                let msg = format!(
                    "artifact '{}' is declared twice (artifacts[{}] and artifacts[{}]); declare \
                     it once",
                    a.name, b.index, a.index
                );
                ctx.errors.push(Diagnostic::error("E-CAP-020", msg));
                continue;
            }
            let msg = format!(
                "artifacts '{}' and '{}' share the tool name '{}'; the model calls a tool by \
                 that name, so keep one of them",
                b.name,
                a.name,
                a.tool_name()
            );
            ctx.errors.push(Diagnostic::error("E-CAP-020", msg));
        }
    }
}
