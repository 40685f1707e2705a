// The clock under wide vector work, read by hand, to check peakbench's licence probe
// (src/sysinfo/clock.rs, ratio_after) against: 41 rounds, each an imul chain (3 cycles per
// imul, about 25 us) timed at once after 5 ms of plain adds, after 1M iterations of 12
// independent 256-bit FMAs and after 1M iterations of 16 independent 512-bit FMAs. A core
// with an AVX-512 frequency licence keeps the lower clock for milliseconds after the last
// 512-bit FMA, so the chain right after them runs at it. Prints the median and the quartiles
// of each reading (GHz) and the FMAs per cycle at the clock read right after them.
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
    return 0;
}
