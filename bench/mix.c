// Interleaved 256-bit adds and multiplies (peakbench's no-FMA kernels) by hand, to find how many
// independent chains of each kind a core needs: for k = 4 to 8 chains of vaddpd and k of vmulpd,
// the operations per cycle at the clock an imul chain reads right after (3 cycles per imul).
// Chains of k <= 7 add a constant and multiply by it (2k + 1 registers); k = 8 is peakbench's
// form since this commit: each product squares itself and each sum adds its product (16
// registers, no constant). A core whose add and multiply take L cycles on 2 pipes each needs
// k >= 2L to issue 4 a cycle; 6 chains of 4-cycle operations give at most 3.
//
//     gcc -O2 -mavx2 -o mix bench/mix.c && ./mix
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "probe.h"

#define ITERS 20000000L
#define ROUNDS 7

// One step of chain i: add the constant (or its product), multiply by the constant (or square).
#define ADD(a, b) __asm__("vaddpd %1, %0, %0" : "+x"(a) : "x"(b))
#define MUL(a, b) __asm__("vmulpd %1, %0, %0" : "+x"(a) : "x"(b))

#define CHAINS(K, BODY)                                                                    \
    static double chains_##K(__m256d one) {                                               \
        __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0,    \
                a6 = a0, a7 = a0;                                                         \
        __m256d m0 = one, m1 = one, m2 = one, m3 = one, m4 = one, m5 = one, m6 = one,     \
                m7 = one;                                                                 \
        for (long i = 0; i < ITERS; i++) {                                                \
            BODY                                                                          \
        }                                                                                 \
        __m256d s = _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)), \
                                  _mm256_add_pd(_mm256_add_pd(a4, a5), _mm256_add_pd(a6, a7))); \
        s = _mm256_add_pd(s, _mm256_add_pd(_mm256_add_pd(m0, m1), _mm256_add_pd(m2, m3)));  \
        s = _mm256_add_pd(s, _mm256_add_pd(_mm256_add_pd(m4, m5), _mm256_add_pd(m6, m7)));  \
        return s[0];                                                                      \
    }

CHAINS(4, ADD(a0, one); MUL(m0, one); ADD(a1, one); MUL(m1, one); ADD(a2, one); MUL(m2, one);
          ADD(a3, one); MUL(m3, one);)
CHAINS(5, ADD(a0, one); MUL(m0, one); ADD(a1, one); MUL(m1, one); ADD(a2, one); MUL(m2, one);
          ADD(a3, one); MUL(m3, one); ADD(a4, one); MUL(m4, one);)
CHAINS(6, ADD(a0, one); MUL(m0, one); ADD(a1, one); MUL(m1, one); ADD(a2, one); MUL(m2, one);
          ADD(a3, one); MUL(m3, one); ADD(a4, one); MUL(m4, one); ADD(a5, one); MUL(m5, one);)
CHAINS(7, ADD(a0, one); MUL(m0, one); ADD(a1, one); MUL(m1, one); ADD(a2, one); MUL(m2, one);
          ADD(a3, one); MUL(m3, one); ADD(a4, one); MUL(m4, one); ADD(a5, one); MUL(m5, one);
          ADD(a6, one); MUL(m6, one);)
CHAINS(8, ADD(a0, m0); MUL(m0, m0); ADD(a1, m1); MUL(m1, m1); ADD(a2, m2); MUL(m2, m2);
          ADD(a3, m3); MUL(m3, m3); ADD(a4, m4); MUL(m4, m4); ADD(a5, m5); MUL(m5, m5);
          ADD(a6, m6); MUL(m6, m6); ADD(a7, m7); MUL(m7, m7);)

int main(int argc, char **argv) {
    (void)argv;
    // The constant is 1.0, read at run time so that the compiler cannot fold it.
    volatile double v = argc > 0 ? 1.0 : 2.0;
    __m256d one = _mm256_set1_pd(v);
    double (*run[])(__m256d) = {chains_4, chains_5, chains_6, chains_7, chains_8};
    double sink = 0;
    printf("chains  ops/cycle (median of %d, min-max)  GHz\n", ROUNDS);
    for (int k = 0; k < 5; k++) {
        double rate[ROUNDS], ghz[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            double start = now();
            sink += run[k](one);
            double seconds = now() - start;
            ghz[r] = imul_ghz();
            rate[r] = ITERS * 2.0 * (k + 4) / seconds / 1e9 / ghz[r];
        }
        qsort(rate, ROUNDS, sizeof rate[0], cmp);
        qsort(ghz, ROUNDS, sizeof ghz[0], cmp);
        printf("%d + %d   %.2f (%.2f-%.2f)  %.2f\n", k + 4, k + 4, rate[ROUNDS / 2], rate[0],
               rate[ROUNDS - 1], ghz[ROUNDS / 2]);
    }
    return sink == 12345.0;
}
