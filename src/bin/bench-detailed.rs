//! `bench-detailed`: the benchmark harness. All the work is in `nanobragg::bench`.

fn main() {
    std::process::exit(nanobragg::bench::cli::main(std::env::args_os()));
}
