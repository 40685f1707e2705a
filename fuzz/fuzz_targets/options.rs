//! The CLI value parsers of src/options.rs (sizes, durations, rates, counts, lists): any text
//! is either a value or a message, never a panic. The first byte picks the parser.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((&which, rest)) = data.split_first()
        && let Ok(text) = std::str::from_utf8(rest)
    {
        peakbench::fuzzing::cli_value(which, text);
    }
});
