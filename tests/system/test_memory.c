/* Memory that grows with the dataset: what creating a loader over many
 * samples costs per sample, at its peak (indexing) and after, and how
 * much of it is the process's own (anonymous: RssAnon) rather than the
 * page cache's shared pages of the mapped shard indexes. The figures of
 * docs/BENCHMARKS.md ("Memory") come from the same measure at 500,000
 * and 2,000,000 samples (PINLOAD_MEMORY_SAMPLES=2000000 runs this suite
 * at that size); this suite holds them at 100,000, with a margin, so that
 * a change that doubles them fails. Criterion runs each test in its own
 * process: VmHWM is the test's own. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../tools/tarwrite.h"
#include "pinload.h"
#include "testremote.h"
#include "testutil.h"

#define PER_SHARD 200
#define SAMPLES 100000 /* 500 shards; PINLOAD_MEMORY_SAMPLES for others */

static int SHARDS = SAMPLES / PER_SHARD;

/* The samples the suite measures at: PINLOAD_MEMORY_SAMPLES, or SAMPLES. */
static void size_from_env(void)
{
    const char *e = getenv("PINLOAD_MEMORY_SAMPLES");
    const long n = e ? atol(e) : 0;
    SHARDS = (int)((n > 0 ? n : SAMPLES) / PER_SHARD);
    if (SHARDS < 1)
        SHARDS = 1;
}

static void member(FILE *f, const char *name, const void *data, size_t len)
{
    cr_assert_gt(tarw_member(f, name, data, len), 0, "%s: write failed", name);
}

/* `shards` shards of PER_SHARD samples (one small JPEG, KEY.jpg +
 * KEY.cls) under root. */
static void make_n_shards(const char *root, int shards)
{
    char path[256];
    snprintf(path, sizeof path, "%s/one.jpg", root);
    tu_write_jpeg(path, 16, 16, 7, NULL);
    size_t jlen;
    uint8_t *jpeg = tu_read_file(path, &jlen);
    unlink(path);
    long key = 0;
    for (int s = 0; s < shards; s++) {
        snprintf(path, sizeof path, "%s/shard-%06d.tar", root, s);
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f);
        for (int k = 0; k < PER_SHARD; k++, key++) {
            char name[32], cls[16];
            snprintf(name, sizeof name, "%09ld.jpg", key);
            member(f, name, jpeg, jlen);
            snprintf(name, sizeof name, "%09ld.cls", key);
            const int n = snprintf(cls, sizeof cls, "%ld", key % 100);
            member(f, name, cls, (size_t)n);
        }
        cr_assert_eq(tarw_end(f), 0);
        fclose(f);
    }
    free(jpeg);
}

static void make_shards(const char *root)
{
    make_n_shards(root, SHARDS);
}

/* What create and one batch added, in bytes per sample: at the peak
 * (VmHWM), resident (VmRSS, the mapped indexes' pages included) and the
 * process's own (RssAnon). */
typedef struct cost {
    double peak, after, anon;
} cost;

/* Create over the shards (in `order`) and take one batch. */
static cost per_sample(const char *root, pl_order order)
{
    pl_config c;
    pl_config_default(&c);
    c.data = root;
    c.device = PL_DEVICE_HOST;
    c.batch_size = 64;
    c.width = c.height = 16;
    c.num_workers = 2;
    c.rank = 0;
    c.world_size = 1;
    c.log = quiet;
    c.order = order;
    const long before = tu_status_kib("VmRSS"), anon = tu_status_kib("RssAnon");
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    pl_loader_release(l, b, NULL);
    const double n = (double)SHARDS * PER_SHARD;
    const cost k = {
        .peak = (double)(tu_status_kib("VmHWM") - before) * 1024.0 / n,
        .after = (double)(tu_status_kib("VmRSS") - before) * 1024.0 / n,
        .anon = (double)(tu_status_kib("RssAnon") - anon) * 1024.0 / n};
    pl_loader_destroy(l);
    return k;
}

/* Measured on machine A at 100,000 samples in 500 shards: 120 bytes a
 * sample resident and 132 at the peak, since the shards' indexes (about
 * 100 bytes a member while they live) are held a window of 64 shards at a
 * time; holding them all, as create did before, made the peak 315. The
 * bounds leave room for allocator noise and fail at that old peak. */
Test(memory, indexing_shards_costs_at_most_200_bytes_a_sample_at_its_peak,
     .timeout = 300)
{
    if (TU_SANITIZED)
        cr_skip_test("a sanitizer's shadow memory and redzones are not the "
                     "loader's: measured in plain builds");
    size_from_env();
    char root[64];
    tu_tmpdir(root);
    make_shards(root);
    const cost k = per_sample(root, PL_ORDER_GLOBAL); /* .idx written */
    cr_log_info("headers: %.0f bytes a sample at the peak, %.0f after, %.1f "
                "of them private",
                k.peak, k.after, k.anon);
    cr_assert_lt(k.peak, 200, "%.0f bytes a sample at the peak", k.peak);
    cr_assert_lt(k.after, 180, "%.0f bytes a sample resident", k.after);
    tu_rm_rf(root);
}

/* In a child process, whose heap no loader has used (what a loader freed
 * stays the allocator's, and a later create reuses it unseen): create over
 * root in `order` and take a batch. The private (anonymous) KiB that
 * added. */
static long private_kib_in_child(const char *root, pl_order order)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        pl_config c;
        pl_config_default(&c);
        c.data = root;
        c.device = PL_DEVICE_HOST;
        c.batch_size = 64;
        c.width = c.height = 16;
        c.num_workers = 2;
        c.log = quiet;
        c.order = order;
        c.on_error = PL_ON_ERROR_SUBSTITUTE; /* the files may be empty */
        const long before = tu_status_kib("RssAnon");
        long kib = -1;
        pl_loader *l;
        const pl_batch *b;
        if (pl_loader_create(&c, &l) == 0) {
            if (pl_loader_next(l, &b) == 0) {
                pl_loader_release(l, b, NULL);
                kib = tu_status_kib("RssAnon") - before;
            }
            pl_loader_destroy(l);
        }
        _exit(write(fd[1], &kib, sizeof kib) == sizeof kib ? 0 : 1);
    }
    close(fd[1]);
    long kib = -1;
    cr_assert_eq(read(fd[0], &kib, sizeof kib), (ssize_t)sizeof kib);
    close(fd[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert_geq(kib, 0, "%s: the child's loader failed", root);
    return kib;
}

/* Private bytes a sample: what a loader over SHARDS shards adds beyond
 * one over a single shard (a fixed cost: threads, the ring, libraries'
 * state, about 430 KiB on machine B), over the samples between. */
static double slope(long big_kib, long one_kib)
{
    return (double)(big_kib - one_kib) * 1024.0 /
           ((double)(SHARDS - 1) * PER_SHARD);
}

/* `shards` * PER_SHARD empty files under root, PER_SHARD to a class
 * folder ("c000/000000001.jpg": names matter here, not bytes), and
 * root.txt listing them by their absolute paths (named as the folder's
 * are). */
static void make_files(const char *root, int shards)
{
    char p[256], list[128];
    snprintf(list, sizeof list, "%s.txt", root);
    FILE *l = fopen(list, "w");
    cr_assert_not_null(l);
    long key = 0;
    for (int s = 0; s < shards; s++)
        for (int k = 0; k < PER_SHARD; k++, key++) {
            snprintf(p, sizeof p, "%s/c%03d/%09ld.jpg", root, s, key);
            tu_write_file(p, "", 0);
            fprintf(l, "%s %d\n", p, s);
        }
    fclose(l);
}

/* Measured on machine A at 100,000 samples in 500 shards, the tables read
 * from their files (issue 34): 1.8 to 2.5 private (anonymous) bytes a
 * sample in either order once the indexes exist, 3.9 to 5.1 on the
 * create that writes them; the heap catalog kept about 100 (a name, a
 * range and a label per sample). About 1.4 of it is a shard's own (its
 * table's struct, its index file's name and descriptor, its name and
 * first sample: about 270 bytes a shard), the rest the scan threads'
 * arenas. While create's copies of the tables came from malloc they
 * cost 7.4 to 8.8 and 14.3 to 15.4: sample_table_bytes says why. The
 * issue's goal is at most 16 a sample; the bounds hold it with a margin
 * for allocator noise. The rest of what is resident is the page cache's
 * (the tables' files), one copy for a node's ranks. */
/* Both orders' private bytes a sample over root's shards (less one's),
 * each below `bound`; `what` starts the log lines. */
static void assert_orders_private_below(const char *root, const char *one,
                                        const char *what, double bound)
{
    const pl_order orders[] = {PL_ORDER_GLOBAL, PL_ORDER_SHARDS};
    for (int o = 0; o < 2; o++) {
        const double k = slope(private_kib_in_child(root, orders[o]),
                               private_kib_in_child(one, orders[o]));
        cr_log_info("%s%s order: %.1f private bytes a sample", what,
                    o ? "shard" : "exact", k);
        cr_assert_lt(k, bound, "%s%s order: %.1f private bytes a sample", what,
                     o ? "shard" : "exact", k);
    }
}

Test(memory, shard_samples_cost_at_most_16_private_bytes_in_either_order,
     .timeout = 600)
{
    if (TU_SANITIZED)
        cr_skip_test("a sanitizer's shadow memory and redzones are not the "
                     "loader's: measured in plain builds");
    size_from_env();
    char root[64], one[64];
    tu_tmpdir(root);
    tu_tmpdir(one);
    make_shards(root);
    make_n_shards(one, 1);
    /* The first creates write the .idx files. */
    const double first = slope(private_kib_in_child(root, PL_ORDER_GLOBAL),
                               private_kib_in_child(one, PL_ORDER_GLOBAL));
    cr_log_info("first create (indexing): %.1f private bytes a sample", first);
    cr_assert_lt(first, 16, "indexing: %.1f private bytes a sample", first);
    assert_orders_private_below(root, one, "", 4);
    tu_rm_rf(one);
    tu_rm_rf(root);
}

/* Past the mapped-table limit (SHARDS_MAPPED_MAX, lowered to 16 by the
 * test hook PINLOAD_MAPPED_MAX) the tables come from one dataset table
 * file, mapped once: the private bytes a sample stay those of the mapped
 * tables, where holding them in the heap (what every shard past the
 * limit cost before, and still costs where no index folder is writable)
 * is about 96. Measured on machine B at 100,000 samples in 500 shards:
 * see docs/BENCHMARKS.md. */
Test(memory, past_the_mapping_limit_shard_samples_stay_shared, .timeout = 600)
{
    if (TU_SANITIZED)
        cr_skip_test("a sanitizer's shadow memory and redzones are not the "
                     "loader's: measured in plain builds");
    size_from_env();
    char root[64], one[64], idx[64], nowhere[128];
    tu_tmpdir(root);
    tu_tmpdir(one);
    tu_tmpdir(idx);
    make_shards(root);
    make_n_shards(one, 1);
    setenv("PINLOAD_MAPPED_MAX", "16", 1);
    setenv("PINLOAD_INDEX_DIR", idx, 1);
    const double first = slope(private_kib_in_child(root, PL_ORDER_GLOBAL),
                               private_kib_in_child(one, PL_ORDER_GLOBAL));
    cr_log_info("one table file, first create (writing it): %.1f private "
                "bytes a sample",
                first);
    cr_assert_lt(first, 16, "writing: %.1f private bytes a sample", first);
    assert_orders_private_below(root, one, "one table file, ", 4);
    /* No index folder takes a file (it lies under a file): the tables in
     * the heap, what this costs without the table file. */
    snprintf(nowhere, sizeof nowhere, "%s/file", idx);
    tu_write_file(nowhere, "", 0);
    snprintf(nowhere, sizeof nowhere, "%s/file/sub", idx);
    setenv("PINLOAD_INDEX_DIR", nowhere, 1);
    const double heap = slope(private_kib_in_child(root, PL_ORDER_GLOBAL),
                              private_kib_in_child(one, PL_ORDER_GLOBAL));
    cr_log_info("tables in the heap (no index folder): %.1f private bytes a "
                "sample",
                heap);
    cr_assert_gt(heap, 32, "the heap tables: %.1f bytes a sample", heap);
    unsetenv("PINLOAD_INDEX_DIR");
    tu_rm_rf(idx);
    unsetenv("PINLOAD_MAPPED_MAX");
    tu_rm_rf(one);
    tu_rm_rf(root);
}

/* Folders and list files keep their catalog per sample: each name, as the
 * user would write it (its folder included), and a label. Measured on
 * machine B at 100,000 samples with 43-character names: 58.0 private
 * bytes a sample for the folder and 57.2 for the list file (the same
 * names); the bound fails if that doubles. */
Test(memory, folders_and_lists_cost_their_names_a_sample, .timeout = 600)
{
    if (TU_SANITIZED)
        cr_skip_test("a sanitizer's shadow memory and redzones are not the "
                     "loader's: measured in plain builds");
    size_from_env();
    char root[64], one[64], list[128], one_list[128];
    tu_tmpdir(root);
    tu_tmpdir(one);
    make_files(root, SHARDS);
    make_files(one, 1);
    snprintf(list, sizeof list, "%s.txt", root);
    snprintf(one_list, sizeof one_list, "%s.txt", one);
    const double folder = slope(private_kib_in_child(root, PL_ORDER_GLOBAL),
                                private_kib_in_child(one, PL_ORDER_GLOBAL));
    const double listed =
        slope(private_kib_in_child(list, PL_ORDER_GLOBAL),
              private_kib_in_child(one_list, PL_ORDER_GLOBAL));
    char name[128];
    const int len = snprintf(name, sizeof name, "%s/c000/000000000.jpg", root);
    cr_log_info("%d-character names: %.1f private bytes a sample for a "
                "folder, %.1f for a list file",
                len, folder, listed);
    cr_assert_lt(folder, 2 * (len + 13), "folder: %.1f", folder);
    cr_assert_lt(listed, 2 * (len + 13), "list file: %.1f", listed);
    unlink(list);
    unlink(one_list);
    tu_rm_rf(one);
    tu_rm_rf(root);
}

/* RssAnon, read every millisecond by a thread until told to stop: the
 * private peak of what the process does meanwhile (a peak shorter than a
 * millisecond may be missed: the measure can only err low). */
typedef struct anon_watch {
    atomic_int stop;
    long max_kib;
} anon_watch;

static void *watch_anon(void *arg)
{
    anon_watch *w = arg;
    while (!atomic_load(&w->stop)) {
        const long k = tu_status_kib("RssAnon");
        if (k > w->max_kib)
            w->max_kib = k;
        usleep(1000);
    }
    return NULL;
}

/* Peaks of a remote create, in KiB over the process's before it: VmHWM
 * over VmRSS (the mapped indexes' pages included) and RssAnon's. */
typedef struct remote_peak {
    long hwm, anon;
} remote_peak;

/* In a child process: a create over the remote shards at url, caching in
 * cache (a fresh folder), with a cache_limit of 1 byte (ranged reads: no
 * shard is fetched whole), and its peaks. */
static remote_peak remote_peak_in_child(const char *url, const char *cache)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        pl_config c;
        pl_config_default(&c);
        c.data = url;
        c.cache_dir = cache;
        c.cache_limit = 1;
        c.device = PL_DEVICE_HOST;
        c.batch_size = 64;
        c.width = c.height = 16;
        c.num_workers = 2;
        c.log = quiet;
        remote_peak k = {-1, -1};
        const long rss = tu_status_kib("VmRSS"),
                   anon = tu_status_kib("RssAnon");
        anon_watch w = {.max_kib = anon};
        atomic_init(&w.stop, 0);
        pthread_t th;
        const int watching = pthread_create(&th, NULL, watch_anon, &w) == 0;
        pl_loader *l;
        const int rc = pl_loader_create(&c, &l);
        const long hwm = tu_status_kib("VmHWM");
        atomic_store(&w.stop, 1);
        if (watching)
            pthread_join(th, NULL);
        if (rc == 0 && watching) {
            k.hwm = hwm - rss;
            k.anon = w.max_kib - anon;
            pl_loader_destroy(l);
        }
        _exit(write(fd[1], &k, sizeof k) == sizeof k ? 0 : 1);
    }
    close(fd[1]);
    remote_peak k = {-1, -1};
    cr_assert_eq(read(fd[0], &k, sizeof k), (ssize_t)sizeof k);
    close(fd[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert_geq(k.hwm, 0, "%s: the child's loader failed", url);
    return k;
}

/* Remote shards are indexed a window of 64 at a time too: each shard's
 * member index (about 100 bytes a member, two members a sample) is made
 * into its mapped table and freed before the next window's .idx files
 * are fetched. Measured on machine B at 100,000 samples in 500 shards of
 * 200, over a one-shard create: 143 bytes a sample at the peak, 45 of
 * them private (the window is an eighth of the shards here; 117 and 15 at
 * 500,000); when every shard's index lived at once, 328 and 227. The
 * bounds fail at the old peak, with a margin for allocator noise. */
Test(memory, remote_create_peak_is_a_window_of_indexes, .timeout = 120)
{
    if (TU_SANITIZED)
        cr_skip_test("a sanitizer's shadow memory and redzones are not the "
                     "loader's: measured in plain builds");
    size_from_env();
    char root[64], dir[160], url[256], cache[160];
    tu_tmpdir(root);
    snprintf(dir, sizeof dir, "%s/big", root);
    cr_assert_eq(mkdir(dir, 0755), 0);
    make_n_shards(dir, SHARDS);
    snprintf(dir, sizeof dir, "%s/one", root);
    cr_assert_eq(mkdir(dir, 0755), 0);
    make_n_shards(dir, 1);
    /* Local creates write the .idx files beside the shards, as a user's
     * first local read (or pinload-pack) does. */
    snprintf(dir, sizeof dir, "%s/big", root);
    private_kib_in_child(dir, PL_ORDER_GLOBAL);
    snprintf(dir, sizeof dir, "%s/one", root);
    private_kib_in_child(dir, PL_ORDER_GLOBAL);
    rt_server srv;
    rt_start(&srv, root, root, NULL, 0);
    snprintf(url, sizeof url,
             "http://127.0.0.1:%d/big/shard-{000000..%06d}.tar", srv.port,
             SHARDS - 1);
    snprintf(cache, sizeof cache, "%s/cache-big", root);
    const remote_peak big = remote_peak_in_child(url, cache);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/one/shard-000000.tar",
             srv.port);
    snprintf(cache, sizeof cache, "%s/cache-one", root);
    const remote_peak one = remote_peak_in_child(url, cache);
    rt_stop(&srv);
    const double n = (double)(SHARDS - 1) * PER_SHARD;
    const double hwm = (double)(big.hwm - one.hwm) * 1024.0 / n;
    const double anon = (double)(big.anon - one.anon) * 1024.0 / n;
    cr_log_info("remote create: %.0f bytes a sample at the peak (VmHWM), "
                "%.1f of them private (RssAnon)",
                hwm, anon);
    cr_assert_lt(hwm, 200, "%.0f bytes a sample at the peak", hwm);
    cr_assert_lt(anon, 80, "%.1f private bytes a sample at the peak", anon);
    tu_rm_rf(root);
}
