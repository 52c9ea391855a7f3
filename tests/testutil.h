/* Helpers shared by the Criterion suites: temporary trees, JPEG fixtures
 * written with libjpeg, a reference decode through djpeg, and access to
 * ../shared/data with a clean skip when it is absent. Header-only: each
 * suite is one program. */
#ifndef PINLOAD_TESTUTIL_H
#define PINLOAD_TESTUTIL_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tools/tarwrite.h"
#include "jpegwrite.h"

/* ---- shared data ---- */

/* The shared image collection: $PINLOAD_SHARED_DATA, else ../shared/data
 * from the repository root (where make test runs). NULL if absent. */
static inline const char *tu_shared_data(void)
{
    const char *env = getenv("PINLOAD_SHARED_DATA");
    const char *dir = env && *env ? env : "../shared/data";
    struct stat st;
    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? dir : NULL;
}

/* Fill buf with shared-data path `sub`, or skip the test with a message. */
#define TU_SHARED_OR_SKIP(buf, sub)                                            \
    do {                                                                       \
        const char *tu_root_ = tu_shared_data();                               \
        if (!tu_root_) {                                                       \
            cr_skip_test("../shared/data is absent (set PINLOAD_SHARED_DATA);" \
                         " skipping");                                         \
        }                                                                      \
        snprintf((buf), sizeof(buf), "%s/%s", tu_root_, (sub));                \
    } while (0)

/* 1 in a sanitizer build (GCC's and clang's ways of saying so). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TU_SANITIZED 1
#endif
#endif
#ifndef TU_SANITIZED
#define TU_SANITIZED 0
#endif
/* 1 under ThreadSanitizer, whose shadow holds several times the memory a
 * program touches: no peak-memory bound can be asserted there. */
#if defined(__SANITIZE_THREAD__)
#define TU_THREAD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TU_THREAD_SANITIZED 1
#endif
#endif
#ifndef TU_THREAD_SANITIZED
#define TU_THREAD_SANITIZED 0
#endif

/* The build directory the suite was built in (tools live there). */
static inline const char *tu_build_dir(void)
{
    const char *b = getenv("PINLOAD_BUILD");
    return b && *b ? b : "build";
}

/* ---- files and trees ---- */

static inline int tu_rm_one_(const char *p, const struct stat *st, int flag,
                             struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static inline void tu_rm_rf(const char *path)
{
    nftw(path, tu_rm_one_, 16, FTW_DEPTH | FTW_PHYS);
}

/* The directories tu_tmpdir made in this process, removed when it exits
 * (Criterion runs each test in a process of its own and exits it after a
 * failed assertion too), so that a failing or skipped test leaves nothing
 * in /tmp; a test's own tu_rm_rf before that is harmless. Only by the
 * process that made them: a test's forked children exit without touching
 * them. Anything mounted inside (a test's tmpfs) is detached first. */
enum { TU_TMPDIRS_MAX = 32 };
static char tu_tmpdirs_[TU_TMPDIRS_MAX][64];
static int tu_ntmpdirs_;
static pid_t tu_tmpdirs_pid_;

static inline void tu_tmpdirs_remove_(void)
{
    if (getpid() != tu_tmpdirs_pid_)
        return;
    for (int i = 0; i < tu_ntmpdirs_; i++) {
        const char *dir = tu_tmpdirs_[i];
        const size_t n = strlen(dir);
        FILE *m = fopen("/proc/self/mounts", "r");
        char line[1024], at[512];
        while (m && fgets(line, sizeof line, m))
            if (sscanf(line, "%*s %511s", at) == 1 &&
                strncmp(at, dir, n) == 0 && at[n] == '/')
                umount2(at, MNT_DETACH);
        if (m)
            fclose(m);
        tu_rm_rf(dir);
    }
    tu_ntmpdirs_ = 0;
}

/* A fresh directory under /tmp, removed with all it holds when the test's
 * process exits; path must hold 64 bytes. */
static inline void tu_tmpdir(char *path)
{
    snprintf(path, 64, "/tmp/pinload-test-XXXXXX");
    cr_assert_not_null(mkdtemp(path), "mkdtemp: %s", strerror(errno));
    if (tu_tmpdirs_pid_ != getpid()) {
        tu_tmpdirs_pid_ = getpid();
        tu_ntmpdirs_ = 0;
        atexit(tu_tmpdirs_remove_);
    }
    if (tu_ntmpdirs_ < TU_TMPDIRS_MAX)
        snprintf(tu_tmpdirs_[tu_ntmpdirs_++], 64, "%s", path);
}

/* mkdir -p for the directories of `path` (not its last component). */
static inline void tu_mkdirs_for(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(buf, 0777);
        *p = '/';
    }
}

static inline void tu_write_file(const char *path, const void *data, size_t len)
{
    tu_mkdirs_for(path);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

static inline uint8_t *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* ---- JPEG fixtures ---- */

/* Smooth gradients with a seed-dependent phase and a little texture, so a
 * resize error shows and two seeds differ everywhere. */
static inline void tu_pattern(uint8_t *rgb, int w, int h, unsigned seed)
{
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = rgb + ((size_t)y * w + x) * 3;
            const unsigned t = (unsigned)(x * 7 + y * 13) * 2654435761u ^ seed;
            p[0] = (uint8_t)((x * 255) / (w > 1 ? w - 1 : 1) + seed * 37);
            p[1] = (uint8_t)((y * 255) / (h > 1 ? h - 1 : 1) + seed * 91);
            p[2] = (uint8_t)(((x + y) * 3 + seed * 53) ^ (t >> 28));
        }
}

/* Encode w x h RGB pixels to a JPEG file (jpegwrite.h), directories made
 * as needed. */
static inline void tu_write_jpeg_rgb(const char *path, const uint8_t *rgb,
                                     int w, int h, const tu_jpeg_opts *o)
{
    tu_mkdirs_for(path);
    cr_assert_eq(tu_jpeg_encode_file(path, rgb, w, h, o), 0, "%s: %s", path,
                 strerror(errno));
}

/* A w x h pattern JPEG at path (directories made as needed). */
static inline void tu_write_jpeg(const char *path, int w, int h, unsigned seed,
                                 const tu_jpeg_opts *o)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    tu_pattern(rgb, w, h, seed);
    tu_write_jpeg_rgb(path, rgb, w, h, o);
    free(rgb);
}

/* root/c<i % classes>/img<i>.jpg for i < n (root made fresh under /tmp),
 * small and of varied sizes, each with its own pattern. Class folders hold
 * only files and the root only folders. */
static inline void tu_make_tree(char root[64], int n, int classes)
{
    tu_tmpdir(root);
    for (int i = 0; i < n; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/c%d/img%02d.jpg", root, i % classes, i);
        tu_write_jpeg(p, 32 + (i % 5) * 8, 24 + (i % 4) * 8, (unsigned)i + 1,
                      NULL);
    }
}

/* ---- reference decode ---- */

/* Read a binary PPM (P6) or PGM (P5, replicated to RGB) from f. Returns
 * malloc'd RGB or NULL. */
static inline uint8_t *tu_read_pnm(FILE *f, int *w, int *h)
{
    char magic[3] = {0};
    int maxval;
    if (fscanf(f, "%2s %d %d %d", magic, w, h, &maxval) != 4 || maxval != 255 ||
        fgetc(f) == EOF)
        return NULL;
    const int gray = strcmp(magic, "P5") == 0;
    if (!gray && strcmp(magic, "P6") != 0)
        return NULL;
    const size_t px = (size_t)*w * (size_t)*h;
    uint8_t *rgb = malloc(px * 3);
    if (gray) {
        for (size_t i = 0; i < px; i++) {
            const int v = fgetc(f);
            if (v == EOF) {
                free(rgb);
                return NULL;
            }
            rgb[i * 3] = rgb[i * 3 + 1] = rgb[i * 3 + 2] = (uint8_t)v;
        }
    } else if (fread(rgb, 1, px * 3, f) != px * 3) {
        free(rgb);
        return NULL;
    }
    return rgb;
}

static inline uint8_t *tu_read_ppm_file(const char *path, int *w, int *h)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    uint8_t *rgb = tu_read_pnm(f, w, h);
    fclose(f);
    return rgb;
}

/* The reference decode: djpeg (libjpeg-turbo-progs) run on the file, its
 * PPM/PGM output as RGB. NULL if djpeg fails, or only warns and
 * allow_warnings is 0. */
static inline uint8_t *tu_djpeg_ex(const char *path, int *w, int *h,
                                   int allow_warnings)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "djpeg -pnm '%s' 2>/dev/null", path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "popen djpeg");
    uint8_t *rgb = tu_read_pnm(p, w, h);
    const int st = pclose(p);
    /* djpeg exits 2 when it decoded despite warnings. */
    const int warned = WIFEXITED(st) && WEXITSTATUS(st) == 2;
    if (st != 0 && !(allow_warnings && warned)) {
        free(rgb);
        return NULL;
    }
    return rgb;
}

static inline uint8_t *tu_djpeg(const char *path, int *w, int *h)
{
    return tu_djpeg_ex(path, w, h, 0);
}

/* Largest absolute difference between two byte buffers. */
static inline int tu_max_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    int m = 0;
    for (size_t i = 0; i < n; i++) {
        const int d = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];
        if (d > m)
            m = d;
    }
    return m;
}

/* ---- tars ---- */

/* A valid tar at `path` whose first member is named "pipe:touch MARKER #"
 * (a list's first line, once cut at the header's first NUL: the shell
 * would take the rest for a comment), and with `jpeg`, the sample k0 of
 * that image, label 2. tar -tf lists nothing odd. */
static inline void tu_hostile_tar(const char *path, const char *marker,
                                  const char *jpeg)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s", path);
    char name[100];
    cr_assert_lt(snprintf(name, sizeof name, "pipe:touch %s #", marker), 100);
    cr_assert_gt(tarw_member(f, name, "x", 1), 0);
    if (jpeg) {
        size_t len;
        uint8_t *b = tu_read_file(jpeg, &len);
        cr_assert_gt(tarw_member(f, "k0.jpg", b, len), 0);
        cr_assert_gt(tarw_member(f, "k0.cls", "2", 1), 0);
        free(b);
    }
    cr_assert_eq(tarw_end(f), 0);
    cr_assert_eq(fclose(f), 0);
}

/* ---- what pinload-dump writes ---- */

/* The whole of a file, NUL-terminated (malloc'd). */
static inline char *tu_slurp(const char *path)
{
    size_t len;
    char *text = (char *)tu_read_file(path, &len);
    text[len] = '\0';
    return text;
}

/* ---- the tools' progress lines ---- */

/* Runs the shell command `cmd` on a pseudo-terminal (util-linux's
 * `script`), so a tool sees a terminal on stderr; returns everything it
 * wrote there (malloc'd). */
static inline char *tu_run_on_tty(const char *cmd)
{
    char dir[64], full[8192], path[128];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/tty", dir);
    snprintf(full, sizeof full, "script -qfec \"%s\" /dev/null >%s 2>&1", cmd,
             path);
    cr_assert_eq(system(full), 0, "%s", full);
    char *out = tu_slurp(path);
    tu_rm_rf(dir);
    return out;
}

/* fn(bytes, len) for every file of `dir` not starting with a dot (a
 * fuzzer's regression inputs); how many, or -1 if dir cannot be opened. */
static inline int tu_each_file(const char *dir,
                               void (*fn)(const uint8_t *, size_t))
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        uint8_t *bytes = tu_read_file(path, &len);
        fn(bytes, len);
        free(bytes);
        n++;
    }
    closedir(d);
    return n;
}

/* Seconds on the monotonic clock (for bounds measured in a test). */
static inline double tu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs the shell command `cmd`, which must exit 0. */
static inline void tu_system(const char *cmd)
{
    const int rc = system(cmd);
    cr_assert_eq(rc, 0, "%s: exit %d", cmd, rc);
}

/* A line of this process's /proc/self/status (VmRSS, VmHWM, RssAnon...),
 * in KiB; -1 if there is none. */
static inline long tu_status_kib(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    const size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            kib = atol(line + n + 1);
            break;
        }
    if (f)
        fclose(f);
    return kib;
}

/* Runs the shell command `cmd` (exec'd, so the signal reaches the tool),
 * waits until `ready` exists (a file the tool makes once under way, or
 * NULL), then `after_s` seconds, sends it `sig`, and returns its exit
 * status (128 + sig if it reported the signal so). */
static inline int tu_run_and_signal(const char *cmd, const char *ready,
                                    double after_s, int sig)
{
    char full[8192];
    snprintf(full, sizeof full, "exec %s", cmd);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", full, (char *)NULL);
        _exit(127);
    }
    const struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; ready && i < 6000 && access(ready, F_OK) != 0; i++)
        nanosleep(&tick, NULL);
    const struct timespec ts = {(time_t)after_s,
                                (long)((after_s - (time_t)after_s) * 1e9)};
    nanosleep(&ts, NULL);
    kill(pid, sig);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The same command with stderr to a file: what it wrote there. */
static inline char *tu_run_stderr(const char *cmd)
{
    char dir[64], full[8192], path[128];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/err", dir);
    snprintf(full, sizeof full, "%s >/dev/null 2>%s", cmd, path);
    cr_assert_eq(system(full), 0, "%s", full);
    char *err = tu_slurp(path);
    tu_rm_rf(dir);
    return err;
}

/* One row of pinload-dump's index.tsv. */
typedef struct tu_row {
    long position; /* the sample's place in the epoch; -1 for "-" (skipped) */
    char path[1024];
    int label;
    char status[1024];
} tu_row;

/* The rows of dir/index.tsv (malloc'd, count in *n), its header checked
 * and every row checked to have exactly four fields. */
static inline tu_row *tu_read_index(const char *dir, int *n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/index.tsv", dir);
    char *text = tu_slurp(path);
    static const char header[] = "position\tpath\tlabel\tstatus\n";
    cr_assert_eq(strncmp(text, header, sizeof header - 1), 0,
                 "%s: header is %.60s", path, text);
    int cap = 64, k = 0;
    tu_row *rows = malloc((size_t)cap * sizeof *rows);
    char *rest = text + sizeof header - 1;
    for (char *line; (line = strsep(&rest, "\n")) != NULL && *line;) {
        char *field[4], *cur = line;
        for (int i = 0; i < 4; i++)
            field[i] = strsep(&cur, "\t");
        cr_assert(field[3] && !cur, "%s: row %d is not 4 fields", path, k);
        if (k == cap)
            rows = realloc(rows, (size_t)(cap *= 2) * sizeof *rows);
        tu_row *r = &rows[k++];
        char *end;
        r->position =
            strcmp(field[0], "-") == 0 ? -1 : strtol(field[0], &end, 10);
        cr_assert(r->position < 0 || (*field[0] && !*end),
                  "%s: position \"%s\"", path, field[0]);
        r->label = (int)strtol(field[2], &end, 10);
        cr_assert(*field[2] && !*end, "%s: label \"%s\"", path, field[2]);
        snprintf(r->path, sizeof r->path, "%s", field[1]);
        snprintf(r->status, sizeof r->status, "%s", field[3]);
    }
    free(text);
    *n = k;
    return rows;
}

/* The number of samples pinload-dump wrote to dir, checking that they are
 * 000000.ppm .. (count - 1) and that index.tsv is all else there is. */
static inline int tu_count_ppms(const char *dir)
{
    int k = 0;
    for (;; k++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%06d.ppm", dir, k);
        if (access(p, F_OK) != 0)
            break;
    }
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s: %s", dir, strerror(errno));
    int entries = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        entries += strcmp(de->d_name, ".") != 0 &&
                   strcmp(de->d_name, "..") != 0 &&
                   strcmp(de->d_name, "index.tsv") != 0;
    closedir(d);
    cr_assert_eq(entries, k,
                 "%s holds %d files besides index.tsv, not the %d "
                 "numbered samples",
                 dir, entries, k);
    return k;
}

#endif
