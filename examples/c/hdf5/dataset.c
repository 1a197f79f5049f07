/* Parallel HDF5: a 2-D dataset of doubles, ROWS x COLS per rank, each rank's block of rows written with
 * a hyperslab selection and a collective transfer (MPI-IO underneath: MPI_File_write_at_all through a
 * file view, plus HDF5's metadata writes), then the file closed, reopened and read back the same way.
 *
 *     h5pcc -o dataset examples/c/hdf5/dataset.c        (Debian's libhdf5-mpich-dev)
 *     callid run -n 4 ./dataset -f /pvfs2/dataset.h5
 *
 * (callid run runs a program built against Debian's MPICH on the mpich wheel's MPI, the same MPICH ABI:
 * see docs/c-programs.md.)
 *
 * -f FILE (default /pvfs2/dataset.h5); -n ROWS rows per rank (default 64); -c COLS columns (default 256).
 * Element (i, j) holds i * COLS + j; rank 0 prints the data check, and the exit status is 1 if any
 * rank read back other values (or an HDF5 call failed). */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define DATASET "data"

/* the dataset's 2-D hyperslab of this rank: rows [rank * rows, (rank + 1) * rows), all columns */
static hid_t block(hid_t dset, int rank, hsize_t rows, hsize_t cols) {
    hid_t space = H5Dget_space(dset);
    hsize_t start[2] = {(hsize_t)rank * rows, 0}, count[2] = {rows, cols};
    if (space < 0 || H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL) < 0) return -1;
    return space;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks, opt;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *file = "/pvfs2/dataset.h5";
    long rows = 64, cols = 256;
    while ((opt = getopt(argc, argv, "f:n:c:")) != -1) {
        if (opt == 'f') file = optarg;
        else if (opt == 'n') rows = atol(optarg);
        else if (opt == 'c') cols = atol(optarg);
        else rows = -1;
    }
    if (rows <= 0 || cols <= 0) {
        if (rank == 0) fprintf(stderr, "usage: %s [-f FILE] [-n ROWS-PER-RANK] [-c COLS]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    size_t count = (size_t)rows * cols;
    double *mine = malloc(sizeof(double) * count), *back = malloc(sizeof(double) * count);
    for (size_t k = 0; k < count; k++) {
        mine[k] = (double)((size_t)rank * count + k); /* = i * cols + j of the whole dataset */
        back[k] = -1.0;
    }
    hsize_t dims[2] = {(hsize_t)rows * nranks, (hsize_t)cols}, mdims[2] = {(hsize_t)rows, (hsize_t)cols};
    int ok = 1;

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    hid_t mem = H5Screate_simple(2, mdims, NULL);

    /* write */
    hid_t f = H5Fcreate(file, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (f < 0) ok = 0;
    else {
        hid_t fspace = H5Screate_simple(2, dims, NULL);
        hid_t dset = H5Dcreate2(f, DATASET, H5T_NATIVE_DOUBLE, fspace, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hid_t sel = dset < 0 ? -1 : block(dset, rank, rows, cols);
        if (sel < 0 || H5Dwrite(dset, H5T_NATIVE_DOUBLE, mem, sel, dxpl, mine) < 0) ok = 0;
        if (sel >= 0) H5Sclose(sel);
        if (dset >= 0) H5Dclose(dset);
        H5Sclose(fspace);
        if (H5Fclose(f) < 0) ok = 0;
    }

    /* reopen and read back */
    f = H5Fopen(file, H5F_ACC_RDONLY, fapl);
    if (f < 0) ok = 0;
    else {
        hid_t dset = H5Dopen2(f, DATASET, H5P_DEFAULT);
        hid_t sel = dset < 0 ? -1 : block(dset, rank, rows, cols);
        if (sel < 0 || H5Dread(dset, H5T_NATIVE_DOUBLE, mem, sel, dxpl, back) < 0) ok = 0;
        if (sel >= 0) H5Sclose(sel);
        if (dset >= 0) H5Dclose(dset);
        if (H5Fclose(f) < 0) ok = 0;
    }
    for (size_t k = 0; ok && k < count; k++)
        if (back[k] != mine[k]) ok = 0;

    int all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# dataset: %s:/%s, %ld x %ld doubles, %ld rows per rank on %d ranks\n", file, DATASET,
               rows * nranks, cols, rows, nranks);
        printf("# data check: %s\n", all_ok ? "passed" : "FAILED");
    }
    H5Sclose(mem);
    H5Pclose(dxpl);
    H5Pclose(fapl);
    free(mine);
    free(back);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
