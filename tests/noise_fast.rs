//! The fast noise mode (`--noise fast`): deterministic for a seed at any thread count, and the
//! distributions of the C's `poidev` (Poisson up to a mean of 1e6, its Gaussian approximation above),
//! checked against the Poisson probabilities computed here (not against our own output).

use nanobragg::base::image::{ImageView, Roi};
use nanobragg::noise::{noise_counts_fast, noise_image_fast, NoiseMode};

fn pool(n: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(n).build().unwrap()
}

#[test]
fn same_image_at_any_thread_count() {
    let (fp, sp) = (97usize, 61usize);
    // means from 0 to 3e6: every regime, varying along the image
    let float: Vec<f32> = (0..fp * sp).map(|i| ((i * 7919) % 1000) as f32 * 0.013 + if i % 97 == 5 { 3.0e6 } else { 0.0 } + if i % 13 == 0 { 250.0 } else { 0.0 }).collect();
    let roi = [3, 90, 2, 58];
    let runs: Vec<_> = [1, 2, 3].iter().map(|&n| pool(n).install(|| noise_image_fast(-12345, &ImageView::new(&float, fp, sp, Roi::from_c_bounds(roi, fp, sp)), 40.0))).collect();
    for r in &runs[1..] {
        assert_eq!(r.pixels, runs[0].pixels);
        assert_eq!(r.photons.to_bits(), runs[0].photons.to_bits());
        assert_eq!(r.overloads, runs[0].overloads);
    }
    let counts: Vec<_> = [1, 3].iter().map(|&n| pool(n).install(|| noise_counts_fast(-12345, &ImageView::new(&float, fp, sp, Roi::from_c_bounds(roi, fp, sp)), 40.0))).collect();
    assert_eq!(counts[0], counts[1]);
    // the SMV pixels are the counts capped at 65535
    for (p, c) in runs[0].pixels.iter().zip(&counts[0]) {
        assert_eq!(*p as i64, (*c as i64).clamp(0, 65535));
    }
    // outside the ROI nothing is drawn
    for s in 0..sp {
        for f in 0..fp {
            if !(3..=90).contains(&f) || !(2..=58).contains(&s) {
                assert_eq!(runs[0].pixels[s * fp + f], 0);
            }
        }
    }
    // the Gaussian regime overloads the 16-bit image
    assert!(runs[0].overloads > 0);
    // another seed, another image
    let other = noise_image_fast(-12346, &ImageView::new(&float, fp, sp, Roi::from_c_bounds(roi, fp, sp)), 40.0);
    assert_ne!(other.pixels, runs[0].pixels);
}

#[test]
fn rows_draw_independent_streams() {
    let (fp, sp) = (512usize, 4usize);
    let float = vec![5.0f32; fp * sp];
    let img = noise_counts_fast(7, &ImageView::new(&float, fp, sp, Roi::from_c_bounds([0, fp as i64 - 1, 0, sp as i64 - 1], fp, sp)), 0.0);
    for s in 1..sp {
        assert_ne!(img[..fp], img[s * fp..(s + 1) * fp], "row {s} repeats row 0");
    }
}

/// ln k! by summation (exact enough for the probabilities below).
fn ln_factorial(k: u64) -> f64 {
    (2..=k).map(|i| (i as f64).ln()).sum()
}

fn poisson_pmf(lambda: f64, k: u64) -> f64 {
    (k as f64 * lambda.ln() - lambda - ln_factorial(k)).exp()
}

/// Draws for a constant mean, through the image API (rows in parallel).
fn draws(lambda: f32, n_rows: usize, seed: i64) -> Vec<i32> {
    let fp = 1000;
    let float = vec![lambda; fp * n_rows];
    noise_counts_fast(seed, &ImageView::new(&float, fp, n_rows, Roi::from_c_bounds([0, fp as i64 - 1, 0, n_rows as i64 - 1], fp, n_rows)), 0.0)
}

#[test]
fn poisson_mean_variance_and_chi_square() {
    for (i, &lambda) in [0.02f32, 0.5, 1.0, 3.3, 7.5, 11.99, 12.0, 25.0, 150.0, 4000.0].iter().enumerate() {
        let x = draws(lambda, 200, 1000 + i as i64);
        let n = x.len() as f64;
        let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let l = lambda as f64;
        // 5 standard errors: mean ± 5 sqrt(λ/n); sample variance ± 5 sqrt((λ + 2λ²)/n)
        assert!((mean - l).abs() <= 5.0 * (l / n).sqrt(), "λ={l}: mean {mean}");
        assert!((var - l).abs() <= 5.0 * ((l + 2.0 * l * l) / n).sqrt(), "λ={l}: variance {var}");

        // chi-square over the bins k with expected count >= 5 (the two tails pooled into end bins)
        let mut lo = l.floor() as u64;
        while lo > 0 && poisson_pmf(l, lo - 1) * n >= 5.0 {
            lo -= 1;
        }
        let mut hi = l.ceil() as u64;
        while poisson_pmf(l, hi + 1) * n >= 5.0 {
            hi += 1;
        }
        let mut observed = vec![0f64; (hi - lo + 1) as usize];
        for &v in &x {
            let k = (v.max(0) as u64).clamp(lo, hi);
            observed[(k - lo) as usize] += 1.0;
        }
        // bin probabilities: P(X <= lo), P(X = k) in between, P(X >= hi)
        let mut probs: Vec<f64> = (lo..=hi).map(|k| poisson_pmf(l, k)).collect();
        probs[0] += (0..lo).map(|k| poisson_pmf(l, k)).sum::<f64>();
        let last = probs.len() - 1;
        probs[last] = 1.0 - probs[..last].iter().sum::<f64>();
        let chi2: f64 = observed.iter().zip(&probs).map(|(o, p)| (o - p * n).powi(2) / (p * n)).sum();
        let df = (hi - lo) as f64;
        if df >= 1.0 {
            // far beyond the 99.9999th percentile of chi-square(df) (mean df, sd sqrt(2 df))
            assert!(chi2 <= df + 7.0 * (2.0 * df).sqrt() + 10.0, "λ={l}: chi-square {chi2:.1} with {df} degrees of freedom");
        }
    }
}

#[test]
fn gaussian_above_a_million_as_the_c() {
    let lambda = 2.0e6f32;
    let x = draws(lambda, 50, 99);
    let n = x.len() as f64;
    let mean = x.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let l = lambda as f64;
    assert!((mean - l).abs() <= 5.0 * (l / n).sqrt(), "mean {mean}");
    // the C's approximation xm + sqrt(xm)·N(0,1): variance λ (±5 standard errors, 2λ²/n)
    assert!((var - l).abs() <= 5.0 * (2.0 * l * l / n).sqrt(), "variance {var}");
}

#[test]
fn zero_negative_and_nan_means_draw_nothing() {
    let float = [0.0f32, -3.0, f32::NAN, 0.0];
    let img = noise_image_fast(5, &ImageView::new(&float, 4, 1, Roi::from_c_bounds([0, 3, 0, 0], 4, 1)), 40.0);
    assert_eq!(img.pixels, [40, 40, 40, 40]);
    assert_eq!(img.photons, 0.0);
}

#[test]
fn the_flag_selects_the_mode_and_help_says_which() {
    let parse = |a: &[&str]| nanobragg::cli::parse::parse_simulate_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let base = ["-cell", "100", "100", "100", "90", "90", "90", "-default_F", "100", "-detpixels", "16"];
    assert_eq!(parse(&base).unwrap().output.noise_mode, NoiseMode::C);
    let mut fast = base.to_vec();
    fast.extend(["--noise", "fast"]);
    assert_eq!(parse(&fast).unwrap().output.noise_mode, NoiseMode::Fast);
    let mut bad = base.to_vec();
    bad.extend(["--noise", "quick"]);
    let e = parse(&bad).err().expect("--noise quick must be refused").to_string();
    assert!(e.contains("--noise"), "{e}");
    let help = nanobragg::cli::help::help_text();
    assert!(help.contains("--noise") && help.contains("fast") && help.contains("bit-identical"), "{help}");
}

#[test]
fn the_streamed_writer_writes_the_image_at_any_thread_count() {
    use nanobragg::noise::{write_noise_rows_fast, FAST_BATCH_PIXELS};
    // more than two batches of rows, a partial last one, and an ROI
    let (fp, sp) = (700usize, 3 * FAST_BATCH_PIXELS / 700 + 5);
    let float: Vec<f32> = (0..fp * sp).map(|i| ((i * 7919) % 1000) as f32 * 0.002 + if i % 211 == 0 { 40.0 } else { 0.0 }).collect();
    let roi = [2, 650, 1, sp as i64 - 3];
    let img = noise_image_fast(77, &ImageView::new(&float, fp, sp, Roi::from_c_bounds(roi, fp, sp)), 10.0);
    for n in [1, 2, 3] {
        let mut out = Vec::new();
        let (photons, overloads) = pool(n).install(|| write_noise_rows_fast(&mut out, 77, &ImageView::new(&float, fp, sp, Roi::from_c_bounds(roi, fp, sp)), 10.0)).unwrap();
        let want: Vec<u8> = img.pixels.iter().flat_map(|p| p.to_le_bytes()).collect();
        assert!(out == want, "{n} threads: streamed pixels differ from the image");
        assert_eq!(photons.to_bits(), img.photons.to_bits());
        assert_eq!(overloads, img.overloads);
    }
}

#[test]
fn tiny_means_draw_rarely_and_at_the_right_rate() {
    // most pixels of a real image have means far below 1: P(X > 0) = 1 - exp(-λ) must hold there too
    for (i, &lambda) in [1.0e-4f32, 3.0e-3].iter().enumerate() {
        let x = draws(lambda, 2000, 500 + i as i64);
        let n = x.len() as f64;
        let nonzero = x.iter().filter(|&&v| v != 0).count() as f64;
        let p = 1.0 - (-(lambda as f64)).exp();
        assert!((nonzero - n * p).abs() <= 5.0 * (n * p * (1.0 - p)).sqrt(), "λ={lambda}: {nonzero} nonzero of {n}");
        let twos = x.iter().filter(|&&v| v >= 2).count() as f64;
        let p2 = 1.0 - (-(lambda as f64)).exp() * (1.0 + lambda as f64);
        assert!(twos <= n * p2 + 5.0 * (n * p2).sqrt() + 3.0, "λ={lambda}: {twos} deviates >= 2");
    }
}
