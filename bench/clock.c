// An independent reading of the core clock, to check peakbench's (src/sysinfo/clock.rs) against:
// a chain of dependent register-register adds (1 cycle each) and a chain of dependent 64-bit
// imul (3 cycles each), each timed by the thread's CPU time, best of 5 windows of 50 ms.
// Neither chain can be folded at rename, unlike `add reg, imm` on Golden Cove cores.
//
//     gcc -O2 -o clock bench/clock.c && ./clock      # prints "ADD_GHZ IMUL_GHZ"
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

#define REP10(x) x x x x x x x x x x
#define REP100(x) REP10(REP10(x))

static double add_window(void) {
    uint64_t x = 1, y = 1, n = 0;
    double start = now_ns(), end;
    do {
        for (int i = 0; i < 1000; i++) {
            __asm__ volatile(REP100("add %1, %0\n\t") : "+r"(x) : "r"(y));
        }
        n += 100000;
    } while ((end = now_ns()) - start < 50e6);
    return n / (end - start);
}

static double imul_window(void) {
    uint64_t x = 1, y = 1, n = 0;
    double start = now_ns(), end;
    do {
        for (int i = 0; i < 1000; i++) {
            __asm__ volatile(REP100("imul %1, %0\n\t") : "+r"(x) : "r"(y));
        }
        n += 100000;
    } while ((end = now_ns()) - start < 50e6);
    return 3.0 * n / (end - start);
}

int main(void) {
    double add = 0, imul = 0;
    for (int i = 0; i < 5; i++) {
        double a = add_window(), m = imul_window();
        if (a > add) add = a;
        if (m > imul) imul = m;
    }
    printf("%.4f %.4f\n", add, imul);
    return 0;
}
