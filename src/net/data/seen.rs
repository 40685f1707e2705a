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
                if seq - from >= SEEN_WINDOW {
                    self.words.fill(0);
                } else {
                    for n in from..seq {
                        let (word, bit) = Self::bit(n);
                        self.words[word] &= !bit;
                    }
                }
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

    /// Issue 18, item 3: a datagram's sequence number never sizes the receiver's memory.
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
