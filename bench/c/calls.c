/* The cost per call of callid's interposition library (python -m bench overhead): on a file of its
 * own, N calls each of MPI_File_get_position, MPI_File_write_at of 0 bytes and MPI_File_write_at of
 * 8 bytes (at offset 0), after N / 100 untimed calls of each; the N calls are timed inside the
 * program in SLICES slices, and it prints one JSON line of nanoseconds per call: the median slice's
 * (what the benchmark takes: a slice another process slowed does not count) and the mean.  The
 * benchmark runs it under mpiexec -n 1 with the library preloaded (and CALLID_ROMIO_DIR set, or not)
 * and plainly.
 *
 *     mpicc -O2 -o calls bench/c/calls.c && mpiexec -n 1 ./calls -n 1000000 -f /tmp/calls.dat
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, int err) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, msg, &len);
    fprintf(stderr, "calls: %s: %s\n", what, msg);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

#define SLICES 10

/* seconds of n calls of kind k (0: get_position, 1: write_at 0 bytes, 2: write_at 8 bytes) */
static double loop(MPI_File fh, int k, long n) {
    MPI_Offset pos;
    char data[8] = "callid!";
    int err = MPI_SUCCESS;
    double t0 = now();
    for (long i = 0; i < n && err == MPI_SUCCESS; i++) {
        if (k == 0) err = MPI_File_get_position(fh, &pos);
        else err = MPI_File_write_at(fh, 0, data, k == 1 ? 0 : 8, MPI_BYTE, MPI_STATUS_IGNORE);
    }
    double t = now() - t0;
    if (err != MPI_SUCCESS) fail(k == 0 ? "MPI_File_get_position" : "MPI_File_write_at", err);
    return t;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ns per call of kind k over n calls in SLICES slices: the median slice's, and the mean */
static void timed(MPI_File fh, int k, long n, double *median, double *mean) {
    double ns[SLICES], total = 0;
    for (int s = 0; s < SLICES; s++) {
        long calls = n / SLICES + (s < n % SLICES);
        double t = loop(fh, k, calls);
        total += t;
        ns[s] = calls ? t / (double)calls * 1e9 : 0;
    }
    qsort(ns, SLICES, sizeof *ns, by_value);
    *median = (ns[SLICES / 2 - 1] + ns[SLICES / 2]) / 2;
    *mean = n ? total / (double)n * 1e9 : 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    long n = 1000000;
    const char *file = "calls.dat";
    int opt;
    while ((opt = getopt(argc, argv, "n:f:")) != -1) {
        if (opt == 'n') n = atol(optarg);
        else if (opt == 'f') file = optarg;
        else {
            fprintf(stderr, "usage: %s [-n CALLS] [-f FILE]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    MPI_File fh;
    int err = MPI_File_open(MPI_COMM_SELF, file, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    if (err != MPI_SUCCESS) fail(file, err);
    double median[3], mean[3];
    for (int k = 0; k < 3; k++) {
        loop(fh, k, n / 100);
        timed(fh, k, n, &median[k], &mean[k]);
    }
    MPI_File_close(&fh);
    printf("{\"calls\": %ld, \"slices\": %d", n, SLICES);
    static const char *kinds[3] = {"get_position", "write_at_0", "write_at_8"};
    for (int k = 0; k < 3; k++)
        printf(", \"%s_ns\": %.2f, \"%s_mean_ns\": %.2f", kinds[k], median[k], kinds[k], mean[k]);
    printf("}\n");
    MPI_Finalize();
    return 0;
}
