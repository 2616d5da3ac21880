//! One module per subcommand.

pub mod crds;
