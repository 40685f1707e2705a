/*
 * The MPI ping-pong of `peakbench cluster run`, written with blocking MPI_Send and MPI_Recv in
 * C: the peer bench/cluster.py measures peakbench's ping-pong against, counted the same way.
 *
 * For each size (argv: sizes in bytes), rank 0 runs an untimed warm-up batch and then REPS
 * timed batches; a batch is up to ping_iterations(size) round trips or 50 ms, whichever ends
 * first, and its one-way time is its duration / its round trips / 2. Rank 0 decides when a
 * batch ends and says so in the first byte of its message (0 = the last round trip), as
 * peakbench does. Rank 0 prints, per size: bytes, the best batch's one-way time (us) and the
 * median batch's (us).
 *
 * With REPS given as `hpcc`, it counts as hpcc's ping-pong section counts instead (for showing
 * where a gap to hpcc comes from): at 8 B the best of 5 measurements in each direction of 8
 * round trips each, at 2,000,000 B the best of 2 measurements in each direction of one round
 * trip each, every measurement after one untimed round trip; it prints those two lines in the
 * same three columns (the best measurement in both time columns: hpcc keeps no median).
 *
 *     mpicc -O2 -o mpi_pingpong bench/mpi_pingpong.c
 *     mpirun -np 2 ./mpi_pingpong 5 8 2097152 4194304
 *     mpirun -np 2 ./mpi_pingpong hpcc
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH_SECONDS 0.05

static int ping_iterations(long size) {
    long n = (64L << 20) / size;
    return n < 10 ? 10 : n > 1000 ? 1000 : (int)n;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One hpcc measurement: `client` pings `loops` times after one untimed round trip; returns
 * the one-way time (the same on both ranks). */
static double hpcc_measurement(int me, int client, long size, int loops, unsigned char *snd,
                               unsigned char *rcv) {
    int peer = 1 - me;
    double t0 = 0;
    for (int i = -1; i < loops; i++) {
        if (i == 0)
            t0 = MPI_Wtime();
        if (me == client) {
            MPI_Send(snd, size, MPI_BYTE, peer, 8, MPI_COMM_WORLD);
            MPI_Recv(rcv, size, MPI_BYTE, peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rcv, size, MPI_BYTE, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(snd, size, MPI_BYTE, peer, 9, MPI_COMM_WORLD);
        }
    }
    double t = (MPI_Wtime() - t0) / loops / 2;
    MPI_Bcast(&t, 1, MPI_DOUBLE, client, MPI_COMM_WORLD);
    return t;
}

static void hpcc_counting(int me) {
    const long sizes[2] = {8, 2000000};
    const int loops[2] = {8, 1}, measurements[2] = {5, 2};
    unsigned char *snd = calloc(2000000, 1), *rcv = calloc(2000000, 1);
    for (int k = 0; k < 2; k++) {
        double best = 1e30;
        for (int m = 0; m < measurements[k]; m++)
            for (int client = 0; client < 2; client++) {
                double t = hpcc_measurement(me, client, sizes[k], loops[k], snd, rcv);
                if (t < best)
                    best = t;
            }
        if (me == 0)
            printf("%ld %.6f %.6f\n", sizes[k], best * 1e6, best * 1e6);
    }
    free(snd);
    free(rcv);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (ranks != 2 || argc < 2 || (argc < 3 && strcmp(argv[1], "hpcc") != 0)) {
        if (me == 0)
            fprintf(stderr, "usage: mpirun -np 2 %s REPS SIZE...\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (strcmp(argv[1], "hpcc") == 0) {
        hpcc_counting(me);
        MPI_Finalize();
        return 0;
    }
    int reps = atoi(argv[1]);
    int peer = 1 - me;
    double *times = malloc(sizeof(double) * (reps + 1));
    for (int a = 2; a < argc; a++) {
        long size = atol(argv[a]);
        unsigned char *buf = malloc(size);
        memset(buf, 1, size);
        int most = ping_iterations(size);
        for (int b = 0; b <= reps; b++) {
            if (me == 1) {
                int last;
                do {
                    MPI_Recv(buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    last = buf[0] == 0;
                    MPI_Send(buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
                } while (!last);
                continue;
            }
            double t0 = MPI_Wtime();
            int count = 0, last;
            do {
                last = count + 1 >= most || MPI_Wtime() - t0 >= BATCH_SECONDS;
                buf[0] = !last;
                MPI_Send(buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD);
                MPI_Recv(buf, size, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                count++;
            } while (!last);
            times[b] = (MPI_Wtime() - t0) / count / 2;
        }
        if (me == 0) {
            /* The first batch warms the path up and is not kept. */
            qsort(times + 1, reps, sizeof(double), by_value);
            double median = reps % 2 ? times[1 + reps / 2]
                                     : (times[reps / 2] + times[1 + reps / 2]) / 2;
            printf("%ld %.6f %.6f\n", size, times[1] * 1e6, median * 1e6);
        }
        free(buf);
    }
    free(times);
    MPI_Finalize();
    return 0;
}
