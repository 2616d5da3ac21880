//! One module per subcommand.

mod admin;
pub mod agent;
pub mod coredns;
pub mod crds;
pub mod dns;
pub mod inspect;
pub mod join;
mod kubeconfig;
pub mod policy;
pub mod rbac;
