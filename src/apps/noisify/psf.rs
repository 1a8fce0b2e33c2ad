//! noisify.c's point-spread function: the pixel-integrated Gaussian and fiber kernels and
//! `apply_psf`, with the blur summed in the C's order (see [`convolve_c_order`]).

use super::config::PsfType;
use crate::base::c::printf::cf;
use rayon::prelude::*;
use std::io::Write;

extern "C" {
    fn erf(x: f64) -> f64;
}

fn c_erf(x: f64) -> f64 {
    // SAFETY: libm's erf is a pure function of a double.
    unsafe { erf(x) }
}

/// noisify.c `ngauss2D_integ`: integral of a unit-volume Gaussian of FWHM 1.
fn ngauss2d_integ(x: f64, y: f64) -> f64 {
    0.125 * (c_erf(2.0 * x * 2f64.ln().sqrt()) * c_erf(y * 16f64.ln().sqrt()) * (16f64.ln() / 2f64.ln()).sqrt())
}

fn ngauss2d_pixel(x: f64, y: f64, pix: f64) -> f64 {
    ngauss2d_integ(x + pix / 2., y + pix / 2.) - ngauss2d_integ(x + pix / 2., y - pix / 2.) - ngauss2d_integ(x - pix / 2., y + pix / 2.)
        + ngauss2d_integ(x - pix / 2., y - pix / 2.)
}

/// noisify.c `integrate_gauss_over_pixel`.
pub fn integrate_gauss_over_pixel(x: f64, y: f64, fwhm: f64, pix: f64) -> f64 {
    ngauss2d_pixel(x / fwhm, y / fwhm, pix / fwhm)
}

fn fiber2d_integ(x: f64, y: f64, g: f64) -> f64 {
    ((x * y) / (g * (g * g + x * x + y * y).sqrt())).atan() / 2.0 / std::f64::consts::PI
}

/// noisify.c `integrate_fiber_over_pixel` (`fiber2D_pixel`).
pub fn integrate_fiber_over_pixel(x: f64, y: f64, g: f64, pix: f64) -> f64 {
    fiber2d_integ(x + pix / 2., y + pix / 2., g) - fiber2d_integ(x + pix / 2., y - pix / 2., g) - fiber2d_integ(x - pix / 2., y + pix / 2., g)
        + fiber2d_integ(x - pix / 2., y - pix / 2., g)
}

/// `(int)` of a double as x86-64 does it for the values the C can produce here; NaN (the C's
/// undefined case) gives `None`.
fn c_int(x: f64) -> Option<i32> {
    if x.is_nan() {
        None
    } else {
        Some(x as i32)
    }
}

/// noisify.c `photonloss_factor`: the automatic PSF radius leaves at most sqrt(photons)/10 photons
/// outside it.
const PHOTONLOSS_FACTOR: f64 = 10.0;

/// noisify.c `apply_psf`: returns the blurred image (or the input when the C returns it).
///
/// Messages the C prints go to `out`. Differences from the C, each where the C's result is
/// undefined: a pixel whose automatic radius is NaN (a Gaussian PSF on a pixel below 0.01 photons,
/// only reachable with `-nonoise`) gets radius 1 instead of reading outside the kernel.
///
/// Kept from the C because the golden images depend on it: the bounds test `x > xpixels` lets a
/// contribution one column past the right edge land on the first pixel of the next row.
///
/// The blur itself is [`convolve_c_order`], which gives the C's floats bit for bit.
pub fn apply_psf(
    inimage: &[f32],
    xpixels: usize,
    ypixels: usize,
    psftype: PsfType,
    fwhm_pixels: f64,
    user_psf_radius: i32,
    out: &mut dyn Write,
) -> std::io::Result<Vec<f32>> {
    let g = fwhm_pixels * 0.652383013252053;
    let pixels = xpixels * ypixels;
    if psftype == PsfType::Unknown {
        writeln!(out, "ERROR: unknown PSF type")?;
        return Ok(inimage.to_vec());
    }
    if pixels == 0 {
        writeln!(out, "ERROR: apply_psf image has zero size")?;
        return Ok(inimage.to_vec());
    }
    if fwhm_pixels <= 0.0 || fwhm_pixels.is_nan() {
        writeln!(out, "WARNING: apply_psf function has zero size")?;
        return Ok(inimage.to_vec());
    }
    let maxwidth = xpixels.max(ypixels) as i64;
    let mut psf_radius = user_psf_radius as i64;
    if psf_radius <= 0 {
        let max_i = inimage[..pixels].par_iter().fold(|| 0.0f64, |m, &v| if m < v as f64 { v as f64 } else { m }).reduce(|| 0.0, f64::max);
        writeln!(out, "  maximum input photon/pixel: {}", cf("%g", max_i))?;
        if max_i <= 0.0 {
            writeln!(out, "WARNING: no photons, PSF skipped")?;
            return Ok(vec![0.0; pixels]);
        }
        let lost = max_i.sqrt() / PHOTONLOSS_FACTOR;
        if psftype == PsfType::Gauss {
            psf_radius = 1 + c_int(((-(lost / max_i).ln() / 4f64.ln() / 2.0).sqrt() * fwhm_pixels).ceil()).unwrap_or(0) as i64;
        } else {
            psf_radius = 1 + c_int((g * (max_i / lost)).ceil()).unwrap_or(i32::MAX - 1) as i64;
        }
        writeln!(out, "  auto-selected psf_radius = {} pixels", psf_radius)?;
        if psf_radius == 0 {
            psf_radius = 1;
        }
    }
    if psf_radius > maxwidth {
        psf_radius = maxwidth;
    }
    let kr = psf_radius.max(0);
    let kernel = psf_kernel(psftype, kr, fwhm_pixels);

    // Per-source radius and lost photons (independent per pixel), then the C's serial sum.
    let per_pixel: Vec<(i32, f64)> = inimage[..pixels]
        .par_iter()
        .map(|&v| source_radius_and_loss(v, psftype, fwhm_pixels, user_psf_radius, maxwidth, kr))
        .collect();
    let mut total_lost = 0.0f64;
    for &(_, l) in &per_pixel {
        total_lost += l;
    }

    // per-source squared radius; -1: the source adds nothing (inimage[i] <= 0, or a negative radius)
    let rad2: Vec<i32> = inimage[..pixels]
        .par_iter()
        .zip(per_pixel.par_iter())
        .map(|(&v, &(r, _))| if v <= 0.0 || r < 0 { -1 } else { (r as i64 * r as i64).min(i32::MAX as i64) as i32 })
        .collect();
    drop(per_pixel);
    let mut outimage = convolve_c_order(&inimage[..pixels], xpixels, ypixels, &kernel, kr, &rad2);
    let lost_each = total_lost / pixels as f64;
    writeln!(out, "adding back {} lost photons", cf("%g", total_lost))?;
    outimage.par_iter_mut().for_each(|o| *o = (*o as f64 + lost_each) as f32);
    Ok(outimage)
}

/// One source pixel of [`apply_psf`]: its PSF radius (the user's, or the automatic one at which
/// the lost photons fall below `sqrt(v)/photonloss_factor`; at least 1, at most the image's width,
/// then bounded by the kernel radius `kr`) and the photons lost outside that radius.
fn source_radius_and_loss(v: f32, psftype: PsfType, fwhm_pixels: f64, user_psf_radius: i32, maxwidth: i64, kr: i64) -> (i32, f64) {
    let g = fwhm_pixels * 0.652383013252053;
    if v <= 0.0 {
        return (0, 0.0);
    }
    let vi = v as f64;
    let mut r: i64 = if user_psf_radius != 0 {
        user_psf_radius as i64
    } else {
        let lost = vi.sqrt() / PHOTONLOSS_FACTOR;
        match psftype {
            PsfType::Gauss => c_int(((-(lost / vi).ln() / 16f64.ln()).sqrt() * fwhm_pixels).ceil()).map_or(0, |c| 1 + c as i64),
            _ => c_int((g * (vi / lost)).ceil()).map_or(0, |c| 1 + c as i64),
        }
    };
    if r == 0 {
        r = 1;
    }
    if r > maxwidth {
        r = maxwidth;
    }
    let lost = match psftype {
        PsfType::Gauss => {
            let mut rsq = r as f64;
            rsq /= fwhm_pixels;
            rsq *= rsq;
            vi * (-(16f64.ln()) * rsq).exp()
        }
        _ => vi * g / (g * g + ((r * r) as i32) as f64).sqrt(),
    };
    // the kernel cache bounds what the loops can read
    (r.min(kr) as i32, lost)
}

/// noisify.c's cached PSF kernel: `(2kr+1)²` values, the pixel-integrated PSF inside the disc of
/// radius `kr`, 0 outside.
pub fn psf_kernel(psftype: PsfType, kr: i64, fwhm_pixels: f64) -> Vec<f64> {
    let g = fwhm_pixels * 0.652383013252053;
    let kr = kr.max(0);
    let ks = (2 * kr + 1) as usize;
    let mut kernel = vec![0.0f64; ks * ks];
    for dy in -kr..=kr {
        for dx in -kr..=kr {
            let rsq = (dx * dx + dy * dy) as f64;
            if rsq > (kr * kr) as f64 {
                continue;
            }
            let k = ks * ((ks / 2) as i64 + dy) as usize + ((ks / 2) as i64 + dx) as usize;
            kernel[k] = match psftype {
                PsfType::Gauss => integrate_gauss_over_pixel(dx as f64, dy as f64, fwhm_pixels, 1.0),
                _ => integrate_fiber_over_pixel(dx as f64, dy as f64, g, 1.0),
            };
        }
    }
    kernel
}

/// Width of the column blocks [`convolve_c_order`] prunes by (the largest source radius per block).
const PSF_BLOCK: usize = 64;
/// Beyond this half-chord a block is summed source by source (see [`convolve_c_order`]).
const PSF_BLOCK_MAX_DX: i64 = 12;

/// The PSF sum of noisify.c `apply_psf` (the `for(i=0;i<pixels;++i)` loop), bit-identical to the C
/// and fast.
///
/// `kernel` is the C's cached kernel (`kernel_size` = 2·`kr`+1 squared, indexed by
/// `kernel_size*(kernel_size/2+dy)+kernel_size/2+dx`); `rad2[i]` is source i's squared radius
/// (`psf_radius*psf_radius` after the C's clamps, at most `kr`²), or -1 where the C adds nothing
/// for it (`inimage[i] <= 0.0`, or a negative `-psf_radius`).
///
/// The C scatters: for each source i in raster order, dx (outer) and dy (inner) over its disc, it
/// does `outimage[j] += inimage[i]*kernel[k]` (float += double product, one rounding to float per
/// term), skipping terms whose kernel value is 0. Float addition is not associative, so to get the
/// C's bits every output pixel must receive its terms in the C's order: sources in raster order,
/// i.e. source rows ascending and, within a row, source columns ascending. This function gathers
/// instead, one output row per task (so the result does not depend on the number of threads): for
/// each source row (ascending), each block of [`PSF_BLOCK`] source columns (ascending) and dx
/// descending (= source column ascending for a fixed output pixel), it adds one term to a run of
/// contiguous output pixels, which the compiler vectorises. Blocks whose largest radius cannot
/// reach the output row are skipped, and dx is limited to the block's largest radius. A block whose
/// widest disc is wide (a bright pixel under an automatic radius, or a large `-psf_radius`) is summed
/// source by source instead, each source over its own chord of the disc (contiguous output pixels
/// and kernel values, also vectorised), so the work is never much more than the C's. The rounding of
/// every term is the C's (`(o as f64 + s as f64 * k) as f32`, no fused multiply-add).
///
/// The C's edge test `x > xpixels` lets a term land one column past the right edge, which is the
/// first pixel of the next row (`j = y*xpixels+x`; the golden images depend on it). Those terms
/// interleave with the normal ones of output column 0 in raster order, so column 0 of rows 1.. is
/// recomputed afterwards by a scalar loop in the C's order. (`y > ypixels` lets terms land on row
/// `ypixels`, i.e. at `j >= pixels`; the C writes the one at `j == pixels` into its spare
/// allocation and drops the rest: none is part of the image.)
pub fn convolve_c_order(inimage: &[f32], xpixels: usize, ypixels: usize, kernel: &[f64], kr: i64, rad2: &[i32]) -> Vec<f32> {
    let pixels = xpixels * ypixels;
    assert!(inimage.len() >= pixels && rad2.len() >= pixels);
    let mut out = vec![0.0f32; pixels];
    if pixels == 0 || kr < 0 {
        return out;
    }
    let ks = 2 * kr + 1;
    assert!(kernel.len() >= (ks * ks) as usize);
    let (xp, yp) = (xpixels as i64, ypixels as i64);
    let kidx = |dx: i64, dy: i64| (ks * (kr + dy) + kr + dx) as usize;
    let nb = xpixels.div_ceil(PSF_BLOCK);
    // largest squared radius of each (source row, column block)
    let bmax: Vec<i32> = (0..ypixels * nb)
        .into_par_iter()
        .map(|q| {
            let (y, b) = (q / nb, q % nb);
            let row = &rad2[y * xpixels..(y + 1) * xpixels];
            row[b * PSF_BLOCK..((b + 1) * PSF_BLOCK).min(xpixels)].iter().copied().max().unwrap_or(-1)
        })
        .collect();
    let isqrt = |n: i64| {
        let mut r = (n as f64).sqrt() as i64;
        while r * r > n {
            r -= 1;
        }
        while (r + 1) * (r + 1) <= n {
            r += 1;
        }
        r
    };
    out.par_chunks_mut(xpixels).enumerate().for_each(|(y, orow)| {
        let y = y as i64;
        for y0 in (y - kr).max(0)..=(y + kr).min(yp - 1) {
            let dy = y - y0;
            let dy2 = dy * dy;
            let irow = &inimage[(y0 * xp) as usize..((y0 + 1) * xp) as usize];
            let rrow = &rad2[(y0 * xp) as usize..((y0 + 1) * xp) as usize];
            for b in 0..nb {
                let m2 = bmax[y0 as usize * nb + b] as i64;
                if m2 < dy2 {
                    continue;
                }
                let dxmax = isqrt(m2 - dy2).min(kr);
                let (xa, xb) = ((b * PSF_BLOCK) as i64, (((b + 1) * PSF_BLOCK).min(xpixels)) as i64);
                if dxmax > PSF_BLOCK_MAX_DX {
                    // a wide disc in this block: source by source (ascending), each over its own
                    // chord of the disc (one term per output pixel, so any order within a source)
                    for x0 in xa..xb {
                        let r2 = rrow[x0 as usize] as i64;
                        if r2 < dy2 {
                            continue;
                        }
                        let dxm = isqrt(r2 - dy2);
                        let (lo, hi) = ((-dxm).max(-x0), dxm.min(xp - 1 - x0));
                        if lo > hi {
                            continue;
                        }
                        let v = irow[x0 as usize] as f64;
                        let krow = &kernel[kidx(lo, dy)..=kidx(hi, dy)];
                        let dst = &mut orow[(x0 + lo) as usize..=(x0 + hi) as usize];
                        for (o, &kv) in dst.iter_mut().zip(krow) {
                            let t = (*o as f64 + v * kv) as f32;
                            *o = if kv != 0.0 { t } else { *o };
                        }
                    }
                    continue;
                }
                for dx in (-dxmax..=dxmax).rev() {
                    let kv = kernel[kidx(dx, dy)];
                    if kv == 0.0 {
                        continue;
                    }
                    let d2 = (dx * dx + dy2).min(i32::MAX as i64) as i32;
                    let lo = xa.max(-dx);
                    let hi = xb.min(xp - dx);
                    if lo >= hi {
                        continue;
                    }
                    let (lo, hi) = (lo as usize, hi as usize);
                    let dst = &mut orow[(lo as i64 + dx) as usize..(hi as i64 + dx) as usize];
                    for ((o, &s), &r) in dst.iter_mut().zip(&irow[lo..hi]).zip(&rrow[lo..hi]) {
                        let t = (*o as f64 + s as f64 * kv) as f32;
                        *o = if r >= d2 { t } else { *o };
                    }
                }
            }
        }
    });
    // column 0 of rows 1..: the normal terms and the wrapped ones, in the C's order
    for (j, v) in wrapped_column0(inimage, xpixels, ypixels, kernel, kr, rad2) {
        out[j] = v;
    }
    out
}

/// Column 0 of rows 1.. of [`convolve_c_order`]'s output, recomputed in the C's order: the normal
/// terms (source column x0 = -dx, same output row) and the wrapped ones (x0 = xpixels - dx, from
/// one row up, through the C's edge test `x > xpixels`), as (index, value).
fn wrapped_column0(inimage: &[f32], xpixels: usize, ypixels: usize, kernel: &[f64], kr: i64, rad2: &[i32]) -> Vec<(usize, f32)> {
    let (xp, yp) = (xpixels as i64, ypixels as i64);
    let ks = 2 * kr + 1;
    let kidx = |dx: i64, dy: i64| (ks * (kr + dy) + kr + dx) as usize;
    (1..ypixels)
        .into_par_iter()
        .map(|y| {
            let y = y as i64;
            let mut acc = 0.0f32;
            let a = (kr + 1).min(xp);
            let b = a.max(xp - kr);
            let term = |acc: &mut f32, v: f32, r2: i32, dx: i64, dy: i64| {
                if dx.abs() > kr || dy.abs() > kr {
                    return;
                }
                let kv = kernel[kidx(dx, dy)];
                if kv == 0.0 || dx * dx + dy * dy > r2 as i64 {
                    return;
                }
                *acc = (*acc as f64 + v as f64 * kv) as f32;
            };
            for y0 in (y - 1 - kr).max(0)..=(y + kr).min(yp - 1) {
                for x0 in (0..a).chain(b..xp) {
                    let i = (y0 * xp + x0) as usize;
                    let r2 = rad2[i];
                    if r2 < 0 {
                        continue;
                    }
                    // the C's dx loop ascends: the normal term (dx = -x0) comes before the wrapped one
                    term(&mut acc, inimage[i], r2, -x0, y - y0);
                    term(&mut acc, inimage[i], r2, xp - x0, y - 1 - y0);
                }
            }
            ((y * xp) as usize, acc)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent check of the pixel-integrated Gaussian: the kernel sums to ~1 over a wide radius
    /// and its centre value matches a direct midpoint-rule integral of the normalised 2D Gaussian.
    #[test]
    fn gauss_kernel_is_normalised() {
        let fwhm = 2.0;
        let mut s = 0.0;
        for dy in -20..=20 {
            for dx in -20..=20 {
                s += integrate_gauss_over_pixel(dx as f64, dy as f64, fwhm, 1.0);
            }
        }
        assert!((s - 1.0).abs() < 1e-9, "{s}");
        let sigma = fwhm / (2.0 * (2.0 * 2f64.ln()).sqrt());
        let n = 400;
        let mut m = 0.0;
        for a in 0..n {
            for b in 0..n {
                let x = -0.5 + (a as f64 + 0.5) / n as f64;
                let y = -0.5 + (b as f64 + 0.5) / n as f64;
                m += (-(x * x + y * y) / (2.0 * sigma * sigma)).exp() / (2.0 * std::f64::consts::PI * sigma * sigma);
            }
        }
        m /= (n * n) as f64;
        assert!((m - integrate_gauss_over_pixel(0.0, 0.0, fwhm, 1.0)).abs() < 1e-6);
    }

    /// noisify.c's PSF loop (the `for(i=0;i<pixels;++i)` scatter of `apply_psf`), transliterated
    /// line by line, serial, into a `pixels+10` buffer as the C allocates: the reference the fast
    /// gather must match bit for bit. `rad[i]` is the per-source `psf_radius`.
    fn c_loop(inimage: &[f32], xpixels: i64, ypixels: i64, kernel: &[f64], psf_radius_max: i64, rad: &[i64]) -> Vec<f32> {
        let pixels = xpixels * ypixels;
        let kernel_size = 2 * psf_radius_max + 1;
        let mut outimage = vec![0.0f32; pixels as usize + 10];
        for i in 0..pixels {
            let x0 = i % xpixels;
            let y0 = (i - x0) / xpixels;
            if inimage[i as usize] <= 0.0 {
                continue;
            }
            let psf_radius = rad[i as usize];
            for dx in -psf_radius..=psf_radius {
                for dy in -psf_radius..=psf_radius {
                    let k = kernel_size * (kernel_size / 2 + dy) + kernel_size / 2 + dx;
                    if kernel[k as usize] == 0.0 {
                        continue;
                    }
                    let rsq = (dx * dx + dy * dy) as f64;
                    if rsq > (psf_radius * psf_radius) as f64 {
                        continue;
                    }
                    let x = x0 + dx;
                    let y = y0 + dy;
                    if x < 0 || x > xpixels {
                        continue;
                    }
                    if y < 0 || y > ypixels {
                        continue;
                    }
                    let j = y * xpixels + x;
                    if j < 0 || j > pixels {
                        continue;
                    }
                    let o = &mut outimage[j as usize];
                    *o = (*o as f64 + inimage[i as usize] as f64 * kernel[k as usize]) as f32;
                }
            }
        }
        outimage.truncate(pixels as usize);
        outimage
    }

    struct Xs(u64);
    impl Xs {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// The gather gives the C loop's floats bit for bit: narrow and wide images (wrap into column 0,
    /// discs wider than the image), several column blocks, per-source radii from -1 to the kernel
    /// radius, zero, negative and NaN sources, Gaussian and fiber kernels, 1 and 3 threads.
    #[test]
    fn gather_is_bit_identical_to_the_c_loop() {
        let mut rng = Xs(0x9e3779b97f4a7c15);
        let sizes = [(1, 1), (1, 9), (9, 1), (2, 3), (5, 9), (33, 17), (70, 13), (130, 21), (200, 3)];
        let pool1 = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let pool3 = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let mut checked = 0;
        for &(xp, yp) in &sizes {
            for &kr in &[0i64, 1, 3, 7, 40] {
                for &psf in &[PsfType::Gauss, PsfType::Fiber] {
                    for uniform in [false, true] {
                        let fwhm = 0.5 + rng.below(400) as f64 / 100.0;
                        let kernel = psf_kernel(psf, kr, fwhm);
                        let n = xp * yp;
                        let img: Vec<f32> = (0..n)
                            .map(|_| match rng.below(20) {
                                0 => 0.0,
                                1 => -3.5,
                                2 if n > 4 => f32::NAN,
                                _ => (rng.below(100_000) as f32) / 7.0,
                            })
                            .collect();
                        let rad: Vec<i64> =
                            (0..n).map(|_| if uniform { kr.max(1).min(kr) } else { rng.below(kr as u64 + 2) as i64 - 1 }).collect();
                        let rad2: Vec<i32> = img.iter().zip(&rad).map(|(&v, &r)| if v <= 0.0 || r < 0 { -1 } else { (r * r) as i32 }).collect();
                        let want = c_loop(&img, xp as i64, yp as i64, &kernel, kr, &rad);
                        for pool in [&pool1, &pool3] {
                            let got = pool.install(|| convolve_c_order(&img, xp, yp, &kernel, kr, &rad2));
                            for (j, (a, b)) in want.iter().zip(&got).enumerate() {
                                assert!(
                                    a.to_bits() == b.to_bits(),
                                    "{xp}x{yp} kr={kr} {psf:?} uniform={uniform}: pixel {j} ({}, {}): C loop {a}, gather {b}",
                                    j % xp,
                                    j / xp
                                );
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(checked, sizes.len() * 5 * 2 * 2 * 2);
    }

    #[test]
    fn fiber_kernel_is_normalised() {
        // integral of g/(2π)(g²+r²)^-3/2 over the plane is 1; over a square of half-width 200 it is
        // close to 1 - (about g/200)
        let g = 0.8;
        let mut s = 0.0;
        for dy in -200..=200 {
            for dx in -200..=200 {
                s += integrate_fiber_over_pixel(dx as f64, dy as f64, g, 1.0);
            }
        }
        assert!(s > 0.995 && s < 1.0, "{s}");
    }
}
