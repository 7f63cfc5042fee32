/*
 * Monte-Carlo estimate of pi over MPI: every rank throws its share of darts at
 * the unit square and counts the hits inside the quarter circle; rank 0 sums
 * the counts with MPI_Reduce. The output names every rank and its host so a
 * test can see that ranks really ran in several containers.
 *
 * usage: pi [total-samples]   (default 20000000)
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64: small, fast, and good enough for a Monte-Carlo demo; seeded per
 * rank so ranks draw independent streams and runs are reproducible. */
static uint64_t next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double unit(uint64_t *state) { return (next(state) >> 11) * (1.0 / 9007199254740992.0); }

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    long long total = 20000000LL;
    if (argc > 1) {
        char *end = NULL;
        total = strtoll(argv[1], &end, 10);
        if (end == argv[1] || *end != '\0' || total <= 0) {
            if (rank == 0) fprintf(stderr, "pi: samples must be a positive integer, got '%s'\n", argv[1]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    long long mine = total / size + (rank < total % size ? 1 : 0);

    char host[MPI_MAX_PROCESSOR_NAME];
    int host_len = 0;
    MPI_Get_processor_name(host, &host_len);

    double start = MPI_Wtime();
    uint64_t state = 0x5DEECE66DULL + (uint64_t)rank * 0x100000001B3ULL;
    long long hits = 0;
    for (long long i = 0; i < mine; i++) {
        double x = unit(&state), y = unit(&state);
        if (x * x + y * y <= 1.0) hits++;
    }
    double elapsed = MPI_Wtime() - start;

    char *hosts = NULL;
    if (rank == 0) hosts = calloc((size_t)size, MPI_MAX_PROCESSOR_NAME);
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
               MPI_COMM_WORLD);
    long long all_hits = 0;
    MPI_Reduce(&hits, &all_hits, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    double slowest = 0;
    MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        for (int r = 0; r < size; r++) printf("rank %d on %s\n", r, hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
        double pi = 4.0 * (double)all_hits / (double)total;
        printf("ranks: %d\n", size);
        printf("samples: %lld\n", total);
        printf("pi: %.6f\n", pi);
        printf("error: %.6f\n", fabs(pi - M_PI));
        printf("seconds: %.3f\n", slowest);
        free(hosts);
    }
    MPI_Finalize();
    return 0;
}
