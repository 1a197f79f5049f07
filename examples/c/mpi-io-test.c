/* PVFS2's mpi-io-test pattern in C: every rank writes, then reads back, interleaved blocks.
 *
 *     mpicc -o mpi-io-test examples/c/mpi-io-test.c
 *     callid run -n 4 ./mpi-io-test -b 1048576 -i 8 -f /pvfs2/mpi-io-test
 *
 * In iteration i rank r accesses the block at offset (i * nranks + r) * block, with MPI_File_write_at
 * and MPI_File_read_at (-c: the collective MPI_File_write_at_all and MPI_File_read_at_all).  Rank 0
 * prints the slowest rank's times and the data check; the exit status is 1 if the data read differs. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long block = 1 << 20;
    int iterations = 4, collective = 0, opt;
    const char *file = "/pvfs2/mpi-io-test";
    while ((opt = getopt(argc, argv, "b:i:f:c")) != -1) {
        if (opt == 'b') block = atol(optarg);
        else if (opt == 'i') iterations = atoi(optarg);
        else if (opt == 'f') file = optarg;
        else if (opt == 'c') collective = 1;
        else {
            if (rank == 0) fprintf(stderr, "usage: %s [-b BLOCK] [-i ITERATIONS] [-f FILE] [-c]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    char *data = malloc(block), *back = malloc(block);
    for (long i = 0; i < block; i++) data[i] = (char)((rank * 7 + i) % 256);

    MPI_File fh;
    int err = MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    if (err != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        MPI_Error_string(err, msg, &len);
        fprintf(stderr, "rank %d: cannot open %s: %s\n", rank, file, msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iterations; i++) {
        MPI_Offset off = ((MPI_Offset)i * nranks + rank) * block;
        if (collective) MPI_File_write_at_all(fh, off, data, (int)block, MPI_BYTE, MPI_STATUS_IGNORE);
        else MPI_File_write_at(fh, off, data, (int)block, MPI_BYTE, MPI_STATUS_IGNORE);
    }
    MPI_File_sync(fh);
    double mine = MPI_Wtime() - t0, write_s, read_s;
    MPI_Allreduce(&mine, &write_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    int ok = 1;
    for (int i = 0; i < iterations; i++) {
        MPI_Offset off = ((MPI_Offset)i * nranks + rank) * block;
        memset(back, 0, block);
        if (collective) MPI_File_read_at_all(fh, off, back, (int)block, MPI_BYTE, MPI_STATUS_IGNORE);
        else MPI_File_read_at(fh, off, back, (int)block, MPI_BYTE, MPI_STATUS_IGNORE);
        ok &= memcmp(back, data, block) == 0;
    }
    mine = MPI_Wtime() - t0;
    MPI_Allreduce(&mine, &read_s, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_File_close(&fh);
    int all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) {
        double mib = (double)block * iterations * nranks / (1 << 20);
        printf("# mpi-io-test: %d ranks, %d x %ld bytes each%s\n", nranks, iterations, block,
               collective ? " (collective)" : "");
        printf("# write: %.4f s, %.2f MiB/s\n", write_s, write_s > 0 ? mib / write_s : 0.0);
        printf("# read:  %.4f s, %.2f MiB/s\n", read_s, read_s > 0 ? mib / read_s : 0.0);
        printf("# data check: %s\n", all_ok ? "passed" : "FAILED");
    }
    free(data);
    free(back);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
