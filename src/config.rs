//! `Config`: one simulation as asked for: the physics ([`Params`]), the outputs ([`OutputSettings`])
//! and the run options ([`RunOptions`]). It saves to and loads from JSON (`--save-params`,
//! `--params`); the images read for `-img`/`-mask` are not part of the saved form (their paths are).

use std::path::{Path, PathBuf};

pub use crate::params::{CellInput, Convention, CrystalShape, Misset, OutputSettings, Params, Pivot, Precision, RunOptions};
use crate::{Error, Result};

/// An SMV image read for `-img` or `-mask`: its header text and pixel values.
#[derive(Clone, Debug, PartialEq)]
pub struct SmvInput {
    pub path: PathBuf,
    pub width: usize,
    pub height: usize,
    pub header: String,
    pub data: Vec<u16>,
}

/// Everything the user asked for. Defaults are the C program's.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub params: Params,
    pub output: OutputSettings,
    pub run: RunOptions,
    /// The `-img` image, once read (its path is `params.img_file`).
    #[serde(skip)]
    pub img: Option<SmvInput>,
    /// The `-mask` image, once read (its path is `params.mask_file`).
    #[serde(skip)]
    pub mask: Option<SmvInput>,
}

impl Config {
    /// The JSON form (`--save-params`): params, output and run sections, floats exact.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a Config always serializes")
    }

    /// Parse the JSON form; missing fields take their defaults, unknown fields are errors.
    pub fn from_json(text: &str) -> std::result::Result<Config, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Read a JSON parameter file (`--params`). The mask named in it is read too.
    pub fn load_json(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, format!("cannot read: {e}")))?;
        let mut c = Config::from_json(&text).map_err(|e| Error::file_line(path, e.line(), format!("bad parameter file: {e}")))?;
        if let Some(m) = c.params.mask_file.clone() {
            c.mask = Some(crate::io::smv::read_smv(&m)?);
        }
        Ok(c)
    }

    /// Write the JSON form to `path` (atomically: no partial file on failure).
    pub fn save_json(&self, path: &Path) -> Result<()> {
        let mut text = self.to_json();
        text.push('\n');
        crate::io::atomic::write_atomic(path, text.as_bytes())
    }
}
