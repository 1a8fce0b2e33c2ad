//! `nonbragg`: the diffuse scattering of an amorphous sample (water, air, solvent) from a table of
//! sin(θ)/λ vs F, as nonBragg.c renders it: for every pixel, sub-pixel and source, the scattering
//! vector's sin(θ)/λ is looked up in the table by 4-point (cubic) interpolation, squared, times
//! polarization and solid angle, then scaled by r_e², fluence and the number of molecules.
//!
//! Rows are rendered in parallel (each pixel's sum keeps the C's order, so the float image is the
//! C's); statistics, the integer/PGM conversions and the Poisson noise stream follow the C's serial
//! order, so the SMV, PGM and noise files are byte-identical.
//!
//! Differences from nonBragg.c (each a C bug):
//! * the PGM file holds `pixels` bytes (the C writes `2*pixels` bytes, half of them read past the
//!   end of its buffer) and `-nopgm` is honoured (the C parses it but writes the PGM anyway);
//! * the mean is divided by the number of pixels (the C's counter starts uninitialised).
//!
//! Kept because the golden files depend on it: the rmsd that sets the PGM scale is taken over the
//! float image shifted by one pixel (the C's `++j` before use, reading the zero after the end).

use crate::base::c::printf::cf;
use crate::cli::nonbragg::{NonBraggConfig, Pivot};
use crate::io::atomic::write_atomic;
use crate::experiment::physics::{polarization_factor, polint};
use crate::base::c::rng::NrRandom;
use crate::base::vec3::{cross, dot, magnitude, rotate, rotate_axis, unitize, V3};
use crate::{Error, Result};
use rayon::prelude::*;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use crate::base::consts::{AVOGADRO, R_E_SQR, RTD};

/// The step-count rules nonBragg.c applies to divergence and dispersion (same code for both).
fn auto_steps(range: &mut f64, step: &mut f64, steps: &mut i32, full_default: f64) {
    if *steps <= 0 {
        if *range < 0.0 {
            if *step <= 0.0 {
                *steps = 1;
                *range = 0.0;
                *step = 0.0;
            } else {
                *range = *step;
                *steps = 2;
            }
        } else if *step <= 0.0 {
            *step = *range;
            *steps = 2;
        } else {
            *steps = (*range / *step).ceil() as i32;
        }
    } else if *range < 0.0 {
        if *step <= 0.0 {
            *range = full_default;
            *step = *range / *steps as f64;
        } else {
            *range = *step;
            *steps = 2;
        }
    } else if *step <= 0.0 {
        if *steps <= 1 {
            *steps = 2;
        }
        *step = *range / (*steps - 1) as f64;
    }
}

/// The stol table with the C's two guard points at each end (`stols` = lines + 4).
pub struct StolTable {
    pub stol: Vec<f64>,
    pub f: Vec<f64>,
}

/// Read a `stol F` table as nonBragg.c does, scaling stol by `mult` (1e10 for `-stol`).
pub fn read_stol_table(path: &Path, mult: f64) -> Result<StolTable> {
    let cols = crate::io::text::read_text_file(path, 2)?;
    let n = cols[0].len();
    if n == 0 {
        return Err(Error::file(path, "-stol: no data in input file"));
    }
    let stols = n + 4;
    let mut stol = vec![0.0; stols];
    let mut f = vec![0.0; stols];
    let mut f_high = f64::NAN;
    let mut f_low = f64::NAN;
    // the C copies downwards: for(i=stols-3;i>1;--i) value i comes from line i-2
    for i in (2..=stols - 3).rev() {
        stol[i] = cols[0][i - 2] * mult;
        f[i] = cols[1][i - 2];
        if !f[i].is_nan() {
            f_low = f[i];
            if f_high.is_nan() {
                f_high = f[i];
            }
        } else {
            f[i] = 0.0;
        }
    }
    stol[0] = -1e99;
    stol[1] = -1e98;
    f[0] = f_low;
    f[1] = f_low;
    stol[stols - 2] = 1e98;
    stol[stols - 1] = 1e99;
    f[stols - 1] = f_high;
    f[stols - 2] = f_high;
    Ok(StolTable { stol, f })
}

impl StolTable {
    /// The C's search for `nearest` from a previous position, then `polint` on the 4 points around.
    #[inline]
    pub fn interpolate(&self, stol: f64, nearest: &mut usize) -> f64 {
        let n = self.stol.len();
        while *nearest < n && stol > self.stol[*nearest] {
            *nearest += 1;
        }
        while stol < self.stol[(*nearest).min(n - 1)] && *nearest >= 2 {
            *nearest -= 1;
        }
        let k = (*nearest).clamp(1, n - 3);
        let xa = [self.stol[k - 1], self.stol[k], self.stol[k + 1], self.stol[k + 2]];
        let ya = [self.f[k - 1], self.f[k], self.f[k + 1], self.f[k + 2]];
        polint(&xa, &ya, stol)
    }
}

fn smv_header(c: &NonBraggConfig, g: &Geom) -> Vec<u8> {
    let mut s = String::from("{\nHEADER_BYTES=512;\nDIM=2;\nBYTE_ORDER=little_endian;\nTYPE=unsigned_short;\n");
    let _ = write!(
        s,
        "SIZE1={};\nSIZE2={};\nPIXEL_SIZE={};\nDISTANCE={};\n",
        g.fpixels,
        g.spixels,
        cf("%g", c.pixel * 1000.0),
        cf("%g", g.distance * 1000.0)
    );
    let _ = write!(s, "WAVELENGTH={};\n", cf("%g", c.lambda0 * 1e10));
    let _ = write!(s, "BEAM_CENTER_X={};\nBEAM_CENTER_Y={};\n", cf("%g", g.xbeam * 1000.0), cf("%g", (g.detsize_y - g.ybeam) * 1000.0));
    let _ = write!(s, "ORGX={};\nORGY={};\n", cf("%g", g.xclose / c.pixel), cf("%g", g.yclose / c.pixel));
    let _ = write!(s, "CLOSE_DISTANCE={};\n", cf("%g", g.close_distance * 1000.0));
    let _ = write!(s, "PHI={};\nOSC_START={};\nOSC_RANGE={};\n", cf("%g", c.phi0 * RTD), cf("%g", c.phi0 * RTD), cf("%g", g.osc * RTD));
    let _ = write!(s, "TWOTHETA={};\n", cf("%g", c.twotheta * RTD));
    s += "DETECTOR_SN=000;\nBEAMLINE=fake;\n}\x0c";
    let mut b = s.into_bytes();
    while b.len() < 512 {
        b.push(b' ');
    }
    b
}

struct Geom {
    fpixels: i64,
    spixels: i64,
    detsize_y: f64,
    distance: f64,
    close_distance: f64,
    xbeam: f64,
    ybeam: f64,
    xclose: f64,
    yclose: f64,
    osc: f64,
}

/// Run nonBragg.c: render, print its report to `out`, write its files.
pub fn run(c: &NonBraggConfig, out: &mut dyn Write) -> Result<()> {
    let mut s = String::new();
    s += "nonBragg amorphous material diffraction simulator - James Holton and Ken Frankel 3-19-16\n";
    let Some(stolfile) = c.stolfile.clone() else {
        return Err(Error::flag("-stol", format!("no stol table given ({})", crate::cli::nonbragg::NONBRAGG_USAGE)));
    };
    let pixel = c.pixel;
    let (mut detsize_x, mut detsize_y) = (c.detsize_x, c.detsize_y);
    if c.fpixels != 0 {
        detsize_x = pixel * c.fpixels as f64;
    }
    if c.spixels != 0 {
        detsize_y = pixel * c.spixels as f64;
    }
    let fpixels = (detsize_x / pixel).ceil() as i64;
    let spixels = (detsize_y / pixel).ceil() as i64;
    if fpixels <= 0 || spixels <= 0 || fpixels * spixels > (1i64 << 34) {
        return Err(Error::flag("-detsize", format!("{fpixels}x{spixels} pixels is not a detector")));
    }
    let pixels = (fpixels * spixels) as usize;
    let (mut xclose, mut yclose) = (c.xclose, c.yclose);
    if !c.orgx.is_nan() {
        xclose = c.orgx * pixel;
    }
    if !c.orgy.is_nan() {
        yclose = c.orgy * pixel;
    }
    if xclose.is_nan() {
        xclose = (detsize_x - pixel) / 2.0;
    }
    if yclose.is_nan() {
        yclose = (detsize_y + pixel) / 2.0;
    }
    let mut xbeam = if c.xbeam.is_nan() { xclose } else { c.xbeam };
    let mut ybeam = if c.ybeam.is_nan() { yclose } else { c.ybeam };
    let mut roi = c.roi.map(|v| v as i64);
    if roi[0] < 0 {
        roi[0] = 0;
    }
    if roi[1] < 0 {
        roi[1] = fpixels;
    }
    if roi[2] < 0 {
        roi[2] = 0;
    }
    if roi[3] < 0 {
        roi[3] = spixels;
    }
    let progress_pixels = (roi[1] - roi[0] + 1) * (roi[3] - roi[2] + 1);

    let mut fluence = c.fluence;
    if c.flux != 0.0 && c.exposure > 0.0 && c.beamsize >= 0.0 {
        fluence = c.flux * c.exposure / c.beamsize / c.beamsize;
    }
    let (sample_x, mut sample_y, mut sample_z) = (c.sample_x, c.sample_y, c.sample_z);
    if c.beamsize >= 0.0 {
        if c.beamsize < sample_y {
            let _ = writeln!(s, "WARNING: clipping sample ({} m high) with beam ({} m)", cf("%lg", sample_y), cf("%lg", c.beamsize));
            sample_y = c.beamsize;
        }
        if c.beamsize < sample_z {
            let _ = writeln!(s, "WARNING: clipping sample ({} m wide) with beam ({} m)", cf("%lg", sample_z), cf("%lg", c.beamsize));
            sample_z = c.beamsize;
        }
    }
    let volume = sample_x * sample_y * sample_z;
    let mut density = c.density;
    if c.molecules != 0.0 {
        density = c.molecules / volume / AVOGADRO * c.molecular_weight;
    }
    let molecules = volume * density * AVOGADRO / c.molecular_weight;

    let beam = unitize(&c.beam).0;
    let mut fdet = unitize(&c.fdet).0;
    let mut sdet = unitize(&c.sdet).0;
    let mut odet = unitize(&cross(&fdet, &sdet)).0;
    let polar_vector = unitize(&c.polar_vector).0;
    let vert_vector = unitize(&cross(&beam, &polar_vector)).0;

    // phi sampling only decides the header's OSC_RANGE
    let mut osc = c.osc;
    {
        let (phistep, phisteps) = (c.phistep, c.phisteps);
        if phisteps < 0 {
            if osc < 0.0 {
                if phistep <= 0.0 {
                    osc = 0.0;
                } else {
                    osc = phistep;
                }
            }
        } else if osc < 0.0 {
            if phistep <= 0.0 {
                osc = 1.0 / RTD;
            } else {
                osc = phistep;
            }
        }
    }
    let (mut hdivrange, mut hdivstep, mut hdivsteps) = (c.hdivrange, c.hdivstep, c.hdivsteps);
    let (mut vdivrange, mut vdivstep, mut vdivsteps) = (c.vdivrange, c.vdivstep, c.vdivsteps);
    let (mut dispersion, mut dispstep, mut dispsteps) = (c.dispersion, -1.0f64, c.dispsteps);
    auto_steps(&mut hdivrange, &mut hdivstep, &mut hdivsteps, 1.0);
    auto_steps(&mut vdivrange, &mut vdivstep, &mut vdivsteps, 1.0);
    auto_steps(&mut dispersion, &mut dispstep, &mut dispsteps, 1.0);
    if hdivrange <= 0.0 || hdivstep <= 0.0 || hdivsteps <= 0 {
        hdivsteps = 1;
        hdivrange = 0.0;
        hdivstep = 0.0;
    }
    if vdivrange <= 0.0 || vdivstep <= 0.0 || vdivsteps <= 0 {
        vdivsteps = 1;
        vdivrange = 0.0;
        vdivstep = 0.0;
    }
    if dispersion <= 0.0 || dispstep <= 0.0 || dispsteps <= 0 {
        dispsteps = 1;
        dispersion = 0.0;
        dispstep = 0.0;
    }

    // detector origin (nonBragg.c's two pivots)
    let vector = rotate(&odet, c.rotx, c.roty, c.rotz);
    let mut ratio = dot(&beam, &vector);
    if ratio == 0.0 {
        ratio = f64::MIN_POSITIVE;
    }
    let mut close_distance = c.close_distance;
    if close_distance.is_nan() {
        close_distance = ratio * c.distance;
    }
    let mut pix0: V3 = c.pix0.unwrap_or([0.0; 3]);
    if c.pivot == Pivot::Sample {
        s += "pivoting detector around sample\n";
        for k in 0..3 {
            pix0[k] = -xclose * fdet[k] - yclose * sdet[k] + close_distance * odet[k];
        }
        pix0 = rotate(&pix0, c.rotx, c.roty, c.rotz);
        pix0 = rotate_axis(&pix0, &c.twotheta_axis, c.twotheta);
    }
    fdet = rotate(&fdet, c.rotx, c.roty, c.rotz);
    sdet = rotate(&sdet, c.rotx, c.roty, c.rotz);
    odet = rotate(&odet, c.rotx, c.roty, c.rotz);
    fdet = rotate_axis(&fdet, &c.twotheta_axis, c.twotheta);
    sdet = rotate_axis(&sdet, &c.twotheta_axis, c.twotheta);
    odet = rotate_axis(&odet, &c.twotheta_axis, c.twotheta);
    let mut distance = close_distance / ratio;
    if c.pivot == Pivot::Beam {
        s += "pivoting detector around direct beam spot\n";
        for k in 0..3 {
            pix0[k] = -xbeam * fdet[k] - ybeam * sdet[k] + distance * beam[k];
        }
    }
    xclose = -dot(&pix0, &fdet);
    yclose = -dot(&pix0, &sdet);
    close_distance = dot(&pix0, &odet);
    let mut nv = [0.0; 3];
    for k in 0..3 {
        nv[k] = close_distance / ratio * beam[k] - pix0[k];
    }
    xbeam = dot(&fdet, &nv);
    ybeam = dot(&sdet, &nv);
    distance = close_distance / ratio;

    let _ = writeln!(s, "reading {stolfile}");
    out.write_all(s.as_bytes()).map_err(ioerr)?;
    s.clear();
    let table = read_stol_table(Path::new(&stolfile), c.stol_file_mult)?;
    let stols = table.stol.len();

    // sources
    let mut src: Vec<(V3, f64, f64)> = Vec::new(); // position, intensity, lambda
    let mut divsteps = 0;
    if let Some(sf) = &c.sourcefile {
        let cols = crate::io::text::read_text_file(Path::new(sf), 5)?;
        if cols[0].is_empty() {
            return Err(Error::file(sf, "-sourcefile: no sources in file"));
        }
        for i in 0..cols[0].len() {
            let d = |v: f64, def: f64| if v.is_nan() { def } else { v };
            src.push((
                [
                    d(cols[0][i], -c.source_distance * beam[0]),
                    d(cols[1][i], -c.source_distance * beam[1]),
                    d(cols[2][i], -c.source_distance * beam[2]),
                ],
                d(cols[3][i], 1.0),
                d(cols[4][i], c.lambda0),
            ));
        }
    } else {
        let keep = |hdiv: f64, vdiv: f64| -> bool {
            let mut test = (hdiv * hdiv - hdivstep * hdivstep / 4.0 * (1 - hdivsteps % 2) as f64) / hdivrange / hdivrange;
            test += (vdiv * vdiv - vdivstep * vdivstep / 4.0 * (1 - vdivsteps % 2) as f64) / vdivrange / vdivrange;
            !(c.round_div && test * 4.0 > 1.1)
        };
        // the divergence points the round-divergence rule keeps, and the wavelengths: listed (in the
        // C's order: every divergence line, then every wavelength line), then combined into sources
        let kept: Vec<(f64, f64)> = (0..hdivsteps)
            .flat_map(|h| (0..vdivsteps).map(move |v| (hdivstep * h as f64 - hdivrange / 2.0, vdivstep * v as f64 - vdivrange / 2.0)))
            .filter(|&(hdiv, vdiv)| keep(hdiv, vdiv))
            .collect();
        let lambdas: Vec<f64> = (0..dispsteps).map(|d| c.lambda0 * (1.0 + dispstep * d as f64 - dispersion / 2.0)).collect();
        for (hdiv, vdiv) in &kept {
            divsteps += 1;
            let _ = writeln!(s, "divergence deviation: {} {}", cf("%g", *hdiv), cf("%g", *vdiv));
        }
        for (d, lambda) in lambdas.iter().enumerate() {
            let _ = writeln!(s, "lambda{} = {}", d, cf("%.15g", *lambda));
        }
        for &(hdiv, vdiv) in &kept {
            let vector = [-c.source_distance * beam[0], -c.source_distance * beam[1], -c.source_distance * beam[2]];
            let nv = rotate_axis(&vector, &polar_vector, vdiv);
            let vector = rotate_axis(&nv, &vert_vector, hdiv);
            for &lambda in &lambdas {
                src.push((vector, 1.0, lambda));
            }
        }
    }
    let _ = writeln!(s, "  created a total of {} sources:", src.len());
    for (p, i, l) in &src {
        let _ = writeln!(s, "{} {} {}   {} {}", cf("%g", p[0]), cf("%g", p[1]), cf("%g", p[2]), cf("%g", *i), cf("%g", *l));
    }
    let oversample = if c.oversample <= 0 { 1 } else { c.oversample as i64 };
    let steps = src.len() as i64 * oversample * oversample;
    let subpixel_size = pixel / oversample as f64;
    let _ = writeln!(s, "  {} initialized F points (will cubic-spline interpolate between them)", stols);
    let _ = writeln!(s, "  wave={} meters +/- {}% in {} steps", cf("%g", c.lambda0), cf("%g", dispersion * 100.0), dispsteps);
    if c.nopolar {
        s += "  polarization effect disabled\n";
    } else {
        let _ = writeln!(s, "  Kahn polarization factor: {}", cf("%f", c.polarization));
    }
    if c.curved {
        s += "  curved detector: all pixels same distance from origin\n";
    }
    if c.point_pixel {
        s += "  pixel obliquity effect disabled\n";
    }
    if c.fmap {
        s += "  Fmap mode: plotting structure factor at every pixel\n";
    }
    let _ = writeln!(s, "  incident fluence: {} photons/m^2", cf("%lg", fluence));
    let _ = writeln!(
        s,
        "  sample is {} m thick x {} m high x {} m wide, {} g/cm^3 and {} g/mol ({} molecules)",
        cf("%lg", sample_x),
        cf("%lg", sample_y),
        cf("%lg", sample_z),
        cf("%lg", density / 1e6),
        cf("%lg", c.molecular_weight),
        cf("%lg", molecules)
    );
    let _ = writeln!(
        s,
        "  distance={} detsize={}x{}  pixel={} meters ({}x{} pixels)",
        cf("%g", distance),
        cf("%g", detsize_x),
        cf("%g", detsize_y),
        cf("%g", pixel),
        fpixels,
        spixels
    );
    let _ = writeln!(s, "  Xbeam={} Ybeam={}", cf("%g", xbeam), cf("%g", ybeam));
    let v3 = |v: &V3| format!("{} {} {}", cf("%g", v[0]), cf("%g", v[1]), cf("%g", v[2]));
    let _ = writeln!(s, "  detector origin: {}", v3(&pix0));
    let _ = writeln!(s, "  DIRECTION_OF_DETECTOR_X-AXIS= {}", v3(&fdet));
    let _ = writeln!(s, "  DIRECTION_OF_DETECTOR_Y-AXIS= {}", v3(&sdet));
    let _ = writeln!(s, "  INCIDENT_BEAM_DIRECTION= {}", v3(&beam));
    let _ = writeln!(s, "  POLARIZATION_PLANE_NORMAL= {}", v3(&polar_vector));
    let _ = writeln!(s, "  roi: {} < x < {} && {} < y < {}", roi[0], roi[1], roi[2], roi[3]);
    let _ = writeln!(s, "  hdivrange={} hdivstep={}  radians", cf("%g", hdivrange), cf("%g", hdivstep));
    let _ = writeln!(s, "  vdivrange={} vdivstep={}  radians", cf("%g", vdivrange), cf("%g", vdivstep));
    let _ = writeln!(s, "  {} divergence steps", divsteps);
    let _ = writeln!(s, "  {} sources", src.len());
    let _ = writeln!(s, "  {} pixel oversample steps", oversample);
    let mut seed: i64 = c.seed.unwrap_or_else(|| {
        -(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0))
    });
    if c.calculate_noise {
        let _ = writeln!(s, "\n  noise image paramters:\n  seed: {}", seed);
    }
    out.write_all(s.as_bytes()).map_err(ioerr)?;
    s.clear();

    // render: rows in parallel, each pixel's sum in the C's order
    let in_roi = |f: i64, sp: i64| !(f < roi[0] || f > roi[1] || sp < roi[2] || sp > roi[3]);
    let scale = R_E_SQR * fluence * molecules;
    let fp = fpixels as usize;
    let mut floatimage = vec![0.0f32; pixels];
    // per row: (omega sum in raster order is summed per row, then rows in order), and the last
    // sub-pixel position of each pixel for the max_I report
    let row_info: Vec<(f64, Vec<(f64, f64)>)> = floatimage
        .par_chunks_mut(fp)
        .enumerate()
        .map(|(spixel, row)| {
            let spixel = spixel as i64;
            let mut last_pos = vec![(0.0, 0.0); fp];
            let mut nearest = 0usize;
            for fpixel in 0..fpixels {
                if !in_roi(fpixel, spixel) {
                    continue;
                }
                let mut ibg = 0.0f64;
                let mut fbg = 0.0f64;
                let (mut fdet_mm, mut sdet_mm) = (0.0, 0.0);
                for sub_s in 0..oversample {
                    for sub_f in 0..oversample {
                        fdet_mm = subpixel_size * (fpixel * oversample + sub_f) as f64 + subpixel_size / 2.0;
                        sdet_mm = subpixel_size * (spixel * oversample + sub_s) as f64 + subpixel_size / 2.0;
                        let odet_mm = 0.0f64;
                        let mut pos = [0.0; 3];
                        for k in 0..3 {
                            pos[k] = fdet_mm * fdet[k] + sdet_mm * sdet[k] + odet_mm * odet[k] + pix0[k];
                        }
                        if c.curved {
                            let vector = [distance * beam[0], distance * beam[1], distance * beam[2]];
                            let nv = rotate_axis(&vector, &sdet, pos[1] / distance);
                            pos = rotate_axis(&nv, &fdet, pos[2] / distance);
                        }
                        let (mut diffracted, airpath) = unitize(&pos);
                        let mut omega = pixel * pixel / airpath / airpath * close_distance / airpath;
                        if c.point_pixel {
                            omega = 1.0 / airpath / airpath;
                        }
                        let capture_fraction = 1.0;
                        for (p, si, lambda) in &src {
                            let inc = [-p[0], -p[1], -p[2]];
                            let (incident, _) = unitize(&inc);
                            let mut scattering = [0.0; 3];
                            for k in 0..3 {
                                scattering[k] = (diffracted[k] - incident[k]) / lambda;
                            }
                            let stol = 0.5 * magnitude(&scattering);
                            fbg = table.interpolate(stol, &mut nearest);
                            let sign = if fbg < 0.0 { -1.0f32 } else { 1.0f32 } as f64;
                            let polar = if !c.nopolar {
                                let (pf, d) = polarization_factor(c.polarization, &incident, &diffracted, &polar_vector);
                                diffracted = d;
                                pf
                            } else {
                                1.0
                            };
                            ibg += sign * fbg * fbg * polar * omega * si * capture_fraction;
                        }
                    }
                }
                let f = fpixel as usize;
                row[f] = (ibg * scale / steps as f64) as f32;
                if c.fmap {
                    row[f] = fbg as f32;
                }
                last_pos[f] = (fdet_mm, sdet_mm);
            }
            (0.0, last_pos)
        })
        .collect();
    // omega sum in the C's order (re-evaluated serially: cheap compared with the render)
    let mut omega_sum = 0.0f64;
    for spixel in 0..spixels {
        for fpixel in 0..fpixels {
            if !in_roi(fpixel, spixel) {
                continue;
            }
            for sub_s in 0..oversample {
                for sub_f in 0..oversample {
                    let fdet_mm = subpixel_size * (fpixel * oversample + sub_f) as f64 + subpixel_size / 2.0;
                    let sdet_mm = subpixel_size * (spixel * oversample + sub_s) as f64 + subpixel_size / 2.0;
                    let mut pos = [0.0; 3];
                    for k in 0..3 {
                        pos[k] = fdet_mm * fdet[k] + sdet_mm * sdet[k] + 0.0 * odet[k] + pix0[k];
                    }
                    if c.curved {
                        let vector = [distance * beam[0], distance * beam[1], distance * beam[2]];
                        let nv = rotate_axis(&vector, &sdet, pos[1] / distance);
                        pos = rotate_axis(&nv, &fdet, pos[2] / distance);
                    }
                    let airpath = magnitude(&pos);
                    let omega = if c.point_pixel { 1.0 / airpath / airpath } else { pixel * pixel / airpath / airpath * close_distance / airpath };
                    omega_sum += omega;
                }
            }
        }
    }
    // statistics in raster order
    let (mut max_i, mut max_x, mut max_y) = (0.0f64, 0.0f64, 0.0f64);
    let (mut sum, mut sumsqr, mut n) = (0.0f64, 0.0f64, 0i64);
    let mut progress_pixel: i64 = 0;
    for spixel in 0..spixels {
        for fpixel in 0..fpixels {
            if !in_roi(fpixel, spixel) {
                continue;
            }
            let j = (spixel * fpixels + fpixel) as usize;
            let v = floatimage[j] as f64;
            if v > max_i {
                max_i = v;
                let (x, y) = row_info[spixel as usize].1[fpixel as usize];
                max_x = x;
                max_y = y;
            }
            sum += v;
            sumsqr += v * v;
            n += 1;
            if c.progress && progress_pixels / 100 > 0 {
                let pp = progress_pixels;
                if progress_pixel % (pp / 20) == 0 || ((10 * progress_pixel < pp || 10 * progress_pixel > 9 * pp) && progress_pixel % (pp / 100) == 0) {
                    let _ = writeln!(s, "{}% done", progress_pixel * 100 / pp);
                }
            }
            progress_pixel += 1;
        }
    }
    s += "\n";
    let _ = writeln!(
        s,
        "solid angle subtended by detector = {} steradian ( {}% sphere)",
        cf("%g", omega_sum),
        cf("%g", 100.0 * omega_sum / 4.0 / std::f64::consts::PI)
    );
    if n <= 0 {
        n = 1;
    }
    let avg = sum / n as f64;
    if n <= 1 {
        n = 2;
    }
    let rms = (sumsqr / (n - 1) as f64).sqrt();
    // the C's rmsd loop reads floatimage[j] one pixel ahead (`++j` first; index `pixels` is 0)
    let mut sumsqr2 = 0.0f64;
    let mut n2 = 0i64;
    let mut j = 0usize;
    for spixel in 0..spixels {
        for fpixel in 0..fpixels {
            j += 1;
            if !in_roi(fpixel, spixel) {
                continue;
            }
            let v = if j < pixels { floatimage[j] as f64 } else { 0.0 };
            let t = v - avg;
            sumsqr2 += t * t;
            n2 += 1;
        }
    }
    if n2 <= 1 {
        n2 = 2;
    }
    let rmsd = (sumsqr2 / (n2 - 1) as f64).sqrt();

    let _ = writeln!(s, "writing {} as {} 4-byte floats", c.floatfile, pixels);
    out.write_all(s.as_bytes()).map_err(ioerr)?;
    s.clear();
    let mut fb = Vec::with_capacity(pixels * 4);
    for v in &floatimage {
        fb.extend_from_slice(&v.to_le_bytes());
    }
    write_atomic(Path::new(&c.floatfile), &fb)?;
    drop(fb);

    let _ = writeln!(s, "max_I = {}  at {} {}", cf("%g", max_i), cf("%g", max_x), cf("%g", max_y));
    let _ = writeln!(s, "mean= {} rms= {} rmsd= {}", cf("%g", avg), cf("%g", rms), cf("%g", rmsd));
    let mut intfile_scale = c.intfile_scale;
    if intfile_scale <= 0.0 {
        intfile_scale = 1.0;
        if max_i > 0.0 {
            intfile_scale = 55000.0 / max_i;
        }
    }
    let _ = writeln!(s, "intfile_scale = {}", cf("%g", intfile_scale));
    let geom = Geom { fpixels, spixels, detsize_y, distance, close_distance, xbeam, ybeam, xclose, yclose, osc };
    let header = smv_header(c, &geom);
    let mut intimage = vec![0u16; pixels];
    intimage.par_chunks_mut(fp).enumerate().for_each(|(sp, row)| {
        for (f, o) in row.iter_mut().enumerate() {
            if !in_roi(f as i64, sp as i64) {
                continue;
            }
            let mut test = floatimage[sp * fp + f] as f64 * intfile_scale + c.adc;
            if test > 65535.0 {
                test = 65535.0;
            }
            if test < 0.0 {
                test = 0.0;
            }
            *o = ((test + 0.5) as f32).floor() as u16;
        }
    });
    let _ = writeln!(s, "writing {} as 2-byte integers", c.intfile);
    out.write_all(s.as_bytes()).map_err(ioerr)?;
    s.clear();
    write_atomic(Path::new(&c.intfile), &smv_bytes(&header, &intimage))?;

    let mut pgm_scale = c.pgm_scale;
    if pgm_scale <= 0.0 {
        pgm_scale = intfile_scale;
        if rmsd > 0.0 {
            pgm_scale = 250.0 / (5.0 * rmsd);
        }
    }
    let _ = writeln!(s, "pgm_scale = {}", cf("%g", pgm_scale));
    if c.write_pgm {
        let mut pgm = format!("P5\n{} {}\n# pixels scaled by {}\n255\n", fpixels, spixels, cf("%lg", pgm_scale)).into_bytes();
        let base = pgm.len();
        pgm.resize(base + pixels, 0);
        for sp in 0..spixels {
            for f in 0..fpixels {
                if !in_roi(f, sp) {
                    continue;
                }
                let j = (sp * fpixels + f) as usize;
                let mut test = floatimage[j] as f64 * pgm_scale;
                if test > 255.0 {
                    test = 255.0;
                }
                pgm[base + j] = (test as i32) as u8;
            }
        }
        let _ = writeln!(s, "writing {} as 1-byte integers", c.pgmfile);
        out.write_all(s.as_bytes()).map_err(ioerr)?;
        s.clear();
        write_atomic(Path::new(&c.pgmfile), &pgm)?;
    }
    if !c.calculate_noise {
        out.write_all(s.as_bytes()).map_err(ioerr)?;
        return Ok(());
    }
    let mut rng = NrRandom::new();
    let mut noise = vec![0u16; pixels];
    let (mut psum, mut overloads) = (0.0f64, 0i64);
    for sp in 0..spixels {
        for f in 0..fpixels {
            if !in_roi(f, sp) {
                continue;
            }
            let j = (sp * fpixels + f) as usize;
            let mut test = rng.poidev(floatimage[j], &mut seed) as f64;
            psum += test;
            test += c.adc;
            if test > 65535.0 {
                test = 65535.0;
                overloads += 1;
            }
            noise[j] = (test as i32) as u16;
        }
    }
    let _ = writeln!(s, "{} photons on noise image ({} overloads)", cf("%.0f", psum), overloads);
    let _ = writeln!(s, "writing {} as 2-byte integers", c.noisefile);
    out.write_all(s.as_bytes()).map_err(ioerr)?;
    write_atomic(Path::new(&c.noisefile), &smv_bytes(&header, &noise))?;
    Ok(())
}

fn smv_bytes(header: &[u8], data: &[u16]) -> Vec<u8> {
    let mut b = Vec::with_capacity(header.len() + data.len() * 2);
    b.extend_from_slice(header);
    for v in data {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

fn ioerr(e: std::io::Error) -> Error {
    Error::setup(format!("writing stdout: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 4-point interpolation reproduces a cubic exactly (independent of the C).
    #[test]
    fn stol_interpolation_is_exact_for_a_cubic() {
        let xs: Vec<f64> = (0..20).map(|i| i as f64 * 0.05).collect();
        let text: String = xs.iter().map(|x| format!("{x} {}\n", 1.0 + 2.0 * x - x * x * x)).collect();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.stol");
        std::fs::write(&p, text).unwrap();
        let t = read_stol_table(&p, 1.0).unwrap();
        let mut nearest = 0;
        for &x in &[0.12, 0.37, 0.5, 0.81] {
            let y = t.interpolate(x, &mut nearest);
            assert!((y - (1.0 + 2.0 * x - x * x * x)).abs() < 1e-12, "{x}: {y}");
        }
    }
}
