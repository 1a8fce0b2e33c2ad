//! The experiment → the headers of the formats that carry geometry: the translation lives here so
//! that `io` never sees an `Experiment`.

use crate::base::consts::RTD;
use crate::experiment::params::Convention;
use crate::experiment::Experiment;
use crate::io::meta::ImageMeta;

/// The geometry and beam of `exp`'s image for CBF and NeXus headers (`exposure` in seconds).
pub fn image_meta(exp: &Experiment, exposure: f64) -> ImageMeta {
    let d = &exp.det;
    let mut spectrum: Vec<(f64, f64)> = Vec::new();
    for s in &exp.sources {
        let l = s.lambda * 1e10;
        match spectrum.iter_mut().find(|(x, _)| *x == l) {
            Some(e) => e.1 += 1.0,
            None => spectrum.push((l, 1.0)),
        }
    }
    ImageMeta {
        fpixels: d.fpixels,
        spixels: d.spixels,
        pixel_size: d.pixel_size,
        fdet: d.fdet_vector,
        sdet: d.sdet_vector,
        odet: d.odet_vector,
        beam: d.beam_vector,
        spindle: d.spindle_vector,
        pix0: d.pix0_vector,
        distance: d.distance,
        close_distance: d.close_distance,
        fbeam: d.fbeam,
        sbeam: d.sbeam,
        wavelength: exp.lambda0 * 1e10,
        spectrum,
        phi_start: exp.phi0 * RTD,
        osc: exp.osc * RTD,
        twotheta: d.detector_twotheta * RTD,
        thickness: exp.detector_thick,
        exposure,
        saturation: i32::MAX as i64,
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
