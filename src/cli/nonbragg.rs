//! Command line of `nanobragg-rs nonbragg`: nonBragg.c's flags, matched as nonBragg.c's `main` does
//! (`strstr` on every argument that starts with `-`, every test applied, so e.g. `-twotheta_axis`
//! also sets `-twotheta` as in the C). Unlike the C, an argument that matches nothing, or a flag
//! missing its values, is refused.

use crate::cli::noisify::atoi;
use crate::io::text::atof;
use crate::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pivot {
    Sample,
    Beam,
}

/// Everything nonBragg.c reads from its command line (SI units, radians), with its defaults.
#[derive(Clone, Debug)]
pub struct NonBraggConfig {
    pub sample_x: f64,
    pub sample_y: f64,
    pub sample_z: f64,
    pub density: f64,
    pub molecules: f64,
    pub molecular_weight: f64,
    pub xbeam: f64,
    pub ybeam: f64,
    pub xclose: f64,
    pub yclose: f64,
    pub orgx: f64,
    pub orgy: f64,
    pub pivot: Pivot,
    pub fdet: [f64; 3],
    pub sdet: [f64; 3],
    pub odet: [f64; 3],
    pub beam: [f64; 3],
    pub polar_vector: [f64; 3],
    pub spindle: [f64; 3],
    pub twotheta_axis: [f64; 3],
    pub pix0: Option<[f64; 3]>,
    pub distance: f64,
    pub close_distance: f64,
    pub source_distance: f64,
    pub twotheta: f64,
    pub rotx: f64,
    pub roty: f64,
    pub rotz: f64,
    pub detsize_x: f64,
    pub detsize_y: f64,
    pub fpixels: i32,
    pub spixels: i32,
    pub curved: bool,
    pub pixel: f64,
    pub point_pixel: bool,
    pub fmap: bool,
    pub polarization: f64,
    pub nopolar: bool,
    pub oversample: i32,
    pub roi: [i32; 4],
    pub lambda0: f64,
    pub fluence: f64,
    pub flux: f64,
    pub exposure: f64,
    pub beamsize: f64,
    pub dispersion: f64,
    pub dispsteps: i32,
    pub hdivrange: f64,
    pub vdivrange: f64,
    pub hdivstep: f64,
    pub vdivstep: f64,
    pub hdivsteps: i32,
    pub vdivsteps: i32,
    pub round_div: bool,
    pub adc: f64,
    pub gain: f64,
    pub phi0: f64,
    pub osc: f64,
    pub phistep: f64,
    pub phisteps: i32,
    pub stolfile: Option<String>,
    pub stol_file_mult: f64,
    pub sourcefile: Option<String>,
    pub floatfile: String,
    pub intfile: String,
    pub pgmfile: String,
    pub noisefile: String,
    pub calculate_noise: bool,
    pub write_pgm: bool,
    pub intfile_scale: f64,
    pub pgm_scale: f64,
    pub progress: bool,
    pub seed: Option<i64>,
}

impl Default for NonBraggConfig {
    fn default() -> Self {
        NonBraggConfig {
            sample_x: 1e-4,
            sample_y: 1e-4,
            sample_z: 1e-4,
            density: 1.0e6,
            molecules: 0.0,
            molecular_weight: 18.0,
            xbeam: f64::NAN,
            ybeam: f64::NAN,
            xclose: f64::NAN,
            yclose: f64::NAN,
            orgx: f64::NAN,
            orgy: f64::NAN,
            pivot: Pivot::Beam,
            fdet: [0.0, 0.0, 1.0],
            sdet: [0.0, -1.0, 0.0],
            odet: [1.0, 0.0, 0.0],
            beam: [1.0, 0.0, 0.0],
            polar_vector: [0.0, 0.0, 1.0],
            spindle: [0.0, 0.0, 1.0],
            twotheta_axis: [0.0, 1.0, 0.0],
            pix0: None,
            distance: 100.0e-3,
            close_distance: f64::NAN,
            source_distance: 10.0,
            twotheta: 0.0,
            rotx: 0.0,
            roty: 0.0,
            rotz: 0.0,
            detsize_x: 102.4e-3,
            detsize_y: 102.4e-3,
            fpixels: 0,
            spixels: 0,
            curved: false,
            pixel: 0.1e-3,
            point_pixel: false,
            fmap: false,
            polarization: 0.0,
            nopolar: false,
            oversample: -1,
            roi: [-1; 4],
            lambda0: 1.0e-10,
            fluence: 125932015286227086360700780544.0,
            flux: 0.0,
            exposure: 1.0,
            beamsize: 1e-4,
            dispersion: 0.0,
            dispsteps: -1,
            hdivrange: -1.0,
            vdivrange: -1.0,
            hdivstep: -1.0,
            vdivstep: -1.0,
            hdivsteps: -1,
            vdivsteps: -1,
            round_div: true,
            adc: 40.0,
            gain: 1.0,
            phi0: 0.0,
            osc: -1.0,
            phistep: -1.0,
            phisteps: -1,
            stolfile: None,
            stol_file_mult: 1.0e10,
            sourcefile: None,
            floatfile: "floatimage.bin".into(),
            intfile: "intimage.img".into(),
            pgmfile: "image.pgm".into(),
            noisefile: "noiseimage.img".into(),
            calculate_noise: true,
            write_pgm: true,
            intfile_scale: 0.0,
            pgm_scale: 0.0,
            progress: true,
            seed: None,
        }
    }
}

use crate::base::consts::RTD;

pub const NONBRAGG_USAGE: &str = "usage: nonbragg -stol water.stol [-thickness mm -samplesize mm -density g/cm3 -MW g/mol -molecules n -lambda A -energy eV -dispersion % -dispsteps n -hdivrange mrad -vdivrange mrad -hdivstep mrad -vdivstep mrad -divergence mrad -sourcefile f -distance mm -detsize mm -detpixels n -pixel mm -Xbeam -Ybeam -oversample n -fluence -flux -exposure -beamsize mm -floatfile -intfile -pgmfile -noisefile -nonoise -seed n -noprogress ...]";

/// Parse nonBragg.c's arguments.
pub fn parse_nonbragg_args(args: &[String]) -> Result<NonBraggConfig> {
    let mut c = NonBraggConfig::default();
    // number of following arguments that are values of the previous flag
    let mut values_left = 0usize;
    for i in 0..args.len() {
        let a = args[i].as_str();
        if !a.starts_with('-') {
            if values_left == 0 {
                return Err(Error::flag(a, format!("unexpected word (nonbragg flags start with '-'; {NONBRAGG_USAGE})")));
            }
            values_left -= 1;
            continue;
        }
        let is_value = values_left > 0;
        values_left = values_left.saturating_sub(1);
        let has = |p: &str| a.contains(p);
        let mut matched = false;
        let mut nvals = 0usize;
        // fetch `n` values after the flag (the C's `argc > i+n` test)
        let vals = |n: usize| -> Result<&[String]> {
            args.get(i + 1..i + 1 + n).ok_or_else(|| Error::flag(a, format!("needs {n} value(s)")))
        };
        let v = |k: usize| -> f64 { atof(args[i + k].as_bytes()) };
        macro_rules! take {
            ($n:expr) => {{
                vals($n)?;
                matched = true;
                nvals = nvals.max($n);
            }};
        }
        if has("-img") || has("-stolout") || has("-ignore") {
            return Err(Error::flag(a, "fitting a stol curve to an input image (-img/-stolout/-ignore) is not supported by this port"));
        }
        if has("-samplesize") || has("-sample_size") {
            take!(1);
            let x = v(1) / 1000.0;
            c.sample_x = x;
            c.sample_y = x;
            c.sample_z = x;
        }
        if has("-sample_thick") || has("-sample_x") || has("-thick") {
            take!(1);
            c.sample_x = v(1) / 1000.0;
        }
        if has("-sample_width") || has("-sample_y") || has("-width") {
            take!(1);
            c.sample_y = v(1) / 1000.0;
        }
        if has("-sample_heigh") || has("-sample_z") || has("-heigh") {
            take!(1);
            c.sample_z = v(1) / 1000.0;
        }
        if has("-density") || has("-sample_den") {
            take!(1);
            c.density = v(1) * 1e6;
        }
        if has("-molecules") || has("-sample_molecules") {
            take!(1);
            c.molecules = v(1);
        }
        if a == "-MW" || has("-molecular") {
            take!(1);
            c.molecular_weight = v(1);
        }
        if has("-Xbeam") {
            take!(1);
            c.xbeam = v(1) / 1000.0;
            c.pivot = Pivot::Beam;
        }
        if has("-Ybeam") {
            take!(1);
            c.ybeam = v(1) / 1000.0;
            c.pivot = Pivot::Beam;
        }
        if has("-Xclose") {
            take!(1);
            c.xclose = v(1) / 1000.0;
            c.pivot = Pivot::Sample;
        }
        if has("-Yclose") {
            take!(1);
            c.yclose = v(1) / 1000.0;
            c.pivot = Pivot::Sample;
        }
        if has("-ORGX") {
            take!(1);
            c.orgx = v(1);
            c.pivot = Pivot::Sample;
        }
        if has("-ORGY") {
            take!(1);
            c.orgy = v(1);
            c.pivot = Pivot::Sample;
        }
        if has("-pivot") {
            take!(1);
            if args[i + 1].contains("sample") {
                c.pivot = Pivot::Sample;
            }
            if args[i + 1].contains("beam") {
                c.pivot = Pivot::Beam;
            }
        }
        let vec3 = |name: &str, target: &mut [f64; 3], matched: &mut bool, nvals: &mut usize| -> Result<()> {
            if has(name) {
                vals(3)?;
                *matched = true;
                *nvals = (*nvals).max(3);
                *target = [v(1), v(2), v(3)];
            }
            Ok(())
        };
        vec3("-fdet_vector", &mut c.fdet, &mut matched, &mut nvals)?;
        vec3("-sdet_vector", &mut c.sdet, &mut matched, &mut nvals)?;
        vec3("-odet_vector", &mut c.odet, &mut matched, &mut nvals)?;
        vec3("-beam_vector", &mut c.beam, &mut matched, &mut nvals)?;
        vec3("-polar_vector", &mut c.polar_vector, &mut matched, &mut nvals)?;
        vec3("-spindle_axis", &mut c.spindle, &mut matched, &mut nvals)?;
        vec3("-twotheta_axis", &mut c.twotheta_axis, &mut matched, &mut nvals)?;
        if has("-pix0_vector") {
            take!(3);
            c.pix0 = Some([v(1), v(2), v(3)]);
        }
        if has("-distance") {
            take!(1);
            c.distance = v(1) / 1000.0;
            c.pivot = Pivot::Beam;
        }
        if has("-close_distance") {
            take!(1);
            c.close_distance = v(1) / 1000.0;
            c.pivot = Pivot::Sample;
        }
        if has("-source_distance") {
            take!(1);
            c.source_distance = v(1) / 1000.0;
        }
        if has("-twotheta") {
            take!(1);
            c.twotheta = v(1) / RTD;
            c.pivot = Pivot::Sample;
        }
        if has("-detector_rotx") {
            take!(1);
            c.rotx = v(1) / RTD;
        }
        if has("-detector_roty") {
            take!(1);
            c.roty = v(1) / RTD;
        }
        if has("-detector_rotz") {
            take!(1);
            c.rotz = v(1) / RTD;
        }
        if has("-detsize") && a.len() == 8 {
            take!(1);
            c.detsize_x = v(1) / 1000.0;
            c.detsize_y = v(1) / 1000.0;
        }
        if has("-detsize_x") {
            take!(1);
            c.detsize_x = v(1) / 1000.0;
        }
        if has("-detsize_y") {
            take!(1);
            c.detsize_y = v(1) / 1000.0;
        }
        if has("-detpixels") && a.len() == 10 {
            take!(1);
            c.fpixels = atoi(&args[i + 1]);
            c.spixels = c.fpixels;
        }
        if has("-detpixels_f") || has("-detpixels_x") {
            take!(1);
            c.fpixels = atoi(&args[i + 1]);
        }
        if has("-detpixels_s") || has("-detpixels_y") {
            take!(1);
            c.spixels = atoi(&args[i + 1]);
        }
        if has("-curved_det") {
            // the C requires a following argument but does not read it
            matched = true;
            c.curved = true;
        }
        if has("-pixel") {
            take!(1);
            c.pixel = v(1) / 1000.0;
        }
        if has("-point_pixel") {
            matched = true;
            c.point_pixel = true;
        }
        if has("-Fmap") {
            matched = true;
            c.fmap = true;
        }
        if has("-polar") && a.len() == 6 {
            take!(1);
            c.polarization = v(1);
            c.nopolar = false;
        }
        if has("-nopolar") {
            matched = true;
            c.nopolar = true;
        }
        if has("-oversample") {
            take!(1);
            c.oversample = atoi(&args[i + 1]);
        }
        if has("-roi") {
            take!(4);
            for k in 0..4 {
                c.roi[k] = atoi(&args[i + 1 + k]);
            }
        }
        if has("-lambda") || has("-wave") {
            take!(1);
            c.lambda0 = v(1) / 1.0e10;
        }
        if has("-energy") {
            take!(1);
            c.lambda0 = (12398.42 / v(1)) / 1.0e10;
        }
        if has("-fluence") {
            take!(1);
            c.fluence = v(1);
        }
        if has("-flux") {
            take!(1);
            c.flux = v(1);
        }
        if has("-exposure") {
            take!(1);
            c.exposure = v(1);
        }
        if has("-beamsize") {
            take!(1);
            c.beamsize = v(1) / 1000.0;
        }
        if has("-dispersion") {
            take!(1);
            c.dispersion = v(1) / 100.0;
        }
        if has("-dispsteps") {
            take!(1);
            c.dispsteps = atoi(&args[i + 1]);
        }
        if has("-divergence") {
            take!(1);
            c.hdivrange = v(1) / 1000.0;
            c.vdivrange = c.hdivrange;
        }
        if has("-hdivrange") {
            take!(1);
            c.hdivrange = v(1) / 1000.0;
        }
        if has("-vdivrange") {
            take!(1);
            c.vdivrange = v(1) / 1000.0;
        }
        if has("-hdivstep") && a.len() == 9 {
            take!(1);
            c.hdivstep = v(1) / 1000.0;
        }
        if has("-hdivsteps") {
            take!(1);
            c.hdivsteps = atoi(&args[i + 1]);
        }
        if has("-vdivstep") && a.len() == 9 {
            take!(1);
            c.vdivstep = v(1) / 1000.0;
        }
        if has("-vdivsteps") {
            take!(1);
            c.vdivsteps = atoi(&args[i + 1]);
        }
        if has("-divsteps") {
            take!(1);
            c.hdivsteps = atoi(&args[i + 1]);
            c.vdivsteps = c.hdivsteps;
        }
        if has("-round_div") {
            matched = true;
            c.round_div = true;
        }
        if has("-square_div") {
            matched = true;
            c.round_div = false;
        }
        if has("-adc") {
            take!(1);
            c.adc = v(1);
        }
        if has("-gain") {
            take!(1);
            c.gain = v(1);
        }
        if has("-phi") && a.len() == 4 {
            take!(1);
            c.phi0 = v(1) / RTD;
        }
        if has("-osc") {
            take!(1);
            c.osc = v(1) / RTD;
        }
        if has("-phistep") && a.len() == 8 {
            take!(1);
            c.phistep = v(1) / RTD;
        }
        if has("-phisteps") {
            take!(1);
            c.phisteps = atoi(&args[i + 1]);
        }
        if has("-stol") && a.len() == 5 {
            take!(1);
            c.stolfile = Some(args[i + 1].clone());
            c.stol_file_mult = 1e10;
        }
        if has("-4stol") && a.len() == 6 {
            take!(1);
            c.stolfile = Some(args[i + 1].clone());
            c.stol_file_mult = 1e10 / 4.0;
        }
        if has("-Q") && a.len() == 2 {
            take!(1);
            c.stolfile = Some(args[i + 1].clone());
            c.stol_file_mult = 1e10 / std::f64::consts::PI / 4.0;
        }
        if has("-sourcefile") {
            take!(1);
            c.sourcefile = Some(args[i + 1].clone());
        }
        if has("-floatfile") || has("-floatimage") {
            take!(1);
            c.floatfile = args[i + 1].clone();
        }
        if has("-intfile") || has("-intimage") {
            take!(1);
            c.intfile = args[i + 1].clone();
        }
        if has("-pgmfile") || has("-pgmimage") {
            take!(1);
            c.pgmfile = args[i + 1].clone();
        }
        if has("-noisefile") || has("-noiseimage") {
            take!(1);
            c.noisefile = args[i + 1].clone();
            c.calculate_noise = true;
        }
        if has("-nonoise") {
            matched = true;
            c.calculate_noise = false;
        }
        if has("-nopgm") {
            matched = true;
            c.write_pgm = false;
        }
        if has("-noreject") || has("-coherent") || has("-printout") {
            // no effect on the images (the C's -printout per-pixel dump is not reproduced)
            matched = true;
        }
        if has("-scale") {
            take!(1);
            c.intfile_scale = v(1);
        }
        if has("-pgmscale") {
            take!(1);
            c.pgm_scale = v(1);
        }
        if has("-noprogress") {
            matched = true;
            c.progress = false;
        }
        if has("-progress") {
            matched = true;
            c.progress = true;
        }
        if has("-printout_pixel") {
            take!(2);
        }
        if has("-seed") {
            take!(1);
            c.seed = Some(-(atoi(&args[i + 1]) as i64));
        }
        if !matched && !is_value {
            return Err(Error::flag(a, format!("unknown nonbragg flag ({NONBRAGG_USAGE})")));
        }
        if matched {
            values_left = nvals;
        }
    }
    Ok(c)
}
