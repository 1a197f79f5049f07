/* The thesis demo in C: each rank writes its segment, all synchronise, each reads the next rank's.
 *
 *     mpicc -o callid_demo examples/c/callid_demo.c
 *     callid run -n 2 --servers 2 --strip-size 64KiB --flow-buffer 64KiB ./callid_demo [-f FILE] [-s BYTES]
 *
 * Every rank writes -s bytes (default 1 MiB; a pattern derived from its rank) to its own segment of one
 * file (default /pvfs2/demo) with MPI_File_seek and MPI_File_write, then reads the segment of rank + 1
 * (rotating) and checks it.  Short pauses between the phases spread the events on a timeline, as in the
 * original program.  Exits 1 if the read-back check fails. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void pattern(char *buf, int rank, long size) {
    for (long i = 0; i < size; i++) buf[i] = (char)((rank * 31 + i % 251) % 251);
}

static void pause_ms(double ms) {
    struct timespec ts = {0, (long)(ms * 1e6)};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, nranks, opt, len;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const char *file = "/pvfs2/demo";
    long size = 1 << 20;
    while ((opt = getopt(argc, argv, "f:s:")) != -1) {
        if (opt == 'f') file = optarg;
        else if (opt == 's') size = atol(optarg);
        else {
            if (rank == 0) fprintf(stderr, "usage: %s [-f FILE] [-s BYTES]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    char host[MPI_MAX_PROCESSOR_NAME];
    MPI_Get_processor_name(host, &len);
    printf("Process %d of %d is on %s\n", rank, nranks, host);
    fflush(stdout);
    double pause = 10.0 * rank;
    /* page-aligned buffers: the mount passes up to 1 MiB of aligned pages on in one request */
    char *mine, *back, *expected = malloc(size);
    if (posix_memalign((void **)&mine, 4096, size) || posix_memalign((void **)&back, 4096, size)) return 1;
    pattern(mine, rank, size);

    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_WRONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    MPI_File_seek(fh, rank * size, MPI_SEEK_SET);
    MPI_Barrier(MPI_COMM_WORLD);
    pause_ms(pause);  /* keep the ranks' server events apart, as the thesis did */
    MPI_File_write(fh, mine, (int)size, MPI_CHAR, MPI_STATUS_IGNORE);
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    pause_ms(2);

    int next = (rank + 1) % nranks, count = 0;
    MPI_Status status;
    MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    MPI_File_seek(fh, next * size, MPI_SEEK_SET);
    MPI_Barrier(MPI_COMM_WORLD);
    pause_ms(pause);
    MPI_File_read(fh, back, (int)size, MPI_CHAR, &status);
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);

    pattern(expected, next, size);
    MPI_Get_count(&status, MPI_CHAR, &count);
    int ok = count == size && memcmp(back, expected, size) == 0, all_ok;
    printf("rank %d: read-back of rank %d's segment %s\n", rank, next, ok ? "OK" : "FAILED");
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    free(mine);
    free(back);
    free(expected);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
