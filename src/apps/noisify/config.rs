//! What noisify.c reads from its command line, as a typed configuration with the C's defaults (the
//! command line itself is parsed by the CLI).

/// Point-spread function shape (noisify.c `psf_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsfType {
    Unknown,
    Fiber,
    Gauss,
}

/// Everything noisify.c reads from its command line, with its defaults.
#[derive(Clone, Debug)]
pub struct NoisifyConfig {
    pub floatfile: Option<String>,
    pub headerfile: Option<String>,
    pub intfile: String,
    pub pgmfile: String,
    pub noisefile: String,
    /// metres
    pub distance: f64,
    pub detsize_x: f64,
    pub detsize_y: f64,
    pub pixel: f64,
    /// metres; `-1e99` = not given (centre of the detector)
    pub xbeam: f64,
    pub ybeam: f64,
    pub xpixels: i32,
    pub ypixels: i32,
    /// Ångström (only copied into the header)
    pub lambda: f64,
    pub psftype: PsfType,
    /// metres, stored as the C's `float psf_fwhm`
    pub psf_fwhm: f32,
    pub psf_radius: i32,
    pub fluence: f64,
    pub intimage_bits: i32,
    pub calculate_noise: bool,
    pub write_pgm: bool,
    pub readout_noise: f64,
    pub flicker_noise: f64,
    pub calibration_noise: f64,
    pub photon_scale: f64,
    /// `None` = the C's `-time(0)`
    pub seed: Option<i64>,
    pub calib_seed: i64,
    pub adc_offset: f64,
    pub quantum_gain: f64,
    pub phi0: f64,
    pub osc: f64,
    /// `--png FILE` (not in noisify.c): an 8-bit preview of the noise image (or, with `-nonoise`,
    /// of the int image)
    pub png: Option<String>,
}

impl Default for NoisifyConfig {
    fn default() -> Self {
        NoisifyConfig {
            floatfile: None,
            headerfile: None,
            intfile: "intimage.img".into(),
            pgmfile: "image.pgm".into(),
            noisefile: "noiseimage.img".into(),
            distance: 100.0e-3,
            detsize_x: 102.4e-3,
            detsize_y: 102.4e-3,
            pixel: 0.1e-3,
            xbeam: -1e99,
            ybeam: -1e99,
            xpixels: 0,
            ypixels: 0,
            lambda: 1.0,
            psftype: PsfType::Unknown,
            psf_fwhm: 46e-6,
            psf_radius: 0,
            fluence: 125932015286227086360700780544.0,
            intimage_bits: 16,
            calculate_noise: true,
            write_pgm: true,
            readout_noise: 0.0,
            flicker_noise: 0.0,
            calibration_noise: 0.03,
            photon_scale: 1.0,
            seed: None,
            calib_seed: 123456789,
            adc_offset: 40.0,
            quantum_gain: 1.0,
            phi0: 0.0,
            osc: 1.0,
            png: None,
        }
    }
}
