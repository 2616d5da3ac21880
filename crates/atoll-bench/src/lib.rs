//! What the benchmarks share: the hub objects a simulated fleet publishes.

pub mod fleet;
