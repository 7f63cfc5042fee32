//! Which resources the server serves right now: the built-in kinds (the
//! table in `builtins`) and every served version of every applied
//! CustomResourceDefinition. A CRD object is the only source of truth for
//! custom resources, exactly as on a real cluster.

use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::resource::{ResourceType, from_crd};

/// The served resources; replaced wholesale whenever a CRD changes.
pub struct Registry {
    types: RwLock<Arc<Vec<Arc<ResourceType>>>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self { types: RwLock::new(Arc::new(crate::builtins::all().to_vec())) }
    }
}

impl Registry {
    pub fn all(&self) -> Arc<Vec<Arc<ResourceType>>> {
        crate::locks::read(&self.types).clone()
    }

    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.all().iter().find(|t| t.group == group && t.version == version && t.plural == plural).cloned()
    }

    /// Rebuild from the stored CRD objects. CRDs being deleted stay served
    /// until they are gone, as on a real cluster.
    pub fn reload<'a>(&self, crds: impl Iterator<Item = &'a Value>) {
        let mut types: Vec<Arc<ResourceType>> = crate::builtins::all().to_vec();
        for crd in crds {
            for t in from_crd(crd) {
                let clash = types.iter().any(|e| e.group == t.group && e.version == t.version && e.plural == t.plural);
                if !clash {
                    types.push(Arc::new(t));
                }
            }
        }
        *crate::locks::write(&self.types) = Arc::new(types);
    }
}
