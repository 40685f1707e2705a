//! UDP datagram headers as a receiver counts them (token, sequence number, sender's clock).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    peakbench::fuzzing::udp_datagrams(data);
});
