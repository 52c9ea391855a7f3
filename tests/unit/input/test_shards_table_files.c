/* Issue 34: a shard's table file (the dataset table file past the
 * mapping limit, or a shard's .idx) truncated or rewritten in place under
 * a running loader. Its tables are read from the file a key at a time
 * and checked, so the loader gets no signal: the batches made before go
 * on being the same bytes, and the first sample whose key no longer
 * reads fails with PL_ECORRUPT naming the file. Each such loader runs in
 * a forked child, so that a signal would show as one (WIFSIGNALED). And
 * with the files untouched, file-backed tables give the same epoch, with
 * 1 and 2 workers, resumed half-way. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/bytes.h"
#include "pinload.h"
#include "testloader.h"
#include "testshards.h"
#include "testutil.h"

#define TIMEOUT 120
#define SHARDS 8 /* of 2 samples each */
#define BATCH 2

/* dir/data/t-000.tar ..: SHARDS shards of 2 samples (KEY.jpg, KEY.cls). */
static void make_shards(const char *dir)
{
    char cmd[1024];
    for (int i = 0; i < 2 * SHARDS; i++) {
        char p[256], label[16];
        snprintf(p, sizeof p, "%s/stage/k%03d.jpg", dir, i);
        tu_write_jpeg(p, 20 + i % 5, 22, (unsigned)i, NULL);
        snprintf(p, sizeof p, "%s/stage/k%03d.cls", dir, i);
        snprintf(label, sizeof label, "%d\n", i % 3);
        tu_write_file(p, label, strlen(label));
    }
    snprintf(cmd, sizeof cmd,
             "cd %s/stage && mkdir ../data && for s in $(seq 0 %d); do "
             "a=$(printf k%%03d $((2 * s))); b=$(printf k%%03d $((2 * s + "
             "1))); tar -cf ../data/t-$(printf %%03d $s).tar $a.jpg $a.cls "
             "$b.jpg $b.cls; done",
             dir, SHARDS - 1);
    tu_system(cmd);
}

/* In order, one worker, a small ring: what was made before a change is
 * little, and the failing sample is the next one made. */
static void cfg_of(pl_config *c, const char *data, int workers)
{
    base_cfg(c, data);
    c->batch_size = BATCH;
    c->width = c->height = 24;
    c->shuffle = 0;
    c->num_workers = workers;
    c->prefetch = 1;
    c->on_error = PL_ON_ERROR_FAIL;
}

/* Batch b's pixels and labels of the reference epoch. */
typedef struct epoch_ref {
    uint8_t pixels[SHARDS][BATCH * 24 * 24 * 3];
    int32_t labels[SHARDS][BATCH];
    size_t bytes;
} epoch_ref;

static void read_ref(const char *data, int workers, epoch_ref *r)
{
    pl_config c;
    cfg_of(&c, data, workers);
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    const pl_batch *b;
    for (int k = 0; k < SHARDS; k++) {
        cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
        cr_assert_eq(b->count, BATCH);
        cr_assert_leq(b->bytes, sizeof r->pixels[k]);
        r->bytes = b->bytes;
        memcpy(r->pixels[k], b->data, b->bytes);
        memcpy(r->labels[k], b->labels, sizeof r->labels[k]);
        pl_loader_release(l, b, NULL);
    }
    cr_assert_eq(pl_loader_next(l, &b), PL_EPOCH_END);
    pl_loader_destroy(l);
}

/* The one dataset table file in folder idx. */
static void tables_file(const char *idx, char path[512])
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s/*.tables", idx);
    FILE *f = popen(cmd, "r");
    path[0] = '\0';
    cr_assert_not_null(fgets(path, 512, f), "no .tables file in %s", idx);
    pclose(f);
    path[strcspn(path, "\n")] = '\0';
}

/* What changes the table files after the loader's first batch. */
typedef enum { TRUNCATE, OFFSET_PAST_SHARD, NAME_UNTERMINATED } damage;

/* Shard s's table's place in the dataset table file at path. */
static uint64_t table_at(const char *path, int s)
{
    size_t n;
    uint8_t *b = tu_read_file(path, &n);
    const uint64_t at = le_get64(b + 32 + 64 * (size_t)s);
    free(b);
    return at;
}

/* Change the bytes of file `path` (a table at byte `at`, of 4 members and
 * 2 keys), in place: its last key's image member's offset past the shard,
 * or that member's name's NUL overwritten. */
static void rewrite_in_place(const char *path, uint64_t at, damage d)
{
    const int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0, "%s", path);
    unsigned char rec[24];
    const uint64_t member = at + 64 + 2 * 24; /* key 1's first: its jpg */
    cr_assert_eq(pread(fd, rec, sizeof rec, (off_t)member), (ssize_t)sizeof rec);
    if (d == OFFSET_PAST_SHARD) {
        le_put64(rec, le_get64(rec) + ((uint64_t)1 << 30));
        cr_assert_eq(pwrite(fd, rec, 8, (off_t)member), 8);
    } else {
        const uint64_t names = at + 64 + 4 * 24 + 2 * 16;
        const uint64_t nul = names + le_get32(rec + 16) + strlen("k000.jpg");
        char c;
        cr_assert_eq(pread(fd, &c, 1, (off_t)nul), 1);
        cr_assert_eq(c, '\0', "the name is not where the layout says");
        cr_assert_eq(pwrite(fd, "x", 1, (off_t)nul), 1);
    }
    close(fd);
}

/* In a child: a loader over data, its first batch, then `files` (a shell
 * glob) changed as `d` says; every later batch the reference's bytes
 * until one fails with PL_ECORRUPT naming a file that `want` (a
 * substring) names. Exit 0 if so; the reason otherwise in why[0, 512)
 * of the shared file out. */
static void child(const char *data, const char *files, damage d,
                  const char *want, const epoch_ref *ref, const char *out)
{
    FILE *o = fopen(out, "w");
    pl_config c;
    cfg_of(&c, data, 1);
    pl_loader *l;
    if (pl_loader_create(&c, &l) != 0) {
        fprintf(o, "create: %s", pl_last_error());
        _exit(2);
    }
    const pl_batch *b;
    int k = 0, rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        if (b->count != BATCH || memcmp(b->data, ref->pixels[k], ref->bytes) ||
            memcmp(b->labels, ref->labels[k], sizeof ref->labels[k])) {
            fprintf(o, "batch %d: other bytes than the reference's", k);
            _exit(3);
        }
        pl_loader_release(l, b, NULL);
        if (k++ == 0) {
            char cmd[1024];
            if (d == TRUNCATE) {
                snprintf(cmd, sizeof cmd,
                         "for f in %s; do truncate -s 8 $f; done", files);
                tu_system(cmd);
            } else {
                for (int s = 2; s < SHARDS; s++)
                    rewrite_in_place(files, table_at(files, s), d);
            }
        }
    }
    const char *why = pl_last_error();
    fprintf(o, "after %d batches: %s (%s)", k, why, pl_err_name(rc));
    const int named = strstr(why, want) &&
                      strstr(why, "changed under the loader (truncated or "
                                  "rewritten in place)");
    pl_loader_destroy(l);
    fclose(o);
    _exit(rc == PL_ECORRUPT && named && k >= 1 && k < SHARDS ? 0 : 4);
}

static void run_child(const char *dir, const char *data, const char *files,
                      damage d, const char *want, const epoch_ref *ref)
{
    char out[256];
    snprintf(out, sizeof out, "%s/child.txt", dir);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        child(data, files, d, want, ref, out);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    size_t n;
    char *said = (char *)tu_read_file(out, &n);
    said = realloc(said, n + 1);
    said[n] = '\0';
    cr_assert(!WIFSIGNALED(st), "signal %d (%s)", WTERMSIG(st), said);
    cr_assert_eq(WEXITSTATUS(st), 0, "exit %d: %s", WEXITSTATUS(st), said);
    free(said);
}

/* Past the mapping limit (lowered to 4): the dataset table file. */
static void node_file_case(damage d)
{
    char dir[64], data[128], idx[128], file[512];
    tu_tmpdir(dir);
    make_shards(dir);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(idx, sizeof idx, "%s/idx", dir);
    setenv("PINLOAD_INDEX_DIR", idx, 1);
    setenv("PINLOAD_MAPPED_MAX", "4", 1);
    epoch_ref ref;
    read_ref(data, 1, &ref);
    tables_file(idx, file);
    run_child(dir, data, file, d, file, &ref);
    unsetenv("PINLOAD_MAPPED_MAX");
    unsetenv("PINLOAD_INDEX_DIR");
    tu_rm_rf(dir);
}

Test(shards_table_files, the_dataset_table_file_truncated_is_named,
     .timeout = TIMEOUT)
{
    node_file_case(TRUNCATE);
}

Test(shards_table_files, an_offset_rewritten_past_the_shard_is_named,
     .timeout = TIMEOUT)
{
    node_file_case(OFFSET_PAST_SHARD);
}

Test(shards_table_files, a_name_rewritten_without_its_nul_is_named,
     .timeout = TIMEOUT)
{
    node_file_case(NAME_UNTERMINATED);
}

/* Below the limit: each shard's .idx beside it. */
Test(shards_table_files, a_shards_index_file_truncated_is_named,
     .timeout = TIMEOUT)
{
    char dir[64], data[128], files[256];
    tu_tmpdir(dir);
    make_shards(dir);
    unsetenv("PINLOAD_INDEX_DIR");
    snprintf(data, sizeof data, "%s/data", dir);
    epoch_ref ref;
    read_ref(data, 1, &ref);
    snprintf(files, sizeof files, "%s/t-*.tar.idx", data);
    run_child(dir, data, files, TRUNCATE, ".tar.idx", &ref);
    tu_rm_rf(dir);
}

/* Untouched, the file-backed tables give the epoch a heap catalog gives
 * (PINLOAD_INDEX_DIR unwritable: every table in the heap), with 1 and 2
 * workers, from the .idx files and from the dataset table file; and a
 * state saved half-way resumes to the same bytes. */
Test(shards_table_files, file_backed_tables_give_the_same_bytes,
     .timeout = TIMEOUT)
{
    char dir[64], data[128], idx[128], nowhere[160];
    tu_tmpdir(dir);
    make_shards(dir);
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(nowhere, sizeof nowhere, "%s/file/sub", dir);
    snprintf(idx, sizeof idx, "%s/file", dir);
    tu_write_file(idx, "", 0);
    setenv("PINLOAD_INDEX_DIR", nowhere, 1);
    static epoch_ref heap, e;
    read_ref(data, 1, &heap);
    snprintf(idx, sizeof idx, "%s/idx", dir);
    setenv("PINLOAD_INDEX_DIR", idx, 1);
    for (int joined = 0; joined < 2; joined++) {
        if (joined)
            setenv("PINLOAD_MAPPED_MAX", "4", 1);
        for (int w = 1; w <= 2; w++) {
            read_ref(data, w, &e);
            cr_assert(memcmp(&heap, &e, sizeof e) == 0,
                      "joined %d, %d workers: other bytes", joined, w);
        }
        pl_config c;
        cfg_of(&c, data, 2);
        pl_loader *l;
        cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
        const pl_batch *b;
        for (int k = 0; k < 3; k++) {
            cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
            pl_loader_release(l, b, NULL);
        }
        pl_state s;
        cr_assert_eq(pl_loader_state(l, &s), 0, "%s", pl_last_error());
        pl_loader_destroy(l);
        c.resume = &s;
        cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
        for (int k = 3; k < SHARDS; k++) {
            cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
            cr_assert(memcmp(b->data, heap.pixels[k], heap.bytes) == 0 &&
                          memcmp(b->labels, heap.labels[k],
                                 sizeof heap.labels[k]) == 0,
                      "joined %d: resumed batch %d differs", joined, k);
            pl_loader_release(l, b, NULL);
        }
        pl_loader_destroy(l);
    }
    unsetenv("PINLOAD_MAPPED_MAX");
    unsetenv("PINLOAD_INDEX_DIR");
    tu_rm_rf(dir);
}
