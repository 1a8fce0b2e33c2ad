//! Derivative images: the reference pixel loop (nanoBragg.c L2584-L3040, `reference::render_pixel`)
//! once more over dual numbers, so every intensity it adds carries its derivatives by up to K
//! parameters, accumulated in the same loop. The kernel never learns what a parameter means: it is
//! handed the resolved quantities and their tangents (`experiment::tangents::Resolved`) and multiplies.
//!
//! What is held fixed, where the image is not differentiable: the nearest-neighbour F (a step at
//! half-integer h, k, l; its derivative is taken with F fixed), the `-dmin` cut, and every branch the
//! C takes on a value (the first sub-pixel's solid angle, polarization and capture fraction are reused
//! as in the C). Tricubic interpolation of F is differentiated. The gaussian spot shape is smooth in
//! h, k, l but its centre h0 jumps at half-integers as the C's does.
//!
//! The raster-order switch-off of interpolation follows the driver's rule (`backend`): rows render
//! with interpolation on; every row after the first that left the range is rendered again with it off.

use crate::base::consts::R_E_SQR;
use crate::base::dual::{dot, rotate_axis, unitize, Dual, DV3};
use crate::experiment::detector::Panel;
use crate::experiment::params::CrystalShape;
use crate::experiment::structure_factors::{HklGrid, NearestF};
use crate::experiment::tangents::Resolved;
use crate::experiment::Experiment;
use crate::kernel::reference::{pixel_active, InterpState};
use crate::kernel::{Backend, RenderOptions};
use rayon::prelude::*;
use std::collections::HashMap;
use std::f64::consts::PI;

/// The largest number of parameters one pass carries (more are rendered in several passes).
pub const MAX_K: usize = 8;

/// The derivative images of one render: `grads[i]` = d(float pixel)/d(parameter i), fast axis
/// fastest, and the image itself as the dual pass computed it (`value`, for checks).
pub struct TangentImages {
    pub value: Vec<f64>,
    pub grads: Vec<Vec<f64>>,
}

/// dL/dF: per-pixel weights dL/dμ in, per grid cell Σ w·dμ/dF out (nearest-neighbour lookups add
/// to the cell read, tricubic ones to the 64 cells of their block; `default_F` outside the grid to none).
pub struct FGradient<'a> {
    pub weights: &'a [f64],
    pub grid_grad: Vec<f64>,
}

/// The resolved setup as duals: value and tangents by the K parameters of one pass.
struct DualSetup<const K: usize> {
    panels: Vec<DPanel<K>>,
    beam_vector: DV3<K>,
    polar_vector: DV3<K>,
    sources: Vec<(DV3<K>, Dual<K>)>,
    orientations: Vec<[DV3<K>; 3]>,
    n: DV3<K>,
    recip: [DV3<K>; 3],
    fluence: Dual<K>,
    i_bg: Dual<K>,
}

struct DPanel<const K: usize> {
    pix0: DV3<K>,
    fdet: DV3<K>,
    sdet: DV3<K>,
    odet: DV3<K>,
    distance: Dual<K>,
    close_distance: Dual<K>,
}

impl<const K: usize> DualSetup<K> {
    /// Seed the duals: values from `base`, derivative i from `tangents[i]` (fewer than K: zeros).
    fn new(base: &Resolved, tangents: &[&Resolved]) -> Self {
        let vals = base.values();
        let tans: Vec<Vec<f64>> = tangents.iter().map(|t| t.values()).collect();
        let mut it = (0..vals.len()).map(|i| {
            let mut d = [0.0; K];
            for (j, t) in tans.iter().enumerate() {
                d[j] = t[i];
            }
            Dual { v: vals[i], d }
        });
        let mut next = || it.next().expect("a tangent of the same shape as the setup");
        let v3 = |next: &mut dyn FnMut() -> Dual<K>| [next(), next(), next()];
        let panels = base
            .panels
            .iter()
            .map(|_| {
                let (pix0, fdet, sdet, odet) = (v3(&mut next), v3(&mut next), v3(&mut next), v3(&mut next));
                let distance = next();
                DPanel { pix0, fdet, sdet, odet, distance, close_distance: next() }
            })
            .collect();
        let beam_vector = v3(&mut next);
        let polar_vector = v3(&mut next);
        let sources = base.sources.iter().map(|_| (v3(&mut next), next())).collect();
        let orientations = base.orientations.iter().map(|_| [v3(&mut next), v3(&mut next), v3(&mut next)]).collect();
        let n = v3(&mut next);
        let recip = [v3(&mut next), v3(&mut next), v3(&mut next)];
        let fluence = next();
        DualSetup { panels, beam_vector, polar_vector, sources, orientations, n, recip, fluence, i_bg: next() }
    }
}

/// Render the derivative images of `exp` by the parameters whose setup tangents are `tangents`
/// (`base` = `Resolved::of(exp)`) with the process's backend in double precision: see
/// [`render_tangents_with`].
pub fn render_tangents(exp: &Experiment, base: &Resolved, tangents: &[Resolved], fgrad: Option<&mut FGradient>) -> TangentImages {
    render_tangents_with(exp, base, tangents, fgrad, &RenderOptions::default())
}

/// The plan for derivative images: where the planner picks a SIMD backend for `opts` and the lane
/// pass supports the experiment (`tangent_lanes::supports`), the parameters it takes
/// (`tangent_lanes::takes`) render there in `opts.precision`; the others, and dL/dF (`fgrad`), in
/// the dual reference ([`render_tangents_reference`]). Under `check-kernels` the lane pass's images
/// are compared with the reference's.
pub fn render_tangents_with(exp: &Experiment, base: &Resolved, tangents: &[Resolved], fgrad: Option<&mut FGradient>, opts: &RenderOptions) -> TangentImages {
    let level = match crate::kernel::kernel_for(exp, opts.backend) {
        Backend::Simd(level) if super::tangent_lanes::supports(exp) => Some(level),
        _ => None,
    };
    let in_lanes: Vec<bool> = tangents.iter().map(|t| level.is_some() && super::tangent_lanes::takes(t)).collect();
    let mut out = TangentImages { value: Vec::new(), grads: vec![Vec::new(); tangents.len()] };
    if let Some(level) = level.filter(|_| in_lanes.iter().any(|&x| x)) {
        let lane_t: Vec<&Resolved> = tangents.iter().zip(&in_lanes).filter(|p| *p.1).map(|p| p.0).collect();
        let (value, grads) = super::tangent_lanes::render_lanes(exp, &lane_t, level, opts.precision);
        #[cfg(feature = "check-kernels")]
        check_tangents(exp, base, &lane_t, level, opts.precision, &grads);
        let mut it = grads.into_iter();
        for (g, _) in out.grads.iter_mut().zip(&in_lanes).filter(|p| *p.1) {
            *g = it.next().expect("one image per tangent");
        }
        out.value = value;
    }
    let dual_t: Vec<Resolved> = tangents.iter().zip(&in_lanes).filter(|p| !*p.1).map(|p| p.0.clone()).collect();
    if !dual_t.is_empty() || fgrad.is_some() || out.value.is_empty() {
        let dual = render_tangents_reference(exp, base, &dual_t, fgrad);
        let mut it = dual.grads.into_iter();
        for (g, _) in out.grads.iter_mut().zip(&in_lanes).filter(|p| !*p.1) {
            *g = it.next().expect("one image per tangent");
        }
        out.value = dual.value;
    }
    out
}

/// The dual reference: the derivative images in passes of at most [`MAX_K`] parameters over dual
/// numbers. With `fgrad`, the first pass also accumulates Σ_pixels w·dμ/dF per structure-factor grid cell.
pub fn render_tangents_reference(exp: &Experiment, base: &Resolved, tangents: &[Resolved], mut fgrad: Option<&mut FGradient>) -> TangentImages {
    let mut out = TangentImages { value: Vec::new(), grads: Vec::new() };
    let refs: Vec<&Resolved> = tangents.iter().collect();
    let chunks: Vec<&[&Resolved]> = if refs.is_empty() { vec![&refs[..]] } else { refs.chunks(MAX_K).collect() };
    for chunk in chunks {
        let (value, grads) = match chunk.len() {
            0 | 1 => pass::<1>(exp, base, chunk, fgrad.take()),
            2 => pass::<2>(exp, base, chunk, fgrad.take()),
            3 | 4 => pass::<4>(exp, base, chunk, fgrad.take()),
            _ => pass::<8>(exp, base, chunk, fgrad.take()),
        };
        out.value = value;
        out.grads.extend(grads);
    }
    out
}

/// One row's result: its pixels, whether interpolation left its range in it, its dL/dF sums.
type Row<const K: usize> = (Vec<Dual<K>>, bool, HashMap<usize, f64>);

/// One pass of K parameters over the whole image: (value, one image per parameter in `chunk`).
fn pass<const K: usize>(exp: &Experiment, base: &Resolved, chunk: &[&Resolved], fgrad: Option<&mut FGradient>) -> (Vec<f64>, Vec<Vec<f64>>) {
    let ds = DualSetup::<K>::new(base, chunk);
    let fp = exp.det.fpixels();
    let rows = exp.det.rows();
    let weights = fgrad.as_ref().map(|f| f.weights);
    let render = |first: usize, interpolate: bool| -> Vec<Row<K>> {
        (first..rows).into_par_iter().map(|s| render_row(exp, &ds, s, interpolate, weights.map(|w| &w[s * fp..(s + 1) * fp]))).collect()
    };
    let mut rows_out = render(0, exp.structure_factors.interpolate);
    if let Some(bad) = rows_out.iter().position(|r| r.1) {
        rows_out.truncate(bad + 1);
        rows_out.extend(render(bad + 1, false));
    }
    if let Some(f) = fgrad {
        f.grid_grad = vec![0.0; exp.structure_factors.fhkl.as_ref().map_or(0, |g| g.data.len())];
        // per cell, the rows' sums in row order: the same at any thread count
        for r in &rows_out {
            for (&i, &v) in &r.2 {
                f.grid_grad[i] += v;
            }
        }
    }
    let mut value = vec![0.0; fp * rows];
    let mut grads = vec![vec![0.0; fp * rows]; chunk.len()];
    for (s, (px, _, _)) in rows_out.iter().enumerate() {
        for (f, d) in px.iter().enumerate() {
            value[s * fp + f] = d.v;
            for (j, g) in grads.iter_mut().enumerate() {
                g[s * fp + f] = d.d[j];
            }
        }
    }
    (value, grads)
}

/// One row: its pixels as duals, whether interpolation left its range in it, and (given this row's
/// weights dL/dμ) its sums Σ w·dμ/dF per grid cell.
fn render_row<const K: usize>(exp: &Experiment, ds: &DualSetup<K>, s: usize, interpolate: bool, weights: Option<&[f64]>) -> Row<K> {
    let (pi, panel, s) = locate(exp, s);
    let mut state = InterpState { enabled: interpolate, first_oob: None };
    let mut local: Vec<(usize, f64)> = Vec::new();
    let mut sums = HashMap::new();
    let px = (0..panel.fpixels)
        .map(|f| {
            if !pixel_active(panel, f, s) {
                return Dual::c(0.0);
            }
            local.clear();
            let w = weights.map_or(0.0, |w| w[f]);
            let (v, scale) = pixel(exp, ds, pi, panel, f, s, &mut state, (w != 0.0).then_some(&mut local));
            for &(i, c) in &local {
                *sums.entry(i).or_insert(0.0) += w * scale * c;
            }
            v
        })
        .collect();
    (px, state.first_oob.is_some(), sums)
}

/// The panel holding image row `s`: (its index, the panel, the row within it).
fn locate(exp: &Experiment, s: usize) -> (usize, &Panel, usize) {
    let mut first = 0;
    for (i, p) in exp.det.panels.iter().enumerate() {
        if s < first + p.spixels {
            return (i, p, s - first);
        }
        first += p.spixels;
    }
    panic!("row {s} is past the detector's {first} rows");
}

/// The per-pixel factors the C computes at the first sub-pixel (or at each, when oversampled) and
/// reuses: solid angle, capture fraction, polarization.
struct SubPixel<const K: usize> {
    omega: Dual<K>,
    capture: Dual<K>,
    polar: Dual<K>,
}

/// One pixel over duals: (the float-image value with its derivatives, the factor that turns an
/// `fsink` coefficient dI_sum/dF into dμ/dF). Mirrors `reference::render_pixel` line by line.
#[allow(clippy::too_many_arguments)]
fn pixel<const K: usize>(
    exp: &Experiment,
    ds: &DualSetup<K>,
    pi: usize,
    panel: &Panel,
    fpixel: usize,
    spixel: usize,
    interp: &mut InterpState,
    mut fsink: Option<&mut Vec<(usize, f64)>>,
) -> (Dual<K>, f64) {
    let os = exp.sampling.oversample;
    let sub = exp.sampling.subpixel_size;
    let g = &ds.panels[pi];
    let mut i_sum = ds.i_bg;
    let mut st = SubPixel { omega: Dual::c(0.0), capture: Dual::c(0.0), polar: Dual::c(if exp.beam.nopolar { 1.0 } else { 0.0 }) };
    for thick_tic in 0..panel.sensor.thicksteps {
        let odet = thick_tic as f64 * panel.sensor.thickstep;
        st.capture = Dual::c(if panel.sensor.thick == 0.0 { 1.0 } else { 0.0 });
        for sub_s in 0..os {
            for sub_f in 0..os {
                let fdet = sub * ((fpixel * os + sub_f) as f64) + sub / 2.0;
                let sdet = sub * ((spixel * os + sub_s) as f64) + sub / 2.0;
                let mut pos: DV3<K> = std::array::from_fn(|i| g.fdet[i] * fdet + g.sdet[i] * sdet + g.odet[i] * odet + g.pix0[i]);
                if panel.curved {
                    let b = ds.beam_vector;
                    let v = b.map(|x| x * g.distance);
                    let nv = rotate_axis(&v, &g.sdet, pos[1] / g.distance);
                    pos = rotate_axis(&nv, &g.fdet, pos[2] / g.distance);
                }
                let (mut diffracted, airpath) = unitize(&pos);
                if st.omega.v == 0.0 || exp.sampling.oversample_omega {
                    st.omega = if panel.point_pixel {
                        1.0 / airpath / airpath
                    } else {
                        panel.pixel_size * panel.pixel_size / airpath / airpath * g.close_distance / airpath
                    };
                }
                if st.capture.v == 0.0 || exp.sampling.oversample_thick {
                    let parallax = dot(&diffracted, &g.odet);
                    let (t, mu) = (panel.sensor.thickstep, panel.sensor.mu);
                    st.capture = (-(thick_tic as f64) * t * mu / parallax).exp() - (-((thick_tic + 1) as f64) * t * mu / parallax).exp();
                }
                i_sum += sources(exp, ds, &mut diffracted, &mut st, interp, fsink.as_deref_mut());
            }
        }
    }
    let mut scale = Dual::c(R_E_SQR) * ds.fluence / exp.sampling.steps as f64;
    if !exp.sampling.oversample_thick {
        scale *= st.capture;
    }
    if !exp.sampling.oversample_polar {
        scale *= st.polar;
    }
    if !exp.sampling.oversample_omega {
        scale *= st.omega;
    }
    (scale * i_sum, scale.v)
}

/// The source, phi and mosaic loops of one sub-pixel (C L2720-L3010): the intensity they add.
fn sources<const K: usize>(
    exp: &Experiment,
    ds: &DualSetup<K>,
    diffracted: &mut DV3<K>,
    st: &mut SubPixel<K>,
    interp: &mut InterpState,
    mut fsink: Option<&mut Vec<(usize, f64)>>,
) -> Dual<K> {
    let grid = exp.structure_factors.fhkl.as_deref();
    let nearest = NearestF::<f64>::new(grid, exp.structure_factors.default_f);
    let nearest = nearest.view();
    let domains = exp.domains();
    let mut i_sum = Dual::c(0.0);
    for (dir, lambda) in &ds.sources {
        let incident = dir.map(|x| -x);
        let scattering: DV3<K> = std::array::from_fn(|i| (diffracted[i] - incident[i]) / *lambda);
        let stol = 0.5 * dot(&scattering, &scattering).sqrt().v;
        let dmin = exp.structure_factors.dmin;
        if dmin > 0.0 && stol > 0.0 && dmin > 0.5 / stol {
            continue;
        }
        if st.polar.v == 0.0 || exp.sampling.oversample_polar {
            let (p, d) = polarization_factor(exp.beam.polarization, &incident, diffracted, &ds.polar_vector);
            st.polar = p;
            *diffracted = d;
        }
        for phi_tic in 0..exp.scan.phisteps as usize {
            for mos_tic in 0..domains {
                let o = &ds.orientations[phi_tic * domains + mos_tic];
                let hkl = [dot(&o[0], &scattering), dot(&o[1], &scattering), dot(&o[2], &scattering)];
                let hkl0 = hkl.map(|x| (x.v - 0.5).ceil() as i32);
                let f_latt = lattice_factor(exp, ds, &hkl, &hkl0);
                if f_latt.v == 0.0 && exp.background.water_size == 0.0 {
                    continue;
                }
                let mut f_cell: Option<Dual<K>> = None;
                let mut block = None;
                if interp.enabled {
                    if let Some(g) = grid {
                        match interpolate_f(g, &hkl) {
                            Some((v, b)) => {
                                f_cell = Some(v);
                                block = Some(b);
                            }
                            None => {
                                interp.enabled = false;
                                let [h, k, l] = hkl.map(|x| x.v);
                                interp.first_oob.get_or_insert((h, k, l, hkl0[0], hkl0[1], hkl0[2]));
                            }
                        }
                    }
                }
                let f_cell = f_cell.unwrap_or_else(|| Dual::c(nearest.get(hkl0[0] as i64, hkl0[1] as i64, hkl0[2] as i64)));
                let mut factor = f_latt * f_latt;
                if exp.sampling.oversample_thick {
                    factor *= st.capture;
                }
                if exp.sampling.oversample_polar {
                    factor *= st.polar;
                }
                if exp.sampling.oversample_omega {
                    factor *= st.omega;
                }
                i_sum += f_cell * f_cell * factor;
                if let (Some(sink), Some(g)) = (fsink.as_deref_mut(), grid) {
                    let c = 2.0 * f_cell.v * factor.v;
                    match block {
                        Some(b) => interpolation_weights(g, &b, &hkl.map(|x| x.v), c, sink),
                        None => sink.extend(grid_index(g, hkl0).map(|i| (i, c))),
                    }
                }
            }
        }
    }
    i_sum
}

/// The grid cell of (h0, k0, l0), if the nearest-neighbour lookup reads one (else it gives default_F).
fn grid_index(g: &HklGrid, hkl0: [i32; 3]) -> Option<usize> {
    let (i, j, k) = (hkl0[0] - g.h_min, hkl0[1] - g.k_min, hkl0[2] - g.l_min);
    let inside = (0..=g.h_range).contains(&i) && (0..=g.k_range).contains(&j) && (0..=g.l_range).contains(&k);
    inside.then(|| g.index(i, j, k))
}

/// sin(N x)/sin(x) over duals, N at x = 0 (`physics::sincg`; its x-derivative vanishes there).
fn sincg<const K: usize>(x: Dual<K>, n: Dual<K>) -> Dual<K> {
    if x.v == 0.0 {
        return n;
    }
    (x * n).sin() / x.sin()
}

/// F_latt over duals (C L2822-L2870). The square crystal uses the reduced index h − h0, equal in
/// magnitude to the C's sin(Nπh)/sin(πh) at integer N (`reference::square_factor`).
fn lattice_factor<const K: usize>(exp: &Experiment, ds: &DualSetup<K>, hkl: &DV3<K>, hkl0: &[i32; 3]) -> Dual<K> {
    let n = &ds.n;
    let d: DV3<K> = std::array::from_fn(|i| hkl[i] - hkl0[i] as f64);
    match exp.crystal.shape {
        CrystalShape::Square => {
            let mut f = Dual::c(1.0);
            for i in 0..3 {
                if n[i].v > 1.0 {
                    f *= sincg(d[i] * PI, n[i]);
                }
            }
            f
        }
        CrystalShape::Round => {
            let r2 = d[0] * d[0] * n[0] * n[0] + d[1] * d[1] * n[1] * n[1] + d[2] * d[2] * n[2] * n[2];
            let x2 = r2 * exp.crystal.fudge;
            let s3 = if x2.v == 0.0 {
                Dual::c(1.0)
            } else {
                let x = x2.sqrt() * PI;
                3.0 * (x.sin() / x - x.cos()) / (x * x)
            };
            n[0] * n[1] * n[2] * 0.723601254558268 * s3
        }
        CrystalShape::Gauss | CrystalShape::Tophat => {
            let r = &ds.recip;
            let v: DV3<K> = std::array::from_fn(|i| d[0] * r[0][i] + d[1] * r[1][i] + d[2] * r[2][i]);
            let nnn = n[0] * n[1] * n[2];
            let rad = dot(&v, &v) * nnn * nnn;
            nnn * (-(rad / 0.63 * exp.crystal.fudge)).exp()
        }
    }
}

/// dF_cell/dF(grid cell) of a tricubic evaluation: the 4-point Lagrange interpolation along l, then
/// k, then h is linear in the 64 grid values, with weight L_a(h)·L_b(k)·L_c(l) (L the Lagrange basis
/// on the block's nodes). Adds (cell, c·weight) to `sink`.
fn interpolation_weights(g: &HklGrid, block: &[[i32; 4]; 3], hkl: &[f64; 3], c: f64, sink: &mut Vec<(usize, f64)>) {
    let basis = |nodes: &[i32; 4], x: f64| -> [f64; 4] {
        std::array::from_fn(|i| (0..4).filter(|&j| j != i).map(|j| (x - nodes[j] as f64) / (nodes[i] - nodes[j]) as f64).product())
    };
    let (lh, lk, ll) = (basis(&block[0], hkl[0]), basis(&block[1], hkl[1]), basis(&block[2], hkl[2]));
    for a in 0..4 {
        for b in 0..4 {
            for d in 0..4 {
                let i = g.index(block[0][a] - g.h_min, block[1][b] - g.k_min, block[2][d] - g.l_min);
                sink.push((i, c * lh[a] * lk[b] * ll[d]));
            }
        }
    }
}

/// Tricubic F over duals (C L2929-L2992, `structure_factors::interpolate_f`) and the block of grid
/// indices it read (h, k, l nodes); None out of range.
fn interpolate_f<const K: usize>(grid: &HklGrid, hkl: &DV3<K>) -> Option<(Dual<K>, [[i32; 4]; 3])> {
    let [h, k, l] = hkl.map(|x| x.v);
    let (h_min, k_min, l_min) = (grid.h_min as f64, grid.k_min as f64, grid.l_min as f64);
    if (h - h_min + 3.0) > grid.h_range as f64
        || h - 2.0 < h_min
        || (k - k_min + 3.0) > grid.k_range as f64
        || k - 2.0 < k_min
        || (l - l_min + 3.0) > grid.l_range as f64
        || l - 2.0 < l_min
    {
        return None;
    }
    let idx = |x: f64| {
        let f = x.floor() as i32;
        [f - 1, f, f + 1, f + 2]
    };
    let (hi, ki, li) = (idx(h), idx(k), idx(l));
    let ld = li.map(|x| x as f64);
    let kd = ki.map(|x| x as f64);
    let hd = hi.map(|x| x as f64);
    let mut ym = [Dual::c(0.0); 4];
    for (a, y) in ym.iter_mut().enumerate() {
        let mut yk = [Dual::c(0.0); 4];
        for (b, yv) in yk.iter_mut().enumerate() {
            let row: [f64; 4] = std::array::from_fn(|c| grid.at(hi[a] - grid.h_min, ki[b] - grid.k_min, li[c] - grid.l_min));
            *yv = polint_dual(&ld, &row.map(Dual::c), hkl[2]);
        }
        *y = polint_dual(&kd, &yk, hkl[1]);
    }
    Some((polint_dual(&hd, &ym, hkl[0]), [hi, ki, li]))
}

/// 4-point Lagrange interpolation over duals (`physics::polint`, term by term as the C).
fn polint_dual<const K: usize>(xa: &[f64; 4], ya: &[Dual<K>; 4], x: Dual<K>) -> Dual<K> {
    let t = |i: usize, j: usize, k: usize, m: usize| (x - xa[j]) * (x - xa[k]) * (x - xa[m]) * ya[i] / ((xa[i] - xa[j]) * (xa[i] - xa[k]) * (xa[i] - xa[m]));
    t(0, 1, 2, 3) + t(1, 0, 2, 3) + t(2, 0, 1, 3) + t(3, 0, 1, 2)
}

/// The Kahn polarization factor over duals (`physics::polarization_factor`), with the renormalised
/// diffracted vector the C keeps using.
fn polarization_factor<const K: usize>(kahn: f64, incident: &DV3<K>, diffracted: &DV3<K>, axis: &DV3<K>) -> (Dual<K>, DV3<K>) {
    use crate::base::dual::cross;
    let (incident, _) = unitize(incident);
    let (diffracted, _) = unitize(diffracted);
    let (axis, _) = unitize(axis);
    let cos2theta = dot(&incident, &diffracted);
    let cos2theta_sqr = cos2theta * cos2theta;
    let sin2theta_sqr = 1.0 - cos2theta_sqr;
    let mut psi = Dual::c(0.0);
    if kahn != 0.0 {
        let (b_in, _) = unitize(&cross(&axis, &incident));
        let (e_in, _) = unitize(&cross(&incident, &b_in));
        let e_out = dot(&diffracted, &e_in);
        let b_out = dot(&diffracted, &b_in);
        psi = -b_out.atan2(e_out);
    }
    (0.5 * (1.0 + cos2theta_sqr - kahn * (2.0 * psi).cos() * sin2theta_sqr), diffracted)
}

/// `check-kernels` for the derivative images: render the images `grads` of the lane pass at `level`
/// again with the dual reference and panic where an image differs by more than
/// [`tangent_tolerance`](super::tangent_lanes::tangent_tolerance) of its peak. (Here, not in
/// `check.rs`, which the backends import: the lane pass imports them.)
#[cfg(feature = "check-kernels")]
pub fn check_tangents(
    exp: &Experiment,
    base: &crate::experiment::tangents::Resolved,
    tangents: &[&crate::experiment::tangents::Resolved],
    level: crate::base::cpu::SimdLevel,
    precision: crate::experiment::params::Precision,
    grads: &[Vec<f64>],
) {
    let owned: Vec<_> = tangents.iter().map(|t| (*t).clone()).collect();
    let want = render_tangents_reference(exp, base, &owned, None);
    for (p, (got, want)) in grads.iter().zip(&want.grads).enumerate() {
        let (err, peak) = super::tangent_lanes::tangent_difference(got, want);
        let tol = super::tangent_lanes::tangent_tolerance(precision) * peak;
        assert!(err <= tol, "check-kernels: derivative image {p} at level {} ({precision:?}): max |diff| {err:.3e} > {tol:.3e} (peak {peak:.3e})", level.name());
    }
}
