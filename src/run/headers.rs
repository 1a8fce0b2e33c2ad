//! The experiment → the headers of the formats that carry geometry: the translation lives here so
//! that `io` never sees an `Experiment`.

use crate::base::consts::RTD;
use crate::experiment::params::Convention;
use crate::experiment::Experiment;
use crate::io::meta::ImageMeta;

/// Whether `-nexusfile` writes a detector of several panels (one NXdetector_module each).
pub const MULTI_MODULE_NEXUS: bool = true;

/// The geometry and beam of `exp`'s image for CBF and NeXus headers (`exposure` in seconds).
pub fn image_meta(exp: &Experiment, exposure: f64) -> ImageMeta {
    let d = &exp.det;
    let panel = d.panel();
    let mut spectrum: Vec<(f64, f64)> = Vec::new();
    for s in &exp.beam.sources {
        let l = s.lambda * 1e10;
        match spectrum.iter_mut().find(|(x, _)| *x == l) {
            Some(e) => e.1 += 1.0,
            None => spectrum.push((l, 1.0)),
        }
    }
    ImageMeta {
        fpixels: panel.fpixels,
        // the data: every panel, one after another along the slow axis
        spixels: d.rows(),
        pixel_size: panel.pixel_size,
        fdet: panel.fdet_vector,
        sdet: panel.sdet_vector,
        odet: panel.odet_vector,
        beam: exp.beam.beam_vector,
        spindle: exp.scan.spindle_vector,
        pix0: panel.pix0_vector,
        distance: panel.distance,
        close_distance: panel.close_distance,
        fbeam: d.centre.fbeam,
        sbeam: d.centre.sbeam,
        wavelength: exp.beam.lambda0 * 1e10,
        spectrum,
        phi_start: exp.scan.phi0 * RTD,
        osc: exp.scan.osc * RTD,
        twotheta: d.detector_twotheta * RTD,
        thickness: exp.det.panel().sensor.thick,
        exposure,
        saturation: i32::MAX as i64,
        modules: if d.panels.len() > 1 { modules(exp) } else { Vec::new() },
        // a detector from a DIALS experiment list is in its lab frame (imgCIF): McStas = (−x, y, −z)
        frame: exp.det.from_file.then_some([[-1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]]),
        convention: match d.convention {
            Convention::Adxv => "ADXV",
            Convention::Mosflm => "MOSFLM",
            Convention::Xds => "XDS",
            Convention::Dials => "DIALS",
            Convention::Denzo => "DENZO",
            Convention::Custom => "CUSTOM",
        },
    }
}

/// One NXdetector module per panel, stacked along the slow axis of the data.
fn modules(exp: &Experiment) -> Vec<crate::io::meta::ModuleMeta> {
    let mut row0 = 0;
    exp.det
        .panels
        .iter()
        .map(|p| {
            let m = crate::io::meta::ModuleMeta {
                fpixels: p.fpixels,
                spixels: p.spixels,
                row0,
                pixel_size: p.pixel_size,
                fdet: p.fdet_vector,
                sdet: p.sdet_vector,
                pix0: p.pix0_vector,
            };
            row0 += p.spixels;
            m
        })
        .collect()
}
