//! The one pseudo-random generator of peakbench: random offsets (disk, memory), the order of
//! the latency chain, the Linpack matrix, incompressible I/O buffers, test-file tags.
//!
//! It is wyrand (Wang Yi): the state is a counter advanced by a fixed odd constant, and each
//! number is the two halves of one 64 × 64 → 128-bit product of the state with a scrambled copy
//! of it, XORed together. Why this one:
//! - fast where it is on the clock: one add and one multiply per 64 bits, so drawing the next
//!   random offset costs a few cycles beside a 64-byte memory access or a 4 KiB I/O;
//! - good enough for all of the uses above: its author reports it passes BigCrush and
//!   PractRand, and none of them needs more (nothing here is a secret);
//! - any seed is a good seed: the state is a counter, so there is no all-zero trap to avoid (as
//!   xorshift has) and no warm-up; generators seeded differently walk the same cycle of 2^64
//!   from unrelated points, which is how each thread gets its own sequence ([`Rng::for_thread`]).

/// A wyrand generator.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

/// What the state advances by at each step.
const INCREMENT: u64 = 0xa076_1d64_78bd_642f;
/// What the state is XORed with before it is multiplied by itself.
const SCRAMBLE: u64 = 0xe703_7ed1_a0b4_28db;

impl Rng {
    /// A generator whose sequence is fixed by `seed` (reproducible runs and tests).
    pub const fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// Generator `index` of a family seeded with `seed`, one per thread: same seed and index,
    /// same sequence; other indices start elsewhere in the cycle.
    pub fn for_thread(seed: u64, index: usize) -> Rng {
        Rng::new(seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    /// A generator seeded from the clock and the address of a stack value, so that it differs
    /// from run to run and from thread to thread.
    pub fn from_clock() -> Rng {
        let local = 0u8;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let address = std::ptr::addr_of!(local) as u64;
        // One step mixes the raw seed, whose bits differ little from one call to the next.
        Rng::new(Rng::new(nanos ^ address.rotate_left(32)).next_u64())
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(INCREMENT);
        let product = u128::from(self.state) * u128::from(self.state ^ SCRAMBLE);
        ((product >> 64) as u64) ^ (product as u64)
    }

    /// Uniform in `0..n` (n > 0), by multiply-shift (Lemire): no division, and a bias of at
    /// most n / 2^64.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// [`below`](Rng::below) for an index.
    #[inline]
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Uniform in [−0.5, 0.5), on the grid of 2^−53 (the entries of HPL's random matrices).
    #[inline]
    pub fn centered_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) - 0.5
    }

    /// Fills `buf` with random bytes (8 per number, little-endian).
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for chunk in &mut chunks {
            chunk.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let last = self.next_u64().to_le_bytes();
            rest.copy_from_slice(&last[..rest.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_is_wyrand() {
        // The first numbers from seed 0, worked out by hand from the definition.
        let mut rng = Rng::new(0);
        assert_eq!(rng.next_u64(), 0x111c_b3a7_8f59_a58e);
        assert_eq!(rng.next_u64(), 0xceab_d938_ff4e_856d);
        assert_eq!(rng.next_u64(), 0x61fb_5131_8f47_d2a4);
    }

    #[test]
    fn a_seed_fixes_the_sequence_and_threads_get_their_own() {
        let take = |mut rng: Rng| (0..4).map(|_| rng.next_u64()).collect::<Vec<_>>();
        assert_eq!(take(Rng::new(7)), take(Rng::new(7)));
        assert_ne!(take(Rng::new(7)), take(Rng::new(8)));
        assert_eq!(take(Rng::for_thread(7, 1)), take(Rng::for_thread(7, 1)));
        assert_ne!(take(Rng::for_thread(7, 0)), take(Rng::for_thread(7, 1)));
        assert_ne!(take(Rng::from_clock()), take(Rng::from_clock()));
    }

    #[test]
    fn indices_stay_below_n_and_come_out_evenly() {
        let mut rng = Rng::new(42);
        assert!((0..10_000).all(|_| rng.below(7) < 7));
        assert_eq!(rng.below(1), 0);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[rng.index(10)] += 1;
        }
        // 10 000 expected each; a fair generator stays within ±500 (5 standard deviations).
        assert!(
            counts.iter().all(|&c| c.abs_diff(10_000) < 500),
            "{counts:?}"
        );
    }

    #[test]
    fn centered_values_are_in_the_half_open_interval_around_zero() {
        let mut rng = Rng::new(3);
        let values: Vec<f64> = (0..100_000).map(|_| rng.centered_f64()).collect();
        assert!(values.iter().all(|v| (-0.5..0.5).contains(v)));
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        assert!(mean.abs() < 0.005, "mean {mean}");
        assert!(values.iter().any(|&v| v < -0.49) && values.iter().any(|&v| v > 0.49));
    }

    #[test]
    fn fill_writes_the_sequence_in_every_byte() {
        let mut buf = [0u8; 21];
        Rng::new(5).fill(&mut buf);
        let mut rng = Rng::new(5);
        let words: Vec<u8> = (0..3).flat_map(|_| rng.next_u64().to_le_bytes()).collect();
        assert_eq!(buf[..], words[..21]);
        let mut empty = [0u8; 0];
        Rng::new(5).fill(&mut empty);
    }
}
