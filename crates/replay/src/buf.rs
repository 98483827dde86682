//! An `O_DIRECT`-ready buffer: aligned to [`ALIGN`], zeroed, freed when dropped. (`Vec<u8>`
//! cannot promise the alignment O_DIRECT needs.)

use crate::ALIGN;
use std::alloc::{alloc_zeroed, dealloc, Layout};

/// `len` bytes (at least [`ALIGN`]) at an [`ALIGN`]-aligned address.
pub struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// The buffer owns its allocation; nothing else points into it.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (at least one alignment unit).
    pub fn new(len: usize) -> AlignedBuf {
        let layout = Layout::from_size_align(len.max(ALIGN as usize), ALIGN as usize).expect("a valid layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory for I/O buffers");
        AlignedBuf { ptr, layout }
    }

    /// Its first `len` bytes (all of it if `len` is larger).
    pub fn slice(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: at most the allocation's size, owned by this buffer and borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len.min(self.layout.size())) }
    }

    /// Its address, for a kernel to fill (io_uring).
    pub(crate) fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}
