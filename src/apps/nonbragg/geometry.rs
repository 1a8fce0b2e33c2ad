//! nonBragg.c's geometry: the beam, the detector's axes and origin (around either pivot), and the
//! sources (a `-sourcefile`, or the divergence and dispersion steps).

use crate::experiment::beam::{check_dispersion, source_problem};
use crate::base::os_text::os_path;
use super::config::{NonBraggConfig, Pivot};
use super::setup::{BeamSteps, DetectorSize};
use crate::base::c::printf::cf;
use crate::base::vec3::{cross, dot, rotate, rotate_axis, unitize, V3};
use crate::{Error, Result};
use std::fmt::Write as _;

/// The beam and the detector, as the pixel loop sees them (metres).
pub(super) struct Geometry {
    pub beam: V3,
    pub polar_vector: V3,
    pub vert_vector: V3,
    pub fdet: V3,
    pub sdet: V3,
    pub odet: V3,
    /// the corner of the first pixel
    pub pix0: V3,
    pub distance: f64,
    pub close_distance: f64,
    pub xbeam: f64,
    pub ybeam: f64,
    pub xclose: f64,
    pub yclose: f64,
}

/// The beam centre and the point of closest approach as given (`-Xbeam`, `-Xclose`, `-ORGX`, …),
/// each defaulting to the other, the point of closest approach to the detector's centre:
/// (xclose, yclose, xbeam, ybeam).
fn given_centres(c: &NonBraggConfig, det: &DetectorSize) -> (f64, f64, f64, f64) {
    let pixel = c.pixel;
    let (mut xclose, mut yclose) = (c.xclose, c.yclose);
    if !c.orgx.is_nan() {
        xclose = c.orgx * pixel;
    }
    if !c.orgy.is_nan() {
        yclose = c.orgy * pixel;
    }
    if xclose.is_nan() {
        xclose = (det.detsize_x - pixel) / 2.0;
    }
    if yclose.is_nan() {
        yclose = (det.detsize_y + pixel) / 2.0;
    }
    let xbeam = if c.xbeam.is_nan() { xclose } else { c.xbeam };
    let ybeam = if c.ybeam.is_nan() { yclose } else { c.ybeam };
    (xclose, yclose, xbeam, ybeam)
}

/// The detector's axes rotated by `-detector_rot*` and `-twotheta`, its origin placed around the
/// sample or the direct-beam spot (the C's messages into `s`), and the beam centre, the point of
/// closest approach and the distances recomputed from them.
pub(super) fn geometry(c: &NonBraggConfig, det: &DetectorSize, s: &mut String) -> Geometry {
    let (xclose, yclose, xbeam, ybeam) = given_centres(c, det);
    let beam = unitize(&c.beam).0;
    let mut fdet = unitize(&c.fdet).0;
    let mut sdet = unitize(&c.sdet).0;
    let mut odet = unitize(&cross(&fdet, &sdet)).0;
    let polar_vector = unitize(&c.polar_vector).0;
    let vert_vector = unitize(&cross(&beam, &polar_vector)).0;

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
        *s += "pivoting detector around sample\n";
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
    let distance = close_distance / ratio;
    if c.pivot == Pivot::Beam {
        *s += "pivoting detector around direct beam spot\n";
        for k in 0..3 {
            pix0[k] = -xbeam * fdet[k] - ybeam * sdet[k] + distance * beam[k];
        }
    }
    let close_distance = dot(&pix0, &odet);
    let mut nv = [0.0; 3];
    for k in 0..3 {
        nv[k] = close_distance / ratio * beam[k] - pix0[k];
    }
    Geometry {
        beam,
        polar_vector,
        vert_vector,
        fdet,
        sdet,
        odet,
        pix0,
        distance: close_distance / ratio,
        close_distance,
        xbeam: dot(&fdet, &nv),
        ybeam: dot(&sdet, &nv),
        xclose: -dot(&pix0, &fdet),
        yclose: -dot(&pix0, &sdet),
    }
}

/// One source: position (metres from the sample), intensity and wavelength (metres).
pub(super) struct Source {
    pub pos: V3,
    pub intensity: f64,
    pub lambda: f64,
}

/// The sources and the number of divergence steps kept (-1 with a `-sourcefile`: nonBragg.c's
/// `divsteps`, which it prints, keeps its initial -1 then), the C's messages into `s`.
pub(super) fn sources(c: &NonBraggConfig, g: &Geometry, b: &BeamSteps, s: &mut String) -> Result<(Vec<Source>, i32)> {
    let (src, divsteps) = match &c.sourcefile {
        Some(sf) => (sources_from_file(c, g, sf)?, -1),
        None => sources_from_steps(c, g, b, s)?,
    };
    let _ = writeln!(s, "  created a total of {} sources:", src.len());
    for p in &src {
        let (v, i, l) = (&p.pos, p.intensity, p.lambda);
        let _ = writeln!(s, "{} {} {}   {} {}", cf("%g", v[0]), cf("%g", v[1]), cf("%g", v[2]), cf("%g", i), cf("%g", l));
    }
    Ok((src, divsteps))
}

/// `-sourcefile`: x y z intensity lambda per line, a missing column taking the default (a point
/// `-source_distance` up the beam, intensity 1, `-lambda`).
fn sources_from_file(c: &NonBraggConfig, g: &Geometry, sf: &str) -> Result<Vec<Source>> {
    // one to five finite numbers a line, refused with the line otherwise (the C read words as 0)
    let table = crate::io::text::read_table(os_path(sf).as_path(), "-sourcefile", 1, 5)?;
    let cols = &table.cols;
    if cols[0].is_empty() {
        return Err(Error::file(sf, "-sourcefile: no sources in file"));
    }
    let d = |v: f64, def: f64| if v.is_nan() { def } else { v };
    (0..cols[0].len())
        .map(|i| {
            let src = Source {
                pos: [
                    d(cols[0][i], -c.source_distance * g.beam[0]),
                    d(cols[1][i], -c.source_distance * g.beam[1]),
                    d(cols[2][i], -c.source_distance * g.beam[2]),
                ],
                intensity: d(cols[3][i], 1.0),
                lambda: d(cols[4][i], c.lambda0),
            };
            // as simulate's sources: a wavelength and a direction (experiment::beam::source_problem)
            let bad = |why: String| Error::file_line(sf, table.lines[i], format!("-sourcefile: {why}"));
            match source_problem(&src.pos, src.lambda) {
                Some(why) => Err(bad(why)),
                None => Ok(src),
            }
        })
        .collect()
}

/// The sources of the divergence and dispersion steps, and how many divergence points were kept; a
/// dispersion that reaches a wavelength of 0 or below is refused as simulate's.
fn sources_from_steps(c: &NonBraggConfig, g: &Geometry, b: &BeamSteps, s: &mut String) -> Result<(Vec<Source>, i32)> {
    let (h, v, disp) = (b.hdiv, b.vdiv, b.disp);
    let keep = |hdiv: f64, vdiv: f64| -> bool {
        let mut test = (hdiv * hdiv - h.step * h.step / 4.0 * (1 - h.steps % 2) as f64) / h.range / h.range;
        test += (vdiv * vdiv - v.step * v.step / 4.0 * (1 - v.steps % 2) as f64) / v.range / v.range;
        !(c.round_div && test * 4.0 > 1.1)
    };
    // the divergence points the round-divergence rule keeps, and the wavelengths: listed (in the
    // C's order: every divergence line, then every wavelength line), then combined into sources
    let kept: Vec<(f64, f64)> = (0..h.steps)
        .flat_map(|hi| (0..v.steps).map(move |vi| (h.step * hi as f64 - h.range / 2.0, v.step * vi as f64 - v.range / 2.0)))
        .filter(|&(hdiv, vdiv)| keep(hdiv, vdiv))
        .collect();
    let lambdas: Vec<f64> = (0..disp.steps).map(|d| c.lambda0 * (1.0 + disp.step * d as f64 - disp.range / 2.0)).collect();
    for (hdiv, vdiv) in &kept {
        let _ = writeln!(s, "divergence deviation: {} {}", cf("%g", *hdiv), cf("%g", *vdiv));
    }
    for (d, lambda) in lambdas.iter().enumerate() {
        let _ = writeln!(s, "lambda{} = {}", d, cf("%.15g", *lambda));
    }
    check_dispersion(disp.range, c.lambda0, lambdas.iter().copied())?;
    let mut src = Vec::with_capacity(kept.len() * lambdas.len());
    for &(hdiv, vdiv) in &kept {
        let vector = [-c.source_distance * g.beam[0], -c.source_distance * g.beam[1], -c.source_distance * g.beam[2]];
        let nv = rotate_axis(&vector, &g.polar_vector, vdiv);
        let vector = rotate_axis(&nv, &g.vert_vector, hdiv);
        for &lambda in &lambdas {
            src.push(Source { pos: vector, intensity: 1.0, lambda });
        }
    }
    Ok((src, kept.len() as i32))
}
