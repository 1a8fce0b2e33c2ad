//! nearBragg.c's pixel loop (lines 957-1209): for every pixel, sub-pixel, wavelength, divergence
//! point and source depth, the waves of every atom summed over the exact source → atom → pixel
//! path, then squared (after each divergence point, or once per pixel with `-coherent`).
//!
//! Rows are rendered in parallel; each pixel's sums keep the C's order and arithmetic, so the images
//! do not depend on the number of threads. [`pixel_sum`] and its atom loop mirror the C (the
//! reference, kept as it is); with a SIMD level, [`row_sums`] takes a row's pixels eight at a time
//! through `group_sum`, the same loops with the atom loop in lanes (`simd`).

use super::atoms::Atoms;
use super::config::{NearBraggConfig, TWO_PI};
use super::setup::{BeamSteps, Detector};
pub use super::simd::PixelSum;
use super::simd::{self, WaveLanes, LANES};
use crate::base::c::printf::cf;
use crate::base::consts::R_E_SQR;
use crate::base::cpu::SimdLevel;
use crate::base::vec3::V3;
use rayon::prelude::*;
use std::fmt::Write as _;

/// Everything the pixel loop reads.
pub struct Scene<'a> {
    pub c: &'a NearBraggConfig,
    pub det: &'a Detector,
    pub atoms: &'a Atoms,
    pub steps: &'a BeamSteps,
    /// the divergence points inside the ellipse
    pub div: &'a [(f64, f64)],
    pub oversample: i32,
    /// the C's `steps` (line 934)
    pub nsteps: i32,
    /// The SIMD level of the atom loop ([`simd::fast_level`]), or `None` for the scalar loop.
    pub level: Option<SimdLevel>,
}

/// The images the loop writes into (the float image, and the coherent sin/cos images).
pub struct Images {
    pub float: Vec<f32>,
    pub sin: Vec<f32>,
    pub cos: Vec<f32>,
}

/// The C's `rotate(v, new, 0, phiy, phiz)` (lines 1279-1329) of (distance, 0, 0): the curved
/// detector's pixel (line 1022), with the C's exact operations.
fn curved_position(distance: f64, phiy: f64, phiz: f64) -> V3 {
    let (mut x, mut y, mut z) = (distance, 0.0f64, 0.0f64);
    if phiy != 0.0 {
        let (rxx, rxy, rxz) = (phiy.cos(), 0.0, phiy.sin());
        let (rzx, rzy, rzz) = (-phiy.sin(), 0.0, phiy.cos());
        let rx = x * rxx + y * rxy + z * rxz;
        let rz = x * rzx + y * rzy + z * rzz;
        (x, z) = (rx, rz);
    }
    if phiz != 0.0 {
        let (rxx, rxy) = (phiz.cos(), -phiz.sin());
        let (ryx, ryy) = (phiz.sin(), phiz.cos());
        let rx = x * rxx + y * rxy;
        let ry = x * ryx + y * ryy;
        (x, y) = (rx, ry);
    }
    [x, y, z]
}

/// Sub-pixel (subz, suby) of pixel (x, y): its detector coordinates and position (lines 1007-1026).
pub fn subpixel_position(s: &Scene, x: i32, y: i32, suby: i32, subz: i32) -> (f64, f64, V3) {
    let (det, over) = (s.det, s.oversample);
    let sub = s.c.pixel / over as f64;
    let xdet = sub * (x * over + subz) as f64 + sub / 2.0;
    let ydet = sub * (y * over + suby) as f64 + sub / 2.0;
    let p = |k: usize| xdet * det.fdet[k] + ydet * det.sdet[k] + det.pix0[k];
    let mut pos = [p(0), p(1), p(2)];
    if s.c.curved {
        pos = curved_position(s.c.distance, pos[2] / s.c.distance, pos[1] / s.c.distance);
    }
    (xdet, ydet, pos)
}

/// The solid-angle factor of a sub-pixel at `pos` (lines 1030-1034), and its air path.
pub fn omega(c: &NearBraggConfig, pos: &V3) -> (f64, f64) {
    let airpath = (pos[0] * pos[0] + pos[1] * pos[1] + pos[2] * pos[2]).sqrt();
    let om = if c.point_pixel { 1.0 } else { c.pixel * c.pixel * c.distance / airpath };
    (om, airpath)
}

/// The source point of divergence angles (hdiv, vdiv) at depth offset `ddepth` (lines 1055-1060);
/// the origin for a far source, whose phase counts from the atom's x.
fn source_point(c: &NearBraggConfig, hdiv: f64, vdiv: f64, ddepth: f64) -> V3 {
    if c.far_source {
        [0.0; 3]
    } else {
        [-c.source_distance + ddepth, hdiv.atan() * c.source_distance, vdiv.atan() * c.source_distance]
    }
}

/// One source point and wavelength, seen from one pixel position.
struct Wave {
    src: V3,
    lambda: f64,
    pix: V3,
}

/// The atom loop (lines 1070-1116): add every atom's wave to (fa, fb).
fn atom_sum(c: &NearBraggConfig, a: &Atoms, w: &Wave, f: &mut (f64, f64), mut trace: Option<&mut String>) {
    let (src, pix, lambda) = (w.src, w.pix, w.lambda);
    let far = c.far_source;
    for i in 0..a.len() {
        let (ax, ay, az) = (a.x[i], a.y[i], a.z[i]);
        let mut s2a = if far {
            ax
        } else {
            ((src[0] - ax) * (src[0] - ax) + (src[1] - ay) * (src[1] - ay) + (src[2] - az) * (src[2] - az)).sqrt()
        };
        let a2p = ((pix[0] - ax) * (pix[0] - ax) + (pix[1] - ay) * (pix[1] - ay) + (pix[2] - az) * (pix[2] - az)).sqrt();
        let phase = TWO_PI * (s2a + a2p) / lambda + a.phase[i];
        if far {
            s2a = 1.0;
        }
        let mut dwf = a.occ[i];
        if a.b[i] != 0.0 {
            let s0 = if far { [1.0, 0.0, 0.0] } else { [(ax - src[0]) / s2a, (ay - src[1]) / s2a, (az - src[2]) / s2a] };
            let sv = [(pix[0] - ax) / a2p, (pix[1] - ay) / a2p, (pix[2] - az) / a2p];
            let l = lambda * 1e10;
            let (sx, sy, sz) = ((sv[0] - s0[0]) / l, (sv[1] - s0[1]) / l, (sv[2] - s0[2]) / l);
            let stol = (sx * sx + sy * sy + sz * sz).sqrt() / 2.0;
            dwf *= (-a.b[i] * stol * stol).exp();
        }
        f.0 += dwf * phase.cos() / s2a / a2p;
        f.1 += dwf * phase.sin() / s2a / a2p;
        if let Some(t) = trace.as_deref_mut() {
            let g = |x: f64| cf("%g", x);
            let _ = writeln!(t, "{}  {} {} {} -> {} {} {}", i, g(ax), g(ay), g(az), g(phase), g(f.0), g(f.1));
        }
    }
}


/// The loops over sub-pixels, wavelengths, divergence and depth of pixel (x, y) (lines 1004-1145).
pub fn pixel_sum(s: &Scene, x: i32, y: i32, mut trace: Option<&mut String>) -> PixelSum {
    let c = s.c;
    let (mut fa, mut fb, mut i) = (0.0f64, 0.0f64, 0.0f64);
    let mut last = PixelSum { fa: 0.0, fb: 0.0, i: 0.0, omega: 0.0, airpath: 0.0, pos: [0.0; 3] };
    for suby in 0..s.oversample {
        for subz in 0..s.oversample {
            let (_, _, pos) = subpixel_position(s, x, y, suby, subz);
            (last.omega, last.airpath) = omega(c, &pos);
            last.pos = pos;
            for disp in 0..s.steps.disp.steps {
                let lambda = s.steps.lambda(c.lambda0, disp);
                for &(hdiv, vdiv) in s.div {
                    for depth in 0..s.steps.depth.steps {
                        let src = source_point(c, hdiv, vdiv, s.steps.ddepth(depth));
                        let mut f = (fa, fb);
                        atom_sum(c, s.atoms, &Wave { src, lambda, pix: pos }, &mut f, trace.as_deref_mut());
                        (fa, fb) = f;
                    }
                    if !c.coherent {
                        i += fa * fa + fb * fb;
                        (fa, fb) = (0.0, 0.0);
                    }
                }
                if !c.coherent {
                    i += fa * fa + fb * fb;
                    (fa, fb) = (0.0, 0.0);
                }
            }
        }
    }
    (last.fa, last.fb, last.i) = (fa, fb, i);
    last
}

/// [`pixel_sum`] of the [`LANES`] pixels (`xs[l]`, y) at once, the atom loop in SIMD lanes at `level`:
/// the same loops in the same order, each lane's sums the scalar loop's but for sin/cos/exp.
fn group_sum(s: &Scene, level: SimdLevel, xs: &[i32; LANES], y: i32) -> [PixelSum; LANES] {
    let c = s.c;
    let (mut fa, mut fb, mut i) = ([0.0f64; LANES], [0.0f64; LANES], [0.0f64; LANES]);
    let mut last = [PixelSum { fa: 0.0, fb: 0.0, i: 0.0, omega: 0.0, airpath: 0.0, pos: [0.0; 3] }; LANES];
    let square = |fa: &mut [f64; LANES], fb: &mut [f64; LANES], i: &mut [f64; LANES]| {
        for l in 0..LANES {
            i[l] += fa[l] * fa[l] + fb[l] * fb[l];
            (fa[l], fb[l]) = (0.0, 0.0);
        }
    };
    for suby in 0..s.oversample {
        for subz in 0..s.oversample {
            let mut pix = [[0.0; LANES]; 3];
            for (l, p) in last.iter_mut().enumerate() {
                let (_, _, pos) = subpixel_position(s, xs[l], y, suby, subz);
                (p.omega, p.airpath) = omega(c, &pos);
                p.pos = pos;
                (pix[0][l], pix[1][l], pix[2][l]) = (pos[0], pos[1], pos[2]);
            }
            for disp in 0..s.steps.disp.steps {
                let lambda = s.steps.lambda(c.lambda0, disp);
                for &(hdiv, vdiv) in s.div {
                    for depth in 0..s.steps.depth.steps {
                        let src = source_point(c, hdiv, vdiv, s.steps.ddepth(depth));
                        simd::atom_sum_lanes(level, c, s.atoms, &WaveLanes { src, lambda, pix }, &mut fa, &mut fb);
                    }
                    if !c.coherent {
                        square(&mut fa, &mut fb, &mut i);
                    }
                }
                if !c.coherent {
                    square(&mut fa, &mut fb, &mut i);
                }
            }
        }
    }
    for (l, p) in last.iter_mut().enumerate() {
        (p.fa, p.fb, p.i) = (fa[l], fb[l], i[l]);
    }
    last
}

/// Finish pixel `j` (lines 1147-1172): the coherent images, the intensity, the float image.
fn finish_pixel(s: &Scene, p: &mut PixelSum, float: &mut f32, sin: &mut f32, cos: &mut f32) {
    let steps = s.nsteps;
    if s.c.coherent {
        // float * int is a float product in C
        p.fa += (*cos * steps as f32) as f64;
        p.fb += (*sin * steps as f32) as f64;
        *cos = (p.fa / steps as f64) as f32;
        *sin = (p.fb / steps as f64) as f32;
        p.fa /= (steps as f64).sqrt();
        p.fb /= (steps as f64).sqrt();
    }
    p.i += p.fa * p.fa + p.fb * p.fb;
    *float = (*float as f64 + p.i / steps as f64 * p.omega * s.c.fluence * R_E_SQR) as f32;
}

/// The C's `-printout` lines of one pixel (lines 1183-1196).
fn printout(s: &Scene, x: i32, y: i32, p: &PixelSum, float: f32, sin: f32, cos: f32, out: &mut String) {
    let pos = p.pos;
    let twotheta = (pos[1] * pos[1] + pos[2] * pos[2]).sqrt().atan2(pos[0]);
    let stol = (twotheta / 2.0).sin() / (s.c.lambda0 * 1e10);
    let om = p.omega / p.airpath / p.airpath;
    let _ = writeln!(out, "{x:4} {y:4} : stol = {}", cf("%g", stol));
    let _ = writeln!(out, " Fa={}  Fb={}   I = {}", cf("%g", p.fa), cf("%g", p.fb), cf("%g", p.i));
    let _ = writeln!(out, "cos={} sin={}", cf("%g", cos as f64), cf("%g", sin as f64));
    let _ = writeln!(out, "I/sr   {}", cf("%15.10g", float as f64 / om));
    let _ = writeln!(out, "omega  {}", cf("%15.10g", om));
    let _ = writeln!(out, "pixel  {}", cf("%15.10g", float as f64));
}

/// Does `-printout` print pixel (x, y)?
fn printed(c: &NearBraggConfig, x: i32, y: i32) -> bool {
    match c.printout_pixel {
        Some((px, py)) => (x == px && y == py) || px < 0,
        None => true,
    }
}

/// The loop sums of row `y`'s ROI pixels, in raster order: `each(x, sum, trace)`. With a SIMD level
/// the pixels go in groups of [`LANES`] from the ROI's left edge (the last group's spare lanes repeat
/// its last pixel and are dropped), so a pixel's group, and its value, do not depend on the
/// threads; a pixel whose atoms `-debug` traces takes the scalar loop (its trace is the C's).
pub fn row_sums(s: &Scene, y: i32, mut each: impl FnMut(i32, PixelSum, String)) {
    let (x0, x1) = (s.det.roi[0].max(0), s.det.roi[1].min(s.det.xpixels - 1));
    if !(x0 <= x1 && s.det.in_roi(x0, y)) {
        return;
    }
    let traced = |x: i32| s.c.printout && s.c.debug && printed(s.c, x, y);
    let mut x = x0;
    while x <= x1 {
        let n = if s.level.is_some() { (x1 - x + 1).min(LANES as i32) } else { 1 };
        let xs: [i32; LANES] = std::array::from_fn(|l| x + (l as i32).min(n - 1));
        let group = s.level.map(|level| group_sum(s, level, &xs, y));
        #[cfg(feature = "check-kernels")]
        if let Some(g) = &group {
            check_group(s, &xs[..n as usize], y, g);
        }
        for (l, &xl) in xs.iter().enumerate().take(n as usize) {
            let mut trace = String::new();
            let p = match &group {
                Some(g) if !traced(xl) => g[l],
                _ => pixel_sum(s, xl, y, traced(xl).then_some(&mut trace)),
            };
            each(xl, p, trace);
        }
        x += n;
    }
}

/// Render one row into its slices of the images; returns the row's `-printout` text.
fn render_row(s: &Scene, y: i32, float: &mut [f32], sin: &mut [f32], cos: &mut [f32]) -> String {
    let mut text = String::new();
    row_sums(s, y, |x, mut p, trace| {
        let xi = x as usize;
        finish_pixel(s, &mut p, &mut float[xi], &mut sin[xi], &mut cos[xi]);
        if s.c.printout && printed(s.c, x, y) {
            text += &trace;
            printout(s, x, y, &p, float[xi], sin[xi], cos[xi], &mut text);
        }
    });
    text
}

/// Render every pixel of the ROI into `img` (which holds the accumulated input, or zeros); returns
/// the `-printout` text in raster order.
pub fn render(s: &Scene, img: &mut Images) -> String {
    let w = s.det.xpixels as usize;
    let rows: Vec<String> = img
        .float
        .par_chunks_mut(w)
        .zip(img.sin.par_chunks_mut(w))
        .zip(img.cos.par_chunks_mut(w))
        .enumerate()
        .map(|(y, ((f, sn), cs))| render_row(s, y as i32, f, sn, cs))
        .collect();
    rows.concat()
}

/// The solid angle the rendered sub-pixels subtend (line 1036), summed in the C's order.
pub fn omega_sum(s: &Scene) -> f64 {
    let mut sum = 0.0;
    for y in 0..s.det.ypixels {
        for x in 0..s.det.xpixels {
            if !s.det.in_roi(x, y) {
                continue;
            }
            for suby in 0..s.oversample {
                for subz in 0..s.oversample {
                    let (_, _, pos) = subpixel_position(s, x, y, suby, subz);
                    sum += omega(s.c, &pos).0;
                }
            }
        }
    }
    sum
}

/// Sum the group's pixels (`xs`, row `y`) with the scalar loop and compare (peak: the group's
/// brightest); panic on disagreement.
#[cfg(feature = "check-kernels")]
pub fn check_group(s: &Scene, xs: &[i32], y: i32, group: &[PixelSum; LANES]) {
    let want: Vec<PixelSum> = xs.iter().map(|&x| pixel_sum(s, x, y, None)).collect();
    let peak = want.iter().map(super::check::intensity).fold(0.0, f64::max);
    for (l, w) in want.iter().enumerate() {
        if let Err(e) = super::check::compare(&group[l], w, peak) {
            panic!(
                "check-kernels: nearbragg's SIMD atom loop ({}) disagrees with the scalar loop at pixel ({}, {y}): {e}",
                s.level.map_or("scalar", |l| l.name()),
                xs[l]
            );
        }
    }
}
