//! One module per subcommand.

mod admin;
pub mod agent;
pub mod coredns;
pub mod crds;
pub mod dns;
pub mod inspect;
pub mod join;
mod kubeconfig;
mod manifest;
pub mod policy;
pub mod rbac;
