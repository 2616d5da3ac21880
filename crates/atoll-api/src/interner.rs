//! Strings and port lists that repeat across many kept objects, held once. An importer keeps
//! one MCS EndpointSlice per service and source cluster: every slice of a service carries the
//! same namespace, label keys, service names and ports, and every slice of a source cluster the
//! same cluster name, so at 250 clusters each of those values would otherwise be held 200 or
//! 250 times.
//!
//! Values no kept object holds any more are forgotten once the interner has doubled since it
//! last looked, so it follows what is kept instead of everything ever seen.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointPort;

/// Below this many values, nothing is forgotten (looking costs more than it frees).
const FLOOR: usize = 256;

/// Held-once strings and port lists.
#[derive(Debug, Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
    ports: HashMap<String, Arc<[EndpointPort]>>,
    /// How many values were held after the last look for unused ones.
    kept_at_last_look: usize,
}

impl Interner {
    /// `value`, held once.
    pub fn string(&mut self, value: &str) -> Arc<str> {
        if let Some(held) = self.strings.get(value) {
            return held.clone();
        }
        self.forget_unused_when_grown();
        let held: Arc<str> = Arc::from(value);
        self.strings.insert(held.clone());
        held
    }

    /// `ports`, held once (equal lists share one allocation).
    pub fn ports(&mut self, ports: Vec<EndpointPort>) -> Arc<[EndpointPort]> {
        let key = ports_key(&ports);
        if let Some(held) = self.ports.get(&key) {
            return held.clone();
        }
        self.forget_unused_when_grown();
        let held: Arc<[EndpointPort]> = Arc::from(ports);
        self.ports.insert(key, held.clone());
        held
    }

    /// How many values it holds.
    pub fn len(&self) -> usize {
        self.strings.len() + self.ports.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn forget_unused_when_grown(&mut self) {
        if self.len() < FLOOR.max(2 * self.kept_at_last_look) {
            return;
        }
        // Held by the interner alone: no kept object uses it.
        self.strings.retain(|s| Arc::strong_count(s) > 1);
        self.ports.retain(|_, p| Arc::strong_count(p) > 1);
        self.kept_at_last_look = self.len();
    }
}

/// Every field of every port, each one's absence distinct from any value.
fn ports_key(ports: &[EndpointPort]) -> String {
    let mut key = String::new();
    for p in ports {
        // Debug output quotes strings and names `None`: unambiguous.
        let _ = write!(
            key,
            "{:?}|{:?}|{:?}|{:?};",
            p.name, p.protocol, p.port, p.app_protocol
        );
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(name: Option<&str>, number: i32) -> EndpointPort {
        EndpointPort {
            name: name.map(str::to_owned),
            port: Some(number),
            protocol: Some("TCP".into()),
            app_protocol: None,
        }
    }

    #[test]
    fn equal_values_share_one_allocation_and_different_ones_do_not() {
        let mut interner = Interner::default();
        let (a, b) = (interner.string("web"), interner.string("web"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &interner.string("db")));
        let p = interner.ports(vec![port(Some("http"), 80)]);
        assert!(Arc::ptr_eq(
            &p,
            &interner.ports(vec![port(Some("http"), 80)])
        ));
        for other in [
            vec![port(Some("http"), 81)],
            vec![port(None, 80)],
            vec![port(Some("http"), 80), port(Some("http"), 80)],
            vec![],
        ] {
            let q = interner.ports(other.clone());
            assert!(!Arc::ptr_eq(&p, &q), "{other:?}");
            assert_eq!(&*q, other.as_slice());
        }
        // A name that looks like two fields is still one.
        let tricky = interner.ports(vec![port(Some("a|Some(\"TCP\")"), 1)]);
        assert_eq!(tricky[0].name.as_deref(), Some("a|Some(\"TCP\")"));
    }

    #[test]
    fn values_no_one_holds_are_forgotten_once_it_has_grown() {
        let mut interner = Interner::default();
        let kept: Vec<Arc<str>> = (0..10)
            .map(|i| interner.string(&format!("kept-{i}")))
            .collect();
        for i in 0..(4 * FLOOR) {
            let _ = interner.string(&format!("passing-{i}"));
        }
        assert!(
            interner.len() < 2 * FLOOR + kept.len(),
            "unused values were forgotten: {} held",
            interner.len()
        );
        for (i, k) in kept.iter().enumerate() {
            assert!(Arc::ptr_eq(k, &interner.string(&format!("kept-{i}"))));
        }
    }
}
