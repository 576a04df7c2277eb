fn main() {
    std::process::exit(fettle::cli::main());
}
