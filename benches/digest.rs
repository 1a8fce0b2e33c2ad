//! Criterion benchmark of the sha256 a `series` manifest records: the four files of a 512² frame
//! (float 1 MiB, int and noise 512 KiB + their 512-byte SMV headers, PGM 256 KiB + its header), from
//! memory, one message at a time through the `sha2` crate against `io::sha256::sha256_each` (two
//! messages in step through the SHA extensions where the CPU has them); and eight frames' files as a
//! series hashes them together where that pays (`io::atomic::record_digests`): from memory, and read
//! back from the page cache (the files just written), against one at a time from memory (hashed as
//! written).
//! Run with `cargo bench --bench digest`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nanobragg::io::sha256::{sha256_each, Message};
use sha2::{Digest, Sha256};

fn digest_benches(c: &mut Criterion) {
    let sizes = [1 << 20, (1 << 19) + 512, (1 << 19) + 512, (1 << 18) + 15];
    let mut x = 1u64;
    let files: Vec<Vec<u8>> = sizes
        .iter()
        .map(|&n| {
            (0..n)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (x >> 33) as u8
                })
                .collect()
        })
        .collect();
    let mut g = c.benchmark_group("sha256/512x512-frame");
    g.sample_size(30);
    g.throughput(Throughput::Bytes(sizes.iter().sum::<usize>() as u64));
    g.bench_function("sha2-one-at-a-time", |b| b.iter(|| files.iter().map(|f| <[u8; 32]>::from(Sha256::digest(f))).collect::<Vec<_>>()));
    g.bench_function("two-lanes", |b| {
        b.iter(|| {
            let mut readers: Vec<&[u8]> = files.iter().map(Vec::as_slice).collect();
            let mut m: Vec<Message> = readers.iter_mut().map(|r| Message { len: r.len() as u64, bytes: r }).collect();
            sha256_each(&mut m).unwrap()
        })
    });
    g.finish();

    // eight frames: what a series hands `sha256_each` at once (32 files)
    let frames = 8;
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<std::path::PathBuf> = (0..frames * files.len()).map(|i| dir.path().join(format!("f{i}"))).collect();
    for (p, f) in paths.iter().zip(files.iter().cycle()) {
        std::fs::write(p, f).unwrap();
    }
    let mut g = c.benchmark_group("sha256/8-frames-512x512");
    g.sample_size(20);
    g.throughput(Throughput::Bytes((frames * sizes.iter().sum::<usize>()) as u64));
    g.bench_function("sha2-one-at-a-time-from-memory", |b| b.iter(|| files.iter().cycle().take(frames * files.len()).map(|f| <[u8; 32]>::from(Sha256::digest(f))).collect::<Vec<_>>()));
    g.bench_function("together-from-memory", |b| {
        b.iter(|| {
            let mut readers: Vec<&[u8]> = files.iter().cycle().take(frames * files.len()).map(Vec::as_slice).collect();
            let mut m: Vec<Message> = readers.iter_mut().map(|r| Message { len: r.len() as u64, bytes: r }).collect();
            sha256_each(&mut m).unwrap()
        })
    });
    g.bench_function("together-read-back", |b| {
        b.iter(|| {
            let mut open: Vec<std::fs::File> = paths.iter().map(|p| std::fs::File::open(p).unwrap()).collect();
            let mut m: Vec<Message> = open.iter_mut().zip(files.iter().cycle()).map(|(f, d)| Message { len: d.len() as u64, bytes: f }).collect();
            sha256_each(&mut m).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, digest_benches);
criterion_main!(benches);
