//! `remove-artifact`: drop an artifact this session pulled.
//!
//! Only a pull can be undone: the artifact must not be declared in `murmur.yaml`, must not be a
//! hook or driver, and `murmur.lock` (re-read now) must pin it with `origin: runtime`. A pin
//! another session made is not this session's to remove: the answer is `"removed": false`. The pin
//! is deleted first (a failure there changes nothing), then the staged `tools/<tool>/` folder.

use mur_actors::artifact_error::{ArtifactError, ArtifactErrorKind};
use mur_actors::registry::{ArtifactRequest, Removed};
use mur_actors::tool::RuntimeTool;
use serde_json::json;

use super::lock::{read_lock, update_lock, Origin};
use super::pull::{lock_refusal, lock_unreadable};
use super::service::{artifact_arg, PullService};
use crate::manifest::{ArtifactName, ArtifactRuntime};

impl PullService {
    pub(super) fn remove_one(&self, request: &ArtifactRequest) -> Result<Removed, ArtifactError> {
        let text = artifact_arg(RuntimeTool::RemoveArtifact.name(), &request.input)?;
        if self.install.is_none() {
            return Err(RuntimeTool::RemoveArtifact.install_refusal(&request.input));
        }
        let session = &request.session_id;
        let lock = read_lock(&self.project_dir).map_err(|d| lock_unreadable(&d))?;
        let name = if text.contains('/') {
            ArtifactName::parse(&text).map_err(|e| {
                ArtifactError::new(ArtifactErrorKind::NotGranted, e.message.to_string())
            })?
        } else {
            let found = self
                .pulled_by(session, &text)
                .or_else(|| {
                    self.declared
                        .iter()
                        .find(|(n, _)| n.tool_name() == text)
                        .map(|(n, _)| n.clone())
                })
                .or_else(|| {
                    lock.entries
                        .iter()
                        .find(|e| {
                            e.name.tool_name() == text && e.session.as_deref() == Some(session)
                        })
                        .map(|e| e.name.clone())
                });
            match found {
                Some(n) => n,
                None => {
                    return Ok(Removed {
                        result: json!({"artifact": text, "removed": false}),
                        tool_name: text,
                    })
                }
            }
        };
        let tool = name.tool_name().to_string();
        if let Some(role) = self.declared_role(&name) {
            if matches!(role, ArtifactRuntime::Hook | ArtifactRuntime::Driver) {
                return Err(ArtifactError::new(ArtifactErrorKind::NotRemovable, format!(
                    "'{name}' is a {role}; hooks and drivers are fixed at launch and cannot be removed while the session runs"
                )));
            }
            return Err(ArtifactError::new(ArtifactErrorKind::NotRemovable, format!(
                "'{name}' is declared in murmur.yaml; an artifact the operator declared stays for the life of the session"
            )));
        }
        match lock.entry(&name) {
            None => {
                return Err(ArtifactError::new(ArtifactErrorKind::NotRemovable, format!(
                    "murmur.lock has no entry for '{name}', so nothing records that this capsule pulled it"
                )))
            }
            Some(e) if e.origin == Origin::Operator => {
                return Err(ArtifactError::new(ArtifactErrorKind::NotRemovable, format!(
                    "murmur.lock pins '{name}' with origin: operator; only an artifact this capsule pulled (origin: runtime) can be removed"
                )))
            }
            Some(_) => {}
        }
        // This session pulled it: remembered here, or recorded in the pin itself.
        let pinned_by_us = lock
            .entry(&name)
            .is_some_and(|e| e.session.as_deref() == Some(session.as_str()));
        if self.pulled_by(session, &tool).as_ref() != Some(&name) && !pinned_by_us {
            return Ok(Removed {
                result: json!({"artifact": name.to_string(), "removed": false}),
                tool_name: tool,
            });
        }
        update_lock(&self.project_dir, |lock| match lock.entry(&name).map(|e| e.origin) {
            Some(Origin::Runtime) => {
                lock.remove(&name);
                Ok(())
            }
            Some(Origin::Operator) => Err(ArtifactError::new(ArtifactErrorKind::NotRemovable, format!(
                "murmur.lock pins '{name}' with origin: operator; only an artifact this capsule pulled (origin: runtime) can be removed"
            ))),
            None => Err(ArtifactError::new(ArtifactErrorKind::NotRemovable, format!(
                "murmur.lock has no entry for '{name}', so nothing records that this capsule pulled it"
            ))),
        })
        .map_err(lock_refusal)?;
        self.forget(session, &tool);
        let dir = request.records_dir.join("tools").join(&tool);
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(ArtifactError::new(
                    ArtifactErrorKind::Files,
                    format!(
                        "'{name}' is removed from this session and from murmur.lock, but {} could not be deleted: {e}",
                        dir.display()
                    ),
                ));
            }
        }
        Ok(Removed {
            result: json!({"artifact": name.to_string(), "removed": true}),
            tool_name: tool,
        })
    }
}
