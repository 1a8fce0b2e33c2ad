//! What the geometry-carrying formats (CBF, NeXus/NXmx) need to know about an image: detector axes,
//! the first pixel's corner, the beam, the spindle and the oscillation (the vectors the pixel loop
//! uses, nanoBragg.c L1701-L1776), in one place. `run::headers` fills it from the experiment.

use crate::base::vec3::{cross, dot, unitize, V3};

/// Geometry and beam of one image (or of every frame of a series: only the spindle angle changes).
#[derive(Clone, Debug)]
pub struct ImageMeta {
    pub fpixels: usize,
    pub spixels: usize,
    /// metres
    pub pixel_size: f64,
    /// Unit vectors in the simulation's lab frame (the convention's).
    pub fdet: V3,
    pub sdet: V3,
    pub odet: V3,
    pub beam: V3,
    pub spindle: V3,
    /// Sample to the outer corner of the first pixel (fast 0, slow 0), metres.
    pub pix0: V3,
    /// Sample to the direct-beam spot along the beam, metres (the header `DISTANCE`).
    pub distance: f64,
    /// Sample to the detector plane along its normal, metres.
    pub close_distance: f64,
    /// Direct-beam spot from the first pixel's corner along the fast and slow axes, metres.
    pub fbeam: f64,
    pub sbeam: f64,
    /// Central wavelength (Angstrom) and the distinct wavelengths of the sources with their weights
    /// (number of sources at each), Angstrom.
    pub wavelength: f64,
    pub spectrum: Vec<(f64, f64)>,
    /// Spindle angle of the (first) frame and the oscillation per frame, degrees.
    pub phi_start: f64,
    pub osc: f64,
    pub twotheta: f64,
    /// Sensor thickness (metres; 0 when not given).
    pub thickness: f64,
    /// Exposure time (s) when a flux was given, else 0.
    pub exposure: f64,
    /// Largest trusted pixel value written.
    pub saturation: i64,
    pub convention: &'static str,
    /// The panels of a multi-panel detector, each its own NXdetector_module (rows `row0..` of the
    /// data, panels stacked along the slow axis); empty for one panel (the fields above).
    pub modules: Vec<ModuleMeta>,
    /// The rotation from the lab frame to the McStas frame (three rows) when the lab frame is a
    /// known one (a DIALS experiment list's: McStas = (−x, y, −z)); `None`: derived from the beam
    /// and spindle ([`ImageMeta::to_mcstas`]).
    pub frame: Option<[V3; 3]>,
}

/// `f` (three rows) followed by the smallest rotation taking `f·beam` onto +z (Rodrigues), so that
/// a beam already on z (an untilted experiment list) keeps `f` exactly.
fn beam_on_z(f: [V3; 3], beam: &V3) -> [V3; 3] {
    let b = unitize(beam).0;
    let a = [dot(&f[0], &b), dot(&f[1], &b), dot(&f[2], &b)];
    let v = cross(&a, &[0.0, 0.0, 1.0]);
    let c = a[2];
    if dot(&v, &v) < 1e-30 && c > 0.0 {
        return f;
    }
    let r: [V3; 3] = if c < -1.0 + 1e-12 {
        // beam against z: half a turn about x
        [[1.0, 0.0, 0.0], [0.0, -1.0, 0.0], [0.0, 0.0, -1.0]]
    } else {
        let k = 1.0 / (1.0 + c);
        let vx = [[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]];
        let mut r = [[0.0; 3]; 3];
        for i in 0..3 {
            for j in 0..3 {
                let vx2: f64 = (0..3).map(|m| vx[i][m] * vx[m][j]).sum();
                r[i][j] = if i == j { 1.0 } else { 0.0 } + vx[i][j] + k * vx2;
            }
        }
        r
    };
    [0, 1, 2].map(|i| [0, 1, 2].map(|j| (0..3).map(|m| r[i][m] * f[m][j]).sum()))
}

/// One module (panel) of a multi-panel image, in the lab frame of [`ImageMeta`].
#[derive(Clone, Debug)]
pub struct ModuleMeta {
    pub fpixels: usize,
    pub spixels: usize,
    /// First row of this module in the data (the panels above it).
    pub row0: usize,
    /// metres
    pub pixel_size: f64,
    pub fdet: V3,
    pub sdet: V3,
    /// Sample to the outer corner of the module's first pixel, metres.
    pub pix0: V3,
}

impl ImageMeta {
    /// The rotation from the simulation's lab frame to the NeXus (McStas) frame, as three rows:
    /// z along the beam, x along the part of the spindle normal to the beam, y = z × x.
    /// A known lab frame is turned so that the beam still lies on McStas z: NXmx readers (dxtbx)
    /// take the beam along z whatever the file says, so a tilted beam or a rotated lab frame would
    /// otherwise move the beam centre they read.
    pub fn to_mcstas(&self) -> [V3; 3] {
        if let Some(f) = self.frame {
            return beam_on_z(f, &self.beam);
        }
        let z = unitize(&self.beam).0;
        let along = dot(&self.spindle, &z);
        let mut x = [self.spindle[0] - along * z[0], self.spindle[1] - along * z[1], self.spindle[2] - along * z[2]];
        if dot(&x, &x) < 1e-12 {
            // spindle along the beam: any axis normal to the beam
            let t = if z[0].abs() < 0.9 { [1.0, 0.0, 0.0] } else { [0.0, 1.0, 0.0] };
            let a = dot(&t, &z);
            x = [t[0] - a * z[0], t[1] - a * z[1], t[2] - a * z[2]];
        }
        let x = unitize(&x).0;
        let y = cross(&z, &x);
        [x, y, z]
    }

    /// `v` in the McStas frame.
    pub fn mcstas(&self, v: &V3) -> V3 {
        let r = self.to_mcstas();
        [dot(&r[0], v), dot(&r[1], v), dot(&r[2], v)]
    }

    /// True when the detector is normal to the beam, not mirrored (fast × slow along the beam) and
    /// the spindle runs along the fast axis: the geometry a miniCBF header (and dxtbx's reader of it)
    /// can express.
    pub fn mini_cbf_ok(&self) -> std::result::Result<(), String> {
        const TOL: f64 = 1e-9;
        if dot(&self.fdet, &self.beam).abs() > TOL || dot(&self.sdet, &self.beam).abs() > TOL {
            return Err("the detector is not normal to the beam (two-theta or detector rotation)".into());
        }
        if dot(&cross(&self.fdet, &self.sdet), &self.beam) < 0.0 {
            return Err("the detector's fast and slow axes are mirrored relative to the beam (as in -adxv)".into());
        }
        if (dot(&self.spindle, &self.fdet) - 1.0).abs() > TOL {
            return Err("the spindle does not run along the fast axis (as in -dials)".into());
        }
        Ok(())
    }
}
