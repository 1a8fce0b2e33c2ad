//! Command line of `nanobragg-rs noisify`: noisify.c's flags, matched the way noisify.c's `main` does.
//!
//! noisify.c tests every argument that starts with `-` against a list of substrings with `strstr`
//! (so `-readout_noise` and `-readnoise` both hit `-readout`/`-readnoi`, `-psf_fwhm` hits `-psf_fw`),
//! and every test runs (one argument may set two things, as the C's independent `if`s do). The
//! port keeps that matching but, unlike the C, refuses an argument that matches nothing, and a flag
//! that is missing its value (the C silently ignores both).
//!
//! The matching itself ([`parse_strstr`], driven by a table of [`StrstrFlag`]s) is shared with
//! nonbragg's command line, which nonBragg.c matches the same way.

use crate::apps::noisify::{NoisifyConfig, PsfType};
use crate::{Error, Result};
use crate::base::c::rng::c_negated_seed;

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

/// A flag's number, strictly: the whole word a finite number. The C's `atof` reads "abc" as 0 and
/// "nan" as NaN, which then poison the image or hang the noise; the port refuses them (the driver,
/// [`parse_strstr`], names the flag).
pub(crate) fn number(s: &str) -> Result<f64> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        Ok(_) => Err(Error::flag("", format!("{s}: not a finite number"))),
        Err(_) => Err(Error::flag("", format!("{s}: not a number"))),
    }
}

/// A flag's integer, strictly (the C's `atoi` reads "1e9" as 1 and "abc" as 0).
pub(crate) fn integer(s: &str) -> Result<i32> {
    s.trim().parse::<i32>().map_err(|_| Error::flag("", format!("{s}: not an integer (at most {})", i32::MAX)))
}

fn f(s: &str) -> Result<f64> {
    number(s)
}

/// A flag's number that must not be negative, refused as simulate refuses it (`-fluence: must not be
/// negative (got -1)`; the driver, [`parse_strstr`], names the flag).
pub(crate) fn not_below_zero(s: &str) -> Result<f64> {
    let x = number(s)?;
    if x >= 0.0 {
        Ok(x)
    } else {
        Err(Error::flag("", crate::cli::flags::not_negative(s.trim())))
    }
}

/// A flag's number that must be greater than 0, refused as simulate refuses it (`-pixel: must be
/// greater than 0 (got 0)`; the driver, [`parse_strstr`], names the flag).
pub(crate) fn greater_than_zero(s: &str) -> Result<f64> {
    let x = number(s)?;
    if x > 0.0 {
        Ok(x)
    } else {
        Err(Error::flag("", crate::cli::flags::not_positive(s.trim())))
    }
}

/// One flag of a C program that matches its arguments with `strstr` (noisify.c, nonBragg.c).
pub(crate) struct StrstrFlag<C: 'static> {
    /// Selected by an argument that contains one of these (the C's `strstr(argv[i], "…")`).
    pub has: &'static [&'static str],
    /// Or that is one of these (the C's `strstr` plus a length test, or its `strcmp`).
    pub is: &'static [&'static str],
    /// How many of the following arguments it reads.
    pub values: usize,
    /// Its effect: the configuration, the flag as typed, its values.
    pub set: fn(&mut C, &str, &[String]) -> Result<()>,
}

/// A C program's command line: its flag table and what its refusals say.
pub(crate) struct StrstrLine<C: 'static> {
    /// The subcommand's name, for the refusals.
    pub program: &'static str,
    pub usage: &'static str,
    pub flags: &'static [StrstrFlag<C>],
    /// The refusal of a flag that lacks its values, given how many it needs.
    pub needs: fn(usize) -> String,
    /// An argument taken whole, before any flag test (noisify.c: one that names `floatimage.bin`).
    pub claim: fn(&mut C, &str) -> bool,
}

/// `args` without a last `-curved_det` (any argument containing it): nearBragg.c (line 293) and
/// nonBragg.c test `-curved_det` only with an argument after it, so given last it is ignored; said
/// on stderr, as simulate says it.
pub(crate) fn drop_trailing_curved_det<'a>(args: &'a [String], program: &str) -> &'a [String] {
    match args.split_last() {
        Some((last, rest)) if last.starts_with('-') && last.contains("-curved_det") => {
            crate::base::log::warn(format!("WARNING: {last} is ignored as the last word of the command line (as {program} does)"));
            rest
        }
        _ => args,
    }
}

/// Apply `args` to `c` as the C's `main` does: every flag of the table whose test the argument
/// passes takes effect, in the table's order; the arguments after a flag are its values (a value
/// that starts with `-` is tested as a flag too, as the C does, but may match nothing). A word that
/// is no flag's value, and an argument that starts with `-`, matches nothing and is no value, are
/// refused.
pub(crate) fn parse_strstr<C>(line: &StrstrLine<C>, args: &[String], c: &mut C) -> Result<()> {
    // number of following arguments that are values of the previous flag
    let mut values_left = 0usize;
    for (i, a) in args.iter().enumerate() {
        let a = a.as_str();
        if (line.claim)(c, a) {
            values_left = values_left.saturating_sub(1);
            continue;
        }
        if !a.starts_with('-') {
            if values_left == 0 {
                return Err(Error::flag(a, format!("unexpected word ({} flags start with '-'; {})", line.program, line.usage)));
            }
            values_left -= 1;
            continue;
        }
        let is_value = values_left > 0;
        values_left = values_left.saturating_sub(1);
        // the most values any matching flag reads; None: no flag matched
        let mut nvals: Option<usize> = None;
        for flag in line.flags {
            if !flag.is.contains(&a) && !flag.has.iter().any(|p| a.contains(p)) {
                continue;
            }
            let vals = args.get(i + 1..i + 1 + flag.values).ok_or_else(|| Error::flag(a, (line.needs)(flag.values)))?;
            // a value's own error (empty flag) is named after the flag as typed
            (flag.set)(c, a, vals).map_err(|e| match e {
                Error::Flag { flag, reason } if flag.is_empty() => Error::flag(a, reason),
                e => e,
            })?;
            nvals = Some(nvals.unwrap_or(0).max(flag.values));
        }
        match nvals {
            Some(n) => values_left = n,
            None if !is_value => {
                let known: Vec<&'static str> = line.flags.iter().flat_map(|f| f.is.iter().chain(f.has)).copied().collect();
                let hint = crate::cli::parse::suggest_among(a, &known).map(|s| format!("; did you mean {s}?")).unwrap_or_default();
                return Err(Error::flag(a, format!("unknown {} flag{hint} ({})", line.program, line.usage)));
            }
            None => {}
        }
    }
    Ok(())
}

/// Flag list for the usage message and the error for a stray argument.
pub const NOISIFY_USAGE: &str = "usage: noisify -floatfile floatimage.bin [-scale -gain -readout_noise -flicker -calibration -calib_seed -seed -adc -bits 16|32 -psf gauss|fiber -psf_fwhm um -psf_radius px -header file.img -Xbeam mm -Ybeam mm -distance mm -detsize mm -detpixels n -detpixels_x n -detpixels_y n -pixel mm -lambda A -fluence -intfile -noisefile -pgmfile -nonoise -nopgm -phi -osc] [--png preview.png]";

type N = NoisifyConfig;

/// A flag of noisify.c that reads one value.
const fn one(has: &'static [&'static str], set: fn(&mut N, &str, &[String]) -> Result<()>) -> StrstrFlag<N> {
    StrstrFlag { has, is: &[], values: 1, set }
}

/// noisify.c `-psf gauss|fiber`.
fn set_psf(c: &mut N, a: &str, v: &[String]) -> Result<()> {
    let v = v[0].as_str();
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
    Ok(())
}

/// noisify.c `-bits 16|32`.
fn set_bits(c: &mut N, a: &str, v: &[String]) -> Result<()> {
    c.intimage_bits = integer(&v[0])?;
    if c.intimage_bits != 16 && c.intimage_bits != 32 {
        // the C then writes headers and data for neither width
        return Err(Error::flag(a, format!("{} bits: only 16 or 32 are supported", c.intimage_bits)));
    }
    Ok(())
}

/// noisify.c's flags, in the order its `main` tests them.
#[rustfmt::skip]
static NOISIFY_FLAGS: &[StrstrFlag<N>] = &[
    // -lambda, -distance and -pixel only go into the header noisify writes; noisify.c writes any value
    // (WAVELENGTH=0, PIXEL_SIZE=-0.1, DISTANCE=0), and a zero pixel makes its PSF width infinite
    one(&["-lambda"], |c, _, v| { c.lambda = greater_than_zero(&v[0])?; Ok(()) }),
    one(&["-Xbeam"], |c, _, v| { c.xbeam = f(&v[0])? / 1000.0; Ok(()) }),
    one(&["-Ybeam"], |c, _, v| { c.ybeam = f(&v[0])? / 1000.0; Ok(()) }),
    // not 0, but negative as -header's DISTANCE may be (a detector swung past 90°: noisify.c's ValueOf
    // finds CLOSE_DISTANCE, negative in nanoBragg.c's own header); the same rule as nonbragg's
    one(&["-distance"], |c, a, v| { c.distance = f(&v[0])? / 1000.0; crate::run::limits::check_distance(a, c.distance) }),
    StrstrFlag { has: &[], is: &["-detsize"], values: 1, set: |c, _, v| { c.detsize_x = f(&v[0])? / 1000.0; c.detsize_y = c.detsize_x; Ok(()) } },
    one(&["-detsize_x"], |c, _, v| { c.detsize_x = f(&v[0])? / 1000.0; Ok(()) }),
    one(&["-detsize_y"], |c, _, v| { c.detsize_y = f(&v[0])? / 1000.0; Ok(()) }),
    StrstrFlag { has: &[], is: &["-detpixels"], values: 1, set: |c, _, v| { c.xpixels = integer(&v[0])?; c.ypixels = c.xpixels; Ok(()) } },
    one(&["-detpixels_x"], |c, _, v| { c.xpixels = integer(&v[0])?; Ok(()) }),
    one(&["-detpixels_y"], |c, _, v| { c.ypixels = integer(&v[0])?; Ok(()) }),
    one(&["-pixel"], |c, _, v| { c.pixel = greater_than_zero(&v[0])? / 1000.0; Ok(()) }),
    StrstrFlag { has: &[], is: &["-psf"], values: 1, set: set_psf },
    // `psf_radius = atof(...)`: double to int truncation
    one(&["-psf_rad"], |c, _, v| { c.psf_radius = f(&v[0])? as i32; Ok(()) }),
    one(&["-psf_si", "-psf_fw", "-psf_wi"], |c, _, v| { c.psf_fwhm = (f(&v[0])? / 1e6) as f32; Ok(()) }),
    one(&["-fluence"], |c, _, v| { c.fluence = f(&v[0])?; Ok(()) }),
    one(&["-floatfile", "-floatimage", "-bin"], |c, _, v| { c.floatfile = Some(v[0].clone()); Ok(()) }),
    one(&["-header"], |c, _, v| { c.headerfile = Some(v[0].clone()); Ok(()) }),
    one(&["-pgmfile", "-pgmimage"], |c, _, v| { c.pgmfile = v[0].clone(); Ok(()) }),
    one(&["-intfile", "-intimage"], |c, _, v| { c.intfile = v[0].clone(); Ok(()) }),
    one(&["-bits"], set_bits),
    one(&["-noisefile", "-noiseimage"], |c, _, v| { c.noisefile = v[0].clone(); Ok(()) }),
    StrstrFlag { has: &["-nonoise"], is: &[], values: 0, set: |c, _, _| { c.calculate_noise = false; Ok(()) } },
    StrstrFlag { has: &["-nopgm"], is: &[], values: 0, set: |c, _, _| { c.write_pgm = false; Ok(()) } },
    one(&["-readout", "-readnoi"], |c, _, v| { c.readout_noise = f(&v[0])?; Ok(()) }),
    one(&["-flicker"], |c, _, v| { c.flicker_noise = f(&v[0])?; Ok(()) }),
    one(&["-calibration"], |c, _, v| { c.calibration_noise = f(&v[0])?; Ok(()) }),
    one(&["-scale"], |c, _, v| { c.photon_scale = f(&v[0])?; Ok(()) }),
    one(&["-seed"], |c, _, v| { c.seed = Some(c_negated_seed(integer(&v[0])? as i64)); Ok(()) }),
    one(&["-calib_seed"], |c, _, v| { c.calib_seed = c_negated_seed(integer(&v[0])? as i64); Ok(()) }),
    // read and unused by noisify.c
    one(&["-badpix_seed", "-hotpix_seed"], |_, _, _| Ok(())),
    one(&["-adc"], |c, _, v| { c.adc_offset = f(&v[0])?; Ok(()) }),
    one(&["-gain"], |c, _, v| { c.quantum_gain = f(&v[0])?; Ok(()) }),
    one(&["-phi"], |c, _, v| { c.phi0 = f(&v[0])?; Ok(()) }),
    StrstrFlag { has: &[], is: &["--png", "-pngfile"], values: 1, set: |c, _, v| { c.png = Some(v[0].clone()); Ok(()) } },
    one(&["-osc"], |c, _, v| { c.osc = f(&v[0])?; Ok(()) }),
];

static NOISIFY_LINE: StrstrLine<N> = StrstrLine {
    program: "noisify",
    usage: NOISIFY_USAGE,
    flags: NOISIFY_FLAGS,
    needs: |_| "needs a value".into(),
    claim: |c, a| {
        let hit = a.contains("floatimage.bin");
        if hit {
            c.floatfile = Some(a.to_string());
        }
        hit
    },
};

/// Parse noisify.c's arguments; an input image (`-floatfile`) is required.
pub fn parse_noisify_args(args: &[String]) -> Result<NoisifyConfig> {
    let mut c = NoisifyConfig::default();
    parse_strstr(&NOISIFY_LINE, args, &mut c)?;
    if c.floatfile.is_none() {
        return Err(Error::flag("-floatfile", format!("no input image given ({NOISIFY_USAGE})")));
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
        // the C's -atoi in int: -2147483648 stays negative
        let c = p("-bin x.bin -seed -2147483648 -calib_seed -2147483648").unwrap();
        assert_eq!((c.seed, c.calib_seed), (Some(-2147483648), -2147483648));
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(p("-floatfile a.bin -bogus 3").is_err());
        // a typo is offered the flag it is closest to (noisify.c ignores it; the usage alone was given)
        let e = p("-floatfil a.bin").unwrap_err().to_string();
        assert!(e.contains("unknown noisify flag; did you mean -floatfile?"), "{e}");
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
