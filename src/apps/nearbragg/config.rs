//! What nearBragg.c reads from its command line, as a typed configuration with the C's defaults
//! (nearBragg.c lines 60-143; the command line itself is parsed by the CLI).

/// nearBragg.c's `#define PI 3.14159265358979` (line 22): truncated, kept for parity.
#[allow(clippy::approx_constant)]
pub const PI: f64 = 3.14159265358979;
/// nearBragg.c's `#define twoPI 6.28318530717959` (line 23): truncated, kept for the phases' parity.
#[allow(clippy::approx_constant)]
pub const TWO_PI: f64 = 6.28318530717959;
/// nearBragg.c's `RTD = 180.0/PI` (line 24), with its truncated PI.
pub const RTD: f64 = 180.0 / PI;
/// Sentinel of the C's "not given" beam centre and two-theta (`-1e99`, lines 88 and 101).
pub const UNSET: f64 = -1e99;

/// Everything nearBragg.c reads from its command line (SI units, radians), with its defaults.
#[derive(Clone, Debug)]
pub struct NearBraggConfig {
    /// `-file`: the atom list (X Y Z [occupancy B phase], Å and degrees).
    pub file: Option<String>,
    pub xbeam: f64,
    pub ybeam: f64,
    pub fdet: [f64; 3],
    pub sdet: [f64; 3],
    pub odet: [f64; 3],
    /// `-pix0_vector` (metres); `None`: from the beam centre and distance (line 510).
    pub pix0: Option<[f64; 3]>,
    /// `-beam_vector` and `-polar_vector`: parsed, unused by the C (and by the port).
    pub beam: [f64; 3],
    pub polar_vector: [f64; 3],
    /// `-spindle_axis`: the axis of `-twotheta`.
    pub spindle: [f64; 3],
    pub distance: f64,
    pub twotheta: f64,
    pub source_distance: f64,
    pub source_depth: f64,
    pub far_source: bool,
    pub depthsteps: i32,
    pub detsize_x: f64,
    pub detsize_y: f64,
    pub xpixels: i32,
    pub ypixels: i32,
    pub curved: bool,
    pub pixel: f64,
    pub point_pixel: bool,
    /// `-nopolar`: parsed, no effect (the C applies no polarization factor).
    pub nopolar: bool,
    pub oversample: i32,
    /// `-roi xmin xmax ymin ymax` (inclusive; -1: the detector's edge).
    pub roi: [i32; 4],
    pub lambda0: f64,
    pub fluence: f64,
    pub dispersion: f64,
    pub dispsteps: i32,
    pub hdivrange: f64,
    pub vdivrange: f64,
    pub hdivstep: f64,
    pub vdivstep: f64,
    pub hdivsteps: i32,
    pub vdivsteps: i32,
    /// `-phi`: only the SMV header's PHI and OSC_START.
    pub phi0: f64,
    pub floatfile: String,
    pub sinfile: String,
    pub cosfile: String,
    pub intfile: String,
    pub intfile_scale: f64,
    pub coherent: bool,
    pub accumulate: bool,
    pub printout: bool,
    pub printout_pixel: Option<(i32, i32)>,
    pub progress: bool,
    pub debug: bool,
    /// `--threads` (not in the C): worker threads of the pixel loop (0: rayon's default pool).
    pub threads: usize,
    /// The atom loop (not in the C): the scalar reference (`Backend::Reference`) or SIMD lanes at a
    /// level (lowered to the CPU's; below AVX2 the scalar loop runs); `None`: the process's
    /// (`NANOBRAGG_SIMD`, else the CPU's best level).
    pub backend: Option<crate::kernel::Backend>,
}

impl Default for NearBraggConfig {
    fn default() -> Self {
        NearBraggConfig {
            file: None,
            xbeam: UNSET,
            ybeam: UNSET,
            fdet: [0.0, 0.0, 1.0],
            sdet: [0.0, -1.0, 0.0],
            odet: [1.0, 0.0, 0.0],
            pix0: None,
            beam: [1.0, 0.0, 0.0],
            polar_vector: [0.0, 0.0, 1.0],
            spindle: [0.0, 0.0, 1.0],
            distance: 100.0e-3,
            twotheta: UNSET,
            source_distance: 10.0,
            source_depth: 0.0,
            far_source: false,
            depthsteps: -1,
            detsize_x: 102.4e-3,
            detsize_y: 102.4e-3,
            xpixels: 0,
            ypixels: 0,
            curved: false,
            pixel: 0.1e-3,
            point_pixel: false,
            nopolar: false,
            oversample: -1,
            roi: [-1; 4],
            lambda0: 1.0e-10,
            fluence: 1.25932015286227e+29,
            dispersion: 0.0,
            dispsteps: -1,
            hdivrange: -1.0,
            vdivrange: -1.0,
            hdivstep: -1.0,
            vdivstep: -1.0,
            hdivsteps: -1,
            vdivsteps: -1,
            phi0: 0.0,
            floatfile: "floatimage.bin".into(),
            sinfile: "sinimage.bin".into(),
            cosfile: "cosimage.bin".into(),
            intfile: "intimage.img".into(),
            intfile_scale: 0.0,
            coherent: false,
            accumulate: false,
            printout: false,
            printout_pixel: None,
            progress: true,
            debug: false,
            threads: 0,
            backend: None,
        }
    }
}
