//! NeXus/NXmx HDF5 images (`-nexusfile`): the photon counts as `/entry/data/data` [frames, slow,
//! fast] (32-bit, deflate, one chunk per frame) with the whole geometry as NXtransformations.
//!
//! Frame: NeXus's McStas axes, z along our beam, x along the part of our spindle normal to the beam
//! ([`ImageMeta::to_mcstas`]). The detector module's chain is
//! `fast_pixel_direction → module_offset`: `module_offset` is a translation of |pix0| along pix0
//! (the outer corner of the first pixel, nanoBragg.c L1730-L1745), and the fast and slow pixel
//! directions are our final fdet/sdet, so a reader following the chain gets our pix0 and axes
//! exactly, for every convention, pivot, two-theta and detector rotation. The sample depends on
//! `omega`, a rotation about our spindle, one value per frame (`omega_end` = start + increment).
//!
//! Written under a temporary name in the same directory and renamed when complete. `simulate` writes
//! one frame; `series -nexusfile` writes every frame of a sweep (or of a shard) into one file.

use super::atomic::AtomicFile;
use super::hdf5::{Dataset, Node, Val, LOCK};
use super::meta::ImageMeta;
use crate::base::vec3::{magnitude, V3};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// An NXmx file being written frame by frame (`nframes` frames of the same geometry; frame `i`
/// covers omega = phi_start + i·osc to phi_start + (i+1)·osc).
///
/// The file is an [`AtomicFile`]: libhdf5 writes its registered temporary name (removed on error, on
/// SIGINT/SIGTERM/SIGHUP, or by the next run's sweep after a SIGKILL) and [`NexusWriter::finish`]
/// renames it. A device or FIFO target is written in place: the HDF5 file is made in a temporary
/// folder and copied there at the end.
pub struct NexusWriter {
    // field order: the dataset and file close before the rename in `finish`
    data: Option<Dataset>,
    file: Option<Node>,
    out: Option<AtomicFile>,
    /// Where libhdf5 writes: the AtomicFile's temporary name, or a file in `scratch`.
    h5path: PathBuf,
    scratch: Option<tempfile::TempDir>,
    path: PathBuf,
    written: Vec<bool>,
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn unit(v: &V3) -> V3 {
    let m = magnitude(v);
    if m == 0.0 {
        [0.0, 0.0, 1.0]
    } else {
        [v[0] / m, v[1] / m, v[2] / m]
    }
}

impl NexusWriter {
    /// Create the file with every group and the geometry; the frames follow with [`NexusWriter::write_frame`].
    pub fn create(path: &Path, m: &ImageMeta, nframes: usize) -> Result<NexusWriter> {
        let err = |reason: String| Error::Output { path: path.to_path_buf(), reason };
        if nframes == 0 {
            return Err(err("a NeXus file needs at least one frame".into()));
        }
        available().map_err(err)?;
        let out = AtomicFile::create(path)?;
        let (h5path, scratch) = match out.temp_path() {
            Some(t) => (t.to_path_buf(), None),
            None => {
                let d = tempfile::tempdir().map_err(|e| err(format!("cannot make a temporary folder for the HDF5 file: {e}")))?;
                (d.path().join("image.nxs"), Some(d))
            }
        };
        let made = {
            let _g = lock();
            Node::create_file(&h5path).and_then(|file| write_layout(&file, m, nframes).map(|data| (file, data)))
        };
        match made {
            Ok((file, data)) => Ok(NexusWriter {
                data: Some(data),
                file: Some(file),
                out: Some(out),
                h5path,
                scratch,
                path: path.to_path_buf(),
                written: vec![false; nframes],
            }),
            Err(e) => Err(err(e)), // `out` dropped: its temporary file removed
        }
    }

    /// Number of frames the file holds.
    pub fn frames(&self) -> usize {
        self.written.len()
    }

    /// Write frame `i` (photon counts, slow-major, `fpixels` per row).
    pub fn write_frame(&mut self, i: usize, counts: &[i32]) -> Result<()> {
        let err = |reason: String| Error::Output { path: self.path.clone(), reason };
        let _g = lock();
        if i >= self.written.len() {
            return Err(err(format!("frame {i} is beyond the {} frames of the file", self.written.len())));
        }
        self.data.as_ref().expect("open until finish").write_slab(i as u64, counts).map_err(err)?;
        self.written[i] = true;
        Ok(())
    }

    /// Close the file and move it to its final name; every frame must have been written.
    pub fn finish(mut self) -> Result<()> {
        let err = |reason: String| Error::Output { path: self.path.clone(), reason };
        if let Some(i) = self.written.iter().position(|w| !w) {
            return Err(err(format!("frame {i} was never written")));
        }
        {
            let _g = lock();
            self.data = None;
            self.file = None;
        }
        let mut out = self.out.take().expect("open until finish");
        if self.scratch.is_some() {
            let bytes = std::fs::read(&self.h5path).map_err(|e| err(e.to_string()))?;
            std::io::Write::write_all(&mut out, &bytes).map_err(|e| err(e.to_string()))?;
        }
        out.commit()
    }
}

impl Drop for NexusWriter {
    fn drop(&mut self) {
        // close the HDF5 handles before `out` (the temporary file) is removed
        let _g = lock();
        self.data = None;
        self.file = None;
    }
}

/// Write a one-frame NXmx file.
pub fn write_nexus(path: &Path, m: &ImageMeta, counts: &[i32]) -> Result<()> {
    let mut w = NexusWriter::create(path, m, 1)?;
    w.write_frame(0, counts)?;
    w.finish()
}

/// A one-frame NXmx file as bytes, for the output list (which writes every file under a temporary
/// name and renames them together). libhdf5 writes to a path, so the file is made in the system's
/// temporary folder and read back.
pub fn nexus_bytes(m: &ImageMeta, counts: &[i32]) -> Result<Vec<u8>> {
    let dir = tempfile::tempdir().map_err(|e| Error::Output { path: std::env::temp_dir(), reason: format!("cannot make a temporary folder for the HDF5 file: {e}") })?;
    let p = dir.path().join("image.nxs");
    write_nexus(&p, m, counts)?;
    std::fs::read(&p).map_err(|e| Error::write(&p, e))
}

/// Check that the HDF5 library can be loaded (before a long simulation).
pub fn available() -> std::result::Result<(), String> {
    super::hdf5::lib().map(|_| ())
}

fn write_layout(f: &Node, m: &ImageMeta, nframes: usize) -> std::result::Result<Dataset, String> {
    let px_mm = m.pixel_size * 1000.0;
    let entry = f.group("entry", "NXentry")?;
    entry.data("definition", Val::Str("NXmx"), &[])?;
    entry.data("start_time", Val::Str("2000-01-01T00:00:00Z"), &[])?;
    entry.data("end_time", Val::Str("2000-01-01T00:00:00Z"), &[])?;
    entry.data("program_name", Val::Str("nanobragg-rs"), &[("version", Val::Str(env!("CARGO_PKG_VERSION")))])?;

    // ---- sample and goniometer
    let omega: Vec<f64> = (0..nframes).map(|i| m.phi_start + i as f64 * m.osc).collect();
    let omega_end: Vec<f64> = omega.iter().map(|o| o + m.osc).collect();
    let sample = entry.group("sample", "NXsample")?;
    sample.data("name", Val::Str("simulated crystal"), &[])?;
    sample.data("depends_on", Val::Str("/entry/sample/transformations/omega"), &[])?;
    let st = sample.group("transformations", "NXtransformations")?;
    let spindle = m.mcstas(&m.spindle);
    let rot_attrs = |_: ()| {
        [
            ("depends_on", Val::Str(".")),
            ("transformation_type", Val::Str("rotation")),
            ("units", Val::Str("deg")),
        ]
    };
    {
        let mut a: Vec<(&str, Val)> = rot_attrs(()).into_iter().collect();
        a.push(("vector", Val::F64(&spindle)));
        st.data("omega", Val::F64Array(&omega), &a)?;
        let mut a: Vec<(&str, Val)> = rot_attrs(()).into_iter().collect();
        a.push(("vector", Val::F64(&spindle)));
        st.data("omega_end", Val::F64Array(&omega_end), &a)?;
        st.data("omega_increment_set", Val::F64(&[m.osc]), &[("units", Val::Str("deg"))])?;
    }

    // ---- instrument: beam and detector
    let inst = entry.group("instrument", "NXinstrument")?;
    inst.data("name", Val::Str("nanobragg-rs simulation"), &[])?;
    let beam = inst.group("beam", "NXbeam")?;
    beam.data("incident_wavelength", Val::F64(&[m.wavelength]), &[("units", Val::Str("angstrom"))])?;
    if m.spectrum.len() > 1 {
        let lam: Vec<f64> = m.spectrum.iter().map(|s| s.0).collect();
        let wts: Vec<f64> = m.spectrum.iter().map(|s| s.1).collect();
        let sp = beam.group("incident_wavelength_spectrum", "NXdata")?;
        sp.attr("signal", Val::Str("weights"))?;
        sp.attr("axes", Val::Str("wavelength"))?;
        sp.data("wavelength", Val::F64(&lam), &[("units", Val::Str("angstrom"))])?;
        sp.data("weights", Val::F64(&wts), &[])?;
    }

    let det = inst.group("detector", "NXdetector")?;
    det.data("description", Val::Str("nanobragg-rs simulated pixel array detector"), &[])?;
    if m.modules.len() <= 1 {
        det.data("depends_on", Val::Str("/entry/instrument/detector/module/module_offset"), &[])?;
    }
    det.data("distance", Val::F64(&[m.distance * 1000.0]), &[("units", Val::Str("mm"))])?;
    det.data("beam_center_x", Val::F64(&[m.fbeam / m.pixel_size]), &[("units", Val::Str("pixel"))])?;
    det.data("beam_center_y", Val::F64(&[m.sbeam / m.pixel_size]), &[("units", Val::Str("pixel"))])?;
    det.data("x_pixel_size", Val::F64(&[px_mm]), &[("units", Val::Str("mm"))])?;
    det.data("y_pixel_size", Val::F64(&[px_mm]), &[("units", Val::Str("mm"))])?;
    det.data("saturation_value", Val::I64(&[m.saturation]), &[])?;
    det.data("underload_value", Val::I64(&[-1]), &[])?;
    // dxtbx requires both and a thickness > 0; without -detector_thick the simulated detector is
    // infinitely thin, written as 1 nm (no parallax correction to speak of; read back as none)
    let thick_mm = if m.thickness > 0.0 { m.thickness * 1000.0 } else { crate::base::consts::NXMX_NO_SENSOR_THICKNESS_MM };
    det.data("sensor_material", Val::Str("Si"), &[])?;
    det.data("sensor_thickness", Val::F64(&[thick_mm]), &[("units", Val::Str("mm"))])?;
    if m.exposure > 0.0 {
        det.data("count_time", Val::F64(&[m.exposure]), &[("units", Val::Str("s"))])?;
        det.data("frame_time", Val::F64(&[m.exposure]), &[("units", Val::Str("s"))])?;
    }
    det.data("nanobragg_convention", Val::Str(m.convention), &[])?;
    if m.modules.len() > 1 {
        write_modules(&det, m)?;
    } else {
        write_module(&det, m)?;
    }

    // ---- data
    let data = entry.group("data", "NXdata")?;
    data.attr("signal", Val::Str("data"))?;
    let dims = [nframes as u64, m.spixels as u64, m.fpixels as u64];
    let chunk = [1u64, m.spixels.max(1) as u64, m.fpixels.max(1) as u64];
    data.big_i32("data", &dims, &chunk, 4)
}

/// One NXdetector_module per panel, named `module_00`, `module_01`, ... (zero-padded so that HDF5's
/// name order, which readers follow, is the detector's order). Each module's chain is
/// `fast/slow_pixel_direction → module_offset`, the offset a translation to the panel's first-pixel
/// corner, so a reader gets every panel's origin and axes exactly; its pixels are rows
/// `data_origin[0]..+data_size[0]` of the data (panels stacked along the slow axis).
fn write_modules(det: &Node, m: &ImageMeta) -> std::result::Result<(), String> {
    let width = (m.modules.len() - 1).to_string().len().max(2);
    for (i, md) in m.modules.iter().enumerate() {
        let name = format!("module_{i:0width$}");
        let path = format!("/entry/instrument/detector/{name}/module_offset");
        if i == 0 {
            det.data("depends_on", Val::Str(&path), &[])?;
        }
        let px_mm = md.pixel_size * 1000.0;
        let module = det.group(&name, "NXdetector_module")?;
        module.data("data_origin", Val::I64(&[md.row0 as i64, 0]), &[])?;
        module.data("data_size", Val::I64(&[md.spixels as i64, md.fpixels as i64]), &[])?;
        module.data("data_stride", Val::I64(&[1, 1]), &[])?;
        module.data(
            "module_offset",
            Val::F64(&[magnitude(&md.pix0) * 1000.0]),
            &[
                ("depends_on", Val::Str(".")),
                ("transformation_type", Val::Str("translation")),
                ("units", Val::Str("mm")),
                ("vector", Val::F64(&m.mcstas(&unit(&md.pix0)))),
                ("offset", Val::F64(&[0.0, 0.0, 0.0])),
            ],
        )?;
        for (axis, v) in [("fast_pixel_direction", m.mcstas(&md.fdet)), ("slow_pixel_direction", m.mcstas(&md.sdet))] {
            module.data(
                axis,
                Val::F64(&[px_mm]),
                &[
                    ("depends_on", Val::Str(&path)),
                    ("transformation_type", Val::Str("translation")),
                    ("units", Val::Str("mm")),
                    ("vector", Val::F64(&v)),
                    ("offset", Val::F64(&[0.0, 0.0, 0.0])),
                ],
            )?;
        }
    }
    Ok(())
}

/// The one module of a one-panel detector (`/entry/instrument/detector/module`).
fn write_module(det: &Node, m: &ImageMeta) -> std::result::Result<(), String> {
    let px_mm = m.pixel_size * 1000.0;
    let module = det.group("module", "NXdetector_module")?;
    module.data("data_origin", Val::I64(&[0, 0]), &[])?;
    module.data("data_size", Val::I64(&[m.spixels as i64, m.fpixels as i64]), &[])?;
    module.data("data_stride", Val::I64(&[1, 1]), &[])?;
    let pix0_mm = magnitude(&m.pix0) * 1000.0;
    let pix0_dir = m.mcstas(&unit(&m.pix0));
    module.data(
        "module_offset",
        Val::F64(&[pix0_mm]),
        &[
            ("depends_on", Val::Str(".")),
            ("transformation_type", Val::Str("translation")),
            ("units", Val::Str("mm")),
            ("vector", Val::F64(&pix0_dir)),
            ("offset", Val::F64(&[0.0, 0.0, 0.0])),
        ],
    )?;
    let fast = m.mcstas(&m.fdet);
    let slow = m.mcstas(&m.sdet);
    for (name, v) in [("fast_pixel_direction", &fast), ("slow_pixel_direction", &slow)] {
        module.data(
            name,
            Val::F64(&[px_mm]),
            &[
                ("depends_on", Val::Str("/entry/instrument/detector/module/module_offset")),
                ("transformation_type", Val::Str("translation")),
                ("units", Val::Str("mm")),
                ("vector", Val::F64(v)),
                ("offset", Val::F64(&[0.0, 0.0, 0.0])),
            ],
        )?;
    }

    Ok(())
}
