//! Resolving delegated capsules: full name + exact version → a runnable child spec.
//!
//! A child capsule comes from the stores like any artifact (`mur build` packs a capsule folder,
//! `mur install` files it). The resolver loads each capsule's manifest and builds its driver once
//! and reuses them for every later delegation to it, so thousands of children of one capsule
//! cost one parse. A child whose manifest grants more than its parent is refused, naming the
//! manifest key: a sub-capsule's grants never exceed its parent's.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use mur_actors::delegation::{CapsuleResolver, ChildRequest, DelegationError, DelegationErrorKind};
use mur_actors::model::ModelDriver;
use mur_actors::spec::{Grants, SessionSpec, SpawnedBy};

use crate::capsule::{self, Placement};
use crate::manifest::{self, InstallPattern, LoadedManifest};

/// Finds the folder holding a capsule's extracted manifest.
pub type Locator = dyn Fn(&str, &str) -> Result<PathBuf, String> + Send + Sync;

/// One capsule, loaded once: its manifest and its driver.
struct Loaded {
    manifest: LoadedManifest,
    driver: Arc<dyn ModelDriver>,
}

/// Builds a capsule's model driver from its manifest.
pub type DriverMaker =
    dyn Fn(&LoadedManifest) -> Result<Arc<dyn ModelDriver>, String> + Send + Sync;

/// A resolver over stores (or any [`Locator`]) with a per-capsule cache.
pub struct ManifestResolver {
    locate: Box<Locator>,
    cache: Mutex<HashMap<(String, String), Arc<Loaded>>>,
    /// `None`: the driver the manifest names.
    make_driver: Option<Box<DriverMaker>>,
}

impl ManifestResolver {
    /// A resolver that finds capsules with `locate(full name, version)`.
    pub fn new(locate: Box<Locator>) -> Self {
        ManifestResolver {
            locate,
            cache: Mutex::new(HashMap::new()),
            make_driver: None,
        }
    }

    /// This resolver with children's drivers built by `make` instead of from their manifests
    /// (a replay answers every child from its recording: no key, no network).
    pub fn with_drivers(mut self, make: Box<DriverMaker>) -> Self {
        self.make_driver = Some(make);
        self
    }

    fn load(&self, name: &str, version: &str) -> Result<Arc<Loaded>, String> {
        let key = (name.to_string(), version.to_string());
        if let Some(hit) = self.cache.lock().expect("resolver cache").get(&key) {
            return Ok(hit.clone());
        }
        let dir = (self.locate)(name, version)?;
        let loaded = manifest::load(&dir.join(manifest::MANIFEST_FILE)).map_err(|diags| {
            let first = diags.first().map(|d| d.message.clone()).unwrap_or_default();
            format!("the sub-capsule '{name}@{version}' has an invalid manifest: {first}")
        })?;
        capsule::check_launchable(&loaded).map_err(|d| {
            format!(
                "the sub-capsule '{name}@{version}' cannot run: {}",
                d.message
            )
        })?;
        let driver = match &self.make_driver {
            Some(make) => make(&loaded),
            None => capsule::driver(&loaded).map_err(|d| d.message),
        }
        .map_err(|why| format!("the sub-capsule '{name}@{version}' cannot run: {why}"))?;
        let entry = Arc::new(Loaded {
            manifest: loaded,
            driver,
        });
        self.cache
            .lock()
            .expect("resolver cache")
            .insert(key, entry.clone());
        Ok(entry)
    }
}

/// The first grant `child` holds that `parent` does not, as a sentence naming the manifest key.
pub fn exceeds(child: &Grants, parent: &Grants) -> Option<String> {
    let lists: [(&str, &Vec<String>, &Vec<String>); 4] = [
        (
            "capabilities.shell.allow",
            &child.shell_allow,
            &parent.shell_allow,
        ),
        (
            "capabilities.network.allow",
            &child.network_allow,
            &parent.network_allow,
        ),
        (
            "capabilities.peer_fetch.allow",
            &child.peer_fetch_allow,
            &parent.peer_fetch_allow,
        ),
        (
            "capabilities.spawn.allow",
            &child.spawn_allow,
            &parent.spawn_allow,
        ),
    ];
    for (key, c, p) in lists {
        if let Some(extra) = c.iter().find(|e| !p.contains(e)) {
            return Some(format!("{key} entry '{extra}'"));
        }
    }
    if child.plan_submit && !parent.plan_submit {
        return Some("capabilities.plan.submit: true".into());
    }
    if child.install && !parent.install {
        return Some("capabilities.install".into());
    }
    // Each pull pattern of the child must admit nothing its parent's patterns do not.
    for (key, c, p) in [
        (
            "capabilities.install.tool",
            &child.install_tool,
            &parent.install_tool,
        ),
        (
            "capabilities.install.skill",
            &child.install_skill,
            &parent.install_skill,
        ),
    ] {
        let parents: Vec<InstallPattern> = p
            .iter()
            .filter_map(|t| InstallPattern::parse(t).ok())
            .collect();
        if let Some(extra) = c.iter().find(|t| {
            InstallPattern::parse(t).map_or(true, |cp| !parents.iter().any(|pp| pp.covers(&cp)))
        }) {
            return Some(format!("{key} entry '{extra}'"));
        }
    }
    let flags = [
        (
            child.install_sources && !parent.install_sources,
            "capabilities.install.from entry 'sources'",
        ),
        (
            child.peer_files_export && !parent.peer_files_export,
            "exports.peer_files",
        ),
        (
            child.workdir_exec && !parent.workdir_exec,
            "capabilities.filesystem.workdir_exec: true",
        ),
        (
            child.unix_sockets && !parent.unix_sockets,
            "capabilities.network.unix_sockets: true",
        ),
    ];
    flags
        .into_iter()
        .find(|(more, _)| *more)
        .map(|(_, what)| what.to_string())
}

#[async_trait]
impl CapsuleResolver for ManifestResolver {
    async fn resolve(&self, r: &ChildRequest) -> Result<SessionSpec, DelegationError> {
        let entry = self
            .load(&r.capsule, &r.version)
            .map_err(|why| DelegationError::new(DelegationErrorKind::NotResolved, why))?;
        let (loaded, driver) = (&entry.manifest, entry.driver.clone());
        let child_grants = capsule::grants(&loaded.manifest);
        if let Some(what) = exceeds(&child_grants, &r.parent_grants) {
            return Err(DelegationError::new(
                DelegationErrorKind::ExceedsGrants,
                format!(
                "delegation refused: the sub-capsule '{}@{}' declares {what}, which its parent does not hold; a sub-capsule's grants never exceed its parent's",
                r.capsule, r.version
            )));
        }
        let place = Placement {
            session_id: r.session_id.clone(),
            paths: r.paths.clone(),
            depth: r.depth,
            spawned_by: Some(SpawnedBy {
                parent_session_id: r.parent_session_id.clone(),
                delegation_id: r.delegation_id.clone(),
            }),
            // A child is contained at least as tightly as its parent.
            floor: r
                .parent_grants
                .containment_floor
                .as_deref()
                .and_then(crate::contain::Level::parse),
            owns_workdir: true,
        };
        // A child's warnings are its parent's to have printed (the same manifest rules).
        capsule::session_spec_with(loaded, driver, r.task.clone(), place)
            .map(|(spec, _warnings)| spec)
            .map_err(|d| {
                DelegationError::new(
                    DelegationErrorKind::NotResolved,
                    format!(
                        "the sub-capsule '{}@{}' cannot run: {}",
                        r.capsule, r.version, d.message
                    ),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_may_not_hold_what_its_parent_does_not() {
        let parent = Grants {
            shell_allow: vec!["git".into()],
            ..Grants::default()
        };
        let mut child = Grants {
            shell_allow: vec!["git".into()],
            ..Grants::default()
        };
        assert_eq!(exceeds(&child, &parent), None);
        child.shell_allow.push("curl".into());
        assert_eq!(
            exceeds(&child, &parent).as_deref(),
            Some("capabilities.shell.allow entry 'curl'")
        );
        let child = Grants {
            plan_submit: true,
            ..Grants::default()
        };
        assert_eq!(
            exceeds(&child, &parent).as_deref(),
            Some("capabilities.plan.submit: true")
        );
    }

    fn pulls(tool: &[&str], sources: bool) -> Grants {
        Grants {
            install: true,
            install_tool: tool.iter().map(|s| s.to_string()).collect(),
            install_sources: sources,
            ..Grants::default()
        }
    }

    #[test]
    fn a_childs_pull_patterns_stay_within_its_parents() {
        let parent = pulls(&["murmur/tool-edit"], false);
        assert_eq!(exceeds(&pulls(&["murmur/tool-edit"], false), &parent), None);
        assert_eq!(
            exceeds(&pulls(&["*"], false), &parent).as_deref(),
            Some("capabilities.install.tool entry '*'")
        );
        assert_eq!(
            exceeds(&pulls(&["murmur/tool-*"], false), &parent).as_deref(),
            Some("capabilities.install.tool entry 'murmur/tool-*'")
        );
        let wide = pulls(&["murmur/*"], false);
        assert_eq!(exceeds(&pulls(&["murmur/tool-*"], false), &wide), None);
        assert_eq!(
            exceeds(&pulls(&["murmur/tool-*"], true), &wide).as_deref(),
            Some("capabilities.install.from entry 'sources'")
        );
    }

    #[test]
    fn exports_and_containment_grants_are_compared_too() {
        let parent = Grants::default();
        for (child, key) in [
            (
                Grants {
                    peer_files_export: true,
                    ..Grants::default()
                },
                "exports.peer_files",
            ),
            (
                Grants {
                    workdir_exec: true,
                    ..Grants::default()
                },
                "capabilities.filesystem.workdir_exec: true",
            ),
            (
                Grants {
                    unix_sockets: true,
                    ..Grants::default()
                },
                "capabilities.network.unix_sockets: true",
            ),
        ] {
            assert_eq!(exceeds(&child, &parent).as_deref(), Some(key));
            assert_eq!(exceeds(&child, &child), None);
        }
    }
}
