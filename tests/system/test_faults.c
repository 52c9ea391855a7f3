/* Faults: allocation failures at every point of create and of an epoch,
 * thread creation failing, mlock refused, short reads and EINTR, files that
 * vanish after the listing or cannot be opened or read, and 1,000
 * create/destroy cycles. This suite links a build of the library whose
 * allocations, thread creations, mlock, opens and reads go through the
 * hooks below (tests/faults/faults.h): they count the library's live
 * allocations, so every failure is also a leak check. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "../common/grow.h"
#include "../workers/fileio.h"
#include "faults/faults.h"
#include "pinload.h"
#include "testutil.h"

/* ---- the hooks ---- */

static _Atomic long live;          /* the library's allocations not freed */
static _Atomic long alloc_calls;   /* since the last arm */
static _Atomic long fail_alloc_at; /* fail this call (1-based), 0: never */
static _Atomic int fail_allocs;    /* 1: fail every call */
static _Atomic long failed_allocs; /* failures delivered */
static _Atomic int fail_thread_at; /* fail this pthread_create, 0: never */
static _Atomic int thread_calls;
static _Atomic int refuse_mlock;
static _Atomic int chop_reads; /* EINTR and short reads on regular files */
static _Atomic unsigned read_calls;
/* Set before pl_loader_create, read by the workers: open() of a file whose
 * path ends so fails with EACCES (a file made unreadable after the
 * listing); read() of the other fails with EIO (a failing disk). */
static char deny_open[64], fail_read[64];
/* open() of the file whose path ends so fails with EMFILE, the next
 * `emfile_times` times (a process out of descriptors); -1: always. */
static char emfile_open[64];
static _Atomic int emfile_times;

static int should_fail_alloc(void)
{
    const long n = ++alloc_calls;
    if (fail_allocs || (fail_alloc_at && n == fail_alloc_at)) {
        failed_allocs++;
        return 1;
    }
    return 0;
}

static void *counted(void *p)
{
    if (p)
        live++;
    return p;
}

void *fault_malloc(size_t n)
{
    return should_fail_alloc() ? NULL : counted(malloc(n));
}

void *fault_calloc(size_t n, size_t size)
{
    return should_fail_alloc() ? NULL : counted(calloc(n, size));
}

void *fault_realloc(void *p, size_t n)
{
    if (should_fail_alloc())
        return NULL;
    void *q = realloc(p, n);
    if (q && !p)
        live++;
    return q;
}

void *fault_aligned_alloc(size_t align, size_t n)
{
    return should_fail_alloc() ? NULL : counted(aligned_alloc(align, n));
}

void fault_free(void *p)
{
    if (p)
        live--;
    free(p);
}

char *fault_strdup(const char *s)
{
    return should_fail_alloc() ? NULL : counted(strdup(s));
}

char *fault_strndup(const char *s, size_t n)
{
    return should_fail_alloc() ? NULL : counted(strndup(s, n));
}

ssize_t fault_getline(char **line, size_t *cap, FILE *f)
{
    const int fresh = *line == NULL;
    const ssize_t n = getline(line, cap, f);
    if (fresh && *line)
        live++;
    return n;
}

int fault_pthread_create(pthread_t *t, const pthread_attr_t *attr,
                         void *(*fn)(void *), void *arg)
{
    const int n = ++thread_calls;
    if (fail_thread_at && n == fail_thread_at)
        return EAGAIN;
    return pthread_create(t, attr, fn, arg);
}

int fault_mlock(const void *p, size_t n)
{
    if (refuse_mlock) {
        errno = EPERM;
        return -1;
    }
    return mlock(p, n);
}

static int ends_with(const char *s, const char *tail)
{
    const size_t a = strlen(s), b = strlen(tail);
    return b && a >= b && !strcmp(s + a - b, tail);
}

int fault_openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & O_CREAT) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    if (ends_with(path, deny_open)) {
        errno = EACCES;
        return -1;
    }
    if (ends_with(path, emfile_open)) {
        int left = emfile_times;
        while (left > 0 &&
               !atomic_compare_exchange_weak(&emfile_times, &left, left - 1))
            ;
        if (left != 0) {
            errno = EMFILE;
            return -1;
        }
    }
    return openat(dirfd, path, flags, mode);
}

ssize_t fault_read(int fd, void *buf, size_t n)
{
    if (fail_read[0]) {
        char link[64], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        const ssize_t k = readlink(link, target, sizeof target - 1);
        if (k > 0) {
            target[k] = 0;
            if (ends_with(target, fail_read)) {
                errno = EIO;
                return -1;
            }
        }
    }
    struct stat st;
    if (chop_reads && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        const unsigned c = ++read_calls;
        if (c % 3 == 0) {
            errno = EINTR;
            return -1;
        }
        if (n > 7)
            n = 1 + c % 7;
    }
    return read(fd, buf, n);
}

static void disarm(void)
{
    fail_alloc_at = 0;
    fail_allocs = 0;
    fail_thread_at = 0;
    refuse_mlock = 0;
    chop_reads = 0;
    deny_open[0] = 0;
    fail_read[0] = 0;
    emfile_open[0] = 0;
    emfile_times = 0;
}

/* ---- fixtures ---- */

typedef struct notes {
    pthread_mutex_t mu;
    int count;
    char last[1024];
} notes;

static void keep_notes(void *ctx, pl_log_level level, const char *msg)
{
    notes *n = ctx;
    (void)level;
    pthread_mutex_lock(&n->mu);
    n->count++;
    snprintf(n->last, sizeof n->last, "%s", msg);
    pthread_mutex_unlock(&n->mu);
}

static void quiet(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx;
    (void)level;
    (void)msg;
}

static void make_data(char root[64], int n)
{
    tu_tmpdir(root);
    char path[256];
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/c%d/%02d.jpg", root, i % 2, i);
        tu_write_jpeg(path, 40 + i, 30 + i, (unsigned)i, NULL);
    }
}

static pl_config config(const char *root)
{
    pl_config c;
    pl_config_default(&c);
    c.data = root;
    c.device = PL_DEVICE_HOST;
    c.batch_size = 4;
    c.width = 16;
    c.height = 16;
    c.num_workers = 2;
    c.shuffle = 0;
    c.log = quiet;
    return c;
}

/* One epoch: [out] *samples delivered; returns next's last status. */
static int run_epoch(pl_loader *l, int *samples)
{
    const pl_batch *b;
    int rc;
    *samples = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        *samples += b->count;
        pl_loader_release(l, b, NULL);
    }
    return rc;
}

/* Every sample's bytes of one epoch, in order. */
static uint8_t *epoch_bytes(const pl_config *c, size_t *len)
{
    pl_loader *l;
    cr_assert_eq(pl_loader_create(c, &l), 0, "%s", pl_last_error());
    uint8_t *out = NULL;
    *len = 0;
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        out = realloc(out, *len + b->bytes);
        memcpy(out + *len, b->host, b->bytes);
        *len += b->bytes;
        pl_loader_release(l, b, NULL);
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    pl_loader_destroy(l);
    return out;
}

/* ---- allocation failures ---- */

/* Fail the first, second, ... allocation after create begins, in any of the
 * loader's threads, until a create and an epoch run without meeting the
 * failure. Each time: create fails with PL_ENOMEM and a reason, or succeeds
 * (the failure then hit a worker: that sample is recorded as failed) and
 * the epoch ends; either way no allocation outlives destroy. */
Test(faults, every_allocation_failure_fails_cleanly_and_leaks_nothing,
     .timeout = 300)
{
    char root[64];
    make_data(root, 10);
    const pl_config c = config(root);
    int create_failures = 0, sample_failures = 0;
    long n;
    for (n = 1; n < 5000; n++) {
        const long before = live;
        failed_allocs = 0;
        alloc_calls = 0;
        fail_alloc_at = n;
        pl_loader *l = NULL;
        const int rc = pl_loader_create(&c, &l);
        if (rc < 0) {
            cr_assert_eq(rc, PL_ENOMEM, "allocation %ld: %s (%s)", n,
                         pl_err_name(rc), pl_last_error());
            cr_assert_null(l);
            cr_assert(strstr(pl_last_error(), "out of memory") ||
                          strstr(pl_last_error(), "memory"),
                      "allocation %ld: %s", n, pl_last_error());
            create_failures++;
        } else {
            int samples;
            cr_assert_eq(run_epoch(l, &samples), PL_EPOCH_END,
                         "allocation %ld: %s", n, pl_last_error());
            pl_stats st;
            pl_loader_stats(l, &st);
            /* A failure in a worker costs that sample alone (skipped);
             * images_failed may also count one met while the workers ran
             * ahead into the next epoch. */
            cr_assert(samples <= 10 &&
                          (uint64_t)samples + st.images_failed >= 10,
                      "allocation %ld: %d delivered, %llu failed", n, samples,
                      (unsigned long long)st.images_failed);
            sample_failures += st.images_failed > 0;
            pl_loader_destroy(l);
        }
        const long hit = failed_allocs;
        disarm();
        cr_assert_eq(live, before,
                     "allocation %ld failed: %ld allocation(s) "
                     "leaked",
                     n, live - before);
        if (hit == 0)
            break; /* past the last allocation of create and an epoch */
    }
    cr_assert_lt(n, 5000);
    cr_assert_gt(create_failures, 10, "only %d failing creates",
                 create_failures);
    cr_assert_gt(sample_failures, 10, "only %d failing samples",
                 sample_failures);
    cr_log_info("%ld allocation points: %d failed create, %d failed a sample",
                n - 1, create_failures, sample_failures);
    tu_rm_rf(root);
}

/* The caller holds the only buffer and asks for more while no memory can
 * be had: PL_EBUSY saying why, nothing lost or leaked; with memory back,
 * the same call grows the pool and the epoch goes on in order. */
Test(faults, a_pool_that_cannot_grow_is_ebusy_saying_why, .timeout = 60)
{
    char root[64];
    make_data(root, 10);
    pl_config c = config(root);
    c.device_buffers = 1;
    c.max_device_buffers = -1;
    c.prefetch = 1;
    const long before = live;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    const pl_batch *b0, *b;
    cr_assert_eq(pl_loader_next(l, &b0), 0, "%s", pl_last_error());
    usleep(200000); /* the workers wait for the ring's only slot */
    fail_allocs = 1;
    const int rc = pl_loader_next(l, &b);
    fail_allocs = 0;
    cr_assert_eq(rc, PL_EBUSY, "%s (%s)", pl_err_name(rc), pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), "cannot be had (out of memory"),
                       "%s", pl_last_error());
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.device_buffers, 1);
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    cr_assert_eq(b->index, 1);
    cr_assert_eq(b->indices[0], 4);
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.device_buffers, 2);
    pl_loader_destroy(l);
    disarm();
    cr_assert_eq(live, before, "%ld allocation(s) leaked", live - before);
    tu_rm_rf(root);
}

/* ---- threads, mlock ---- */

Test(faults, a_thread_that_cannot_start_fails_create_cleanly, .timeout = 60)
{
    char root[64];
    make_data(root, 6);
    pl_config c = config(root);
    c.num_workers = 3;
    /* The prefetcher and three workers: four threads, each refused once. */
    for (int k = 1; k <= 4; k++) {
        const long before = live;
        thread_calls = 0;
        fail_thread_at = k;
        pl_loader *l = NULL;
        const int rc = pl_loader_create(&c, &l);
        disarm();
        cr_assert_eq(rc, PL_ETHREAD, "thread %d: %s", k, pl_err_name(rc));
        cr_assert_null(l);
        cr_assert_not_null(strstr(pl_last_error(), "thread"), "%s",
                           pl_last_error());
        cr_assert_eq(live, before, "thread %d: %ld leaked", k, live - before);
    }
    tu_rm_rf(root);
}

Test(faults, refused_mlock_falls_back_or_fails_as_configured, .timeout = 60)
{
    char root[64];
    make_data(root, 6);
    notes nt = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pl_config c = config(root);
    c.log = keep_notes;
    c.log_ctx = &nt;
    refuse_mlock = 1;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    cr_assert_eq(info.pinned, 0);
    pl_stats st;
    pl_loader_stats(l, &st);
    cr_assert_eq(st.pinned_bytes, 0);
    int samples;
    cr_assert_eq(run_epoch(l, &samples), PL_EPOCH_END);
    cr_assert_eq(samples, 6);
    pl_loader_destroy(l);
    cr_assert_eq(nt.count, 2, "the fallback notice and the backend notice");
    c.pinned_fallback = 0;
    const long before = live;
    cr_assert_eq(pl_loader_create(&c, &l), PL_ENOMEM);
    cr_assert_not_null(strstr(pl_last_error(), "mlock"), "%s", pl_last_error());
    cr_assert_not_null(strstr(pl_last_error(), "not permitted"), "%s",
                       pl_last_error());
    cr_assert_eq(live, before);
    disarm();
    tu_rm_rf(root);
}

/* ---- the read path ---- */

Test(faults, short_reads_and_eintr_change_no_byte, .timeout = 60)
{
    char root[64];
    make_data(root, 12);
    const pl_config c = config(root);
    size_t n0, n1;
    uint8_t *calm = epoch_bytes(&c, &n0);
    chop_reads = 1;
    read_calls = 0;
    uint8_t *chopped = epoch_bytes(&c, &n1);
    const unsigned reads = read_calls;
    disarm();
    cr_assert_gt(reads, 100, "only %u reads were chopped", reads);
    cr_assert_eq(n0, n1);
    cr_assert_arr_eq(calm, chopped, n0);
    free(calm);
    free(chopped);
    tu_rm_rf(root);
}

/* A file removed after the listing, and a directory a list file names as
 * an image, are errors of their own samples, named, under the policy. */
Test(faults, files_that_vanish_or_are_directories_fail_alone, .timeout = 60)
{
    char root[64], list[128], gone[128];
    make_data(root, 30);
    snprintf(list, sizeof list, "%s/list.txt", root);
    snprintf(gone, sizeof gone, "%s/c0/24.jpg", root);
    FILE *f = fopen(list, "w");
    for (int i = 0; i < 30; i++)
        fprintf(f, "c%d/%02d.jpg %d\n", i % 2, i, i % 2);
    fprintf(f, "c1 1\n"); /* a directory */
    fclose(f);
    pl_config c = config(list);
    c.prefetch = 1;
    c.device_buffers = 1;
    c.num_workers = 1;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    cr_assert_eq(unlink(gone), 0); /* long before its turn */
    int samples;
    cr_assert_eq(run_epoch(l, &samples), PL_EPOCH_END, "%s", pl_last_error());
    /* 31 listed, 2 bad: their places go to good samples (equal steps). */
    cr_assert_eq(samples, 31);
    pl_failure fl[4];
    size_t n;
    pl_loader_failures(l, 0, fl, 4, &n);
    cr_assert_eq(n, 2);
    int saw_gone = 0, saw_dir = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(fl[i].code, PL_EIO);
        if (strstr(fl[i].path, "24.jpg"))
            saw_gone = strstr(fl[i].reason, "No such file") != NULL;
        else
            saw_dir = strstr(fl[i].reason, "directory") != NULL;
    }
    cr_assert(saw_gone && saw_dir, "%s: %s / %s: %s", fl[0].path, fl[0].reason,
              fl[1].path, fl[1].reason);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* A file that cannot be opened (permission taken away after the listing)
 * and one whose reads fail (a bad disk) are each their sample's error,
 * named with the reason, under every policy. */
Test(faults, unreadable_files_fail_alone_with_the_reason, .timeout = 60)
{
    char root[64];
    make_data(root, 12);
    snprintf(deny_open, sizeof deny_open, "c0/04.jpg");
    snprintf(fail_read, sizeof fail_read, "c1/07.jpg");
    pl_config c = config(root);
    const pl_on_error policies[] = {PL_ON_ERROR_SKIP, PL_ON_ERROR_SUBSTITUTE,
                                    PL_ON_ERROR_FAIL};
    for (int p = 0; p < 3; p++) {
        c.on_error = policies[p];
        pl_loader *l;
        cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
        int samples;
        const int rc = run_epoch(l, &samples);
        if (c.on_error == PL_ON_ERROR_FAIL) {
            /* Files in order: c0/04.jpg is the third of class c0. */
            cr_assert_eq(rc, PL_EIO, "%s", pl_err_name(rc));
            cr_assert_not_null(strstr(pl_last_error(), "c0/04.jpg"), "%s",
                               pl_last_error());
            cr_assert_not_null(strstr(pl_last_error(), "Permission denied"),
                               "%s", pl_last_error());
            pl_loader_destroy(l);
            continue;
        }
        cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
        /* Skip gives the bad files' places to good ones, so both deliver 12. */
        cr_assert_eq(samples, 12);
        pl_failure fl[4];
        size_t n;
        pl_loader_failures(l, 0, fl, 4, &n);
        cr_assert_eq(n, 2);
        for (size_t i = 0; i < n; i++) {
            cr_assert_eq(fl[i].code, PL_EIO);
            const int denied = ends_with(fl[i].path, "c0/04.jpg");
            cr_assert(denied || ends_with(fl[i].path, "c1/07.jpg"), "%s",
                      fl[i].path);
            cr_assert_str_eq(fl[i].reason, denied ? "open: Permission denied"
                                                  : "read: Input/output error");
        }
        pl_loader_destroy(l);
    }
    disarm();
    tu_rm_rf(root);
}

/* Out of file descriptors for a while (EMFILE three times): retried, so
 * no good file is recorded as bad and every sample is delivered. */
Test(faults, a_passing_lack_of_descriptors_blames_no_file, .timeout = 60)
{
    char root[64];
    make_data(root, 12);
    snprintf(emfile_open, sizeof emfile_open, "c1/05.jpg");
    emfile_times = 3;
    pl_config c = config(root);
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    int samples;
    cr_assert_eq(run_epoch(l, &samples), PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(samples, 12);
    cr_assert_eq(emfile_times, 0, "the three failures were met");
    size_t n;
    pl_failure f[1];
    pl_loader_failures(l, 0, f, 1, &n);
    cr_assert_eq(n, 0, "%s recorded as bad", n ? f[0].path : "");
    pl_loader_destroy(l);
    disarm();
    tu_rm_rf(root);
}

/* Out of descriptors for good: under every policy the loader fails with
 * the real reason, naming the file it was opening, and records no file
 * as bad (skipping would drop good files at random). */
Test(faults, a_lasting_lack_of_descriptors_fails_the_loader_not_the_file,
     .timeout = 60)
{
    char root[64];
    make_data(root, 12);
    snprintf(emfile_open, sizeof emfile_open, "c0/06.jpg");
    pl_config c = config(root);
    const pl_on_error policies[] = {PL_ON_ERROR_SKIP, PL_ON_ERROR_SUBSTITUTE,
                                    PL_ON_ERROR_FAIL};
    for (int p = 0; p < 3; p++) {
        emfile_times = -1;
        c.on_error = policies[p];
        pl_loader *l;
        cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
        int samples;
        const int rc = run_epoch(l, &samples);
        cr_assert_eq(rc, PL_EIO, "policy %d: %s", p, pl_err_name(rc));
        const char *e = pl_last_error();
        cr_assert_not_null(strstr(e, "c0/06.jpg"), "%s", e);
        cr_assert_not_null(strstr(e, "Too many open files"), "%s", e);
        cr_assert_not_null(strstr(e, "not this file's fault"), "%s", e);
        cr_assert_lt(samples, 12, "policy %d delivered the whole epoch", p);
        size_t n;
        pl_failure f[1];
        pl_loader_failures(l, 0, f, 1, &n);
        cr_assert_eq(n, 0, "policy %d recorded %s as bad", p,
                     n ? f[0].path : "");
        pl_loader_destroy(l);
    }
    disarm();
    tu_rm_rf(root);
}

/* A FIFO named like a JPEG: refused as that sample's error at once; before,
 * a worker blocked for ever in open() and destroy with it. */
Test(faults, a_fifo_named_like_a_jpeg_fails_alone_without_blocking,
     .timeout = 30)
{
    char root[64], fifo[128];
    make_data(root, 12);
    snprintf(fifo, sizeof fifo, "%s/c0/99.jpg", root);
    cr_assert_eq(mkfifo(fifo, 0600), 0, "mkfifo: %s", strerror(errno));
    pl_config c = config(root);
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    int samples;
    cr_assert_eq(run_epoch(l, &samples), PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_eq(samples, 13, "skip fills the FIFO's place");
    size_t n;
    pl_failure f[2];
    pl_loader_failures(l, 0, f, 2, &n);
    cr_assert_eq(n, 1);
    cr_assert(ends_with(f[0].path, "c0/99.jpg"), "%s", f[0].path);
    cr_assert_str_eq(f[0].reason, "not a regular file (a FIFO)");
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* A worker's file buffer grown for one large file is not kept for the
 * small ones after it (a file near max_file_bytes once left each worker
 * holding its size until destroy). */
Test(faults, a_large_files_buffer_is_not_kept_for_the_next_small_one)
{
    char root[64], big[128], small[128];
    tu_tmpdir(root);
    snprintf(big, sizeof big, "%s/big.jpg", root);
    snprintf(small, sizeof small, "%s/small.jpg", root);
    const size_t n = GROW_KEEP_BYTES + (8 << 20);
    uint8_t *bytes = calloc(1, n);
    tu_write_file(big, bytes, n);
    tu_write_file(small, bytes, 1000);
    free(bytes);
    fileio_buf b = {0};
    char reason[256];
    cr_assert_eq(
        fileio_read(AT_FDCWD, big, (int64_t)n, &b, reason, sizeof reason), 0,
        "%s", reason);
    cr_assert_eq(b.len, n);
    cr_assert_geq(b.cap, n);
    cr_assert_eq(
        fileio_read(AT_FDCWD, small, (int64_t)n, &b, reason, sizeof reason), 0,
        "%s", reason);
    cr_assert_eq(b.len, 1000);
    cr_assert_leq(b.cap, GROW_KEEP_BYTES, "kept %zu bytes", b.cap);
    fileio_buf_free(&b);
    tu_rm_rf(root);
}

/* ---- life cycle ---- */

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

/* 1,000 create/destroy cycles, some after taking a batch: file
 * descriptors and the library's live allocations return to where they
 * were, and resident memory grows by no more than allocator slack. */
Test(faults, a_thousand_create_destroy_cycles_leave_fds_and_memory_flat,
     .timeout = 300)
{
    char root[64];
    make_data(root, 6);
    const pl_config c = config(root);
    /* A first cycle warms up libc and libjpeg. */
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0);
    pl_loader_destroy(l);
    const int fds = open_fds();
    const long before = live, rss = rss_kb();
    for (int i = 0; i < 1000; i++) {
        cr_assert_eq(pl_loader_create(&c, &l), 0, "cycle %d: %s", i,
                     pl_last_error());
        if (i % 3 == 0) {
            const pl_batch *b;
            if (pl_loader_next(l, &b) == 0 && i % 2)
                pl_loader_release(l, b, NULL);
        }
        pl_loader_destroy(l);
    }
    cr_assert_eq(open_fds(), fds, "file descriptors leaked");
    cr_assert_eq(live, before, "%ld allocation(s) leaked", live - before);
    const long grown = rss_kb() - rss;
    /* A sanitizer keeps freed memory in quarantine (ASan: 256 MB), so
     * there resident memory says nothing; the live count above still
     * holds. */
    if (!TU_SANITIZED)
        cr_assert_lt(grown, 16 * 1024, "resident memory grew by %ld kB", grown);
    cr_log_info("1000 cycles: fds %d, resident memory +%ld kB", fds, grown);
    tu_rm_rf(root);
}
