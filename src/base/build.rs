//! What this build is, stamped by build.rs: the git commit and the compiler, for `--version` and the
//! benchmark reports.

/// The git commit the library was built from ("unknown" outside a git checkout).
pub const GIT_COMMIT: &str = env!("NANOBRAGG_GIT_COMMIT");

/// `rustc --version` of the compiler that built the library.
pub const RUSTC_VERSION: &str = env!("NANOBRAGG_RUSTC_VERSION");
