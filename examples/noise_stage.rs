//! Times the noise stage alone (no render) on a float image read from a file: the C's serial
//! stream (`--noise c`) and the fast mode (`--noise fast`), alternated, each writing the SMV pixel
//! data into a sink (or a file given as the third argument).
//! `cargo run --release --example noise_stage -- FLOATFILE PIXELS [RUNS] [OUTFILE]`
use nanobragg::base::image::{ImageView, Roi};
use nanobragg::noise::{noise_image_fast, write_noise_rows};
use nanobragg::base::c::rng::NrRandom;
use std::time::Instant;

/// CPU seconds (user + system) of this process, all threads.
fn cpu() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

const USAGE: &str = "usage: cargo run --release --example noise_stage -- FLOATFILE PIXELS [RUNS] [OUTFILE]";

/// The float image and its side from the arguments, or (without them) a synthetic 256² image with
/// a spot pattern, so the example runs as it is.
fn float_image(a: &[String]) -> Result<(Vec<f32>, usize), String> {
    if a.len() < 3 {
        eprintln!("{USAGE}\nno FLOATFILE given: timing a synthetic 256x256 image");
        let n = 256;
        let float = (0..n * n).map(|i| 5.0 + 500.0 * (((i % n) as f32 * 0.3).sin() * ((i / n) as f32 * 0.2).cos()).powi(8)).collect();
        return Ok((float, n));
    }
    let bytes = std::fs::read(&a[1]).map_err(|e| format!("{}: cannot read: {e}", a[1]))?;
    let n: usize = a[2].parse().map_err(|_| format!("PIXELS: not a whole number: {}\n{USAGE}", a[2]))?;
    let float: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    if float.len() != n * n {
        return Err(format!("{}: holds {} floats, not {n}x{n}", a[1], float.len()));
    }
    Ok((float, n))
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (float, n) = match float_image(&a) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(9);
        }
    };
    let runs: usize = a.get(3).and_then(|v| v.parse().ok()).unwrap_or(if a.len() < 3 { 3 } else { 5 });
    let out = a.get(4).cloned();
    let roi = [0, n as i64 - 1, 0, n as i64 - 1];
    let sink = || -> Box<dyn std::io::Write + Send> {
        match &out {
            Some(p) => Box::new(std::io::BufWriter::new(std::fs::File::create(p).unwrap())),
            None => Box::new(std::io::sink()),
        }
    };
    let (mut tc, mut tf) = (Vec::new(), Vec::new());
    let (mut cc, mut cf) = (Vec::new(), Vec::new());
    let only = std::env::var("NB_ONLY").unwrap_or_default();
    for _ in 0..runs {
        if only == "fast" {
            tc.push(1.0);
            cc.push(1.0);
        } else {
        let c0 = cpu();
        let t = Instant::now();
        let mut w = sink();
        let mut rng = NrRandom::new();
        let mut seed = -1i64;
        let _ = write_noise_rows(&mut *w, &mut rng, &mut seed, &ImageView::new(&float, n, n, Roi::from_c_bounds(roi, n, n)), 40.0).unwrap();
        w.flush().unwrap();
        drop(w);
        tc.push(t.elapsed().as_secs_f64());
        cc.push(cpu() - c0);
        }
        let c0 = cpu();
        let t = Instant::now();
        let mut w = sink();
        let (pf, _) = nanobragg::noise::write_noise_rows_fast(&mut *w, -1, &ImageView::new(&float, n, n, Roi::from_c_bounds(roi, n, n)), 40.0).unwrap();
        w.flush().unwrap();
        drop(w);
        tf.push(t.elapsed().as_secs_f64());
        cf.push(cpu() - c0);
        eprintln!("c {:.1} ms, fast {:.1} ms ({pf})", tc.last().unwrap() * 1e3, tf.last().unwrap() * 1e3);
    }
    let st = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[0] * 1e3, v[v.len() / 2] * 1e3, v[v.len() - 1] * 1e3)
    };
    let (c, f) = (st(&mut tc), st(&mut tf));
    println!("noise stage {n}x{n}, {runs} runs alternated, min/median/max ms: c {:.1}/{:.1}/{:.1}  fast {:.1}/{:.1}/{:.1}  ratio of medians {:.2}x (min {:.2}x)", c.0, c.1, c.2, f.0, f.1, f.2, c.1 / f.1, c.0 / f.0);
    if !cc.is_empty() {
        let (c, f) = (st(&mut cc), st(&mut cf));
        println!("CPU time (all threads) min/median/max ms: c {:.1}/{:.1}/{:.1}  fast {:.1}/{:.1}/{:.1}", c.0, c.1, c.2, f.0, f.1, f.2);
    }
    let _ = noise_image_fast;
}
