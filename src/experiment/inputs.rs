//! `Inputs`: every file a simulation reads, read in one step before the experiment is built
//! ([`Inputs::load`]). [`crate::experiment::Experiment::build`] then resolves the experiment from the
//! parameters and these data without touching the file system, so a library caller can fill an
//! `Inputs` in memory instead (an [`HklGrid`] from a reflection list, a matrix, a source list).
//!
//! The loader also keeps the lines the C prints while reading (nanoBragg.c "reading ..." messages,
//! the HKL reader's count/re-read lines, the Fdump cache message); [`crate::run::summary`] prints them at
//! the C's places among the setup messages.

use crate::run::config::{Config, SmvInput};
use crate::experiment::resolve_out;
use crate::sfcalc::LoadedModel;
use crate::base::log::Log;
use crate::experiment::structure_factors::{read_fdump, read_hkl, HklGrid};
use crate::{Error, Result};
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

/// The data read from the files a [`Config`] names (or supplied in memory).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// The `-mask` image (zero pixels are skipped).
    pub mask: Option<SmvInput>,
    /// The `-img` file's name (its header values were applied to the parameters when it was parsed:
    /// [`Config::img`]).
    pub img_path: Option<PathBuf>,
    /// The `-pdb`/`-cif` model: its cell, and its atoms for structure factors.
    pub model: Option<LoadedModel>,
    /// The `-mat` file's reciprocal vectors (a*, b*, c*), lambda-scaled as MOSFLM writes them.
    pub matrix: Option<[[f64; 3]; 3]>,
    /// Structure factors read from `-hkl` or the Fdump cache, or given in memory. With a model, a grid
    /// here is used instead of computing it again (an image series computes it once).
    pub fhkl: Option<Arc<HklGrid>>,
    pub fhkl_source: FhklSource,
    /// `-sourcefile` columns X Y Z I lambda, one value per source (NaN where the file leaves a default).
    pub source_columns: Option<Vec<Vec<f64>>>,
    pub log: LoadLog,
}

impl Inputs {
    /// Structure factors given in memory (e.g. [`HklGrid::from_entries`]); nothing else read.
    pub fn with_fhkl(grid: HklGrid) -> Inputs {
        Inputs { fhkl: Some(Arc::new(grid)), ..Default::default() }
    }

    /// Read every input file `cfg` names, in the C's order: `-mask`, `-img`, the model, `-mat`, `-hkl`
    /// (or the Fdump cache found where it would be written), `-stol`, `-sourcefile`. Images already
    /// read while parsing the command line (`cfg.mask`, `cfg.img`) are not read again.
    pub fn load(cfg: &Config) -> Result<Inputs> {
        let p = &cfg.params;
        let mask = match (&cfg.mask, &p.mask_file) {
            (Some(m), _) => Some(m.clone()),
            (None, Some(path)) => Some(crate::io::smv::read_smv(path).map_err(|e| Error::flag("-mask", format!("cannot read {}: {e}", path.display())))?),
            (None, None) => None,
        };
        let mut inp = Inputs { mask, ..Default::default() };
        // -img is read while parsing the flags (its header sets parameters); only its name is kept
        inp.img_path = cfg.img.as_ref().map(|i| i.path.clone());
        for path in inp.mask.as_ref().map(|m| &m.path).into_iter().chain(inp.img_path.as_ref()) {
            inp.log.images.line(format!("reading {}", path.display()));
        }

        // -pdb/-cif: read now for its cell; its structure factors are computed in the build
        inp.model = crate::sfcalc::load(&p.model, &mut inp.log.model)?;
        if inp.model.is_some() && p.hkl_file.is_some() {
            return Err(Error::flag("-hkl", "give one source of structure factors: -hkl or -pdb/-cif, not both"));
        }

        if let Some(path) = &p.mat_file {
            inp.matrix = Some(crate::experiment::crystal::read_matrix_file(path)?);
            inp.log.matrix.line(format!("reading {}", path.display()));
        }

        let dump_path = resolve_out(cfg, &p.dump_file);
        if let Some(hkl) = &p.hkl_file {
            inp.fhkl = Some(Arc::new(read_hkl(hkl, p.default_f, &mut inp.log.fhkl)?));
            inp.fhkl_source = FhklSource::HklFile(hkl.clone());
        } else if inp.model.is_none() && dump_path.is_file() {
            inp.log.fhkl.line(format!("reading Fs from {}", dump_path.display()));
            inp.fhkl = Some(Arc::new(read_fdump(&dump_path)?));
            inp.fhkl_source = FhklSource::Fdump(dump_path.clone());
        }
        if p.hkl_file.is_some() || inp.model.is_some() {
            // The cache is written with the other outputs at the end of the run (io::outputs), so a
            // refused run never leaves one; here only the C's message, from a check of the target.
            if crate::io::atomic::target_kind(&dump_path).is_ok() {
                inp.log.dump.line(format!("writing dump file for next time: {}", dump_path.display()));
            } else {
                inp.log.dump.line(format!("WARNING: unable to open dump file: {}", dump_path.display()));
            }
        }

        // the stol table is read and checked, then unused (as in the C)
        if let Some((path, _mult)) = &p.stol_file {
            inp.log.stol.line(format!("reading {}", path.display()));
            let cols = crate::io::text::read_text_file(path, 2)?;
            if cols[0].is_empty() {
                return Err(Error::file(path, "no data in input file"));
            }
        }

        if let Some(path) = &p.source_file {
            inp.source_columns = Some(crate::io::sourcefile::read_source_columns(path)?);
        }
        Ok(inp)
    }
}
