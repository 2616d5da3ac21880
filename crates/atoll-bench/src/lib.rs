//! What the benchmarks share: the hub objects a simulated fleet publishes, and what they read
//! off processes and the hub.

pub mod fleet;
pub mod probe;
pub mod stats;
