// The clock under wide vector work, read by hand, to check peakbench's licence probe
// (src/sysinfo/clock.rs, ratio_after) against: 41 rounds, each an imul chain (3 cycles per
// imul, about 25 us) timed at once after 5 ms of plain adds, after 1M iterations of 12
// independent 256-bit FMAs and after 1M iterations of 16 independent 512-bit FMAs. A core
// with an AVX-512 frequency licence runs 512-bit FMAs at a lower clock, so the chain right
// after them reads it. Prints the median and the quartiles of each reading (GHz) and the FMAs
// per cycle at the clock read right after them.
//
// Then the clock *during* the work, which needs no assumption on how long the core keeps a
// licence: a chain of imuls (3 cycles each) with independent work beside it that fits in the
// chain's shadow, so each loop takes the chain's cycles and its rate is the clock. Beside 512-bit
// and 256-bit FMAs in registers, and beside 32 KiB L1 reads of 512-bit vectors: bare loads (what
// likwid-bench's `load_avx512` does), loads in pairs into an FMA (peakbench's read) and into a
// ternary XOR. Last, the clock over twelve short chains in a row right after each kind of
// work (3 us each for the first six, 25 us for the rest), which shows how soon a licence ends.
//
//     gcc -O2 -mavx512f -o licence bench/licence.c && ./licence
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "probe.h"

#define ROUNDS 41

static void adds(double seconds) {
    uint64_t x = 1, y = 1;
    double start = now();
    while (now() - start < seconds) {
        for (int i = 0; i < 1000; i++) __asm__ volatile("add %1,%0\n add %1,%0\n" : "+r"(x) : "r"(y));
    }
}

#define Y(i) "vfmadd231pd %%ymm14,%%ymm15,%%ymm" #i "\n"
#define Z(i) "vfmadd231pd %%zmm30,%%zmm31,%%zmm" #i "\n"

// FMAs per ns.
static double ymm_fmas(long n) {
    double start = now();
    __asm__ volatile("vzeroall" ::: "memory");
    for (long i = 0; i < n; i++) {
        __asm__ volatile(Y(0) Y(1) Y(2) Y(3) Y(4) Y(5) Y(6) Y(7) Y(8) Y(9) Y(10) Y(11)
                         ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                           "xmm8", "xmm9", "xmm10", "xmm11");
    }
    return n * 12 / (now() - start) / 1e9;
}

static double zmm_fmas(long n) {
    double start = now();
    __asm__ volatile("vpxorq %%zmm30,%%zmm30,%%zmm30\n vpxorq %%zmm31,%%zmm31,%%zmm31" ::: "xmm30", "xmm31");
    for (long i = 0; i < n; i++) {
        __asm__ volatile(Z(0) Z(1) Z(2) Z(3) Z(4) Z(5) Z(6) Z(7) Z(8) Z(9) Z(10) Z(11) Z(12) Z(13)
                         Z(14) Z(15)
                         ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                           "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
    }
    return n * 16 / (now() - start) / 1e9;
}

// The chain's imul, and the k-th 64-byte load of a kilobyte (R) or its k-th pair of them, the
// second folded into an FMA (FR) or a ternary XOR (TR), from the line at %[q].
#define I "imul %[x],%[x]\n"
#define R(k, x) "vmovapd " #k "*64(%[q]),%%zmm" #x "\n"
#define FR(k, x, a) "vmovapd " #k "*128(%[q]),%%zmm" #x "\n vfmadd231pd " #k "*128+64(%[q]),%%zmm" #x ",%%zmm" #a "\n"
#define TR(k, x, a) "vmovdqa64 " #k "*128(%[q]),%%zmm" #x "\n vpternlogq $0x96," #k "*128+64(%[q]),%%zmm" #x ",%%zmm" #a "\n"
#define CLOBBER16 "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", \
                  "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"

enum { ALONE, ZMM, YMM, BARE, FMA_READ, TERN_READ, DURING };
static const char *during_name[DURING] = {"imuls alone", "512-bit FMAs", "256-bit FMAs",
                                          "L1 bare loads", "L1 loads into FMAs", "L1 loads into XORs"};

// The clock while `kind` runs beside the chain, GHz. FMAs: 12 beside 3 imuls (9 cycles; 12 FMAs
// need 6 at 2 a cycle). L1 reads: 16 loads of 64 B beside 4 imuls (12 cycles; 16 loads need 8).
static double during(int kind, const double *buf, size_t bytes) {
    uint64_t x = 3;
    long steps = 0;
    double start = now();
    if (kind <= YMM) {
        for (; steps < 2000000; steps++) {
            if (kind == ALONE) __asm__ volatile(I I I : [x] "+r"(x));
            if (kind == ZMM)
                __asm__ volatile(I Z(0) Z(1) Z(2) Z(3) I Z(4) Z(5) Z(6) Z(7) I Z(8) Z(9) Z(10) Z(11)
                                 : [x] "+r"(x)::CLOBBER16);
            if (kind == YMM)
                __asm__ volatile(I Y(0) Y(1) Y(2) Y(3) I Y(4) Y(5) Y(6) Y(7) I Y(8) Y(9) Y(10) Y(11)
                                 : [x] "+r"(x)::CLOBBER16);
        }
        return steps * 9.0 / (now() - start) / 1e9;
    }
    for (int pass = 0; pass < 300; pass++) {
        for (const char *q = (const char *)buf; q < (const char *)buf + bytes; q += 1024, steps++) {
            if (kind == BARE)
                __asm__ volatile(R(0, 0) R(1, 1) R(2, 2) R(3, 3) I R(4, 4) R(5, 5) R(6, 6) R(7, 7) I
                                 R(8, 0) R(9, 1) R(10, 2) R(11, 3) I R(12, 4) R(13, 5) R(14, 6)
                                 R(15, 7) I
                                 : [x] "+r"(x)
                                 : [q] "r"(q)
                                 : CLOBBER16);
            if (kind == FMA_READ)
                __asm__ volatile(FR(0, 0, 8) FR(1, 1, 9) I FR(2, 2, 10) FR(3, 3, 11) I
                                 FR(4, 4, 12) FR(5, 5, 13) I FR(6, 6, 14) FR(7, 7, 15) I
                                 : [x] "+r"(x)
                                 : [q] "r"(q)
                                 : CLOBBER16);
            if (kind == TERN_READ)
                __asm__ volatile(TR(0, 0, 8) TR(1, 1, 9) I TR(2, 2, 10) TR(3, 3, 11) I
                                 TR(4, 4, 12) TR(5, 5, 13) I TR(6, 6, 14) TR(7, 7, 15) I
                                 : [x] "+r"(x)
                                 : [q] "r"(q)
                                 : CLOBBER16);
        }
    }
    return steps * 12.0 / (now() - start) / 1e9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void line(const char *what, double *v) {
    qsort(v, ROUNDS, sizeof *v, by_value);
    printf("%-26s %.3f [%.3f..%.3f]\n", what, v[ROUNDS / 2], v[ROUNDS / 4], v[3 * ROUNDS / 4]);
}

int main(void) {
    if (!__builtin_cpu_supports("avx512f")) {
        fprintf(stderr, "this CPU has no AVX-512F\n");
        return 1;
    }
    double rest[ROUNDS], after_ymm[ROUNDS], after_zmm[ROUNDS], ymm[ROUNDS], zmm[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        adds(0.005);
        rest[r] = imul_ghz_over(4000);
        ymm[r] = ymm_fmas(1000000);
        after_ymm[r] = imul_ghz_over(4000);
        zmm[r] = zmm_fmas(1000000);
        after_zmm[r] = imul_ghz_over(4000);
    }
    for (int r = 0; r < ROUNDS; r++) {
        ymm[r] /= after_ymm[r];
        zmm[r] /= after_zmm[r];
    }
    line("GHz after plain adds", rest);
    line("GHz after 256-bit FMAs", after_ymm);
    line("GHz after 512-bit FMAs", after_zmm);
    line("256-bit FMAs per cycle", ymm);
    line("512-bit FMAs per cycle", zmm);

    enum { WS = 32 * 1024 };
    double *buf = aligned_alloc(4096, WS);
    for (size_t i = 0; i < WS / sizeof *buf; i++) buf[i] = 1.0;
    static double ghz[DURING][ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < DURING; k++) ghz[k][r] = during(k, buf, WS);
    char what[64];
    for (int k = 0; k < DURING; k++) {
        snprintf(what, sizeof what, "GHz during %s", during_name[k]);
        line(what, ghz[k]);
    }

    enum { STEPS = 12 };
    static double after[2][STEPS][ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < 2; k++) {
            if (k == 0) adds(0.003);
            else zmm_fmas(300000);
            for (int s = 0; s < STEPS; s++) after[k][s][r] = imul_ghz_over(s < 6 ? 500 : 4000);
        }
    }
    for (int k = 0; k < 2; k++) {
        printf("%-26s", k == 0 ? "GHz in 12 chains after adds" : "GHz in 12 chains after zmm");
        for (int s = 0; s < STEPS; s++) {
            qsort(after[k][s], ROUNDS, sizeof(double), by_value);
            printf(" %.2f", after[k][s][ROUNDS / 2]);
        }
        printf("\n");
    }
    free(buf);
    return 0;
}
