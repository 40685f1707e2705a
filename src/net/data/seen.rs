//! Which recent UDP sequence numbers arrived: duplicates found in a window of fixed size.

/// Sequence numbers tracked behind the highest one seen, for duplicates: 2^16 (an 8 KiB
/// bitmap), whatever the sender claims. At 10 Gb/s of 1470-byte datagrams that is 77 ms of
/// reordering.
const SEEN_WINDOW: u64 = 1 << 16;

/// Which of the last [`SEEN_WINDOW`] sequence numbers arrived: a fixed ring of bits that slides
/// with the highest number seen. Its size never depends on what a datagram says (a crafted
/// sequence number of 2^32 − 1 made the old bitmap grow to 512 MiB).
pub(super) struct SeenSet {
    words: Vec<u64>,
    highest: Option<u64>,
}

/// What [`SeenSet::insert`] found.
#[derive(Debug, PartialEq)]
pub(super) enum Seen {
    New,
    Duplicate,
    /// Older than the window: it cannot be checked for a duplicate; counted as reordered.
    Late,
}

impl Default for SeenSet {
    fn default() -> SeenSet {
        SeenSet {
            words: vec![0; (SEEN_WINDOW / 64) as usize],
            highest: None,
        }
    }
}

impl SeenSet {
    fn bit(seq: u64) -> (usize, u64) {
        let slot = seq % SEEN_WINDOW;
        ((slot / 64) as usize, 1 << (slot % 64))
    }

    /// Clears the slots of the numbers `from..to`: whole words at a time, with a mask for the
    /// partial word at each end (a jump of 65 535 numbers cleared as many bits one by one).
    fn forget(&mut self, from: u64, to: u64) {
        if to <= from {
            return;
        }
        if to - from >= SEEN_WINDOW {
            self.words.fill(0);
            return;
        }
        // The range in ring slots, cut in two where it wraps.
        let (start, len) = (from % SEEN_WINDOW, to - from);
        let first = len.min(SEEN_WINDOW - start);
        self.clear_slots(start, start + first);
        if first < len {
            self.clear_slots(0, len - first);
        }
    }

    /// Clears ring slots `from..to` (no wrap, `to` ≤ [`SEEN_WINDOW`]).
    fn clear_slots(&mut self, from: u64, to: u64) {
        let (first, last) = ((from / 64) as usize, ((to - 1) / 64) as usize);
        // Bits at and above `from`'s, and at and below `to - 1`'s, in their words.
        let high = u64::MAX << (from % 64);
        let low = u64::MAX >> (63 - (to - 1) % 64);
        if first == last {
            self.words[first] &= !(high & low);
            return;
        }
        self.words[first] &= !high;
        self.words[first + 1..last].fill(0);
        self.words[last] &= !low;
    }

    pub(super) fn insert(&mut self, seq: u64) -> Seen {
        match self.highest {
            Some(h) if seq <= h => {
                if h - seq >= SEEN_WINDOW {
                    return Seen::Late;
                }
            }
            _ => {
                // Slide: forget the slots that now stand for the numbers after the old highest.
                let from = self.highest.map_or(0, |h| h + 1);
                self.forget(from, seq);
                self.highest = Some(seq);
                let (word, bit) = Self::bit(seq);
                self.words[word] |= bit;
                return Seen::New;
            }
        }
        let (word, bit) = Self::bit(seq);
        if self.words[word] & bit != 0 {
            return Seen::Duplicate;
        }
        self.words[word] |= bit;
        Seen::New
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_set_finds_duplicates() {
        let mut s = SeenSet::default();
        assert_eq!(s.insert(5), Seen::New);
        assert_eq!(s.insert(1000), Seen::New);
        assert_eq!(s.insert(5), Seen::Duplicate);
        assert_eq!(s.insert(4), Seen::New);
        assert_eq!(s.insert(1000), Seen::Duplicate);
        // Sliding past the window forgets what it held: slot 5 now stands for 5 + 2^16.
        assert_eq!(s.insert(5 + SEEN_WINDOW), Seen::New);
        assert_eq!(s.insert(5), Seen::Late);
        assert_eq!(s.insert(1000 + SEEN_WINDOW), Seen::New);
        assert_eq!(s.insert(1000 + SEEN_WINDOW), Seen::Duplicate);
    }

    /// A forward jump clears whole words; it forgets exactly the numbers the bit-by-bit version
    /// forgot, for jumps that start and end anywhere in a word and wrap.
    #[test]
    fn forgetting_by_words_clears_exactly_the_skipped_slots() {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..2000 {
            let mut fast = SeenSet::default();
            let mut slow = SeenSet::default();
            for w in 0..fast.words.len() {
                let bits = next();
                fast.words[w] = bits;
                slow.words[w] = bits;
            }
            let from = next() % (4 * SEEN_WINDOW);
            let to = from + next() % (SEEN_WINDOW + 200);
            fast.forget(from, to);
            for n in from..to.min(from + SEEN_WINDOW) {
                let (word, bit) = SeenSet::bit(n);
                slow.words[word] &= !bit;
            }
            assert!(fast.words == slow.words, "forget({from}, {to})");
        }
    }

    /// A datagram's sequence number never sizes the receiver's memory.
    #[test]
    fn a_huge_sequence_number_keeps_the_seen_set_at_its_size() {
        let mut s = SeenSet::default();
        let size = s.words.len();
        for seq in [1, (1 << 32) - 1, u64::MAX, 7] {
            s.insert(seq);
            assert_eq!(s.words.len(), size);
        }
        assert_eq!(s.insert(u64::MAX), Seen::Duplicate);
        assert_eq!(s.insert(u64::MAX - 1), Seen::New);
        assert_eq!(s.insert(3), Seen::Late);
        assert_eq!(size * 8, 8192);
    }
}
