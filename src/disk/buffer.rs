//! I/O buffers: aligned for O_DIRECT, and on huge pages from [`HUGE_BUFFERS_FROM`] up.

use anyhow::{Result, anyhow};

/// A heap buffer aligned for O_DIRECT.
pub(crate) struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    layout: std::alloc::Layout,
}

// SAFETY: the buffer is uniquely owned plain memory.
unsafe impl Send for AlignedBuf {}

/// I/O buffers of this size and more are put on huge pages (here and, where it can, for fio).
pub(crate) const HUGE_BUFFERS_FROM: u64 = 64 << 10;

impl AlignedBuf {
    pub(crate) fn new(len: usize, align: usize) -> Result<AlignedBuf> {
        // Large buffers sit on transparent huge pages where the kernel allows it: a 1 MiB
        // buffer of scattered 4 KiB pages needs 256 DMA segments, more than a virtio disk
        // takes (max_segments 254), so every I/O would be split in two on its way down.
        const HUGE: usize = 2 << 20;
        let align = if len as u64 >= HUGE_BUFFERS_FROM {
            align.max(HUGE)
        } else {
            align
        };
        let size = len.max(1).div_ceil(align) * align;
        let layout = std::alloc::Layout::from_size_align(size, align)?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(layout) };
        let ptr = std::ptr::NonNull::new(ptr)
            .ok_or_else(|| anyhow!("cannot allocate a {len}-byte I/O buffer"))?;
        if align >= HUGE {
            // SAFETY: advice on memory this buffer owns; failure only means small pages.
            unsafe { libc::madvise(ptr.as_ptr().cast(), size, libc::MADV_HUGEPAGE) };
        }
        // SAFETY: `size` bytes were just allocated; zeroing them after the advice is the
        // first touch, so the pages come huge.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, size) };
        Ok(AlignedBuf { ptr, len, layout })
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes were allocated and are initialised (zeroed).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The start of the buffer, for the kernel to read or write (io_uring).
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_as_long_as_asked() {
        let mut small = AlignedBuf::new(1000, 4096).unwrap();
        assert_eq!(small.as_slice().len(), 1000);
        assert_eq!(small.ptr() as usize % 4096, 0);
        assert!(small.as_slice().iter().all(|&b| b == 0));
        small.as_mut_slice()[999] = 1;
        assert_eq!(small.as_slice()[999], 1);
        let large = AlignedBuf::new(HUGE_BUFFERS_FROM as usize, 512).unwrap();
        assert_eq!(
            large.ptr() as usize % (2 << 20),
            0,
            "large buffers start on a huge page"
        );
    }
}
