//! One module per subcommand.

mod admin;
pub mod agent;
pub mod crds;
mod kubeconfig;
