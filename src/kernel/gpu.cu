// The GPU render kernel: one thread per pixel, the reference kernel's loop (src/kernel/reference.rs,
// nanoBragg.c L2584-L3040) in the same order, compiled at run time by NVRTC (src/kernel/gpu.rs).
//
// Per-pixel geometry (pixel position, solid angle, capture fraction, polarization) is double, as in the
// C; the per-sample work (Miller indices, lattice factor, |F|^2) is `real` (double or float, the two
// entry points render_f64/render_f32). The lattice factor uses the reduced index and sinpi:
// sin(N*pi*dh)/sin(pi*dh) with dh = h - h0 has the C's magnitude at integer N (nanoBragg.c L2822-L2834)
// and keeps float accurate at large h.
//
// The same source compiles for the host (g++ with gpu_host.h: tests/gpu.rs runs it against the
// reference kernel on the CPU machine, where no GPU is).

#define GPU_PI 3.14159265358979323846

// The launch parameters: one struct in device memory. Its layout is `gpu::Params` in gpu.rs (8-byte fields
// first, then 4-byte ones); keep the two in step.
struct Params {
    // device addresses
    const void* orient;          // n_orient x 9 real: a, b, c per phi step x mosaic domain
    const double* sources;       // n_src x 4: direction (from the sample), lambda
    const double* panels;        // n_panels x PANEL_STRIDE (see below)
    const double* fgrid;         // |F| grid, l fastest (one value when there is none)
    const void* fgrid_real;      // the same grid in the kernel's precision (nearest-neighbour lookups)
    const unsigned short* mask;  // every panel's mask, concatenated (one value when none has one)
    float* out;                  // n_rows x fpixels
    double* omega;               // n_rows x fpixels: each pixel's solid-angle sum
    int* oob_from;               // n_rows: first pixel whose interpolation left the grid (fpixels: none)
    // doubles
    double a_star[3], b_star[3], c_star[3];
    double polar_vector[3], beam_vector[3];
    double polarization, re2_fluence, subpixel_size, dmin, default_f, water_size;
    double na, nb, nc, fudge, i_bg, steps;
    // 64-bit integers: the grid's minimum indices, spans (max - min) and strides
    long long f_min[3], f_span[3], f_range[3], stride_h, stride_k;
    // 32-bit integers
    int first_row, n_rows, fpixels, n_src, n_orient, oversample, shape, n_panels;
    int nopolar, oversample_omega, oversample_thick, oversample_polar, interpolate, has_grid;
    int n_cheb[3];  // per axis: integer N (2..CHEB_MAX_N) for the Chebyshev form of the lattice factor, 0: the sine ratio
    int fused_n;    // square spot, the same integer N (2..FUSED_MAX_N) on every axis, no grid: N (the unrolled loop), else 0
};

// One panel's doubles (fixed offsets; gpu.rs writes them).
enum {
    P_FDET = 0, P_SDET = 3, P_ODET = 6, P_PIX0 = 9,
    P_DISTANCE = 12, P_CLOSE = 13, P_PIXEL = 14, P_THICKSTEP = 15, P_THICK = 16, P_MU = 17,
    P_THICKSTEPS = 18, P_CURVED = 19, P_POINT = 20,
    P_ROI_F0 = 21, P_ROI_F1 = 22, P_ROI_S0 = 23, P_ROI_S1 = 24,  // half-open
    P_SPIXELS = 25, P_FIRST_ROW = 26, P_MASK_AT = 27,             // mask offset, -1: none
    PANEL_STRIDE = 28
};

enum { SHAPE_SQUARE = 0, SHAPE_ROUND = 1, SHAPE_GAUSS = 2, SHAPE_TOPHAT = 3 };

__device__ inline double sinpi_r(double x) { return sinpi(x); }
__device__ inline float sinpi_r(float x) { return sinpif(x); }
__device__ inline double ceil_r(double x) { return ceil(x); }
__device__ inline float ceil_r(float x) { return ceilf(x); }

__device__ inline double dot3(const double* a, const double* b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }

// The C's unitize: a zero vector stays zero; returns the length.
__device__ inline double unitize3(const double* v, double* u) {
    double mag = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
    if (mag != 0.0) {
        u[0] = v[0] / mag; u[1] = v[1] / mag; u[2] = v[2] / mag;
    } else {
        u[0] = u[1] = u[2] = 0.0;
    }
    return mag;
}

__device__ inline void cross3(const double* x, const double* y, double* r) {
    r[0] = x[1] * y[2] - x[2] * y[1];
    r[1] = x[2] * y[0] - x[0] * y[2];
    r[2] = x[0] * y[1] - x[1] * y[0];
}

// The C's rotate_axis.
__device__ inline void rotate_axis3(const double* v, const double* axis, double phi, double* r) {
    double s = sin(phi), c = cos(phi);
    double d = (axis[0] * v[0] + axis[1] * v[1] + axis[2] * v[2]) * (1.0 - c);
    r[0] = axis[0] * d + v[0] * c + (-axis[2] * v[1] + axis[1] * v[2]) * s;
    r[1] = axis[1] * d + v[1] * c + (axis[2] * v[0] - axis[0] * v[2]) * s;
    r[2] = axis[2] * d + v[2] * c + (-axis[1] * v[0] + axis[0] * v[1]) * s;
}

// Kahn polarization factor (the C's polarization_factor); renormalises `diffracted` in place as the
// C does.
__device__ __noinline__ double polarization_factor(double kahn, const double* incident_in, double* diffracted, const double* axis_in) {
    double incident[3], axis[3], d[3];
    unitize3(incident_in, incident);
    unitize3(diffracted, d);
    unitize3(axis_in, axis);
    diffracted[0] = d[0]; diffracted[1] = d[1]; diffracted[2] = d[2];
    double cos2theta = dot3(incident, d);
    double cos2theta_sqr = cos2theta * cos2theta;
    double sin2theta_sqr = 1.0 - cos2theta_sqr;
    double psi = 0.0;
    if (kahn != 0.0) {
        double t[3], b_in[3], e_in[3];
        cross3(axis, incident, t);
        unitize3(t, b_in);
        cross3(incident, b_in, t);
        unitize3(t, e_in);
        double e_out = dot3(d, e_in);
        double b_out = dot3(d, b_in);
        psi = -atan2(b_out, e_out);
    }
    return 0.5 * (1.0 + cos2theta_sqr - kahn * cos(2.0 * psi) * sin2theta_sqr);
}

// sin(N*pi*dh)/sin(pi*dh), N at dh = 0.
template <typename real>
__device__ inline real sincg_reduced(real dh, real n) {
    if (dh == (real)0) return n;
    return sinpi_r(n * dh) / sinpi_r(dh);
}

// cos(pi*x) for |x| <= 1/2 (the reduced index): a Taylor polynomial in x^2, no range reduction (float:
// to x^12, truncation error below 1e-8; double: to x^20, below 2e-17).
__device__ inline float cospi_reduced(float x) {
    float y = x * x;
    return 1.0f + y * (-4.934802200544679f + y * (4.058712126416768f + y * (-1.3352627688545893f + y * (0.23533063035889312f + y * (-0.02580689139001405f + y * 0.001929574309403922f)))));
}
__device__ inline double cospi_reduced(double x) {
    // Taylor to x^20: the first term left out is below 2e-17 at |x| = 1/2
    double y = x * x;
    double r = 3.6047307974624982e-09;
    r = r * y + -1.3878952462213761e-07;
    r = r * y + 4.3030695870329439e-06;
    r = r * y + -0.00010463810492484565;
    r = r * y + 0.0019295743094039221;
    r = r * y + -0.025806891390014051;
    r = r * y + 0.23533063035889312;
    r = r * y + -1.3352627688545893;
    r = r * y + 4.0587121264167676;
    r = r * y + -4.934802200544679;
    r = r * y + 1;
    return r;
}

// The same ratio at integer N as the Chebyshev polynomial U_{N-1}(cos(pi*dh)) (sin(N x)/sin(x) =
// U_{N-1}(cos x)): one cosine and N-2 multiply-adds instead of two sines and a division.
template <typename real>
__device__ inline real sincg_chebyshev(real dh, int n) {
    real c2 = (real)2 * cospi_reduced(dh);
    real u_prev = (real)1, u = c2;  // U_0, U_1
    for (int k = 2; k < n; k++) {
        real t = c2 * u - u_prev;
        u_prev = u;
        u = t;
    }
    return u;
}

template <typename real>
__device__ inline real square_axis(real dh, double n, int n_cheb) {
    return n_cheb ? sincg_chebyshev(dh, n_cheb) : sincg_reduced(dh, (real)n);
}

__device__ inline double sinc3(double x) {
    if (x == 0.0) return 1.0;
    return 3.0 * (sin(x) / x - cos(x)) / (x * x);
}

// F_latt of the round, Gaussian and tophat spots (nanoBragg.c L2836-L2870), out of line: its double
// arithmetic would otherwise hold registers in the square spot's loop.
__device__ __noinline__ double lattice_factor_other(const Params& p, double dh, double dk, double dl) {
    if (p.shape == SHAPE_ROUND) {
        double hrad_sqr = dh * dh * p.na * p.na + dk * dk * p.nb * p.nb + dl * dl * p.nc * p.nc;
        return p.na * p.nb * p.nc * 0.723601254558268 * sinc3(GPU_PI * sqrt(hrad_sqr * p.fudge));
    }
    double dx = dh * p.a_star[0] + dk * p.b_star[0] + dl * p.c_star[0];
    double dy = dh * p.a_star[1] + dk * p.b_star[1] + dl * p.c_star[1];
    double dz = dh * p.a_star[2] + dk * p.b_star[2] + dl * p.c_star[2];
    double rad_star_sqr = (dx * dx + dy * dy + dz * dz) * p.na * p.na * p.nb * p.nb * p.nc * p.nc;
    if (p.shape == SHAPE_GAUSS) return p.na * p.nb * p.nc * exp(-(rad_star_sqr / 0.63 * p.fudge));
    return rad_star_sqr * p.fudge < 0.3969 ? p.na * p.nb * p.nc : 0.0;
}

// F_latt for the crystal shape (nanoBragg.c L2822-L2870).
template <typename real>
__device__ inline real lattice_factor(const Params& p, real h, real k, real l, real h0, real k0, real l0) {
    real dh = h - h0, dk = k - k0, dl = l - l0;
    if (p.shape == SHAPE_SQUARE) {
        real f = (real)1;
        if (p.na > 1.0) f *= square_axis(dh, p.na, p.n_cheb[0]);
        if (p.nb > 1.0) f *= square_axis(dk, p.nb, p.n_cheb[1]);
        if (p.nc > 1.0) f *= square_axis(dl, p.nc, p.n_cheb[2]);
        return f;
    }
    return (real)lattice_factor_other(p, (double)dh, (double)dk, (double)dl);
}

// Nearest-neighbour |F| (nanoBragg.c L2994-L3005): the grid inside h_min..=h_max (k, l), else default_F.
// 32-bit indices (gpu.rs refuses grids of 2^31 values or more).
template <typename real>
__device__ inline real nearest_f(const Params& p, real h0, real k0, real l0) {
    int dh = (int)h0 - (int)p.f_min[0], dk = (int)k0 - (int)p.f_min[1], dl = (int)l0 - (int)p.f_min[2];
    if (!p.has_grid || dh < 0 || dh > (int)p.f_span[0] || dk < 0 || dk > (int)p.f_span[1] || dl < 0 || dl > (int)p.f_span[2]) return (real)p.default_f;
    return ((const real*)p.fgrid_real)[dh * (int)p.stride_h + dk * (int)p.stride_k + dl];
}

// 4-point Lagrange interpolation (the C's polint), term by term.
__device__ inline double polint(const double* xa, const double* ya, double x) {
    double x0 = (x - xa[1]) * (x - xa[2]) * (x - xa[3]) * ya[0] / ((xa[0] - xa[1]) * (xa[0] - xa[2]) * (xa[0] - xa[3]));
    double x1 = (x - xa[0]) * (x - xa[2]) * (x - xa[3]) * ya[1] / ((xa[1] - xa[0]) * (xa[1] - xa[2]) * (xa[1] - xa[3]));
    double x2 = (x - xa[0]) * (x - xa[1]) * (x - xa[3]) * ya[2] / ((xa[2] - xa[0]) * (xa[2] - xa[1]) * (xa[2] - xa[3]));
    double x3 = (x - xa[0]) * (x - xa[1]) * (x - xa[2]) * ya[3] / ((xa[3] - xa[0]) * (xa[3] - xa[1]) * (xa[3] - xa[2]));
    return x0 + x1 + x2 + x3;
}

// Tricubic interpolation of |F| (nanoBragg.c L2929-L2992); false where h, k, l leave the safe range.
__device__ __noinline__ bool interpolate_f(const Params& p, double h, double k, double l, double* f) {
    double h_min = (double)p.f_min[0], k_min = (double)p.f_min[1], l_min = (double)p.f_min[2];
    if ((h - h_min + 3.0) > (double)p.f_range[0] || h - 2.0 < h_min || (k - k_min + 3.0) > (double)p.f_range[1] || k - 2.0 < k_min ||
        (l - l_min + 3.0) > (double)p.f_range[2] || l - 2.0 < l_min)
        return false;
    long long hf = (long long)floor(h), kf = (long long)floor(k), lf = (long long)floor(l);
    double hd[4], kd[4], ld[4];
    for (int i = 0; i < 4; i++) {
        hd[i] = (double)(hf - 1 + i);
        kd[i] = (double)(kf - 1 + i);
        ld[i] = (double)(lf - 1 + i);
    }
    double ymtmp[4];
    for (int i1 = 0; i1 < 4; i1++) {
        double yk[4];
        for (int i2 = 0; i2 < 4; i2++) {
            double row[4];
            for (int i3 = 0; i3 < 4; i3++) {
                long long a = hf - 1 + i1 - p.f_min[0], b = kf - 1 + i2 - p.f_min[1], c = lf - 1 + i3 - p.f_min[2];
                row[i3] = p.fgrid[(a * (p.f_range[1] + 1) + b) * (p.f_range[2] + 1) + c];
            }
            yk[i2] = polint(ld, row, l);
        }
        ymtmp[i1] = polint(kd, yk, k);
    }
    *f = polint(hd, ymtmp, h);
    return true;
}

// The sample loop over phi steps x mosaic domains for one scattering vector: the sum of F^2 F_latt^2
// (nanoBragg.c L2800-L3020), or -1 where an interpolation left the grid. Out of line, so that its
// registers are its own and not the pixel's geometry's.
// U_{N-1}(c2/2) for c2 = 2 cos(pi*dh), unrolled: N - 2 multiply-adds.
template <typename real, int N>
__device__ inline real chebyshev_u(real c2) {
    real u_prev = (real)1, u = c2;
#pragma unroll
    for (int k = 2; k < N; k++) {
        real t = c2 * u - u_prev;
        u_prev = u;
        u = t;
    }
    return u;
}

// The usual crystal's sample loop: a square spot with the same integer N on every axis and one |F|
// (no grid): sum over orientations of F_latt^2, the recurrence unrolled for N.
template <typename real, int N>
__device__ real sum_square_fixed_n(const real* __restrict__ orient, int n_orient, real sx, real sy, real sz) {
    real acc = (real)0;
    for (int o = 0; o < n_orient; o++) {
        const real* m = orient + 9 * o;
        real h = m[0] * sx + m[1] * sy + m[2] * sz;
        real k = m[3] * sx + m[4] * sy + m[5] * sz;
        real l = m[6] * sx + m[7] * sy + m[8] * sz;
        real dh = h - ceil_r(h - (real)0.5), dk = k - ceil_r(k - (real)0.5), dl = l - ceil_r(l - (real)0.5);
        real f = chebyshev_u<real, N>((real)2 * cospi_reduced(dh)) * chebyshev_u<real, N>((real)2 * cospi_reduced(dk)) *
                 chebyshev_u<real, N>((real)2 * cospi_reduced(dl));
        acc += f * f;
    }
    return acc;
}

#define FUSED_MAX_N 8

// The sample loop over phi steps x mosaic domains for one scattering vector: the sum of F^2 F_latt^2
// (nanoBragg.c L2800-L3020), or -1 where an interpolation left the grid. Out of line, so that its
// registers are its own and not the pixel's geometry's.
template <typename real>
__device__ __noinline__ real sum_orientations(const Params& p, real sx, real sy, real sz) {
    const real* __restrict__ orient = (const real*)p.orient;
    const int n_orient = p.n_orient;
    if (p.fused_n) {
        real f = (real)p.default_f, s = (real)0;
        switch (p.fused_n) {
            case 2: s = sum_square_fixed_n<real, 2>(orient, n_orient, sx, sy, sz); break;
            case 3: s = sum_square_fixed_n<real, 3>(orient, n_orient, sx, sy, sz); break;
            case 4: s = sum_square_fixed_n<real, 4>(orient, n_orient, sx, sy, sz); break;
            case 5: s = sum_square_fixed_n<real, 5>(orient, n_orient, sx, sy, sz); break;
            case 6: s = sum_square_fixed_n<real, 6>(orient, n_orient, sx, sy, sz); break;
            case 7: s = sum_square_fixed_n<real, 7>(orient, n_orient, sx, sy, sz); break;
            default: s = sum_square_fixed_n<real, FUSED_MAX_N>(orient, n_orient, sx, sy, sz); break;
        }
        return f * f * s;
    }
    const bool skip_zero = p.water_size == 0.0;
    const bool interpolate = p.interpolate && p.has_grid;
    real acc = (real)0;
    for (int o = 0; o < n_orient; o++) {
        const real* m = orient + 9 * o;
        real h = m[0] * sx + m[1] * sy + m[2] * sz;
        real k = m[3] * sx + m[4] * sy + m[5] * sz;
        real l = m[6] * sx + m[7] * sy + m[8] * sz;
        real h0 = ceil_r(h - (real)0.5), k0 = ceil_r(k - (real)0.5), l0 = ceil_r(l - (real)0.5);
        real f_latt = lattice_factor<real>(p, h, k, l, h0, k0, l0);
        if (f_latt == (real)0 && skip_zero) continue;
        real fc;
        if (interpolate) {
            double f_cell;
            if (!interpolate_f(p, (double)h, (double)k, (double)l, &f_cell)) return (real)-1;
            fc = (real)f_cell;
        } else {
            fc = nearest_f<real>(p, h0, k0, l0);
        }
        acc += fc * fc * f_latt * f_latt;
    }
    return acc;
}

// One pixel: the value added to the float image, its solid-angle sum in *omega_out; false where an
// interpolation left the grid (the driver renders the rest of the row with the reference kernel).
template <typename real>
__device__ bool render_pixel(const Params& p, const double* panel, int fpixel, int spixel, float* value, double* omega_out) {
    const double* f_vec = panel + P_FDET;
    const double* s_vec = panel + P_SDET;
    const double* o_vec = panel + P_ODET;
    const double* pix0 = panel + P_PIX0;
    const int os = p.oversample;
    const double sub = p.subpixel_size;
    const int thicksteps = (int)panel[P_THICKSTEPS];
    const double thickstep = panel[P_THICKSTEP], thick = panel[P_THICK], mu = panel[P_MU];
    const double distance = panel[P_DISTANCE];

    double i_sum = p.i_bg;
    double polar = p.nopolar ? 1.0 : 0.0;
    double omega_pixel = 0.0, omega_sum = 0.0, capture_fraction = 0.0;

    for (int thick_tic = 0; thick_tic < thicksteps; thick_tic++) {
        double odet = thick_tic * thickstep;
        capture_fraction = thick == 0.0 ? 1.0 : 0.0;
        for (int sub_s = 0; sub_s < os; sub_s++) {
            for (int sub_f = 0; sub_f < os; sub_f++) {
                double fdet = sub * (double)((long long)fpixel * os + sub_f) + sub / 2.0;
                double sdet = sub * (double)((long long)spixel * os + sub_s) + sub / 2.0;
                double pos[3];
                for (int i = 0; i < 3; i++) pos[i] = fdet * f_vec[i] + sdet * s_vec[i] + odet * o_vec[i] + pix0[i];
                if (panel[P_CURVED] != 0.0) {
                    double v[3] = {distance * p.beam_vector[0], distance * p.beam_vector[1], distance * p.beam_vector[2]};
                    double nv[3];
                    rotate_axis3(v, s_vec, pos[1] / distance, nv);
                    rotate_axis3(nv, f_vec, pos[2] / distance, pos);
                }
                double diffracted[3];
                double airpath = unitize3(pos, diffracted);
                if (omega_pixel == 0.0 || p.oversample_omega) {
                    omega_pixel = panel[P_PIXEL] * panel[P_PIXEL] / airpath / airpath * panel[P_CLOSE] / airpath;
                    if (panel[P_POINT] != 0.0) omega_pixel = 1.0 / airpath / airpath;
                }
                omega_sum += omega_pixel;
                if (capture_fraction == 0.0 || p.oversample_thick) {
                    double parallax = dot3(diffracted, o_vec);
                    capture_fraction = exp(-(double)thick_tic * thickstep * mu / parallax) - exp(-(double)(thick_tic + 1) * thickstep * mu / parallax);
                }
                for (int src = 0; src < p.n_src; src++) {
                    const double* sp = p.sources + 4 * src;
                    double incident[3] = {-sp[0], -sp[1], -sp[2]};
                    double lambda = sp[3];
                    double scattering[3];
                    for (int i = 0; i < 3; i++) scattering[i] = (diffracted[i] - incident[i]) / lambda;
                    double stol = 0.5 * sqrt(dot3(scattering, scattering));
                    if (p.dmin > 0.0 && stol > 0.0 && p.dmin > 0.5 / stol) continue;
                    if (polar == 0.0 || p.oversample_polar) polar = polarization_factor(p.polarization, incident, diffracted, p.polar_vector);
                    real acc = sum_orientations<real>(p, (real)scattering[0], (real)scattering[1], (real)scattering[2]);
                    if (acc < (real)0) return false;
                    double contribution = (double)acc;
                    if (p.oversample_thick) contribution *= capture_fraction;
                    if (p.oversample_polar) contribution *= polar;
                    if (p.oversample_omega) contribution *= omega_pixel;
                    i_sum += contribution;
                }
            }
        }
    }
    double test = p.re2_fluence * i_sum / p.steps;
    if (!p.oversample_thick) test *= capture_fraction;
    if (!p.oversample_polar) test *= polar;
    if (!p.oversample_omega) test *= omega_pixel;
    *value = (float)test;
    *omega_out = omega_sum;
    return true;
}

// The panel that holds image row s.
__device__ inline const double* panel_of_row(const Params& p, int s) {
    const double* panel = p.panels;
    for (int i = 1; i < p.n_panels; i++) {
        const double* next = p.panels + i * PANEL_STRIDE;
        if ((double)s >= next[P_FIRST_ROW]) panel = next;
    }
    return panel;
}

template <typename real>
__device__ void render_one(const Params& p, long long idx) {
    if (idx >= (long long)p.n_rows * p.fpixels) return;
    int r = (int)(idx / p.fpixels);
    int f = (int)(idx % p.fpixels);
    int s_global = p.first_row + r;
    const double* panel = panel_of_row(p, s_global);
    int s = s_global - (int)panel[P_FIRST_ROW];
    bool active = f >= (int)panel[P_ROI_F0] && f < (int)panel[P_ROI_F1] && s >= (int)panel[P_ROI_S0] && s < (int)panel[P_ROI_S1];
    if (active && panel[P_MASK_AT] >= 0.0) active = p.mask[(long long)panel[P_MASK_AT] + (long long)s * p.fpixels + f] != 0;
    float value = 0.0f;
    double omega = 0.0;
    if (active && !render_pixel<real>(p, panel, f, s, &value, &omega)) {
        atomicMin(&p.oob_from[r], f);
        value = 0.0f;
        omega = 0.0;
    }
    p.out[idx] = value;
    p.omega[idx] = omega;
}

// The parameters are read from device memory (one small upload per launch): a struct passed by
// value would be copied to every thread's stack wherever a function takes its address.
// At most 128 registers (4 blocks of 128 threads per multiprocessor): what spills is the pixel's
// geometry, outside the sample loop (ptxas -v, sm_90).
extern "C" __global__ void __launch_bounds__(128, 4) render_f64(const Params* __restrict__ p) {
    render_one<double>(*p, (long long)blockIdx.x * blockDim.x + threadIdx.x);
}

extern "C" __global__ void __launch_bounds__(128, 4) render_f32(const Params* __restrict__ p) {
    render_one<float>(*p, (long long)blockIdx.x * blockDim.x + threadIdx.x);
}

// Each row's solid-angle sum in pixel order (the reference's order), over the pixels before the row's
// hand-over: one thread per row, so the sum does not depend on how the pixels were scheduled.
extern "C" __global__ void row_omega(const Params* __restrict__ pp, double* sums) {
    const Params& p = *pp;
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= p.n_rows) return;
    int end = p.oob_from[r];
    double sum = 0.0;
    for (int f = 0; f < end; f++) sum += p.omega[(long long)r * p.fpixels + f];
    sums[r] = sum;
}
