// The DGEMM micro-kernel by hand, to find where peakbench's built-in DGEMM loses against the
// FMA units: the rate of 24 independent FMA chains (the units' limit at whatever clock the
// 512-bit work runs), then register tiles of C (MR x NR, MR = 8 x MV rows) over packed panels,
// each step loading MV vectors of A, broadcasting NR values of B and issuing MV x NR FMAs:
//
//   - "L1": both panels small (k = 64) and reused, so every load hits L1: the tile's own limit;
//   - "L2": the A panels of an MC x KC block (1 MiB) streamed tile after tile, the B panel
//     reused, as the real loops run;
//
// each with the A panel also fetched into L1 by software 0, 8 and 16 steps ahead.
//
// Each line prints FMAs per ns and the ratio to the chains' rate, median of 7. The loads a tile
// issues beside its FMAs are measured first on their own: 24 chains with 8 to 16 loads a turn
// that feed nothing (16 x 12 issues 14 loads a step for 24 FMAs, 24 x 8 11). Last, the clock
// while the work runs: a chain of 5 imuls (15 cycles) beside each k step of the 24 x 8 tile, and
// beside each turn of the 24 FMA chains (24 FMAs need 12 cycles at 2 a cycle), so each loop runs
// at the imul chain's speed and its rate is the clock, against the chain alone.
//
//     gcc -O3 -march=native -o gemm-tile bench/gemm-tile.c && ./gemm-tile
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

#include "probe.h"

#define ROUNDS 7

static double sink;

// 24 chains of vfmadd231pd (4 cycles' latency x 2 units needs 8), with `LOADS` broadcast loads
// from L1 into spare registers beside them each turn: no load feeds an FMA, so all that can slow
// the chains is the loads' share of the core. With no loads, the units' rate.
#define F(r) "vfmadd231pd %%zmm30, %%zmm31, %%zmm" #r "\n"
#define F24 F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) \
    F(12) F(13) F(14) F(15) F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23)
#define L(o, r) "vbroadcastsd " #o "(%1), %%zmm" #r "\n"
#define L4(o) L(o, 24) L(o + 8, 25) L(o + 16, 26) L(o + 24, 27)
#define L8 L4(0) L4(32)
#define L11 L8 L(64, 28) L(72, 29) L(80, 24)
#define L14 L11 L(88, 25) L(96, 26) L(104, 27)
#define L16 L14 L(112, 28) L(120, 29)
#define CHAINS(NAME, LOADS)                                                                   \
    static double NAME(void) {                                                                \
        static double line[16] __attribute__((aligned(64))) = {1.0};                          \
        long iters = 20000000;                                                                \
        double start = now();                                                                 \
        __asm__ volatile("vbroadcastsd (%1), %%zmm30\n vbroadcastsd (%1), %%zmm31\n"          \
                         "1:\n" LOADS F24 "dec %0\n jnz 1b\n"                                 \
                         : "+r"(iters)                                                        \
                         : "r"(line)                                                          \
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",    \
                           "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",       \
                           "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21",     \
                           "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28",     \
                           "xmm29", "xmm30", "xmm31");                                        \
        return 20000000 * 24.0 / (now() - start) / 1e9;                                       \
    }

CHAINS(fma_rate, "")
CHAINS(fma_8_loads, L8)
CHAINS(fma_11_loads, L11)
CHAINS(fma_14_loads, L14)
CHAINS(fma_16_loads, L16)

static double median_of(double (*f)(void)) {
    double r[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) r[i] = f();
    qsort(r, ROUNDS, sizeof r[0], cmp);
    return r[ROUNDS / 2];
}

// One tile of MV vectors x NR columns over k steps of packed panels a (k x 8MV) and b (k x NR).
static int ahead; // steps ahead that the A panel is prefetched into L1 (0: none)

// STEP runs at the start of each k step: nothing, or the imul chain of the clocked tile.
static uint64_t chain = 3;
#define IMUL5 "imul %0,%0\n imul %0,%0\n imul %0,%0\n imul %0,%0\n imul %0,%0\n"
#define NO_STEP
#define CHAIN_STEP __asm__ volatile(IMUL5 : "+r"(chain));
#define TILE(NAME, MV, NR, STEP)                                                             \
    static void NAME(long k, const double *restrict a, const double *restrict b, double *c) { \
        __m512d acc[NR][MV];                                                                 \
        for (int j = 0; j < NR; j++)                                                         \
            for (int v = 0; v < MV; v++) acc[j][v] = _mm512_setzero_pd();                    \
        for (long p = 0; p < k; p++) {                                                       \
            STEP                                                                             \
            __m512d av[MV];                                                                  \
            if (ahead)                                                                       \
                for (int v = 0; v < MV; v++)                                                 \
                    _mm_prefetch((const char *)(a + ahead * 8 * MV + v * 8), _MM_HINT_T0);   \
            for (int v = 0; v < MV; v++) av[v] = _mm512_load_pd(a + v * 8);                  \
            for (int j = 0; j < NR; j++) {                                                   \
                __m512d bj = _mm512_set1_pd(b[j]);                                           \
                for (int v = 0; v < MV; v++) acc[j][v] = _mm512_fmadd_pd(av[v], bj, acc[j][v]); \
            }                                                                                \
            a += 8 * MV;                                                                     \
            b += NR;                                                                         \
        }                                                                                    \
        for (int j = 0; j < NR; j++)                                                         \
            for (int v = 0; v < MV; v++)                                                     \
                _mm512_store_pd(c + j * 8 * MV + v * 8,                                      \
                                _mm512_add_pd(_mm512_load_pd(c + j * 8 * MV + v * 8), acc[j][v])); \
    }

TILE(tile_2x12, 2, 12, NO_STEP)
TILE(tile_2x14, 2, 14, NO_STEP)
TILE(tile_3x8, 3, 8, NO_STEP)
TILE(tile_4x6, 4, 6, NO_STEP)
TILE(tile_3x8_chained, 3, 8, CHAIN_STEP)

typedef void (*tile_fn)(long, const double *, const double *, double *);

static double *buf(size_t n) {
    double *p = aligned_alloc(64, (n * 8 + 63) / 64 * 64);
    for (size_t i = 0; i < n; i++) p[i] = 1.0 + (double)(i % 7) * 1e-9;
    return p;
}

// FMAs per ns: `tiles` tiles of depth k; A panels cycled over `apanels` distinct ones.
static double run(tile_fn f, int mv, int nr, long k, int apanels, long tiles) {
    int mr = 8 * mv;
    double *a = buf((size_t)apanels * mr * k), *b = buf(k * nr), *c = buf(mr * nr);
    double best[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double start = now();
        for (long t = 0; t < tiles; t++) f(k, a + (size_t)(t % apanels) * mr * k, b, c);
        best[r] = (double)tiles * k * mr / 8 * nr / (now() - start) / 1e9;
    }
    sink += c[0];
    free(a), free(b), free(c);
    qsort(best, ROUNDS, sizeof best[0], cmp);
    return best[ROUNDS / 2];
}

// GHz while the chain runs alone, beside the 24 FMA chains, and beside the 24 x 8 tile in L1.
static double imul_alone(void) {
    long n = 20000000;
    double start = now();
    for (long i = 0; i < n; i++) __asm__ volatile(IMUL5 : "+r"(chain));
    return n * 15.0 / (now() - start) / 1e9;
}

static double imul_beside_fmas(void) {
    long n = 20000000;
    double start = now();
    for (long i = 0; i < n; i++)
        __asm__ volatile("imul %0,%0\n" F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7)
                         "imul %0,%0\n" F(8) F(9) F(10) F(11) F(12) F(13) F(14) F(15)
                         "imul %0,%0\n" F(16) F(17) F(18) F(19) F(20) F(21) F(22) F(23)
                         "imul %0,%0\n imul %0,%0\n"
                         : "+r"(chain)
                         :
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                           "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
                           "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21",
                           "xmm22", "xmm23");
    return n * 15.0 / (now() - start) / 1e9;
}

static double imul_beside_tile(void) {
    long k = 64, tiles = 300000;
    double *a = buf(24 * k), *b = buf(8 * k), *c = buf(24 * 8);
    ahead = 0; // as peakbench's kernel: no software prefetch of A
    double start = now();
    for (long t = 0; t < tiles; t++) tile_3x8_chained(k, a, b, c);
    double ghz = (double)tiles * k * 15 / (now() - start) / 1e9;
    sink += c[0];
    free(a), free(b), free(c);
    return ghz;
}

int main(void) {
    double u = median_of(fma_rate);
    printf("24 FMA chains: %.2f FMA/ns\n", u);
    struct {
        int loads;
        double (*f)(void);
    } mixes[] = {{8, fma_8_loads}, {11, fma_11_loads}, {14, fma_14_loads}, {16, fma_16_loads}};
    for (size_t i = 0; i < sizeof mixes / sizeof mixes[0]; i++) {
        double r = median_of(mixes[i].f);
        printf("24 FMA chains + %2d loads a turn: %.2f FMA/ns (%.3f)\n", mixes[i].loads, r, r / u);
    }
    struct {
        const char *name;
        tile_fn f;
        int mv, nr;
    } tiles[] = {{"16x12", tile_2x12, 2, 12}, {"16x14", tile_2x14, 2, 14},
                 {"24x8", tile_3x8, 3, 8}, {"32x6", tile_4x6, 4, 6}};
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++)
        for (ahead = 0; ahead <= 16; ahead += 8) {
        int mr = 8 * tiles[i].mv;
        double l1 = run(tiles[i].f, tiles[i].mv, tiles[i].nr, 64, 1, 2000000);
        long kc = 256, panels = (1 << 20) / (8 * mr * kc);
        double l2 = run(tiles[i].f, tiles[i].mv, tiles[i].nr, kc, panels, 400000);
        printf("%-6s A prefetched %2d steps ahead: L1 %.2f FMA/ns (%.3f)   L2-streamed A, kc=%ld: "
               "%.2f (%.3f)\n", tiles[i].name, ahead, l1, l1 / u, kc, l2, l2 / u);
    }
    double alone = median_of(imul_alone), fmas = median_of(imul_beside_fmas),
           tile = median_of(imul_beside_tile);
    printf("clock: imul chain alone %.3f GHz, beside 24 FMA chains %.3f (%.3f), beside the 24x8 "
           "tile in L1 %.3f (%.3f)\n", alone, fmas, fmas / alone, tile, tile / alone);
    return sink == 42.0;
}
