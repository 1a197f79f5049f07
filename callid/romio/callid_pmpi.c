/* callid's interposition library (PMPI): preloaded into an unmodified MPI program, it stamps every
 * MPI_File_* call with a CallID, publishes the calling thread's current CallID for the FUSE client
 * (a table of slots both map), and logs one record per call (callid_records.h, generated from
 * callid/romio/records.py) into files mapped shared: what a killed rank wrote is in them.
 * Built with the MPI's own mpicc by callid.romio.build. */
#define _GNU_SOURCE
#include <mpi.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "callid_records.h"

/* The MPI library's definition of F, the next after this library's: this library defines the PMPI_
 * names of the functions it traces too (a binding that calls PMPI_File_* itself, as Fortran's mpi_f08
 * does, is traced), so it calls the library's through this. */
#define NEXT(F) ({ static __typeof__(&F) next_; if (!next_) next_ = (__typeof__(&F))dlsym(RTLD_NEXT, #F); next_; })
/* PMPI_name: the same wrapper as MPI_name */
#define ALSO_PMPI(NAME) extern __typeof__(MPI_##NAME) PMPI_##NAME __attribute__((alias("MPI_" #NAME)));

#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION >= 40100000
#define HAVE_TYPE_IOV 1
#endif

/* ---- files appended through a shared mapping ---------------------------------------------- */

#define WINDOW (4u << 20)

typedef struct {
    int fd;
    char *map;        /* the mapped window [at, at + len) of the file */
    size_t at, len;
    size_t used;      /* bytes of the file in use */
} mfile;

static int mf_open(mfile *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    return f->fd < 0 ? -1 : 0;
}

/* n bytes at the file's end, mapped (NULL: no space) */
static void *mf_take(mfile *f, size_t n, size_t align) {
    size_t start = (f->used + align - 1) / align * align;
    if (f->map == NULL || start + n > f->at + f->len) {
        if (f->map != NULL) munmap(f->map, f->len);
        f->map = NULL;
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        f->at = start / page * page;
        f->len = ((start + n - f->at) / WINDOW + 1) * WINDOW;
        struct stat st;
        if (fstat(f->fd, &st) != 0) return NULL;
        if ((size_t)st.st_size < f->at + f->len && ftruncate(f->fd, (off_t)(f->at + f->len)) != 0) return NULL;
        void *m = mmap(NULL, f->len, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, (off_t)f->at);
        if (m == MAP_FAILED) return NULL;
        f->map = m;
    }
    f->used = start + n;
    return f->map + (start - f->at);
}

static void mf_close(mfile *f) {
    if (f->fd < 0) return;
    if (f->map != NULL) munmap(f->map, f->len);
    f->map = NULL;
    if (ftruncate(f->fd, (off_t)f->used) != 0) { /* (the reader skips the zeros) */ }
    close(f->fd);
    f->fd = -1;
}

/* ---- state ----------------------------------------------------------------------------------- */

static struct {
    int ready;
    int rank;
    int stamp;
    int hints, mpi, nested;  /* the switches: hints, calls without I/O, nested calls logged */
    int counter_bits;
    uint64_t sentinel, max_counter, counter;
    int64_t rids, fids, opens;
    int64_t world_id;
    int world_size;
    pthread_mutex_t mu;
    mfile rec, dat;
    uint64_t nrec;
    struct callid_slot *slots;
    pthread_key_t slot_key;
    int threads;  /* the rank's threads numbered so far (0: the one that initialized MPI) */
    int64_t straggle_ns;  /* a planted fault: how late the rank comes to each of its MPI-IO calls */
} S = {.mu = PTHREAD_MUTEX_INITIALIZER, .rec = {.fd = -1}, .dat = {.fd = -1}};

static __thread int t_slot = -1;
static __thread int t_depth;  /* >0: inside a traced call (MPI calls it makes are not the program's) */
/* the MPI library runs this thread's traced call (its t_depth then; 0: it does not) and the call's CallID:
 * the MPI calls it makes at that depth are the call's nested calls (S.nested: logged, kind 'nested') */
static __thread int t_lib;
static __thread uint64_t t_lib_callid;
static __thread int t_thread = -1;  /* this thread's number (S.threads), from its first traced call */

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "callid: rank %d: %s\n", S.rank, what);
    PMPI_Abort(MPI_COMM_WORLD, 1);
}

static uint64_t next_callid(void) {
    if (!S.stamp) return S.sentinel;
    uint64_t c = __atomic_add_fetch(&S.counter, 1, __ATOMIC_RELAXED);
    if (c > S.max_counter) die("the call counter does not fit the CallID layout: choose one with more "
                               "counter bits (callid run --callid-layout)");
    return (uint64_t)S.rank << S.counter_bits | c;
}

static void release_slot(void *unused) {
    (void)unused;
    if (t_slot >= 0 && S.slots != NULL) {
        __atomic_store_n(&S.slots[t_slot].callid, S.sentinel, __ATOMIC_RELEASE);
        __atomic_store_n(&S.slots[t_slot].tid, 0, __ATOMIC_RELEASE);
    }
    t_slot = -1;
}

/* this thread's slot (claimed on first use; -1: none free, the FUSE client sees no call) */
static int my_slot(void) {
    if (t_slot >= 0 || S.slots == NULL) return t_slot;
    int32_t tid = (int32_t)syscall(SYS_gettid);
    for (int i = 0; i < CALLID_NSLOTS; i++) {
        int32_t free_tid = 0;
        if (__atomic_compare_exchange_n(&S.slots[i].tid, &free_tid, tid, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            S.slots[i].pid = (int32_t)getpid();
            S.slots[i].rank = S.rank;
            S.slots[i].callid = S.sentinel;
            t_slot = i;
            pthread_setspecific(S.slot_key, &t_slot);
            break;
        }
    }
    return t_slot;
}

/* the thread's current call (the FUSE client reads it while the thread waits for its own I/O) */
static void publish(uint64_t callid, int func, uint64_t record) {
    int s = my_slot();
    if (s < 0) return;
    S.slots[s].func = (uint16_t)func;
    S.slots[s].record = record;
    __atomic_store_n(&S.slots[s].callid, callid, __ATOMIC_RELEASE);
}

static int64_t fnv(const int *ranks, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        int64_t r = ranks[i];
        for (int b = 0; b < 8; b++) { h ^= (uint8_t)(r >> (8 * b)); h *= 1099511628211ull; }
    }
    return (int64_t)h;
}

/* the MPI_COMM_WORLD ranks of a group's members, in its order (malloc'd; size: how many) */
static int *group_ranks(MPI_Group g, int *size) {
    MPI_Group w;
    PMPI_Group_size(g, size);
    PMPI_Comm_group(MPI_COMM_WORLD, &w);
    int *in = malloc(sizeof(int) * (size_t)(*size ? *size : 1));
    int *out = malloc(sizeof(int) * (size_t)(*size ? *size : 1));
    for (int i = 0; i < *size; i++) in[i] = i;
    PMPI_Group_translate_ranks(g, *size, in, w, out);
    free(in);
    PMPI_Group_free(&w);
    return out;
}

/* a communicator's group id: a hash of its ranks in MPI_COMM_WORLD, the same on every rank of it */
static int64_t group_ident(MPI_Group g, int *size) {
    int *ranks = group_ranks(g, size);
    int64_t id = fnv(ranks, *size);
    free(ranks);
    return id;
}

/* a communicator's id is kept on it, as an attribute of this key (MPI deletes it with the communicator):
 * worked out once per communicator, not at every call on it */
static int ident_key = MPI_KEYVAL_INVALID;
static pthread_once_t ident_key_once = PTHREAD_ONCE_INIT;

static int forget_ident(MPI_Comm comm, int key, void *value, void *extra) {
    (void)comm; (void)key; (void)extra;
    free(value);
    return MPI_SUCCESS;
}

static void make_ident_key(void) {
    if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, forget_ident, &ident_key, NULL) != MPI_SUCCESS)
        ident_key = MPI_KEYVAL_INVALID;
}

static int64_t comm_ident(MPI_Comm comm, int *size) {
    PMPI_Comm_size(comm, size);
    if (comm == MPI_COMM_WORLD) return S.world_id;
    pthread_once(&ident_key_once, make_ident_key);
    int64_t *kept = NULL;
    int found = 0;
    if (ident_key != MPI_KEYVAL_INVALID && PMPI_Comm_get_attr(comm, ident_key, &kept, &found) == MPI_SUCCESS &&
        found)
        return *kept;
    MPI_Group g;
    PMPI_Comm_group(comm, &g);
    int64_t id = group_ident(g, size);
    PMPI_Group_free(&g);
    if (ident_key != MPI_KEYVAL_INVALID && (kept = malloc(sizeof *kept)) != NULL) {
        *kept = id;
        if (PMPI_Comm_set_attr(comm, ident_key, kept) != MPI_SUCCESS) free(kept);
    }
    return id;
}

static void start(void) {
    const char *dir = getenv(CALLID_ENV_DIR);
    if (dir == NULL || S.ready) return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &S.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &S.world_size);
    int *all = malloc(sizeof(int) * (size_t)S.world_size);
    for (int i = 0; i < S.world_size; i++) all[i] = i;
    S.world_id = fnv(all, S.world_size);
    free(all);
    int total = 64, rank_bits = 23;
    const char *layout = getenv(CALLID_ENV_LAYOUT);
    if (layout != NULL && sscanf(layout, "%d/%d", &total, &rank_bits) != 2) die("bad CallID layout");
    S.counter_bits = total - rank_bits;
    S.sentinel = total == 64 ? ~0ull : (1ull << total) - 1;
    S.max_counter = (1ull << S.counter_bits) - 2;
    const char *stamp = getenv(CALLID_ENV_STAMP);
    S.stamp = stamp == NULL || strcmp(stamp, "0") != 0;
    const char *hints = getenv(CALLID_ENV_HINTS), *mpi = getenv(CALLID_ENV_MPI);
    S.hints = hints == NULL || strcmp(hints, "0") != 0;
    S.mpi = mpi == NULL || strcmp(mpi, "0") != 0;
    const char *nested = getenv(CALLID_ENV_NESTED);
    S.nested = nested != NULL && strcmp(nested, "0") != 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/romio-rank%06d.rec", dir, S.rank);
    if (mf_open(&S.rec, path) != 0) die("cannot create its record file");
    snprintf(path, sizeof path, "%s/romio-rank%06d.dat", dir, S.rank);
    if (mf_open(&S.dat, path) != 0) die("cannot create its data file");
    const char *slots = getenv(CALLID_ENV_SLOTS);
    if (slots != NULL) {
        int fd = open(slots, O_RDWR | O_CLOEXEC);
        if (fd >= 0) {
            void *m = mmap(NULL, sizeof(struct callid_slot) * CALLID_NSLOTS, PROT_READ | PROT_WRITE,
                           MAP_SHARED, fd, 0);
            close(fd);
            if (m != MAP_FAILED) S.slots = m;
        }
        if (S.slots == NULL) die("cannot map the slot table of the file-system client");
    }
    pthread_key_create(&S.slot_key, release_slot);
    const char *late = getenv(CALLID_ENV_STRAGGLE);  /* "rank:ns,rank:ns..." */
    while (late != NULL && *late) {
        int r;
        long long ns;
        if (sscanf(late, "%d:%lld", &r, &ns) == 2 && r == S.rank) S.straggle_ns = ns;
        late = strchr(late, ',');
        if (late != NULL) late++;
    }
    t_thread = S.threads++;  /* (the thread initializing MPI: 0) */
    my_slot();  /* (from here the file-system client knows this process's rank: its POSIX calls outside
                 * MPI-IO, e.g. HDF5's POSIX driver's, are the rank's even before its first MPI-IO call) */
    S.ready = 1;
}

static void stop(void) {
    if (!S.ready) return;
    pthread_mutex_lock(&S.mu);
    S.ready = 0;
    release_slot(NULL);
    mf_close(&S.rec);
    mf_close(&S.dat);
    pthread_mutex_unlock(&S.mu);
}

/* ---- one call's record --------------------------------------------------------------------- */

typedef struct {
    struct callid_rec r;
    const char *str[S_COUNT];
    char *own[S_COUNT];        /* strings to free */
    int64_t *regions;          /* n_regions pairs (offset, length) */
    uint64_t index;            /* its record's index in the record file */
    int published;
} call_t;

static void set_str(call_t *c, int which, const char *s) { c->str[which] = s; }
static void own_str(call_t *c, int which, char *s) { c->own[which] = s; c->str[which] = s; }
static void set_int(call_t *c, int64_t *field, uint32_t bit, int64_t value) { *field = value; c->r.present |= bit; }
static void collective(call_t *c, int yes) {
    c->r.present |= P_COLLECTIVE;
    if (yes) c->r.flags |= FL_COLLECTIVE;
}

static void call_begin(call_t *c, int func, int kind) {
    if (kind == K_CALL && t_depth == 0 && S.straggle_ns > 0) {  /* (late: outside the call's time) */
        struct timespec late = {S.straggle_ns / 1000000000, S.straggle_ns % 1000000000};
        while (nanosleep(&late, &late) != 0 && errno == EINTR) {}
    }
    memset(c, 0, sizeof *c);
    c->r.magic = CALLID_MAGIC;
    c->r.kind = (uint8_t)kind;
    c->r.func = (uint16_t)func;
    c->r.rank = S.rank;
    c->r.callid = kind == K_CALL ? next_callid() : S.sentinel;
    c->r.n_regions = 0;
    if (t_thread < 0) t_thread = __atomic_fetch_add(&S.threads, 1, __ATOMIC_RELAXED);
    set_int(c, &c->r.thread, P_THREAD, t_thread);
    t_depth++;
    if (kind == K_CALL) publish(c->r.callid, func, ~0ull);  /* (what the call does before its record) */
    c->r.t_start = now_ns();
}

static uint64_t put_bytes(const void *p, size_t n, size_t align) {
    char *dst = mf_take(&S.dat, n, align);
    if (dst == NULL) return 0;
    memcpy(dst, p, n);
    return S.dat.used - n;
}

/* write the record (its file ranges and strings) and publish the call for the FUSE client */
static void call_publish(call_t *c) {
    pthread_mutex_lock(&S.mu);
    if (!S.ready) { pthread_mutex_unlock(&S.mu); return; }
    if (c->regions != NULL && c->r.n_regions != CALLID_UNKNOWN && c->r.n_regions > 0)
        c->r.regions_at = put_bytes(c->regions, 16 * (size_t)c->r.n_regions, 8);
    size_t total = 0;
    for (int i = 0; i < S_ERROR; i++) total += c->str[i] ? strlen(c->str[i]) : 0;
    char *dst = mf_take(&S.dat, total, 1);
    c->r.strings_at = dst ? S.dat.used - total : 0;
    for (int i = 0; i < S_COUNT; i++) {
        if (i == S_ERROR || c->str[i] == NULL) { (&c->r.len_file)[i] = CALLID_NULL_LEN; continue; }
        size_t n = strlen(c->str[i]);
        if (dst) { memcpy(dst, c->str[i], n); dst += n; }
        (&c->r.len_file)[i] = (uint32_t)n;
    }
    struct callid_rec *slot = mf_take(&S.rec, sizeof *slot, sizeof *slot);
    if (slot != NULL) {
        c->index = S.nrec++;
        uint32_t magic = c->r.magic;
        c->r.magic = 0;
        *slot = c->r;
        __atomic_store_n(&slot->magic, magic, __ATOMIC_RELEASE);
        c->r.magic = magic;
        c->published = 1;
    }
    pthread_mutex_unlock(&S.mu);
    if (c->r.kind == K_CALL) {
        publish(c->r.callid, c->r.func, c->index);
        t_lib = t_depth;  /* (published: what runs now until the call ends is the MPI library) */
        t_lib_callid = c->r.callid;
    }
}

/* the MPI standard's error classes by name: a failed call's error starts with its class's (as the
   Python tracer's does: callid.mpiio.errors.error_text) */
#define ERROR_CLASSES(X) X(MPI_ERR_BUFFER) X(MPI_ERR_COUNT) X(MPI_ERR_TYPE) X(MPI_ERR_TAG) X(MPI_ERR_COMM) \
    X(MPI_ERR_RANK) X(MPI_ERR_REQUEST) X(MPI_ERR_ROOT) X(MPI_ERR_GROUP) X(MPI_ERR_OP) X(MPI_ERR_TOPOLOGY) \
    X(MPI_ERR_DIMS) X(MPI_ERR_ARG) X(MPI_ERR_UNKNOWN) X(MPI_ERR_TRUNCATE) X(MPI_ERR_OTHER) X(MPI_ERR_INTERN) \
    X(MPI_ERR_IN_STATUS) X(MPI_ERR_PENDING) X(MPI_ERR_KEYVAL) X(MPI_ERR_NO_MEM) X(MPI_ERR_BASE) \
    X(MPI_ERR_INFO_KEY) X(MPI_ERR_INFO_VALUE) X(MPI_ERR_INFO_NOKEY) X(MPI_ERR_SPAWN) X(MPI_ERR_PORT) \
    X(MPI_ERR_SERVICE) X(MPI_ERR_NAME) X(MPI_ERR_WIN) X(MPI_ERR_SIZE) X(MPI_ERR_DISP) X(MPI_ERR_INFO) \
    X(MPI_ERR_LOCKTYPE) X(MPI_ERR_ASSERT) X(MPI_ERR_RMA_CONFLICT) X(MPI_ERR_RMA_SYNC) X(MPI_ERR_FILE) \
    X(MPI_ERR_NOT_SAME) X(MPI_ERR_AMODE) X(MPI_ERR_UNSUPPORTED_DATAREP) X(MPI_ERR_UNSUPPORTED_OPERATION) \
    X(MPI_ERR_NO_SUCH_FILE) X(MPI_ERR_FILE_EXISTS) X(MPI_ERR_BAD_FILE) X(MPI_ERR_ACCESS) X(MPI_ERR_NO_SPACE) \
    X(MPI_ERR_QUOTA) X(MPI_ERR_READ_ONLY) X(MPI_ERR_FILE_IN_USE) X(MPI_ERR_DUP_DATAREP) X(MPI_ERR_CONVERSION) \
    X(MPI_ERR_IO) X(MPI_ERR_RMA_RANGE) X(MPI_ERR_RMA_ATTACH) X(MPI_ERR_RMA_SHARED) X(MPI_ERR_RMA_FLAVOR)

static const char *error_class_name(int err) {
    int cls = MPI_ERR_UNKNOWN;
    PMPI_Error_class(err, &cls);
#define NAME_OF(E) if (cls == E) return #E;
    ERROR_CLASSES(NAME_OF)
#undef NAME_OF
    return "MPI_ERR_UNKNOWN";
}

/* the call returned (err: its return code): its end, error and bytes into its record */
static void phase_stop(void);

static void call_end(call_t *c, int err) {
    if (c->r.kind == K_CALL) phase_stop();
    if (c->r.kind != K_PHASE && c->r.kind != K_NESTED) c->r.t_end = now_ns();
    if (!c->published) call_publish(c);
    if (c->r.kind == K_CALL) {
        publish(S.sentinel, 0, ~0ull);
        t_lib = 0;
    }
    t_depth--;
    pthread_mutex_lock(&S.mu);
    if (S.ready && c->published) {
        if (err != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING + 64];
            int len = snprintf(msg, 64, "%s: ", error_class_name(err)), more = 0;
            PMPI_Error_string(err, msg + len, &more);
            len += more;
            while (len > 0 && (msg[len - 1] == ' ' || msg[len - 1] == '\n')) len--;
            msg[len] = 0;
            c->r.error_at = put_bytes(msg, (size_t)len, 1);
            c->r.len_error = (uint32_t)len;
        } else {
            c->r.len_error = CALLID_NULL_LEN;
        }
        c->r.flags |= FL_ENDED;
        size_t at = (size_t)c->index * sizeof(struct callid_rec);
        if (S.rec.map != NULL && at >= S.rec.at && at + sizeof c->r <= S.rec.at + S.rec.len) {
            memcpy(S.rec.map + (at - S.rec.at), &c->r, sizeof c->r);
        } else if (pwrite(S.rec.fd, &c->r, sizeof c->r, (off_t)at) != (ssize_t)sizeof c->r) {
            /* (the record stays as it began: its end is not known) */
        }
    }
    pthread_mutex_unlock(&S.mu);
    for (int i = 0; i < S_COUNT; i++) free(c->own[i]);
    free(c->regions);
}

/* ---- the phases of a collective data call ---------------------------------------------------- */

/* The MPI library's own communication and I/O inside a collective data call, as this thread sees
 * them through the PMPI and libc symbols it calls: consecutive operations of one phase are one row
 * (kind 'phase', the call's CallID); an I/O operation is one row of its own. */
static __thread struct {
    int active, func, kind, started;
    uint64_t callid;
    int64_t t0, t1, bytes, offset, size;
    int moved;  /* data exchanged or I/O done already (later collectives are the exchange's or the wait) */
} t_ph;

static void phase_flush(void) {
    if (!t_ph.started) return;
    t_ph.started = 0;
    call_t c;
    call_begin(&c, t_ph.func, K_PHASE);
    c.r.callid = t_ph.callid;
    c.r.t_start = t_ph.t0;
    c.r.t_end = t_ph.t1;
    collective(&c, 1);
    set_str(&c, S_OP, PHASE_NAMES[t_ph.kind]);
    if (t_ph.kind == PH_EXCHANGE) set_int(&c, &c.r.bytes, P_BYTES, t_ph.bytes);
    if (t_ph.kind == PH_IO) {
        set_int(&c, &c.r.offset, P_OFFSET, t_ph.offset);
        set_int(&c, &c.r.size, P_SIZE, t_ph.size);
    }
    call_end(&c, MPI_SUCCESS);
}

/* one operation of phase ``kind`` from t0 to t1 (bytes: sent; offset and size: an I/O's) */
static void phase_add(int kind, int64_t t0, int64_t t1, int64_t bytes, int64_t offset, int64_t size) {
    if (t_ph.started && (t_ph.kind != kind || kind == PH_IO)) phase_flush();
    if (!t_ph.started) {
        t_ph.started = 1;
        t_ph.kind = kind;
        t_ph.t0 = t0;
        t_ph.bytes = 0;
        t_ph.offset = offset;
        t_ph.size = size;
    }
    t_ph.t1 = t1;
    t_ph.bytes += bytes;
    if (kind == PH_EXCHANGE || kind == PH_IO) t_ph.moved = 1;
}

static void phase_start(const call_t *c) {
    t_ph.active = 1;
    t_ph.started = t_ph.moved = 0;
    t_ph.callid = c->r.callid;
    t_ph.func = c->r.func;
}

static void phase_stop(void) {
    if (!t_ph.active) return;
    t_ph.active = 0;
    phase_flush();
}

/* ---- files: name, communicator, view ------------------------------------------------------- */

typedef struct fstate {
    MPI_File fh;
    struct fstate *next;
    char *name;
    int64_t fid, colls;
    int comm_size;
    int64_t comm_id;
    /* the view: displacement, etype size, the filetype's data size and extent, its blocks */
    int64_t disp, esize, ft_size, ft_extent, nblocks;   /* nblocks 0: contiguous */
    int64_t *boff, *blen, *bsum;  /* blocks, and the data bytes before each */
    int known;                     /* the view's file ranges can be computed */
    int64_t split_rid;
    MPI_Comm comm;                 /* a duplicate of the file's communicator (the ordered calls' offsets) */
} fstate;

static fstate *files;

static fstate *file_of(MPI_File fh) {
    for (fstate *f = files; f; f = f->next) if (f->fh == fh) return f;
    return NULL;
}

static void view_free(fstate *f) {
    free(f->boff); free(f->blen); free(f->bsum);
    f->boff = f->blen = f->bsum = NULL;
    f->nblocks = 0;
}

static void file_forget(MPI_File fh) {
    for (fstate **p = &files; *p; p = &(*p)->next) {
        if ((*p)->fh == fh) {
            fstate *f = *p;
            *p = f->next;
            view_free(f);
            if (f->comm != MPI_COMM_NULL) PMPI_Comm_free(&f->comm);
            free(f->name);
            free(f);
            return;
        }
    }
}

/* ---- a datatype's constructor and its arguments ------------------------------------------------------ */

/* MPI_Type_get_envelope and _contents, MPI 4's large-count ones where the library has them: a type made
 * with a large-count constructor (the program's MPI_Type_contiguous_c, or ROMIO's own types) has its
 * counts there, after the integers; the part types it gives that are derived are freed by contents_free */
typedef struct { int combiner; int64_t ni, na, nd; int64_t *ints; MPI_Aint *aints; MPI_Datatype *types; } contents_t;

static int combiner_of(MPI_Datatype t) {
    int combiner = MPI_COMBINER_NAMED;
#if MPI_VERSION >= 4
    MPI_Count ni, na, nc, nd;
    PMPI_Type_get_envelope_c(t, &ni, &na, &nc, &nd, &combiner);
#else
    int ni, na, nd;
    PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner);
#endif
    return combiner;
}

/* t's combiner and, a derived type's, its constructor's arguments (a predefined type: none) */
static void type_contents(MPI_Datatype t, contents_t *k) {
    *k = (contents_t){.combiner = MPI_COMBINER_NAMED};
#if MPI_VERSION >= 4
    MPI_Count ni = 0, na = 0, nc = 0, nd = 0;
    if (PMPI_Type_get_envelope_c(t, &ni, &na, &nc, &nd, &k->combiner) != MPI_SUCCESS) k->combiner = MPI_COMBINER_NAMED;
#else
    int ni = 0, na = 0, nc = 0, nd = 0;
    if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &k->combiner) != MPI_SUCCESS) k->combiner = MPI_COMBINER_NAMED;
#endif
    if (k->combiner == MPI_COMBINER_NAMED) return;
    int *ints = malloc(sizeof(int) * (size_t)(ni + 1));
    k->aints = malloc(sizeof(MPI_Aint) * (size_t)(na + 1));
    k->types = malloc(sizeof(MPI_Datatype) * (size_t)(nd + 1));
    k->ints = malloc(sizeof(int64_t) * (size_t)(ni + nc + 1));
#if MPI_VERSION >= 4
    MPI_Count *counts = malloc(sizeof(MPI_Count) * (size_t)(nc + 1));
    PMPI_Type_get_contents_c(t, ni, na, nc, nd, ints, k->aints, counts, k->types);
    for (MPI_Count i = 0; i < nc; i++) k->ints[ni + i] = (int64_t)counts[i];
    free(counts);
#else
    PMPI_Type_get_contents(t, ni, na, nd, ints, k->aints, k->types);
#endif
    for (int64_t i = 0; i < (int64_t)ni; i++) k->ints[i] = ints[i];
    free(ints);
    k->ni = (int64_t)(ni + nc);
    k->na = (int64_t)na;
    k->nd = (int64_t)nd;
}

static void contents_free(contents_t *k) {
    for (int64_t i = 0; i < k->nd; i++)
        if (combiner_of(k->types[i]) != MPI_COMBINER_NAMED) PMPI_Type_free(&k->types[i]);
    free(k->ints);
    free(k->aints);
    free(k->types);
}

/* the blocks of a datatype's typemap, in order, adjacent ones merged (0: cannot say) */
static int64_t type_blocks(MPI_Datatype t, int64_t **off, int64_t **len) {
    *off = *len = NULL;
#ifdef HAVE_TYPE_IOV
    MPI_Count size, n = 0, bytes = 0, got = 0;
    PMPI_Type_size_c(t, &size);
    if (PMPIX_Type_iov_len(t, size, &n, &bytes) != MPI_SUCCESS || n > CALLID_MAX_REGIONS) return 0;
    MPIX_Iov *iov = malloc(sizeof *iov * (size_t)(n ? n : 1));
    if (PMPIX_Type_iov(t, 0, iov, n, &got) != MPI_SUCCESS) { free(iov); return 0; }
    *off = malloc(sizeof(int64_t) * (size_t)(got ? got : 1));
    *len = malloc(sizeof(int64_t) * (size_t)(got ? got : 1));
    int64_t k = 0;
    for (MPI_Count i = 0; i < got; i++) {
        int64_t o = (int64_t)(intptr_t)iov[i].iov_base, l = (int64_t)iov[i].iov_len;
        if (l == 0) continue;
        if (k && (*off)[k - 1] + (*len)[k - 1] == o) (*len)[k - 1] += l;
        else { (*off)[k] = o; (*len)[k] = l; k++; }
    }
    free(iov);
    return k;
#else
    (void)t;
    return 0;
#endif
}

/* whether an address of this process's memory (at least 4 GiB: below, small byte displacements are
 * common; the Python tracer's bound) */
static int is_address(int64_t a) {
    if (a < ((int64_t)1 << 32)) return 0;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (maps == NULL) return 0;
    unsigned long lo, hi;
    int found = 0;
    while (!found && fscanf(maps, "%lx-%lx%*[^\n]\n", &lo, &hi) == 2)
        found = (uint64_t)a >= lo && (uint64_t)a < hi;
    fclose(maps);
    return found;
}

/* a block of the type's typemap at an address of the process's memory: built from absolute addresses */
static int at_address(MPI_Datatype t) {
    int64_t *off, *len;
    int64_t n = type_blocks(t, &off, &len);
    int found = 0;
    for (int64_t i = 0; i < n && !found; i++) found = is_address(off[i]);
    free(off);
    free(len);
    return found;
}

static int by_offset(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* whether two of m runs (offset, length pairs, sorted here by offset) share a byte */
static int runs_shared(int64_t *runs, int64_t m) {
    qsort(runs, (size_t)m, 2 * sizeof(int64_t), by_offset);
    for (int64_t k = 1; k < m; k++)
        if (runs[2 * (k - 1)] + runs[2 * (k - 1) + 1] > runs[2 * k]) return 1;
    return 0;
}

/* whether count elements of a derived datatype hold a byte more than once (0: no, or cannot say); the
 * elements are compared only when one's blocks reach past its extent (as the Python tracer) */
static int overlapping(MPI_Datatype t, MPI_Count count) {
    if (combiner_of(t) == MPI_COMBINER_NAMED) return 0;
    int64_t *off, *len;
    int64_t n = type_blocks(t, &off, &len);
    MPI_Count lb, extent;
    PMPI_Type_get_extent_c(t, &lb, &extent);
    int64_t *runs = malloc(sizeof(int64_t) * 2 * (size_t)(n ? n : 1));
    for (int64_t j = 0; j < n; j++) { runs[2 * j] = off[j]; runs[2 * j + 1] = len[j]; }
    int found = runs_shared(runs, n);
    int64_t span = n ? runs[2 * (n - 1)] + runs[2 * (n - 1) + 1] - runs[0] : 0;
    free(runs);
    if (!found && count > 1 && span > extent && count <= CALLID_MAX_REGIONS / (n ? n : 1)) {
        runs = malloc(sizeof(int64_t) * 2 * (size_t)(n * count));
        for (int64_t i = 0; i < count; i++)
            for (int64_t j = 0; j < n; j++) {
                runs[2 * (i * n + j)] = off[j] + i * (int64_t)extent;
                runs[2 * (i * n + j) + 1] = len[j];
            }
        found = runs_shared(runs, n * count);
        free(runs);
    }
    free(off);
    free(len);
    return found;
}

static void view_set(fstate *f, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype) {
    view_free(f);
    MPI_Count es = 1, size = 1, lb = 0, extent = 1;
    PMPI_Type_size_c(etype, &es);
    PMPI_Type_size_c(filetype, &size);
    PMPI_Type_get_extent_c(filetype, &lb, &extent);
    f->disp = disp;
    f->esize = es > 0 ? es : 1;
    f->ft_size = size;
    f->ft_extent = extent;
    f->known = 1;
    if (size == extent && lb == 0) return;  /* contiguous */
    f->nblocks = type_blocks(filetype, &f->boff, &f->blen);
    if (f->nblocks == 0 || size == 0) { f->known = 0; return; }
    f->bsum = malloc(sizeof(int64_t) * (size_t)f->nblocks);
    int64_t sum = 0;
    for (int64_t i = 0; i < f->nblocks; i++) { f->bsum[i] = sum; sum += f->blen[i]; }
}

/* the file ranges of data bytes [pos, pos + n) of the view's stream: the first offset, and the
 * ranges into c->regions when there are several */
static void ranges(call_t *c, fstate *f, int64_t pos, int64_t n) {
    if (!f->known) { c->r.n_regions = CALLID_UNKNOWN; return; }
    if (f->nblocks == 0) { set_int(c, &c->r.offset, P_OFFSET, f->disp + pos); return; }
    int64_t tile = pos / f->ft_size, rem = pos % f->ft_size;
    int64_t lo = 0, hi = f->nblocks - 1;
    while (lo < hi) { int64_t mid = (lo + hi + 1) / 2; if (f->bsum[mid] <= rem) lo = mid; else hi = mid - 1; }
    int64_t b = lo, in = rem - f->bsum[b], left = n, k = 0, cap = 16;
    int64_t *out = malloc(sizeof(int64_t) * 2 * (size_t)cap);
    while (left > 0) {
        int64_t o = f->disp + tile * f->ft_extent + f->boff[b] + in, l = f->blen[b] - in;
        if (l > left) l = left;
        if (k && out[2 * k - 2] + out[2 * k - 1] == o) out[2 * k - 1] += l;
        else {
            if (k == CALLID_MAX_REGIONS) { free(out); c->r.n_regions = CALLID_UNKNOWN; return; }
            if (k == cap) { cap *= 2; out = realloc(out, sizeof(int64_t) * 2 * (size_t)cap); }
            out[2 * k] = o; out[2 * k + 1] = l; k++;
        }
        left -= l; in = 0;
        if (++b == f->nblocks) { b = 0; tile++; }
    }
    if (k == 0) { free(out); set_int(c, &c->r.offset, P_OFFSET, f->disp + tile * f->ft_extent + f->boff[b]); return; }
    set_int(c, &c->r.offset, P_OFFSET, out[0]);
    if (k > 1) { c->regions = out; c->r.n_regions = (uint32_t)k; } else free(out);
}

/* ---- describing arguments ------------------------------------------------------------------ */

/* A predefined type's name; a derived one as the constructors it was made with, down to the predefined
 * types: vector(MPI_INT), struct(MPI_INT,resized(MPI_DOUBLE)); cut at TYPE_TEXT_MAX characters with
 * "..." (as callid.mpiio.file.type_name). */
#define TYPE_TEXT_MAX 256

static void type_append(char *out, size_t *used, const char *s) {
    size_t n = strlen(s);
    if (*used + n > TYPE_TEXT_MAX + 1) n = TYPE_TEXT_MAX + 1 - *used;  /* (over the cut: trimmed below) */
    memcpy(out + *used, s, n);
    *used += n;
    out[*used] = 0;
}

static void type_describe(MPI_Datatype t, char *out, size_t *used) {
    contents_t k;
    type_contents(t, &k);
    if (k.combiner == MPI_COMBINER_NAMED) {
        char name[MPI_MAX_OBJECT_NAME + 1];
        int len = 0;
        PMPI_Type_get_name(t, name, &len);
        name[len] = 0;
        type_append(out, used, len ? name : "MPI_DATATYPE");
        return;
    }
    static const struct { int c; const char *n; } names[] = {
        {MPI_COMBINER_DUP, "dup"}, {MPI_COMBINER_CONTIGUOUS, "contiguous"}, {MPI_COMBINER_VECTOR, "vector"},
        {MPI_COMBINER_HVECTOR, "hvector"}, {MPI_COMBINER_INDEXED, "indexed"},
        {MPI_COMBINER_HINDEXED, "hindexed"}, {MPI_COMBINER_INDEXED_BLOCK, "indexed_block"},
        {MPI_COMBINER_HINDEXED_BLOCK, "hindexed_block"}, {MPI_COMBINER_STRUCT, "struct"},
        {MPI_COMBINER_SUBARRAY, "subarray"}, {MPI_COMBINER_DARRAY, "darray"},
        {MPI_COMBINER_RESIZED, "resized"}};
    const char *name = "derived";
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) if (names[i].c == k.combiner) name = names[i].n;
    type_append(out, used, name);
    type_append(out, used, "(");
    for (int64_t i = 0; i < k.nd; i++) {
        if (i) type_append(out, used, ",");
        if (*used <= TYPE_TEXT_MAX) type_describe(k.types[i], out, used);
    }
    contents_free(&k);
    type_append(out, used, ")");
}

static char *type_text(MPI_Datatype t) {
    if (t == MPI_DATATYPE_NULL) return NULL;
    char *out = malloc(TYPE_TEXT_MAX + 2);
    size_t used = 0;
    out[0] = 0;
    type_describe(t, out, &used);
    if (used > TYPE_TEXT_MAX) strcpy(out + TYPE_TEXT_MAX - 3, "...");
    return out;
}

/* ---- the datatypes of the rank's calls, each logged once at its first use (kind 'type') ------------- */

static struct type_seen { MPI_Datatype t; uint64_t text; int64_t id; } *types_seen;
static int64_t n_types_seen, cap_types_seen;
static pthread_mutex_t types_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;  /* (a type's parts first) */

static uint64_t text_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; s && *s; s++) { h ^= (uint8_t)*s; h *= 1099511628211ull; }
    return h;
}

/* n integers as "1,2,3" (malloc'd) */
static char *ints_text(const int64_t *v, int64_t n) {
    char *out = malloc(21 * (size_t)n + 1);
    size_t used = 0;
    out[0] = 0;
    for (int64_t i = 0; i < n; i++) used += (size_t)sprintf(out + used, i ? ",%lld" : "%lld", (long long)v[i]);
    return out;
}

/* the rank's id of datatype t (1, 2, ...); at its first use, its row and its parts' are logged. A type is
 * known by its handle and its description (a freed type's handle may be another type's later); known: the
 * description the caller already made (NULL: made here) */
static int64_t type_id(MPI_Datatype t, const char *known) {
    char *text = known ? strdup(known) : type_text(t);
    uint64_t h = text_hash(text);
    int64_t id = 0;
    pthread_mutex_lock(&types_mu);
    for (int64_t i = 0; i < n_types_seen && !id; i++)
        if (types_seen[i].t == t && types_seen[i].text == h) id = types_seen[i].id;
    if (id) { pthread_mutex_unlock(&types_mu); free(text); return id; }
    contents_t k;
    type_contents(t, &k);
    int64_t *wide = malloc(sizeof(int64_t) * (size_t)(k.nd + k.na + 1));
    call_t c;
    call_begin(&c, F_COMBINER_NAMED, K_TYPE);
    static const int combiners[] = {MPI_COMBINER_NAMED, MPI_COMBINER_DUP, MPI_COMBINER_CONTIGUOUS,
        MPI_COMBINER_VECTOR, MPI_COMBINER_HVECTOR, MPI_COMBINER_INDEXED, MPI_COMBINER_HINDEXED,
        MPI_COMBINER_INDEXED_BLOCK, MPI_COMBINER_HINDEXED_BLOCK, MPI_COMBINER_STRUCT, MPI_COMBINER_SUBARRAY,
        MPI_COMBINER_DARRAY, MPI_COMBINER_RESIZED};  /* (in the order of records.COMBINERS) */
    for (int i = 0; i < (int)(sizeof combiners / sizeof *combiners); i++)
        if (combiners[i] == k.combiner) c.r.func = (uint16_t)(F_COMBINER_NAMED + i);
    for (int64_t i = 0; i < k.nd; i++) wide[i] = type_id(k.types[i], NULL);
    own_str(&c, S_TYPES, ints_text(wide, k.nd));
    own_str(&c, S_INTEGERS, ints_text(k.ints, k.ni));
    for (int64_t i = 0; i < k.na; i++) wide[i] = (int64_t)k.aints[i];
    own_str(&c, S_ADDRESSES, ints_text(wide, k.na));
    contents_free(&k);
    if (n_types_seen == cap_types_seen) {
        cap_types_seen = cap_types_seen ? 2 * cap_types_seen : 64;
        types_seen = realloc(types_seen, sizeof *types_seen * (size_t)cap_types_seen);
    }
    id = n_types_seen + 1;
    types_seen[n_types_seen++] = (struct type_seen){t, h, id};
    pthread_mutex_unlock(&types_mu);
    MPI_Count size = 0, lb = 0, extent = 0;
    PMPI_Type_size_c(t, &size);
    PMPI_Type_get_extent_c(t, &lb, &extent);
    set_int(&c, &c.r.type_id, P_TYPE_ID, id);
    set_int(&c, &c.r.size, P_SIZE, (int64_t)size);
    set_int(&c, &c.r.extent, P_EXTENT, (int64_t)extent);
    own_str(&c, S_DATATYPE, text);
    collective(&c, 0);
    call_end(&c, MPI_SUCCESS);
    free(wide);
    return id;
}

/* a call's type_ids: the ids of the n datatypes it passed (text: their descriptions, in the call's
 * strings), as "1,2" */
static void type_ids(call_t *c, const MPI_Datatype *t, const char *const *text, int n) {
    int64_t ids[2];
    int k = 0;
    for (int i = 0; i < n && k < 2; i++) if (t[i] != MPI_DATATYPE_NULL) ids[k++] = type_id(t[i], text[i]);
    own_str(c, S_TYPE_IDS, ints_text(ids, k));
}

static char *hints_text(MPI_Info info) {
    if (info == MPI_INFO_NULL || !S.hints) return NULL;
    int n = 0;
    PMPI_Info_get_nkeys(info, &n);
    if (n == 0) return NULL;
    size_t cap = 256, used = 0;
    char *out = malloc(cap);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
        int vlen = MPI_MAX_INFO_VAL + 1, flag = 0;
        PMPI_Info_get_nthkey(info, i, key);
        PMPI_Info_get_string(info, key, &vlen, value, &flag);
        if (!flag) continue;
        size_t need = strlen(key) + strlen(value) + 3;
        while (used + need >= cap) { cap *= 2; out = realloc(out, cap); }
        used += (size_t)sprintf(out + used, "%s%s=%s", used ? ";" : "", key, value);
    }
    if (used == 0) { free(out); return NULL; }
    return out;
}

static char *amode_text(int amode) {
    static const struct { int bit; const char *n; } modes[] = {
        {MPI_MODE_RDONLY, "RDONLY"}, {MPI_MODE_WRONLY, "WRONLY"}, {MPI_MODE_RDWR, "RDWR"},
        {MPI_MODE_CREATE, "CREATE"}, {MPI_MODE_EXCL, "EXCL"}, {MPI_MODE_DELETE_ON_CLOSE, "DELETE_ON_CLOSE"},
        {MPI_MODE_UNIQUE_OPEN, "UNIQUE_OPEN"}, {MPI_MODE_SEQUENTIAL, "SEQUENTIAL"}, {MPI_MODE_APPEND, "APPEND"}};
    char *out = malloc(128);
    out[0] = 0;
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
        if (amode & modes[i].bit) { if (out[0]) strcat(out, ","); strcat(out, modes[i].n); }
    return out;
}

static void on_file(call_t *c, fstate *f, int collective) {
    if (f == NULL) return;
    set_str(c, S_FILE, f->name);
    set_int(c, &c->r.fid, P_FID, f->fid);
    if (collective) {
        set_int(c, &c->r.coll_seq, P_COLL_SEQ, ++f->colls);
        c->r.comm_size = f->comm_size;
        c->r.present |= P_COMM_SIZE;
        set_int(c, &c->r.comm_id, P_COMM_ID, f->comm_id);
    }
}

/* a file call without data: begin, describe the file */
static void file_call(call_t *c, int func, MPI_File fh, int coll) {
    call_begin(c, func, K_CALL);
    collective(c, coll);
    on_file(c, file_of(fh), coll);
}

/* ---- data access ------------------------------------------------------------------------------ */

enum { AT, IND, SHARED, ORDERED };

static void access_begin(call_t *c, int func, MPI_File fh, int where, MPI_Offset off, MPI_Count count,
                         MPI_Datatype dt, int coll) {
    file_call(c, func, fh, coll);
    MPI_Count tsize = 0;
    PMPI_Type_size_c(dt, &tsize);
    set_int(c, &c->r.count, P_COUNT, (int64_t)count);
    set_int(c, &c->r.size, P_SIZE, (int64_t)count * tsize);
    own_str(c, S_DATATYPE, type_text(dt));
    type_ids(c, &dt, &c->str[S_DATATYPE], 1);
    if (overlapping(dt, count)) set_str(c, S_TYPE_ISSUES, "overlapping");
    fstate *f = file_of(fh);
    MPI_Offset pos = off;
    if (where == IND) NEXT(PMPI_File_get_position)(fh, &pos);
    if (where == ORDERED && f != NULL && f->comm != MPI_COMM_NULL) {
        /* the ranks' accesses follow each other in rank order from the shared file pointer */
        long long mine = (long long)(count * tsize / f->esize), before = 0;
        int crank;
        NEXT(PMPI_File_get_position_shared)(fh, &pos);
        PMPI_Exscan(&mine, &before, 1, MPI_LONG_LONG, MPI_SUM, f->comm);
        PMPI_Comm_rank(f->comm, &crank);
        pos += crank ? (MPI_Offset)before : 0;
    }
    if (f == NULL || where == SHARED) {
        c->r.n_regions = CALLID_UNKNOWN;  /* (where a shared file pointer puts it is not visible here) */
    } else {
        ranges(c, f, (int64_t)pos * f->esize, (int64_t)count * tsize);
    }
    call_publish(c);
    if (coll) phase_start(c);
}

static void access_end(call_t *c, int err, MPI_Status *st) {
    if (st != NULL && st != MPI_STATUS_IGNORE && err == MPI_SUCCESS) {
        MPI_Count got = 0;
        PMPI_Get_count_c(st, MPI_BYTE, &got);
        if (got != MPI_UNDEFINED) set_int(c, &c->r.bytes, P_BYTES, (int64_t)got);
    }
    call_end(c, err);
}

/* non-blocking I/O requests not yet seen complete: their completion is logged (kind 'wait') */
typedef struct pending {
    MPI_Request req;
    struct pending *next;
    uint64_t callid, record;
    int64_t rid, fid;
    int func;
    char *file;
    const MPI_Request *where;  /* where the program's variable of the request is (NULL: not known) */
    /* a point-to-point request (MPI_Isend, MPI_Irecv, ...; its completion is an 'mpi' row): its
     * communicator, peer, tag (INT32_MIN: none), count, datatype's size and description */
    int message, comm_size, peer, tag;
    int64_t comm_id, count, tsize, type_id;
    char *datatype;
} pending;
static pending *requests;
static pthread_mutex_t req_mu = PTHREAD_MUTEX_INITIALIZER;

static void push_request(pending *p) {
    pthread_mutex_lock(&req_mu);
    p->next = requests;
    __atomic_store_n(&requests, p, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&req_mu);
}

static void remember(call_t *c, MPI_Request *req) {
    set_int(c, &c->r.rid, P_RID, __atomic_add_fetch(&S.rids, 1, __ATOMIC_RELAXED));
    pending *p = malloc(sizeof *p);
    *p = (pending){*req, NULL, c->r.callid, c->index, c->r.rid, c->r.fid, c->r.func,
                   c->str[S_FILE] ? strdup(c->str[S_FILE]) : NULL, req, 0, 0, 0, 0, 0, 0, 0, 0, NULL};
    push_request(p);
}

/* the pending request completed through the handle req stored at where (NULL: not known). Completed
 * requests may share one handle (MPICH returns a built-in one for a send done at once): the one issued
 * into the same variable is taken, else the oldest with the handle */
static pending *take_request(MPI_Request req, const MPI_Request *where) {
    pthread_mutex_lock(&req_mu);
    pending **found = NULL;
    for (pending **p = &requests; *p; p = &(*p)->next) {
        if ((*p)->req != req) continue;
        found = p;  /* (the list is newest first: the last match is the oldest) */
        if (where != NULL && (*p)->where == where) break;
    }
    pending *taken = found ? *found : NULL;
    if (taken) *found = taken->next;
    pthread_mutex_unlock(&req_mu);
    return taken;
}

/* while a completion may do a request's I/O (ROMIO's non-blocking collectives progress in MPI_Wait
 * and MPI_Test), the thread's slot names the call of the request (1: it is one of them) */
static int publish_pending(MPI_Request req) {
    uint64_t id = S.sentinel, record = ~0ull;
    int func = 0;
    pthread_mutex_lock(&req_mu);
    for (pending *p = requests; p; p = p->next)
        if (p->req == req) { id = p->callid; record = p->record; func = p->func; break; }
    pthread_mutex_unlock(&req_mu);
    if (id == S.sentinel) return 0;
    publish(id, func, record);
    return 1;
}

static void log_wait(pending *p, MPI_Status *st) {
    call_t c;
    call_begin(&c, p->func, K_WAIT);
    c.r.callid = p->callid;
    set_int(&c, &c.r.rid, P_RID, p->rid);
    if (p->fid) set_int(&c, &c.r.fid, P_FID, p->fid);
    set_str(&c, S_FILE, p->file);
    collective(&c, 0);
    if (st != NULL && st != MPI_STATUS_IGNORE) {
        MPI_Count got = 0;
        PMPI_Get_count_c(st, MPI_BYTE, &got);
        if (got != MPI_UNDEFINED) set_int(&c, &c.r.bytes, P_BYTES, (int64_t)got);
    }
    c.r.t_start = now_ns();
    call_end(&c, MPI_SUCCESS);
    free(p->file);
    free(p);
}

/* the completion of a point-to-point request by the call func (MPI_Wait, MPI_Testall, ...) that began
 * at t0: an 'mpi' row with the request's id, communicator and message (a receive: the source, tag and
 * count it matched) */
static void log_message_done(pending *p, int func, int64_t t0, MPI_Status *st) {
    call_t c;
    call_begin(&c, func, K_MPI);
    c.r.t_start = t0;
    collective(&c, 0);
    set_int(&c, &c.r.rid, P_RID, p->rid);
    set_int(&c, &c.r.comm_id, P_COMM_ID, p->comm_id);
    c.r.comm_size = p->comm_size;
    c.r.present |= P_COMM_SIZE;
    int64_t count = p->count;
    int peer = p->peer, tag = p->tag;
    if (p->func == F_Irecv && st != NULL && st != MPI_STATUS_IGNORE) {
        MPI_Count got = 0;
        PMPI_Get_count_c(st, MPI_BYTE, &got);
        peer = st->MPI_SOURCE;
        tag = st->MPI_TAG;
        /* (what it received, in whole elements; else the count posted, as the Python tracer) */
        if (got != MPI_UNDEFINED && p->tsize > 0 && got % p->tsize == 0) count = (int64_t)got / p->tsize;
    }
    if (peer != INT32_MIN) set_int(&c, &c.r.peer, P_PEER, peer);
    if (tag != INT32_MIN) set_int(&c, &c.r.tag, P_TAG, tag);
    if (p->datatype != NULL && count != INT64_MIN) {
        set_int(&c, &c.r.count, P_COUNT, count);
        set_int(&c, &c.r.size, P_SIZE, count * p->tsize);
        set_str(&c, S_DATATYPE, p->datatype);
        if (p->type_id) own_str(&c, S_TYPE_IDS, ints_text(&p->type_id, 1));
    }
    call_end(&c, MPI_SUCCESS);
    free(p->datatype);
    free(p);
}

/* ---- MPI_Init / MPI_Finalize ------------------------------------------------------------------ */

int MPI_Init(int *argc, char ***argv) {
    int err = NEXT(PMPI_Init)(argc, argv);
    if (err == MPI_SUCCESS) { start(); atexit(stop); }
    return err;
}
ALSO_PMPI(Init)

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int err = NEXT(PMPI_Init_thread)(argc, argv, required, provided);
    if (err == MPI_SUCCESS) { start(); atexit(stop); }
    return err;
}
ALSO_PMPI(Init_thread)

int MPI_Finalize(void) {
    stop();
    return NEXT(PMPI_Finalize)();
}
ALSO_PMPI(Finalize)

/* ---- file manipulation ---------------------------------------------------------------------- */

#define TRACED (S.ready && t_depth == 0)

int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh) {
    if (!TRACED) return NEXT(PMPI_File_open)(comm, filename, amode, info, fh);
    call_t c;
    call_begin(&c, F_File_open, K_CALL);
    collective(&c, 1);
    int size, crank;
    int64_t id = comm_ident(comm, &size);
    PMPI_Comm_rank(comm, &crank);
    /* the ranks of the open agree on a base: each collective call on the file has one coll_seq on all */
    int64_t base = crank == 0 ? ((int64_t)S.rank << 20 | (S.opens++ & 0xFFFFF)) : 0;
    PMPI_Bcast(&base, 1, MPI_INT64_T, 0, comm);
    set_str(&c, S_FILE, filename);
    int64_t fid = __atomic_add_fetch(&S.fids, 1, __ATOMIC_RELAXED);
    set_int(&c, &c.r.fid, P_FID, fid);
    set_int(&c, &c.r.coll_seq, P_COLL_SEQ, base << 20);
    c.r.comm_size = size;
    c.r.present |= P_COMM_SIZE;
    set_int(&c, &c.r.comm_id, P_COMM_ID, id);
    own_str(&c, S_AMODE, amode_text(amode));
    own_str(&c, S_HINTS, hints_text(info));
    call_publish(&c);
    int err = NEXT(PMPI_File_open)(comm, filename, amode, info, fh);
    t_lib = 0;  /* (the library returned: the MPI calls that follow are the tracer's) */
    if (err == MPI_SUCCESS) {
        fstate *f = calloc(1, sizeof *f);
        *f = (fstate){.fh = *fh, .next = files, .name = strdup(filename), .fid = fid, .colls = base << 20,
                      .comm_size = size, .comm_id = id, .esize = 1, .ft_size = 1, .ft_extent = 1, .known = 1,
                      .comm = MPI_COMM_NULL};
        PMPI_Comm_dup(comm, &f->comm);
        files = f;
        MPI_Offset bytes;
        if (PMPI_File_get_size(*fh, &bytes) == MPI_SUCCESS) set_int(&c, &c.r.file_size, P_FILE_SIZE, bytes);
    }
    call_end(&c, err);
    return err;
}
ALSO_PMPI(File_open)

int MPI_File_close(MPI_File *fh) {
    if (!TRACED) return NEXT(PMPI_File_close)(fh);
    call_t c;
    MPI_File was = *fh;
    file_call(&c, F_File_close, was, 1);
    call_publish(&c);
    int err = NEXT(PMPI_File_close)(fh);
    call_end(&c, err);
    if (err == MPI_SUCCESS) file_forget(was);
    return err;
}
ALSO_PMPI(File_close)

int MPI_File_delete(const char *filename, MPI_Info info) {
    if (!TRACED) return NEXT(PMPI_File_delete)(filename, info);
    call_t c;
    call_begin(&c, F_File_delete, K_CALL);
    collective(&c, 0);
    set_str(&c, S_FILE, filename);
    own_str(&c, S_HINTS, hints_text(info));
    call_publish(&c);
    int err = NEXT(PMPI_File_delete)(filename, info);
    call_end(&c, err);
    return err;
}
ALSO_PMPI(File_delete)

/* a file call whose one argument the row records in an integer column (or none) */
#define FILE_CALL(NAME, COLL, PARAMS, ARGS, DESCRIBE)                                         \
    int MPI_File_##NAME PARAMS {                                                              \
        if (!TRACED) return NEXT(PMPI_File_##NAME) ARGS;                                            \
        call_t c;                                                                             \
        file_call(&c, F_File_##NAME, fh, COLL);                                               \
        DESCRIBE;                                                                             \
        call_publish(&c);                                                                     \
        int err = NEXT(PMPI_File_##NAME) ARGS;                                                      \
        call_end(&c, err);                                                                    \
        return err;                                                                           \
    }                                                                                          \
    ALSO_PMPI(File_##NAME)

FILE_CALL(set_size, 1, (MPI_File fh, MPI_Offset size), (fh, size), set_int(&c, &c.r.size, P_SIZE, size))
FILE_CALL(preallocate, 1, (MPI_File fh, MPI_Offset size), (fh, size), set_int(&c, &c.r.size, P_SIZE, size))
FILE_CALL(get_size, 0, (MPI_File fh, MPI_Offset *size), (fh, size), (void)0)
/* the groups MPI_File_get_group handed out and the program has not freed (MARMOT: free them before
   MPI_Finalize); their MPI_Group_free is logged (kind 'mpi', comm_id: the group's ranks' hash) */
#define MAX_FILE_GROUPS 1024
static MPI_Group file_groups[MAX_FILE_GROUPS];
static int n_file_groups;

int MPI_File_get_group(MPI_File fh, MPI_Group *group) {
    if (!TRACED) return NEXT(PMPI_File_get_group)(fh, group);
    call_t c;
    file_call(&c, F_File_get_group, fh, 0);
    call_publish(&c);
    int err = NEXT(PMPI_File_get_group)(fh, group);
    call_end(&c, err);
    pthread_mutex_lock(&S.mu);
    if (err == MPI_SUCCESS && n_file_groups < MAX_FILE_GROUPS) file_groups[n_file_groups++] = *group;
    pthread_mutex_unlock(&S.mu);
    return err;
}
ALSO_PMPI(File_get_group)
FILE_CALL(get_amode, 0, (MPI_File fh, int *amode), (fh, amode), (void)0)
FILE_CALL(set_info, 1, (MPI_File fh, MPI_Info info), (fh, info), own_str(&c, S_HINTS, hints_text(info)))
FILE_CALL(get_info, 0, (MPI_File fh, MPI_Info *info), (fh, info), (void)0)
FILE_CALL(get_view, 0, (MPI_File fh, MPI_Offset *disp, MPI_Datatype *etype, MPI_Datatype *filetype,
                         char *datarep), (fh, disp, etype, filetype, datarep), (void)0)
FILE_CALL(get_position, 0, (MPI_File fh, MPI_Offset *offset), (fh, offset), (void)0)
FILE_CALL(get_byte_offset, 0, (MPI_File fh, MPI_Offset offset, MPI_Offset *disp), (fh, offset, disp), (void)0)
FILE_CALL(get_position_shared, 0, (MPI_File fh, MPI_Offset *offset), (fh, offset), (void)0)
FILE_CALL(get_type_extent, 0, (MPI_File fh, MPI_Datatype datatype, MPI_Aint *extent), (fh, datatype, extent),
          own_str(&c, S_DATATYPE, type_text(datatype)))
FILE_CALL(set_atomicity, 1, (MPI_File fh, int flag), (fh, flag),
          (c.r.present |= P_ATOMICITY, c.r.flags |= flag ? FL_ATOMICITY : 0))
FILE_CALL(get_atomicity, 0, (MPI_File fh, int *flag), (fh, flag), (void)0)
FILE_CALL(sync, 1, (MPI_File fh), (fh), (void)0)
FILE_CALL(get_errhandler, 0, (MPI_File fh, MPI_Errhandler *errhandler), (fh, errhandler), (void)0)
FILE_CALL(set_errhandler, 0, (MPI_File fh, MPI_Errhandler errhandler), (fh, errhandler), (void)0)
FILE_CALL(call_errhandler, 0, (MPI_File fh, int errorcode), (fh, errorcode), (void)0)

static const char *whence_text(int whence) {
    return whence == MPI_SEEK_SET ? "SET" : whence == MPI_SEEK_CUR ? "CUR" : whence == MPI_SEEK_END ? "END" : "?";
}

/* a seek: the offset passed (relative_offset, in etypes) and where the pointer moved (offset, in bytes) */
#define SEEK_CALL(NAME, COLL, POSITION)                                                          \
    int MPI_File_##NAME(MPI_File fh, MPI_Offset offset, int whence) {                           \
        if (!TRACED) return NEXT(PMPI_File_##NAME)(fh, offset, whence);                          \
        call_t c;                                                                             \
        file_call(&c, F_File_##NAME, fh, COLL);                                               \
        set_int(&c, &c.r.relative_offset, P_RELATIVE_OFFSET, offset);                         \
        set_str(&c, S_WHENCE, whence_text(whence));                                           \
        call_publish(&c);                                                                     \
        int err = NEXT(PMPI_File_##NAME)(fh, offset, whence);                                  \
        MPI_Offset at, byte;                                                                  \
        if (err == MPI_SUCCESS && POSITION(fh, &at) == MPI_SUCCESS &&                         \
            PMPI_File_get_byte_offset(fh, at, &byte) == MPI_SUCCESS)                          \
            set_int(&c, &c.r.offset, P_OFFSET, byte);                                         \
        call_end(&c, err);                                                                    \
        return err;                                                                           \
    }                                                                                          \
    ALSO_PMPI(File_##NAME)

SEEK_CALL(seek, 0, PMPI_File_get_position)
SEEK_CALL(seek_shared, 1, PMPI_File_get_position_shared)

int MPI_File_get_type_extent_c(MPI_File fh, MPI_Datatype datatype, MPI_Count *extent) {
    if (!TRACED) return NEXT(PMPI_File_get_type_extent_c)(fh, datatype, extent);
    call_t c;
    file_call(&c, F_File_get_type_extent, fh, 0);
    own_str(&c, S_DATATYPE, type_text(datatype));
    call_publish(&c);
    int err = NEXT(PMPI_File_get_type_extent_c)(fh, datatype, extent);
    call_end(&c, err);
    return err;
}
ALSO_PMPI(File_get_type_extent_c)

int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,
                      const char *datarep, MPI_Info info) {
    if (!TRACED) return NEXT(PMPI_File_set_view)(fh, disp, etype, filetype, datarep, info);
    call_t c;
    file_call(&c, F_File_set_view, fh, 1);
    set_int(&c, &c.r.offset, P_OFFSET, disp);
    own_str(&c, S_ETYPE, type_text(etype));
    own_str(&c, S_FILETYPE, type_text(filetype));
    MPI_Datatype both[2] = {etype, filetype};
    const char *texts[2] = {c.str[S_ETYPE], c.str[S_FILETYPE]};
    type_ids(&c, both, texts, 2);
    set_str(&c, S_DATAREP, datarep);
    own_str(&c, S_HINTS, hints_text(info));
    MPI_Count lb, extent;
    if (etype != MPI_DATATYPE_NULL && PMPI_Type_get_extent_c(etype, &lb, &extent) == MPI_SUCCESS)
        set_int(&c, &c.r.etype_extent, P_ETYPE_EXTENT, extent);
    if (filetype != MPI_DATATYPE_NULL && PMPI_Type_get_extent_c(filetype, &lb, &extent) == MPI_SUCCESS) {
        set_int(&c, &c.r.extent, P_EXTENT, extent);
        int64_t *off, *len;
        int64_t n = type_blocks(filetype, &off, &len);
        if (n > 0) {
            c.regions = malloc(sizeof(int64_t) * 2 * (size_t)n);
            for (int64_t i = 0; i < n; i++) { c.regions[2 * i] = off[i]; c.regions[2 * i + 1] = len[i]; }
            c.r.n_regions = (uint32_t)n;
        }
        free(off);
        free(len);
    }
    int absolute = (etype != MPI_DATATYPE_NULL && at_address(etype)) ||
                   (filetype != MPI_DATATYPE_NULL && at_address(filetype));
    int twice = etype != MPI_DATATYPE_NULL && overlapping(etype, 1);  /* (the etype holds a byte twice) */
    if (absolute || twice) set_str(&c, S_TYPE_ISSUES, absolute && twice ? "address,overlapping" : absolute ? "address"
                                                      : "overlapping");
    call_publish(&c);
    int err = NEXT(PMPI_File_set_view)(fh, disp, etype, filetype, datarep, info);
    fstate *f = file_of(fh);
    if (err == MPI_SUCCESS && f != NULL) view_set(f, disp, etype, filetype);
    call_end(&c, err);
    return err;
}
ALSO_PMPI(File_set_view)

/* ---- the data-access family --------------------------------------------------------------- */

/* blocking: explicit offset (AT) or a file pointer */
#define BLOCKING_AT(NAME, F, BUF, CT, COLL)                                                      \
    int MPI_File_##NAME(MPI_File fh, MPI_Offset offset, BUF buf, CT count, MPI_Datatype dt,        \
                        MPI_Status *st) {                                                          \
        if (!TRACED) return NEXT(PMPI_File_##NAME)(fh, offset, buf, count, dt, st);                      \
        call_t c;                                                                                  \
        MPI_Status local;                                                                          \
        if (st == MPI_STATUS_IGNORE) st = &local;                                                  \
        access_begin(&c, F, fh, AT, offset, (MPI_Count)count, dt, COLL);                           \
        int err = NEXT(PMPI_File_##NAME)(fh, offset, buf, count, dt, st);                                \
        access_end(&c, err, st);                                                                   \
        return err;                                                                                \
    }                                                                                          \
    ALSO_PMPI(File_##NAME)
#define BLOCKING(NAME, F, BUF, CT, WHERE, COLL)                                                   \
    int MPI_File_##NAME(MPI_File fh, BUF buf, CT count, MPI_Datatype dt, MPI_Status *st) {          \
        if (!TRACED) return NEXT(PMPI_File_##NAME)(fh, buf, count, dt, st);                              \
        call_t c;                                                                                  \
        MPI_Status local;                                                                          \
        if (st == MPI_STATUS_IGNORE) st = &local;                                                  \
        access_begin(&c, F, fh, WHERE, 0, (MPI_Count)count, dt, COLL);                             \
        int err = NEXT(PMPI_File_##NAME)(fh, buf, count, dt, st);                                        \
        access_end(&c, err, st);                                                                   \
        return err;                                                                                \
    }                                                                                          \
    ALSO_PMPI(File_##NAME)
#define NONBLOCKING_AT(NAME, F, BUF, CT, COLL)                                                   \
    int MPI_File_##NAME(MPI_File fh, MPI_Offset offset, BUF buf, CT count, MPI_Datatype dt,        \
                        MPI_Request *req) {                                                        \
        if (!TRACED) return NEXT(PMPI_File_##NAME)(fh, offset, buf, count, dt, req);                     \
        call_t c;                                                                                  \
        access_begin(&c, F, fh, AT, offset, (MPI_Count)count, dt, COLL);                           \
        int err = NEXT(PMPI_File_##NAME)(fh, offset, buf, count, dt, req);                               \
        if (err == MPI_SUCCESS) remember(&c, req);                                                 \
        call_end(&c, err);                                                                         \
        return err;                                                                                \
    }                                                                                          \
    ALSO_PMPI(File_##NAME)
#define NONBLOCKING(NAME, F, BUF, CT, WHERE, COLL)                                                \
    int MPI_File_##NAME(MPI_File fh, BUF buf, CT count, MPI_Datatype dt, MPI_Request *req) {        \
        if (!TRACED) return NEXT(PMPI_File_##NAME)(fh, buf, count, dt, req);                             \
        call_t c;                                                                                  \
        access_begin(&c, F, fh, WHERE, 0, (MPI_Count)count, dt, COLL);                             \
        int err = NEXT(PMPI_File_##NAME)(fh, buf, count, dt, req);                                       \
        if (err == MPI_SUCCESS) remember(&c, req);                                                 \
        call_end(&c, err);                                                                         \
        return err;                                                                                \
    }                                                                                          \
    ALSO_PMPI(File_##NAME)
#define BEGIN_AT(NAME, F, BUF, CT)                                                                \
    int MPI_File_##NAME(MPI_File fh, MPI_Offset offset, BUF buf, CT count, MPI_Datatype dt) {       \
        if (!TRACED) return NEXT(PMPI_File_##NAME)(fh, offset, buf, count, dt);                          \
        call_t c;                                                                                  \
        access_begin(&c, F, fh, AT, offset, (MPI_Count)count, dt, 1);                              \
        int err = NEXT(PMPI_File_##NAME)(fh, offset, buf, count, dt);                                    \
        split_begin(&c, fh, err);                                                                  \
        return err;                                                                                \
    }                                                                                          \
    ALSO_PMPI(File_##NAME)
#define BEGIN(NAME, F, BUF, CT, WHERE)                                                            \
    int MPI_File_##NAME(MPI_File fh, BUF buf, CT count, MPI_Datatype dt) {                          \
        if (!TRACED) return NEXT(PMPI_File_##NAME)(fh, buf, count, dt);                                  \
        call_t c;                                                                                  \
        access_begin(&c, F, fh, WHERE, 0, (MPI_Count)count, dt, 1);                                \
        int err = NEXT(PMPI_File_##NAME)(fh, buf, count, dt);                                            \
        split_begin(&c, fh, err);                                                                  \
        return err;                                                                                \
    }                                                                                          \
    ALSO_PMPI(File_##NAME)
#define END(NAME, F, BUF)                                                                        \
    int MPI_File_##NAME(MPI_File fh, BUF buf, MPI_Status *st) {                                   \
        if (!TRACED) return NEXT(PMPI_File_##NAME)(fh, buf, st);                                        \
        call_t c;                                                                                 \
        MPI_Status local;                                                                         \
        if (st == MPI_STATUS_IGNORE) st = &local;                                                 \
        file_call(&c, F, fh, 1);                                                                  \
        fstate *f = file_of(fh);                                                                  \
        if (f != NULL && f->split_rid) set_int(&c, &c.r.rid, P_RID, f->split_rid);                \
        call_publish(&c);                                                                         \
        int err = NEXT(PMPI_File_##NAME)(fh, buf, st);                                                  \
        if (f != NULL) f->split_rid = 0;                                                          \
        access_end(&c, err, st);                                                                  \
        return err;                                                                               \
    }                                                                                          \
    ALSO_PMPI(File_##NAME)

static void split_begin(call_t *c, MPI_File fh, int err) {
    fstate *f = file_of(fh);
    if (err == MPI_SUCCESS && f != NULL) {
        set_int(c, &c->r.rid, P_RID, __atomic_add_fetch(&S.rids, 1, __ATOMIC_RELAXED));
        f->split_rid = c->r.rid;
    }
    call_end(c, err);
}

#define RBUF void *
#define WBUF const void *
#define FAMILY(CT, S_)                                                                            \
    BLOCKING_AT(read_at##S_, F_File_read_at, RBUF, CT, 0)                                         \
    BLOCKING_AT(write_at##S_, F_File_write_at, WBUF, CT, 0)                                       \
    BLOCKING_AT(read_at_all##S_, F_File_read_at_all, RBUF, CT, 1)                                 \
    BLOCKING_AT(write_at_all##S_, F_File_write_at_all, WBUF, CT, 1)                               \
    BLOCKING(read##S_, F_File_read, RBUF, CT, IND, 0)                                             \
    BLOCKING(write##S_, F_File_write, WBUF, CT, IND, 0)                                           \
    BLOCKING(read_all##S_, F_File_read_all, RBUF, CT, IND, 1)                                     \
    BLOCKING(write_all##S_, F_File_write_all, WBUF, CT, IND, 1)                                   \
    BLOCKING(read_shared##S_, F_File_read_shared, RBUF, CT, SHARED, 0)                            \
    BLOCKING(write_shared##S_, F_File_write_shared, WBUF, CT, SHARED, 0)                          \
    BLOCKING(read_ordered##S_, F_File_read_ordered, RBUF, CT, ORDERED, 1)                         \
    BLOCKING(write_ordered##S_, F_File_write_ordered, WBUF, CT, ORDERED, 1)                       \
    NONBLOCKING_AT(iread_at##S_, F_File_iread_at, RBUF, CT, 0)                                    \
    NONBLOCKING_AT(iwrite_at##S_, F_File_iwrite_at, WBUF, CT, 0)                                  \
    NONBLOCKING_AT(iread_at_all##S_, F_File_iread_at_all, RBUF, CT, 1)                            \
    NONBLOCKING_AT(iwrite_at_all##S_, F_File_iwrite_at_all, WBUF, CT, 1)                          \
    NONBLOCKING(iread##S_, F_File_iread, RBUF, CT, IND, 0)                                        \
    NONBLOCKING(iwrite##S_, F_File_iwrite, WBUF, CT, IND, 0)                                      \
    NONBLOCKING(iread_all##S_, F_File_iread_all, RBUF, CT, IND, 1)                                \
    NONBLOCKING(iwrite_all##S_, F_File_iwrite_all, WBUF, CT, IND, 1)                              \
    NONBLOCKING(iread_shared##S_, F_File_iread_shared, RBUF, CT, SHARED, 0)                       \
    NONBLOCKING(iwrite_shared##S_, F_File_iwrite_shared, WBUF, CT, SHARED, 0)                     \
    BEGIN_AT(read_at_all_begin##S_, F_File_read_at_all_begin, RBUF, CT)                           \
    BEGIN_AT(write_at_all_begin##S_, F_File_write_at_all_begin, WBUF, CT)                         \
    BEGIN(read_all_begin##S_, F_File_read_all_begin, RBUF, CT, IND)                               \
    BEGIN(write_all_begin##S_, F_File_write_all_begin, WBUF, CT, IND)                             \
    BEGIN(read_ordered_begin##S_, F_File_read_ordered_begin, RBUF, CT, ORDERED)                   \
    BEGIN(write_ordered_begin##S_, F_File_write_ordered_begin, WBUF, CT, ORDERED)

FAMILY(int, )
FAMILY(MPI_Count, _c)
END(read_at_all_end, F_File_read_at_all_end, RBUF)
END(write_at_all_end, F_File_write_at_all_end, WBUF)
END(read_all_end, F_File_read_all_end, RBUF)
END(write_all_end, F_File_write_all_end, WBUF)
END(read_ordered_end, F_File_read_ordered_end, RBUF)
END(write_ordered_end, F_File_write_ordered_end, WBUF)

/* ---- completions of non-blocking I/O ------------------------------------------------------- */

static int have_requests(void) { return __atomic_load_n(&requests, __ATOMIC_ACQUIRE) != NULL; }

static void complete_one(MPI_Request before, const MPI_Request *where, MPI_Status *st, int done, int func,
                         int64_t t0) {
    if (!done) return;
    pending *p = take_request(before, where);
    if (p == NULL) return;
    if (p->message) log_message_done(p, func, t0, st);
    else log_wait(p, st);
}

int MPI_Wait(MPI_Request *req, MPI_Status *st) {
    if (!S.ready || !have_requests()) return PMPI_Wait(req, st);
    MPI_Request before = *req;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    int64_t t0 = now_ns();
    int named = publish_pending(before);
    int err = PMPI_Wait(req, st);
    if (named) publish(S.sentinel, 0, ~0ull);
    complete_one(before, req, st, err == MPI_SUCCESS, F_Wait, t0);
    return err;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st) {
    if (!S.ready || !have_requests()) return PMPI_Test(req, flag, st);
    MPI_Request before = *req;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    int64_t t0 = now_ns();
    int named = publish_pending(before);
    int err = PMPI_Test(req, flag, st);
    if (named) publish(S.sentinel, 0, ~0ull);
    complete_one(before, req, st, err == MPI_SUCCESS && *flag, F_Test, t0);
    return err;
}

/* the several-request completions: which of ``before`` completed (indices), each logged */
static void complete_many(MPI_Request *before, const MPI_Request *reqs, int n, MPI_Status *sts, int func,
                          int64_t t0) {
    for (int i = 0; i < n; i++) complete_one(before[i], &reqs[i], sts ? &sts[i] : NULL, 1, func, t0);
}

#define MANY_BEGIN(N, REQS, STS)                                                                 \
    int64_t t0 = now_ns();                                                                        \
    MPI_Request *before = malloc(sizeof(MPI_Request) * (size_t)((N) ? (N) : 1));                 \
    memcpy(before, REQS, sizeof(MPI_Request) * (size_t)(N));                                      \
    MPI_Status *mine = NULL;                                                                      \
    if ((STS) == MPI_STATUSES_IGNORE) { mine = malloc(sizeof(MPI_Status) * (size_t)((N) ? (N) : 1)); STS = mine; }

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
    if (!S.ready || !have_requests()) return PMPI_Waitall(n, reqs, sts);
    MANY_BEGIN(n, reqs, sts)
    int err = PMPI_Waitall(n, reqs, sts);
    if (err == MPI_SUCCESS) complete_many(before, reqs, n, sts, F_Waitall, t0);
    free(before); free(mine);
    return err;
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]) {
    if (!S.ready || !have_requests()) return PMPI_Testall(n, reqs, flag, sts);
    MANY_BEGIN(n, reqs, sts)
    int err = PMPI_Testall(n, reqs, flag, sts);
    if (err == MPI_SUCCESS && *flag) complete_many(before, reqs, n, sts, F_Testall, t0);
    free(before); free(mine);
    return err;
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st) {
    if (!S.ready || !have_requests()) return PMPI_Waitany(n, reqs, index, st);
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    int64_t t0 = now_ns();
    MPI_Request *before = malloc(sizeof(MPI_Request) * (size_t)(n ? n : 1));
    memcpy(before, reqs, sizeof(MPI_Request) * (size_t)n);
    int err = PMPI_Waitany(n, reqs, index, st);
    if (err == MPI_SUCCESS && *index != MPI_UNDEFINED) complete_one(before[*index], &reqs[*index], st, 1, F_Waitany, t0);
    free(before);
    return err;
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st) {
    if (!S.ready || !have_requests()) return PMPI_Testany(n, reqs, index, flag, st);
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    int64_t t0 = now_ns();
    MPI_Request *before = malloc(sizeof(MPI_Request) * (size_t)(n ? n : 1));
    memcpy(before, reqs, sizeof(MPI_Request) * (size_t)n);
    int err = PMPI_Testany(n, reqs, index, flag, st);
    if (err == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED)
        complete_one(before[*index], &reqs[*index], st, 1, F_Testany, t0);
    free(before);
    return err;
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[]) {
    if (!S.ready || !have_requests()) return PMPI_Waitsome(n, reqs, outcount, indices, sts);
    MANY_BEGIN(n, reqs, sts)
    int err = PMPI_Waitsome(n, reqs, outcount, indices, sts);
    if (err == MPI_SUCCESS && *outcount != MPI_UNDEFINED) {
        for (int k = 0; k < *outcount; k++) complete_one(before[indices[k]], &reqs[indices[k]], &sts[k], 1, F_Waitsome, t0);
    }
    free(before); free(mine);
    return err;
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[]) {
    if (!S.ready || !have_requests()) return PMPI_Testsome(n, reqs, outcount, indices, sts);
    MANY_BEGIN(n, reqs, sts)
    int err = PMPI_Testsome(n, reqs, outcount, indices, sts);
    if (err == MPI_SUCCESS && *outcount != MPI_UNDEFINED) {
        for (int k = 0; k < *outcount; k++) complete_one(before[indices[k]], &reqs[indices[k]], &sts[k], 1, F_Testsome, t0);
    }
    free(before); free(mine);
    return err;
}

/* ---- calls without I/O (kind 'mpi'): collectives, the synchronisation between ranks, and point to point */

#define NONE INT32_MIN  /* (a column a call does not have) */

/* what a call without I/O says beyond its communicator: collective or not, the other rank and the tag of
 * a point-to-point call, a rooted collective's root, the data it sends (a receive: receives) */
typedef struct { int collective, peer, tag, root; MPI_Count count; MPI_Datatype type; } mpi_args_t;

/* (kind: K_MPI, or K_NESTED, whose datatypes are the library's: described, not given ids; comm: none for a
 * completion of the library's) */
static void mpi_describe(call_t *c, int func, int kind, MPI_Comm comm, int64_t t0, mpi_args_t a) {
    call_begin(c, func, kind);
    c->r.t_start = t0;
    collective(c, a.collective);
    if (comm != MPI_COMM_NULL) {
        int size;
        set_int(c, &c->r.comm_id, P_COMM_ID, comm_ident(comm, &size));
        c->r.comm_size = size;
        c->r.present |= P_COMM_SIZE;
    }
    if (a.peer != NONE) set_int(c, &c->r.peer, P_PEER, a.peer);
    if (a.tag != NONE) set_int(c, &c->r.tag, P_TAG, a.tag);
    if (a.root != NONE) set_int(c, &c->r.root, P_ROOT, a.root);
    if (a.type != MPI_DATATYPE_NULL && a.count != MPI_UNDEFINED) {
        MPI_Count tsize = 0;
        PMPI_Type_size_c(a.type, &tsize);
        set_int(c, &c->r.count, P_COUNT, (int64_t)a.count);
        set_int(c, &c->r.size, P_SIZE, (int64_t)(a.count * tsize));
        own_str(c, S_DATATYPE, type_text(a.type));
        if (kind == K_MPI) type_ids(c, &a.type, &c->str[S_DATATYPE], 1);
    }
}

static void mpi_call(int func, MPI_Comm comm, int64_t t0, mpi_args_t a) {
    call_t c;
    mpi_describe(&c, func, K_MPI, comm, t0, a);
    call_end(&c, MPI_SUCCESS);
}

/* a non-blocking point-to-point call, logged when issued with a request id (rid) that the row of its
 * completion (MPI_Wait, MPI_Test, ...: log_message_done) has too */
static void message_issued(int func, MPI_Comm comm, int64_t t0, mpi_args_t a, const MPI_Request *req) {
    call_t c;
    mpi_describe(&c, func, K_MPI, comm, t0, a);
    set_int(&c, &c.r.rid, P_RID, __atomic_add_fetch(&S.rids, 1, __ATOMIC_RELAXED));
    pending *p = calloc(1, sizeof *p);
    MPI_Count tsize = 0;
    if (a.type != MPI_DATATYPE_NULL) PMPI_Type_size_c(a.type, &tsize);
    *p = (pending){*req, NULL, S.sentinel, ~0ull, c.r.rid, 0, func, NULL, req, 1, c.r.comm_size, a.peer, a.tag,
                   c.r.comm_id, (c.r.present & P_COUNT) ? c.r.count : INT64_MIN, (int64_t)tsize,
                   a.type != MPI_DATATYPE_NULL ? type_id(a.type, c.str[S_DATATYPE]) : 0,
                   c.str[S_DATATYPE] ? strdup(c.str[S_DATATYPE]) : NULL};
    push_request(p);
    call_end(&c, MPI_SUCCESS);
}

int MPI_Group_free(MPI_Group *group) {
    if (!TRACED || group == NULL) return PMPI_Group_free(group);
    int found = 0;
    pthread_mutex_lock(&S.mu);
    for (int i = 0; i < n_file_groups && !found; i++)
        if (file_groups[i] == *group) { file_groups[i] = file_groups[--n_file_groups]; found = 1; }
    pthread_mutex_unlock(&S.mu);
    if (!found) return PMPI_Group_free(group);
    int64_t t0 = now_ns();
    int size;
    int64_t id = group_ident(*group, &size);
    int err = PMPI_Group_free(group);
    if (err == MPI_SUCCESS) {
        call_t c;
        call_begin(&c, F_Group_free, K_MPI);
        collective(&c, 0);
        c.r.t_start = t0;
        set_int(&c, &c.r.comm_id, P_COMM_ID, id);
        c.r.comm_size = size;
        c.r.present |= P_COMM_SIZE;
        call_end(&c, MPI_SUCCESS);
    }
    return err;
}

#define TRACE_MPI (TRACED && S.mpi)
#define MPI_WRAP(NAME, PARAMS, ARGS, DESCRIBE)                                                  \
    int MPI_##NAME PARAMS {                                                                     \
        if (!TRACE_MPI) return PMPI_##NAME ARGS;                                                \
        int64_t t0 = now_ns();                                                                  \
        int err = PMPI_##NAME ARGS;                                                             \
        if (err == MPI_SUCCESS) mpi_call(F_##NAME, comm, t0, (mpi_args_t)DESCRIBE);             \
        return err;                                                                             \
    }
#define MESSAGE_WRAP(NAME, PARAMS, ARGS, DESCRIBE)  /* (the request: q) */                     \
    int MPI_##NAME PARAMS {                                                                     \
        if (!TRACE_MPI) return PMPI_##NAME ARGS;                                                \
        int64_t t0 = now_ns();                                                                  \
        int err = PMPI_##NAME ARGS;                                                             \
        if (err == MPI_SUCCESS) message_issued(F_##NAME, comm, t0, (mpi_args_t)DESCRIBE, q);    \
        return err;                                                                             \
    }
#define COLL(ROOT, ...) {1, NONE, NONE, ROOT, __VA_ARGS__}  /* (then the count and the datatype) */
#define P2P(PEER, TAG, COUNT, TYPE) {0, PEER, TAG, NONE, COUNT, TYPE}
/* (a send argument is significant on every rank unless it is MPI_IN_PLACE, or only at the root: else the
 * receive's) */
#define SENT(S, SN, ST, RN, RT) ((S) == MPI_IN_PLACE ? (RN) : (SN)), ((S) == MPI_IN_PLACE ? (RT) : (ST))

MPI_WRAP(Barrier, (MPI_Comm comm), (comm), COLL(NONE, 0, MPI_DATATYPE_NULL))
MPI_WRAP(Bcast, (void *b, int n, MPI_Datatype t, int root, MPI_Comm comm), (b, n, t, root, comm), COLL(root, n, t))
MPI_WRAP(Allreduce, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
         (s, r, n, t, op, comm), COLL(NONE, n, t))
MPI_WRAP(Reduce, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm),
         (s, r, n, t, op, root, comm), COLL(root, n, t))
MPI_WRAP(Allgather, (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm comm),
         (s, sn, st, r, rn, rt, comm), COLL(NONE, SENT(s, sn, st, rn, rt)))
MPI_WRAP(Gather, (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root,
                  MPI_Comm comm), (s, sn, st, r, rn, rt, root, comm), COLL(root, SENT(s, sn, st, rn, rt)))
MPI_WRAP(Alltoall, (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm comm),
         (s, sn, st, r, rn, rt, comm), COLL(NONE, SENT(s, sn, st, rn, rt)))

static int comm_rank(MPI_Comm comm) { int r; PMPI_Comm_rank(comm, &r); return r; }

/* a communicator made (MPI_Comm_dup, MPI_Comm_split, ...): a collective row with its id, size and members'
 * MPI_COMM_WORLD ranks ("0,2,4"); a rank that made none (MPI_COMM_NULL) or an intercommunicator: no row */
static void comm_made(int func, int64_t t0, int err, MPI_Comm made) {
    int inter = 1;
    if (err != MPI_SUCCESS || made == MPI_COMM_NULL || PMPI_Comm_test_inter(made, &inter) != MPI_SUCCESS || inter)
        return;
    call_t c;
    call_begin(&c, func, K_MPI);
    c.r.t_start = t0;
    collective(&c, 1);
    MPI_Group g;
    PMPI_Comm_group(made, &g);
    int size;
    int *ranks = group_ranks(g, &size);
    PMPI_Group_free(&g);
    set_int(&c, &c.r.comm_id, P_COMM_ID, fnv(ranks, size));
    c.r.comm_size = size;
    c.r.present |= P_COMM_SIZE;
    char *text = malloc(12 * (size_t)size + 1);
    size_t used = 0;
    text[0] = 0;
    for (int i = 0; i < size; i++) used += (size_t)sprintf(text + used, i ? ",%d" : "%d", ranks[i]);
    free(ranks);
    own_str(&c, S_MEMBERS, text);
    call_end(&c, MPI_SUCCESS);
}

#define COMM_MADE(NAME, PARAMS, ARGS, MADE)                                                     \
    int MPI_##NAME PARAMS {                                                                     \
        if (!TRACE_MPI) return PMPI_##NAME ARGS;                                                \
        int64_t t0 = now_ns();                                                                  \
        int err = PMPI_##NAME ARGS;                                                             \
        comm_made(F_##NAME, t0, err, *(MADE));                                                  \
        return err;                                                                             \
    }
COMM_MADE(Comm_dup, (MPI_Comm comm, MPI_Comm *made), (comm, made), made)
COMM_MADE(Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *made), (comm, color, key, made), made)
COMM_MADE(Comm_split_type, (MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *made),
          (comm, type, key, info, made), made)
COMM_MADE(Comm_create, (MPI_Comm comm, MPI_Group group, MPI_Comm *made), (comm, group, made), made)
COMM_MADE(Comm_create_group, (MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *made), (comm, group, tag, made),
          made)

int MPI_Scatter(const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root,
                MPI_Comm comm) {
    if (!TRACE_MPI) return PMPI_Scatter(s, sn, st, r, rn, rt, root, comm);
    int64_t t0 = now_ns();
    int err = PMPI_Scatter(s, sn, st, r, rn, rt, root, comm);
    int at_root = comm_rank(comm) == root;  /* (the send arguments: the root's alone) */
    if (err == MPI_SUCCESS)
        mpi_call(F_Scatter, comm, t0, (mpi_args_t)COLL(root, at_root ? sn : rn, at_root ? st : rt));
    return err;
}

MPI_WRAP(Send, (const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm comm), (b, n, t, dest, tag, comm),
         P2P(dest, tag, n, t))
MPI_WRAP(Ssend, (const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm comm), (b, n, t, dest, tag, comm),
         P2P(dest, tag, n, t))
MPI_WRAP(Bsend, (const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm comm), (b, n, t, dest, tag, comm),
         P2P(dest, tag, n, t))
MPI_WRAP(Rsend, (const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm comm), (b, n, t, dest, tag, comm),
         P2P(dest, tag, n, t))
MESSAGE_WRAP(Isend, (const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request *q),
         (b, n, t, dest, tag, comm, q), P2P(dest, tag, n, t))
MESSAGE_WRAP(Issend, (const void *b, int n, MPI_Datatype t, int dest, int tag, MPI_Comm comm, MPI_Request *q),
         (b, n, t, dest, tag, comm, q), P2P(dest, tag, n, t))
#define POSTED(X, ANY) ((X) == (ANY) ? NONE : (X))  /* (a receive posted for any source or tag: null) */
MESSAGE_WRAP(Irecv, (void *b, int n, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Request *q),
         (b, n, t, source, tag, comm, q), P2P(POSTED(source, MPI_ANY_SOURCE), POSTED(tag, MPI_ANY_TAG), n, t))
MPI_WRAP(Sendrecv, (const void *sb, int sn, MPI_Datatype st, int dest, int stag, void *rb, int rn, MPI_Datatype rt,
                    int source, int rtag, MPI_Comm comm, MPI_Status *status),
         (sb, sn, st, dest, stag, rb, rn, rt, source, rtag, comm, status), P2P(dest, stag, sn, st))

/* a receive and a probe: the source and tag it matched, and what it received */
int MPI_Recv(void *b, int n, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Status *status) {
    if (!TRACE_MPI) return PMPI_Recv(b, n, t, source, tag, comm, status);
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    int64_t t0 = now_ns();
    int err = PMPI_Recv(b, n, t, source, tag, comm, st);
    if (err == MPI_SUCCESS) {
        int got = MPI_UNDEFINED;
        PMPI_Get_count(st, t, &got);
        mpi_call(F_Recv, comm, t0, (mpi_args_t)P2P(st->MPI_SOURCE, st->MPI_TAG, got, t));
    }
    return err;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
    if (!TRACE_MPI) return PMPI_Probe(source, tag, comm, status);
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    int64_t t0 = now_ns();
    int err = PMPI_Probe(source, tag, comm, st);
    if (err == MPI_SUCCESS) mpi_call(F_Probe, comm, t0, (mpi_args_t)P2P(st->MPI_SOURCE, st->MPI_TAG, 0,
                                                                       MPI_DATATYPE_NULL));
    return err;
}

/* ---- the MPI library's own communication and I/O inside a collective data call ------------------ */

#define REAL(NAME, PARAMS) static int (*real) PARAMS; if (!real) real = (int (*) PARAMS)dlsym(RTLD_NEXT, #NAME)

static int64_t type_bytes(MPI_Count count, MPI_Datatype t) {
    MPI_Count size = 0;
    PMPI_Type_size_c(t, &size);
    return (int64_t)(count * size);
}

/* an MPI call the library made inside the traced call of this thread (kind 'nested', the call's CallID;
 * t0 to t1: its times, err: what it returned) */
static void nested_call(int func, MPI_Comm comm, int64_t t0, int64_t t1, int err, mpi_args_t a) {
    call_t c;
    int depth = t_lib;
    mpi_describe(&c, func, K_NESTED, comm, t0, a);
    c.r.callid = t_lib_callid;
    c.r.t_end = t1;
    set_int(&c, &c.r.depth, P_DEPTH, depth);
    call_end(&c, err);
}

/* logged: the MPI library's calls at the depth of the traced call it runs (not the tracer's own) */
#define NESTING (S.nested && t_lib != 0 && t_lib == t_depth)

/* a communication of the library's: the phase of a collective data call it is part of (point to point
 * is the exchange; a collective is the plan before any data moved, then the exchange's, all-to-all and
 * gathers, or the wait, reductions and barriers), and a nested call when they are logged: its function,
 * communicator, what it says (mpi_args_t) and whether it is logged (a test: when it completed) */
#define COMM_(NAME, FUNC, PARAMS, ARGS, KIND, BYTES, ON, DESCRIBE, LOGGED)                     \
    int NAME PARAMS {                                                                          \
        REAL(NAME, PARAMS);                                                                    \
        int nested = NESTING;                                                                  \
        if (!t_ph.active && !nested) return real ARGS;                                         \
        int64_t t0 = now_ns();                                                                 \
        int err = real ARGS;                                                                   \
        int64_t t1 = now_ns();                                                                 \
        if (t_ph.active) phase_add(KIND, t0, t1, BYTES, 0, 0);                                 \
        if (nested && (LOGGED)) nested_call(FUNC, ON, t0, t1, err, DESCRIBE);                  \
        return err;                                                                            \
    }
#define COMM(...) COMM_(__VA_ARGS__)  /* (the shorthands below expanded first) */
#define AS_P2P(...) ((mpi_args_t)P2P(__VA_ARGS__))
#define AS_COLL(...) ((mpi_args_t)COLL(__VA_ARGS__))
#define GATHERING (t_ph.moved ? PH_EXCHANGE : PH_PLAN)
#define SYNCING (t_ph.moved ? PH_WAIT : PH_PLAN)
#define SEND(N) (b, N, t, d, tag, comm), PH_EXCHANGE, type_bytes(N, t), comm, AS_P2P(d, tag, N, t), 1
#define RECV(N) PH_EXCHANGE, 0, comm, AS_P2P(POSTED(s, MPI_ANY_SOURCE), POSTED(tag, MPI_ANY_TAG), N, t), 1
#define DONE(LOGGED) PH_EXCHANGE, 0, MPI_COMM_NULL, AS_P2P(NONE, NONE, MPI_UNDEFINED, MPI_DATATYPE_NULL), LOGGED

COMM(PMPI_Isend, F_Isend, (const void *b, int n, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r),
     (b, n, t, d, tag, comm, r), PH_EXCHANGE, type_bytes(n, t), comm, AS_P2P(d, tag, n, t), 1)
COMM(PMPI_Issend, F_Issend, (const void *b, int n, MPI_Datatype t, int d, int tag, MPI_Comm comm, MPI_Request *r),
     (b, n, t, d, tag, comm, r), PH_EXCHANGE, type_bytes(n, t), comm, AS_P2P(d, tag, n, t), 1)
COMM(PMPI_Send, F_Send, (const void *b, int n, MPI_Datatype t, int d, int tag, MPI_Comm comm), SEND(n))
COMM(PMPI_Isend_c, F_Isend, (const void *b, MPI_Count n, MPI_Datatype t, int d, int tag, MPI_Comm comm,
                             MPI_Request *r),
     (b, n, t, d, tag, comm, r), PH_EXCHANGE, type_bytes(n, t), comm, AS_P2P(d, tag, n, t), 1)
COMM(PMPI_Issend_c, F_Issend, (const void *b, MPI_Count n, MPI_Datatype t, int d, int tag, MPI_Comm comm,
                               MPI_Request *r),
     (b, n, t, d, tag, comm, r), PH_EXCHANGE, type_bytes(n, t), comm, AS_P2P(d, tag, n, t), 1)
COMM(PMPI_Send_c, F_Send, (const void *b, MPI_Count n, MPI_Datatype t, int d, int tag, MPI_Comm comm), SEND(n))
COMM(PMPI_Irecv_c, F_Irecv, (void *b, MPI_Count n, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Request *r),
     (b, n, t, s, tag, comm, r), RECV(n))
COMM(PMPI_Recv_c, F_Recv, (void *b, MPI_Count n, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Status *st),
     (b, n, t, s, tag, comm, st), RECV(n))
COMM(PMPI_Irecv, F_Irecv, (void *b, int n, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Request *r),
     (b, n, t, s, tag, comm, r), RECV(n))
COMM(PMPI_Recv, F_Recv, (void *b, int n, MPI_Datatype t, int s, int tag, MPI_Comm comm, MPI_Status *st),
     (b, n, t, s, tag, comm, st), RECV(n))
COMM(PMPI_Wait, F_Wait, (MPI_Request *r, MPI_Status *st), (r, st), DONE(1))
COMM(PMPI_Waitall, F_Waitall, (int n, MPI_Request *r, MPI_Status *st), (n, r, st), DONE(1))
COMM(PMPI_Waitany, F_Waitany, (int n, MPI_Request *r, int *i, MPI_Status *st), (n, r, i, st), DONE(1))
COMM(PMPI_Waitsome, F_Waitsome, (int n, MPI_Request *r, int *o, int *i, MPI_Status *st), (n, r, o, i, st),
     DONE(1))
COMM(PMPI_Test, F_Test, (MPI_Request *r, int *f, MPI_Status *st), (r, f, st), DONE(*f))
COMM(PMPI_Testall, F_Testall, (int n, MPI_Request *r, int *f, MPI_Status *st), (n, r, f, st), DONE(*f))
COMM(PMPI_Alltoall, F_Alltoall, (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt,
                                 MPI_Comm c),
     (s, sn, st, r, rn, rt, c), GATHERING, 0, c, AS_COLL(NONE, SENT(s, sn, st, rn, rt)), 1)
COMM(PMPI_Alltoallv, F_Alltoallv, (const void *s, const int *sn, const int *sd, MPI_Datatype st, void *r,
                                   const int *rn, const int *rd, MPI_Datatype rt, MPI_Comm c),
     (s, sn, sd, st, r, rn, rd, rt, c), GATHERING, 0, c, AS_COLL(NONE, MPI_UNDEFINED, MPI_DATATYPE_NULL), 1)
COMM(PMPI_Allgather, F_Allgather, (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt,
                                   MPI_Comm c),
     (s, sn, st, r, rn, rt, c), GATHERING, 0, c, AS_COLL(NONE, SENT(s, sn, st, rn, rt)), 1)
COMM(PMPI_Allgatherv, F_Allgatherv, (const void *s, int sn, MPI_Datatype st, void *r, const int *rn,
                                     const int *rd, MPI_Datatype rt, MPI_Comm c),
     (s, sn, st, r, rn, rd, rt, c), GATHERING, 0, c, AS_COLL(NONE, SENT(s, sn, st, MPI_UNDEFINED, rt)), 1)
COMM(PMPI_Gather, F_Gather, (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root,
                             MPI_Comm c),
     (s, sn, st, r, rn, rt, root, c), GATHERING, 0, c, AS_COLL(root, SENT(s, sn, st, rn, rt)), 1)
COMM(PMPI_Bcast, F_Bcast, (void *b, int n, MPI_Datatype t, int root, MPI_Comm c), (b, n, t, root, c), GATHERING,
     0, c, AS_COLL(root, n, t), 1)
COMM(PMPI_Allreduce, F_Allreduce, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c),
     (s, r, n, t, op, c), SYNCING, 0, c, AS_COLL(NONE, n, t), 1)
COMM(PMPI_Reduce, F_Reduce, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c),
     (s, r, n, t, op, root, c), SYNCING, 0, c, AS_COLL(root, n, t), 1)
COMM(PMPI_Barrier, F_Barrier, (MPI_Comm c), (c), SYNCING, 0, c, AS_COLL(NONE, 0, MPI_DATATYPE_NULL), 1)

/* the library's reads and writes (ROMIO's UFS driver: pread and pwrite at file offsets) */
#define POSIX_IO(NAME, BUF)                                                                    \
    ssize_t NAME(int fd, BUF buf, size_t n, off_t offset) {                                    \
        static ssize_t (*real)(int, BUF, size_t, off_t);                                       \
        if (!real) real = (ssize_t (*)(int, BUF, size_t, off_t))dlsym(RTLD_NEXT, #NAME);       \
        if (!t_ph.active) return real(fd, buf, n, offset);                                     \
        int64_t t0 = now_ns();                                                                 \
        ssize_t done = real(fd, buf, n, offset);                                               \
        phase_add(PH_IO, t0, now_ns(), 0, (int64_t)offset, (int64_t)n);                        \
        return done;                                                                           \
    }

POSIX_IO(pwrite, const void *)
POSIX_IO(pwrite64, const void *)
POSIX_IO(pread, void *)
POSIX_IO(pread64, void *)
