//! The TOML config of `peakbench run --config`: parsed, then every entry through its
//! workload's own flag parser, as `run` does.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(entries) = peakbench::config::parse(text, "fuzz")
    {
        for entry in &entries {
            let _ = peakbench::config::parse_entry(entry, "fuzz");
        }
    }
});
