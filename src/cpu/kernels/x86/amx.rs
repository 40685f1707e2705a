//! The AMX tile kernels (`tdpbssd`, `tdpbf16ps`) and the check that the CPU and Linux let this
//! process use the tiles.

use std::arch::asm;
use std::arch::x86_64::*;
use std::hint::black_box;
use std::sync::OnceLock;

/// CPUID leaf 7 EDX bits of AMX.
pub(crate) const AMX_BF16: u32 = 22;
pub(super) const AMX_TILE: u32 = 24;
pub(crate) const AMX_INT8: u32 = 25;

/// Whether the CPU has AMX-TILE and the AMX feature `bit`, and Linux lets this process use
/// the tile data (asked once, `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`).
pub(crate) fn amx_usable(bit: u32) -> bool {
    // CPUID leaf 7 (an absent leaf reads as zeros: no AMX).
    let edx = __cpuid_count(7, 0).edx;
    let has = |b: u32| edx & (1 << b) != 0;
    if !(has(AMX_TILE) && has(bit)) {
        return false;
    }
    static PERMITTED: OnceLock<bool> = OnceLock::new();
    *PERMITTED.get_or_init(|| {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: arch_prctl with this request only changes the process's permission to use
        // AMX state; it reads and writes no memory of ours.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        rc == 0
    })
}

/// A 64-byte tile configuration: palette 1, all eight tiles 16 rows × 64 bytes.
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn full() -> TileConfig {
        let mut c = [0u8; 64];
        c[0] = 1; // palette 1
        for t in 0..8 {
            c[16 + 2 * t] = 64; // bytes per row (u16, little endian)
            c[48 + t] = 16; // rows
        }
        TileConfig(c)
    }
}

/// One 16 × 64-byte tile in memory.
#[repr(C, align(64))]
struct Tile([u8; 1024]);

/// Runs `$op` (tmm0..tmm3 += tmm4 · tmm5) `iters × UNROLL` times on each of the four
/// accumulator tiles, from zero, with A filled with `$a` and B with `$b` (16-bit patterns for
/// bf16, bytes for int8), and returns the sum of all 4 × 256 32-bit results (as `$e`).
macro_rules! tile_fn {
    ($name:ident, $in:ty, $a:expr, $b:expr, $e:ty, $op:literal) => {
        pub(super) fn $name(iters: u64) -> u64 {
            let config = TileConfig::full();
            let mut a = Tile([0; 1024]);
            let mut b = Tile([0; 1024]);
            for (dst, src) in [(&mut a, black_box($a as $in)), (&mut b, black_box($b as $in))] {
                for chunk in dst.0.chunks_exact_mut(size_of::<$in>()) {
                    chunk.copy_from_slice(&src.to_le_bytes());
                }
            }
            let mut c = [Tile([0; 1024]), Tile([0; 1024]), Tile([0; 1024]), Tile([0; 1024])];
            let [c0, c1, c2, c3] = &mut c;
            // SAFETY: the caller checked AMX-TILE and the data type, and that Linux permits
            // the tile state (`amx_usable`); every pointer is to a 64-byte-aligned 1 KiB tile
            // read or written as 16 rows of 64 bytes with a stride of 64; the tiles are
            // released before the block ends.
            unsafe {
                asm!(
                    "ldtilecfg [{config}]",
                    "tilezero tmm0",
                    "tilezero tmm1",
                    "tilezero tmm2",
                    "tilezero tmm3",
                    "tileloadd tmm4, [{a} + {stride}*1]",
                    "tileloadd tmm5, [{b} + {stride}*1]",
                    "test {n}, {n}",
                    "jz 3f",
                    "2:",
                    concat!($op, " tmm0, tmm4, tmm5"), concat!($op, " tmm1, tmm4, tmm5"),
                    concat!($op, " tmm2, tmm4, tmm5"), concat!($op, " tmm3, tmm4, tmm5"),
                    concat!($op, " tmm0, tmm4, tmm5"), concat!($op, " tmm1, tmm4, tmm5"),
                    concat!($op, " tmm2, tmm4, tmm5"), concat!($op, " tmm3, tmm4, tmm5"),
                    concat!($op, " tmm0, tmm4, tmm5"), concat!($op, " tmm1, tmm4, tmm5"),
                    concat!($op, " tmm2, tmm4, tmm5"), concat!($op, " tmm3, tmm4, tmm5"),
                    concat!($op, " tmm0, tmm4, tmm5"), concat!($op, " tmm1, tmm4, tmm5"),
                    concat!($op, " tmm2, tmm4, tmm5"), concat!($op, " tmm3, tmm4, tmm5"),
                    "dec {n}",
                    "jnz 2b",
                    "3:",
                    "tilestored [{c0} + {stride}*1], tmm0",
                    "tilestored [{c1} + {stride}*1], tmm1",
                    "tilestored [{c2} + {stride}*1], tmm2",
                    "tilestored [{c3} + {stride}*1], tmm3",
                    "tilerelease",
                    config = in(reg) config.0.as_ptr(),
                    a = in(reg) a.0.as_ptr(),
                    b = in(reg) b.0.as_ptr(),
                    c0 = in(reg) c0.0.as_mut_ptr(),
                    c1 = in(reg) c1.0.as_mut_ptr(),
                    c2 = in(reg) c2.0.as_mut_ptr(),
                    c3 = in(reg) c3.0.as_mut_ptr(),
                    stride = in(reg) 64usize,
                    n = inout(reg) iters => _,
                    options(nostack),
                );
            }
            c.iter()
                .flat_map(|tile| tile.0.chunks_exact(4))
                .map(|v| <$e>::from_le_bytes([v[0], v[1], v[2], v[3]]) as u64)
                .fold(0u64, u64::wrapping_add)
        }
    };
}

const _: () = assert!(
    crate::cpu::kernels::UNROLL == 4,
    "the tile loops are unrolled 4 times by hand"
);

// int8 1 × 1, 64 pairs: each result gains 64 per instruction.
tile_fn!(tile_i8, i8, 1, 1, u32, "tdpbssd");
// bf16 1.0 × 2^-5 (0x3D00), 32 pairs: each f32 result gains exactly 1 per instruction.
tile_fn!(tile_bf16, u16, 0x3F80, 0x3D00, f32, "tdpbf16ps");
