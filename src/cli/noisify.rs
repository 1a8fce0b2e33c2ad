//! Command line of `nanobragg-rs noisify`: noisify.c's flags, matched the way noisify.c's `main` does.
//!
//! noisify.c tests every argument that starts with `-` against a list of substrings with `strstr`
//! (so `-readout_noise` and `-readnoise` both hit `-readout`/`-readnoi`, `-psf_fwhm` hits `-psf_fw`),
//! and every test runs (one argument may set two things, as the C's independent `if`s do). The
//! port keeps that matching but, unlike the C, refuses an argument that matches nothing, and a flag
//! that is missing its value (the C silently ignores both).

use crate::io::text::atof;
use crate::{Error, Result};

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

/// C `atoi` of a string (leading blanks, sign, digits; nothing gives 0; overflow as glibc's `strtol`
/// cast to int).
pub fn atoi(s: &str) -> i32 {
    atof_like_int(s) as i32
}

fn atof_like_int(s: &str) -> i64 {
    let mut buf = s.as_bytes().to_vec();
    buf.push(0);
    // SAFETY: NUL-terminated buffer; null endptr allowed.
    unsafe { libc::strtol(buf.as_ptr() as *const libc::c_char, std::ptr::null_mut(), 10) as i64 }
}

fn f(s: &str) -> f64 {
    atof(s.as_bytes())
}

/// Flag list for the usage message and the error for a stray argument.
pub const NOISIFY_USAGE: &str = "usage: noisify -floatfile floatimage.bin [-scale -gain -readout_noise -flicker -calibration -calib_seed -seed -adc -bits 16|32 -psf gauss|fiber -psf_fwhm um -psf_radius px -header file.img -Xbeam mm -Ybeam mm -distance mm -detsize mm -detpixels n -pixel mm -lambda A -fluence -intfile -noisefile -pgmfile -nonoise -nopgm -phi -osc] [--png preview.png]";

/// Parse noisify.c's arguments.
pub fn parse_noisify_args(args: &[String]) -> Result<NoisifyConfig> {
    let mut c = NoisifyConfig::default();
    let n = args.len();
    let mut i = 0;
    let mut value_of_previous = false;
    while i < n {
        let a = args[i].as_str();
        let is_value = value_of_previous;
        value_of_previous = false;
        if a.contains("floatimage.bin") {
            c.floatfile = Some(a.to_string());
            i += 1;
            continue;
        }
        if !a.starts_with('-') {
            if !is_value {
                return Err(Error::flag(a, format!("unexpected word (noisify flags start with '-'; {NOISIFY_USAGE})")));
            }
            i += 1;
            continue;
        }
        let next = args.get(i + 1).map(|s| s.as_str());
        let mut matched = false;
        let mut takes_value = false;
        let val = |matched_: &mut bool| -> Result<&str> {
            *matched_ = true;
            next.ok_or_else(|| Error::flag(a, "needs a value"))
        };
        let has = |p: &str| a.contains(p);
        if has("-lambda") {
            c.lambda = f(val(&mut matched)?);
            takes_value = true;
        }
        if has("-Xbeam") {
            c.xbeam = f(val(&mut matched)?) / 1000.0;
            takes_value = true;
        }
        if has("-Ybeam") {
            c.ybeam = f(val(&mut matched)?) / 1000.0;
            takes_value = true;
        }
        if has("-distance") {
            c.distance = f(val(&mut matched)?) / 1000.0;
            takes_value = true;
        }
        if has("-detsize") && a.len() == 8 {
            let v = f(val(&mut matched)?) / 1000.0;
            c.detsize_x = v;
            c.detsize_y = v;
            takes_value = true;
        }
        if has("-detsize_x") {
            c.detsize_x = f(val(&mut matched)?) / 1000.0;
            takes_value = true;
        }
        if has("-detsize_y") {
            c.detsize_y = f(val(&mut matched)?) / 1000.0;
            takes_value = true;
        }
        if has("-detpixels") && a.len() == 10 {
            let v = atoi(val(&mut matched)?);
            c.xpixels = v;
            c.ypixels = v;
            takes_value = true;
        }
        if has("-detpixels_x") {
            c.xpixels = atoi(val(&mut matched)?);
            takes_value = true;
        }
        if has("-detpixels_y") {
            c.ypixels = atoi(val(&mut matched)?);
            takes_value = true;
        }
        if has("-pixel") {
            c.pixel = f(val(&mut matched)?) / 1000.0;
            takes_value = true;
        }
        if has("-psf") && a.len() == 4 {
            let v = val(&mut matched)?;
            c.psftype = PsfType::Unknown;
            if v.contains("gauss") {
                c.psftype = PsfType::Gauss;
            }
            if v.contains("fiber") {
                c.psftype = PsfType::Fiber;
            }
            if c.psftype == PsfType::Unknown {
                return Err(Error::flag(a, format!("unknown psf type: {v} (expected gauss or fiber)")));
            }
            takes_value = true;
        }
        if has("-psf_rad") {
            // `psf_radius = atof(...)`: double to int truncation
            c.psf_radius = f(val(&mut matched)?) as i32;
            takes_value = true;
        }
        if has("-psf_si") || has("-psf_fw") || has("-psf_wi") {
            c.psf_fwhm = (f(val(&mut matched)?) / 1e6) as f32;
            takes_value = true;
        }
        if has("-fluence") {
            c.fluence = f(val(&mut matched)?);
            takes_value = true;
        }
        if has("-floatfile") || has("-floatimage") || has("-bin") {
            c.floatfile = Some(val(&mut matched)?.to_string());
            takes_value = true;
        }
        if has("-header") {
            c.headerfile = Some(val(&mut matched)?.to_string());
            takes_value = true;
        }
        if has("-pgmfile") || has("-pgmimage") {
            c.pgmfile = val(&mut matched)?.to_string();
            takes_value = true;
        }
        if has("-intfile") || has("-intimage") {
            c.intfile = val(&mut matched)?.to_string();
            takes_value = true;
        }
        if has("-bits") {
            c.intimage_bits = atoi(val(&mut matched)?);
            if c.intimage_bits != 16 && c.intimage_bits != 32 {
                // the C then writes headers and data for neither width
                return Err(Error::flag(a, format!("{} bits: only 16 or 32 are supported", c.intimage_bits)));
            }
            takes_value = true;
        }
        if has("-noisefile") || has("-noiseimage") {
            c.noisefile = val(&mut matched)?.to_string();
            takes_value = true;
        }
        if has("-nonoise") {
            c.calculate_noise = false;
            matched = true;
        }
        if has("-nopgm") {
            c.write_pgm = false;
            matched = true;
        }
        if has("-readout") || has("-readnoi") {
            c.readout_noise = f(val(&mut matched)?);
            takes_value = true;
        }
        if has("-flicker") {
            c.flicker_noise = f(val(&mut matched)?);
            takes_value = true;
        }
        if has("-calibration") {
            c.calibration_noise = f(val(&mut matched)?);
            takes_value = true;
        }
        if has("-scale") {
            c.photon_scale = f(val(&mut matched)?);
            takes_value = true;
        }
        if has("-seed") {
            c.seed = Some(-(atoi(val(&mut matched)?) as i64));
            takes_value = true;
        }
        if has("-calib_seed") {
            c.calib_seed = -(atoi(val(&mut matched)?) as i64);
            takes_value = true;
        }
        if has("-badpix_seed") || has("-hotpix_seed") {
            // read and unused by noisify.c
            val(&mut matched)?;
            takes_value = true;
        }
        if has("-adc") {
            c.adc_offset = f(val(&mut matched)?);
            takes_value = true;
        }
        if has("-gain") {
            c.quantum_gain = f(val(&mut matched)?);
            takes_value = true;
        }
        if has("-phi") {
            c.phi0 = f(val(&mut matched)?);
            takes_value = true;
        }
        if a == "--png" || a == "-pngfile" {
            c.png = Some(val(&mut matched)?.to_string());
            takes_value = true;
        }
        if has("-osc") {
            c.osc = f(val(&mut matched)?);
            takes_value = true;
        }
        if !matched && !is_value {
            return Err(Error::flag(a, format!("unknown noisify flag ({NOISIFY_USAGE})")));
        }
        value_of_previous = takes_value;
        i += 1;
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<NoisifyConfig> {
        parse_noisify_args(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn strstr_matching_as_the_c() {
        let c = p("-bin x.bin -readnoise 3 -psf_fwhm 80 -psf gauss -seed 5 -calib_seed 7 -adc -5").unwrap();
        assert_eq!(c.floatfile.as_deref(), Some("x.bin"));
        assert_eq!(c.readout_noise, 3.0);
        assert_eq!(c.psf_fwhm, (80.0f64 / 1e6) as f32);
        assert_eq!(c.psftype, PsfType::Gauss);
        assert_eq!(c.seed, Some(-5));
        assert_eq!(c.calib_seed, -7);
        assert_eq!(c.adc_offset, -5.0);
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(p("-floatfile a.bin -bogus 3").is_err());
        assert!(p("-floatfile a.bin -scale").is_err());
        assert!(p("-floatfile a.bin -psf blur").is_err());
        assert!(p("-floatfile a.bin -bits 8").is_err());
        assert!(p("-floatfile a.bin --png").is_err());
    }

    #[test]
    fn png_preview_is_the_ports_option() {
        let c = p("-floatfile a.bin --png p.png -pgmfile i.pgm").unwrap();
        assert_eq!(c.png.as_deref(), Some("p.png"));
        assert_eq!(c.pgmfile, "i.pgm");
        assert_eq!(p("-floatfile a.bin").unwrap().png, None);
    }
}
