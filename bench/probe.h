// What the single-file C probes of bench/ share: a monotonic clock, the core's clock from a
// chain of dependent imuls (3 cycles each), and the comparison qsort takes to find a median.
#ifndef PEAKBENCH_PROBE_H
#define PEAKBENCH_PROBE_H

#include <stdint.h>
#include <time.h>

static inline double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// The clock in GHz over `turns` turns of 8 imuls: a short window reads the clock right after
// the work before it, before the core changes it.
static inline double imul_ghz_over(int turns) {
    uint64_t x = 3;
    double start = now();
    for (int i = 0; i < turns; i++) {
        __asm__ volatile("imul %0,%0\n imul %0,%0\n imul %0,%0\n imul %0,%0\n"
                         "imul %0,%0\n imul %0,%0\n imul %0,%0\n imul %0,%0\n" : "+r"(x));
    }
    return turns * 8.0 * 3 / (now() - start) / 1e9;
}

static inline double imul_ghz(void) { return imul_ghz_over(20000); }

// Ascending doubles, for qsort.
static inline int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
