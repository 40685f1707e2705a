// The STREAM triad a = b + q·c in L1 by hand, with b and c placed at chosen offsets from a
// within a 4 KiB page, to see whether 4K aliasing sets its rate: a load whose address matches an
// older, still buffered store in bits 11:0 waits for it. peakbench's L1 triad keeps each array
// in its own page-aligned mapping, a at offset 0, b at 1088 and c at 2176 bytes; its share of
// the ports' peak has varied 0.48-0.74 between runs. For each placement: bytes a cycle (24 per
// element, as STREAM counts) at the clock an imul chain reads right after, over passes of three
// 682-element arrays (16 KB, the quick run's 1-thread L1 triad).
//
//     gcc -O2 -mavx512f -o triad-offsets bench/triad-offsets.c && ./triad-offsets
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "probe.h"

#define ELEMENTS 672 // a multiple of 32 near the quick run's 682
#define PASSES 4000000
#define ROUNDS 7

__attribute__((noinline)) static void triad(double *a, const double *b, const double *c, double q,
                                            long passes) {
    __m512d vq = _mm512_set1_pd(q);
    for (long p = 0; p < passes; p++) {
        for (int i = 0; i < ELEMENTS; i += 8) {
            __m512d v = _mm512_fmadd_pd(vq, _mm512_loadu_pd(c + i), _mm512_loadu_pd(b + i));
            _mm512_storeu_pd(a + i, v);
        }
        __asm__ volatile("" ::: "memory");
    }
}

// Four vectors a step, their loads first, then the FMAs, then the stores (so that no load
// waits behind a store of the same step).
__attribute__((noinline)) static void triad_grouped(double *a, const double *b, const double *c,
                                                    double q, long passes) {
    __m512d vq = _mm512_set1_pd(q);
    for (long p = 0; p < passes; p++) {
        for (int i = 0; i < ELEMENTS; i += 32) {
            __m512d b0 = _mm512_loadu_pd(b + i), b1 = _mm512_loadu_pd(b + i + 8);
            __m512d b2 = _mm512_loadu_pd(b + i + 16), b3 = _mm512_loadu_pd(b + i + 24);
            __m512d c0 = _mm512_loadu_pd(c + i), c1 = _mm512_loadu_pd(c + i + 8);
            __m512d c2 = _mm512_loadu_pd(c + i + 16), c3 = _mm512_loadu_pd(c + i + 24);
            __asm__ volatile("" : "+v"(b0), "+v"(b1), "+v"(b2), "+v"(b3));
            _mm512_storeu_pd(a + i, _mm512_fmadd_pd(vq, c0, b0));
            _mm512_storeu_pd(a + i + 8, _mm512_fmadd_pd(vq, c1, b1));
            _mm512_storeu_pd(a + i + 16, _mm512_fmadd_pd(vq, c2, b2));
            _mm512_storeu_pd(a + i + 24, _mm512_fmadd_pd(vq, c3, b3));
        }
        __asm__ volatile("" ::: "memory");
    }
}

int main(int argc, char **argv) {
    int grouped = argc > 1 && argv[1][0] == 'g';
    // Offsets of b and c from a, bytes within a page (a at 0).
    static const int placements[][2] = {
        {1088, 2176}, {0, 0}, {64, 128}, {128, 256}, {4032, 3968}, {1024, 2048}, {2048, 1024},
        {1344, 2688}, {3008, 1920},
    };
    double *pages[3];
    for (int i = 0; i < 3; i++) {
        pages[i] = aligned_alloc(4096, 4096 * 4);
        for (int j = 0; j < 4096 * 4 / 8; j++) pages[i][j] = 1.0;
    }
    printf("b, c offset (bytes)  B/cycle (median of %d, min-max)  GHz\n", ROUNDS);
    for (unsigned k = 0; k < sizeof placements / sizeof placements[0]; k++) {
        double *a = pages[0];
        double *b = pages[1] + placements[k][0] / 8;
        double *c = pages[2] + placements[k][1] / 8;
        double rate[ROUNDS], ghz[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            double start = now();
            if (grouped)
                triad_grouped(a, b, c, 3.0, PASSES);
            else
                triad(a, b, c, 3.0, PASSES);
            double seconds = now() - start;
            ghz[r] = imul_ghz();
            rate[r] = (double)PASSES * ELEMENTS * 24 / seconds / 1e9 / ghz[r];
        }
        qsort(rate, ROUNDS, sizeof rate[0], cmp);
        qsort(ghz, ROUNDS, sizeof ghz[0], cmp);
        printf("%4d, %4d           %.1f (%.1f-%.1f)  %.2f\n", placements[k][0], placements[k][1],
               rate[ROUNDS / 2], rate[0], rate[ROUNDS - 1], ghz[ROUNDS / 2]);
    }
    return pages[0][3] == 12345.0;
}
