//! The C program's rules for turning ranges, step sizes and counts into sampling grids
//! (phi, divergence, dispersion, sensor layers, mosaic domains). Unset values use the C's sentinel -1.

/// The most sub-pixels per axis a run takes (`-oversample`, simulate and nonbragg): beyond it a
/// detector of any size takes days.
pub const MAX_OVERSAMPLE: i64 = 1000;

/// Sub-pixel sampling of each pixel and which factors are evaluated per sub-pixel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// Sub-pixels per pixel axis.
    pub oversample: usize,
    /// metres
    pub subpixel_size: f64,
    pub oversample_thick: bool,
    pub oversample_polar: bool,
    pub oversample_omega: bool,
    /// sources × domains × phi steps × oversample² (layers excluded, as the C).
    pub steps: i64,
}

/// A range sampled by `steps` points `step` apart (radians, fraction or metres).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sweep {
    pub range: f64,
    pub step: f64,
    pub steps: i32,
}

/// Divergence and dispersion rule (C L1420-L1580). `default_range` is what a lone count implies
/// (1.0 for divergence and dispersion: a 1-radian or 100% range, as the C).
pub fn resolve_sweep(range: f64, step: f64, steps: i32, default_range: f64) -> Sweep {
    let (mut range, mut step, mut steps) = (range, step, steps);
    if steps <= 0 {
        if range < 0.0 {
            if step <= 0.0 {
                steps = 1;
                range = 0.0;
                step = 0.0;
            } else {
                range = step;
                steps = 2;
            }
        } else if step <= 0.0 {
            step = range;
            steps = 2;
        } else {
            steps = (range / step).ceil() as i32;
        }
    } else if range < 0.0 {
        if step <= 0.0 {
            range = default_range;
            step = range / steps as f64;
        } else {
            range = step;
            steps = 2;
        }
    } else if step <= 0.0 {
        if steps <= 1 {
            steps = 2;
        }
        step = range / (steps - 1) as f64;
    }
    Sweep { range, step, steps }
}

/// Final sanity rule (C L1676): a non-positive range, step or count means one point at zero.
pub fn sanitize(s: Sweep) -> Sweep {
    if s.range <= 0.0 || s.step <= 0.0 || s.steps <= 0 {
        Sweep { range: 0.0, step: 0.0, steps: 1 }
    } else {
        s
    }
}

/// Sensor-thickness rule (C L1582-L1627): as the sweep rule except that a lone thickness gives two
/// layers of thick/2, and a lone count gives a 0.5 micron sensor.
pub fn resolve_thickness(thick: f64, step: f64, steps: i32) -> Sweep {
    let (mut thick, mut step, mut steps) = (thick, step, steps);
    if steps <= 0 {
        if thick < 0.0 {
            if step <= 0.0 {
                steps = 1;
                thick = 0.0;
                step = 0.0;
            } else {
                thick = step;
                steps = 2;
            }
        } else if step <= 0.0 {
            steps = 2;
            step = thick / steps as f64;
        } else {
            steps = (thick / step).ceil() as i32;
        }
    } else if thick < 0.0 {
        if step <= 0.0 {
            thick = 0.5e-6;
            step = thick / steps as f64;
        } else {
            thick = step;
            steps = 2;
        }
    } else if step <= 0.0 {
        if steps <= 1 {
            steps = 2;
        }
        step = thick / (steps - 1) as f64;
    }
    Sweep { range: thick, step, steps }
}

/// Phi rule (C L1381-L1418). Returns (osc, phistep, phisteps); `osc`/`phistep` < 0 mean unset.
pub fn resolve_phi(osc: f64, phistep: f64, phisteps: i32, rtd: f64) -> (f64, f64, i32) {
    let (mut osc, mut phistep, mut phisteps) = (osc, phistep, phisteps);
    if phisteps < 0 {
        if osc < 0.0 {
            if phistep <= 0.0 {
                phisteps = 1;
                osc = 0.0;
                phistep = 0.0;
            } else {
                osc = phistep;
                phisteps = 2;
            }
        } else if phistep <= 0.0 {
            phisteps = 2;
            phistep = osc / 2.0;
        } else {
            phisteps = (osc / phistep).ceil() as i32;
        }
    } else {
        if phisteps == 0 {
            phisteps = 1;
        }
        if osc < 0.0 {
            if phistep <= 0.0 {
                osc = 1.0 / rtd;
                phistep = osc / phisteps as f64;
            } else {
                osc = phistep;
                phisteps = 2;
            }
        } else if phistep < 0.0 {
            phistep = osc / phisteps as f64;
        }
    }
    (osc, phistep, phisteps)
}

/// Mosaic rule (C L1640-L1672): returns (spread, domains) and any warning the C prints.
pub fn resolve_mosaic(spread: f64, domains: i32) -> (f64, i32, Option<&'static str>) {
    if domains <= 0 {
        if spread < 0.0 {
            (0.0, 1, None)
        } else if spread == 0.0 {
            (spread, 1, None)
        } else {
            (spread, 10, Some("WARNING: finite mosaicity with only one domain! upping to 10 mosaic domains"))
        }
    } else if spread < 0.0 {
        (0.0, 1, Some("WARNING: no mosaic spread specified.  setting mosaic_domains = 1"))
    } else if spread == 0.0 {
        (spread, 1, Some("WARNING: zero mosaic spread specified.  setting mosaic_domains = 1"))
    } else {
        (spread, domains, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_count_gives_one_radian_divergence() {
        // checklist Q9: -hdivsteps 3 alone gives a 1-rad range in 3 steps of 1/3
        let s = resolve_sweep(-1.0, -1.0, 3, 1.0);
        assert_eq!(s, Sweep { range: 1.0, step: 1.0 / 3.0, steps: 3 });
    }

    #[test]
    fn range_and_count_divide_by_count_minus_one() {
        let s = resolve_sweep(1.0e-3, -1.0, 5, 1.0);
        assert_eq!(s.steps, 5);
        assert_eq!(s.step, 1.0e-3 / 4.0);
    }

    #[test]
    fn range_and_step_give_ceil() {
        let s = resolve_sweep(0.6e-3, 0.2e-3, -1, 1.0);
        assert_eq!(s.steps, 3);
    }

    #[test]
    fn lone_thickness_is_two_half_layers() {
        let s = resolve_thickness(200e-6, -1.0, -1);
        assert_eq!(s.steps, 2);
        assert_eq!(s.step, 100e-6);
        // with a count the step is thick/(n-1): layers run past the sensor (Q8)
        let s = resolve_thickness(300e-6, -1.0, 3);
        assert_eq!(s.step, 150e-6);
    }

    #[test]
    fn phi_rules() {
        let rtd = 180.0 * std::f64::consts::FRAC_1_PI;
        assert_eq!(resolve_phi(-1.0, -1.0, -1, rtd), (0.0, 0.0, 1));
        let (osc, step, n) = resolve_phi(2.0 / rtd, -1.0, 4, rtd);
        assert_eq!((osc, step, n), (2.0 / rtd, 2.0 / rtd / 4.0, 4));
        let (_, _, n) = resolve_phi(1.0 / rtd, 0.25 / rtd, -1, rtd);
        assert_eq!(n, 4);
    }

    #[test]
    fn mosaic_rules() {
        assert_eq!(resolve_mosaic(-1.0, -1).1, 1);
        assert_eq!(resolve_mosaic(0.01, -1).1, 10);
        assert_eq!(resolve_mosaic(0.01, 25).1, 25);
        assert_eq!(resolve_mosaic(-1.0, 25).1, 1);
    }
}
