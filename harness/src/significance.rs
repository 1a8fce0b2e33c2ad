//! Is a slowdown real or noise? The one-sided Mann–Whitney U test ("are the new runs stochastically
//! larger than the baseline's?") on the per-run samples kept in `benchmark_results.json`.
//!
//! The p-value follows `scipy.stats.mannwhitneyu(new, old, alternative="greater")` with its default
//! `method="auto"` (scipy 1.10): the exact null distribution of U when at least one sample has 8 values
//! or fewer and there are no ties; otherwise the normal approximation with the tie correction and a
//! continuity correction of 0.5. The unit tests check both
//! branches against numbers printed by scipy.

/// Which computation gave the p-value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The exact distribution of U (no ties, at least one sample of 8 values or fewer).
    Exact,
    /// Normal approximation with tie and continuity corrections.
    Asymptotic,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Exact => "exact",
            Method::Asymptotic => "normal approximation",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MannWhitney {
    /// U of the first sample (`x`): the number of (x, y) pairs with x > y, ties counting ½.
    pub u: f64,
    /// One-sided p-value of "x is stochastically greater than y".
    pub p_greater: f64,
    pub method: Method,
}

/// Mid-ranks (1-based, ties get the mean of their ranks) of `values`, in input order.
fn ranks(values: &[f64]) -> (Vec<f64>, f64) {
    let mut idx: Vec<usize> = (0..values.len()).collect();
    idx.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut r = vec![0.0; values.len()];
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && values[idx[j + 1]] == values[idx[i]] {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let mid = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = mid;
        }
        tie_term += t * t * t - t;
        i = j + 1;
    }
    (r, tie_term)
}

/// P(U ≥ u) under the null hypothesis for samples of n1 and n2 values without ties: the number of
/// n1-subsets of the ranks 1..=n1+n2 whose U is at least u, over C(n1+n2, n1). Counts in f64 (exact
/// up to 2^53, relative 1e-16 beyond).
fn exact_sf(u: f64, n1: usize, n2: usize) -> f64 {
    let max_u = n1 * n2;
    // f[a][b][s]: orderings of a x-values and b y-values with U = s. The largest value is an x (it
    // beats all b y-values) or a y (it adds nothing): f(a, b, s) = f(a−1, b, s−b) + f(a, b−1, s).
    let mut f = vec![vec![vec![0.0f64; max_u + 1]; n2 + 1]; n1 + 1];
    for (a, fa) in f.iter_mut().enumerate() {
        for (b, fab) in fa.iter_mut().enumerate() {
            if a == 0 || b == 0 {
                fab[0] = 1.0;
            }
        }
    }
    for a in 1..=n1 {
        for b in 1..=n2 {
            for s in 0..=a * b {
                let take = if s >= b { f[a - 1][b][s - b] } else { 0.0 };
                let skip = if s <= a * (b - 1) { f[a][b - 1][s] } else { 0.0 };
                f[a][b][s] = take + skip;
            }
        }
    }
    let counts = &f[n1][n2];
    let total: f64 = counts.iter().sum();
    let from = u.ceil().max(0.0) as usize;
    if from > max_u {
        return 0.0;
    }
    (counts[from..].iter().sum::<f64>() / total).clamp(0.0, 1.0)
}

/// The smallest one-sided p-value the exact test can give for samples of these sizes (all of x above
/// all of y): 1 / C(n1+n2, n1). When it exceeds the significance level, no test can decide.
pub fn min_p(n1: usize, n2: usize) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    let mut c = 1.0f64;
    for i in 0..n1 {
        c = c * (n2 + i + 1) as f64 / (i + 1) as f64;
    }
    1.0 / c
}

/// Complementary error function: `libm`'s (a port of musl's, accurate to about 1 ulp).
fn erfc(x: f64) -> f64 {
    libm::erfc(x)
}

/// Standard normal survival function P(Z > z).
fn norm_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The one-sided Mann–Whitney U test of "x is stochastically greater than y" (scipy's
/// `mannwhitneyu(x, y, alternative="greater")`). None when a sample is empty or holds a non-finite value.
pub fn mann_whitney_greater(x: &[f64], y: &[f64]) -> Option<MannWhitney> {
    let (n1, n2) = (x.len(), y.len());
    if n1 == 0 || n2 == 0 || x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    let all: Vec<f64> = x.iter().chain(y).copied().collect();
    let (r, tie_term) = ranks(&all);
    let r1: f64 = r[..n1].iter().sum();
    let u = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    let method = if (n1 > 8 && n2 > 8) || tie_term > 0.0 { Method::Asymptotic } else { Method::Exact };
    let p = match method {
        Method::Exact => exact_sf(u, n1, n2),
        Method::Asymptotic => {
            let (a, b) = (n1 as f64, n2 as f64);
            let n = a + b;
            let s = (a * b / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)))).sqrt();
            let num = u - a * b / 2.0 - 0.5;
            if s > 0.0 {
                norm_sf(num / s)
            } else if num > 0.0 {
                0.0
            } else {
                1.0
            }
        }
    };
    Some(MannWhitney { u, p_greater: p.clamp(0.0, 1.0), method })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (x, y, U, p) from scipy 1.10.1: `scipy.stats.mannwhitneyu(x, y, alternative="greater")`.
    #[allow(clippy::type_complexity)]
    const SCIPY: &[(&[f64], &[f64], f64, f64)] = &[
        (&[1.1, 1.2, 1.3], &[1.0, 1.05, 1.08], 9.0, 0.05),
        (&[2.0, 2.1, 2.2, 2.3, 2.4], &[1.0, 1.1, 1.2, 1.3, 1.4], 25.0, 0.003968253968253968),
        (&[1.0, 2.0, 3.0, 4.0, 5.0], &[1.5, 2.5, 3.5, 4.5, 5.5], 10.0, 0.726190476190476),
        (
            &[0.11, 0.12, 0.10, 0.13, 0.125, 0.118, 0.121, 0.119, 0.122],
            &[0.10, 0.11, 0.105, 0.102, 0.108, 0.109, 0.101, 0.103, 0.115],
            71.0,
            0.0040031647786448,
        ),
        (&[50.0, 50.0, 50.0, 50.0, 50.0], &[40.0, 40.0, 40.0, 40.0, 40.0], 25.0, 0.0019883758548943256),
        (&[3.0, 4.0, 2.0, 6.0, 2.0, 5.0], &[9.0, 7.0, 5.0, 10.0, 6.0, 8.0], 2.0, 0.9960472777460493),
        (
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0],
            &[3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5, 11.5, 12.5],
            28.0,
            0.9555134941490934,
        ),
        (&[5.0], &[4.0], 1.0, 0.5),
        (&[1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0], &[2.0, 3.0, 3.0, 4.0, 4.0, 5.0, 5.0, 6.0], 9.0, 0.9892218666199919),
    ];

    #[test]
    fn matches_scipy() {
        for &(x, y, u, p) in SCIPY {
            let r = mann_whitney_greater(x, y).unwrap();
            assert_eq!(r.u, u, "U of {x:?} vs {y:?}");
            // exact: to rounding; normal approximation: to rounding too (libm erfc)
            let tol = if r.method == Method::Exact { 1e-12 } else { 1e-10 };
            assert!((r.p_greater - p).abs() <= tol, "{x:?} vs {y:?}: p {} != scipy {p} ({:?})", r.p_greater, r.method);
        }
    }

    #[test]
    fn methods_as_scipy_auto() {
        let m = |x: &[f64], y: &[f64]| mann_whitney_greater(x, y).unwrap().method;
        assert_eq!(m(&[1.0, 2.0], &[3.0, 4.0]), Method::Exact);
        assert_eq!(m(&[1.0, 2.0], &[2.0, 4.0]), Method::Asymptotic); // a tie
        let big: Vec<f64> = (0..9).map(f64::from).collect();
        let big2: Vec<f64> = (0..9).map(|i| i as f64 + 0.5).collect();
        assert_eq!(m(&big, &big2), Method::Asymptotic);
        assert_eq!(m(&big, &[0.25]), Method::Exact);
    }

    #[test]
    fn min_p_is_one_over_the_binomial() {
        assert_eq!(min_p(3, 3), 1.0 / 20.0);
        assert!((min_p(5, 5) - 1.0 / 252.0).abs() < 1e-15);
        assert!((min_p(9, 9) - 1.0 / 48620.0).abs() < 1e-15);
        assert_eq!(min_p(0, 4), 1.0);
        // and the exact test reaches it when x is all above y
        let r = mann_whitney_greater(&[5.0, 6.0, 7.0], &[1.0, 2.0, 3.0]).unwrap();
        assert!((r.p_greater - min_p(3, 3)).abs() < 1e-15);
    }

    #[test]
    fn degenerate_inputs() {
        assert!(mann_whitney_greater(&[], &[1.0]).is_none());
        assert!(mann_whitney_greater(&[f64::NAN], &[1.0]).is_none());
        // all equal: no evidence at all
        let r = mann_whitney_greater(&[2.0, 2.0, 2.0], &[2.0, 2.0, 2.0]).unwrap();
        assert_eq!(r.p_greater, 1.0);
    }

    #[test]
    fn erfc_known_values() {
        // erfc(0) = 1, erfc(1) = 0.157299207050285, erfc(-1) = 1.842700792949715, erfc(3) = 2.209049699858544e-05
        assert!((erfc(0.0) - 1.0).abs() < 1e-15);
        assert!((erfc(1.0) - 0.157299207050285).abs() < 1e-14 * 0.16);
        assert!((erfc(-1.0) - 1.842700792949715).abs() < 1e-14);
        assert!((erfc(3.0) - 2.209049699858544e-05).abs() < 1e-14 * 2.3e-5);
    }
}
