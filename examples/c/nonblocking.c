/* Non-blocking, split-collective and shared-file-pointer MPI-IO on one file, each rank its own blocks.
 *
 *     mpicc -o nonblocking examples/c/nonblocking.c
 *     callid run -n 4 ./nonblocking [-f FILE] [-b BYTES]
 *
 * With nranks ranks and blocks of -b bytes (default 65536), the file holds 4 * nranks blocks:
 *   0 .. n-1:    rank r's block r, by MPI_File_iwrite_at, completed with MPI_Wait;
 *   n .. 2n-1:   rank r's block n + r, by MPI_File_write_at_all_begin / _end (split collective);
 *   2n .. 3n-1:  one block per rank, by MPI_File_write_ordered (rank order, shared file pointer);
 *   3n .. 4n-1:  one block per rank, by MPI_File_write_shared (in the order the ranks get there).
 * Then each rank reads its first two blocks back with MPI_File_iread_at (two requests, MPI_Waitall) and
 * its ordered block with MPI_File_read_ordered, and checks them.  Exits 1 if a check fails. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void fill(char *buf, long n, int tag) {
    for (long i = 0; i < n; i++) buf[i] = (char)((tag * 17 + i) % 253);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n, opt;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const char *file = "/pvfs2/nonblocking";
    long b = 65536;
    while ((opt = getopt(argc, argv, "f:b:")) != -1) {
        if (opt == 'f') file = optarg;
        else if (opt == 'b') b = atol(optarg);
        else {
            if (rank == 0) fprintf(stderr, "usage: %s [-f FILE] [-b BYTES]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    char *blk[4], *back = malloc(b);
    for (int k = 0; k < 4; k++) { blk[k] = malloc(b); fill(blk[k], b, 4 * rank + k); }
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    MPI_File_set_size(fh, 0);

    MPI_Request req;
    MPI_File_iwrite_at(fh, (MPI_Offset)rank * b, blk[0], (int)b, MPI_BYTE, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_File_write_at_all_begin(fh, (MPI_Offset)(n + rank) * b, blk[1], (int)b, MPI_BYTE);
    MPI_File_write_at_all_end(fh, blk[1], MPI_STATUS_IGNORE);
    MPI_File_seek_shared(fh, 2 * n * b, MPI_SEEK_SET);
    MPI_File_write_ordered(fh, blk[2], (int)b, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_write_shared(fh, blk[3], (int)b, MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);

    int ok = 1;
    char *two = malloc(2 * b);
    MPI_Request reqs[2];
    MPI_File_iread_at(fh, (MPI_Offset)rank * b, two, (int)b, MPI_BYTE, &reqs[0]);
    MPI_File_iread_at(fh, (MPI_Offset)(n + rank) * b, two + b, (int)b, MPI_BYTE, &reqs[1]);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    ok &= memcmp(two, blk[0], b) == 0 && memcmp(two + b, blk[1], b) == 0;
    MPI_File_seek_shared(fh, 2 * n * b, MPI_SEEK_SET);
    MPI_File_read_ordered(fh, back, (int)b, MPI_BYTE, MPI_STATUS_IGNORE);
    ok &= memcmp(back, blk[2], b) == 0;
    MPI_File_close(&fh);
    int all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) printf("# nonblocking: %d ranks, %ld-byte blocks; data check: %s\n", n, b,
                          all_ok ? "passed" : "FAILED");
    for (int k = 0; k < 4; k++) free(blk[k]);
    free(back);
    free(two);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
