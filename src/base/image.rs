//! Images as the simulation uses them, apart from any file format.

use std::path::PathBuf;

/// A detector mask (`-mask`): pixels whose value is 0 are skipped. `path` names it in messages.
#[derive(Clone, Debug, PartialEq)]
pub struct Mask {
    pub path: PathBuf,
    /// fast pixels
    pub width: usize,
    /// slow pixels
    pub height: usize,
    /// row-major, slow × fast
    pub data: Vec<u16>,
}
