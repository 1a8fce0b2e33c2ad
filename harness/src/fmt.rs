//! Number formatting shared by the runner, the reports and `compare` (a leaf module: it imports
//! nothing from the harness but [`Stats`], so no two harness modules need each other for it).

use super::stats::Stats;

/// A number to `digits` decimals, or "n/a".
pub fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_else(|| "n/a".into())
}

/// A duration for people: "1.234 s", "12.3 ms", "850 µs".
pub fn fmt_time(s: Option<f64>) -> String {
    match s {
        None => "—".into(),
        Some(s) if s >= 1.0 => format!("{s:.3} s"),
        Some(s) if s >= 1e-3 => format!("{:.1} ms", s * 1e3),
        Some(s) => format!("{:.0} µs", s * 1e6),
    }
}

/// A ratio: "4.25×".
pub fn fmt_x(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.2}×")).unwrap_or_else(|| "—".into())
}

/// MiB to one decimal.
pub fn fmt_mb(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "—".into())
}

/// A rate in millions per second.
pub fn fmt_rate(v: Option<f64>) -> String {
    v.map(|x| format!("{:.2}", x / 1e6)).unwrap_or_else(|| "—".into())
}

/// The median of a statistic, if there is one.
pub fn med(s: &Option<Stats>) -> Option<f64> {
    s.as_ref().map(|s| s.median)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_for_people() {
        assert_eq!(fmt_time(Some(1.23456)), "1.235 s");
        assert_eq!(fmt_time(Some(0.01234)), "12.3 ms");
        assert_eq!(fmt_time(Some(0.000_85)), "850 µs");
        assert_eq!(fmt_time(None), "—");
        assert_eq!(fmt_opt(Some(0.5), 3), "0.500");
        assert_eq!(fmt_opt(None, 3), "n/a");
        assert_eq!(fmt_x(Some(4.254)), "4.25×");
    }
}
