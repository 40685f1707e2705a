// Scalar integer adds by hand, to find what peakbench's scalar integer kernels lose against the
// table's ALUs a cycle: K independent chains of `add reg, one` (K = 4, 6, 8, 10, 12), a loop body
// of K x U adds (U = 1 to 16) closed by one `dec; jnz`, and the adds a cycle at the clock an imul
// chain reads right after (3 cycles per imul). peakbench's kernels are K = 8, U = 4: 32 adds and
// the loop's one fused decrement-and-branch, itself an ALU operation. If the loop's share is
// all that is lost, adds a cycle approach the ALU count as U grows; a core that issues fewer,
// however long the body, has fewer ALUs for adds than the table says.
//
//     gcc -O2 -o int-adds bench/int-adds.c && ./int-adds
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "probe.h"

#define ADDS 2000000000L
#define ROUNDS 7

#define A(r) "add %[one], %" #r "\n"
#define B4 A(%r8) A(%r9) A(%r10) A(%r11)
#define B6 B4 A(%r12) A(%r13)
#define B8 B6 A(%r14) A(%r15)
#define B10 B8 A(%rax) A(%rdx)
#define B12 B10 A(%rsi) A(%rdi)

// One loop of `n` iterations of BODY (K adds) repeated U times.
#define LOOP(NAME, BODY, U)                                                                  \
    static void NAME(long n, uint64_t one) {                                                 \
        __asm__ volatile("1:\n" U(BODY) "dec %[n]\n jnz 1b\n"                                \
                         : [n] "+c"(n)                                                       \
                         : [one] "b"(one)                                                    \
                         : "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rax",      \
                           "rdx", "rsi", "rdi", "cc");                                       \
    }
#define U1(b) b
#define U2(b) b b
#define U4(b) U2(b) U2(b)
#define U8(b) U4(b) U4(b)
#define U16(b) U8(b) U8(b)

LOOP(k8u1, B8, U1)
LOOP(k8u2, B8, U2)
LOOP(k8u4, B8, U4)
LOOP(k8u8, B8, U8)
LOOP(k8u16, B8, U16)
LOOP(k4u8, B4, U8)
LOOP(k6u4, B6, U4)
LOOP(k10u4, B10, U4)
LOOP(k12u4, B12, U4)
LOOP(k12u8, B12, U8)

int main(int argc, char **argv) {
    (void)argv;
    struct {
        const char *name;
        void (*run)(long, uint64_t);
        int adds;
    } cases[] = {
        {"8 chains x 1", k8u1, 8},   {"8 chains x 2", k8u2, 16},   {"8 chains x 4", k8u4, 32},
        {"8 chains x 8", k8u8, 64},  {"8 chains x 16", k8u16, 128}, {"4 chains x 8", k4u8, 32},
        {"6 chains x 4", k6u4, 24},  {"10 chains x 4", k10u4, 40}, {"12 chains x 4", k12u4, 48},
        {"12 chains x 8", k12u8, 96},
    };
    uint64_t one = (uint64_t)argc;
    printf("body            adds/cycle (median of %d, min-max)  GHz\n", ROUNDS);
    for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double rate[ROUNDS], ghz[ROUNDS];
        long n = ADDS / cases[c].adds;
        for (int r = 0; r < ROUNDS; r++) {
            double start = now();
            cases[c].run(n, one);
            double seconds = now() - start;
            ghz[r] = imul_ghz();
            rate[r] = (double)n * cases[c].adds / seconds / 1e9 / ghz[r];
        }
        qsort(rate, ROUNDS, sizeof rate[0], cmp);
        qsort(ghz, ROUNDS, sizeof ghz[0], cmp);
        printf("%-15s %.2f (%.2f-%.2f)  %.2f\n", cases[c].name, rate[ROUNDS / 2], rate[0],
               rate[ROUNDS - 1], ghz[ROUNDS / 2]);
    }
    return 0;
}
