//! A copy-on-write map for zone snapshots: its entries are spread over a fixed number of shared
//! shards, so a new snapshot that changes a few entries copies only the shards holding them
//! (about `entries / SHARDS` entries each) and shares the rest with the snapshot it came from.

use std::collections::HashMap;
use std::sync::Arc;

/// Shards per map: 100,000 services make shards of about 100 entries.
const SHARDS: usize = 1024;

/// A map from byte strings to `V`, cheap to clone and to change a few entries of.
#[derive(Debug, Clone)]
pub(super) struct Sharded<V> {
    shards: Vec<Arc<HashMap<Box<[u8]>, V>>>,
}

impl<V> Default for Sharded<V> {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Arc::new(HashMap::new())).collect(),
        }
    }
}

/// FNV-1a: cheap, stable, and only picks a shard (each shard's map has its own keyed hasher).
fn shard_of(key: &[u8]) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in key {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash as usize) % SHARDS
}

impl<V: Clone> Sharded<V> {
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        self.shards[shard_of(key)].get(key)
    }

    /// Sets `key` to `value`, or removes it with `None`; returns the previous value. Copies the
    /// key's shard first when another snapshot shares it.
    pub fn set(&mut self, key: &[u8], value: Option<V>) -> Option<V> {
        let shard = &mut self.shards[shard_of(key)];
        match value {
            Some(value) => Arc::make_mut(shard).insert(key.into(), value),
            None if shard.contains_key(key) => Arc::make_mut(shard).remove(key),
            None => None,
        }
    }

    /// Number of entries (walks every shard).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }

    /// Whether the two maps share the shard of `key` (no copy was made for it).
    #[cfg(test)]
    pub fn shares_shard_with(&self, other: &Self, key: &[u8]) -> bool {
        let i = shard_of(key);
        Arc::ptr_eq(&self.shards[i], &other.shards[i])
    }

    /// Number of shards the two maps share.
    #[cfg(test)]
    pub fn shared_shards(&self, other: &Self) -> usize {
        self.shards
            .iter()
            .zip(&other.shards)
            .filter(|(a, b)| Arc::ptr_eq(a, b))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_copies_only_the_shard_it_touches() {
        let mut map: Sharded<u32> = Sharded::default();
        for i in 0..10_000u32 {
            map.set(format!("key-{i}").as_bytes(), Some(i));
        }
        let before = map.clone();
        assert_eq!(before.shared_shards(&map), SHARDS);
        map.set(b"key-42", Some(7));
        assert_eq!(map.shared_shards(&before), SHARDS - 1);
        assert!(!map.shares_shard_with(&before, b"key-42"));
        assert_eq!(
            (map.get(b"key-42"), before.get(b"key-42")),
            (Some(&7), Some(&42))
        );
        // Removing an absent key copies nothing.
        map.set(b"absent", None);
        assert_eq!(map.shared_shards(&before), SHARDS - 1);
        assert_eq!(map.set(b"key-1", None), Some(1));
        assert_eq!((map.len(), before.len()), (9_999, 10_000));
        assert_eq!(before.get(b"key-1"), Some(&1));
    }
}
