//! Criterion benchmark of the noise image at 4096² on the benchmark crystal's float image: the C's
//! serial stream (`--noise c`, the default) against the fast mode (`--noise fast`, rows in parallel).
//! Run with `cargo bench --bench noise`; NB_NOISE_PIXELS changes the size.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nanobragg::noise::{noise_image, noise_image_fast};
use nanobragg::base::c::rng::NrRandom;

mod common;

fn noise_benches(c: &mut Criterion) {
    let pixels: usize = std::env::var("NB_NOISE_PIXELS").ok().and_then(|v| v.parse().ok()).unwrap_or(4096);
    let tmp = tempfile::tempdir().unwrap();
    let cfg = common::bench_crystal(pixels as i64, tmp.path());
    let (exp, _) = nanobragg::run::simulate::setup(&cfg).unwrap();
    let float = nanobragg::kernel::render(&exp, &Default::default(), &|_| {}).float;
    let (fp, sp) = (exp.det.panel().fpixels, exp.det.panel().spixels);
    let image = exp.det.panel().image(&float);

    let mut g = c.benchmark_group(format!("noise/{pixels}"));
    g.sample_size(10);
    g.throughput(Throughput::Elements((fp * sp) as u64));
    g.bench_function("c-serial", |b| {
        b.iter(|| {
            let mut rng = NrRandom::new();
            let mut seed = -1i64;
            noise_image(&mut rng, &mut seed, &image, 40.0).photons
        })
    });
    g.bench_function("fast", |b| b.iter(|| noise_image_fast(-1, &image, 40.0).photons));
    g.finish();
}

criterion_group!(benches, noise_benches);
criterion_main!(benches);
