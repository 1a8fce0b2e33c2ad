//! `noisify`: photons/pixel float image → detector images with photon (Poisson) noise, beam flicker,
//! per-pixel calibration error, a point-spread function, read-out noise, gain and ADC offset, as
//! noisify.c does.
//!
//! The random streams are noisify.c's: one ran1 shuffle table, gaussdev spare and poidev cache shared
//! between the noise seed and the calibration seed ([`NrRandom`]), consumed in raster order. So the
//! noise loop is serial; the PSF is parallel but adds every contribution to every output pixel in
//! the C's order (see [`apply_psf`]), so the images are byte-identical to the C's.

use crate::base::c::printf::{cf, ci};
use crate::cli::noisify::{NoisifyConfig, PsfType};
use crate::io::atomic::write_atomic;
use crate::base::c::rng::NrRandom;
use crate::{Error, Result};
use rayon::prelude::*;
use std::io::Write;
use std::path::Path;

extern "C" {
    fn erf(x: f64) -> f64;
}

fn c_erf(x: f64) -> f64 {
    // SAFETY: libm's erf is a pure function of a double.
    unsafe { erf(x) }
}

/// Thomson cross section (noisify.c `r_e_sqr`).
use crate::base::consts::R_E_SQR;

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
    let photonloss_factor = 10.0f64;
    let maxwidth = xpixels.max(ypixels) as i64;
    let mut psf_radius = user_psf_radius as i64;
    if psf_radius <= 0 {
        let max_i = inimage[..pixels].par_iter().fold(|| 0.0f64, |m, &v| if m < v as f64 { v as f64 } else { m }).reduce(|| 0.0, f64::max);
        writeln!(out, "  maximum input photon/pixel: {}", cf("%g", max_i))?;
        if max_i <= 0.0 {
            writeln!(out, "WARNING: no photons, PSF skipped")?;
            return Ok(vec![0.0; pixels]);
        }
        let lost = max_i.sqrt() / photonloss_factor;
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
        .map(|&v| {
            if v <= 0.0 {
                return (0, 0.0);
            }
            let vi = v as f64;
            let mut r: i64 = if user_psf_radius != 0 {
                user_psf_radius as i64
            } else {
                let lost = vi.sqrt() / photonloss_factor;
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
        })
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
    // column 0 of rows 1..: the normal terms (source column x0 = -dx, same output row) and the
    // wrapped ones (x0 = xpixels - dx, from one row up), in the C's order
    let col0: Vec<(usize, f32)> = (1..ypixels)
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
        .collect();
    for (j, v) in col0 {
        out[j] = v;
    }
    out
}

/// A parsed 512-byte (or HEADER_BYTES) SMV header, as noisify.c's `GetFrame` keeps it.
struct HeaderFile {
    header: Vec<u8>,
    width: i32,
    height: i32,
}

/// noisify.c `ValueOf`: value after the `=` following the LAST occurrence of `keyword` in the
/// header (a C string); `None` when the keyword is absent (the C's NAN); 0 when no `=` follows.
fn value_of(header: &[u8], keyword: &str) -> Option<f64> {
    let end = header.iter().position(|&c| c == 0).unwrap_or(header.len());
    let h = &header[..end];
    let kw = keyword.as_bytes();
    let mut pos = None;
    let mut start = 0;
    while let Some(p) = find(&h[start..], kw) {
        start += p + kw.len();
        pos = Some(start);
    }
    let s = pos?;
    match find(&h[s..], b"=") {
        None => Some(0.0),
        Some(e) => Some(crate::io::text::atof(&h[s + e + 1..])),
    }
}

fn find(h: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || h.len() < needle.len() {
        return None;
    }
    h.windows(needle.len()).position(|w| w == needle)
}

fn get_frame(path: &str) -> Result<HeaderFile> {
    let bytes = std::fs::read(path).map_err(|e| Error::file(path, format!("-header: cannot read: {e}")))?;
    if bytes.len() < 512 {
        return Err(Error::file(path, "-header: shorter than a 512-byte SMV header"));
    }
    if !bytes.starts_with(b"{\nHEADER_BYT") {
        return Err(Error::file(path, "-header: does not look like an ADSC (SMV) frame"));
    }
    let mut header = bytes[..512].to_vec();
    let size = value_of(&header, "HEADER_BYTES").unwrap_or(0.0) as i64;
    if size <= 0 {
        return Err(Error::file(path, "-header: bad HEADER_BYTES"));
    }
    if size != 512 {
        if bytes.len() < size as usize {
            return Err(Error::file(path, format!("-header: file shorter than HEADER_BYTES={size}")));
        }
        header = bytes[..size as usize].to_vec();
    }
    let mut width = value_of(&header, "SIZE1").unwrap_or(f64::NAN) as i32;
    let mut height = value_of(&header, "SIZE2").unwrap_or(f64::NAN) as i32;
    if width == 0 {
        let d = value_of(&header, "DETECTOR_DIMENSIONS").unwrap_or(0.0) as i32;
        width = d;
        height = d;
    }
    if width <= 0 || height <= 0 {
        return Err(Error::file(path, "-header: no image size (SIZE1/SIZE2)"));
    }
    Ok(HeaderFile { header, width, height })
}

/// What a noisify run reports besides its stdout (for tests and library users).
#[derive(Clone, Debug, Default)]
pub struct NoisifySummary {
    pub xpixels: usize,
    pub ypixels: usize,
    pub photons_before_psf: f64,
    pub photons: f64,
    pub overloads: u64,
}

fn c_header(c: &NoisifyConfig, xp: i32, yp: i32, detsize_y: f64, xbeam: f64, ybeam: f64) -> Vec<u8> {
    let mut s = String::new();
    if c.intimage_bits == 16 {
        s += "{\nHEADER_BYTES=512;\nDIM=2;\nBYTE_ORDER=little_endian;\nTYPE=unsigned_short;\n";
    } else {
        s += "{\nHEADER_BYTES=512;\nDIM=2;\nBYTE_ORDER=little_endian;\nTYPE=long_integer;\n";
    }
    s += &format!(
        "SIZE1={xp};\nSIZE2={yp};\nPIXEL_SIZE={};\nDISTANCE={};\n",
        cf("%g", c.pixel * 1000.0),
        cf("%g", c.distance * 1000.0)
    );
    s += &format!(
        "WAVELENGTH={};\nBEAM_CENTER_X={};\nBEAM_CENTER_Y={};\n",
        cf("%g", c.lambda),
        cf("%g", xbeam * 1000.0),
        cf("%g", (detsize_y - ybeam) * 1000.0)
    );
    s += &format!("PHI={};\nOSC_START={};\nOSC_RANGE={};\n", cf("%g", c.phi0), cf("%g", c.phi0), cf("%g", c.osc));
    s += "DETECTOR_SN=000;\nBEAMLINE=fake;\n}\x0c";
    let mut b = s.into_bytes();
    while b.len() < 512 {
        b.push(b' ');
    }
    b
}

fn image_bytes(header: &[u8], bits: i32, i16img: &[u16], i32img: &[u32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(header.len() + i32img.len() * 4);
    b.extend_from_slice(header);
    if bits == 16 {
        for v in i16img {
            b.extend_from_slice(&v.to_le_bytes());
        }
    } else {
        for v in i32img {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    b
}

/// `(unsigned int) adu` and `(unsigned short int) adu` as x86-64 gcc compiles them (a 64-bit resp.
/// 32-bit truncating conversion, then the low bits), for adu ≤ 2147483647.
fn to_u32(adu: f64) -> u32 {
    (adu as i64) as u32
}
fn to_u16(adu: f64) -> u16 {
    (adu as i32) as u16
}

/// Run noisify.c on a float image in memory, writing its files and its stdout to `out`.
pub fn run(c: &NoisifyConfig, out: &mut dyn Write) -> Result<NoisifySummary> {
    let io = |e: std::io::Error| Error::setup(format!("writing stdout: {e}"));
    let Some(floatname) = c.floatfile.clone() else {
        return Err(Error::flag("-floatfile", format!("no input image given ({})", crate::cli::noisify::NOISIFY_USAGE)));
    };
    let bytes = std::fs::read(&floatname).map_err(|e| Error::file(&floatname, format!("-floatfile: cannot read: {e}")))?;
    writeln!(out, "noisify - add noise to pixels - James Holton 3-19-16").map_err(io)?;
    let mut pixels = (bytes.len() / 4) as i64;
    let (mut xpixels, mut ypixels) = (c.xpixels as i64, c.ypixels as i64);
    let (mut pixel, mut distance, mut lambda) = (c.pixel, c.distance, c.lambda);
    let mut detsize_y;
    let (mut xbeam, mut ybeam) = (c.xbeam, c.ybeam);
    let mut header: Option<HeaderFile> = None;
    if let Some(h) = &c.headerfile {
        writeln!(out, "taking header from {h}").map_err(io)?;
        let hf = get_frame(h)?;
        writeln!(out, "reading {h}").map_err(io)?;
        xpixels = hf.width as i64;
        ypixels = hf.height as i64;
        pixels = xpixels * ypixels;
        if let Some(t) = value_of(&hf.header, "PIXEL_SIZE") {
            pixel = t / 1000.0;
        }
        detsize_y = pixel * ypixels as f64;
        if let Some(t) = value_of(&hf.header, "DISTANCE") {
            distance = t / 1000.0;
        }
        if let Some(t) = value_of(&hf.header, "WAVELENGTH") {
            lambda = t / 1e10;
        }
        if let Some(t) = value_of(&hf.header, "BEAM_CENTER_X") {
            xbeam = t / 1000.0;
        }
        if let Some(t) = value_of(&hf.header, "BEAM_CENTER_Y") {
            ybeam = detsize_y - t / 1000.0;
        }
        header = Some(hf);
    }
    if pixels <= 0 {
        return Err(Error::file(&floatname, "-floatfile: empty image"));
    }
    if xpixels == 0 && ypixels == 0 {
        writeln!(out, "WARNING: guessing xy pixel dimensions.").map_err(io)?;
        xpixels = (pixels as f64).sqrt() as i64;
        ypixels = pixels / xpixels;
        while pixels != xpixels * ypixels && xpixels > 0 {
            xpixels -= 1;
            ypixels = pixels / xpixels.max(1);
        }
        if pixels != xpixels * ypixels {
            xpixels = pixels;
            ypixels = 1;
        }
    }
    if xpixels != 0 && ypixels == 0 {
        ypixels = pixels / xpixels;
    }
    if xpixels == 0 && ypixels != 0 {
        xpixels = pixels / ypixels;
    }
    if xpixels < 0 || ypixels < 0 {
        return Err(Error::flag("-detpixels", "negative image size"));
    }
    detsize_y = pixel * ypixels as f64;
    pixels = xpixels * ypixels;
    if pixels <= 0 {
        return Err(Error::flag("-detpixels", "image has no pixels"));
    }
    let np = pixels as usize;
    if bytes.len() < np * 4 {
        return Err(Error::file(&floatname, format!("-floatfile: holds {} floats, the {}x{} image needs {}", bytes.len() / 4, xpixels, ypixels, np)));
    }
    writeln!(out, "importing {} pixel intensites: {}", pixels, floatname).map_err(io)?;
    let floatimage: Vec<f32> = bytes[..np * 4].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    drop(bytes);
    if xbeam <= -1e99 {
        xbeam = detsize_x_of(pixel, xpixels) / 2.0;
    }
    if ybeam <= -1e99 {
        ybeam = detsize_y / 2.0;
    }
    let (mut calibration_noise, mut readout_noise, mut flicker_noise) = (c.calibration_noise, c.readout_noise, c.flicker_noise);
    if !c.calculate_noise {
        calibration_noise = 0.0;
        readout_noise = 0.0;
        flicker_noise = 0.0;
    }
    let mut seed: i64 = c.seed.unwrap_or_else(|| {
        -(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0))
    });
    let mut calib_seed = c.calib_seed;
    let psf_fwhm = c.psf_fwhm as f64;
    let mut s = String::new();
    s += &format!(
        "  distance={} detsize={}x{}  pixel={} meters ({}x{} pixels)\n",
        cf("%g", distance),
        cf("%g", detsize_x_of(pixel, xpixels)),
        cf("%g", detsize_y),
        cf("%g", pixel),
        xpixels,
        ypixels
    );
    s += &format!("  Xbeam={} Ybeam={}\n", cf("%g", xbeam), cf("%g", ybeam));
    if c.psftype == PsfType::Gauss {
        s += &format!("  Gaussian PSF fwhm = {} um ", cf("%g", psf_fwhm * 1e6));
    }
    if c.psftype == PsfType::Fiber {
        s += &format!("  fiber PSF fwhm = {} um ", cf("%g", psf_fwhm * 1e6));
    }
    if c.psftype != PsfType::Unknown && c.psf_radius == 0 {
        s += "  with automatic rendering radius\n";
    }
    if c.psftype != PsfType::Unknown && c.psf_radius >= 0 {
        s += &format!("  with rendering radius: {}\n", c.psf_radius);
    }
    s += &format!("  seed: {}\n", ci("%ld", seed));
    s += &format!("  calibration noise seed: {}\n", ci("%ld", calib_seed));
    s += &format!("  calibration_noise = {} %\n", cf("%g", calibration_noise * 100.0));
    s += &format!("  input file scale = {}\n", cf("%g", c.photon_scale));
    s += &format!("  readout_noise = {} ADU\n", cf("%g", readout_noise));
    s += &format!("  flicker_noise = {} %\n", cf("%g", flicker_noise * 100.0));
    s += &format!("  quantum_gain = {} ADU/photon\n", cf("%g", c.quantum_gain));
    s += &format!("  adc_offset = {} ADU\n\n", cf("%g", c.adc_offset));
    out.write_all(s.as_bytes()).map_err(io)?;

    // photon scale
    let mut max_i = 0.0f64;
    let factor = c.fluence * R_E_SQR;
    let mut photonimage = vec![0.0f32; np];
    for (p, &v) in photonimage.iter_mut().zip(&floatimage) {
        let vi = v as f64;
        if max_i < vi {
            max_i = vi;
        }
        if vi < 0.0 {
            writeln!(out, "WARNING: negative intensity in {}: {}", floatname, cf("%g", vi)).map_err(io)?;
        }
        *p = (factor * c.photon_scale * vi) as f32;
    }
    drop(floatimage);
    writeln!(out, "maximum value in input file: {} ( {} on photon scale)", cf("%g", max_i), cf("%g", max_i * c.photon_scale * c.fluence * R_E_SQR))
        .map_err(io)?;

    let (xu, yu) = (xpixels as usize, ypixels as usize);
    if !c.calculate_noise && c.psftype != PsfType::Unknown && psf_fwhm > 0.0 {
        writeln!(out, "  applying PSF to noiseless image width = {} pixels", cf("%g", psf_fwhm / pixel)).map_err(io)?;
        photonimage = apply_psf(&photonimage, xu, yu, c.psftype, psf_fwhm / pixel, c.psf_radius, out).map_err(io)?;
    }

    // noiseless int image
    let conv = |adu: f64| -> (u16, u32) {
        let mut adu = adu;
        if adu > 2147483647.0 {
            adu = 2147483647.0;
        }
        if adu > 65535.0 {
            adu = 65535.0;
        }
        (to_u16(adu), to_u32(adu))
    };
    let (int16, int32): (Vec<u16>, Vec<u32>) = photonimage.par_iter().map(|&p| conv(p as f64 * c.quantum_gain + c.adc_offset)).unzip();
    let own_header = c_header(c, xpixels as i32, ypixels as i32, detsize_y, xbeam, ybeam);
    let hbytes: &[u8] = header.as_ref().map_or(&own_header, |h| &h.header);
    if c.intimage_bits == 16 {
        writeln!(out, "writing {} as {} 2-byte integers", c.intfile, pixels).map_err(io)?;
    } else {
        writeln!(out, "writing {} as {} 4-byte integers", c.intfile, pixels).map_err(io)?;
    }
    write_atomic(Path::new(&c.intfile), &image_bytes(hbytes, c.intimage_bits, &int16, &int32))?;
    if !c.calculate_noise {
        write_png(c, xu, yu, &int16, &int32)?;
    }
    if c.write_pgm {
        writeln!(out, "writing {} as 1-byte integers", c.pgmfile).map_err(io)?;
        let mut b = format!("P5\n{} {}\n# pixels scaled by 1\n255\n", xpixels, ypixels).into_bytes();
        b.extend(int16.iter().map(|&v| v.min(255) as u8));
        write_atomic(Path::new(&c.pgmfile), &b)?;
    }
    let mut summary = NoisifySummary { xpixels: xu, ypixels: yu, ..Default::default() };
    if !c.calculate_noise {
        return Ok(summary);
    }
    drop((int16, int32));

    // noise: one serial stream, the C's order
    let mut rng = NrRandom::new();
    let mut sum = 0.0f64;
    for p in photonimage.iter_mut() {
        let mut photons0 = *p as f64;
        if flicker_noise > 0.0 {
            photons0 *= 1.0 + flicker_noise * rng.gaussdev(&mut seed) as f64;
        }
        if calibration_noise > 0.0 {
            photons0 *= 1.0 + calibration_noise * rng.gaussdev(&mut calib_seed) as f64;
        }
        *p = rng.poidev(photons0 as f32, &mut seed);
        sum += *p as f64;
    }
    summary.photons_before_psf = sum;
    if c.psftype != PsfType::Unknown && psf_fwhm > 0.0 {
        writeln!(out, "{} photons on noise image before PSF", cf("%.0f", sum)).map_err(io)?;
        writeln!(out, "  applying PSF width = {} um", cf("%g", psf_fwhm * 1e6)).map_err(io)?;
        photonimage = apply_psf(&photonimage, xu, yu, c.psftype, psf_fwhm / pixel, c.psf_radius, out).map_err(io)?;
    }
    let mut sum = 0.0f64;
    let mut overloads = 0u64;
    let mut int16 = vec![0u16; np];
    let mut int32 = vec![0u32; np];
    for i in 0..np {
        sum += photonimage[i] as f64;
        let mut adu = photonimage[i] as f64 * c.quantum_gain + c.adc_offset;
        if readout_noise > 0.0 {
            adu += readout_noise * rng.gaussdev(&mut seed) as f64;
        }
        if adu > 2147483647.0 {
            adu = 2147483647.0;
            if c.intimage_bits == 32 {
                overloads += 1;
            }
        }
        int32[i] = to_u32(adu);
        if adu > 65535.0 {
            adu = 65535.0;
            if c.intimage_bits == 16 {
                overloads += 1;
            }
        }
        int16[i] = to_u16(adu);
    }
    writeln!(out, "{} photons on noise image ({} overloads)", cf("%.0f", sum), overloads).map_err(io)?;
    writeln!(out, "writing {} as {}-byte integers", c.noisefile, if c.intimage_bits == 16 { 2 } else { 4 }).map_err(io)?;
    write_atomic(Path::new(&c.noisefile), &image_bytes(hbytes, c.intimage_bits, &int16, &int32))?;
    write_png(c, xu, yu, &int16, &int32)?;
    summary.photons = sum;
    summary.overloads = overloads;
    let _ = lambda;
    Ok(summary)
}

/// `--png`: a preview of the integer image just written (the port's option, not noisify.c's).
fn write_png(c: &NoisifyConfig, xu: usize, yu: usize, int16: &[u16], int32: &[u32]) -> Result<()> {
    let Some(p) = &c.png else { return Ok(()) };
    let adu: Vec<f32> = if c.intimage_bits == 16 { int16.iter().map(|&v| v as f32).collect() } else { int32.iter().map(|&v| v as f32).collect() };
    crate::io::png::write_png_preview(Path::new(p), &adu, xu, yu)
}

fn detsize_x_of(pixel: f64, xpixels: i64) -> f64 {
    pixel * xpixels as f64
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
