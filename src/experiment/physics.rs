//! Small pure functions of the diffraction physics, each the C's formula in the C's operation order.

use crate::base::vec3::{cross, dot, unitize, V3};

/// Fourier transform of a grating of N slits: sin(Nx)/sin(x), N at x = 0 (C `sincg`).
#[inline(always)]
pub fn sincg(x: f64, n: f64) -> f64 {
    if x == 0.0 {
        return n;
    }
    (x * n).sin() / x.sin()
}

/// Fourier transform of a sphere: 3(sin x / x − cos x)/x², 1 at x = 0 (C `sinc3`).
#[inline(always)]
pub fn sinc3(x: f64) -> f64 {
    if x == 0.0 {
        return 1.0;
    }
    3.0 * (x.sin() / x - x.cos()) / (x * x)
}

/// Kahn polarization factor (C `polarization_factor`). Like the C, it renormalises the incident and
/// diffracted unit vectors and the polarization axis; the renormalised diffracted vector is returned
/// because the C keeps using it for later sources of the same sub-pixel.
#[inline]
pub fn polarization_factor(kahn_factor: f64, incident: &V3, diffracted: &V3, axis: &V3) -> (f64, V3) {
    let (incident, _) = unitize(incident);
    let (diffracted, _) = unitize(diffracted);
    let (axis, _) = unitize(axis);
    let cos2theta = dot(&incident, &diffracted);
    let cos2theta_sqr = cos2theta * cos2theta;
    let sin2theta_sqr = 1.0 - cos2theta_sqr;
    let mut psi = 0.0;
    if kahn_factor != 0.0 {
        let (b_in, _) = unitize(&cross(&axis, &incident));
        let (e_in, _) = unitize(&cross(&incident, &b_in));
        let e_out = dot(&diffracted, &e_in);
        let b_out = dot(&diffracted, &b_in);
        psi = -b_out.atan2(e_out);
    }
    (0.5 * (1.0 + cos2theta_sqr - kahn_factor * (2.0 * psi).cos() * sin2theta_sqr), diffracted)
}

/// 4-point Lagrange interpolation (C `polint`), written term by term as the C.
#[inline(always)]
pub fn polint(xa: &[f64; 4], ya: &[f64; 4], x: f64) -> f64 {
    let x0 = (x - xa[1]) * (x - xa[2]) * (x - xa[3]) * ya[0] / ((xa[0] - xa[1]) * (xa[0] - xa[2]) * (xa[0] - xa[3]));
    let x1 = (x - xa[0]) * (x - xa[2]) * (x - xa[3]) * ya[1] / ((xa[1] - xa[0]) * (xa[1] - xa[2]) * (xa[1] - xa[3]));
    let x2 = (x - xa[0]) * (x - xa[1]) * (x - xa[3]) * ya[2] / ((xa[2] - xa[0]) * (xa[2] - xa[1]) * (xa[2] - xa[3]));
    let x3 = (x - xa[0]) * (x - xa[1]) * (x - xa[2]) * ya[3] / ((xa[3] - xa[0]) * (xa[3] - xa[1]) * (xa[3] - xa[2]));
    x0 + x1 + x2 + x3
}

/// Tricubic interpolation over a 4x4x4 block (C `polin3`): along l for each (h,k), then k, then h.
pub fn polin3(ha: &[f64; 4], ka: &[f64; 4], la: &[f64; 4], ya: &[[[f64; 4]; 4]; 4], h: f64, k: f64, l: f64) -> f64 {
    let mut ymtmp = [0.0; 4];
    for (j, slab) in ya.iter().enumerate() {
        // polin2(ka, la, slab, k, l)
        let mut yk = [0.0; 4];
        for (i, row) in slab.iter().enumerate() {
            yk[i] = polint(la, row, l);
        }
        ymtmp[j] = polint(ka, &yk, k);
    }
    polint(ha, &ymtmp, h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_abs_diff_eq;

    #[test]
    fn sincg_peak_and_zero() {
        assert_eq!(sincg(0.0, 5.0), 5.0);
        // sin(5*pi/5)/sin(pi/5) = 0 up to rounding
        assert!(sincg(std::f64::consts::PI / 5.0, 5.0).abs() < 1e-14);
    }

    #[test]
    fn sinc3_limit() {
        assert_eq!(sinc3(0.0), 1.0);
        // series: 1 - x^2/10 near 0
        assert_abs_diff_eq!(sinc3(1e-2), (1.0 - 1e-4 / 10.0), epsilon = 1e-9);
    }

    #[test]
    fn unpolarized_factor_is_half_one_plus_cos_sq() {
        let inc = [1.0, 0.0, 0.0];
        let c = 60f64.to_radians().cos();
        let s = 60f64.to_radians().sin();
        let (p, _) = polarization_factor(0.0, &inc, &[c, s, 0.0], &[0.0, 0.0, 1.0]);
        assert_abs_diff_eq!(p, 0.5 * (1.0 + c * c), epsilon = 1e-15);
    }

    #[test]
    fn fully_polarized_in_plane_of_e_vector() {
        // E along z, scattering in the x-z plane by 90 degrees: no intensity.
        let (p, _) = polarization_factor(1.0, &[1.0, 0.0, 0.0], &[0.0, 0.0, 1.0], &[0.0, 0.0, 1.0]);
        assert!(p.abs() < 1e-15);
        // Scattering perpendicular to E: full intensity.
        let (p, _) = polarization_factor(1.0, &[1.0, 0.0, 0.0], &[0.0, 1.0, 0.0], &[0.0, 0.0, 1.0]);
        assert_abs_diff_eq!(p, 1.0, epsilon = 1e-15);
    }

    #[test]
    fn polin3_reproduces_a_cubic() {
        let f = |h: f64, k: f64, l: f64| 1.0 + h * h * h - 2.0 * k * l + l * l * h;
        let ha = [-1.0, 0.0, 1.0, 2.0];
        let mut ya = [[[0.0; 4]; 4]; 4];
        for i in 0..4 {
            for j in 0..4 {
                for m in 0..4 {
                    ya[i][j][m] = f(ha[i], ha[j], ha[m]);
                }
            }
        }
        let v = polin3(&ha, &ha, &ha, &ya, 0.3, 0.7, 1.2);
        assert_abs_diff_eq!(v, f(0.3, 0.7, 1.2), epsilon = 1e-12);
    }
}
