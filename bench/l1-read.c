// Forms of a 32 KiB AVX-512 read that uses every byte it loads, against bare loads (what
// likwid-bench's `load_avx512` does), to find what the proof costs a core's L1 rate. Each form
// is called once per block (32 KiB, or BLOCK bytes, a multiple of 1024 that divides 32 KiB)
// with its accumulators reduced at the end, as peakbench's read kernel is. Forms alternate in
// 40 rounds of about 3 ms; it prints the median, the 90th percentile and the best of each in
// GB/s. Run it pinned on an idle CPU:
//
//     gcc -O2 -mavx512f -o l1-read bench/l1-read.c && taskset -c 1 ./l1-read [BLOCK]
//
// add:  16 vectors a kilobyte, each folded into its own accumulator's vaddpd (one 512-bit
//       operation per load; peakbench's read until 2026-11-29);
// fma:  vectors in pairs, one vfmadd231pd per pair (one operation per two loads; since then);
// tern: pairs into vpternlogq, an XOR (one operation per two loads, a weaker proof);
// bare: loads whose values nobody uses.
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe.h"

#define WS (32 * 1024)
#define ROUNDS 40
#define FORMS 4

#define LOAD(o) _mm512_load_pd((const double *)(q + (o)))
#define ADD(a, o) a = _mm512_add_pd(a, LOAD(o))
#define FMA(a, o) a = _mm512_fmadd_pd(LOAD(o), LOAD((o) + 64), a)
#define TERN(a, o)                                                                            \
    a = _mm512_ternarylogic_epi64(a, _mm512_load_si512((const void *)(q + (o))),              \
                                  _mm512_load_si512((const void *)(q + (o) + 64)), 0x96)

static __m512d fold8(__m512d a0, __m512d a1, __m512d a2, __m512d a3, __m512d a4, __m512d a5,
                     __m512d a6, __m512d a7) {
    a0 = _mm512_add_pd(a0, a4), a1 = _mm512_add_pd(a1, a5);
    a2 = _mm512_add_pd(a2, a6), a3 = _mm512_add_pd(a3, a7);
    a0 = _mm512_add_pd(a0, a2), a1 = _mm512_add_pd(a1, a3);
    return _mm512_add_pd(a0, a1);
}

static double __attribute__((noinline)) read_add(const char *p, size_t len) {
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0, b6 = a0, b7 = a0;
    for (const char *q = p; q < p + len; q += 1024) {
        ADD(a0, 0), ADD(a1, 64), ADD(a2, 128), ADD(a3, 192);
        ADD(a4, 256), ADD(a5, 320), ADD(a6, 384), ADD(a7, 448);
        ADD(b0, 512), ADD(b1, 576), ADD(b2, 640), ADD(b3, 704);
        ADD(b4, 768), ADD(b5, 832), ADD(b6, 896), ADD(b7, 960);
    }
    __m512d a = fold8(a0, a1, a2, a3, a4, a5, a6, a7), b = fold8(b0, b1, b2, b3, b4, b5, b6, b7);
    return _mm512_reduce_add_pd(_mm512_add_pd(a, b));
}

static double __attribute__((noinline)) read_fma(const char *p, size_t len) {
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0;
    for (const char *q = p; q < p + len; q += 1024) {
        FMA(a0, 0), FMA(a1, 128), FMA(a2, 256), FMA(a3, 384);
        FMA(a4, 512), FMA(a5, 640), FMA(a6, 768), FMA(a7, 896);
    }
    return _mm512_reduce_add_pd(fold8(a0, a1, a2, a3, a4, a5, a6, a7));
}

static double __attribute__((noinline)) read_tern(const char *p, size_t len) {
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0;
    for (const char *q = p; q < p + len; q += 1024) {
        TERN(a0, 0), TERN(a1, 128), TERN(a2, 256), TERN(a3, 384);
        TERN(a4, 512), TERN(a5, 640), TERN(a6, 768), TERN(a7, 896);
    }
    a0 = _mm512_ternarylogic_epi64(a0, a1, a2, 0x96);
    a3 = _mm512_ternarylogic_epi64(a3, a4, a5, 0x96);
    a6 = _mm512_xor_si512(a6, a7);
    return (double)_mm512_reduce_add_epi64(_mm512_ternarylogic_epi64(a0, a3, a6, 0x96));
}

static double __attribute__((noinline)) read_bare(const char *p, size_t len) {
    for (const char *q = p; q < p + len; q += 1024) {
        __asm__ volatile("vmovapd (%0), %%zmm0\n vmovapd 64(%0), %%zmm1\n"
                         "vmovapd 128(%0), %%zmm2\n vmovapd 192(%0), %%zmm3\n"
                         "vmovapd 256(%0), %%zmm4\n vmovapd 320(%0), %%zmm5\n"
                         "vmovapd 384(%0), %%zmm6\n vmovapd 448(%0), %%zmm7\n"
                         "vmovapd 512(%0), %%zmm0\n vmovapd 576(%0), %%zmm1\n"
                         "vmovapd 640(%0), %%zmm2\n vmovapd 704(%0), %%zmm3\n"
                         "vmovapd 768(%0), %%zmm4\n vmovapd 832(%0), %%zmm5\n"
                         "vmovapd 896(%0), %%zmm6\n vmovapd 960(%0), %%zmm7\n"
                         :
                         : "r"(q)
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7");
    }
    return 0;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    size_t block = argc > 1 ? strtoul(argv[1], NULL, 10) : WS;
    if (block < 1024 || block % 1024 || WS % block) {
        fprintf(stderr, "BLOCK: %s is not a multiple of 1024 that divides %d\n", argv[1], WS);
        return 2;
    }
    double *words = aligned_alloc(4096, WS);
    for (size_t i = 0; i < WS / 8; i++) words[i] = 1.0;
    const char *buf = (const char *)words;
    double (*form[FORMS])(const char *, size_t) = {read_add, read_fma, read_tern, read_bare};
    const char *name[FORMS] = {"add", "fma", "tern", "bare"};
    double gbs[FORMS][ROUNDS], sink = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < FORMS; k++) {
            const long calls = 30000;
            double start = now();
            for (long i = 0; i < calls; i++)
                for (size_t at = 0; at < WS; at += block) sink += form[k](buf + at, block);
            gbs[k][r] = calls * (double)WS / (now() - start) / 1e9;
        }
    }
    for (int k = 0; k < FORMS; k++) {
        qsort(gbs[k], ROUNDS, sizeof(double), by_value);
        printf("%-5s block %zu: median %6.1f  p90 %6.1f  best %6.1f GB/s\n", name[k], block, gbs[k][ROUNDS / 2],
               gbs[k][ROUNDS * 9 / 10], gbs[k][ROUNDS - 1]);
    }
    return sink == -1.0;
}
