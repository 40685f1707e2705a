//! A JSON results document as `import`, `report FILE`, `compare FILE` and `explain FILE` read
//! it: validated on the way in, then through every renderer (text, Markdown, HTML, CSV, JSON,
//! findings, compare) with no panic and no raw control character in the text for a terminal.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        peakbench::fuzzing::document(text);
    }
});
