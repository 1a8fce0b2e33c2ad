//! Detector geometry: conventions (MOSFLM, XDS, ADXV, DENZO, DIALS, CUSTOM), beam centres, pivots,
//! detector rotations, two-theta and the vector `pix0_vector` from the sample to the first pixel.
//! This is nanoBragg.c L1119-L1776 in the C's order.

use crate::experiment::params::Params;
use crate::experiment::params::{Convention, Pivot};
use crate::base::image::{ImageView, Roi};
use crate::base::log::Log;
use crate::base::vec3::{cross, dot, rotate, rotate_axis, unitize, V3};

/// The one flat detector the C's flags describe, resolved exactly as nanoBragg.c does (L1119-L1776):
/// convention, pivot, beam centres, the unit vectors and `pix0_vector`. [`Detector::from_convention`]
/// makes it a [`Detector`] of one [`Panel`].
#[derive(Clone, Debug)]
pub struct ConventionGeometry {
    pub convention: Convention,
    pub pivot: Pivot,
    pub fpixels: usize,
    pub spixels: usize,
    /// metres
    pub pixel_size: f64,
    pub detsize_f: f64,
    pub detsize_s: f64,
    pub fdet_vector: V3,
    pub sdet_vector: V3,
    pub odet_vector: V3,
    pub beam_vector: V3,
    pub polar_vector: V3,
    pub spindle_vector: V3,
    pub twotheta_axis: V3,
    /// unit(beam × polar): the "vertical" axis of the divergence grid.
    pub vert_vector: V3,
    pub pix0_vector: V3,
    /// Sample-to-direct-beam-spot distance (metres), after rotations.
    pub distance: f64,
    /// Sample-to-detector-plane distance (metres), after rotations.
    pub close_distance: f64,
    /// Where the beam and the near point meet the detector, in each convention.
    pub centre: BeamCentre,
    pub detector_twotheta: f64,
    pub curved_detector: bool,
    pub point_pixel: bool,
    /// beam · o′ (two-theta ignored, checklist Q4).
    pub ratio: f64,
}

/// Where the direct beam and the near point (the foot of the perpendicular from the sample) meet the
/// detector, in the frames the conventions and the image headers use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BeamCentre {
    /// Input/convention beam centre (header BEAM_CENTER_X/Y), metres.
    pub xbeam: f64,
    pub ybeam: f64,
    /// Direct-beam spot on the fast/slow axes after rotation, metres.
    pub fbeam: f64,
    pub sbeam: f64,
    /// Near point (pre-geometry values as printed by the C).
    pub xclose: f64,
    pub yclose: f64,
    /// Near point on the fast/slow axes after rotation, metres.
    pub fclose: f64,
    pub sclose: f64,
    pub orgx: f64,
    pub orgy: f64,
    /// DIALS origin in mm.
    pub dials_origin: V3,
}

/// The detector: its panels, and the beam centre and convention the image headers report (taken from
/// the C's flags; a detector read from elsewhere fills them for its first panel).
#[derive(Clone, Debug)]
pub struct Detector {
    /// One panel from the C's flags; several for a multi-panel detector. Images are panel after panel.
    pub panels: Vec<Panel>,
    pub convention: Convention,
    pub pivot: Pivot,
    /// Detector size (metres) from `-detsize`/`-detpixels`, before the ROI.
    pub detsize_f: f64,
    pub detsize_s: f64,
    pub twotheta_axis: V3,
    /// Where the beam and the near point meet the detector, in each convention.
    pub centre: BeamCentre,
    pub detector_twotheta: f64,
    /// beam · o′ (two-theta ignored, checklist Q4).
    pub ratio: f64,
    /// The panels were read from a file (`--expt`): the lab frame is the file's (DIALS: imgCIF).
    pub from_file: bool,
}

/// One panel of a detector read from a file (`--expt`): its pixel grid and its frame in the lab, as
/// the simulation uses them (metres, unit vectors; the normal points away from the sample).
#[derive(Clone, Debug, PartialEq)]
pub struct PanelSpec {
    pub name: String,
    pub fpixels: usize,
    pub spixels: usize,
    /// metres (square pixels)
    pub pixel_size: f64,
    pub fdet_vector: V3,
    pub sdet_vector: V3,
    pub odet_vector: V3,
    /// Sample to the outer corner of the first pixel, metres.
    pub pix0_vector: V3,
    /// fpixels × spixels, 0 = not rendered (a geometry file's bad regions).
    pub mask: Option<Vec<u16>>,
    /// The sensor the file gives this panel; `None` when it gives none (a CrystFEL geometry, a DIALS
    /// panel of thickness 0): the run's flags decide.
    pub sensor: Option<SensorSpec>,
}

/// A panel's sensor as a file gives it (DIALS's `thickness` and `mu`), in metres and 1/metre; `mu`
/// `None` takes the C's default (1/thickness).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SensorSpec {
    pub thick: f64,
    pub mu: Option<f64>,
}

impl PanelSpec {
    /// The panel to render: `beam` gives the distance to the direct-beam spot (nanoBragg.c L1745
    /// `distance = close_distance/ratio`), the sensor, ROI and flags are the run's.
    pub fn panel(&self, beam: &V3, sensor: Sensor, curved: bool, point_pixel: bool) -> Panel {
        let close = dot(&self.pix0_vector, &self.odet_vector);
        let mut ratio = dot(beam, &self.odet_vector);
        if ratio == 0.0 {
            ratio = f64::MIN_POSITIVE;
        }
        Panel {
            fpixels: self.fpixels,
            spixels: self.spixels,
            pixel_size: self.pixel_size,
            fdet_vector: self.fdet_vector,
            sdet_vector: self.sdet_vector,
            odet_vector: self.odet_vector,
            pix0_vector: self.pix0_vector,
            distance: close / ratio,
            close_distance: close,
            curved,
            point_pixel,
            sensor,
            roi: Roi::full(self.fpixels, self.spixels),
            mask: self.mask.clone(),
            mask_path: None,
        }
    }
}

/// One flat (or `-curved_det`) array of square pixels: its frame in the lab, its sensor, the pixels
/// it renders (ROI and mask).
#[derive(Clone, Debug)]
pub struct Panel {
    pub fpixels: usize,
    pub spixels: usize,
    /// metres
    pub pixel_size: f64,
    pub fdet_vector: V3,
    pub sdet_vector: V3,
    pub odet_vector: V3,
    /// Sample to the corner of the first pixel (metres).
    pub pix0_vector: V3,
    /// Sample-to-direct-beam-spot distance (metres), after rotations.
    pub distance: f64,
    /// Sample-to-panel-plane distance (metres), after rotations.
    pub close_distance: f64,
    /// `-curved_det`: every pixel at `distance` from the sample.
    pub curved: bool,
    /// `-point_pixel`: solid angle 1/R² instead of the pixel's.
    pub point_pixel: bool,
    pub sensor: Sensor,
    /// The pixels rendered (`-roi`, clipped to the panel).
    pub roi: Roi,
    /// fpixels × spixels, 0 = not rendered.
    pub mask: Option<Vec<u16>>,
    pub mask_path: Option<std::path::PathBuf>,
}

/// The sensor layer's thickness and attenuation, sampled in `thicksteps` layers `thickstep` apart
/// (C L1381, L2600).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sensor {
    /// metres; 0 = every photon counted at the surface.
    pub thick: f64,
    /// Linear attenuation coefficient (1/metre: the inverse of `-detector_absorb`'s depth).
    pub mu: f64,
    pub thicksteps: i32,
    pub thickstep: f64,
}

impl Panel {
    /// `float` (this panel's pixels, slow-major) with the panel's size and ROI.
    pub fn image<'a>(&self, float: &'a [f32]) -> ImageView<'a> {
        ImageView::new(float, self.fpixels, self.spixels, self.roi.clone())
    }

    /// The lab positions (metres) of the panel's four outer corners as rendered: on a curved
    /// detector every pixel at `distance` along the beam `beam`, swung by the flat lab y and z taken
    /// as angles about sdet, then fdet (nanoBragg.c L2707-L2715). The scattering angle is largest at
    /// a corner on either.
    pub fn corner_positions(&self, beam: &V3) -> [V3; 4] {
        let (f, s) = (self.fpixels as f64 * self.pixel_size, self.spixels as f64 * self.pixel_size);
        [(0.0, 0.0), (f, 0.0), (0.0, s), (f, s)].map(|(x, y)| {
            let p: V3 = std::array::from_fn(|i| self.pix0_vector[i] + x * self.fdet_vector[i] + y * self.sdet_vector[i]);
            if !self.curved {
                return p;
            }
            let d = self.distance;
            let along = [d * beam[0], d * beam[1], d * beam[2]];
            crate::base::vec3::rotate_axis(&crate::base::vec3::rotate_axis(&along, &self.sdet_vector, p[1] / d), &self.fdet_vector, p[2] / d)
        })
    }
}

impl Detector {
    /// The detector of the C's flags: one panel, with the convention's beam centre for the headers.
    pub fn from_convention(g: ConventionGeometry, panels: Vec<Panel>) -> Detector {
        Detector {
            panels,
            convention: g.convention,
            pivot: g.pivot,
            detsize_f: g.detsize_f,
            detsize_s: g.detsize_s,
            twotheta_axis: g.twotheta_axis,
            centre: g.centre,
            detector_twotheta: g.detector_twotheta,
            ratio: g.ratio,
            from_file: false,
        }
    }
    /// The first panel: the only one of a detector from the C's flags, and the one single-image formats
    /// (SMV, CBF, PGM) and their headers describe.
    pub fn panel(&self) -> &Panel {
        &self.panels[0]
    }
    pub fn panel_mut(&mut self) -> &mut Panel {
        &mut self.panels[0]
    }
    /// Pixels per row, the same on every panel (the image is panel after panel along the slow axis).
    pub fn fpixels(&self) -> usize {
        self.panels.first().map_or(0, |p| p.fpixels)
    }
    /// Rows of all panels: the image's slow axis.
    pub fn rows(&self) -> usize {
        self.panels.iter().map(|p| p.spixels).sum()
    }
    /// The panel that holds image row `s`, and the row within it.
    pub fn locate(&self, s: usize) -> (&Panel, usize) {
        let mut first = 0;
        for p in &self.panels {
            if s < first + p.spixels {
                return (p, s - first);
            }
            first += p.spixels;
        }
        panic!("row {s} is past the detector's {first} rows");
    }
}

/// The `-roi` bounds as the C keeps and prints them (L1164): inclusive, each unset (negative) bound
/// defaulting to the image's edge, the upper ones one past the end.
pub fn c_roi_bounds(params: &Params, fpixels: usize, spixels: usize) -> [i64; 4] {
    let mut roi = params.roi.unwrap_or([-1, -1, -1, -1]);
    for (i, full) in [(0, 0), (1, fpixels as i64), (2, 0), (3, spixels as i64)] {
        if roi[i] < 0 {
            roi[i] = full;
        }
    }
    roi
}

/// Detector size in pixels from `-detpixels`/`-detsize` (C L1119-L1126).
pub fn detector_pixels(params: &Params) -> (f64, f64, i64, i64) {
    let mut detsize_f = params.detsize_f;
    let mut detsize_s = params.detsize_s;
    if params.fpixels != 0 {
        detsize_f = params.pixel_size * params.fpixels as f64;
    }
    if params.spixels != 0 {
        detsize_s = params.pixel_size * params.spixels as f64;
    }
    let fpixels = (detsize_f / params.pixel_size - 0.5).ceil() as i64;
    let spixels = (detsize_s / params.pixel_size - 0.5).ceil() as i64;
    (detsize_f, detsize_s, fpixels, spixels)
}

/// The first part of the geometry (C L1156-L1270): beam-centre defaults, convention vectors, pivot,
/// unit vectors. Runs before the sampling rules, as in the C.
pub struct ConventionSetup {
    pub det: ConventionGeometry,
    pub close_distance_in: Option<f64>,
    pub distance_in: f64,
    pub rot: [f64; 3],
}

/// The detector axes, beam, polarization and spindle of `-convention` (or the flags' own for CUSTOM),
/// and the beam centre in the convention's terms, with the C's defaults (nanoBragg.c L1172-L1260).
/// `close` and `close_fs` are the `-xclose/-yclose` values and their fast/slow defaults.
fn convention_axes(params: &Params, detsize_f: f64, detsize_s: f64, close: [f64; 2], close_fs: [f64; 2]) -> ConventionAxes {
    let px = params.pixel_size;
    let nan = f64::NAN;
    let [xclose, yclose] = close;
    let [mut fclose, mut sclose] = close_fs;
    let (fbeam, sbeam);
    let mut xbeam = params.xbeam.unwrap_or(nan);
    let mut ybeam = params.ybeam.unwrap_or(nan);

    let mut beam = params.beam_vector;
    let mut fdet = params.fdet_vector;
    let mut sdet = params.sdet_vector;
    let mut odet = params.odet_vector;
    let mut twotheta_axis = params.twotheta_axis;
    let mut polar = params.polar_vector;
    let mut spindle = params.spindle_vector;
    let mut pivot = params.pivot;

    match params.convention {
        Convention::Adxv => {
            if xbeam.is_nan() {
                xbeam = (detsize_f + px) / 2.0;
            }
            if ybeam.is_nan() {
                ybeam = (detsize_s - px) / 2.0;
            }
            beam = [0.0, 0.0, 1.0];
            fdet = [1.0, 0.0, 0.0];
            sdet = [0.0, -1.0, 0.0];
            odet = [0.0, 0.0, 1.0];
            twotheta_axis = [-1.0, 0.0, 0.0];
            polar = [1.0, 0.0, 0.0];
            spindle = [1.0, 0.0, 0.0];
            fbeam = xbeam;
            sbeam = detsize_s - ybeam;
            pivot = Pivot::Beam;
        }
        Convention::Mosflm | Convention::Denzo => {
            if xbeam.is_nan() {
                xbeam = (detsize_s + px) / 2.0;
            }
            if ybeam.is_nan() {
                ybeam = (detsize_f + px) / 2.0;
            }
            beam = [1.0, 0.0, 0.0];
            odet = [1.0, 0.0, 0.0];
            fdet = [0.0, 0.0, 1.0];
            sdet = [0.0, -1.0, 0.0];
            twotheta_axis = [0.0, 0.0, -1.0];
            polar = [0.0, 0.0, 1.0];
            spindle = [0.0, 0.0, 1.0];
            // MOSFLM puts the first pixel centre at (0.5, 0.5) pixels; DENZO at (0, 0).
            let shift = if params.convention == Convention::Mosflm { 0.5 } else { 0.0 };
            fbeam = ybeam + shift * px;
            sbeam = xbeam + shift * px;
            pivot = Pivot::Beam;
        }
        Convention::Xds | Convention::Dials => {
            if xbeam.is_nan() {
                xbeam = xclose;
            }
            if ybeam.is_nan() {
                ybeam = yclose;
            }
            beam = [0.0, 0.0, 1.0];
            fdet = [1.0, 0.0, 0.0];
            sdet = [0.0, 1.0, 0.0];
            odet = [0.0, 0.0, 1.0];
            if params.convention == Convention::Xds {
                twotheta_axis = [1.0, 0.0, 0.0];
                polar = [1.0, 0.0, 0.0];
                spindle = [1.0, 0.0, 0.0];
            } else {
                twotheta_axis = [0.0, 1.0, 0.0];
                polar = [0.0, 1.0, 0.0];
                spindle = [0.0, 1.0, 0.0];
            }
            fbeam = xbeam;
            sbeam = ybeam;
            pivot = Pivot::Sample;
        }
        Convention::Custom => {
            if xbeam.is_nan() {
                xbeam = xclose;
            }
            if ybeam.is_nan() {
                ybeam = yclose;
            }
            fbeam = xbeam;
            sbeam = ybeam;
            fclose = xbeam;
            sclose = ybeam;
        }
    }
    ConventionAxes { beam, fdet, sdet, odet, twotheta_axis, polar, spindle, pivot, xbeam, ybeam, fbeam, sbeam, fclose, sclose }
}

/// What [`convention_axes`] resolves.
struct ConventionAxes {
    beam: V3,
    fdet: V3,
    sdet: V3,
    odet: V3,
    twotheta_axis: V3,
    polar: V3,
    spindle: V3,
    pivot: Pivot,
    xbeam: f64,
    ybeam: f64,
    fbeam: f64,
    sbeam: f64,
    fclose: f64,
    sclose: f64,
}

pub fn apply_convention(params: &Params, detsize_f: f64, detsize_s: f64, fpixels: usize, spixels: usize, log: &mut Log) -> ConventionSetup {
    let px = params.pixel_size;
    let nan = f64::NAN;
    let mut fclose = nan;
    let mut sclose = nan;
    if let Some(orgx) = params.orgx {
        fclose = (orgx - 0.5) * px;
    }
    if let Some(orgy) = params.orgy {
        sclose = (orgy - 0.5) * px;
    }
    if fclose.is_nan() {
        fclose = (detsize_f - 0.0 * px) / 2.0;
    }
    if sclose.is_nan() {
        sclose = (detsize_s + 0.0 * px) / 2.0;
    }
    let xclose = params.xclose.unwrap_or(fclose);
    let yclose = params.yclose.unwrap_or(sclose);
    let ConventionAxes { mut beam, mut fdet, mut sdet, mut odet, twotheta_axis, mut polar, mut spindle, pivot, xbeam, ybeam, fbeam, sbeam, fclose, sclose } =
        convention_axes(params, detsize_f, detsize_s, [xclose, yclose], [fclose, sclose]);

    // straighten up vectors (C L1260)
    beam = unitize(&beam).0;
    fdet = unitize(&fdet).0;
    sdet = unitize(&sdet).0;
    let (o_unit, o_len) = unitize(&odet);
    odet = o_unit;
    if o_len != 1.0 {
        log.line("WARNING: auto-generating odet_vector");
        odet = unitize(&cross(&fdet, &sdet)).0;
    }
    polar = unitize(&polar).0;
    spindle = unitize(&spindle).0;
    let vert = unitize(&cross(&beam, &polar)).0;

    let det = ConventionGeometry {
        convention: params.convention,
        pivot,
        fpixels,
        spixels,
        pixel_size: px,
        detsize_f,
        detsize_s,
        fdet_vector: fdet,
        sdet_vector: sdet,
        odet_vector: odet,
        beam_vector: beam,
        polar_vector: polar,
        spindle_vector: spindle,
        twotheta_axis,
        vert_vector: vert,
        pix0_vector: [0.0; 3],
        distance: params.distance,
        close_distance: f64::NAN,
        centre: BeamCentre { xbeam, ybeam, fbeam, sbeam, xclose, yclose, fclose, sclose, orgx: f64::NAN, orgy: f64::NAN, dials_origin: [0.0; 3] },
        detector_twotheta: params.detector_twotheta,
        curved_detector: params.curved_detector,
        point_pixel: params.point_pixel,
        ratio: 1.0,
    };
    ConventionSetup {
        det,
        close_distance_in: params.close_distance,
        distance_in: params.distance,
        rot: [params.detector_rotx, params.detector_roty, params.detector_rotz],
    }
}

/// Second part (C L1701-L1776): rotate the detector, place pix0 according to the pivot, and derive
/// every beam-centre flavour from the final vectors.
pub fn orient_detector(setup: ConventionSetup, log: &mut Log) -> ConventionGeometry {
    let ConventionSetup { mut det, close_distance_in, distance_in, rot } = setup;
    let name = match det.convention {
        Convention::Adxv => "adxv",
        Convention::Mosflm => "mosflm",
        Convention::Xds => "xds",
        Convention::Dials => "dials",
        Convention::Denzo => "denzo",
        Convention::Custom => "custom",
    };
    log.line(format!("{name} convention selected."));

    let [rx, ry, rz] = rot;
    let o_rot = rotate(&det.odet_vector, rx, ry, rz);
    let mut ratio = dot(&det.beam_vector, &o_rot);
    if ratio == 0.0 {
        ratio = f64::MIN_POSITIVE;
    }
    let mut close_distance = match close_distance_in {
        Some(c) => c,
        None => (ratio * distance_in).abs(),
    };
    let mut pix0 = det.pix0_vector;
    let (f, s, o) = (det.fdet_vector, det.sdet_vector, det.odet_vector);
    if det.pivot == Pivot::Sample {
        log.line("pivoting detector around sample");
        for i in 0..3 {
            pix0[i] = -det.centre.fclose * f[i] - det.centre.sclose * s[i] + close_distance * o[i];
        }
        pix0 = rotate(&pix0, rx, ry, rz);
        pix0 = rotate_axis(&pix0, &det.twotheta_axis, det.detector_twotheta);
    }
    let mut f = rotate(&f, rx, ry, rz);
    let mut s = rotate(&s, rx, ry, rz);
    let mut o = rotate(&o, rx, ry, rz);
    f = rotate_axis(&f, &det.twotheta_axis, det.detector_twotheta);
    s = rotate_axis(&s, &det.twotheta_axis, det.detector_twotheta);
    o = rotate_axis(&o, &det.twotheta_axis, det.detector_twotheta);
    let distance = close_distance / ratio;
    if det.pivot == Pivot::Beam {
        log.line("pivoting detector around direct beam spot");
        let b = det.beam_vector;
        for i in 0..3 {
            pix0[i] = -det.centre.fbeam * f[i] - det.centre.sbeam * s[i] + distance * b[i];
        }
    }
    det.centre.fclose = -dot(&pix0, &f);
    det.centre.sclose = -dot(&pix0, &s);
    close_distance = dot(&pix0, &o);
    let b = det.beam_vector;
    let w = [
        close_distance / ratio * b[0] - pix0[0],
        close_distance / ratio * b[1] - pix0[1],
        close_distance / ratio * b[2] - pix0[2],
    ];
    det.centre.fbeam = dot(&f, &w);
    det.centre.sbeam = dot(&s, &w);
    det.distance = close_distance / ratio;
    det.close_distance = close_distance;
    det.ratio = ratio;
    det.centre.orgx = det.centre.fclose / det.pixel_size + 0.5;
    det.centre.orgy = det.centre.sclose / det.pixel_size + 0.5;
    det.centre.dials_origin = [
        1000.0 * dot(&pix0, &[0.0, 0.0, 1.0]),
        1000.0 * dot(&pix0, &[0.0, 1.0, 0.0]),
        1000.0 * dot(&pix0, &[-1.0, 0.0, 0.0]),
    ];
    det.fdet_vector = f;
    det.sdet_vector = s;
    det.odet_vector = o;
    det.pix0_vector = pix0;
    let g = crate::base::c::printf::g;
    log.line(format!("XDS incident beam: {} {} {}", g(dot(&b, &f)), g(dot(&b, &s)), g(dot(&b, &o))));
    det
}
