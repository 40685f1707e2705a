/* An independent pointer chase for bench/memory.py: a random cyclic permutation (Sattolo) of
 * 64-byte lines, each holding the address of the next, followed for a fixed time; prints the
 * nanoseconds per load of the thread's CPU time (CLOCK_THREAD_CPUTIME_ID, as peakbench reports
 * it, so that time spent descheduled on a shared machine counts for neither). Usage: chase BYTES SECONDS [huge]  (4 KiB pages unless "huge"). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "probe.h"

static uint64_t state = 88172645463325252ull;
static uint64_t xorshift(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: chase BYTES SECONDS [huge]\n");
        return 2;
    }
    size_t bytes = strtoull(argv[1], 0, 10), lines = bytes / 64;
    double seconds = atof(argv[2]);
    char *mem = mmap(0, lines * 64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) { perror("mmap"); return 1; }
    madvise(mem, lines * 64, argc > 3 && !strcmp(argv[3], "huge") ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    size_t *order = malloc(lines * sizeof *order);
    for (size_t i = 0; i < lines; i++) order[i] = i;
    for (size_t i = lines - 1; i > 0; i--) { /* Sattolo: j < i */
        size_t j = xorshift() % i, t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (size_t i = 0; i < lines; i++) *(char **)(mem + i * 64) = mem + order[i] * 64;
    free(order);
    char **p = (char **)mem;
    for (size_t i = 0; i < lines; i++) p = (char **)*p; /* warm up: one cycle */
    uint64_t loads = 0;
    double start = now(), cpu_start = cpu_now(), end;
    do {
        for (int i = 0; i < 1024; i++) {
            p = (char **)*p; p = (char **)*p; p = (char **)*p; p = (char **)*p;
            p = (char **)*p; p = (char **)*p; p = (char **)*p; p = (char **)*p;
        }
        loads += 8192;
        end = now();
    } while (end - start < seconds);
    printf("%.3f\n", (cpu_now() - cpu_start) * 1e9 / loads);
    return p == 0; /* keeps the chain live */
}
