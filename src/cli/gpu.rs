//! `nanobragg-rs gpu`: what the GPU backend finds on this machine, and the kernel's NVRTC compile
//! (which needs NVRTC, not a device: CI checks the kernel source compiles on machines without a GPU).

use std::io::Write;

pub const GPU_USAGE: &str = "USAGE:\n  nanobragg-rs gpu                          the device --backend gpu would use, or why there is none\n  nanobragg-rs gpu --compile ARCH [-o K.ptx]  compile the kernel with NVRTC for ARCH (compute_90: PTX, sm_90: machine code); no device needed";

pub fn main(args: &[String], out: &mut dyn Write) -> crate::Result<()> {
    let mut compile: Option<String> = None;
    let mut ptx_out: Option<std::path::PathBuf> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--compile" => compile = Some(it.next().ok_or_else(|| crate::Error::flag("--compile", "expects an architecture (compute_90, say)"))?.clone()),
            "-o" => ptx_out = Some(it.next().ok_or_else(|| crate::Error::flag("-o", "expects a file name"))?.into()),
            other => return Err(crate::Error::flag(other, "unknown flag of `gpu` (expected --compile ARCH, -o FILE)")),
        }
    }
    let write = |out: &mut dyn Write, s: String| writeln!(out, "{s}").map_err(|e| crate::Error::setup(format!("stdout: {e}")));
    match compile {
        Some(arch) if arch.starts_with("sm_") => {
            let cubin = compile_cubin(&arch)?;
            if let Some(p) = ptx_out {
                crate::io::atomic::write_atomic(&p, &cubin)?;
            }
            write(out, format!("kernel compiled for {arch}: {} bytes of machine code (CUBIN)", cubin.len()))
        }
        Some(arch) => {
            let ptx = compile_ptx(&arch)?;
            let entries: Vec<&str> = ptx.lines().filter_map(|l| l.trim().strip_prefix(".visible .entry ")).map(|l| l.split('(').next().unwrap_or(l)).collect();
            if let Some(p) = ptx_out {
                crate::io::atomic::write_atomic(&p, ptx.as_bytes())?;
            }
            write(out, format!("kernel compiled for {arch}: {} bytes of PTX, entries {}", ptx.len(), entries.join(", ")))
        }
        None => match crate::kernel::gpu::device() {
            Ok(d) => write(out, format!("GPU backend: {} (opened and kernel compiled in {:.3} s)", d.name, d.setup_s)),
            Err(why) => Err(crate::Error::setup(format!("GPU backend: {why}"))),
        },
    }
}

#[cfg(feature = "gpu")]
fn compile_ptx(arch: &str) -> crate::Result<String> {
    crate::kernel::gpu::compile_ptx(arch).map_err(crate::Error::setup)
}

#[cfg(feature = "gpu")]
fn compile_cubin(arch: &str) -> crate::Result<Vec<u8>> {
    crate::kernel::gpu::compile_cubin(arch).map_err(crate::Error::setup)
}

#[cfg(not(feature = "gpu"))]
fn compile_cubin(_: &str) -> crate::Result<Vec<u8>> {
    Err(crate::Error::setup("this build has no GPU backend (cargo feature `gpu`)"))
}

#[cfg(not(feature = "gpu"))]
fn compile_ptx(_: &str) -> crate::Result<String> {
    Err(crate::Error::setup("this build has no GPU backend (cargo feature `gpu`)"))
}
