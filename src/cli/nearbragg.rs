//! Command line of `nanobragg-rs nearbragg`: nearBragg.c's flags (its lines 149-405), matched as its
//! `main` does (`strstr` on every argument that starts with `-`, every test applied, so e.g.
//! `-printout_pixel` also turns on `-printout`, and `-source_dist` is enough for `-source_distance`).
//! Unlike the C, an argument that matches nothing, a flag missing its values, and a value that is not
//! a finite number (an integer where the C calls `atoi`) are refused, exit 9.

use crate::apps::nearbragg::{NearBraggConfig, RTD};
use crate::cli::noisify::{parse_strstr, StrstrFlag, StrstrLine};
use crate::{Error, Result};

pub const NEARBRAGG_USAGE: &str = "usage: nearbragg -file atom_list.txt [-distance mm -detsize mm -detpixels n -pixel mm -Xbeam mm -Ybeam mm -twotheta deg -lambda A -energy eV -dispersion % -dispsteps n -divergence mrad -divsteps n -hdivrange -vdivrange -hdivstep -vdivstep -hdivsteps -vdivsteps -detsize_x -detsize_y -detpixels_x -detpixels_y -fdet_vector -sdet_vector -odet_vector -pix0_vector -spindle_axis -point_pixel -curved_det -oversample n -roi xmin xmax ymin ymax -fluence -source_distance mm|far -source_depth A -depthsteps n -floatfile -sinfile -cosfile -intfile -scale -coherent -accumulate -phi deg -noprogress -printout -printout_pixel x y -debug --threads n]";

type C = NearBraggConfig;
type Set = fn(&mut C, &str, &[String]) -> Result<()>;

/// Value `k` of flag `a`: a finite number (the C's `atof`, without its silent 0).
fn n(a: &str, v: &[String], k: usize) -> Result<f64> {
    let s = v[k].trim();
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        Ok(_) => Err(Error::flag(a, format!("'{s}' is not a finite number"))),
        Err(_) => Err(Error::flag(a, format!("'{s}' is not a number"))),
    }
}

/// Value `k` of flag `a`, in mm, as metres.
fn mm(a: &str, v: &[String], k: usize) -> Result<f64> {
    Ok(n(a, v, k)? / 1000.0)
}

/// Value `k` of flag `a`: an integer (the C's `atoi`).
fn int(a: &str, v: &[String], k: usize) -> Result<i32> {
    let s = v[k].trim();
    s.parse::<i32>().map_err(|_| Error::flag(a, format!("'{s}' is not an integer")))
}

fn v3(a: &str, v: &[String]) -> Result<[f64; 3]> {
    Ok([n(a, v, 0)?, n(a, v, 1)?, n(a, v, 2)?])
}

/// A flag selected by a substring, reading `values` values.
const fn has(has: &'static [&'static str], values: usize, set: Set) -> StrstrFlag<C> {
    StrstrFlag { has, is: &[], values, set }
}

/// A flag selected only as a whole argument (the C's `strstr` with a length test), reading one value.
const fn is(is: &'static [&'static str], set: Set) -> StrstrFlag<C> {
    StrstrFlag { has: &[], is, values: 1, set }
}

/// `-source_distance mm|far` (lines 250-259): the word `far` exactly (the C's `strstr` also took
/// `farx` or `1far` as far), else a number of mm.
fn source_distance(c: &mut C, a: &str, v: &[String]) -> Result<()> {
    if v[0] == "far" {
        (c.far_source, c.source_distance, c.source_depth) = (true, 0.0, 0.0);
    } else {
        c.source_distance = mm(a, v, 0)?;
    }
    Ok(())
}

/// nearBragg.c's flags, in the order its `main` tests them (lines 155-403).
#[rustfmt::skip]
static NEARBRAGG_FLAGS: &[StrstrFlag<C>] = &[
    // read, then overwritten by the count of the file's lines (lines 155-158, 458)
    has(&["-atoms"], 1, |_, a, v| { int(a, v, 0).map(drop) }),
    has(&["-Xbeam"], 1, |c, a, v| { c.xbeam = mm(a, v, 0)?; Ok(()) }),
    has(&["-Ybeam"], 1, |c, a, v| { c.ybeam = mm(a, v, 0)?; Ok(()) }),
    has(&["-fdet_vector"], 3, |c, a, v| { c.fdet = v3(a, v)?; Ok(()) }),
    has(&["-sdet_vector"], 3, |c, a, v| { c.sdet = v3(a, v)?; Ok(()) }),
    has(&["-odet_vector"], 3, |c, a, v| { c.odet = v3(a, v)?; Ok(()) }),
    // parsed, unused by the C's loop
    has(&["-beam_vector"], 3, |c, a, v| { c.beam = v3(a, v)?; Ok(()) }),
    has(&["-polar_vector"], 3, |c, a, v| { c.polar_vector = v3(a, v)?; Ok(()) }),
    has(&["-spindle_axis"], 3, |c, a, v| { c.spindle = v3(a, v)?; Ok(()) }),
    // in metres, as the C reads it (no mm conversion, line 205)
    has(&["-pix0_vector"], 3, |c, a, v| { c.pix0 = Some(v3(a, v)?); Ok(()) }),
    has(&["-divergence"], 1, |c, a, v| { c.hdivrange = mm(a, v, 0)?; c.vdivrange = c.hdivrange; Ok(()) }),
    has(&["-hdivrange"], 1, |c, a, v| { c.hdivrange = mm(a, v, 0)?; Ok(()) }),
    has(&["-vdivrange"], 1, |c, a, v| { c.vdivrange = mm(a, v, 0)?; Ok(()) }),
    is(&["-hdivstep"], |c, a, v| { c.hdivstep = mm(a, v, 0)?; Ok(()) }),
    has(&["-hdivsteps"], 1, |c, a, v| { c.hdivsteps = int(a, v, 0)?; Ok(()) }),
    is(&["-vdivstep"], |c, a, v| { c.vdivstep = mm(a, v, 0)?; Ok(()) }),
    has(&["-vdivsteps"], 1, |c, a, v| { c.vdivsteps = int(a, v, 0)?; Ok(()) }),
    has(&["-divsteps"], 1, |c, a, v| { c.hdivsteps = int(a, v, 0)?; c.vdivsteps = c.hdivsteps; Ok(()) }),
    has(&["-distance"], 1, |c, a, v| { c.distance = mm(a, v, 0)?; Ok(()) }),
    has(&["-twotheta"], 1, |c, a, v| { c.twotheta = n(a, v, 0)? / RTD; Ok(()) }),
    has(&["-source_dist"], 1, source_distance),
    has(&["-source_depth"], 1, |c, a, v| { c.source_depth = n(a, v, 0)? * 1e-10; Ok(()) }),
    has(&["-depthsteps"], 1, |c, a, v| { c.depthsteps = int(a, v, 0)?; Ok(()) }),
    is(&["-detsize"], |c, a, v| { c.detsize_x = mm(a, v, 0)?; c.detsize_y = c.detsize_x; Ok(()) }),
    has(&["-detsize_x"], 1, |c, a, v| { c.detsize_x = mm(a, v, 0)?; Ok(()) }),
    has(&["-detsize_y"], 1, |c, a, v| { c.detsize_y = mm(a, v, 0)?; Ok(()) }),
    is(&["-detpixels"], |c, a, v| { c.xpixels = int(a, v, 0)?; c.ypixels = c.xpixels; Ok(()) }),
    has(&["-detpixels_x"], 1, |c, a, v| { c.xpixels = int(a, v, 0)?; Ok(()) }),
    has(&["-detpixels_y"], 1, |c, a, v| { c.ypixels = int(a, v, 0)?; Ok(()) }),
    // the C requires a following argument but does not read it: that argument is taken as its value
    // (a following flag still counts as a flag); as the last argument it is ignored, as in the C
    has(&["-curved_det"], 1, |c, _, _| { c.curved = true; Ok(()) }),
    has(&["-pixel"], 1, |c, a, v| { c.pixel = mm(a, v, 0)?; Ok(()) }),
    has(&["-point_pixel"], 0, |c, _, _| { c.point_pixel = true; Ok(()) }),
    has(&["-nopolar"], 0, |c, _, _| { c.nopolar = true; Ok(()) }),
    has(&["-oversample"], 1, |c, a, v| { c.oversample = int(a, v, 0)?; Ok(()) }),
    has(&["-roi"], 4, |c, a, v| {
        for k in 0..4 { c.roi[k] = int(a, v, k)?; }
        Ok(())
    }),
    has(&["-lambda", "-wave"], 1, |c, a, v| { c.lambda0 = n(a, v, 0)? / 1.0e10; Ok(()) }),
    has(&["-energy"], 1, |c, a, v| { c.lambda0 = (12398.42 / n(a, v, 0)?) / 1.0e10; Ok(()) }),
    // not negative, as simulate's (negative pixels)
    has(&["-fluence"], 1, |c, a, v| {
        c.fluence = n(a, v, 0)?;
        if c.fluence < 0.0 { return Err(Error::flag(a, crate::cli::flags::not_negative(v[0].trim()))); }
        Ok(())
    }),
    has(&["-dispersion"], 1, |c, a, v| { c.dispersion = n(a, v, 0)? / 100.0; Ok(()) }),
    has(&["-dispsteps"], 1, |c, a, v| { c.dispsteps = int(a, v, 0)?; Ok(()) }),
    is(&["-phi"], |c, a, v| { c.phi0 = n(a, v, 0)? / RTD; Ok(()) }),
    has(&["-file"], 1, |c, _, v| { c.file = Some(v[0].clone()); Ok(()) }),
    has(&["-floatfile"], 1, |c, _, v| { c.floatfile = v[0].clone(); Ok(()) }),
    has(&["-sinfile"], 1, |c, _, v| { c.sinfile = v[0].clone(); Ok(()) }),
    has(&["-cosfile"], 1, |c, _, v| { c.cosfile = v[0].clone(); Ok(()) }),
    has(&["-intfile"], 1, |c, _, v| { c.intfile = v[0].clone(); Ok(()) }),
    has(&["-scale"], 1, |c, a, v| { c.intfile_scale = n(a, v, 0)?; Ok(()) }),
    has(&["-coherent"], 0, |c, _, _| { c.coherent = true; Ok(()) }),
    has(&["-printout"], 0, |c, _, _| { c.printout = true; Ok(()) }),
    has(&["-noprogress"], 0, |c, _, _| { c.progress = false; Ok(()) }),
    has(&["-progress"], 0, |c, _, _| { c.progress = true; Ok(()) }),
    has(&["-debug"], 0, |c, _, _| { c.debug = true; Ok(()) }),
    has(&["-printout_pixel"], 2, |c, a, v| { c.printout_pixel = Some((int(a, v, 0)?, int(a, v, 1)?)); Ok(()) }),
    has(&["-accumulate"], 0, |c, _, _| { c.accumulate = true; Ok(()) }),
    // not in the C: the pixel loop's threads (the images do not depend on it)
    is(&["--threads"], |c, a, v| {
        let t = int(a, v, 0)?;
        if t < 1 { return Err(Error::flag(a, "needs a positive number of threads")); }
        c.threads = t as usize;
        Ok(())
    }),
];

static NEARBRAGG_LINE: StrstrLine<C> = StrstrLine {
    program: "nearbragg",
    usage: NEARBRAGG_USAGE,
    flags: NEARBRAGG_FLAGS,
    needs: |n| format!("needs {n} value(s)"),
    claim: |_, _| false,
};

/// Parse nearBragg.c's arguments; an atom list (`-file`) is required.
pub fn parse_nearbragg_args(args: &[String]) -> Result<NearBraggConfig> {
    let mut c = NearBraggConfig::default();
    let args = crate::cli::noisify::drop_trailing_curved_det(args, "nearBragg.c");
    parse_strstr(&NEARBRAGG_LINE, args, &mut c)?;
    if c.file.is_none() {
        return Err(Error::flag("-file", format!("no atom list given ({NEARBRAGG_USAGE})")));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<NearBraggConfig> {
        parse_nearbragg_args(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn strstr_matching_as_the_c() {
        let c = p("-file a.txt -detpixels 64 -hdivstep 0.5 -hdivsteps 3 -source_dist 500 -printout_pixel 3 4 -noprogress -curved_det -energy 12398.42").unwrap();
        assert!(p("-file a.txt -curved_det 1").unwrap().curved);
        assert_eq!(c.file.as_deref(), Some("a.txt"));
        assert_eq!((c.xpixels, c.ypixels), (64, 64));
        assert_eq!((c.hdivstep, c.hdivsteps), (0.5e-3, 3));
        assert_eq!(c.source_distance, 0.5);
        assert!(c.printout && !c.progress && c.curved);
        assert_eq!(c.printout_pixel, Some((3, 4)));
        assert_eq!(c.lambda0, 1e-10);
        let c = p("-file a.txt -source_distance far -curved_det").unwrap();
        assert!(c.far_source && !c.curved);
        assert_eq!(p("-file a.txt -Xbeam -5").unwrap().xbeam, -0.005);
    }

    #[test]
    fn bad_input_is_refused() {
        assert_eq!(p("-file a -source_distance farx").unwrap_err().to_string(), "-source_distance: 'farx' is not a number");
        assert!(p("-file a -source_dist 1far").is_err());
        for s in ["-file a -bogus 3", "-file a stray", "-file a -roi 1 2 3", "-file a -lambda abc", "-file a -lambda nan", "-file a -detpixels 1.5", "-distance 100", "-file a -distance inf", "-file a --threads 0"] {
            assert!(p(s).is_err(), "{s}");
        }
    }
}
