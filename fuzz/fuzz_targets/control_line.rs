//! The control protocol as the server reads it: bytes cut into lines of at most MAX_LINE, each
//! line a message, and the handshake (challenge, hello, proof, the test checked against the
//! policy) judged from the first one.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    peakbench::fuzzing::control_bytes(data);
});
