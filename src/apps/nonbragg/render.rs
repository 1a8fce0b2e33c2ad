//! nonBragg.c's pixel loop: for every pixel, sub-pixel and source, the scattering vector's
//! sin(θ)/λ, the structure factor interpolated from the stol table, squared, times polarization
//! and solid angle; then the solid angle the detector subtends and the image's statistics.

use super::config::NonBraggConfig;
use super::geometry::{Geometry, Source};
use super::setup::Roi;
use super::stol::StolTable;
use crate::base::vec3::{magnitude, rotate_axis, unitize, V3};
use crate::experiment::physics::polarization_factor;
use rayon::prelude::*;
use std::fmt::Write as _;

/// The pixel grid the loop walks: the detector's pixels, the region of interest, the sub-pixels.
pub(super) struct Grid {
    pub fpixels: i64,
    pub spixels: i64,
    pub roi: Roi,
    /// sub-pixels per pixel along each axis (`-oversample`, at least 1)
    pub oversample: i64,
    pub subpixel_size: f64,
}

impl Grid {
    /// `float` with the grid's size and region of interest.
    pub fn image<'a>(&self, float: &'a [f32]) -> crate::base::image::ImageView<'a> {
        crate::base::image::ImageView::new(float, self.fpixels as usize, self.spixels as usize, self.roi.clipped())
    }
    pub fn new(c: &NonBraggConfig, fpixels: i64, spixels: i64, roi: Roi) -> Grid {
        let oversample = if c.oversample <= 0 { 1 } else { c.oversample as i64 };
        Grid { fpixels, spixels, roi, oversample, subpixel_size: c.pixel / oversample as f64 }
    }

    /// Where the centre of sub-pixel (sub_f, sub_s) of pixel (fpixel, spixel) lies on the detector
    /// (fdet_mm, sdet_mm, metres despite the C's names) and in space (a curved detector puts every
    /// pixel at the same distance from the sample).
    fn subpixel(&self, c: &NonBraggConfig, g: &Geometry, fpixel: i64, spixel: i64, sub_f: i64, sub_s: i64) -> (f64, f64, V3) {
        let fdet_mm = self.subpixel_size * (fpixel * self.oversample + sub_f) as f64 + self.subpixel_size / 2.0;
        let sdet_mm = self.subpixel_size * (spixel * self.oversample + sub_s) as f64 + self.subpixel_size / 2.0;
        let odet_mm = 0.0f64;
        let mut pos = [0.0; 3];
        for k in 0..3 {
            pos[k] = fdet_mm * g.fdet[k] + sdet_mm * g.sdet[k] + odet_mm * g.odet[k] + g.pix0[k];
        }
        if c.curved {
            let vector = [g.distance * g.beam[0], g.distance * g.beam[1], g.distance * g.beam[2]];
            let nv = rotate_axis(&vector, &g.sdet, pos[1] / g.distance);
            pos = rotate_axis(&nv, &g.fdet, pos[2] / g.distance);
        }
        (fdet_mm, sdet_mm, pos)
    }
}

/// The solid angle of a pixel at `airpath` metres (of a point pixel with `-point_pixel`).
fn solid_angle(c: &NonBraggConfig, g: &Geometry, airpath: f64) -> f64 {
    if c.point_pixel {
        1.0 / airpath / airpath
    } else {
        c.pixel * c.pixel / airpath / airpath * g.close_distance / airpath
    }
}

/// Everything one pixel's sum reads.
pub(super) struct Scene<'a> {
    pub c: &'a NonBraggConfig,
    pub g: &'a Geometry,
    pub grid: &'a Grid,
    pub src: &'a [Source],
    pub table: &'a StolTable,
    /// r_e² · fluence · molecules
    pub scale: f64,
}

/// The float image, rows in parallel, each pixel's sum in the C's order (outside the region of
/// interest 0), and where the last sub-pixel of each pixel lies (for the max_I report).
pub(super) fn render(sc: &Scene) -> (Vec<f32>, Vec<Vec<(f64, f64)>>) {
    let fp = sc.grid.fpixels as usize;
    let mut floatimage = vec![0.0f32; fp * sc.grid.spixels as usize];
    let last_pos = floatimage
        .par_chunks_mut(fp)
        .enumerate()
        .map(|(spixel, row)| {
            let spixel = spixel as i64;
            let mut last_pos = vec![(0.0, 0.0); fp];
            let mut nearest = 0usize;
            for fpixel in 0..sc.grid.fpixels {
                if !sc.grid.roi.contains(fpixel, spixel) {
                    continue;
                }
                let (v, last) = render_pixel(sc, fpixel, spixel, &mut nearest);
                row[fpixel as usize] = v;
                last_pos[fpixel as usize] = last;
            }
            last_pos
        })
        .collect();
    (floatimage, last_pos)
}

/// One pixel: the sum over its sub-pixels and the sources of sign(F)·F²·polarization·Ω, times the
/// scale over the number of steps (or, with `-Fmap`, the last F); and its last sub-pixel's place.
/// `nearest` is the table position the search starts from (carried along the row, as in the C).
fn render_pixel(sc: &Scene, fpixel: i64, spixel: i64, nearest: &mut usize) -> (f32, (f64, f64)) {
    let (c, g, grid) = (sc.c, sc.g, sc.grid);
    let mut ibg = 0.0f64;
    let mut fbg = 0.0f64;
    let (mut fdet_mm, mut sdet_mm) = (0.0, 0.0);
    for sub_s in 0..grid.oversample {
        for sub_f in 0..grid.oversample {
            let pos;
            (fdet_mm, sdet_mm, pos) = grid.subpixel(c, g, fpixel, spixel, sub_f, sub_s);
            let (mut diffracted, airpath) = unitize(&pos);
            let omega = solid_angle(c, g, airpath);
            let capture_fraction = 1.0;
            for Source { pos: p, intensity: si, lambda } in sc.src {
                let inc = [-p[0], -p[1], -p[2]];
                let (incident, _) = unitize(&inc);
                let mut scattering = [0.0; 3];
                for k in 0..3 {
                    scattering[k] = (diffracted[k] - incident[k]) / lambda;
                }
                let stol = 0.5 * magnitude(&scattering);
                fbg = sc.table.interpolate(stol, nearest);
                let sign = if fbg < 0.0 { -1.0f32 } else { 1.0f32 } as f64;
                let polar = if !c.nopolar {
                    let (pf, d) = polarization_factor(c.polarization, &incident, &diffracted, &g.polar_vector);
                    diffracted = d;
                    pf
                } else {
                    1.0
                };
                ibg += sign * fbg * fbg * polar * omega * si * capture_fraction;
            }
        }
    }
    let steps = sc.src.len() as i64 * grid.oversample * grid.oversample;
    let mut v = (ibg * sc.scale / steps as f64) as f32;
    if c.fmap {
        v = fbg as f32;
    }
    (v, (fdet_mm, sdet_mm))
}

/// The largest solid angle of the sub-pixels of pixel (fpixel, spixel), NaN if one is: what the
/// geometry alone gives the pixel (for the refusal of a pixel beyond a float).
pub(super) fn pixel_solid_angle(c: &NonBraggConfig, g: &Geometry, grid: &Grid, fpixel: i64, spixel: i64) -> f64 {
    let mut most = 0.0f64;
    for sub_s in 0..grid.oversample {
        for sub_f in 0..grid.oversample {
            let (_, _, pos) = grid.subpixel(c, g, fpixel, spixel, sub_f, sub_s);
            let omega = solid_angle(c, g, magnitude(&pos));
            if omega.is_nan() {
                return omega;
            }
            most = most.max(omega);
        }
    }
    most
}

/// The solid angle the region of interest subtends, summed in the C's order (re-evaluated serially:
/// cheap compared with the render).
pub(super) fn omega_sum(c: &NonBraggConfig, g: &Geometry, grid: &Grid) -> f64 {
    let mut omega_sum = 0.0f64;
    for (fpixel, spixel, _) in grid.roi.pixels() {
        for sub_s in 0..grid.oversample {
            for sub_f in 0..grid.oversample {
                let (_, _, pos) = grid.subpixel(c, g, fpixel, spixel, sub_f, sub_s);
                omega_sum += solid_angle(c, g, magnitude(&pos));
            }
        }
    }
    omega_sum
}

/// The statistics nonBragg.c reports and scales its images by.
pub(super) struct Stats {
    pub max_i: f64,
    /// where the maximum's last sub-pixel lies (metres)
    pub max_x: f64,
    pub max_y: f64,
    pub avg: f64,
    pub rms: f64,
    pub rmsd: f64,
}

/// Maximum, mean, rms and rmsd of the region of interest in raster order, with the C's progress
/// lines (into `s`) for the pixels it walks.
pub(super) fn statistics(c: &NonBraggConfig, grid: &Grid, floatimage: &[f32], last_pos: &[Vec<(f64, f64)>], s: &mut String) -> Stats {
    let (mut max_i, mut max_x, mut max_y) = (0.0f64, 0.0f64, 0.0f64);
    let (mut sum, mut sumsqr, mut n) = (0.0f64, 0.0f64, 0i64);
    let pp = grid.roi.progress_pixels();
    for (progress_pixel, (fpixel, spixel, j)) in grid.roi.pixels().enumerate() {
        let v = floatimage[j] as f64;
        if v > max_i {
            max_i = v;
            (max_x, max_y) = last_pos[spixel as usize][fpixel as usize];
        }
        sum += v;
        // nonBragg.c squares the float pixel in float arithmetic: its rms is inf once a pixel passes
        // 1.8e19 (sqrt of the largest float), e.g. -curved_det -point_pixel; the images do not use it
        sumsqr += (floatimage[j] * floatimage[j]) as f64;
        n += 1;
        let progress_pixel = progress_pixel as i64;
        if c.progress
            && pp / 100 > 0
            && (progress_pixel % (pp / 20) == 0 || ((10 * progress_pixel < pp || 10 * progress_pixel > 9 * pp) && progress_pixel % (pp / 100) == 0))
        {
            let _ = writeln!(s, "{}% done", progress_pixel * 100 / pp);
        }
    }
    if n <= 0 {
        n = 1;
    }
    let avg = sum / n as f64;
    if n <= 1 {
        n = 2;
    }
    let rms = (sumsqr / (n - 1) as f64).sqrt();
    Stats { max_i, max_x, max_y, avg, rms, rmsd: shifted_rmsd(grid, floatimage, avg) }
}

/// The rmsd about `avg` as the C takes it: its loop reads floatimage[j] one pixel ahead (`++j`
/// first; index `pixels` is 0). Kept because the PGM scale, and so the golden PGMs, depend on it.
fn shifted_rmsd(grid: &Grid, floatimage: &[f32], avg: f64) -> f64 {
    let mut sumsqr = 0.0f64;
    let mut n = 0i64;
    for (_, _, j) in grid.roi.pixels() {
        let v = floatimage.get(j + 1).map_or(0.0, |&v| v as f64);
        let t = v - avg;
        sumsqr += t * t;
        n += 1;
    }
    if n <= 1 {
        n = 2;
    }
    (sumsqr / (n - 1) as f64).sqrt()
}
