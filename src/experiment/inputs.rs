//! `Inputs`: every file a simulation reads, read in one step before the experiment is built
//! (`run::load`). `Experiment::build` then resolves the experiment from the
//! parameters and these data without touching the file system, so a library caller can fill an
//! `Inputs` in memory instead (an [`HklGrid`] from a reflection list, a matrix, a source list).
//!
//! The loader also keeps the lines the C prints while reading (nanoBragg.c "reading ..." messages,
//! the HKL reader's count/re-read lines, the Fdump cache message); `run::summary` prints them at
//! the C's places among the setup messages.

use crate::base::image::Mask;
use crate::sfcalc::LoadedModel;
use crate::base::log::Log;
use crate::experiment::structure_factors::HklGrid;
use std::path::PathBuf;
use std::sync::Arc;

/// Where the structure factors in [`Inputs::fhkl`] came from.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum FhklSource {
    /// Given in memory (or none at all).
    #[default]
    Memory,
    /// Read from the `-hkl` text file (the Fdump cache is written from them after the run).
    HklFile(PathBuf),
    /// Read from the Fdump cache found at this path (nanoBragg.c L2226).
    Fdump(PathBuf),
}

/// What the loader printed, kept by input so the summary puts each at the C's place.
#[derive(Clone, Debug, Default)]
pub struct LoadLog {
    /// "reading MASK" / "reading IMG" (the C reads both before anything else, L400-L502).
    pub images: Log,
    /// The `-pdb`/`-cif` model read (printed after the banner).
    pub model: Log,
    /// "reading MATFILE" (L1791).
    pub matrix: Log,
    /// The HKL reader's lines, or "reading Fs from Fdump.bin" (L2101-L2240).
    pub fhkl: Log,
    /// "writing dump file for next time" or the C's warning when the cache cannot be written (L2200).
    pub dump: Log,
    /// "reading STOLFILE" (L2261).
    pub stol: Log,
}

/// The data read from the files a run names (or supplied in memory).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// The `-mask` image (zero pixels are skipped).
    pub mask: Option<Mask>,
    /// The `-img` file's name (its header values were applied to the parameters when it was parsed).
    pub img_path: Option<PathBuf>,
    /// The `-pdb`/`-cif` model: its cell, and its atoms for structure factors.
    pub model: Option<LoadedModel>,
    /// The `-mat` file's reciprocal vectors (a*, b*, c*), lambda-scaled as MOSFLM writes them.
    pub matrix: Option<[[f64; 3]; 3]>,
    /// Structure factors read from `-hkl` or the Fdump cache, or given in memory. With a model, a grid
    /// here is used instead of computing it again (an image series computes it once).
    pub fhkl: Option<Arc<HklGrid>>,
    pub fhkl_source: FhklSource,
    /// The `-hkl` file's reflections `(h, k, l, F)` in file order, as read with [`Inputs::fhkl`]: the
    /// rows of dL/dF (`run::gradients`) come from these, so a file changed or a working folder left
    /// after the read cannot make them another list than the grid the image was rendered with.
    pub hkl_entries: Option<Arc<Vec<(i32, i32, i32, f64)>>>,
    /// `-sourcefile` columns X Y Z I lambda, one value per source (NaN where the file leaves a default).
    pub source_columns: Option<Vec<Vec<f64>>>,
    /// A detector read from a file (`--expt`): its panels, in detector order, replace the one panel of
    /// the C's flags.
    pub detector: Option<Vec<crate::experiment::detector::PanelSpec>>,
    pub log: LoadLog,
}

impl Inputs {
    /// Structure factors given in memory (e.g. [`HklGrid::from_entries`]); nothing else read.
    pub fn with_fhkl(grid: HklGrid) -> Inputs {
        Inputs { fhkl: Some(Arc::new(grid)), ..Default::default() }
    }
}
