//! File formats: one module per format. Readers: [`hkl`], [`fdump`], [`matrix`], [`sourcefile`], [`smv`]
//! (`-img`/`-mask` headers), [`text`]. Writers: every output goes through the list in [`outputs`].
pub mod atomic;
pub mod cbf;
pub mod expt;
pub mod geom;
pub mod fdump;
pub mod hdf5;
pub mod meta;
pub mod nexus;
pub mod float;
pub mod hkl;
pub mod matrix;
pub mod sourcefile;
pub mod pgm;
pub mod sha256;
pub mod png;
pub mod smv;
pub mod text;

use crate::base::image::ImageView;

/// Little-endian bytes of a slice of plain numbers, without copying on little-endian machines (every
/// format nanoBragg writes is little-endian on x86). Converting element by element into a byte buffer
/// costs more than the write itself at 4096².
pub trait LeBytes: Copy {
    const SIZE: usize;
    fn put_le(self, out: &mut Vec<u8>);
}

impl LeBytes for f32 {
    const SIZE: usize = 4;
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl LeBytes for u8 {
    const SIZE: usize = 1;
    fn put_le(self, out: &mut Vec<u8>) {
        out.push(self);
    }
}

impl LeBytes for u16 {
    const SIZE: usize = 2;
    fn put_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// Write `data` as little-endian bytes.
pub fn write_le<T: LeBytes>(w: &mut (impl std::io::Write + ?Sized), data: &[T]) -> std::io::Result<()> {
    if cfg!(target_endian = "little") {
        // SAFETY: f32 and u16 have no padding and every bit pattern is a valid u8 sequence; the
        // byte slice covers exactly the same memory as `data`.
        let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) };
        w.write_all(bytes)
    } else {
        let mut buf = Vec::with_capacity(1 << 17);
        for chunk in data.chunks((1 << 17) / T::SIZE) {
            buf.clear();
            for v in chunk {
                v.put_le(&mut buf);
            }
            w.write_all(&buf)?;
        }
        Ok(())
    }
}

/// An image of `convert(v)` for every float pixel inside the inclusive ROI, `T::default()` elsewhere;
/// rows are converted in parallel, each over its ROI columns only (a loop that vectorizes).
pub fn map_roi<T: Copy + Default + Send>(image: &ImageView, convert: impl Fn(f32) -> T + Sync) -> Vec<T> {
    let mut out = vec![T::default(); image.pixels.len()];
    map_roi_rows(image, 0, &mut out, &convert);
    out
}

/// [`map_roi`] for the whole rows from row `s0` on that `out` holds (in parallel over rows).
pub fn map_roi_rows<T: Copy + Default + Send>(image: &ImageView, s0: usize, out: &mut [T], convert: &(impl Fn(f32) -> T + Sync)) {
    map_roi_rows_then(image, s0, out, convert, 1, &|_: &[&[f32]]| ());
}

/// [`map_roi_rows`], `rows_per` rows at a time (in parallel over such blocks), handing each block's
/// source rows (the ROI's columns; empty for a row outside the ROI) to `reduce` right after their
/// conversion, while they are in cache: a second pass over the same pixels without a second read
/// of the image. The blocks' results in row order.
pub fn map_roi_rows_then<T: Copy + Default + Send, R: Send>(
    image: &ImageView,
    s0: usize,
    out: &mut [T],
    convert: &(impl Fn(f32) -> T + Sync),
    rows_per: usize,
    reduce: &(impl Fn(&[&[f32]]) -> R + Sync),
) -> Vec<R> {
    use rayon::prelude::*;
    let (float, fpixels) = (image.data(), image.fpixels());
    if fpixels == 0 {
        return Vec::new();
    }
    let cols = image.roi.fast.clone();
    let rows_per = rows_per.max(1);
    out.par_chunks_mut(fpixels * rows_per)
        .enumerate()
        .map(|(b, block)| {
            let first = s0 + b * rows_per;
            let srcs: Vec<&[f32]> = block
                .chunks_mut(fpixels)
                .enumerate()
                .map(|(i, row)| {
                    let s = first + i;
                    if !image.roi.slow.contains(&s) {
                        row.fill(T::default());
                        return &[][..];
                    }
                    row[..cols.start].fill(T::default());
                    row[cols.end..].fill(T::default());
                    let src = &float[s * fpixels + cols.start..s * fpixels + cols.end];
                    crate::base::cpu::with_widest(|| convert_row(&mut row[cols.clone()], src, convert));
                    src
                })
                .collect();
            reduce(&srcs)
        })
        .collect()
}

#[inline(always)]
fn convert_row<T>(dst: &mut [T], src: &[f32], convert: &impl Fn(f32) -> T) {
    for (px, &v) in dst.iter_mut().zip(src) {
        *px = convert(v);
    }
}

/// Pixels per batch of the streamed image writers ([`write_map_roi`]): two batches are all the
/// memory they hold, whatever the image size.
pub const STREAM_BATCH_PIXELS: usize = 1 << 18;

/// Write the image [`map_roi`] makes, little-endian, without ever holding it: batch by batch of about
/// [`STREAM_BATCH_PIXELS`] (whole rows), each converted in parallel while the previous one is written.
pub fn write_map_roi<T: LeBytes + Default + Copy + Send + Sync>(w: &mut (dyn std::io::Write + Send), image: &ImageView, convert: impl Fn(f32) -> T + Sync) -> std::io::Result<()> {
    write_batched(w, image.fpixels(), image.spixels(), STREAM_BATCH_PIXELS, |s0, out: &mut [T]| map_roi_rows(image, s0, out, &convert))?;
    Ok(())
}

/// [`write_map_roi`], with `reduce` of every block of `rows_per` rows made during the conversion
/// ([`map_roi_rows_then`]): the blocks' results in row order.
pub fn write_map_roi_then<T: LeBytes + Default + Copy + Send + Sync, R: Send>(
    w: &mut (dyn std::io::Write + Send),
    image: &ImageView,
    convert: impl Fn(f32) -> T + Sync,
    rows_per: usize,
    reduce: impl Fn(&[&[f32]]) -> R + Sync,
) -> std::io::Result<Vec<R>> {
    let batches = write_batched(w, image.fpixels(), image.spixels(), STREAM_BATCH_PIXELS, |s0, out: &mut [T]| map_roi_rows_then(image, s0, out, &convert, rows_per, &reduce))?;
    Ok(batches.into_iter().flatten().collect())
}

/// Write an image of `spixels` rows of `fpixels` pixels, little-endian, batch by batch of about
/// `batch_pixels` (whole rows): `fill(first_row, batch)` makes the next batch while the previous one is
/// written, so two batches are all that is held. Returns what `fill` returned, batch by batch in order.
pub fn write_batched<T: LeBytes + Default + Clone + Send + Sync, R: Send>(
    w: &mut (dyn std::io::Write + Send),
    fpixels: usize,
    spixels: usize,
    batch_pixels: usize,
    fill: impl Fn(usize, &mut [T]) -> R + Sync,
) -> std::io::Result<Vec<R>> {
    if fpixels == 0 || spixels == 0 {
        return Ok(Vec::new());
    }
    let rows_per = (batch_pixels / fpixels).clamp(1, spixels);
    let batches = spixels.div_ceil(rows_per);
    let batch = |b: usize, out: &mut Vec<T>| {
        let s0 = b * rows_per;
        out.resize(rows_per.min(spixels - s0) * fpixels, T::default());
        fill(s0, out)
    };
    let (mut cur, mut next) = (Vec::new(), Vec::new());
    let mut filled = vec![batch(0, &mut cur)];
    for b in 1..=batches {
        let (written, drawn) = rayon::join(|| write_le(w, &cur), || (b < batches).then(|| batch(b, &mut next)));
        written?;
        filled.extend(drawn);
        std::mem::swap(&mut cur, &mut next);
    }
    Ok(filled)
}
