//! The bookkeeping behind the trait's opaque handles, shared by every
//! backend: each kind of object (modules, kernels, buffers) lives in a
//! table keyed by the id handed out for it.

use std::collections::HashMap;

use crate::BackendError;

/// Live objects of one kind by id. Ids start at 1 and are never reused, so
/// a freed handle stays invalid (and a cache keyed by ids, such as CUDA's
/// graphs, never confuses a new object with a freed one); looking up an
/// unknown or freed id is [`BackendError::InvalidHandle`] naming the kind.
#[derive(Debug)]
pub struct HandleTable<T> {
    what: &'static str,
    entries: HashMap<u64, T>,
    next: u64,
}

impl<T> HandleTable<T> {
    /// An empty table of `what`s ("module", "kernel", "buffer").
    pub fn new(what: &'static str) -> Self {
        HandleTable {
            what,
            entries: HashMap::new(),
            next: 1,
        }
    }

    /// Store `value` under a fresh id.
    pub fn insert(&mut self, value: T) -> u64 {
        let id = self.next;
        self.next += 1;
        self.entries.insert(id, value);
        id
    }

    fn invalid(&self, id: u64) -> BackendError {
        BackendError::InvalidHandle {
            what: self.what,
            id,
        }
    }

    pub fn get(&self, id: u64) -> Result<&T, BackendError> {
        self.entries.get(&id).ok_or_else(|| self.invalid(id))
    }

    pub fn get_mut(&mut self, id: u64) -> Result<&mut T, BackendError> {
        let invalid = self.invalid(id);
        self.entries.get_mut(&id).ok_or(invalid)
    }

    /// Take `id`'s object out, to use it mutably next to others of the
    /// table; [`HandleTable::restore`] puts it back under the same id.
    pub fn take(&mut self, id: u64) -> Result<T, BackendError> {
        self.entries.remove(&id).ok_or_else(|| self.invalid(id))
    }

    /// Put back an object [`HandleTable::take`] took out.
    pub fn restore(&mut self, id: u64, value: T) {
        debug_assert!(id < self.next, "restore of an id never handed out");
        self.entries.insert(id, value);
    }

    /// Forget `id` (freeing is not an error twice: the trait's `free` and
    /// `release_module` take handles that may already be gone).
    pub fn remove(&mut self, id: u64) -> Option<T> {
        self.entries.remove(&id)
    }

    /// Keep only the objects for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.entries.retain(|_, v| keep(v));
    }

    /// Forget every object; ids keep counting up.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Take every object out; ids keep counting up.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.entries.drain().map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_ids_stay_invalid_and_are_never_reused() {
        let mut t = HandleTable::new("buffer");
        let a = t.insert("a");
        let b = t.insert("b");
        assert_eq!((a, b), (1, 2));
        assert_eq!(t.get(a).copied().unwrap(), "a");
        assert_eq!(t.remove(a), Some("a"));
        assert_eq!(t.remove(a), None, "freeing twice is not an error");
        let err = t.get(a).unwrap_err();
        assert!(matches!(
            err,
            BackendError::InvalidHandle {
                what: "buffer",
                id: 1
            }
        ));
        assert_eq!(err.to_string(), "unknown buffer handle 1");
        t.clear();
        assert!(t.is_empty());
        assert_eq!(t.insert("c"), 3, "ids keep counting after a clear");
    }

    #[test]
    fn taken_objects_come_back_under_their_id() {
        let mut t = HandleTable::new("kernel");
        let a = t.insert(10);
        let b = t.insert(20);
        let taken = t.take(a).unwrap();
        assert!(t.get(a).is_err() && t.take(a).is_err());
        *t.get_mut(b).unwrap() += taken;
        t.restore(a, taken + 1);
        assert_eq!((*t.get(a).unwrap(), *t.get(b).unwrap()), (11, 30));
        t.retain(|v| *v > 20);
        assert_eq!(t.len(), 1);
        assert_eq!(t.drain().collect::<Vec<_>>(), vec![30]);
        assert!(t.get_mut(b).is_err());
    }
}
