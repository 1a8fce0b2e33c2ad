//! Command line of `nanobragg-rs nonbragg`: nonBragg.c's flags, matched as nonBragg.c's `main` does
//! (`strstr` on every argument that starts with `-`, every test applied, so e.g. `-twotheta_axis`
//! also sets `-twotheta` as in the C). Unlike the C, an argument that matches nothing, or a flag
//! missing its values, is refused.

use crate::apps::nonbragg::{NonBraggConfig, Pivot};
use crate::base::consts::RTD;
use crate::cli::noisify::{greater_than_zero, integer, not_below_zero, number, parse_strstr, StrstrFlag, StrstrLine};
use crate::{Error, Result};

pub const NONBRAGG_USAGE: &str = "usage: nonbragg -stol water.stol [-thickness mm -samplesize mm -density g/cm3 -MW g/mol -molecules n -lambda A -energy eV -dispersion % -dispsteps n -hdivrange mrad -vdivrange mrad -hdivstep mrad -vdivstep mrad -divergence mrad -sourcefile f -distance mm -detsize mm -detpixels n -pixel mm -Xbeam -Ybeam -oversample n -fluence -flux -exposure -beamsize mm -floatfile -intfile -pgmfile -noisefile -nonoise -seed n -noprogress ...]";

type B = NonBraggConfig;
type Set = fn(&mut B, &str, &[String]) -> Result<()>;

/// Value `k` of a flag: a finite number (see [`number`]).
fn n(v: &[String], k: usize) -> Result<f64> {
    number(&v[k])
}

/// Value `k` of a flag, in mm, as metres.
fn mm(v: &[String], k: usize) -> Result<f64> {
    Ok(n(v, k)? / 1000.0)
}

/// Value `k` of a flag, greater than 0: a sample size, density or molecular weight (the C takes 0 or
/// a negative one and renders an infinite or negative image).
fn positive(v: &[String], k: usize) -> Result<f64> {
    let x = n(v, k)?;
    if x > 0.0 {
        Ok(x)
    } else {
        Err(Error::flag("", format!("{}: must be greater than 0", v[k])))
    }
}

/// [`positive`], in mm, as metres.
fn positive_mm(v: &[String], k: usize) -> Result<f64> {
    Ok(positive(v, k)? / 1000.0)
}

fn v3(v: &[String]) -> Result<[f64; 3]> {
    Ok([n(v, 0)?, n(v, 1)?, n(v, 2)?])
}

/// Note `a` among the flags that sized the detector (all named if the detector is refused: the
/// size comes from several of them, `-detpixels` times `-pixel`).
fn sized(c: &mut B, a: &str) -> Result<()> {
    note_flag(&mut c.size_flag, a);
    Ok(())
}

/// Note `a` among the flags that set the divergence or dispersion (all named if the sources are
/// refused: their number is the product of the steps).
fn stepped(c: &mut B, a: &str) -> Result<()> {
    note_flag(&mut c.steps_flag, a);
    Ok(())
}

/// Add `a` to the flags typed so far (`-detpixels/-pixel`), once each, in the order typed.
fn note_flag(flags: &mut Option<String>, a: &str) {
    *flags = Some(match flags.take() {
        Some(s) if s.split('/').any(|f| f == a) => s,
        Some(s) => format!("{s}/{a}"),
        None => a.to_string(),
    });
}

/// A flag selected by a substring, reading `values` values.
const fn has(has: &'static [&'static str], values: usize, set: Set) -> StrstrFlag<B> {
    StrstrFlag { has, is: &[], values, set }
}

/// A flag selected only as a whole argument (the C's `strstr` with a length test), reading one value.
const fn is(is: &'static [&'static str], set: Set) -> StrstrFlag<B> {
    StrstrFlag { has: &[], is, values: 1, set }
}

/// nonBragg.c's flags, in the order its `main` tests them.
#[rustfmt::skip]
static NONBRAGG_FLAGS: &[StrstrFlag<B>] = &[
    has(&["-img", "-stolout", "-ignore"], 0, |_, a, _| {
        Err(Error::flag(a, "fitting a stol curve to an input image (-img/-stolout/-ignore) is not supported by this port"))
    }),
    // the sample
    has(&["-samplesize", "-sample_size"], 1, |c, _, v| { (c.sample_x, c.sample_y, c.sample_z) = (positive_mm(v, 0)?, positive_mm(v, 0)?, positive_mm(v, 0)?); Ok(()) }),
    has(&["-sample_thick", "-sample_x", "-thick"], 1, |c, _, v| { c.sample_x = positive_mm(v, 0)?; Ok(()) }),
    has(&["-sample_width", "-sample_y", "-width"], 1, |c, _, v| { c.sample_y = positive_mm(v, 0)?; Ok(()) }),
    has(&["-sample_heigh", "-sample_z", "-heigh"], 1, |c, _, v| { c.sample_z = positive_mm(v, 0)?; Ok(()) }),
    has(&["-density", "-sample_den"], 1, |c, _, v| { c.density = positive(v, 0)? * 1e6; Ok(()) }),
    // 0 (the default) takes the molecules from the density
    has(&["-molecules", "-sample_molecules"], 1, |c, _, v| {
        c.molecules = n(v, 0)?;
        if c.molecules < 0.0 { return Err(Error::flag("", format!("{}: must not be negative", v[0]))); }
        Ok(())
    }),
    StrstrFlag { has: &["-molecular"], is: &["-MW"], values: 1, set: |c, _, v| { c.molecular_weight = positive(v, 0)?; Ok(()) } },
    // the detector's position
    has(&["-Xbeam"], 1, |c, _, v| { c.xbeam = mm(v, 0)?; c.pivot = Pivot::Beam; Ok(()) }),
    has(&["-Ybeam"], 1, |c, _, v| { c.ybeam = mm(v, 0)?; c.pivot = Pivot::Beam; Ok(()) }),
    has(&["-Xclose"], 1, |c, _, v| { c.xclose = mm(v, 0)?; c.pivot = Pivot::Sample; Ok(()) }),
    has(&["-Yclose"], 1, |c, _, v| { c.yclose = mm(v, 0)?; c.pivot = Pivot::Sample; Ok(()) }),
    has(&["-ORGX"], 1, |c, _, v| { c.orgx = n(v, 0)?; c.pivot = Pivot::Sample; Ok(()) }),
    has(&["-ORGY"], 1, |c, _, v| { c.orgy = n(v, 0)?; c.pivot = Pivot::Sample; Ok(()) }),
    has(&["-pivot"], 1, |c, _, v| {
        if v[0].contains("sample") { c.pivot = Pivot::Sample; }
        if v[0].contains("beam") { c.pivot = Pivot::Beam; }
        Ok(())
    }),
    has(&["-fdet_vector"], 3, |c, _, v| { c.fdet = v3(v)?; Ok(()) }),
    has(&["-sdet_vector"], 3, |c, _, v| { c.sdet = v3(v)?; Ok(()) }),
    has(&["-odet_vector"], 3, |c, _, v| { c.odet = v3(v)?; Ok(()) }),
    has(&["-beam_vector"], 3, |c, _, v| { c.beam = v3(v)?; Ok(()) }),
    has(&["-polar_vector"], 3, |c, _, v| { c.polar_vector = v3(v)?; Ok(()) }),
    has(&["-spindle_axis"], 3, |c, _, v| { c.spindle = v3(v)?; Ok(()) }),
    has(&["-twotheta_axis"], 3, |c, _, v| { c.twotheta_axis = v3(v)?; Ok(()) }),
    has(&["-pix0_vector"], 3, |c, _, v| { c.pix0 = Some(v3(v)?); Ok(()) }),
    has(&["-distance"], 1, |c, _, v| { c.distance = mm(v, 0)?; c.pivot = Pivot::Beam; Ok(()) }),
    has(&["-close_distance"], 1, |c, _, v| { c.close_distance = mm(v, 0)?; c.pivot = Pivot::Sample; Ok(()) }),
    has(&["-source_distance"], 1, |c, _, v| { c.source_distance = mm(v, 0)?; Ok(()) }),
    has(&["-twotheta"], 1, |c, _, v| { c.twotheta = n(v, 0)? / RTD; c.pivot = Pivot::Sample; Ok(()) }),
    has(&["-detector_rotx"], 1, |c, _, v| { c.rotx = n(v, 0)? / RTD; Ok(()) }),
    has(&["-detector_roty"], 1, |c, _, v| { c.roty = n(v, 0)? / RTD; Ok(()) }),
    has(&["-detector_rotz"], 1, |c, _, v| { c.rotz = n(v, 0)? / RTD; Ok(()) }),
    // the detector's size and pixels
    is(&["-detsize"], |c, a, v| { (c.detsize_x, c.detsize_y) = (mm(v, 0)?, mm(v, 0)?); sized(c, a) }),
    has(&["-detsize_x"], 1, |c, a, v| { c.detsize_x = mm(v, 0)?; sized(c, a) }),
    has(&["-detsize_y"], 1, |c, a, v| { c.detsize_y = mm(v, 0)?; sized(c, a) }),
    is(&["-detpixels"], |c, a, v| { c.fpixels = integer(&v[0])?; c.spixels = c.fpixels; sized(c, a) }),
    has(&["-detpixels_f", "-detpixels_x"], 1, |c, a, v| { c.fpixels = integer(&v[0])?; sized(c, a) }),
    has(&["-detpixels_s", "-detpixels_y"], 1, |c, a, v| { c.spixels = integer(&v[0])?; sized(c, a) }),
    // the C requires a following argument but does not read it: that argument is taken as its value
    // (a following flag still counts as a flag); as the last argument it is ignored, as in the C
    has(&["-curved_det"], 1, |c, _, _| { c.curved = true; Ok(()) }),
    has(&["-pixel"], 1, |c, a, v| { c.pixel = mm(v, 0)?; sized(c, a) }),
    has(&["-point_pixel"], 0, |c, _, _| { c.point_pixel = true; Ok(()) }),
    has(&["-Fmap"], 0, |c, _, _| { c.fmap = true; Ok(()) }),
    is(&["-polar"], |c, _, v| { c.polarization = n(v, 0)?; c.nopolar = false; Ok(()) }),
    has(&["-nopolar"], 0, |c, _, _| { c.nopolar = true; Ok(()) }),
    has(&["-oversample"], 1, |c, _, v| { c.oversample = integer(&v[0])?; Ok(()) }),
    has(&["-roi"], 4, |c, _, v| {
        for k in 0..4 { c.roi[k] = integer(&v[k])?; }
        Ok(())
    }),
    // the beam
    has(&["-lambda", "-wave"], 1, |c, _, v| { c.lambda0 = n(v, 0)? / 1.0e10; Ok(()) }),
    has(&["-energy"], 1, |c, _, v| { c.lambda0 = (12398.42 / n(v, 0)?) / 1.0e10; Ok(()) }),
    // not negative, as simulate's (negative pixels)
    has(&["-fluence"], 1, |c, _, v| { c.fluence = not_below_zero(&v[0])?; Ok(()) }),
    has(&["-flux"], 1, |c, _, v| { c.flux = n(v, 0)?; Ok(()) }),
    has(&["-exposure"], 1, |c, _, v| { c.exposure = n(v, 0)?; Ok(()) }),
    // > 0 as simulate's: 0 made the fluence from -flux infinite (blamed on the sample) and the sample
    // clipped to nothing; a negative one (nonBragg.c: no clipping, no fluence from -flux) is refused
    // as simulate refuses it
    has(&["-beamsize"], 1, |c, _, v| { c.beamsize = greater_than_zero(&v[0])? / 1000.0; Ok(()) }),
    has(&["-dispersion"], 1, |c, a, v| { c.dispersion = n(v, 0)? / 100.0; stepped(c, a) }),
    has(&["-dispsteps"], 1, |c, a, v| { c.dispsteps = integer(&v[0])?; stepped(c, a) }),
    has(&["-divergence"], 1, |c, a, v| { c.hdivrange = mm(v, 0)?; c.vdivrange = c.hdivrange; stepped(c, a) }),
    has(&["-hdivrange"], 1, |c, a, v| { c.hdivrange = mm(v, 0)?; stepped(c, a) }),
    has(&["-vdivrange"], 1, |c, a, v| { c.vdivrange = mm(v, 0)?; stepped(c, a) }),
    is(&["-hdivstep"], |c, a, v| { c.hdivstep = mm(v, 0)?; stepped(c, a) }),
    has(&["-hdivsteps"], 1, |c, a, v| { c.hdivsteps = integer(&v[0])?; stepped(c, a) }),
    is(&["-vdivstep"], |c, a, v| { c.vdivstep = mm(v, 0)?; stepped(c, a) }),
    has(&["-vdivsteps"], 1, |c, a, v| { c.vdivsteps = integer(&v[0])?; stepped(c, a) }),
    has(&["-divsteps"], 1, |c, a, v| { c.hdivsteps = integer(&v[0])?; c.vdivsteps = c.hdivsteps; stepped(c, a) }),
    has(&["-round_div"], 0, |c, _, _| { c.round_div = true; Ok(()) }),
    has(&["-square_div"], 0, |c, _, _| { c.round_div = false; Ok(()) }),
    has(&["-adc"], 1, |c, _, v| { c.adc = n(v, 0)?; Ok(()) }),
    has(&["-gain"], 1, |c, _, v| { c.gain = n(v, 0)?; Ok(()) }),
    // the rotation (only the header's OSC_RANGE)
    is(&["-phi"], |c, _, v| { c.phi0 = n(v, 0)? / RTD; Ok(()) }),
    has(&["-osc"], 1, |c, _, v| { c.osc = n(v, 0)? / RTD; Ok(()) }),
    is(&["-phistep"], |c, _, v| { c.phistep = n(v, 0)? / RTD; Ok(()) }),
    has(&["-phisteps"], 1, |c, _, v| { c.phisteps = integer(&v[0])?; Ok(()) }),
    // files
    is(&["-stol"], |c, _, v| { c.stolfile = Some(v[0].clone()); c.stol_file_mult = 1e10; Ok(()) }),
    is(&["-4stol"], |c, _, v| { c.stolfile = Some(v[0].clone()); c.stol_file_mult = 1e10 / 4.0; Ok(()) }),
    is(&["-Q"], |c, _, v| { c.stolfile = Some(v[0].clone()); c.stol_file_mult = 1e10 / std::f64::consts::PI / 4.0; Ok(()) }),
    has(&["-sourcefile"], 1, |c, _, v| { c.sourcefile = Some(v[0].clone()); Ok(()) }),
    has(&["-floatfile", "-floatimage"], 1, |c, _, v| { c.floatfile = v[0].clone(); Ok(()) }),
    has(&["-intfile", "-intimage"], 1, |c, _, v| { c.intfile = v[0].clone(); Ok(()) }),
    has(&["-pgmfile", "-pgmimage"], 1, |c, _, v| { c.pgmfile = v[0].clone(); Ok(()) }),
    has(&["-noisefile", "-noiseimage"], 1, |c, _, v| { c.noisefile = v[0].clone(); c.calculate_noise = true; Ok(()) }),
    has(&["-nonoise"], 0, |c, _, _| { c.calculate_noise = false; Ok(()) }),
    has(&["-nopgm"], 0, |c, _, _| { c.write_pgm = false; Ok(()) }),
    // no effect on the images (the C's -printout per-pixel dump is not reproduced)
    has(&["-noreject", "-coherent", "-printout"], 0, |_, _, _| Ok(())),
    has(&["-scale"], 1, |c, _, v| { c.intfile_scale = n(v, 0)?; Ok(()) }),
    has(&["-pgmscale"], 1, |c, _, v| { c.pgm_scale = n(v, 0)?; Ok(()) }),
    has(&["-noprogress"], 0, |c, _, _| { c.progress = false; Ok(()) }),
    has(&["-progress"], 0, |c, _, _| { c.progress = true; Ok(()) }),
    has(&["-printout_pixel"], 2, |_, _, _| Ok(())),
    has(&["-seed"], 1, |c, _, v| { c.seed = Some(crate::base::c::rng::c_negated_seed(integer(&v[0])? as i64)); Ok(()) }),
];

static NONBRAGG_LINE: StrstrLine<B> = StrstrLine {
    program: "nonbragg",
    usage: NONBRAGG_USAGE,
    flags: NONBRAGG_FLAGS,
    needs: |n| format!("needs {n} value(s)"),
    claim: |_, _| false,
};

/// Parse nonBragg.c's arguments; a stol table (`-stol`, `-4stol` or `-Q`) is required.
pub fn parse_nonbragg_args(args: &[String]) -> Result<NonBraggConfig> {
    let mut c = NonBraggConfig::default();
    let args = crate::cli::noisify::drop_trailing_curved_det(args, "nonBragg.c");
    parse_strstr(&NONBRAGG_LINE, args, &mut c)?;
    if c.stolfile.is_none() {
        return Err(Error::flag("-stol", format!("no stol table given ({NONBRAGG_USAGE})")));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<NonBraggConfig> {
        parse_nonbragg_args(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn strstr_matching_as_the_c() {
        let c = p("-stol w.stol -twotheta_axis 0 0 1 -detpixels 64 -thickness 2 -roi 1 2 3 4 -hdivstep 0.5 -seed 9 -noprogress").unwrap();
        assert_eq!(c.stolfile.as_deref(), Some("w.stol"));
        // -twotheta_axis also hits -twotheta (with its first value), and pivots on the sample
        assert_eq!(c.twotheta_axis, [0.0, 0.0, 1.0]);
        assert_eq!((c.twotheta, c.pivot), (0.0, Pivot::Sample));
        assert_eq!((c.fpixels, c.spixels), (64, 64));
        assert_eq!(c.sample_x, 2e-3);
        assert_eq!(c.roi, [1, 2, 3, 4]);
        assert_eq!((c.hdivstep, c.hdivsteps), (0.5e-3, -1));
        assert_eq!(c.seed, Some(-9));
        assert_eq!(p("-stol w.stol -seed -2147483648").unwrap().seed, Some(-2147483648));
        assert!(!c.progress);
        // a value that starts with '-' is not refused
        assert_eq!(p("-stol w.stol -adc -5").unwrap().adc, -5.0);
        assert_eq!(p("-Q q.dat").unwrap().stol_file_mult, 1e10 / std::f64::consts::PI / 4.0);
    }

    /// `-curved_det` counts only with an argument after it (a value or a flag), as nonBragg.c tests
    /// it; given last it is ignored (it was applied, and `-curved_det 1` was refused).
    #[test]
    fn curved_det_needs_a_following_argument() {
        assert!(!p("-stol w.stol -noprogress -curved_det").unwrap().curved);
        assert!(p("-stol w.stol -curved_det 1").unwrap().curved);
        let c = p("-stol w.stol -curved_det -noprogress").unwrap();
        assert!(c.curved && !c.progress);
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(p("-stol w.stol -bogus 3").is_err());
        assert!(p("-stol w.stol stray").is_err());
        assert!(p("-stol w.stol -roi 1 2 3").is_err());
        assert!(p("-stol w.stol -img x.img").is_err());
        assert!(p("-distance 100").is_err());
    }

    /// A zero molecular weight gave an infinite image, a negative size or density a negative one.
    #[test]
    fn sample_values_that_make_no_sample_are_refused() {
        for (s, want) in [
            ("-MW 0", "-MW: 0: must be greater than 0"),
            ("-molecular_weight -18", "-molecular_weight: -18: must be greater than 0"),
            ("-thickness -1", "-thickness: -1: must be greater than 0"),
            ("-density -1", "-density: -1: must be greater than 0"),
            ("-density 0", "-density: 0: must be greater than 0"),
            ("-samplesize 0", "-samplesize: 0: must be greater than 0"),
            ("-sample_width -2", "-sample_width: -2: must be greater than 0"),
            ("-height 0", "-height: 0: must be greater than 0"),
            ("-molecules -5", "-molecules: -5: must not be negative"),
        ] {
            assert_eq!(p(&format!("-stol w.stol {s}")).unwrap_err().to_string(), want, "{s}");
        }
        // the golden cases' values, and -molecules 0 (the C's "use the density")
        let c = p("-stol w.stol -thickness 100 -density 0.0012 -MW 29 -molecules 0").unwrap();
        assert_eq!((c.sample_x, c.molecular_weight, c.molecules), (0.1, 29.0, 0.0));
    }

    /// The detector and source refusals name the flags given (`-divsteps` was blamed on `-dispsteps`,
    /// `-detpixels` on `-detsize`, then `-detpixels 100000 -pixel 0.1` on `-pixel` alone): every such
    /// flag is noted as typed, once.
    #[test]
    fn the_flags_that_size_the_run_are_noted() {
        let c = p("-stol w.stol -dispsteps 3 -divsteps 5 -detsize 10 -detpixels 64").unwrap();
        assert_eq!((c.steps_flag.as_deref(), c.size_flag.as_deref()), (Some("-dispsteps/-divsteps"), Some("-detsize/-detpixels")));
        let c = p("-stol w.stol -hdivrange 1 -pixel 0.05").unwrap();
        assert_eq!((c.steps_flag.as_deref(), c.size_flag.as_deref()), (Some("-hdivrange"), Some("-pixel")));
        let c = p("-stol w.stol -detpixels 100000 -pixel 0.1 -detpixels 9").unwrap();
        assert_eq!(c.size_flag.as_deref(), Some("-detpixels/-pixel"));
        let c = p("-stol w.stol").unwrap();
        assert_eq!((c.steps_flag, c.size_flag), (None, None));
    }
}
