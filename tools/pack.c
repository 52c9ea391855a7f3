/* pinload-pack: write any dataset pinload reads as tar shards in the
 * WebDataset layout, in its file order: for dataset index i, members
 * KEY.jpg (or KEY.png, KEY.webp: the image's own format, by its bytes) and
 * KEY.cls (the label as decimal text), KEY being i in nine digits. Without
 * --max-side the image bytes are copied unchanged; with it,
 * images whose longer side is over S are decoded, shrunk so that it is S
 * (aspect kept) by area averaging (each output pixel the mean of the input
 * area it covers, fractional edges weighted by their coverage), and encoded
 * again with libjpeg-turbo at --quality (4:2:0, baseline, optimised
 * Huffman tables). Samples are made on --threads threads (default: the
 * CPUs the process may use) and written in order through a bounded window,
 * so the shards and lists are byte for byte the same whatever the thread
 * count (an .idx holds its shard's mtime, as every sidecar index). Beside
 * the shards: classes.txt (the class names, label 0 first, which the
 * loader reads back), sources.tsv (each key's shard and source name) and
 * each shard's sidecar index (SHARD.tar.idx, for remote reads).
 *
 * The pack is written whole or not at all: into a hidden folder beside
 * --out (".NAME.pack-XXXXXX" in --out's parent), every shard synced, the
 * manifest ending in its "# end" line, and only then renamed onto --out.
 * A killed or failed pack leaves no folder a reader takes for a dataset.
 * --out must be missing or empty; a previous pack there (shards, their
 * sidecar indexes, manifest.tsv: nothing else) is replaced with --force,
 * in one atomic exchange where the kernel offers it. */
#define _GNU_SOURCE /* renameat2, fsync, sigaction */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "jpegenc.h"
#include "tarwrite.h"

static const char usage[] =
    "usage: pinload-pack --data PATH --out DIR (--shard-size SIZE | "
    "--per-shard N)\n"
    "                    [--max-side S [--quality Q]] [--prefix NAME] "
    "[--threads N]\n"
    "                    [--extras txt,json] [--force] [--quiet] [--version] "
    "[--help]\n"
    "Writes DIR/NAME-000000.tar, ... (NAME default \"shard\"): every sample "
    "of PATH (a folder,\na list file or shards) in its file order, as KEY.jpg "
    "(or KEY.png, KEY.webp: the\nimage's own format) + KEY.cls (KEY: the index "
    "in nine digits). A shard closes\nbefore it would pass SIZE (\"1GB\", "
    "\"500MB\", bytes) or at N samples. --max-side S\nre-encodes images whose "
    "longer side is over S pixels, shrunk by area averaging\nto S, as JPEG at "
    "quality Q (default 90); other images, and all without\n--max-side, are "
    "copied unchanged (a file that is not a JPEG, PNG or WebP image\nis not "
    "packed). The pack is written whole or not at all: beside DIR, then "
    "renamed\n"
    "onto it. DIR must be missing or empty; --force "
    "replaces a previous pack there.\nDIR/manifest.tsv lists each shard, its "
    "samples and bytes, and ends with a\n\"# end\" line; samples not packed "
    "are named on stderr and in the manifest,\nand make the exit status "
    "1. DIR/classes.txt holds the class names (the loader\nnames classes "
    "from it), DIR/sources.tsv each sample's key, shard and source, and\n"
    "DIR/NAME-000000.tar.idx... each shard's index (upload them with the "
    "shards: a\nloader over their URLs then fetches no shard to index "
    "it).\n"
    "--threads N: samples read and re-encoded on N threads (default: the "
    "CPUs this\nprocess may use); the shards and lists are the same whatever "
    "N.\n"
    "--extras txt,json: each sample's extras (a shard's members, a list "
    "file's columns\nafter the label, the files beside a folder's images: "
    "x.txt beside x.jpg) packed\nas KEY.txt, KEY.json, as stored; a sample "
    "without one has no such member.\n" CLI_EXIT_CODES;

typedef struct options {
    const char *data, *out, *prefix;
    const char *extras; /* config.extras */
    int nextras;
    char extra_name[PL_EXTRAS_MAX][32];
    int64_t shard_bytes, per_shard;
    int max_side, quality, quiet, force;
    int threads; /* 0: the CPUs this process may use */
} options;

/* The folder the pack is written in, until it is renamed onto --out; a
 * failure removes it. */
static char stage[4096];

/* Every file of a pack's folder (the stage, or a previous pack: files
 * only, what_is_at_out made sure) removed. */
static void empty_folder(const char *dir)
{
    DIR *d = opendir(dir);
    const struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(dirfd(d), e->d_name, 0);
    if (d)
        closedir(d);
}

static void remove_stage(void)
{
    if (!stage[0])
        return;
    empty_folder(stage);
    rmdir(stage);
    stage[0] = '\0';
}

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "pinload-pack: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    remove_stage();
    exit(1);
}

/* --shard-size: cli_size's sizes, above 0 and at most 1e15. */
static int64_t parse_size(const char *v)
{
    const double n = cli_size("pinload-pack", usage, "--shard-size", v);
    if (n < 1 || n > 1e15) {
        fprintf(stderr,
                "pinload-pack: --shard-size: \"%s\" is not a size (1GB, 500MB, "
                "bytes)\n%s",
                v, usage);
        exit(2);
    }
    return (int64_t)n;
}

/* --extras' names (the loader checks their form), none of them a member
 * the pack writes itself: every extension the loader takes as an image,
 * and cls. (The tools see the public header alone: test_pack holds this
 * list and image_ext's against the library's table of formats.) */
static void split_extras(options *o)
{
    static const char *const own[] = {"jpg", "jpeg", "png", "webp", "cls"};
    for (const char *p = o->extras; p && *p && o->nextras < PL_EXTRAS_MAX;) {
        const size_t len = strcspn(p, ",");
        char *name = o->extra_name[o->nextras++];
        snprintf(name, sizeof o->extra_name[0], "%.*s", (int)len, p);
        for (size_t k = 0; k < sizeof own / sizeof *own; k++)
            if (strcasecmp(name, own[k]) == 0) {
                fprintf(stderr,
                        "pinload-pack: --extras: \"%s\" is a member the pack "
                        "writes itself (the image, KEY.cls)\n%s",
                        name, usage);
                exit(2);
            }
        p += len + (p[len] == ',');
    }
}

static void parse(int argc, char **argv, options *o)
{
    static const char *const valued[] = {
        "--data",    "--out",    "--shard-size", "--per-shard", "--max-side",
        "--quality", "--prefix", "--threads",    "--extras",  NULL};
    o->quality = 90;
    o->prefix = "shard";
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (cli_common("pinload-pack", usage, f, &o->quiet))
            continue;
        if (strcmp(f, "--force") == 0) {
            o->force = 1;
            continue;
        }
        const char *v =
            cli_value("pinload-pack", usage, valued, argc, argv, &i);
        if (strcmp(f, "--data") == 0)
            o->data = v;
        else if (strcmp(f, "--out") == 0)
            o->out = v;
        else if (strcmp(f, "--shard-size") == 0)
            o->shard_bytes = parse_size(v);
        else if (strcmp(f, "--per-shard") == 0)
            o->per_shard = cli_long("pinload-pack", usage, f, v, 1, 1L << 40);
        else if (strcmp(f, "--max-side") == 0)
            o->max_side = (int)cli_long("pinload-pack", usage, f, v, 1, 65535);
        else if (strcmp(f, "--quality") == 0)
            o->quality = (int)cli_long("pinload-pack", usage, f, v, 1, 100);
        else if (strcmp(f, "--prefix") == 0)
            o->prefix = v;
        else if (strcmp(f, "--threads") == 0)
            o->threads = (int)cli_long("pinload-pack", usage, f, v, 1, 1024);
        else if (strcmp(f, "--extras") == 0)
            o->extras = v;
    }
    const char *missing = !o->data  ? "--data"
                          : !o->out ? "--out"
                          : !o->shard_bytes && !o->per_shard
                              ? "--shard-size or --per-shard"
                              : NULL;
    if (missing) {
        fprintf(stderr, "pinload-pack: %s is required\n%s", missing, usage);
        exit(2);
    }
    if (strchr(o->prefix, '/')) {
        fprintf(stderr, "pinload-pack: --prefix: \"%s\" has a slash\n%s",
                o->prefix, usage);
        exit(2);
    }
    split_extras(o);
}

/* ---- tar shards (tools/tarwrite.h) ---- */

typedef struct shard {
    FILE *f;
    char tmp[4700], name[512];
    int64_t samples, bytes;
} shard;

static int put_member(shard *s, const char *name, const void *data, size_t len)
{
    const int64_t n = tarw_member(s->f, name, data, len);
    if (n < 0)
        return -1;
    s->bytes += n;
    return 0;
}

/* The tar bytes a sample adds: two headers, the JPEG and the label,
 * padded. */
static int64_t sample_bytes(size_t jpeg_len)
{
    return 512 + ((int64_t)jpeg_len + 511) / 512 * 512 + 512 + 512;
}

static void shard_open(shard *s, const options *o, int index)
{
    snprintf(s->name, sizeof s->name, "%s-%06d.tar", o->prefix, index);
    snprintf(s->tmp, sizeof s->tmp, "%s/%s", stage, s->name);
    char why[128];
    s->f = cli_open_file(s->tmp, 1, why, sizeof why);
    if (!s->f)
        die("%s: cannot create it", s->tmp);
    s->samples = s->bytes = 0;
}

/* End the archive (two zero blocks) and sync it. */
static void shard_close(shard *s, FILE *manifest)
{
    if (tarw_end(s->f) < 0 || fflush(s->f) ||
        fsync(fileno(s->f)) < 0 || fclose(s->f) != 0)
        die("%s: write failed", s->tmp);
    s->f = NULL;
    s->bytes += 1024;
    fprintf(manifest, "%s\t%lld\t%lld\n", s->name, (long long)s->samples,
            (long long)s->bytes);
}

/* ---- the pack, whole ---- */

/* A file a pack writes: its shards (PREFIX-NNNNNN.tar, any prefix), their
 * sidecar indexes (.tar.idx), manifest.tsv, classes.txt and sources.tsv. */
static int pack_file(const char *name)
{
    const size_t n = strlen(name);
    return strcmp(name, "manifest.tsv") == 0 ||
           strcmp(name, "classes.txt") == 0 ||
           strcmp(name, "sources.tsv") == 0 ||
           (n > 4 && strcmp(name + n - 4, ".tar") == 0) ||
           (n > 8 && strcmp(name + n - 8, ".tar.idx") == 0);
}

/* What stands at --out: 0 nothing (or an empty folder), 1 a previous pack,
 * or die naming what is there. */
static int what_is_at_out(const options *o)
{
    struct stat st;
    if (lstat(o->out, &st) != 0)
        return 0;
    if (!S_ISDIR(st.st_mode))
        die("--out %s: not a directory", o->out);
    DIR *d = opendir(o->out);
    if (!d)
        die("--out %s: cannot be read", o->out);
    int entries = 0;
    const struct dirent *e;
    char first_foreign[300] = "";
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        entries++;
        if (!pack_file(e->d_name) && !first_foreign[0])
            snprintf(first_foreign, sizeof first_foreign, "%s", e->d_name);
    }
    closedir(d);
    if (entries == 0)
        return 0;
    if (first_foreign[0]) {
        fprintf(stderr,
                "pinload-pack: --out %s holds %s, which is not a pack's "
                "own: choose an empty or new folder\n",
                o->out, first_foreign);
        exit(1);
    }
    if (!o->force) {
        fprintf(stderr,
                "pinload-pack: --out %s holds a pack already: --force "
                "replaces it\n",
                o->out);
        exit(1);
    }
    return 1;
}

/* The staging folder beside --out, in its parent (so that the rename is
 * atomic): ".NAME.pack-XXXXXX". */
static void make_stage(const options *o)
{
    char out[4096];
    snprintf(out, sizeof out, "%s", o->out);
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        out[--n] = '\0';
    char *slash = strrchr(out, '/');
    const char *name = slash ? slash + 1 : out;
    char parent[4096];
    if (!slash)
        snprintf(parent, sizeof parent, ".");
    else
        snprintf(parent, sizeof parent, "%.*s",
                 (int)(slash - out) + (slash == out), out);
    if (cli_mkdir_p(parent) < 0)
        die("%s: cannot create it", parent);
    if (snprintf(stage, sizeof stage, "%s/.%s.pack-XXXXXX", parent, name) >=
            (int)sizeof stage ||
        !mkdtemp(stage)) {
        stage[0] = '\0';
        die("--out %s: cannot create a folder beside it", o->out);
    }
    const mode_t mask = umask(0); /* mkdtemp's 0700, made a folder's usual */
    umask(mask);
    chmod(stage, 0777 & ~mask);
}

/* The finished stage renamed onto --out: exchanged with a previous pack
 * (then removed) or put in place of nothing, or of an empty folder. */
static void publish(const options *o, int replace)
{
    if (replace) {
        if (renameat2(AT_FDCWD, stage, AT_FDCWD, o->out, RENAME_EXCHANGE) ==
            0) {
            remove_stage(); /* now the previous pack */
            return;
        }
        /* No exchange here (an old kernel, a file system without it):
         * remove the previous pack's files, then rename. */
        empty_folder(o->out);
    }
    rmdir(o->out); /* empty, or missing */
    if (rename(stage, o->out) != 0)
        die("--out %s: cannot rename the pack onto it", o->out);
    stage[0] = '\0';
}

/* Notices only without --quiet; warnings always, as the library prints
 * them. */
static void pack_log(void *ctx, pl_log_level level, const char *msg)
{
    const options *o = ctx;
    if (level == PL_LOG_NOTICE && o->quiet)
        return;
    fprintf(stderr, "pinload: %s%s\n",
            level == PL_LOG_WARNING ? "warning: " : "", msg);
}

static void drop_notices(void *ctx, pl_log_level level, const char *msg)
{
    if (level != PL_LOG_NOTICE)
        pack_log(ctx, level, msg);
}

/* Each shard's sidecar index (SHARD.tar.idx) beside it in the stage, as a
 * loader's first read of the pack writes them: uploaded with the shards,
 * they let a create over URLs index the pack from small files instead of
 * fetching every shard. Best effort: a pack without them is whole. */
static void write_indexes(const pl_config *listing)
{
    pl_config cfg = *listing;
    cfg.data = stage;
    cfg.log = drop_notices;
    pl_loader *l;
    if (pl_loader_create(&cfg, &l) < 0) {
        fprintf(stderr,
                "pinload-pack: warning: the shards' indexes (.idx) were not "
                "written: %s\n",
                pl_last_error());
        return;
    }
    pl_loader_destroy(l);
}

/* ---- re-encoding ---- */

/* Shrink rgb (w x h) so that its longer side is `side`, by area averaging:
 * separable, each output pixel the mean of the input span it covers, the
 * span's partial pixels weighted by their coverage. */
static uint8_t *shrink(const uint8_t *rgb, int w, int h, int side, int *ow,
                       int *oh)
{
    const double scale = (double)side / (w > h ? w : h);
    *ow = w >= h ? side : (int)(w * scale + 0.5);
    *oh = h > w ? side : (int)(h * scale + 0.5);
    if (*ow < 1)
        *ow = 1;
    if (*oh < 1)
        *oh = 1;
    float *tmp = malloc((size_t)*ow * h * 3 * sizeof *tmp);
    uint8_t *out = malloc((size_t)*ow * *oh * 3);
    if (!tmp || !out) {
        free(tmp);
        free(out);
        return NULL;
    }
    const double sx = (double)w / *ow, sy = (double)h / *oh;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < *ow; x++) {
            const double x0 = x * sx, x1 = x0 + sx;
            double acc[3] = {0, 0, 0};
            for (int i = (int)x0; i < w && i < x1; i++) {
                const double lo = i > x0 ? i : x0;
                const double hi = i + 1 < x1 ? i + 1 : x1;
                const double cover = hi - lo;
                for (int c = 0; c < 3; c++)
                    acc[c] += cover * rgb[((size_t)y * w + i) * 3 + c];
            }
            for (int c = 0; c < 3; c++)
                tmp[((size_t)y * *ow + x) * 3 + c] = (float)(acc[c] / sx);
        }
    for (int y = 0; y < *oh; y++) {
        const double y0 = y * sy, y1 = y0 + sy;
        for (int x = 0; x < *ow; x++) {
            double acc[3] = {0, 0, 0};
            for (int j = (int)y0; j < h && j < y1; j++) {
                const double lo = j > y0 ? j : y0;
                const double hi = j + 1 < y1 ? j + 1 : y1;
                for (int c = 0; c < 3; c++)
                    acc[c] += (hi - lo) * tmp[((size_t)j * *ow + x) * 3 + c];
            }
            for (int c = 0; c < 3; c++) {
                const double v = acc[c] / sy + 0.5;
                out[((size_t)y * *ow + x) * 3 + c] = (uint8_t)(v < 0     ? 0
                                                               : v > 255 ? 255
                                                                         : v);
            }
        }
    }
    free(tmp);
    return out;
}

/* ---- the samples, on every core ---- */

/* One sample made ready to write: its stored bytes (copied, or encoded
 * again), or why it is not packed. */
typedef struct packed_sample {
    int ready;
    const char *ext; /* the member's: "jpg", "png" or "webp" */
    uint8_t *data; /* malloc'd; the writer frees it */
    size_t len;
    /* --extras: each one's bytes (malloc'd), or NULL where it has none */
    uint8_t *extra[PL_EXTRAS_MAX];
    size_t extra_len[PL_EXTRAS_MAX];
    int reencoded;
    int code;      /* 0, or the PL_E* it is not packed for */
    char why[600]; /* then: the reason, naming the file */
} packed_sample;

/* Samples are taken in order by the threads and written in order by the
 * main thread, through a window of `window` slots: sample i's result goes
 * to slot i % window, and no thread runs more than the window ahead of
 * the writer, so memory stays bounded and the output is the same whatever
 * the thread count. */
typedef struct packer {
    pl_loader *l;
    const options *o;
    int64_t n;
    pthread_mutex_t mu;
    pthread_cond_t done_cv; /* a slot became ready */
    pthread_cond_t room_cv; /* the writer took a slot */
    int64_t next;           /* the next sample to take */
    int64_t written;        /* the writer's position */
    int window;
    packed_sample *slots;
    int stop;
} packer;

/* The member extension of an image's bytes, by their signature, or NULL
 * for bytes of none of the formats the loader reads (JPEG's stricter than
 * the loader's: FF D8 FF, a marker after SOI). */
static const char *image_ext(const uint8_t *b, size_t n)
{
    if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
        return "jpg";
    if (n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0)
        return "png";
    if (n >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "WEBP", 4) == 0)
        return "webp";
    return NULL;
}

static void free_sample(packed_sample *r)
{
    free(r->data);
    r->data = NULL;
    for (int k = 0; k < PL_EXTRAS_MAX; k++) {
        free(r->extra[k]);
        r->extra[k] = NULL;
    }
}

/* Sample i's extras into r (PL_ENOEXTRA: it has none of that name);
 * 0, or the error that keeps it out of the pack. */
static int read_extras(packer *p, int64_t i, packed_sample *r)
{
    for (int k = 0; k < p->o->nextras; k++) {
        size_t len = 0;
        int rc = pl_loader_read_extra(p->l, i, k, NULL, 0, &len);
        if (rc == PL_ENOEXTRA)
            continue;
        if (rc < 0 && !(rc == PL_EINVAL && len > 0))
            return rc;
        /* one spare byte: an empty extra is a member too, not "none" */
        if (!(r->extra[k] = malloc(len + 1)))
            die("%s", "out of memory");
        if (len && (rc = pl_loader_read_extra(p->l, i, k, r->extra[k], len,
                                              &len)) < 0)
            return rc;
        r->extra_len[k] = len;
    }
    return 0;
}

/* Sample i: read, checked, re-encoded if --max-side asks. Any thread. */
static void make_sample(packer *p, int64_t i, packed_sample *r)
{
    const options *o = p->o;
    memset(r, 0, sizeof *r);
    const char *name;
    int32_t label;
    pl_loader_sample(p->l, i, &name, &label);
    size_t len = 0;
    int rc = pl_loader_read_sample(p->l, i, NULL, 0, &len);
    uint8_t *bytes = NULL;
    if (rc == PL_EINVAL && len > 0) {
        bytes = malloc(len);
        if (!bytes)
            die("%s", "out of memory");
        rc = pl_loader_read_sample(p->l, i, bytes, len, &len);
    }
    if (rc < 0) {
        r->code = rc;
        snprintf(r->why, sizeof r->why, "%s", pl_last_error());
        free(bytes);
        return;
    }
    /* Stored as KEY.jpg, KEY.png or KEY.webp, by the bytes' signature
     * (as the loader decodes them), whatever the file's name; any other
     * bytes are not packed. */
    r->ext = image_ext(bytes, len);
    if (!r->ext) {
        r->code = PL_ENOTIMAGE;
        snprintf(r->why, sizeof r->why,
                 "%s: not a JPEG, PNG or WebP image", name);
        free(bytes);
        return;
    }
    r->data = bytes;
    r->len = len;
    if ((rc = read_extras(p, i, r)) < 0) {
        r->code = rc;
        snprintf(r->why, sizeof r->why, "%s", pl_last_error());
        free_sample(r);
        return;
    }
    if (!o->max_side)
        return;
    pl_image img;
    if (pl_image_decode(bytes, len, &img) < 0) {
        r->code = PL_ECORRUPT;
        snprintf(r->why, sizeof r->why, "%s", pl_last_error());
        free_sample(r);
        return;
    }
    if (img.width > o->max_side || img.height > o->max_side) {
        int w, h;
        uint8_t *small =
            shrink(img.pixels, img.width, img.height, o->max_side, &w, &h);
        if (!small)
            die("%s", "out of memory");
        /* baseline 4:2:0, optimised Huffman tables, in memory */
        const jpegenc_opts jo = {.quality = o->quality, .optimize = 1};
        unsigned char *enc = NULL;
        unsigned long enc_len = 0;
        jpegenc(small, w, h, &jo, NULL, &enc, &enc_len);
        free(small);
        free(bytes);
        r->data = enc; /* jpegenc's buffer is malloc'd */
        r->len = enc_len;
        r->reencoded = 1;
        r->ext = "jpg";
    }
    pl_image_free(&img);
}

static void *pack_thread(void *arg)
{
    packer *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->next < p->n && p->next >= p->written + p->window)
            pthread_cond_wait(&p->room_cv, &p->mu);
        if (p->stop || p->next >= p->n) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        const int64_t i = p->next++;
        pthread_mutex_unlock(&p->mu);
        packed_sample r;
        make_sample(p, i, &r);
        pthread_mutex_lock(&p->mu);
        r.ready = 1;
        p->slots[i % p->window] = r;
        pthread_cond_broadcast(&p->done_cv);
        pthread_mutex_unlock(&p->mu);
    }
}

/* Sample i once a thread made it (the slot is then the writer's), or
 * NULL if a signal came first. */
static packed_sample *wait_sample(packer *p, int64_t i)
{
    packed_sample *r = &p->slots[i % p->window];
    pthread_mutex_lock(&p->mu);
    while (!r->ready && !cli_signal) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 100000000; /* a signal is seen within 0.1 s */
        if (t.tv_nsec >= 1000000000) {
            t.tv_sec++;
            t.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&p->done_cv, &p->mu, &t);
    }
    pthread_mutex_unlock(&p->mu);
    return r->ready ? r : NULL;
}

/* The writer is done with sample i: its slot is free for i + window. */
static void took_sample(packer *p, packed_sample *r)
{
    free_sample(r);
    pthread_mutex_lock(&p->mu);
    r->ready = 0;
    p->written++;
    pthread_cond_broadcast(&p->room_cv);
    pthread_mutex_unlock(&p->mu);
}

static void stop_threads(packer *p, pthread_t *th, int n)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->room_cv);
    pthread_mutex_unlock(&p->mu);
    for (int t = 0; t < n; t++)
        pthread_join(th[t], NULL);
    for (int k = 0; k < p->window; k++)
        free_sample(&p->slots[k]);
    free(p->slots);
}

/* The CPUs this process may run on. */
static int cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* classes.txt: the class names, one per line, label 0 first, read back by
 * the loader so that a pack of an ImageFolder keeps its names. */
static void write_classes(pl_loader *l, const pl_info *info)
{
    char path[4200], why[128];
    snprintf(path, sizeof path, "%s/classes.txt", stage);
    FILE *f = cli_open_file(path, 1, why, sizeof why);
    if (!f)
        die("%s: cannot create it", path);
    for (int32_t c = 0; c < info->num_classes; c++) {
        const char *name;
        if (pl_loader_class_name(l, c, &name) < 0)
            die("%s", pl_last_error());
        if (strchr(name, '\n'))
            die("class name \"%s\" holds a line break", name);
        fprintf(f, "%s\n", name);
    }
    if (fflush(f) != 0 || fsync(fileno(f)) != 0 || fclose(f) != 0)
        die("%s: write failed", path);
}

int main(int argc, char **argv)
{
    options o = {0};
    parse(argc, argv, &o);
    cli_catch_signals("pinload-pack");
    const int replace = what_is_at_out(&o);

    /* The loader lists and orders; keep it small. */
    pl_config cfg;
    pl_config_default(&cfg);
    cfg.data = o.data;
    cfg.batch_size = 1;
    cfg.width = cfg.height = 1;
    cfg.num_workers = 1;
    cfg.prefetch = 1;
    cfg.device_buffers = 1;
    cfg.device = PL_DEVICE_HOST;
    cfg.world_size = 1;
    cfg.rank = 0;
    cfg.log = pack_log;
    cfg.log_ctx = &o;
    cfg.extras = o.extras;
    pl_loader *l;
    if (pl_loader_create(&cfg, &l) < 0)
        die("%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);

    make_stage(&o);
    cli_graceful = 1; /* a signal stops the pack, which is then removed */
    write_classes(l, &info);
    char path[4200], spath[4200], why[128];
    snprintf(path, sizeof path, "%s/manifest.tsv", stage);
    FILE *manifest = cli_open_file(path, 1, why, sizeof why);
    if (!manifest)
        die("%s: cannot create it", path);
    fprintf(manifest, "shard\tsamples\tbytes\n");
    snprintf(spath, sizeof spath, "%s/sources.tsv", stage);
    FILE *sources = cli_open_file(spath, 1, why, sizeof why);
    if (!sources)
        die("%s: cannot create it", spath);
    fprintf(sources, "key\tshard\tsource\n");

    const int threads = o.threads ? o.threads : cpus();
    packer p = {.l = l, .o = &o, .n = info.dataset_size, .window = 4 * threads};
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.done_cv, NULL);
    pthread_cond_init(&p.room_cv, NULL);
    p.slots = calloc((size_t)p.window, sizeof *p.slots);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    if (!p.slots || !th)
        die("%s", "out of memory");
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&th[started], NULL, pack_thread, &p) != 0)
            break;
    if (started == 0)
        die("%s", "cannot start a thread");

    shard s = {0};
    int nshards = 0;
    int64_t packed = 0, reencoded = 0, failed = 0;
    int64_t i = 0;
    cli_progress_start();
    for (; i < info.dataset_size && !cli_signal; i++) {
        packed_sample *r = wait_sample(&p, i);
        if (!r)
            break; /* a signal */
        const char *name;
        int32_t label;
        pl_loader_sample(l, i, &name, &label);
        if (r->code) {
            fprintf(stderr, "pinload-pack: not packed: %s\n", r->why);
            fprintf(manifest, "# not packed: %s\t%s\n", name,
                    pl_err_name(r->code));
            failed++;
            took_sample(&p, r);
            continue;
        }
        reencoded += r->reencoded;
        int64_t add = sample_bytes(r->len);
        for (int k = 0; k < o.nextras; k++)
            if (r->extra[k])
                add += 512 + ((int64_t)r->extra_len[k] + 511) / 512 * 512;
        if (s.f && ((o.per_shard && s.samples >= o.per_shard) ||
                    (o.shard_bytes && s.bytes + add + 1024 > o.shard_bytes)))
            shard_close(&s, manifest);
        if (!s.f)
            shard_open(&s, &o, nshards++);
        char key[32], label_text[16];
        snprintf(key, sizeof key, "%09lld", (long long)i);
        const int ll = snprintf(label_text, sizeof label_text, "%d", label);
        char member[48];
        snprintf(member, sizeof member, "%s.%s", key, r->ext);
        int bad = put_member(&s, member, r->data, r->len) < 0;
        snprintf(member, sizeof member, "%s.cls", key);
        bad = bad || put_member(&s, member, label_text, (size_t)ll) < 0;
        for (int k = 0; k < o.nextras && !bad; k++) {
            if (!r->extra[k])
                continue;
            snprintf(member, sizeof member, "%s.%s", key, o.extra_name[k]);
            bad = put_member(&s, member, r->extra[k], r->extra_len[k]) < 0;
        }
        bad = bad || fprintf(sources, "%s\t%s\t%s\n", key, s.name, name) < 0;
        took_sample(&p, r);
        if (bad)
            die("%s: write failed", s.tmp);
        s.samples++;
        packed++;
        cli_progress("pinload-pack", o.quiet, (long)i + 1,
                     (long)info.dataset_size, "samples packed");
    }
    stop_threads(&p, th, started);
    free(th);
    pl_loader_destroy(l);
    if (cli_signal) {
        /* Half a pack must not read as a smaller dataset: none is left. */
        if (s.f)
            fclose(s.f);
        fclose(manifest);
        fclose(sources);
        remove_stage();
        fprintf(stderr,
                "pinload-pack: stopped by signal %d after %lld of %lld "
                "samples; nothing written to %s\n",
                (int)cli_signal, (long long)i, (long long)info.dataset_size,
                o.out);
        return 128 + cli_signal;
    }
    if (s.f)
        shard_close(&s, manifest);
    if (fflush(sources) != 0 || fsync(fileno(sources)) != 0 ||
        fclose(sources) != 0)
        die("%s: write failed", spath);
    /* The marker a reader may check: the manifest, so the pack, is whole. */
    fprintf(manifest, "# end: %lld samples in %d shards, %lld not packed\n",
            (long long)packed, nshards, (long long)failed);
    if (fflush(manifest) != 0 || fsync(fileno(manifest)) != 0 ||
        fclose(manifest) != 0)
        die("%s: write failed", path);
    if (nshards > 0)
        write_indexes(&cfg);
    publish(&o, replace);
    if (!o.quiet)
        fprintf(
            stderr,
            "pinload-pack: %lld samples in %d shards in %s (%lld re-encoded, "
            "%lld not packed; %d threads)\n",
            (long long)packed, nshards, o.out, (long long)reencoded,
            (long long)failed, started);
    return failed ? 1 : 0;
}
