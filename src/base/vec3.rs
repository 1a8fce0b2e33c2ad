//! 3-vectors as the C handles them (`double v[4]` with the magnitude in v[0]; here `[f64; 3]`).
//! Every function keeps the C's operation order so results are bit-identical.

pub type V3 = [f64; 3];

#[inline(always)]
pub fn dot(x: &V3, y: &V3) -> f64 {
    x[0] * y[0] + x[1] * y[1] + x[2] * y[2]
}

#[inline(always)]
pub fn cross(x: &V3, y: &V3) -> V3 {
    [x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2], x[0] * y[1] - x[1] * y[0]]
}

#[inline(always)]
pub fn magnitude(v: &V3) -> f64 {
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

/// Unit vector and the original length; a zero vector stays zero (as the C's `unitize`).
#[inline(always)]
pub fn unitize(v: &V3) -> (V3, f64) {
    let mag = magnitude(v);
    if mag != 0.0 {
        ([v[0] / mag, v[1] / mag, v[2] / mag], mag)
    } else {
        ([0.0; 3], mag)
    }
}

#[inline(always)]
pub fn scale(v: &V3, s: f64) -> V3 {
    [s * v[0], s * v[1], s * v[2]]
}

/// The C's `vector_rescale`: force the length to `new_magnitude` (a zero vector counts as length 1).
pub fn rescale(v: &V3, new_magnitude: f64) -> V3 {
    let mut oldmag = magnitude(v);
    if oldmag <= 0.0 {
        oldmag = 1.0;
    }
    [new_magnitude / oldmag * v[0], new_magnitude / oldmag * v[1], new_magnitude / oldmag * v[2]]
}

/// The C's `rotate`: right-handed rotations about X, then Y, then Z; a zero angle is skipped exactly.
pub fn rotate(v: &V3, phix: f64, phiy: f64, phiz: f64) -> V3 {
    let (mut x, mut y, mut z) = (v[0], v[1], v[2]);
    if phix != 0.0 {
        let (ryy, ryz) = (phix.cos(), -phix.sin());
        let (rzy, rzz) = (phix.sin(), phix.cos());
        let ny = y * ryy + z * ryz;
        let nz = y * rzy + z * rzz;
        y = ny;
        z = nz;
    }
    if phiy != 0.0 {
        let (rxx, rxy, rxz) = (phiy.cos(), 0.0, phiy.sin());
        let (rzx, rzy, rzz) = (-phiy.sin(), 0.0, phiy.cos());
        let nx = x * rxx + y * rxy + z * rxz;
        let nz = x * rzx + y * rzy + z * rzz;
        x = nx;
        z = nz;
    }
    if phiz != 0.0 {
        let (rxx, rxy) = (phiz.cos(), -phiz.sin());
        let (ryx, ryy) = (phiz.sin(), phiz.cos());
        let nx = x * rxx + y * rxy;
        let ny = x * ryx + y * ryy;
        x = nx;
        y = ny;
    }
    [x, y, z]
}

/// The C's `rotate_axis`: rotate `v` by `phi` about the unit vector `axis` (Rodrigues).
#[inline(always)]
pub fn rotate_axis(v: &V3, axis: &V3, phi: f64) -> V3 {
    let sinphi = phi.sin();
    let cosphi = phi.cos();
    rotate_axis_sc(v, axis, sinphi, cosphi)
}

/// `rotate_axis` with sin and cos of the angle already computed (hoisting; same arithmetic).
#[inline(always)]
pub fn rotate_axis_sc(v: &V3, axis: &V3, sinphi: f64, cosphi: f64) -> V3 {
    let d = (axis[0] * v[0] + axis[1] * v[1] + axis[2] * v[2]) * (1.0 - cosphi);
    [
        axis[0] * d + v[0] * cosphi + (-axis[2] * v[1] + axis[1] * v[2]) * sinphi,
        axis[1] * d + v[1] * cosphi + (axis[2] * v[0] - axis[0] * v[2]) * sinphi,
        axis[2] * d + v[2] * cosphi + (-axis[1] * v[0] + axis[0] * v[1]) * sinphi,
    ]
}

/// The C's `rotate_umat`: row-major 3x3 matrix times column vector.
#[inline(always)]
pub fn rotate_umat(v: &V3, u: &[f64; 9]) -> V3 {
    [
        u[0] * v[0] + u[1] * v[1] + u[2] * v[2],
        u[3] * v[0] + u[4] * v[1] + u[5] * v[2],
        u[6] * v[0] + u[7] * v[1] + u[8] * v[2],
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotate_axis_quarter_turn_about_z() {
        let r = rotate_axis(&[1.0, 0.0, 0.0], &[0.0, 0.0, 1.0], std::f64::consts::FRAC_PI_2);
        assert!((r[0]).abs() < 1e-15 && (r[1] - 1.0).abs() < 1e-15 && r[2] == 0.0);
    }

    #[test]
    fn rotate_skips_zero_angles_exactly() {
        let v = [0.1, 0.2, 0.3];
        assert_eq!(rotate(&v, 0.0, 0.0, 0.0), v);
    }

    #[test]
    fn rotate_is_x_then_y_then_z() {
        // x axis rotated 90 deg about y goes to -z, then 90 deg about z leaves -z alone.
        let h = std::f64::consts::FRAC_PI_2;
        let r = rotate(&[1.0, 0.0, 0.0], 0.0, h, h);
        assert!(r[0].abs() < 1e-15 && r[1].abs() < 1e-15 && (r[2] + 1.0).abs() < 1e-15);
    }

    #[test]
    fn unitize_zero_is_zero() {
        assert_eq!(unitize(&[0.0; 3]), ([0.0; 3], 0.0));
    }
}

/// A 3×3 matrix, rows first.
pub type M3 = [[f64; 3]; 3];

/// The product `a`·`b` (each entry a₀b₀ + a₁b₁ + a₂b₂ in that order).
pub fn mat3_mul(a: &M3, b: &M3) -> M3 {
    let mut r = [[0.0; 3]; 3];
    for i in 0..3 {
        for j in 0..3 {
            r[i][j] = a[i][0] * b[0][j] + a[i][1] * b[1][j] + a[i][2] * b[2][j];
        }
    }
    r
}

/// How far the finite matrix `m` is from a proper rotation: the largest |rowᵢ·rowⱼ − δᵢⱼ| and the
/// determinant (a rotation: 0 and +1).
pub fn rotation_deviation(m: &M3) -> (f64, f64) {
    let worst = (0..9).map(|k| (dot(&m[k / 3], &m[k % 3]) - if k / 3 == k % 3 { 1.0 } else { 0.0 }).abs()).fold(0.0, f64::max);
    (worst, dot(&m[0], &cross(&m[1], &m[2])))
}
