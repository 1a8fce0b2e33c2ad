//! `bench-detailed`: the benchmark harness. All the work is in the `nanobragg_harness` library beside it.

fn main() {
    nanobragg::base::log::set_warning_sink(|w| eprintln!("{w}"));
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == nanobragg_harness::measure::MEASURE_CHILD_ARG) {
        std::process::exit(nanobragg_harness::measure::measure_child_main(&args[2..]));
    }
    std::process::exit(nanobragg_harness::cli::main(args));
}
