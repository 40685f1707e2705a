//! A baseline file as `peakbench check --baseline` and `baseline import` read it: validated on
//! the way in, then shown, with no panic and no raw control character in the text for a
//! terminal.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        peakbench::fuzzing::baseline(text);
    }
});
