//! Physical and angular constants, each defined once with the value nanoBragg.c uses.

/// Degrees per radian (nanoBragg.c `#define RTD (180.0*M_1_PI)`).
pub const RTD: f64 = 180.0 * std::f64::consts::FRAC_1_PI;

/// Thomson cross-section: the classical electron radius squared, m² (nanoBragg.c `r_e_sqr`).
pub const R_E_SQR: f64 = 7.94079248018965e-30;

/// Avogadro's number, as nanoBragg.c and nonBragg.c write it.
pub const AVOGADRO: f64 = 6.02214179e23;

/// The wavelengths (Å) this program simulates: `-lambda`'s range (1e-16 to 1e-3 m), and every other
/// wavelength's (a source file's, a dispersion step's, an `.expt` beam's, a `.geom` photon energy's).
pub const WAVELENGTH_RANGE_A: std::ops::RangeInclusive<f64> = 1e-6..=1e7;

/// [`WAVELENGTH_RANGE_A`] in metres, written out (the products by 1e-10 round off the bounds).
pub const WAVELENGTH_RANGE_M: std::ops::RangeInclusive<f64> = 1e-16..=1e-3;

/// The thickest detector sensor a run takes, in metres (`-detector_thick`, a `.expt` panel's
/// `thickness`): real sensors are below a few mm; far past this the layers' offsets carried the
/// pixels out of the picture.
pub const MAX_SENSOR_THICKNESS_M: f64 = 1.0;

/// The sensor thickness, in mm, an NXmx file carries for a detector simulated without one (no
/// `-detector_thick`): dxtbx needs a thickness above 0 (`DXTBX_ASSERT(t0 > 0)` in its parallax
/// correction), so 1 nm is written; a `.expt` panel this thin (what `dials.import` makes of such a
/// file) is read back as no thickness, else the round trip absorbed all but ~5e-6 of the photons.
pub const NXMX_NO_SENSOR_THICKNESS_MM: f64 = 1e-6;
