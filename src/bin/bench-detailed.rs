//! `bench-detailed`: the benchmark harness. All the work is in `nanobragg::bench`.

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == nanobragg::bench::measure::MEASURE_CHILD_ARG) {
        std::process::exit(nanobragg::bench::measure::measure_child_main(&args[2..]));
    }
    std::process::exit(nanobragg::bench::cli::main(args));
}
