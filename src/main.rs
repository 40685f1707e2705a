fn main() -> std::process::ExitCode {
    peakbench::dispatch::main()
}
