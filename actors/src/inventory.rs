//! [`Inventory`]: the tools a session holds, kept once.
//!
//! The Session offers them to the model; its Dispatcher routes calls to them, and so do the
//! steps of a plan. All three read this one copy. A pull or removal changes it where the call
//! runs, before the call's answer reaches the Session, so the next call is routed by the new
//! inventory and the next model call is offered it: nothing is kept in step by messages.
//! (`SessionSpec::tools` stays what the session started with.)

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::model::ToolSpec;
use crate::tool::ToolDecl;

/// The held tools, shared by a session's actors; cheap to clone.
#[derive(Clone, Default)]
pub struct Inventory(Arc<Mutex<Held>>);

#[derive(Default)]
struct Held {
    /// By name, so the offered array is sorted by name.
    tools: BTreeMap<String, Arc<ToolDecl>>,
    /// Names `remove-artifact` took away and nothing added back: a call to one is answered
    /// with the original Murmur's removal sentence.
    removed: HashSet<String>,
    /// Bumped by every change, so a reader knows whether to rebuild what it derived.
    version: u64,
}

impl Inventory {
    /// The inventory a session starts with.
    pub fn new(tools: impl IntoIterator<Item = ToolDecl>) -> Inventory {
        let tools = tools
            .into_iter()
            .map(|t| (t.name.clone(), Arc::new(t)))
            .collect();
        Inventory(Arc::new(Mutex::new(Held {
            tools,
            ..Held::default()
        })))
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        // Every change is one map operation: nothing is half-done behind a panic.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The held tool called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<ToolDecl>> {
        self.held().tools.get(name).cloned()
    }

    /// True when `remove-artifact` took `name` away (and nothing added it back).
    pub fn was_removed(&self, name: &str) -> bool {
        self.held().removed.contains(name)
    }

    /// The held tools' names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.held().tools.keys().cloned().collect()
    }

    /// What the model is offered: every held tool's spec, sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.held().tools.values().map(|t| t.spec()).collect()
    }

    /// How many changes were made since the start.
    pub fn version(&self) -> u64 {
        self.held().version
    }

    /// A pulled tool joins (replacing one of the same name).
    pub fn add(&self, tool: ToolDecl) {
        let mut held = self.held();
        held.removed.remove(&tool.name);
        held.tools.insert(tool.name.clone(), Arc::new(tool));
        held.version += 1;
    }

    /// A removed tool leaves; `instead` takes its name back (a same-named shell binary).
    pub fn remove(&self, name: &str, instead: Option<ToolDecl>) {
        let mut held = self.held();
        held.tools.remove(name);
        held.removed.insert(name.to_string());
        if let Some(t) = instead {
            held.tools.insert(t.name.clone(), Arc::new(t));
        }
        held.version += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::{ToolKind, ToolOrigin};

    fn decl(name: &str) -> ToolDecl {
        ToolDecl {
            name: name.into(),
            full_name: None,
            version: "0.1.0".into(),
            description: format!("{name} tool"),
            input_schema: serde_json::json!({"type": "object"}),
            kind: ToolKind::Runtime,
            origin: ToolOrigin::Operator,
        }
    }

    #[test]
    fn one_copy_seen_by_every_holder_and_offered_sorted() {
        let a = Inventory::new([decl("zeta"), decl("alpha")]);
        let b = a.clone();
        assert_eq!(a.names(), ["alpha", "zeta"]);
        b.add(decl("mid"));
        assert_eq!(a.names(), ["alpha", "mid", "zeta"]);
        assert_eq!(a.version(), 1);
        let offered: Vec<String> = a.specs().into_iter().map(|s| s.name).collect();
        assert_eq!(offered, ["alpha", "mid", "zeta"]);
        b.remove("mid", None);
        assert!(a.get("mid").is_none());
        assert!(a.was_removed("mid"));
        b.add(decl("mid"));
        assert!(!a.was_removed("mid"), "added back");
        assert_eq!(a.version(), 3);
    }
}
