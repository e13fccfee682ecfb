//! A small byte-budgeted LRU cache for generated inputs and CPU references.
//! Full-size inputs run to hundreds of MiB (saxpy 64M: 512 MiB), so the
//! cache is bounded by bytes, not entries.

use std::collections::HashMap;
use std::hash::Hash;

pub struct LruCache<K, V> {
    entries: HashMap<K, (V, usize, u64)>,
    budget_bytes: usize,
    used_bytes: usize,
    clock: u64,
}

impl<K: Eq + Hash + Clone, V: Clone> LruCache<K, V> {
    pub fn new(budget_bytes: usize) -> Self {
        LruCache {
            entries: HashMap::new(),
            budget_bytes,
            used_bytes: 0,
            clock: 0,
        }
    }

    /// Whether `key` is cached (without counting as a use).
    pub fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    pub fn get(&mut self, key: &K) -> Option<V> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(key).map(|(v, _, used)| {
            *used = clock;
            v.clone()
        })
    }

    /// Insert, evicting least recently used entries to stay within budget.
    /// An entry larger than the whole budget is not kept.
    pub fn insert(&mut self, key: K, value: V, bytes: usize) {
        self.clock += 1;
        if let Some((_, old, _)) = self.entries.remove(&key) {
            self.used_bytes -= old;
        }
        if bytes > self.budget_bytes {
            return;
        }
        while self.used_bytes + bytes > self.budget_bytes {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, (_, _, t))| *t)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((_, b, _)) = self.entries.remove(&oldest) {
                self.used_bytes -= b;
            }
        }
        self.used_bytes += bytes;
        self.entries.insert(key, (value, bytes, self.clock));
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
    fn evicts_least_recently_used_within_budget() {
        let mut c = LruCache::new(100);
        c.insert("a", 1, 40);
        c.insert("b", 2, 40);
        assert_eq!(c.get(&"a"), Some(1)); // a is now newer than b
        c.insert("c", 3, 40);
        assert_eq!(c.get(&"b"), None);
        assert_eq!(c.get(&"a"), Some(1));
        assert_eq!(c.get(&"c"), Some(3));
        c.insert("huge", 4, 101);
        assert_eq!(c.get(&"huge"), None);
        assert_eq!(c.len(), 2);
    }
}
