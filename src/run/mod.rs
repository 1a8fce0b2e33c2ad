//! One simulation from start to finish, as callable pieces (the CLI, the harness, the Python module
//! and the apps use them): the configuration, the checks before allocation, loading inputs, setup,
//! rendering, the setup summary and every output file.

pub mod config;
pub mod expt;
pub mod geom;
pub mod gradients;
pub mod headers;
pub mod limits;
pub mod load;
pub mod outputs;
pub mod setup;
pub mod simulate;
pub mod summary;
