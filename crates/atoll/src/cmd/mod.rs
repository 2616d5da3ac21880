//! One module per subcommand.

pub mod agent;
pub mod crds;
mod kubeconfig;
