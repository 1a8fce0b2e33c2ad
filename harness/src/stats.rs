//! Summary statistics of repeated timings: min / median / max / mean / standard deviation, the
//! spread (max/min, flagged above [`WIDE_SPREAD`]) and outliers counted as hyperfine does (modified
//! Z-score on the median absolute deviation, threshold [`OUTLIER_THRESHOLD`]).

use serde::{Deserialize, Serialize};

/// A spread (max/min) above this is reported as wide: the machine was not quiet enough, or the run is
/// too short to time reliably.
pub const WIDE_SPREAD: f64 = 1.2;

/// Modified Z-score above which a measurement is an outlier: 1.4826 converts the MAD into an estimate
/// of the standard deviation, 10 is the number of standard deviations (hyperfine's choice).
pub const OUTLIER_THRESHOLD: f64 = 1.4826 * 10.0;

/// Statistics of one metric over the measured (non-warmup) runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for a single value.
    pub stddev: f64,
    /// max / min (1 when both are 0; null when only min is 0, which counts as a wide spread).
    pub spread: Option<f64>,
    /// spread > [`WIDE_SPREAD`].
    pub wide_spread: bool,
    /// Number of values whose modified Z-score exceeds [`OUTLIER_THRESHOLD`].
    pub outliers: usize,
}

/// Median of a slice (mean of the two middle values for an even count); NaN for an empty slice.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Modified Z-scores `(x - median) / MAD` (MAD clamped to machine epsilon, as hyperfine does, so a set
/// of identical values with one different value marks that value as an outlier).
pub fn modified_zscores(values: &[f64]) -> Vec<f64> {
    modified_zscores_with_resolution(values, 0.0)
}

/// As [`modified_zscores`], with the MAD never below `resolution`: values read from a clock or a
/// printout with that resolution (our child's millisecond summary) are often identical, and a MAD of
/// zero would make every one-tick difference an outlier.
pub fn modified_zscores_with_resolution(values: &[f64], resolution: f64) -> Vec<f64> {
    if values.is_empty() {
        return Vec::new();
    }
    let m = median(values);
    let dev: Vec<f64> = values.iter().map(|x| (x - m).abs()).collect();
    let mad = median(&dev).max(f64::EPSILON).max(resolution);
    values.iter().map(|x| (x - m) / mad).collect()
}

/// Number of outliers among `values` (modified Z-score above [`OUTLIER_THRESHOLD`] in absolute value).
pub fn count_outliers(values: &[f64]) -> usize {
    count_outliers_with_resolution(values, 0.0)
}

pub fn count_outliers_with_resolution(values: &[f64], resolution: f64) -> usize {
    modified_zscores_with_resolution(values, resolution).iter().filter(|z| z.abs() > OUTLIER_THRESHOLD).count()
}

impl Stats {
    /// Statistics of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Stats> {
        Stats::with_resolution(values, 0.0)
    }

    /// Statistics of values measured with the given resolution (see
    /// [`modified_zscores_with_resolution`]).
    pub fn with_resolution(values: &[f64], resolution: f64) -> Option<Stats> {
        if values.is_empty() {
            return None;
        }
        let n = values.len();
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mean = values.iter().sum::<f64>() / n as f64;
        let stddev = if n > 1 { (values.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64).sqrt() } else { 0.0 };
        let spread = if min > 0.0 {
            Some(max / min)
        } else if max == 0.0 {
            Some(1.0)
        } else {
            None
        };
        Some(Stats {
            n,
            min,
            median: median(values),
            max,
            mean,
            stddev,
            spread,
            wide_spread: spread.is_none_or(|s| s > WIDE_SPREAD),
            outliers: count_outliers_with_resolution(values, resolution),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn stats_of_known_values() {
        let s = Stats::of(&[1.0, 2.0, 3.0, 4.0, 10.0]).unwrap();
        assert_eq!(s.n, 5);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 10.0);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.mean, 4.0);
        // sample variance: (9+4+1+0+36)/4 = 12.5
        assert!((s.stddev - 12.5f64.sqrt()).abs() < 1e-12);
        assert_eq!(s.spread, Some(10.0));
        assert!(s.wide_spread);
        // MAD = median(|x-3|) = median(2,1,0,1,7) = 1; z(10) = 7 < 14.826: not an outlier
        assert_eq!(s.outliers, 0);
        assert!(Stats::of(&[]).is_none());
    }

    #[test]
    fn single_value_has_no_spread() {
        let s = Stats::of(&[0.5]).unwrap();
        assert_eq!((s.min, s.median, s.max, s.stddev, s.spread), (0.5, 0.5, 0.5, 0.0, Some(1.0)));
        assert!(!s.wide_spread);
        assert_eq!(s.outliers, 0);
    }

    #[test]
    fn spread_threshold_is_exclusive() {
        assert!(!Stats::of(&[1.0, 1.2]).unwrap().wide_spread);
        assert!(Stats::of(&[1.0, 1.21]).unwrap().wide_spread);
        let zero = Stats::of(&[0.0, 0.0]).unwrap();
        assert_eq!(zero.spread, Some(1.0));
        assert_eq!(Stats::of(&[0.0, 1.0]).unwrap().spread, None);
        assert!(Stats::of(&[0.0, 1.0]).unwrap().wide_spread);
    }

    #[test]
    fn outliers_as_hyperfine() {
        // MAD = 0.1 (deviations 0.1 0 0.1 0.1 0 ... ), a 10x value is far beyond 14.8 MADs
        let v = [1.0, 1.1, 0.9, 1.0, 1.1, 0.9, 1.0, 10.0];
        assert_eq!(count_outliers(&v), 1);
        // identical values: MAD clamps to epsilon, any different value is an outlier
        assert_eq!(count_outliers(&[2.0, 2.0, 2.0, 2.0, 2.5]), 1);
        assert_eq!(count_outliers(&[2.0, 2.0, 2.0]), 0);
        // a modest deviation is not
        assert_eq!(count_outliers(&[1.0, 1.1, 0.9, 1.0, 1.3]), 0);
        // a quantized measurement: one tick off is not an outlier when the MAD is floored at the tick
        let ms = [0.015, 0.015, 0.015, 0.016];
        assert_eq!(count_outliers(&ms), 1);
        assert_eq!(count_outliers_with_resolution(&ms, 0.001), 0);
        assert_eq!(Stats::with_resolution(&ms, 0.001).unwrap().outliers, 0);
        let z = modified_zscores(&[1.0, 2.0, 3.0]);
        assert_eq!(z, vec![-1.0, 0.0, 1.0]);
    }
}
