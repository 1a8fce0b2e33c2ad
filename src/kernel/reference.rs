//! The scalar reference kernel: one pixel at a time, in exactly the C's loop order and arithmetic
//! (nanoBragg.c L2584-L3040). It is the oracle every fast kernel is tested against.

use crate::experiment::params::CrystalShape;
use crate::experiment::Experiment;
use crate::experiment::detector::Panel;
use crate::experiment::physics::{polarization_factor, sinc3, sincg};
use crate::experiment::structure_factors::{interpolate_f, Lookup, NearestF};
use crate::base::vec3::{dot, magnitude, rotate_axis, unitize, V3};
use std::f64::consts::PI;

/// Where interpolation first went out of range (h, k, l, h0, k0, l0), for the C's one-time warning.
pub type OutOfRange = (f64, f64, f64, i32, i32, i32);

/// Interpolation state carried along raster order: on until the first out-of-range evaluation.
#[derive(Clone, Copy, Debug)]
pub struct InterpState {
    pub enabled: bool,
    pub first_oob: Option<OutOfRange>,
}

/// The last values of one pixel's loop, as `-printout` shows them.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub stol: f64,
    pub pixel_pos: V3,
    pub hkl: V3,
    pub hkl0: [i32; 3],
    pub f_cell: f64,
    pub f_latt: f64,
    pub i: f64,
    pub polar: f64,
    pub omega: f64,
    pub capture: f64,
    pub abc: [V3; 3],
}

/// Render one pixel; returns (the value added to the float image, this pixel's omega sum).
/// The caller skips pixels outside the ROI or masked.
pub fn render_pixel(exp: &Experiment, panel: &Panel, fpixel: usize, spixel: usize, interp: &mut InterpState, mut trace: Option<&mut Trace>) -> (f64, f64) {
    let os = exp.sampling.oversample;
    let sub = exp.sampling.subpixel_size;
    let (f_vec, s_vec, o_vec, pix0) = (panel.fdet_vector, panel.sdet_vector, panel.odet_vector, panel.pix0_vector);
    let domains = exp.domains();
    let grid = exp.structure_factors.fhkl.as_deref();
    let nearest = NearestF::<f64>::new(grid, exp.structure_factors.default_f);
    let nearest = nearest.view();

    let mut i_sum = exp.background.i_bg;
    let mut polar = if exp.beam.nopolar { 1.0 } else { 0.0 };
    let mut omega_pixel = 0.0;
    let mut omega_sum = 0.0;
    let mut capture_fraction = 0.0;

    for thick_tic in 0..panel.sensor.thicksteps {
        let odet = thick_tic as f64 * panel.sensor.thickstep;
        capture_fraction = if panel.sensor.thick == 0.0 { 1.0 } else { 0.0 };
        for sub_s in 0..os {
            for sub_f in 0..os {
                let fdet = sub * ((fpixel * os + sub_f) as f64) + sub / 2.0;
                let sdet = sub * ((spixel * os + sub_s) as f64) + sub / 2.0;
                let mut pixel_pos = [
                    fdet * f_vec[0] + sdet * s_vec[0] + odet * o_vec[0] + pix0[0],
                    fdet * f_vec[1] + sdet * s_vec[1] + odet * o_vec[1] + pix0[1],
                    fdet * f_vec[2] + sdet * s_vec[2] + odet * o_vec[2] + pix0[2],
                ];
                if panel.curved {
                    let b = exp.beam.beam_vector;
                    let v = [panel.distance * b[0], panel.distance * b[1], panel.distance * b[2]];
                    let nv = rotate_axis(&v, &s_vec, pixel_pos[1] / panel.distance);
                    pixel_pos = rotate_axis(&nv, &f_vec, pixel_pos[2] / panel.distance);
                }
                let (mut diffracted, airpath) = unitize(&pixel_pos);
                if omega_pixel == 0.0 || exp.sampling.oversample_omega {
                    omega_pixel = panel.pixel_size * panel.pixel_size / airpath / airpath * panel.close_distance / airpath;
                    if panel.point_pixel {
                        omega_pixel = 1.0 / airpath / airpath;
                    }
                }
                omega_sum += omega_pixel;
                if capture_fraction == 0.0 || exp.sampling.oversample_thick {
                    let parallax = dot(&diffracted, &o_vec);
                    capture_fraction = (-(thick_tic as f64) * panel.sensor.thickstep * panel.sensor.mu / parallax).exp()
                        - (-((thick_tic + 1) as f64) * panel.sensor.thickstep * panel.sensor.mu / parallax).exp();
                }
                if let Some(t) = trace.as_deref_mut() {
                    t.pixel_pos = pixel_pos;
                }

                for src in &exp.beam.sources {
                    let incident = [-src.dir[0], -src.dir[1], -src.dir[2]];
                    let lambda = src.lambda;
                    let scattering = [
                        (diffracted[0] - incident[0]) / lambda,
                        (diffracted[1] - incident[1]) / lambda,
                        (diffracted[2] - incident[2]) / lambda,
                    ];
                    let stol = 0.5 * magnitude(&scattering);
                    if let Some(t) = trace.as_deref_mut() {
                        t.stol = stol;
                    }
                    if exp.structure_factors.dmin > 0.0 && stol > 0.0 && exp.structure_factors.dmin > 0.5 / stol {
                        continue;
                    }
                    if polar == 0.0 || exp.sampling.oversample_polar {
                        let (p, d) = polarization_factor(exp.beam.polarization, &incident, &diffracted, &exp.beam.polar_vector);
                        polar = p;
                        diffracted = d;
                    }
                    for phi_tic in 0..exp.scan.phisteps as usize {
                        for mos_tic in 0..domains {
                            let o = &exp.crystal.orientations[phi_tic * domains + mos_tic];
                            let h = dot(&o.a, &scattering);
                            let k = dot(&o.b, &scattering);
                            let l = dot(&o.c, &scattering);
                            let h0 = (h - 0.5).ceil() as i32;
                            let k0 = (k - 0.5).ceil() as i32;
                            let l0 = (l - 0.5).ceil() as i32;
                            let f_latt = lattice_factor(exp, h, k, l, h0, k0, l0);
                            if f_latt == 0.0 && exp.background.water_size == 0.0 {
                                continue;
                            }
                            let mut f_cell = exp.structure_factors.default_f;
                            let mut looked_up = false;
                            if interp.enabled {
                                if let Some(g) = grid {
                                    match interpolate_f(g, h, k, l) {
                                        Lookup::Value(v) => {
                                            f_cell = v;
                                            looked_up = true;
                                        }
                                        Lookup::OutOfRange => {
                                            interp.enabled = false;
                                            interp.first_oob.get_or_insert((h, k, l, h0, k0, l0));
                                        }
                                    }
                                }
                            }
                            if !looked_up {
                                f_cell = nearest.get(h0 as i64, k0 as i64, l0 as i64);
                            }
                            let mut contribution = f_cell * f_cell * f_latt * f_latt;
                            if exp.sampling.oversample_thick {
                                contribution *= capture_fraction;
                            }
                            if exp.sampling.oversample_polar {
                                contribution *= polar;
                            }
                            if exp.sampling.oversample_omega {
                                contribution *= omega_pixel;
                            }
                            i_sum += contribution;
                            if let Some(t) = trace.as_deref_mut() {
                                t.hkl = [h, k, l];
                                t.hkl0 = [h0, k0, l0];
                                t.f_cell = f_cell;
                                t.f_latt = f_latt;
                                t.abc = [o.a, o.b, o.c];
                            }
                        }
                    }
                }
            }
        }
    }
    let mut test = crate::base::consts::R_E_SQR * exp.beam.fluence * i_sum / exp.sampling.steps as f64;
    if !exp.sampling.oversample_thick {
        test *= capture_fraction;
    }
    if !exp.sampling.oversample_polar {
        test *= polar;
    }
    if !exp.sampling.oversample_omega {
        test *= omega_pixel;
    }
    if let Some(t) = trace {
        t.i = i_sum;
        t.polar = polar;
        t.omega = omega_pixel;
        t.capture = capture_fraction;
    }
    (test, omega_sum)
}

/// F_latt for the crystal shape (C L2822-L2870).
#[inline(always)]
pub fn lattice_factor(exp: &Experiment, h: f64, k: f64, l: f64, h0: i32, k0: i32, l0: i32) -> f64 {
    let (na, nb, nc) = (exp.crystal.na, exp.crystal.nb, exp.crystal.nc);
    match exp.crystal.shape {
        CrystalShape::Square => {
            let mut f = 1.0;
            if na > 1.0 {
                f *= square_factor(h, h0, na);
            }
            if nb > 1.0 {
                f *= square_factor(k, k0, nb);
            }
            if nc > 1.0 {
                f *= square_factor(l, l0, nc);
            }
            f
        }
        CrystalShape::Round => {
            let (dh, dk, dl) = (h - h0 as f64, k - k0 as f64, l - l0 as f64);
            let hrad_sqr = dh * dh * na * na + dk * dk * nb * nb + dl * dl * nc * nc;
            na * nb * nc * 0.723601254558268 * sinc3(PI * (hrad_sqr * exp.crystal.fudge).sqrt())
        }
        CrystalShape::Gauss | CrystalShape::Tophat => {
            let (dh, dk, dl) = (h - h0 as f64, k - k0 as f64, l - l0 as f64);
            let (a, b, c) = (exp.crystal.lattice.a_star, exp.crystal.lattice.b_star, exp.crystal.lattice.c_star);
            let dx = dh * a[0] + dk * b[0] + dl * c[0];
            let dy = dh * a[1] + dk * b[1] + dl * c[1];
            let dz = dh * a[2] + dk * b[2] + dl * c[2];
            let rad_star_sqr = (dx * dx + dy * dy + dz * dz) * na * na * nb * nb * nc * nc;
            if exp.crystal.shape == CrystalShape::Gauss {
                na * nb * nc * (-(rad_star_sqr / 0.63 * exp.crystal.fudge)).exp()
            } else if rad_star_sqr * exp.crystal.fudge < 0.3969 {
                na * nb * nc
            } else {
                0.0
            }
        }
    }
}

/// One axis of the square crystal's shape factor (C L2822-L2834: sincg(pi*h, N)). At a non-integer N
/// (the flags take real numbers; the C's atoi never gives one) sin(N*pi*h)/sin(pi*h) is not periodic
/// in h, so the reduced index is used, sin(N*pi*dh)/sin(pi*dh) with dh = h - h0: equal in magnitude at
/// integer N, and smooth in N.
#[inline(always)]
pub fn square_factor(h: f64, h0: i32, n: f64) -> f64 {
    if n.fract() == 0.0 {
        sincg(PI * h, n)
    } else {
        sincg(PI * (h - h0 as f64), n)
    }
}

/// Whether pixel (f, s) is rendered at all: inside the inclusive ROI and not masked.
#[inline(always)]
pub fn pixel_active(panel: &Panel, f: usize, s: usize) -> bool {
    if !panel.roi.contains(f, s) {
        return false;
    }
    match &panel.mask {
        Some(m) => m[s * panel.fpixels + f] != 0,
        None => true,
    }
}

/// Render one row into `out` with the reference kernel; returns (omega sum, first out-of-range
/// evaluation).
pub fn render_row(exp: &Experiment, s: usize, interpolate: bool, out: &mut [f32]) -> (f64, Option<OutOfRange>) {
    render_row_from(exp, s, 0, interpolate, out)
}

/// Render pixels `from..` of row `s` with the reference kernel (the driver finishes a row with it
/// where another backend handed over, so the switch-off happens at exactly the C's evaluation).
pub fn render_row_from(exp: &Experiment, s: usize, from: usize, interpolate: bool, out: &mut [f32]) -> (f64, Option<OutOfRange>) {
    let (panel, s) = exp.det.locate(s);
    let mut state = InterpState { enabled: interpolate, first_oob: None };
    let mut omega = 0.0;
    for (f, px) in out.iter_mut().enumerate().skip(from) {
        if !pixel_active(panel, f, s) {
            *px = 0.0;
            continue;
        }
        let (v, om) = render_pixel(exp, panel, f, s, &mut state, None);
        *px = v as f32;
        omega += om;
    }
    (omega, state.first_oob)
}

