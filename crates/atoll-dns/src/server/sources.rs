//! TCP connections per client address. The connection limit alone lets one client take every
//! slot and lock all others out; a cap per source address keeps one client (a misbehaving pod,
//! a node's forged sources aside) to its share. The cap is per address, not per IPv6 prefix:
//! in Kubernetes every pod has its own address, and the pods of a node share a /64.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Open connections by source address, shared by the accept loop and the connection tasks.
#[derive(Debug, Clone)]
pub struct SourceSlots {
    max_per_source: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One connection's place in [`SourceSlots`]; dropping it frees the place.
#[derive(Debug)]
pub struct SourceSlot {
    slots: SourceSlots,
    source: IpAddr,
}

impl SourceSlots {
    /// At most `max_per_source` connections from one address.
    pub fn new(max_per_source: usize) -> Self {
        Self {
            max_per_source,
            open: Arc::default(),
        }
    }

    /// A place for a connection from `source`, unless it has `max_per_source` already. An
    /// IPv4-mapped IPv6 address counts as its IPv4 address, so a dual-stack socket does not
    /// give a client twice the share.
    pub fn take(&self, source: IpAddr) -> Option<SourceSlot> {
        let source = source.to_canonical();
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(source).or_insert(0);
        if *count >= self.max_per_source {
            if *count == 0 {
                open.remove(&source);
            }
            return None;
        }
        *count += 1;
        Some(SourceSlot {
            slots: self.clone(),
            source,
        })
    }

    /// Connections open from `source`.
    #[cfg(test)]
    pub fn open(&self, source: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(&source.to_canonical()).copied().unwrap_or(0)
    }

    /// Addresses with connections open (the map holds no others).
    #[cfg(test)]
    pub fn sources(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut open = self
            .slots
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.source) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn each_source_gets_its_share_and_a_closed_connection_frees_its_place() {
        let slots = SourceSlots::new(2);
        let a1 = slots.take(ip("10.0.0.1"));
        let a2 = slots.take(ip("10.0.0.1"));
        assert!(a1.is_some() && a2.is_some());
        assert!(
            slots.take(ip("10.0.0.1")).is_none(),
            "a third from one address"
        );
        assert!(
            slots.take(ip("::ffff:10.0.0.1")).is_none(),
            "the same client through a dual-stack socket"
        );
        let b = slots.take(ip("10.0.0.2"));
        assert!(b.is_some(), "another address is not affected");
        drop(a1);
        assert_eq!(slots.open(ip("10.0.0.1")), 1);
        assert!(slots.take(ip("10.0.0.1")).is_some());
        drop((a2, b));
        assert_eq!(
            slots.sources(),
            0,
            "nothing kept for addresses without connections"
        );
    }

    #[test]
    fn a_cap_of_zero_refuses_everyone_and_keeps_nothing() {
        let slots = SourceSlots::new(0);
        assert!(slots.take(ip("10.0.0.1")).is_none());
        assert_eq!(slots.sources(), 0);
    }

    proptest! {
        /// Any order of connects and closes: never more than the cap open from one address,
        /// and the counts are exactly the connections held.
        #[test]
        fn the_cap_holds_and_counts_follow_the_connections(
            cap in 0usize..4,
            steps in proptest::collection::vec((0u8..3, any::<bool>()), 0..60),
        ) {
            let slots = SourceSlots::new(cap);
            let mut held: Vec<Vec<SourceSlot>> = (0..3).map(|_| Vec::new()).collect();
            for (source, connect) in steps {
                let address = IpAddr::from([10, 0, 0, source]);
                let held = &mut held[usize::from(source)];
                if connect {
                    match slots.take(address) {
                        Some(slot) => held.push(slot),
                        None => prop_assert_eq!(held.len(), cap),
                    }
                } else {
                    held.pop();
                }
                prop_assert!(held.len() <= cap);
                prop_assert_eq!(slots.open(address), held.len());
            }
            let open: usize = held.iter().filter(|h| !h.is_empty()).count();
            prop_assert_eq!(slots.sources(), open);
        }
    }
}
