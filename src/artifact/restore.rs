//! A resume holding again what the recorded session had pulled (`mur resume`).
//!
//! The lock is the authority: the artifact is taken from a store (project, then global; never a
//! source, never the network) at exactly the version `murmur.lock` pins, and its bytes must hash
//! to the pinned sha256. It then goes the way of every pull ([`PullService::hold`]): staged into
//! the new session's `tools/`, the pin updated, the tool built. A runtime pin tied to the
//! recorded session (or a session it resumed) is tied to the new session, so the lock names the
//! session that holds the tool and a `remove-artifact` there removes it.

use mur_actors::artifact_error::{ArtifactError, ArtifactErrorKind};
use mur_actors::registry::{ArtifactRequest, Pulled};

use super::lock::{read_lock, LockEntry, Origin};
use super::pull::Fetched;
use super::service::PullService;
use crate::manifest::ArtifactName;

impl PullService {
    /// Checks, writing nothing, that `name` can be held again: `murmur.lock` pins it, a store
    /// holds the pinned version, and its bytes hash to the pinned sha256. A resume checks every
    /// pulled artifact first, so one that cannot be restored refuses the resume before any pin
    /// changes.
    pub(super) async fn restorable(
        &self,
        name: &ArtifactName,
    ) -> Result<(LockEntry, Fetched), ArtifactError> {
        let gone = |why: String| ArtifactError::new(ArtifactErrorKind::NotRestorable, why);
        let Some(install) = &self.install else {
            return Err(gone(format!(
                "'{name}' was pulled by the session, and the manifest no longer grants capabilities.install"
            )));
        };
        let lock = read_lock(&self.project_dir).map_err(|d| gone(d.message))?;
        let Some(pin) = lock.entry(name).cloned() else {
            return Err(gone(format!(
                "'{name}' was pulled by the session, and murmur.lock no longer pins it, so the version and bytes it ran cannot be known"
            )));
        };
        let version = pin.resolved_version.clone();
        let Some(chosen) = self
            .store_candidates(name, Some(&version))
            .into_iter()
            .next()
        else {
            return Err(gone(format!(
                "murmur.lock pins '{name}@{version}', which the session pulled, and neither the project store nor the global store holds {name}@{version} any more"
            )));
        };
        let fetched = self
            .fetch(install, &lock, name, &chosen, None, None, None)
            .await?;
        if pin.sha256.hash_for(fetched.platform.as_deref()) != Some(fetched.bytes_sha.as_str()) {
            return Err(gone(format!(
                "artifact integrity check failed for {name}@{version}: the {} copy does not match the sha256 murmur.lock pins",
                fetched.fetched_from
            )));
        }
        Ok((pin, fetched))
    }

    /// Checks what [`PullService::restore`] would check, writing nothing.
    pub async fn check_restore(&self, name: &ArtifactName) -> Result<(), ArtifactError> {
        self.restorable(name).await.map(|_| ())
    }

    /// Holds `name` again for the session `request` names, as `murmur.lock` pins it. `chain` is
    /// the recorded session's id and the ids of the sessions it resumed: a runtime pin naming
    /// one of them is tied to `request.session_id`. `Err` is a sentence naming the artifact
    /// and what is missing; nothing is left staged or written then.
    pub async fn restore(
        &self,
        request: &ArtifactRequest,
        name: &ArtifactName,
        chain: &[String],
    ) -> Result<Pulled, ArtifactError> {
        let (pin, fetched) = self.restorable(name).await?;
        let version = pin.resolved_version.clone();
        let session = request.session_id.clone();
        let expected = pin.clone();
        self.hold(request, name, &version, fetched, move |lock| {
            let Some(e) = lock.entries.iter_mut().find(|e| e.name == expected.name) else {
                return Err(ArtifactError::new(
                    ArtifactErrorKind::Lock,
                    format!(
                        "murmur.lock lost its pin of '{}' while the resume restored it",
                        expected.name
                    ),
                ));
            };
            if e.resolved_version != expected.resolved_version || e.sha256 != expected.sha256 {
                return Err(ArtifactError::new(
                    ArtifactErrorKind::Lock,
                    format!(
                        "murmur.lock's pin of '{}' changed while the resume restored it",
                        expected.name
                    ),
                ));
            }
            if e.origin == Origin::Runtime && e.session.as_ref().is_some_and(|s| chain.contains(s))
            {
                e.session = Some(session);
            }
            Ok(e.origin)
        })
    }
}
