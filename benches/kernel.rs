//! Criterion benchmarks: the lattice factor (libm sincg vs the reduced-argument lane form), the pixel
//! kernel at each dispatch level this CPU has, and whole renders of the benchmark crystal.
//! Run with `cargo bench`; speed claims against the C come from `bench-detailed`, not from here.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use nanobragg::kernel::{self, Backend, SimdLevel};
use nanobragg::experiment::physics::sincg;

mod common;
use common::{bench_crystal as bench_config, heavy_case as heavy_config};

fn sincg_benches(c: &mut Criterion) {
    let hs: Vec<f64> = (0..1024).map(|i| -20.0 + i as f64 * 0.0391).collect();
    let mut g = c.benchmark_group("sincg");
    g.throughput(Throughput::Elements(hs.len() as u64));
    g.bench_function("libm sin(Nx)/sin(x)", |b| {
        b.iter(|| hs.iter().map(|&h| sincg(std::f64::consts::PI * black_box(h), 5.0).powi(2)).sum::<f64>())
    });
    g.bench_function("reduced sinpi lanes", |b| {
        b.iter(|| {
            hs.iter()
                .map(|&h| {
                    let h0 = kernel::lanes::ceil(black_box(h) - 0.5);
                    kernel::lanes::sincg_sqr(h, h0, 5.0)
                })
                .sum::<f64>()
        })
    });
    g.finish();
}

fn level_benches(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let mut levels = vec![Backend::Reference];
    levels.extend(SimdLevel::available().into_iter().map(Backend::Simd));
    for (name, cfg) in [("bench", bench_config(256, tmp.path())), ("heavy", heavy_config(64, tmp.path()))] {
        let (exp, _) = nanobragg::run::simulate::setup(&cfg).unwrap();
        let mut g = c.benchmark_group(format!("kernel/{name}"));
        g.sample_size(10);
        g.throughput(Throughput::Elements(exp.pixels() as u64));
        for &level in &levels {
            g.bench_with_input(BenchmarkId::from_parameter(level.name()), &level, |b, &level| {
                b.iter(|| kernel::render(&exp, &kernel::RenderOptions { backend: level, ..Default::default() }, &|_| {}))
            });
        }
        g.finish();
    }
}

fn render_benches(c: &mut Criterion) {
    let tmp = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("render/bench-crystal");
    g.sample_size(10);
    for pixels in [256usize, 1024] {
        let cfg = bench_config(pixels as i64, tmp.path());
        let (exp, _) = nanobragg::run::simulate::setup(&cfg).unwrap();
        g.throughput(Throughput::Elements((pixels * pixels) as u64));
        g.bench_with_input(BenchmarkId::from_parameter(pixels), &exp, |b, exp| b.iter(|| kernel::render(exp, &Default::default(), &|_| {})));
    }
    g.finish();
}

criterion_group!(benches, sincg_benches, level_benches, render_benches);
criterion_main!(benches);
