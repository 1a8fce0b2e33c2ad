//! The crystal: unit cell from `-cell` or a MOSFLM `-mat` file, missetting (angles or random),
//! real and reciprocal lattice vectors, and the number of cells from `-N` or the crystal size.
//! nanoBragg.c L1791-L2047.

use crate::base::c::printf::{cf, g};
use crate::experiment::params::{CellInput, Misset};
use crate::base::log::Log;
use crate::base::c::rng::{mosaic_rotation_umat, umat2misset, NrRandom};
use crate::base::vec3::{cross, dot, magnitude, rescale, rotate, scale, V3};
use crate::{Error, Result};

use crate::base::consts::RTD;
use crate::experiment::params::CrystalShape;

/// One crystal orientation used inside the pixel loop: (a, b, c) in metres for a phi step and mosaic
/// domain, precomputed with exactly the C's arithmetic (rotate_axis about the spindle, then U·v).
#[derive(Clone, Copy, Debug)]
pub struct Orientation {
    pub a: V3,
    pub b: V3,
    pub c: V3,
}

/// The crystal as the pixel loop sees it: lattice, size in unit cells, spot shape, mosaic domains and
/// the orientation table (phi steps × domains, phi outer: the loop order of the C).
#[derive(Clone, Debug)]
pub struct Crystal {
    pub lattice: Lattice,
    pub na: f64,
    pub nb: f64,
    pub nc: f64,
    pub shape: CrystalShape,
    pub fudge: f64,
    pub mosaic_spread: f64,
    pub mosaic_umats: Vec<[f64; 9]>,
    pub orientations: Vec<Orientation>,
}

/// Real-space (metres) and reciprocal-space (1/Angstrom) lattice vectors at phi = 0, no mosaic.
#[derive(Clone, Debug)]
pub struct Lattice {
    /// Real-space cell vectors in metres (C a0, b0, c0).
    pub a0: V3,
    pub b0: V3,
    pub c0: V3,
    /// Reciprocal vectors in 1/Angstrom (used by the gauss/tophat spot shapes, checklist Q19).
    pub a_star: V3,
    pub b_star: V3,
    pub c_star: V3,
    /// Cell volume in cubic Angstrom.
    pub v_cell: f64,
    /// Cell edge lengths in metres.
    pub a_len: f64,
    pub b_len: f64,
    pub c_len: f64,
}


/// Whether three cell angles (radians) make a cell: each below π, each smaller than the sum of the
/// other two, all three below 2π (otherwise the cell volume is imaginary or zero).
pub fn cell_angles_possible(alpha: f64, beta: f64, gamma: f64) -> bool {
    use std::f64::consts::PI;
    alpha > 0.0 && beta > 0.0 && gamma > 0.0 && alpha < PI && beta < PI && gamma < PI && alpha < beta + gamma && beta < alpha + gamma && gamma < alpha + beta && alpha + beta + gamma < 2.0 * PI
}

/// Build the lattice exactly as the C does. `mat` holds the reciprocal vectors (a*, b*, c*) read from
/// a `-mat` file (lambda-scaled, as MOSFLM writes them).
pub fn build_lattice(
    cell: Option<CellInput>,
    mat: Option<[[f64; 3]; 3]>,
    misset: Option<Misset>,
    extra_rot: V3,
    lambda0: f64,
    rng: &mut NrRandom,
    misset_seed: &mut i64,
    log: &mut Log,
) -> Result<Lattice> {
    let user_cell = cell.is_some();
    let mut a_star: V3 = [0.0; 3];
    let mut b_star: V3 = [0.0; 3];
    let mut c_star: V3 = [0.0; 3];
    let (mut a_in, mut b_in, mut c_in) = (0.0, 0.0, 0.0);
    let mut v_cell = 0.0;

    if let Some(cell) = cell {
        let (edges, angles, volume) = user_cell_volume(&cell)?;
        [a_in, b_in, c_in] = edges;
        v_cell = volume;
        let [alpha, beta, gamma] = angles;
        let v_star = 1.0 / v_cell;
        a_star_len_check(&mut a_star, &mut b_star, &mut c_star, a_in, b_in, c_in, alpha, beta, gamma, v_cell, v_star, log);
    }

    if let Some(m) = mat {
        // mosflm A matrix includes the wavelength, so remove it
        let s = 1e-10 / lambda0;
        a_star = scale(&[m[0][0], m[1][0], m[2][0]], s);
        b_star = scale(&[m[0][1], m[1][1], m[2][1]], s);
        c_star = scale(&[m[0][2], m[1][2], m[2][2]], s);
    }

    if let Some([mx, my, mz]) = misset_angles(misset, rng, misset_seed, log) {
        a_star = rotate(&a_star, mx, my, mz);
        b_star = rotate(&b_star, mx, my, mz);
        c_star = rotate(&c_star, mx, my, mz);
    }
    // the refinement rotation (`Params::crystal_rot`), composed after the misset as the C composes
    // its misset after -mat (within L1791-L2047); skipped at zero so images stay bit-identical
    if extra_rot != [0.0; 3] {
        let [rx, ry, rz] = extra_rot;
        a_star = rotate(&a_star, rx, ry, rz);
        b_star = rotate(&b_star, rx, ry, rz);
        c_star = rotate(&c_star, rx, ry, rz);
    }

    let mut a_star_cross_b_star = cross(&a_star, &b_star);
    let mut b_star_cross_c_star = cross(&b_star, &c_star);
    let mut c_star_cross_a_star = cross(&c_star, &a_star);
    let mut v_star = dot(&a_star, &b_star_cross_c_star);
    if user_cell {
        b_star_cross_c_star = rescale(&b_star_cross_c_star, a_in / v_cell);
        c_star_cross_a_star = rescale(&c_star_cross_a_star, b_in / v_cell);
        a_star_cross_b_star = rescale(&a_star_cross_b_star, c_in / v_cell);
        v_star = 1.0 / v_cell;
    }
    let v_cell = 1.0 / v_star;
    if !v_cell.is_finite() || v_cell == 0.0 {
        let check = if user_cell { "check the -cell values: an edge too large or too small for double precision" } else { "check the -mat file" };
        return Err(Error::setup(format!("degenerate crystal lattice: the reciprocal cell vectors have zero volume ({check})")));
    }
    let a = scale(&b_star_cross_c_star, v_cell);
    let b = scale(&c_star_cross_a_star, v_cell);
    let c = scale(&a_star_cross_b_star, v_cell);
    let a_star = scale(&cross(&b, &c), v_star);
    let b_star = scale(&cross(&c, &a), v_star);
    let c_star = scale(&cross(&a, &b), v_star);

    log_cell(&[a, b, c], &[a_star, b_star, c_star], v_cell, v_star, log);

    let a0 = scale(&a, 1e-10);
    let b0 = scale(&b, 1e-10);
    let c0 = scale(&c, 1e-10);
    Ok(Lattice {
        a_len: magnitude(&a0),
        b_len: magnitude(&b0),
        c_len: magnitude(&c0),
        a0,
        b0,
        c0,
        a_star,
        b_star,
        c_star,
        v_cell,
    })
}

/// The `-cell` edges (b, c default to a), angles (default 90°) and volume, with the C's formula
/// (nanoBragg.c L1804-L1820); impossible angles are refused.
fn user_cell_volume(cell: &CellInput) -> Result<([f64; 3], [f64; 3], f64)> {
    let a_in = cell.a;
    let b_in = if cell.b <= 0.0 { cell.a } else { cell.b };
    let c_in = if cell.c <= 0.0 { cell.a } else { cell.c };
    let half_pi = std::f64::consts::PI / 2.0;
    let alpha = if cell.alpha <= 0.0 { half_pi } else { cell.alpha };
    let beta = if cell.beta <= 0.0 { half_pi } else { cell.beta };
    let gamma = if cell.gamma <= 0.0 { half_pi } else { cell.gamma };
    if a_in <= 0.0 {
        return Err(Error::flag("-cell", "cell edge a must be positive"));
    }
    let aavg = (alpha + beta + gamma) / 2.0;
    let mut skew = aavg.sin() * (aavg - alpha).sin() * (aavg - beta).sin() * (aavg - gamma).sin();
    if skew < 0.0 {
        skew = -skew;
    }
    let v_cell = 2.0 * a_in * b_in * c_in * skew.sqrt();
    let angles_possible = cell_angles_possible(alpha, beta, gamma);
    if !(v_cell > 0.0) || !angles_possible {
        return Err(Error::flag(
            "-cell",
            format!(
                "impossible unit cell angles {} {} {} (each must be below 180, smaller than the sum of the other two, and all three below 360 degrees)",
                g(alpha * RTD),
                g(beta * RTD),
                g(gamma * RTD)
            ),
        ));
    }
    Ok(([a_in, b_in, c_in], [alpha, beta, gamma], v_cell))
}

/// The misset rotation (radians about x, y, z): given, or drawn from the C's generator for
/// `-misset random` (and printed as the C prints it).
fn misset_angles(misset: Option<Misset>, rng: &mut NrRandom, misset_seed: &mut i64, log: &mut Log) -> Option<V3> {
    match misset {
        Some(Misset::Random) => {
            let umat = mosaic_rotation_umat(rng, 90.0, misset_seed);
            let m = umat2misset(&umat);
            log.line(format!(
                "random orientation misset angles: {} {} {} deg",
                cf("%f", m[0] * RTD),
                cf("%f", m[1] * RTD),
                cf("%f", m[2] * RTD)
            ));
            Some(m)
        }
        Some(Misset::Angles(m)) => Some(m),
        None => None,
    }
}

/// The cell lines the C prints (L1968-L2047): real and reciprocal cells, volume and vectors, with
/// its warnings for oddball angles.
fn log_cell(real: &[V3; 3], recip: &[V3; 3], v_cell: f64, v_star: f64, log: &mut Log) {
    let [a, b, c] = real;
    let [a_star, b_star, c_star] = recip;
    let (al, bl, cl) = (magnitude(a), magnitude(b), magnitude(c));
    let (asl, bsl, csl) = (magnitude(a_star), magnitude(b_star), magnitude(c_star));
    // cell angles, for printing only
    let (alpha, beta, gamma) = angles(
        asl * v_cell / bl / cl,
        bsl * v_cell / al / cl,
        csl * v_cell / al / bl,
        dot(b, c) / bl / cl,
        dot(a, c) / al / cl,
        dot(a, b) / al / bl,
        "WARNING: oddball cell angles:",
        ["sin_alpha = ", "cos_alpha = ", "sin_beta  = ", "cos_beta  = ", "sin_gamma = ", "cos_gamma = "],
        log,
    );
    let (alpha_s, beta_s, gamma_s) = angles(
        al * v_star / bsl / csl,
        bl * v_star / asl / csl,
        cl * v_star / asl / bsl,
        dot(b_star, c_star) / bsl / csl,
        dot(a_star, c_star) / asl / csl,
        dot(a_star, b_star) / asl / bsl,
        "WARNING: oddball reciprocal cell angles:",
        ["sin(alpha_star) = ", "cos(alpha_star) = ", "sin(beta_star)  = ", "cos(beta_star)  = ", "sin(gamma_star) = ", "cos(gamma_star) = "],
        log,
    );
    log.line(format!("Unit Cell: {} {} {} {} {} {}", g(al), g(bl), g(cl), g(alpha * RTD), g(beta * RTD), g(gamma * RTD)));
    log.line(format!(
        "Recp Cell: {} {} {} {} {} {}",
        g(asl),
        g(bsl),
        g(csl),
        g(alpha_s * RTD),
        g(beta_s * RTD),
        g(gamma_s * RTD)
    ));
    log.line(format!("volume = {} A^3", g(v_cell)));
    log.line("real-space cell vectors (Angstrom):");
    log.line(format!("     {:<10}  {:<10}  {:<10}", "a", "b", "c"));
    for (i, axis) in ["X", "Y", "Z"].iter().enumerate() {
        log.line(format!("{axis}: {} {} {}", cf("%11.8f", a[i]), cf("%11.8f", b[i]), cf("%11.8f", c[i])));
    }
    log.line("reciprocal-space cell vectors (Angstrom^-1):");
    log.line(format!("     {:<10}  {:<10}  {:<10}", "a_star", "b_star", "c_star"));
    for (i, axis) in ["X", "Y", "Z"].iter().enumerate() {
        log.line(format!("{axis}: {} {} {}", cf("%11.8f", a_star[i]), cf("%11.8f", b_star[i]), cf("%11.8f", c_star[i])));
    }
}

/// The C's default orientation of a user cell: a* along x, b* in the x-y plane (L1804-L1876).
#[allow(clippy::too_many_arguments)]
fn a_star_len_check(
    a_star: &mut V3,
    b_star: &mut V3,
    c_star: &mut V3,
    a: f64,
    b: f64,
    c: f64,
    alpha: f64,
    beta: f64,
    gamma: f64,
    v_cell: f64,
    v_star: f64,
    log: &mut Log,
) {
    let a_star_len = b * c * alpha.sin() * v_star;
    let b_star_len = c * a * beta.sin() * v_star;
    let c_star_len = a * b * gamma.sin() * v_star;
    let mut sin_alpha_star = a * v_star / b_star_len / c_star_len;
    let mut sin_beta_star = b * v_star / a_star_len / c_star_len;
    let mut sin_gamma_star = c * v_star / a_star_len / b_star_len;
    let mut cos_alpha_star = (beta.cos() * gamma.cos() - alpha.cos()) / (beta.sin() * gamma.sin());
    let mut cos_beta_star = (gamma.cos() * alpha.cos() - beta.cos()) / (gamma.sin() * alpha.sin());
    let mut cos_gamma_star = (alpha.cos() * beta.cos() - gamma.cos()) / (alpha.sin() * beta.sin());
    let odd = |x: f64| !(-1.0000001..=1.0000001).contains(&x);
    if [sin_alpha_star, sin_beta_star, sin_gamma_star, cos_alpha_star, cos_beta_star, cos_gamma_star].iter().any(|&x| odd(x)) {
        log.line("WARNING: oddball reciprocal cell angles:");
    }
    for v in [&mut sin_alpha_star, &mut sin_beta_star, &mut sin_gamma_star] {
        *v = v.clamp(-1.0, 1.0);
    }
    // the C maps any |cos| > 1 to +1 (checklist Q40)
    for v in [&mut cos_alpha_star, &mut cos_beta_star, &mut cos_gamma_star] {
        if *v * *v > 1.0 {
            *v = 1.0;
        }
    }
    let _ = sin_alpha_star;
    let _ = sin_beta_star;
    *a_star = [a_star_len, 0.0, 0.0];
    *b_star = [b_star_len * cos_gamma_star, b_star_len * sin_gamma_star, 0.0];
    *c_star = [
        c_star_len * cos_beta_star,
        c_star_len * (cos_alpha_star - cos_beta_star * cos_gamma_star) / sin_gamma_star,
        c_star_len * v_cell / (a * b * c * sin_gamma_star),
    ];
}

#[allow(clippy::too_many_arguments)]
fn angles(
    sa: f64,
    sb: f64,
    sg: f64,
    ca: f64,
    cb: f64,
    cg: f64,
    warning: &str,
    labels: [&str; 6],
    log: &mut Log,
) -> (f64, f64, f64) {
    let odd = |x: f64| !(-1.0000001..=1.0000001).contains(&x);
    if [sa, sb, sg, ca, cb, cg].iter().any(|&x| odd(x)) {
        log.line(warning);
        for (label, v) in labels.iter().zip([sa, ca, sb, cb, sg, cg]) {
            log.line(format!("{label}{}", cf("%.25g", v)));
        }
    }
    let s = |x: f64| x.clamp(-1.0, 1.0);
    let c = |x: f64| if x * x > 1.0 { 1.0 } else { x };
    (s(sa).atan2(c(ca)), s(sb).atan2(c(cb)), s(sg).atan2(c(cg)))
}

/// Number of unit cells and crystal size (C L2065-L2078): a size > 0 replaces N.
pub fn cells_from_size(n: f64, size: f64, edge: f64) -> f64 {
    let mut n = n;
    if size > 0.0 {
        n = (size / edge).ceil();
    }
    if n <= 1.0 {
        n = 1.0;
    }
    n
}
