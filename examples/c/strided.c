/* Independent strided access through a vector file view: ROMIO's data sieving.
 *
 *     mpicc -o strided examples/c/strided.c
 *     callid run -n 4 ./strided [-f FILE] [-b BYTES] [-k BLOCKS] [-H KEY=VALUE]...
 *
 * Rank r owns blocks r, r + nranks, r + 2 nranks, ... (-k blocks of -b bytes, default 16 of 4096): it
 * writes them with one independent MPI_File_write through a vector view, then reads them back with one
 * MPI_File_read, and checks them.  ROMIO's data sieving reads the extent the blocks span (the other ranks'
 * blocks are its holes), modifies it in memory and writes it back whole, under a file lock.  Ranks write
 * one after the other (a barrier each), so the read-modify-write of one never undoes another's.  -H: a
 * hint for MPI_File_open (e.g. -H romio_ds_write=disable).  Exits 1 if a check fails. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n, opt, k = 16;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const char *file = "/pvfs2/strided";
    long b = 4096;
    MPI_Info info;
    MPI_Info_create(&info);
    while ((opt = getopt(argc, argv, "f:b:k:H:")) != -1) {
        if (opt == 'f') file = optarg;
        else if (opt == 'b') b = atol(optarg);
        else if (opt == 'k') k = atoi(optarg);
        else if (opt == 'H' && strchr(optarg, '=')) {
            char *eq = strchr(optarg, '=');
            *eq = 0;
            MPI_Info_set(info, optarg, eq + 1);
        } else {
            if (rank == 0) fprintf(stderr, "usage: %s [-f FILE] [-b BYTES] [-k BLOCKS] [-H KEY=VALUE]...\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    char *mine = malloc(b * k), *back = malloc(b * k);
    for (long i = 0; i < b * k; i++) mine[i] = (char)((rank * 13 + i) % 251);
    MPI_Datatype blocks;
    MPI_Type_vector(k, (int)b, (int)(b * n), MPI_BYTE, &blocks);
    MPI_Type_commit(&blocks);
    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_RDWR | MPI_MODE_CREATE, info, &fh);
    MPI_File_set_view(fh, rank * b, MPI_BYTE, blocks, "native", MPI_INFO_NULL);
    for (int turn = 0; turn < n; turn++) {
        if (turn == rank) MPI_File_write(fh, mine, (int)(b * k), MPI_BYTE, MPI_STATUS_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_File_seek(fh, 0, MPI_SEEK_SET);
    MPI_File_read(fh, back, (int)(b * k), MPI_BYTE, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    int ok = memcmp(mine, back, b * k) == 0, all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) printf("# strided: %d ranks, %d blocks of %ld bytes each; data check: %s\n", n, k, b,
                          all_ok ? "passed" : "FAILED");
    MPI_Type_free(&blocks);
    MPI_Info_free(&info);
    free(mine);
    free(back);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
