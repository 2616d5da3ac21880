//! What the benchmarks share: the hub objects a simulated fleet publishes, and what they read
//! off processes and the hub.

pub mod fleet;
pub mod member_at_bounds;
pub mod probe;
pub mod stats;

/// The environment variable `name` parsed, or `default` when it is unset or does not parse.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
