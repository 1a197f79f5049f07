/* A 2-D array of doubles, decomposed in blocks over a grid of ranks (2 x 2 on 4 ranks), written and read
 * back collectively through a subarray file view: the interleaved access ROMIO's two-phase collective
 * buffering is for.
 *
 *     mpicc -o subarray examples/c/subarray.c
 *     callid run -n 4 ./subarray -n 512 -f /pvfs2/subarray
 *
 * -n N: the array is N x N (N a multiple of the grid's sides); -f FILE; -H KEY=VALUE (repeatable): a
 * hint passed to MPI_File_open (e.g. -H cb_nodes=2).  Element (i, j) holds i * N + j; rank 0 prints the
 * data check, and the exit status is 1 if any rank read back other values. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks, opt, n = 256;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *file = "/pvfs2/subarray";
    MPI_Info info;
    MPI_Info_create(&info);
    while ((opt = getopt(argc, argv, "n:f:H:")) != -1) {
        if (opt == 'n') n = atoi(optarg);
        else if (opt == 'f') file = optarg;
        else if (opt == 'H' && strchr(optarg, '=')) {
            char *eq = strchr(optarg, '=');
            *eq = 0;
            MPI_Info_set(info, optarg, eq + 1);
        } else {
            if (rank == 0) fprintf(stderr, "usage: %s [-n N] [-f FILE] [-H KEY=VALUE]...\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    int dims[2] = {0, 0}, periods[2] = {0, 0}, coords[2];
    MPI_Dims_create(nranks, 2, dims);
    if (n % dims[0] || n % dims[1]) {
        if (rank == 0) fprintf(stderr, "-n %d is not a multiple of the grid %d x %d\n", n, dims[0], dims[1]);
        MPI_Finalize();
        return 2;
    }
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    MPI_Cart_coords(grid, rank, 2, coords);
    int sizes[2] = {n, n}, sub[2] = {n / dims[0], n / dims[1]};
    int starts[2] = {coords[0] * sub[0], coords[1] * sub[1]};
    MPI_Datatype block;
    MPI_Type_create_subarray(2, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, &block);
    MPI_Type_commit(&block);

    int count = sub[0] * sub[1];
    double *mine = malloc(sizeof(double) * count), *back = malloc(sizeof(double) * count);
    for (int i = 0; i < sub[0]; i++)
        for (int j = 0; j < sub[1]; j++)
            mine[i * sub[1] + j] = (double)(starts[0] + i) * n + starts[1] + j;

    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_RDWR | MPI_MODE_CREATE, info, &fh);
    MPI_File_set_view(fh, 0, MPI_DOUBLE, block, "native", MPI_INFO_NULL);
    MPI_File_write_all(fh, mine, count, MPI_DOUBLE, MPI_STATUS_IGNORE);
    MPI_File_seek(fh, 0, MPI_SEEK_SET);
    MPI_File_read_all(fh, back, count, MPI_DOUBLE, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    int ok = memcmp(mine, back, sizeof(double) * count) == 0, all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# subarray: %d x %d doubles over a %d x %d grid of ranks\n", n, n, dims[0], dims[1]);
        printf("# data check: %s\n", all_ok ? "passed" : "FAILED");
    }
    MPI_Type_free(&block);
    MPI_Info_free(&info);
    MPI_Comm_free(&grid);
    free(mine);
    free(back);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
