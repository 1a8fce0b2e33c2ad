//! Poisson noise image, in one of two modes ([`NoiseMode`]).
//!
//! * `c` (the default): as the C's serial loop. The noise stream is one long ran1 sequence consumed in
//!   raster order, so this loop stays serial: any other order would change every pixel after the
//!   first difference. Bit-identical to nanoBragg's noise image.
//! * `fast`: a counter-based generator (ChaCha8 from `rand_chacha`, one stream per row keyed by the
//!   seed), parallel over rows, the same for a seed at any thread count; the same distributions as
//!   the C's `poidev` (exact Poisson up to a mean of 1e6, the C's Gaussian approximation above), but
//!   not the C's draws. See [`noise_image_fast`].
use crate::base::image::ImageView;
use crate::base::c::rng::{is_large_mean, large_mean_terms_lanes, DeviateCache, NrRandom, Ran1Ahead, TERMS_LANES};
use rand_chacha::rand_core::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Poisson, StandardNormal};
use rayon::prelude::*;

/// Which random numbers make the noise image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoiseMode {
    /// The C's single ran1 stream in raster order: bit-identical to nanoBragg (serial).
    #[default]
    C,
    /// Counter-based (ChaCha8, one stream per row), parallel over rows: same distributions, not
    /// C-identical, the same image for a seed at any thread count.
    Fast,
}

impl NoiseMode {
    pub fn name(self) -> &'static str {
        match self {
            NoiseMode::C => "c",
            NoiseMode::Fast => "fast",
        }
    }
    pub fn parse(s: &str) -> Option<NoiseMode> {
        match s.to_ascii_lowercase().as_str() {
            "c" | "serial" | "exact" => Some(NoiseMode::C),
            "fast" | "parallel" => Some(NoiseMode::Fast),
            _ => None,
        }
    }
}

/// Result of the noise stage.
pub struct NoiseImage {
    pub pixels: Vec<u16>,
    /// Sum of the Poisson deviates (printed as "%.0f photons on noise image").
    pub photons: f64,
    pub overloads: u64,
}

/// `roi` = inclusive [xmin, xmax, ymin, ymax] in pixels (x = fast), as resolved by the C.
///
/// Row-major over `spixels` rows of `fpixels`; only pixels inside the ROI draw a deviate (masked ROI
/// pixels hold 0 in `float` and still draw, as in the C); the rest stay 0. Each pixel is
/// `poidev(mean) + adc_offset` in double, capped at 65535 (counted as an overload) and truncated to
/// u16. A value below 0 (possible only with a negative `-adc`) is clamped to 0, where the C's
/// conversion would be undefined.
pub fn noise_image(
    rng: &mut NrRandom,
    seed: &mut i64,
    image: &ImageView,
    adc_offset: f64,
) -> NoiseImage {
    let fpixels = image.fpixels();
    let mut pixels = vec![0u16; fpixels * image.spixels()];
    let (photons, overloads) = noise_rows(rng, seed, image, adc_offset, |s, row, _| {
        pixels[s * fpixels..(s + 1) * fpixels].copy_from_slice(row);
        Ok(())
    })
    .expect("collecting rows cannot fail");
    NoiseImage { pixels, photons, overloads }
}

/// The noise image's draws as 32-bit counts (deviate + `adc_offset`, without the SMV's 65535 cap):
/// the CBF and NeXus images. The same random stream as [`noise_image`] for the same RNG state.
pub fn noise_counts(rng: &mut NrRandom, seed: &mut i64, image: &ImageView, adc_offset: f64) -> Vec<i32> {
    let mut counts = Vec::with_capacity(image.pixels.len());
    noise_rows(rng, seed, image, adc_offset, |_, _, row32| {
        counts.extend_from_slice(row32);
        Ok(())
    })
    .expect("collecting rows cannot fail");
    counts
}

/// Generate the noise image row by row into `w` (after the header, which the caller writes):
/// returns (photons, overloads).
pub fn write_noise_rows(
    w: &mut (dyn std::io::Write + Send),
    rng: &mut NrRandom,
    seed: &mut i64,
    image: &ImageView,
    adc_offset: f64,
) -> std::io::Result<(f64, u64)> {
    let mut io_error = None;
    let r = noise_rows(rng, seed, image, adc_offset, |_, row, _| {
        crate::io::write_le(w, row).map_err(|e| {
            let msg = e.to_string();
            io_error = Some(e);
            crate::Error::Output { path: Default::default(), reason: msg }
        })
    });
    match (r, io_error) {
        (Ok(c), _) => Ok(c),
        (Err(_), Some(e)) => Err(e),
        (Err(e), None) => Err(std::io::Error::other(e.to_string())),
    }
}

/// Rows per block whose [`RowAhead`]s are computed in parallel ahead of the serial draws.
const BLOCK_ROWS: usize = 16;

/// What a row's serial draws need that does not depend on the random stream, computed ahead of them
/// (on other threads where there are any): poidev's `g = exp(-xm)` of each pixel (float negation,
/// exp in double, stored as float; used only for means below 12; 4 lanes wide, [`poisson_g_row`]),
/// and the per-mean terms of each pixel with a mean from 12 to 1e6 (`large_mean_terms`: a square
/// root and three logarithms, eight means at a time in vectors, [`large_mean_terms_lanes`]) by column.
#[derive(Clone, Debug, Default)]
pub struct RowAhead {
    g: Vec<f32>,
    large: Vec<(u32, [f32; 3])>,
}

impl RowAhead {
    /// The row's values from its float pixels (the buffers are reused).
    pub fn of(&mut self, row: &[f32]) {
        self.g.clear();
        self.g.resize(row.len(), 0.0);
        self.large.clear();
        poisson_g_row(&mut self.g, row, &mut self.large);
    }

    /// The row's values ahead of it.
    pub fn new(row: &[f32]) -> Self {
        let mut a = RowAhead::default();
        a.of(row);
        a
    }
}

/// The C's serial noise loop one row at a time (nanoBragg.c's noise loop): every ROI pixel of the row
/// in raster order draws `poidev(mean)` from the one ran1 stream, plus the ADC offset, capped at 65535
/// for the SMV image. Rows must come in order; [`noise_rows`] drives it over a whole image, and a run
/// that has its rows as the render finishes them feeds it directly.
///
/// The uniforms come from [`Ran1Ahead`] (ran1 in blocks, ahead of the pixels that take them). Most
/// pixels of a sparse image take one uniform and give 0; [`draw_deviates`] lists only the others
/// with their deviates, and the photon sum ([`add_photons`]) and the pixels ([`convert_row`]) are
/// made from that list: the same pixels, sums and stream state as a per-pixel `poidev` loop.
pub struct CNoiseRows {
    ahead: Ran1Ahead,
    cache: DeviateCache,
    adc_offset: f64,
    roi: crate::base::image::Roi,
    /// Sum of the deviates so far ("%.0f photons on noise image").
    pub photons: f64,
    /// Pixels capped at 65535 so far.
    pub overloads: u64,
    row: Vec<u16>,
    row32: Vec<i32>,
    /// The row's pixels whose deviate may not be 0 (column within the ROI, deviate), in order.
    others: Vec<(u32, f32)>,
}

impl CNoiseRows {
    /// The stream continuing from `rng`/`seed` (the experiment's state after the misset and mosaic
    /// draws), for rows of `fpixels` with `roi`.
    pub fn new(rng: NrRandom, seed: i64, roi: crate::base::image::Roi, fpixels: usize, adc_offset: f64) -> Self {
        let (table, cache) = rng.into_parts();
        CNoiseRows {
            ahead: Ran1Ahead::new(table, seed),
            cache,
            adc_offset,
            roi,
            photons: 0.0,
            overloads: 0,
            row: vec![0; fpixels],
            row32: vec![0; fpixels],
            others: Vec::new(),
        }
    }

    /// Draw row `s` from its float pixels and their [`RowAhead`]: the SMV pixels and the uncapped
    /// 32-bit counts (saturating; NaN becomes 0).
    pub fn draw(&mut self, s: usize, float: &[f32], ahead: &RowAhead) -> (&[u16], &[i32]) {
        if self.roi.slow.contains(&s) {
            let cols = self.roi.fast.clone();
            // 0 outside the ROI's columns ([`convert_row`] writes every pixel within them)
            self.row[..cols.start].fill(0);
            self.row[cols.end..].fill(0);
            self.row32[..cols.start].fill(0);
            self.row32[cols.end..].fill(0);
            // the ROI's pixels with a large mean, their columns from the ROI's first
            let in_roi = |c: usize| ahead.large.partition_point(|&(i, _)| (i as usize) < c);
            let large = &ahead.large[in_roi(cols.start)..in_roi(cols.end)];
            let means = Means { xm: &float[cols.clone()], g: &ahead.g[cols.clone()], large, first: cols.start };
            draw_deviates(&mut self.ahead, &mut self.cache, means, &mut self.others);
            self.photons = add_photons(self.photons, &self.others);
            self.overloads += convert_row(&self.others, self.adc_offset, &mut self.row[cols.clone()], &mut self.row32[cols]);
        } else {
            self.row.fill(0);
            self.row32.fill(0);
        }
        (&self.row, &self.row32)
    }

    /// The stream's state after the last row (the caller's RNG continues from it).
    pub fn into_state(self) -> (NrRandom, i64) {
        let (table, seed) = self.ahead.finish();
        (NrRandom::from_parts(table, self.cache), seed)
    }
}

/// `poidev(xm[i])` for every pixel in order, with `g[i]` = exp(−xm[i]) for means below 12
/// (nanoBragg.c's noise loop, `test = poidev(floatimage[i], &seed)`); `others` gets (i, deviate) of
/// every pixel not settled by one uniform, in order (all other deviates are +0).
///
/// A mean below 12 whose first uniform is at most g (most pixels of a sparse image) takes one draw
/// and gives 0, with no store: [`ZERO_RUN`] pixels at a time are checked against their uniforms
/// side by side and, all settled so, skipped at once; any other run goes pixel by pixel
/// ([`draw_one`]). poidev's cached `oldm`/`g` are set as the C's would be before each larger mean
/// and at the end.
fn draw_deviates(src: &mut Ran1Ahead, cache: &mut DeviateCache, means: Means, others: &mut Vec<(u32, f32)>) {
    let (xm, g) = (means.xm, means.g);
    others.clear();
    let mut at = DrawAt { pos: src.position(), last: usize::MAX, large: 0 };
    let whole = xm.len() - xm.len() % ZERO_RUN;
    let mut i = 0;
    while i < whole {
        let (m, gs) = (&xm[i..i + ZERO_RUN], &g[i..i + ZERO_RUN]);
        let settled = src.ahead_at(at.pos, ZERO_RUN).is_some_and(|u| {
            // `&`, not `&&`: one vector comparison of the run, no branch per pixel
            m.iter().zip(gs).zip(u).fold(true, |all, ((&m, &g), &u)| all & (m < 12.0) & (u <= g))
        });
        if settled {
            at.pos += ZERO_RUN;
            at.last = i + ZERO_RUN - 1;
        } else {
            for j in i..i + ZERO_RUN {
                draw_one(src, cache, &mut at, means, j, others);
            }
        }
        i += ZERO_RUN;
    }
    for j in whole..xm.len() {
        draw_one(src, cache, &mut at, means, j, others);
    }
    src.set_position(at.pos);
    note_last(cache, xm, g, at.last);
}

/// Pixels whose first uniforms [`draw_deviates`] compares at once.
const ZERO_RUN: usize = 16;

/// A row's means as [`draw_deviates`] takes them: the ROI's float pixels, their exp(−mean), and the
/// [`large_mean_terms`](crate::base::c::rng::large_mean_terms) of those with a large mean (columns counted from `first`), in order.
#[derive(Clone, Copy)]
struct Means<'a> {
    xm: &'a [f32],
    g: &'a [f32],
    large: &'a [(u32, [f32; 3])],
    first: usize,
}

/// Where [`draw_deviates`] is: the stream's position (held here between out-of-line calls), the
/// last pixel with a mean below 12 not yet noted in poidev's cache (usize::MAX: none), and the next
/// entry of the large means' terms.
struct DrawAt {
    pos: usize,
    last: usize,
    large: usize,
}

/// poidev's statics after the small mean of pixel `last` (none for usize::MAX).
#[inline(always)]
fn note_last(cache: &mut DeviateCache, xm: &[f32], g: &[f32], last: usize) {
    if let (Some(&m), Some(&g)) = (xm.get(last), g.get(last)) {
        cache.note_small(m, g);
    }
}

/// Pixel `i`'s deviate (see [`draw_deviates`]): one uniform and no entry for a mean below 12 it
/// settles, else the rest out of line ([`more_draws`], [`DeviateCache::poidev_large`] with the terms
/// computed ahead, [`DeviateCache::poidev`]).
#[inline(always)]
fn draw_one(src: &mut Ran1Ahead, cache: &mut DeviateCache, at: &mut DrawAt, means: Means, i: usize, others: &mut Vec<(u32, f32)>) {
    let (m, gi) = (means.xm[i], means.g[i]);
    // `(xm as f64) < 12.0` exactly (the conversion is exact; NaN is false in both)
    if m < 12.0 {
        let u = src.next_at(&mut at.pos);
        if u > gi {
            src.set_position(at.pos);
            others.push((i as u32, more_draws(src, u, gi)));
            at.pos = src.position();
        }
        at.last = i;
    } else {
        note_last(cache, means.xm, means.g, std::mem::replace(&mut at.last, usize::MAX));
        src.set_position(at.pos);
        let d = match means.large.get(at.large) {
            Some(&(c, terms)) if c as usize == means.first + i => {
                at.large += 1;
                cache.poidev_large(m, terms, src)
            }
            // NaN, or a mean above 1e6 (the Gaussian approximation)
            _ => cache.poidev(m, src),
        };
        others.push((i as u32, d));
        at.pos = src.position();
    }
}

/// The rest of poidev's product-of-uniforms loop after a first uniform `t` above `g`: `em` counts the
/// further draws until the float product `t *= ran1()` is at most g.
#[inline(never)]
fn more_draws(src: &mut Ran1Ahead, mut t: f32, g: f32) -> f32 {
    let mut em = 0.0f32;
    loop {
        em += 1.0;
        t *= src.next();
        if t <= g {
            return em;
        }
    }
}

/// `photons += dev` for every pixel in order (the C's `sum += test`, in double), from the deviates
/// that may not be 0 ([`draw_deviates`]'s list): the others add +0, which changes no sum but −0,
/// and the sum starts at +0 and never becomes −0 (x + y is −0 only when both are).
///
/// When the sum so far is a non-negative integer and every deviate an integer from 0 to 2^24 (all
/// but the Gaussian approximation's and NaN, for means up to 1e6), each partial sum is an integer
/// below 2^53 and so exact: the row is summed as integers, without a serial chain of rounding adds.
fn add_photons(photons: f64, others: &[(u32, f32)]) -> f64 {
    const TWO_53: u64 = 1 << 53;
    let integral = photons >= 0.0 && photons.to_bits() >> 63 == 0 && photons < TWO_53 as f64 && photons == photons.trunc();
    if integral {
        // `d as u32` saturates (NaN to 0); k <= 2^24 is exact as a float, so it equals d only when
        // d is that integer (or −0, which adds as +0 to a sum that is not −0)
        let (sum, all) = others.iter().fold((0u64, true), |(sum, all), &(_, d)| {
            let k = d as u32;
            (sum + k as u64, all & (k <= 1 << 24) & (k as f32 == d))
        });
        if all && photons as u64 + sum <= TWO_53 {
            return (photons as u64 + sum) as f64;
        }
    }
    // deviate first, as the per-pixel loop compiled (x86 keeps the first of two NaN operands)
    others.iter().fold(photons, |p, &(_, d)| d as f64 + p)
}

/// The pixels of the ROI row (nanoBragg.c: `test += adc_offset; if (test > 65535) { test = 65535;
/// overloads++; } intimage = (unsigned short) test;`) from the deviates that may not be 0: every
/// other pixel is a deviate of +0, one value for all. The SMV pixels and the uncapped 32-bit counts
/// (`as` saturates: negatives and NaN become 0 in u16, NaN 0 in i32); returns the overloads.
fn convert_row(others: &[(u32, f32)], adc_offset: f64, row: &mut [u16], row32: &mut [i32]) -> u64 {
    let pixel = |d: f32| {
        let test = d as f64 + adc_offset;
        let over = test > 65535.0;
        (if over { 65535 } else { test as u16 }, test as i32, over as u64)
    };
    let (zero, zero32, zero_over) = pixel(0.0);
    row.fill(zero);
    row32.fill(zero32);
    let mut overloads = zero_over * row.len() as u64;
    for &(i, d) in others {
        let (px, px32, over) = pixel(d);
        row[i as usize] = px;
        row32[i as usize] = px32;
        overloads = overloads + over - zero_over;
    }
    overloads
}

/// The serial noise loop, handing each finished row to `sink` in order. The work that does not depend
/// on the random stream ([`RowAhead`]) is computed for the next block of rows on other threads while
/// this block draws its deviates.
fn noise_rows(
    rng: &mut NrRandom,
    seed: &mut i64,
    image: &ImageView,
    adc_offset: f64,
    mut sink: impl FnMut(usize, &[u16], &[i32]) -> crate::Result<()> + Send,
) -> crate::Result<(f64, u64)> {
    let (float, fpixels, spixels) = (image.data(), image.fpixels(), image.spixels());
    let row = |s: usize| &float[s * fpixels..(s + 1) * fpixels];
    let rows_of = |b: usize| b * BLOCK_ROWS..((b + 1) * BLOCK_ROWS).min(spixels);
    // block b's rows ahead into `a` (two blocks, reused: written in place row by row)
    let ahead_block = |b: usize, a: &mut Vec<RowAhead>| {
        let first = b * BLOCK_ROWS;
        a.resize_with(rows_of(b).len(), RowAhead::default);
        a.par_iter_mut().enumerate().for_each(|(i, a)| a.of(row(first + i)));
    };
    let blocks = spixels.div_ceil(BLOCK_ROWS);
    let mut rows = CNoiseRows::new(rng.clone(), *seed, image.roi.clone(), fpixels, adc_offset);
    let (mut current, mut next) = (Vec::new(), Vec::new());
    if blocks > 0 {
        ahead_block(0, &mut current);
    }
    for b in 0..blocks {
        let ((), drawn) = rayon::join(
            || {
                if b + 1 < blocks {
                    ahead_block(b + 1, &mut next)
                }
            },
            || -> crate::Result<()> {
                for s in rows_of(b) {
                    let (px, px32) = rows.draw(s, row(s), &current[s - b * BLOCK_ROWS]);
                    sink(s, px, px32)?;
                }
                Ok(())
            },
        );
        drawn?;
        std::mem::swap(&mut current, &mut next);
    }
    let (photons, overloads) = (rows.photons, rows.overloads);
    (*rng, *seed) = rows.into_state();
    Ok((photons, overloads))
}

/// [`poisson_g_fast_row`] compiled 8 lanes wide where the CPU has AVX-512, 4 where it has AVX2 (a
/// closure under `with_widest` is not reliably inlined into it), with fused multiply-adds there;
/// without them (below AVX2, where they would be library calls) the plain loop. Either vouches
/// only for libm's float (see [`poisson_g_fast`]).
fn poisson_g_fast_dispatch(g: &mut [f32], xm: &[f32]) {
    if crate::base::cpu::fma_is_fast() {
        crate::base::cpu::widest_call!(poisson_g_fast_row_fused(g: &mut [f32], xm: &[f32]) -> ())
    } else {
        poisson_g_fast_row::<false>(g, xm)
    }
}

/// [`poisson_g_fast_row`] with fused multiply-adds, for [`poisson_g_fast_dispatch`]'s AVX2 and
/// AVX-512 builds.
#[inline(always)]
fn poisson_g_fast_row_fused(g: &mut [f32], xm: &[f32]) {
    poisson_g_fast_row::<true>(g, xm)
}

/// poidev's `g=exp(-xm)` for means below 12 (float negation, exp in double, stored as float), 0 for
/// the others (unused there), and in `large` the [`large_mean_terms`](crate::base::c::rng::large_mean_terms) of the means from 12 to 1e6 by
/// column. Mostly by [`poisson_g_fast`], whose loop vectorizes; the few pixels it cannot vouch for
/// (and every mean outside 0..12, the large ones among them) go through libm's exp as the C's do.
fn poisson_g_row(g: &mut [f32], xm: &[f32], large: &mut Vec<(u32, [f32; 3])>) {
    poisson_g_fast_dispatch(g, xm);
    // a few rows in ten have a pixel to fix (one mean in 2000–4000, or a mean outside 0..12: a
    // scan and a libm exp or two for such a row)
    if !g.iter().fold(false, |any, g| any | g.is_nan()) {
        return;
    }
    let first = large.len();
    for (i, (g, &xm)) in g.iter_mut().zip(xm).enumerate() {
        if g.is_nan() {
            *g = if (xm as f64) < 12.0 { ((-xm) as f64).exp() as f32 } else { 0.0 };
            if is_large_mean(xm) {
                large.push((i as u32, [f32::NAN; 3]));
            }
        }
    }
    // the large means' terms eight at a time, in vectors (libm's floats: `large_mean_terms_lanes`)
    for chunk in large[first..].chunks_mut(TERMS_LANES) {
        let m: [f32; TERMS_LANES] = std::array::from_fn(|l| chunk.get(l).map_or(12.0, |&(i, _)| xm[i as usize]));
        for ((_, terms), t) in chunk.iter_mut().zip(large_mean_terms_lanes(&m)) {
            *terms = t;
        }
    }
}

/// [`poisson_g_fast`] of every mean (NaN where it cannot vouch for the float).
#[inline(always)]
fn poisson_g_fast_row<const FMA: bool>(g: &mut [f32], xm: &[f32]) {
    for (g, &xm) in g.iter_mut().zip(xm) {
        *g = poisson_g_fast::<FMA>(xm);
    }
}

/// `exp(-xm)` rounded to float as the C's `g=exp(-xm)` stores it, for 0 <= xm < 12, without a libm
/// call; NaN where it cannot vouch for the float (outside that range, or within 2^-36 of a float
/// rounding boundary: one mean in 2000–4000 of those above 2^-24, 117 278 of the 1.09e9 float means
/// in 0..12).
///
/// exp(x) = 2^k·exp(r) with k = round(x/ln 2) and r = x − k·ln 2 (ln 2 in two parts, k·LN2_HI exact),
/// |r| <= ln 2/2, and exp(r) by its Taylor series to r^9/9! (Estrin's scheme: three levels of
/// multiply-add instead of Horner's nine), fused (`FMA`) or not: the truncation is below 7.3e-12
/// (|r|^10/10!, and the rest), a relative 1.03e-11 of exp(r) >= 0.707, with the roundings a few units
/// of 2^-53 more. libm's exp is within one unit of 2^-52, so both are within 2^-36 (1.46e-11) of
/// the value computed here, and round to the same float unless a rounding boundary lies that close:
/// that is tested, and such means return NaN (libm's exp is then used). Every float mean in 0..12
/// was checked against glibc's exp, fused and not (`poisson_g_is_libms_exhaustive`).
#[inline(always)]
fn poisson_g_fast<const FMA: bool>(xm: f32) -> f32 {
    const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
    const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
    // 1.5·2^52: adding it rounds to an integer held in the low bits of the sum
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    // 1/0!, 1/1!, …, 1/9!
    const C: [f64; 10] = [1.0, 1.0, 0.5, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5_040.0, 1.0 / 40_320.0, 1.0 / 362_880.0];
    let madd = |a: f64, b: f64, c: f64| if FMA { a.mul_add(b, c) } else { a * b + c };
    let ok = xm >= 0.0 && (xm as f64) < 12.0;
    let x = if ok { (-xm) as f64 } else { 0.0 };
    let kd = madd(x, std::f64::consts::LOG2_E, SHIFT);
    let kf = kd - SHIFT; // k in -18..=0
    let k = kd.to_bits().wrapping_sub(SHIFT.to_bits()) as i64;
    let r = madd(-kf, LN2_LO, madd(-kf, LN2_HI, x));
    let (r2, a) = (r * r, |i: usize| madd(r, C[i + 1], C[i]));
    let r4 = r2 * r2;
    let p = madd(r4 * r4, a(8), madd(r4, madd(r2, a(6), a(4)), madd(r2, a(2), a(0))));
    let e = p * f64::from_bits(((1023 + k) as u64) << 52);
    let g = e as f32;
    let d = e * (1.0 / 68_719_476_736.0); // 2^-36 of the value
    if ok && crate::base::lane_math::rounds_to_one_float(e, d) {
        g
    } else {
        f32::NAN
    }
}

/// Pixels per batch that [`write_noise_rows_fast`] draws (in parallel) while the previous batch is
/// written: two batches of u16 are its whole image memory (1 MiB), whatever the detector size.
pub const FAST_BATCH_PIXELS: usize = 1 << 18;

/// 2⁻¹⁶: the weight of a pixel's 16 leading random bits.
const INV_2_16: f64 = 1.0 / 65536.0;

/// The generators of row `s` in fast mode: ChaCha8 keyed by the seed, stream `2s` for the 16 leading
/// bits of every pixel of the row (one block fill per row, in pixel order), stream `2s + 1`
/// ([`More`]) for the further draws of the few pixels that need them (in pixel order). Any row's draws
/// can be made on its own, so rows run in parallel and the image does not depend on how they are
/// scheduled.
fn lead_rng(seed: i64, s: usize) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed as u64);
    rng.set_stream(2 * s as u64);
    rng
}

/// Row `s`'s stream of further draws (see [`lead_rng`]), set up on first use (most rows of a
/// sparse image never need it).
struct More {
    seed: i64,
    s: usize,
    rng: Option<ChaCha8Rng>,
}

impl More {
    fn new(seed: i64, s: usize) -> More {
        More { seed, s, rng: None }
    }
    fn get(&mut self) -> &mut ChaCha8Rng {
        let (seed, s) = (self.seed, self.s);
        self.rng.get_or_insert_with(|| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed as u64);
            rng.set_stream(2 * s as u64 + 1);
            rng
        })
    }
}

/// A uniform deviate in [0, 1) with 53 random bits.
#[inline]
fn uniform53(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// `true` when a pixel of mean `m` whose 16 leading bits are `h` draws 0 whatever its further bits:
/// its uniform u = (h + v)·2⁻¹⁶ (v in [0, 1) from the further bits) is below P(X = 0) = exp(−m) for
/// every v, because (h + 1)·2⁻¹⁶ is at most the Taylor polynomial of degree 3 of exp(−m) (a lower
/// bound for m ≥ 0), less 2⁻¹⁸ for its rounding in single precision (< 1e−6 for m < 2, the only means
/// where the polynomial exceeds 2⁻¹⁶). A mean that is zero, negative or NaN draws 0. No exponential,
/// no branch: [`fast_rows`] tests 16 pixels at once, and most pixels (mean ≪ 1) end here.
#[inline(always)]
fn surely_zero(m: f32, h: u16) -> bool {
    let t = (h as f32 + 1.0) * INV_2_16 as f32;
    let poly = 1.0 - m * (1.0 - m * (0.5 - m * (1.0 / 6.0))) - 1.0 / 262144.0;
    !(m > 0.0) | (t <= poly)
}

/// A fast-mode deviate for mean `m` where [`surely_zero`] could not settle it (out of line: rare for
/// the usual means ≪ 1), its pixel's 16 leading bits `h`, further draws from `more`. The C's `poidev`
/// regimes: a mean above 1e6 gives the C's Gaussian approximation `xm + sqrt(xm)·N(0,1)` (not rounded,
/// as the C's), a mean up to 1e6 an exact Poisson deviate: below 12 by inversion of the cumulative
/// distribution with the uniform (h + v)·2⁻¹⁶ (v: 53 further bits), from 12 by `rand_distr`'s Poisson
/// sampler. (A mean that is zero, negative or NaN gives 0 in [`surely_zero`]; the C's would give 0
/// for a mean ≤ 0 and never return for NaN.)
#[inline(never)]
fn slow_deviate(more: &mut More, m: f64, h: u16) -> f64 {
    if m < 12.0 {
        return invert_small(more, m, h);
    }
    other_deviate(more.get(), m)
}

/// Inversion for a mean below 12: the smallest k with P(X <= k) >= u, u = (h + v)·2⁻¹⁶. The 16
/// leading bits `h` place u in [h·2⁻¹⁶, (h + 1)·2⁻¹⁶); the further bits v (53, from `more`) are drawn
/// only when a step of the cumulative distribution falls inside that interval (rarely: the steps are
/// few and the interval short), as they could not change k otherwise.
fn invert_small(more: &mut More, m: f64, h: u16) -> f64 {
    let lo = h as f64 * INV_2_16;
    let hi = (h as f64 + 1.0) * INV_2_16;
    let mut p = (-m).exp();
    let mut cdf = p;
    let mut k = 0u32;
    let mut u = None;
    loop {
        if cdf >= hi {
            break; // P(X <= k) >= every u in the interval
        }
        if cdf >= lo {
            // the step is inside the interval: v decides
            let u = *u.get_or_insert_with(|| (h as f64 + uniform53(more.get())) * INV_2_16);
            if u <= cdf {
                break;
            }
        }
        k += 1;
        // P(X = k) = P(X = k - 1)·m/k (a product by 1/k from a table: no division for k < 64)
        p *= m * INV_K.get(k as usize).copied().unwrap_or(1.0 / k as f64);
        if p == 0.0 {
            break; // u is beyond the last representable step of the CDF (probability < 1e-300)
        }
        cdf += p;
    }
    k as f64
}

/// 1/k for k < 64 (entry 0 unused).
static INV_K: [f64; 64] = {
    let mut t = [0.0; 64];
    let mut k = 1;
    while k < 64 {
        t[k] = 1.0 / k as f64;
        k += 1;
    }
    t
};

/// Means from 12 to 1e6 (Poisson by `rand_distr`) and above 1e6 (the C's Gaussian approximation).
fn other_deviate(rng: &mut ChaCha8Rng, m: f64) -> f64 {
    if m > 1.0e6 {
        let g: f64 = StandardNormal.sample(rng);
        // the C: `return xm+sqrt(xm)*gaussdev(idum);` in double, returned as float (+inf for +inf)
        return crate::base::c::rng::gaussian_approximation(m, g) as f32 as f64;
    }
    match Poisson::new(m) {
        Ok(d) => d.sample(rng),
        Err(_) => 0.0,
    }
}

/// The fast-mode noise image (see [`NoiseMode::Fast`]): rows in parallel, row `s` drawing from its
/// own ChaCha8 streams (see [`lead_rng`]) for the ROI pixels in order. Pixel values, overloads and the
/// photon sum as in [`noise_image`]; the photon sum is added in row order, so it too is independent
/// of the thread count. [`write_noise_rows_fast`] streams the same pixels to a file.
pub fn noise_image_fast(seed: i64, image: &ImageView, adc_offset: f64) -> NoiseImage {
    let mut pixels = vec![0u16; image.pixels.len()];
    let rows = fast_rows(seed, image, 0, &mut pixels, smv_pixel, adc_offset);
    let photons = rows.iter().map(|r| r.0).sum();
    let overloads = rows.iter().map(|r| r.1).sum();
    NoiseImage { pixels, photons, overloads }
}

/// An SMV noise pixel from deviate + ADC offset: capped at 65535 (an overload); `as` saturates:
/// negatives (and NaN) become 0, the rest truncate like the C cast.
fn smv_pixel(v: f64) -> (u16, bool) {
    if v > 65535.0 {
        (65535, true)
    } else {
        (v as u16, false)
    }
}

/// The fast-mode noise image written to `w` (after the header, which the caller writes), batch by
/// batch of [`FAST_BATCH_PIXELS`]: each batch's rows are drawn in parallel while the previous batch
/// is written, so the whole image is never held. The same pixels as [`noise_image_fast`]; returns
/// (photons, overloads).
pub fn write_noise_rows_fast(w: &mut (dyn std::io::Write + Send), seed: i64, image: &ImageView, adc_offset: f64) -> std::io::Result<(f64, u64)> {
    let batches = crate::io::write_batched(w, image.fpixels(), image.spixels(), FAST_BATCH_PIXELS, |s0, out: &mut [u16]| {
        fast_rows(seed, image, s0, out, smv_pixel, adc_offset)
    })?;
    let (mut photons, mut overloads) = (0.0f64, 0u64);
    for (p, o) in batches.into_iter().flatten() {
        photons += p;
        overloads += o;
    }
    Ok((photons, overloads))
}

/// The fast-mode draws as 32-bit counts (deviate + `adc_offset`, saturating, no 65535 cap): the
/// CBF and NeXus images. The same draws as [`noise_image_fast`] for the same seed.
pub fn noise_counts_fast(seed: i64, image: &ImageView, adc_offset: f64) -> Vec<i32> {
    let mut counts = vec![0i32; image.pixels.len()];
    fast_rows(seed, image, 0, &mut counts, |v| (v as i32, false), adc_offset);
    counts
}

/// Fill `out` (whole rows from row `s0` on) row by row in parallel with `convert(deviate + adc_offset)`
/// inside the ROI, 0 elsewhere; returns (photons, overloads) per row, in row order.
fn fast_rows<P: Copy + Default + Send + Sync>(
    seed: i64,
    image: &ImageView,
    s0: usize,
    out: &mut [P],
    convert: impl Fn(f64) -> (P, bool) + Sync,
    adc_offset: f64,
) -> Vec<(f64, u64)> {
    let (float, fpixels) = (image.data(), image.fpixels());
    if fpixels == 0 {
        return Vec::new();
    }
    let cols = image.roi.fast.clone();
    // every ROI pixel whose deviate is 0 (most of them) holds this
    let (zero_px, zero_over) = convert(adc_offset);
    out.par_chunks_mut(fpixels)
        .enumerate()
        .map_init(Vec::<u16>::new, |bits, (i, row)| {
            let s = s0 + i;
            row.fill(P::default());
            if !image.roi.slow.contains(&s) || cols.is_empty() {
                return (0.0, 0);
            }
            let (mut lead, mut more) = (lead_rng(seed, s), More::new(seed, s));
            bits.resize(fpixels, 0);
            {
                // SAFETY: the u16s' own memory, viewed as bytes (any bit pattern is a valid u16)
                let bytes = unsafe { std::slice::from_raw_parts_mut(bits.as_mut_ptr() as *mut u8, 2 * fpixels) };
                lead.fill_bytes(bytes);
            }
            let src = &float[s * fpixels..(s + 1) * fpixels];
            row[cols.clone()].fill(zero_px);
            let (mut photons, mut overloads) = (0.0, if zero_over { cols.len() as u64 } else { 0 });
            let mut draw = |f: usize, row: &mut [P]| {
                let m = src[f] as f64;
                let dev = slow_deviate(&mut more, m, u16::from_le(bits[f]));
                photons += dev;
                let (v, over) = convert(dev + adc_offset);
                row[f] = v;
                overloads = overloads + over as u64 - zero_over as u64;
            };
            // 16 pixels at a time: a mask of those surely_zero cannot settle (most groups have none)
            let mut f = cols.start;
            while f + 16 <= cols.end {
                let (m16, h16) = (&src[f..f + 16], &bits[f..f + 16]);
                let mut mask = 0u32;
                for j in 0..16 {
                    mask |= (!surely_zero(m16[j], u16::from_le(h16[j])) as u32) << j;
                }
                while mask != 0 {
                    draw(f + mask.trailing_zeros() as usize, row);
                    mask &= mask - 1;
                }
                f += 16;
            }
            for f in f..cols.end {
                if !surely_zero(src[f], u16::from_le(bits[f])) {
                    draw(f, row);
                }
            }
            (photons, overloads)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::image::Roi;
    use crate::base::c::rng::large_mean_terms;

    /// The C's `g=exp(-xm)` through libm.
    fn g_libm(xm: f32) -> f32 {
        if (xm as f64) < 12.0 { ((-xm) as f64).exp() as f32 } else { 0.0 }
    }

    /// Every float mean whose bit pattern is `first + k·step`, through [`poisson_g_row`] and libm; returns
    /// how many the unfused form leaves to libm.
    fn check_g(first: u32, last: u32, step: u32) -> u64 {
        let means: Vec<f32> = (first..=last).step_by(step as usize).map(f32::from_bits).collect();
        let mut g = vec![0.0f32; means.len()];
        poisson_g_row(&mut g, &means, &mut Vec::new());
        let mut through_libm = 0;
        for (&xm, &g) in means.iter().zip(&g) {
            assert_eq!(g.to_bits(), g_libm(xm).to_bits(), "mean {xm:e}");
            // both forms, wherever they vouch for a float (the fused one through libm's fma here)
            for fast in [poisson_g_fast::<false>(xm), poisson_g_fast::<true>(xm)] {
                assert!(fast.is_nan() || fast.to_bits() == g.to_bits(), "mean {xm:e}: {fast:e}");
            }
            through_libm += poisson_g_fast::<false>(xm).is_nan() as u64;
        }
        through_libm
    }

    /// poidev's exp(-mean) is libm's, bit for bit: at the edges, outside 0..12 and for one float in 97
    /// of 0..12 (the `exhaustive` test below covers them all).
    #[test]
    fn poisson_g_is_libms() {
        let edges = [0.0f32, -0.0, f32::MIN_POSITIVE, 1e-30, 1e-8, 0.346_573_6, 0.693_147_2, 1.0, 11.999_999, 12.0, 12.000_001, 1e6, -1e-30, -1.0, -100.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN];
        let mut g = vec![0.0f32; edges.len()];
        poisson_g_row(&mut g, &edges, &mut Vec::new());
        for (&xm, &g) in edges.iter().zip(&g) {
            assert_eq!(g.to_bits(), g_libm(xm).to_bits(), "mean {xm:e}");
        }
        check_g(0, 12.0f32.to_bits() - 1, 97);
    }

    /// Every float mean in 0..12 (about 1.1e9 of them; seconds in a release build).
    #[test]
    #[ignore]
    fn poisson_g_is_libms_exhaustive() {
        use rayon::prelude::*;
        let last = 12.0f32.to_bits() - 1;
        let chunk = 1u32 << 22;
        let fallbacks: u64 = (0..=last / chunk).into_par_iter().map(|c| check_g(c * chunk, (c * chunk + chunk - 1).min(last), 1)).sum();
        eprintln!("{fallbacks} of {} means through libm", last as u64 + 1);
    }

    /// The noise stream as it was before [`Ran1Ahead`]: one `poidev` call per ROI pixel in raster
    /// order, the conversion inline. Rows (SMV and 32-bit), photons, overloads, final state.
    pub(super) fn reference(rng: NrRandom, seed: i64, image: &ImageView, adc: f64) -> (Vec<u16>, Vec<i32>, f64, u64, NrRandom, i64) {
        let g: Vec<f32> = image.data().iter().map(|&m| g_libm(m)).collect();
        reference_with_g(rng, seed, image, &g, adc)
    }

    /// [`reference`] with the exp(−mean) of every pixel given.
    pub(super) fn reference_with_g(mut rng: NrRandom, mut seed: i64, image: &ImageView, g: &[f32], adc: f64) -> (Vec<u16>, Vec<i32>, f64, u64, NrRandom, i64) {
        let (fp, sp) = (image.fpixels(), image.spixels());
        let (mut px, mut px32) = (vec![0u16; fp * sp], vec![0i32; fp * sp]);
        let (mut photons, mut overloads) = (0.0f64, 0u64);
        for s in image.roi.slow.clone() {
            for f in image.roi.fast.clone() {
                let xm = image.data()[s * fp + f];
                let dev = if (xm as f64) < 12.0 { rng.poidev_small(xm, g[s * fp + f], &mut seed) } else { rng.poidev(xm, &mut seed) };
                let mut test = dev as f64;
                photons += test;
                test += adc;
                px32[s * fp + f] = test as i32;
                if test > 65535.0 {
                    test = 65535.0;
                    overloads += 1;
                }
                px[s * fp + f] = test as u16;
            }
        }
        (px, px32, photons, overloads, rng, seed)
    }

    /// A random image: means from every regime (0, tiny, 0.5, below and at 12, rejection, above 1e6,
    /// NaN, infinities, negative), mostly tiny as in a sparse diffraction image.
    fn random_image(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
        let special = [0.0f32, -0.0, 1e-30, 0.5, 11.99, 11.999_999, 12.0, 12.000_001, 100.0, 1e5, 999_999.9, 1e6, 2e6, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -3.0, 1e-4];
        (0..n)
            .map(|_| match rng.next_u32() % 100 {
                0..=59 => (rng.next_u32() % 1000) as f32 * 1e-5,
                60..=79 => (rng.next_u32() % 1000) as f32 * 1e-3,
                80..=89 => (rng.next_u32() % 12000) as f32 * 1e-3,
                90..=94 => 12.0 + (rng.next_u32() % 5000) as f32 * 0.1,
                _ => special[rng.next_u32() as usize % special.len()],
            })
            .collect()
    }

    /// The row loop ([`noise_rows`] over [`CNoiseRows`]) against [`reference`]: random images and
    /// ROIs, ADC offsets (0, 10, 40.5, −5, 65000), seeds at the edges, fresh and loaded tables,
    /// several images on one stream; identical rows, photon sums, overloads and final state (also
    /// checked by the draws that follow it).
    #[test]
    fn rows_match_per_pixel_poidev() {
        // images of every kind of mean, and sparse ones whose runs of 16 pixels are often settled by
        // their first uniforms at once; with exp(-mean) ahead on other threads, and on one thread
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        for sparse in [false, true] {
            rows_match(sparse);
            one.install(|| rows_match(sparse));
        }
    }

    /// Mostly tiny means (zero, −0, subnormal-small, slightly negative), a few of every other kind.
    fn sparse_image(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
        let mut v = random_image(rng, n);
        for x in v.iter_mut() {
            if rng.next_u32() % 100 < 95 {
                *x = [0.0f32, -0.0, 1e-30, 1e-6, 3e-4, -2e-5][rng.next_u32() as usize % 6];
            }
        }
        v
    }

    fn rows_match(sparse: bool) {
        let mut gen = ChaCha8Rng::seed_from_u64(2026);
        let seeds = [0i64, -1, 1, 7, -12345, 2147483647, -2147483647, 5_000_000_000];
        for (case, adc) in [0.0, 10.0, 40.5, -5.0, 65000.0].into_iter().cycle().take(40).enumerate() {
            let (fp, sp) = (1 + gen.next_u32() as usize % 300, 1 + gen.next_u32() as usize % 40);
            let float = if sparse { sparse_image(&mut gen, fp * sp) } else { random_image(&mut gen, fp * sp) };
            let roi = if case % 3 == 0 { Roi::full(fp, sp) } else {
                let (a, b) = (gen.next_u32() as usize % fp, gen.next_u32() as usize % fp);
                let (c, d) = (gen.next_u32() as usize % sp, gen.next_u32() as usize % sp);
                Roi::from_c_bounds([a.min(b) as i64, a.max(b) as i64, c.min(d) as i64, c.max(d) as i64], fp, sp)
            };
            let image = ImageView::new(&float, fp, sp, roi);
            let mut rng = NrRandom::new();
            if case % 2 == 1 {
                let mut pre = -(case as i64) - 3;
                (0..10).for_each(|_| { rng.poidev(3.5, &mut pre); });
            }
            let mut seed = seeds[case % seeds.len()];
            let (mut rng2, mut seed2) = (rng.clone(), seed);
            for _ in 0..2 {
                let want = reference(rng2.clone(), seed2, &image, adc);
                let img = noise_image(&mut rng, &mut seed, &image, adc);
                let counts = noise_counts(&mut rng2, &mut seed2, &image, adc);
                assert_eq!(img.pixels, want.0, "case {case}");
                assert_eq!(counts, want.1, "case {case}");
                assert!(img.photons.to_bits() == want.2.to_bits() || (img.photons.is_nan() && want.2.is_nan()), "case {case} {} {}", img.photons, want.2);
                assert_eq!(img.overloads, want.3, "case {case}");
                assert_eq!((format!("{:?}", rng), seed), (format!("{:?}", want.4), want.5), "case {case}");
                assert_eq!((format!("{:?}", rng2), seed2), (format!("{:?}", want.4), want.5), "case {case}");
            }
            for m in [0.3f32, 0.3, 20.0, 20.0, 5.0, 2e6] {
                assert_eq!(rng.poidev(m, &mut seed).to_bits(), rng2.poidev(m, &mut seed2).to_bits());
            }
        }
    }

    /// A row's values ahead: exp(−mean) where it is used (means below 12), and the terms of exactly
    /// the means from 12 to 1e6 (not NaN, not above 1e6) by column, whatever the row's length.
    #[test]
    fn row_ahead_lists_the_large_means() {
        let mut gen = ChaCha8Rng::seed_from_u64(37);
        for n in [0usize, 1, 15, 16, 17, 300] {
            let mut row = sparse_image(&mut gen, n);
            for (k, m) in [12.0f32, 11.999999, 1.0e6, 1.0000001e6, f32::NAN, 500.5, f32::INFINITY].into_iter().enumerate() {
                if let Some(x) = row.get_mut(k * 37 % n.max(1)) {
                    *x = m;
                }
            }
            let a = RowAhead::new(&row);
            let want: Vec<(u32, [f32; 3])> = row.iter().enumerate().filter(|&(_, &m)| (12.0..=1.0e6).contains(&(m as f64))).map(|(i, &m)| (i as u32, large_mean_terms(m))).collect();
            assert_eq!(a.large, want, "n {n}");
            for (&m, &g) in row.iter().zip(&a.g) {
                if (m as f64) < 12.0 {
                    assert_eq!(g.to_bits(), (((-m) as f64).exp() as f32).to_bits(), "mean {m}");
                }
            }
        }
    }

    /// Photon sums that cannot be added as integers (non-integer Gaussian deviates, NaN, a sum near
    /// 2^53) take the rounding adds in order, as the C does.
    #[test]
    fn photons_fall_back_to_ordered_adds() {
        let ordered = |p: f64, dev: &[f32]| dev.iter().fold(p, |p, &d| p + d as f64);
        let cases: [(f64, &[f32]); 7] = [
            (0.0, &[0.0, 1.0, 3.0, 16777216.0]),
            (0.5, &[1.0, 2.0]),
            (9007199254740990.0, &[1.0, 1.0, 1.0, 1.0]),
            (0.0, &[1000000.1, 3.0]),
            (0.0, &[1.0, f32::NAN]),
            (0.0, &[-0.0, 0.0]),
            (12.0, &[33554432.0, 1.0]),
        ];
        for (p, dev) in cases {
            let list: Vec<(u32, f32)> = dev.iter().enumerate().map(|(i, &d)| (i as u32, d)).collect();
            assert_eq!(add_photons(p, &list).to_bits(), ordered(p, dev).to_bits(), "{p} {dev:?}");
        }
    }

    #[test]
    fn only_roi_pixels_draw_in_raster_order() {
        let (fp, sp) = (5usize, 4usize);
        let float: Vec<f32> = (0..fp * sp).map(|i| 2.0 + i as f32 * 0.5).collect();
        let roi = [1, 3, 1, 2];
        let mut rng = NrRandom::new();
        let mut seed = -42i64;
        let img = noise_image(&mut rng, &mut seed, &ImageView::new(&float, fp, sp, Roi::from_c_bounds(roi, fp, sp)), 40.0);

        // Replaying the same draws pixel by pixel must give the same image.
        let mut rng2 = NrRandom::new();
        let mut seed2 = -42i64;
        let mut sum = 0.0;
        for s in 0..sp {
            for f in 0..fp {
                let idx = s * fp + f;
                let inside = (1..=3).contains(&f) && (1..=2).contains(&s);
                if inside {
                    let v = rng2.poidev(float[idx], &mut seed2) as f64;
                    sum += v;
                    assert_eq!(img.pixels[idx], (v + 40.0) as u16);
                } else {
                    assert_eq!(img.pixels[idx], 0);
                }
            }
        }
        assert_eq!(img.photons, sum);
        assert_eq!(seed, seed2);
        assert_eq!(img.overloads, 0);
    }

    #[test]
    fn overloads_cap_and_negative_clamp() {
        let float = [1.0e7f32, 0.0];
        let mut rng = NrRandom::new();
        let mut seed = -7i64;
        let img = noise_image(&mut rng, &mut seed, &ImageView::new(&float, 2, 1, Roi::from_c_bounds([0, 1, 0, 0], 2, 1)), -10.0);
        assert_eq!(img.pixels, [65535, 0]);
        assert_eq!(img.overloads, 1);
    }
}

#[cfg(test)]
mod bench {
    use super::*;
    use crate::base::image::Roi;

    /// Time per pixel of the C-mode rows on the float image in NOISE_BENCH_IMAGE (square f32):
    /// `NOISE_BENCH_IMAGE=f.bin cargo test --release --lib noise::bench -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn noise_rows_speed() {
        let Ok(path) = std::env::var("NOISE_BENCH_IMAGE") else { return };
        let bytes = std::fs::read(path).unwrap();
        let float: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        let n = (float.len() as f64).sqrt() as usize;
        let ahead: Vec<RowAhead> = float.chunks(n).map(RowAhead::new).collect();
        // the reference takes g computed ahead (as the old loop did, on other threads): its time is
        // counted in neither loop
        let g: Vec<f32> = ahead.iter().flat_map(|a| a.g.iter().copied()).collect();
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let reps = 20;
            let mut sink = 0u64;
            for k in 0..reps {
                let mut rows = CNoiseRows::new(NrRandom::new(), -(k as i64) - 1, Roi::full(n, n), n, 0.0);
                for s in 0..n {
                    let (r, _) = rows.draw(s, &float[s * n..(s + 1) * n], &ahead[s]);
                    sink += r[0] as u64;
                }
                sink += rows.overloads;
            }
            eprintln!("rows: {:.2} ns/pixel ({sink})", t.elapsed().as_nanos() as f64 / (reps * n * n) as f64);
            let t = std::time::Instant::now();
            let image = ImageView::new(&float, n, n, Roi::full(n, n));
            for k in 0..reps {
                let r = super::tests::reference_with_g(NrRandom::new(), -(k as i64) - 1, &image, &g, 0.0);
                sink += r.3;
            }
            eprintln!("old per-pixel loop: {:.2} ns/pixel ({sink})", t.elapsed().as_nanos() as f64 / (reps * n * n) as f64);
            let (mut table, _) = NrRandom::new().into_parts();
            let mut idum = -1i64;
            let mut buf = vec![0.0f32; 4096];
            table.fill(&mut idum, &mut buf);
            let t = std::time::Instant::now();
            for _ in 0..1000 {
                table.fill(&mut idum, &mut buf);
            }
            eprintln!("fill: {:.2} ns/draw ({})", t.elapsed().as_nanos() as f64 / 4096e3, buf[7]);
        }
    }
}
