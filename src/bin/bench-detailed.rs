fn main() {
    eprintln!("bench-detailed: not yet implemented");
    std::process::exit(2);
}
