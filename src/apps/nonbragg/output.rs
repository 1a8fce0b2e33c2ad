//! nonBragg.c's SMV files: their header and the noise image (the float, integer and PGM images are
//! nanoBragg's formats, written by `io`).

use super::config::NonBraggConfig;
use super::geometry::Geometry;
use super::render::Grid;
use crate::base::c::printf::cf;
use crate::base::c::rng::NrRandom;
use crate::base::consts::RTD;
use std::fmt::Write as _;

/// The 512-byte SMV header of the integer and noise images.
pub(super) fn smv_header(c: &NonBraggConfig, g: &Geometry, grid: &Grid, detsize_y: f64, osc: f64) -> Vec<u8> {
    let mut s = String::from("{\nHEADER_BYTES=512;\nDIM=2;\nBYTE_ORDER=little_endian;\nTYPE=unsigned_short;\n");
    let _ = write!(
        s,
        "SIZE1={};\nSIZE2={};\nPIXEL_SIZE={};\nDISTANCE={};\n",
        grid.fpixels,
        grid.spixels,
        cf("%g", c.pixel * 1000.0),
        cf("%g", g.distance * 1000.0)
    );
    let _ = write!(s, "WAVELENGTH={};\n", cf("%g", c.lambda0 * 1e10));
    let _ = write!(s, "BEAM_CENTER_X={};\nBEAM_CENTER_Y={};\n", cf("%g", g.xbeam * 1000.0), cf("%g", (detsize_y - g.ybeam) * 1000.0));
    let _ = write!(s, "ORGX={};\nORGY={};\n", cf("%g", g.xclose / c.pixel), cf("%g", g.yclose / c.pixel));
    let _ = write!(s, "CLOSE_DISTANCE={};\n", cf("%g", g.close_distance * 1000.0));
    let _ = write!(s, "PHI={};\nOSC_START={};\nOSC_RANGE={};\n", cf("%g", c.phi0 * RTD), cf("%g", c.phi0 * RTD), cf("%g", osc * RTD));
    let _ = write!(s, "TWOTHETA={};\n", cf("%g", c.twotheta * RTD));
    s += "DETECTOR_SN=000;\nBEAMLINE=fake;\n}\x0c";
    let mut b = s.into_bytes();
    while b.len() < 512 {
        b.push(b' ');
    }
    b
}

/// The noise image: a Poisson deviate of every pixel of the region of interest in raster order,
/// plus the ADC offset, clipped to 65535; with the photons on it and the overloads.
pub(super) fn noise_image(c: &NonBraggConfig, grid: &Grid, floatimage: &[f32], seed: &mut i64) -> (Vec<u16>, f64, i64) {
    let mut rng = NrRandom::new();
    let mut noise = vec![0u16; floatimage.len()];
    let (mut psum, mut overloads) = (0.0f64, 0i64);
    for (_, _, j) in grid.roi.pixels() {
        let mut test = rng.poidev(floatimage[j], seed) as f64;
        psum += test;
        test += c.adc;
        if test > 65535.0 {
            test = 65535.0;
            overloads += 1;
        }
        noise[j] = (test as i32) as u16;
    }
    (noise, psum, overloads)
}

/// An SMV file: the header, then the pixels as little-endian 16-bit integers.
pub(super) fn smv_bytes(header: &[u8], data: &[u16]) -> Vec<u8> {
    let mut b = Vec::with_capacity(header.len() + data.len() * 2);
    b.extend_from_slice(header);
    for v in data {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}
