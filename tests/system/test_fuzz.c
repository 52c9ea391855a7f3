/* The fuzz harness replayed in the regular suite: every input that ever
 * crashed the fuzzer (tests/fuzz/regressions), and every file of
 * ../shared/data/hard, each under several augment configurations, must
 * come back with a status (and all-zero output on failure) in bounded time,
 * through one reused context, as a worker would meet them; and every shared
 * file, and every file of tests/jpegquirks.h after each of them, must give
 * through that context what it gives a fresh one. */
#include <dirent.h>
#include <time.h>

#include "fuzz/harness.h"
#include "jpegquirks.h"
#include "testutil.h"

typedef struct replay {
    sample_ctx ctx;
    int files, failed;
    double worst_s;
    char worst[1024];
} replay;

/* This thread's CPU time: what a file costs, whatever else the machine
 * runs meanwhile (the suites run in parallel). */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The file behind configuration header h of replay_file's. */
static uint8_t *with_header(const uint8_t *bytes, size_t len, int h, size_t *n)
{
    static const uint8_t heads[][FUZZ_HEADER] = {
        {2, 0, 55, 63, 1, 0, 7, 3}, /* train, u8, 56x64, DCT scaling */
        {1, 1, 31, 31, 0, 1, 0, 0}, /* eval, f32, 32x32 */
        {0, 2, 63, 15, 3, 2, 1, 9}, /* none, f16, 64x16, scaling, strict */
    };
    uint8_t *in = malloc(len + FUZZ_HEADER);
    memcpy(in, heads[h % 3], FUZZ_HEADER);
    memcpy(in + FUZZ_HEADER, bytes, len);
    *n = len + FUZZ_HEADER;
    return in;
}

/* The file at path behind each of a few configuration headers. */
static void replay_file(replay *r, const char *path, int raw)
{
    size_t len;
    uint8_t *bytes = tu_read_file(path, &len);
    const int nheads = raw ? 3 : 1;
    for (int h = 0; h < nheads; h++) {
        size_t n = len;
        uint8_t *owned = raw ? with_header(bytes, len, h, &n) : NULL;
        const uint8_t *in = raw ? owned : bytes;
        const double t0 = now_s();
        const int rc = fuzz_one(&r->ctx, in, n);
        const double dt = now_s() - t0;
        r->files++;
        r->failed += rc < 0;
        if (dt > r->worst_s) {
            r->worst_s = dt;
            snprintf(r->worst, sizeof r->worst, "%s", path);
        }
        free(owned);
    }
    free(bytes);
}

static void replay_dir(replay *r, const char *dir, int raw)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        replay_file(r, path, raw);
    }
    closedir(d);
}

/* fuzz: the fuzzer's tight limits; otherwise the loader's defaults. */
static void replay_init(replay *r, int fuzz)
{
    memset(r, 0, sizeof *r);
    decode_limits lim;
    if (fuzz)
        fuzz_limits(&lim);
    else
        decode_limits_default(&lim);
    cr_assert_eq(sample_init(&r->ctx, &lim), 0);
}

Test(fuzz, regression_inputs_replay_cleanly)
{
    replay r;
    replay_init(&r, 1);
    replay_dir(&r, "tests/fuzz/regressions", 0);
    sample_fini(&r.ctx);
    cr_log_info("%d regression inputs, %d failed cleanly", r.files, r.failed);
}

/* Under the loader's default limits (the 8500x8146 frames pass them and
 * decode). Sanitizers make everything slower; the bound is for the plain
 * build and is relaxed 10x under them. */
Test(fuzz, every_hard_file_ends_in_a_status_within_a_second)
{
    char base[512];
    TU_SHARED_OR_SKIP(base, "hard");
    static const char *const sub[] = {"variants", "unsupported", "hostile",
                                      "corrupt", "notjpeg"};
    replay r;
    replay_init(&r, 0);
    for (size_t i = 0; i < sizeof sub / sizeof sub[0]; i++) {
        char dir[600];
        snprintf(dir, sizeof dir, "%s/%s", base, sub[i]);
        replay_dir(&r, dir, 1);
    }
    sample_fini(&r.ctx);
    const double bound = TU_SANITIZED ? 10.0 : 1.0;
    cr_assert_gt(r.files, 150, "only %d runs", r.files);
    cr_assert_lt(r.worst_s, bound, "%s took %.3f s", r.worst, r.worst_s);
    cr_log_info("%d runs, %d failed cleanly, slowest %.3f s (%s)", r.files,
                r.failed, r.worst_s, r.worst);
}

/* ---- each file as alone, after every other ---- */

typedef struct alone_run {
    sample_ctx ctx;
    uint8_t *quirk[JQ_KINDS];
    size_t quirk_len[JQ_KINDS];
    int runs, shared;
} alone_run;

/* One input through the shared context, compared with a fresh one. */
static void assert_as_alone(alone_run *a, const uint8_t *bytes, size_t len,
                            int h, const char *what, const char *after)
{
    size_t n;
    uint8_t *in = with_header(bytes, len, h, &n);
    int rc;
    cr_assert(fuzz_same_as_alone(&a->ctx, in, n, &rc),
              "%s after %s differs from %s alone", what, after, what);
    a->runs++;
    free(in);
}

/* Every file under dir, recursively, then each quirk right after it. */
static void alone_tree(alone_run *a, const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0, "%s", path);
        if (S_ISDIR(st.st_mode)) {
            alone_tree(a, path);
            continue;
        }
        size_t len;
        uint8_t *bytes = tu_read_file(path, &len);
        assert_as_alone(a, bytes, len, a->shared, path, "the files before");
        for (int k = 0; k < JQ_KINDS; k++)
            assert_as_alone(a, a->quirk[k], a->quirk_len[k], a->shared + k,
                            jq_name(k), path);
        free(bytes);
        a->shared++;
    }
    closedir(d);
}

Test(fuzz, every_shared_and_quirk_file_decodes_as_alone_after_every_other,
     .timeout = 300)
{
    char hard[512], photos[512];
    TU_SHARED_OR_SKIP(hard, "hard");
    snprintf(photos, sizeof photos, "%s/photos", tu_shared_data());
    alone_run a;
    memset(&a, 0, sizeof a);
    decode_limits lim;
    decode_limits_default(&lim);
    cr_assert_eq(sample_init(&a.ctx, &lim), 0);
    uint8_t rgb[53 * 37 * 3];
    for (int k = 0; k < JQ_KINDS; k++) {
        tu_pattern(rgb, 53, 37, (unsigned)k + 1);
        a.quirk[k] = jq_make((jq_kind)k, rgb, 53, 37, &a.quirk_len[k]);
    }
    alone_tree(&a, hard);
    alone_tree(&a, photos);
    cr_assert_gt(a.shared, 150, "only %d shared files", a.shared);
    cr_assert_eq(a.runs, a.shared * (1 + JQ_KINDS));
    cr_log_info("%d shared files, %d runs, each as alone", a.shared, a.runs);
    for (int k = 0; k < JQ_KINDS; k++)
        free(a.quirk[k]);
    sample_fini(&a.ctx);
}

/* ---- PNG and WebP ---- */

/* Every PNG and WebP fixture, cut short and with a flipped byte, behind
 * each configuration header, through one context (as a worker meets them)
 * and as if alone: the fuzzer's contract (a status; zeros on failure;
 * finite floats) and the same bytes either way. The fuzz target reaches
 * these decoders through the signature, seeded with these files (`make
 * fuzz`). */
Test(fuzz, png_and_webp_fixtures_and_their_damage_replay_as_alone)
{
    const char *dir = "tests/fixtures/formats";
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    sample_ctx ctx;
    decode_limits lim;
    fuzz_limits(&lim);
    cr_assert_eq(sample_init(&ctx, &lim), 0);
    int runs = 0, ok = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        const char *dot = strrchr(de->d_name, '.');
        if (!dot || (strcmp(dot, ".png") != 0 && strcmp(dot, ".webp") != 0))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t len;
        uint8_t *bytes = tu_read_file(path, &len);
        for (int variant = 0; variant < 3; variant++) {
            size_t cut = variant == 1 ? len / 2 : len;
            if (variant == 2)
                bytes[len * 2 / 3] ^= 0x10;
            for (int h = 0; h < 3; h++) {
                size_t n;
                uint8_t *in = with_header(bytes, cut, h, &n);
                int rc;
                cr_assert(fuzz_same_as_alone(&ctx, in, n, &rc),
                          "%s variant %d header %d: differs from a fresh "
                          "context",
                          path, variant, h);
                runs++;
                ok += rc == 0;
                if (variant == 0)
                    cr_assert_eq(rc, 0, "%s header %d: %s", path, h,
                                 pl_err_name(rc));
                free(in);
            }
        }
        free(bytes);
    }
    closedir(d);
    sample_fini(&ctx);
    cr_assert_geq(runs, 28 * 9, "only %d runs", runs);
    cr_log_info("%d runs, %d decoded", runs, ok);
}
