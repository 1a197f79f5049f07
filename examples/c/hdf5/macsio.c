/* MACSio's HDF5 interface, in miniature: each dump writes every rank's mesh parts, each part a set of
 * variables of doubles, to HDF5 files in one of MACSio's two parallel file modes, then reads them back.
 *
 *     h5pcc -o macsio examples/c/hdf5/macsio.c        (Debian's libhdf5-mpich-dev)
 *     callid run -n 4 ./macsio --parallel_file_mode SIF --dir /pvfs2
 *     callid run -n 4 ./macsio --parallel_file_mode MIF 2 --dir /pvfs2
 *
 * SIF: one file per dump, opened by all ranks with HDF5's MPI-IO driver; one dataset per variable holds
 *   every part, each rank's parts one hyperslab of it, written collectively (MPI_File_write_at_all).
 * MIF N: N files per dump; the ranks of a group (rank * N / ranks) take turns, as MACSio passes its
 *   baton, each opening its group's file with HDF5's default (POSIX) driver and writing its parts as
 *   groups domain_PART of one dataset per variable.
 * Parts are dealt in rank order, K or K + 1 to each rank (avg_num_parts x ranks in all); a part has
 * part_size bytes split among the variables. Options (MACSio's names): --parallel_file_mode SIF | MIF N
 * (default MIF 1), --part_size BYTES (80000), --avg_num_parts F (1), --num_dumps D (2), --vars V (4),
 * --filebase NAME (macsio), --dir DIR (.). Rank 0 prints the data check; the exit status is 1 if any rank
 * read back other values (or an HDF5 call failed), 2 on a bad option. */
#include <getopt.h>
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, nranks, mif = 1, nfiles = 1, dumps = 2, nvars = 4;
static long part_size = 80000, total;
static double avg_parts = 1.0;
static const char *base = "macsio", *dir = ".";

static long first_part(int r) { return total * r / nranks; }

/* element k of variable v of part p in dump d: distinct everywhere, exact as a double */
static double value(int d, long p, int v, long k, long n) { return (double)(((d * total + p) * nvars + v) * n + k); }

static void fill(double *buf, int d, long p, int v, long n) {
    for (long k = 0; k < n; k++) buf[k] = value(d, p, v, k, n);
}

static int same(const double *buf, int d, long p, int v, long n) {
    for (long k = 0; k < n; k++)
        if (buf[k] != value(d, p, v, k, n)) return 0;
    return 1;
}

/* SIF: dataset var%02d of total * n doubles; this rank's parts are [first, first + mine) */
static int sif_dump(int d, long n, int write) {
    char path[4096], name[16];
    snprintf(path, sizeof path, "%s/%s_hdf5_%03d.h5", dir, base, d);
    long first = first_part(rank), mine = first_part(rank + 1) - first;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), dxpl = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL);
    H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);
    hid_t f = write ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl) : H5Fopen(path, H5F_ACC_RDONLY, fapl);
    int ok = f >= 0;
    hsize_t dims = (hsize_t)(total * n), start = (hsize_t)(first * n), count = (hsize_t)(mine * n);
    double *buf = malloc(sizeof(double) * (size_t)(count ? count : 1));
    for (int v = 0; v < nvars && ok; v++) {
        snprintf(name, sizeof name, "var%02d", v);
        hid_t space = H5Screate_simple(1, &dims, NULL), mem = H5Screate_simple(1, &count, NULL);
        hid_t dset = write ? H5Dcreate2(f, name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)
                           : H5Dopen2(f, name, H5P_DEFAULT);
        if (count) H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, NULL, &count, NULL);
        else { H5Sselect_none(space); H5Sselect_none(mem); }
        for (long p = 0; write && p < mine; p++) fill(buf + p * n, d, first + p, v, n);
        ok = dset >= 0 && (write ? H5Dwrite(dset, H5T_NATIVE_DOUBLE, mem, space, dxpl, buf)
                                 : H5Dread(dset, H5T_NATIVE_DOUBLE, mem, space, dxpl, buf)) >= 0;
        for (long p = 0; ok && !write && p < mine; p++) ok = same(buf + p * n, d, first + p, v, n);
        if (dset >= 0) H5Dclose(dset);
        H5Sclose(mem);
        H5Sclose(space);
    }
    if (f >= 0 && H5Fclose(f) < 0) ok = 0;
    free(buf);
    H5Pclose(dxpl);
    H5Pclose(fapl);
    return ok;
}

/* MIF: this rank's parts into its group's file, after the rank before it in the group (the baton) */
static int mif_dump(int d, long n, int write) {
    int group = rank * nfiles / nranks, lo = 0, hi = nranks, token = 0;
    while (lo < nranks && lo * nfiles / nranks != group) lo++;
    while (hi > 0 && (hi - 1) * nfiles / nranks != group) hi--;
    char path[4096], name[64];
    snprintf(path, sizeof path, "%s/%s_hdf5_%03d_%03d.h5", dir, base, d, group);
    if (write && rank > lo) MPI_Recv(&token, 1, MPI_INT, rank - 1, d, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    hid_t f = !write ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)
              : rank == lo ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)
                           : H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    int ok = f >= 0;
    hsize_t count = (hsize_t)n;
    double *buf = malloc(sizeof(double) * (size_t)n);
    for (long p = first_part(rank); ok && p < first_part(rank + 1); p++) {
        snprintf(name, sizeof name, "domain_%05ld", p);
        hid_t g = write ? H5Gcreate2(f, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : H5Gopen2(f, name, H5P_DEFAULT);
        for (int v = 0; ok && v < nvars; v++) {
            char var[16];
            snprintf(var, sizeof var, "var%02d", v);
            hid_t space = H5Screate_simple(1, &count, NULL);
            hid_t dset = g < 0 ? -1 : write ? H5Dcreate2(g, var, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT,
                                                         H5P_DEFAULT)
                                            : H5Dopen2(g, var, H5P_DEFAULT);
            if (write) fill(buf, d, p, v, n);
            ok = dset >= 0 && (write ? H5Dwrite(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf)
                                     : H5Dread(dset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf)) >= 0;
            if (ok && !write) ok = same(buf, d, p, v, n);
            if (dset >= 0) H5Dclose(dset);
            H5Sclose(space);
        }
        if (g >= 0) H5Gclose(g);
        else ok = 0;
    }
    if (f >= 0 && H5Fclose(f) < 0) ok = 0;
    free(buf);
    if (write && rank + 1 < hi) MPI_Send(&token, 1, MPI_INT, rank + 1, d, MPI_COMM_WORLD);
    return ok;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    static struct option opts[] = {{"parallel_file_mode", required_argument, 0, 'm'},
                                   {"part_size", required_argument, 0, 's'}, {"avg_num_parts", required_argument, 0, 'a'},
                                   {"num_dumps", required_argument, 0, 'd'}, {"vars", required_argument, 0, 'v'},
                                   {"filebase", required_argument, 0, 'b'}, {"dir", required_argument, 0, 'o'},
                                   {0, 0, 0, 0}};
    int opt, bad = 0;
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (opt == 'm') {
            mif = strcmp(optarg, "SIF") != 0;
            if (mif && (strcmp(optarg, "MIF") != 0 || optind >= argc || (nfiles = atoi(argv[optind++])) < 1)) bad = 1;
        } else if (opt == 's') part_size = atol(optarg);
        else if (opt == 'a') avg_parts = atof(optarg);
        else if (opt == 'd') dumps = atoi(optarg);
        else if (opt == 'v') nvars = atoi(optarg);
        else if (opt == 'b') base = optarg;
        else if (opt == 'o') dir = optarg;
        else bad = 1;
    }
    total = (long)(avg_parts * nranks + 0.5);
    long n = nvars > 0 ? part_size / 8 / nvars : 0;  /* doubles per variable of a part */
    if (bad || optind < argc || n < 1 || total < 1 || dumps < 1 || nfiles > nranks) {
        if (rank == 0)
            fprintf(stderr, "usage: %s [--parallel_file_mode SIF | MIF N] [--part_size BYTES] [--avg_num_parts F] "
                            "[--num_dumps D] [--vars V] [--filebase NAME] [--dir DIR] (N at most the ranks)\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    int ok = 1;
    for (int d = 0; d < dumps; d++) ok &= mif ? mif_dump(d, n, 1) : sif_dump(d, n, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int d = 0; d < dumps; d++) ok &= mif ? mif_dump(d, n, 0) : sif_dump(d, n, 0);
    int all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# macsio (hdf5): %s %d, %d dumps of %ld parts of %ld bytes (%d variables) on %d ranks\n",
               mif ? "MIF" : "SIF", mif ? nfiles : 1, dumps, total, n * 8 * nvars, nvars, nranks);
        printf("# data check: %s\n", all_ok ? "passed" : "FAILED");
    }
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
