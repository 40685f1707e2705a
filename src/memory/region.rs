//! Page-aligned anonymous memory, mapped untouched so that the thread that uses it touches it
//! first (and so its pages come from that thread's NUMA node), unmapped on drop.

use anyhow::{Result, bail};

/// Transparent huge pages for a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HugePages {
    /// Leave it to the system setting.
    System,
    /// madvise(MADV_HUGEPAGE).
    Ask,
    /// madvise(MADV_NOHUGEPAGE): 4 KiB pages even when the system would give huge ones.
    Refuse,
}

/// An anonymous private mapping.
pub(crate) struct Region {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the region owns its mapping; sharing it between threads is up to the users of
// `as_ptr`, which only ever hand each thread its own region.
unsafe impl Send for Region {}

impl Region {
    /// Maps `len` bytes (at least one page), not yet touched.
    pub(crate) fn map(len: usize, huge: HugePages) -> Result<Region> {
        let len = len.max(1);
        // SAFETY: an anonymous private mapping with no address hint has no preconditions.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            bail!(
                "cannot map {len} bytes of memory: {}",
                std::io::Error::last_os_error()
            );
        }
        let advice = match huge {
            HugePages::System => None,
            HugePages::Ask => Some(libc::MADV_HUGEPAGE),
            HugePages::Refuse => Some(libc::MADV_NOHUGEPAGE),
        };
        if let Some(advice) = advice {
            // SAFETY: the range is the mapping just made. A refusal (a kernel without THP)
            // leaves ordinary pages, which is what the result then reports through params.
            unsafe { libc::madvise(ptr, len, advice) };
        }
        Ok(Region {
            ptr: ptr.cast(),
            len,
        })
    }

    /// The share of the region the kernel backs with huge pages (`AnonHugePages` of its
    /// mapping in `/proc/self/smaps`), `None` where that cannot be read. Asking with madvise is
    /// not getting: THP may be off (`never`), or memory too fragmented to give any.
    pub(crate) fn huge_page_share(&self) -> Option<f64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let start = format!("{:x}-", self.ptr as usize);
        let mapping = smaps
            .split_inclusive('\n')
            .skip_while(|line| !line.starts_with(&start))
            .skip(1)
            // A mapping's fields ("Size:", "AnonHugePages:", ...) until the next mapping's
            // header, whose first word is its address range.
            .take_while(|line| {
                line.split_whitespace()
                    .next()
                    .is_some_and(|w| w.ends_with(':'))
            });
        let kib = mapping
            .filter_map(|line| line.strip_prefix("AnonHugePages:"))
            .find_map(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })?;
        Some((kib * 1024) as f64 / self.len as f64)
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is readable for len bytes while self lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: ptr/len are the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The share is read off this process's own mapping: none where huge pages were refused,
    /// a share between 0 and 1 where they were asked for (the kernel may give none).
    #[test]
    fn the_huge_page_share_is_read_from_the_regions_own_mapping() {
        for (huge, refused) in [(HugePages::Refuse, true), (HugePages::Ask, false)] {
            let mut region = Region::map(8 << 20, huge).unwrap();
            region.as_mut_slice().fill(1);
            let share = region.huge_page_share().expect("smaps names the mapping");
            assert!((0.0..=1.0).contains(&share), "{share}");
            if refused {
                assert_eq!(share, 0.0);
            }
        }
    }
}
