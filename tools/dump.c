/* pinload-dump: write what the loader delivers, one PPM per sample in
 * delivery order plus index.tsv, for eyes and for checks. Uses only the
 * public API. */
#define _DEFAULT_SOURCE /* sigaction, clock_gettime */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "pinload.h"

static const char usage[] =
    "usage: pinload-dump --data PATH --out DIR [--raw | --size N "
    "--augment " CLI_AUGMENT_USAGE "]\n"
    "                    [--seed S] [--epoch E] [--workers N] [--prefetch N] "
    "[--pin on|off|managed]\n"
    "                    [--batch B] [--limit N] "
    "[--on-error fail|skip|substitute]\n"
    "                    [--extras txt,json [--extras-required]]\n"
    "                    [--shuffle on|off] [--drop-last on|off]\n"
    "                    " CLI_ORDER_USAGE "\n"
    "                    [--device " CLI_DEVICES "]\n"
    "                    [--stop-after-batches K] [--save-state FILE] "
    "[--resume-from FILE]\n"
    "                    [--quiet] [--version] [--help]\n"
    "Writes DIR/NNNNNN.ppm (P6 RGB) per delivered sample of one epoch, "
    "numbered by\nits place in the epoch, and DIR/index.tsv (position, path, "
    "label, status).\n--raw decodes each file at its own size, without crop "
    "or resize.\n--augment takes a preset or a spec of ops, as "
    "config.transform (docs/transforms.md):\n"
    "--augment 'rrc(scale=0.5:1);hflip;grayscale(0.2)'.\n--extras writes each "
    "sample's extras beside its PPM "
    "(NNNNNN.txt, NNNNNN.json), as\nstored; --extras-required makes a "
    "sample lacking one bad.\n"
    "Rank and world size come from the launcher's variables (torchrun, SLURM, "
    "Open MPI,\nMPICH/PMI). --stop-after-batches delivers K batches, then "
    "stops; --save-state\nwrites where it stopped; --resume-from starts "
    "there, numbering as the\nuninterrupted run would. --workers 0 (the "
    "default) is the library's choice.\n"
    "In index.tsv a backslash, tab, newline or carriage return in a field is "
    "written\n\\\\, \\t, \\n or \\r; other control bytes and bytes that are "
    "not UTF-8, \\xHH.\n" CLI_EXIT_CODES;

typedef struct options {
    const char *data, *out;
    int raw, limit, quiet;
    long stop_after; /* batches; -1: the whole epoch */
    const char *save_state, *resume_from;
    pl_state resume;
    pl_config cfg;
} options;

static void die(const char *fmt, const char *arg)
{
    fprintf(stderr, "pinload-dump: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage);
    exit(2);
}

static long parse_long(const char *flag, const char *v, long lo, long hi)
{
    return cli_long("pinload-dump", usage, flag, v, lo, hi);
}

static int parse_choice(const char *flag, const char *v,
                        const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0)
            return i;
    fprintf(stderr, "pinload-dump: %s: unknown value \"%s\"\n%s", flag, v,
            usage);
    exit(2);
}

static void parse(int argc, char **argv, options *o)
{
    static const char *const onoff[] = {"off", "on"};
    static const char *const valued[] = {"--data",
                                         "--out",
                                         "--size",
                                         "--augment",
                                         "--seed",
                                         "--epoch",
                                         "--workers",
                                         "--prefetch",
                                         "--pin",
                                         "--batch",
                                         "--limit",
                                         "--on-error",
                                         "--shuffle",
                                         "--drop-last",
                                         "--stop-after-batches",
                                         "--save-state",
                                         "--resume-from",
                                         "--device",
                                         "--order",
                                         "--shuffle-window",
                                         "--extras",
                                         NULL};
    pl_config_default(&o->cfg);
    o->cfg.augment = PL_AUGMENT_NONE;
    o->cfg.on_error = PL_ON_ERROR_FAIL;
    o->cfg.batch_size = 16;
    o->cfg.keep_host = 1; /* PPMs are written from host memory */
    o->limit = -1;
    o->stop_after = -1;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (cli_common("pinload-dump", usage, f, &o->quiet))
            continue;
        if (strcmp(f, "--extras-required") == 0) {
            o->cfg.extras_required = 1;
            continue;
        }
        if (strcmp(f, "--raw") == 0) {
            o->raw = 1;
            continue;
        }
        const char *v =
            cli_value("pinload-dump", usage, valued, argc, argv, &i);
        if (strcmp(f, "--data") == 0)
            o->data = v;
        else if (strcmp(f, "--out") == 0)
            o->out = v;
        else if (strcmp(f, "--size") == 0)
            o->cfg.width = o->cfg.height = (int)parse_long(f, v, 1, 16384);
        else if (strcmp(f, "--augment") == 0)
            o->cfg.augment = cli_augment_spec(v, &o->cfg.transform);
        else if (strcmp(f, "--seed") == 0)
            o->cfg.seed = (uint64_t)parse_long(f, v, 0, __LONG_MAX__);
        else if (strcmp(f, "--epoch") == 0)
            o->cfg.first_epoch = parse_long(f, v, 0, __LONG_MAX__);
        else if (strcmp(f, "--workers") == 0)
            o->cfg.num_workers = (int)parse_long(f, v, 0, 1024);
        else if (strcmp(f, "--prefetch") == 0)
            o->cfg.prefetch = (int)parse_long(f, v, 1, 1024);
        else if (strcmp(f, "--pin") == 0) {
            o->cfg.memory = cli_pin(v);
            if (o->cfg.memory < 0)
                cli_usage_error("pinload-dump", usage,
                                "%s: unknown value \"%s\" (on, off or managed)",
                                f, v);
        } else if (strcmp(f, "--batch") == 0)
            o->cfg.batch_size = (int)parse_long(f, v, 1, 65536);
        else if (strcmp(f, "--limit") == 0)
            o->limit = (int)parse_long(f, v, 0, __INT_MAX__);
        else if (strcmp(f, "--on-error") == 0)
            o->cfg.on_error = cli_on_error("pinload-dump", usage, f, v);
        else if (strcmp(f, "--shuffle") == 0)
            o->cfg.shuffle = parse_choice(f, v, onoff, 2);
        else if (strcmp(f, "--drop-last") == 0)
            o->cfg.drop_last = parse_choice(f, v, onoff, 2);
        else if (strcmp(f, "--order") == 0)
            o->cfg.order = cli_order("pinload-dump", usage, f, v);
        else if (strcmp(f, "--shuffle-window") == 0)
            o->cfg.shuffle_window = (int)parse_long(f, v, 1, __INT_MAX__);
        else if (strcmp(f, "--stop-after-batches") == 0)
            o->stop_after = parse_long(f, v, 0, __LONG_MAX__);
        else if (strcmp(f, "--save-state") == 0)
            o->save_state = v;
        else if (strcmp(f, "--resume-from") == 0)
            o->resume_from = v;
        else if (strcmp(f, "--extras") == 0)
            o->cfg.extras = v;
        else if (strcmp(f, "--device") == 0) {
            int must_cuda;
            o->cfg.device = cli_device("pinload-dump", usage, f, v, &must_cuda);
        }
    }
    if (!o->data)
        die("%s is required", "--data");
    if (!o->out)
        die("%s is required", "--out");
    if (o->raw && (o->stop_after >= 0 || o->save_state || o->resume_from))
        die("%s cannot stop, save or resume", "--raw");
    if (o->raw && o->cfg.extras)
        die("%s writes pixels only, no extras", "--raw");
    o->cfg.data = o->data;
    if (!o->raw)
        cli_check_transform("pinload-dump", usage, &o->cfg);
}

/* ---- states ---- */

static int read_state(const char *path, pl_state *st)
{
    char why[128];
    FILE *f = cli_open_file(path, 0, why, sizeof why);
    if (!f) {
        fprintf(stderr, "pinload-dump: --resume-from %s: %s\n", path, why);
        return -1;
    }
    const size_t n = fread(st->bytes, 1, sizeof st->bytes, f);
    const int extra = fgetc(f) != EOF;
    fclose(f);
    if (n != sizeof st->bytes || extra) {
        fprintf(stderr,
                "pinload-dump: --resume-from %s: not a state (%zu%s bytes, "
                "a state has %d)\n",
                path, n, extra ? " or more" : "", PL_STATE_BYTES);
        return -1;
    }
    return 0;
}

/* Written beside, then renamed: a crash leaves the old state or the new. */
static int write_state(const char *path, const pl_state *st)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    char why[128] = "";
    FILE *f = cli_open_file(tmp, 1, why, sizeof why);
    int ok = f && fwrite(st->bytes, 1, sizeof st->bytes, f) == sizeof st->bytes;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "pinload-dump: --save-state %s: %s\n", path,
                why[0] ? why : strerror(errno));
        if (f)
            unlink(tmp);
        return -1;
    }
    return 0;
}

/* ---- output ---- */

typedef struct writer {
    const char *dir;
    FILE *tsv;
    long written, skipped;
    long total; /* samples this run will write, for the progress line */
    int quiet;
} writer;

/* What an earlier dump leaves in its --out: index.tsv, NNNNNN.ppm and the
 * extras beside them (NNNNNN.txt, NNNNNN.seg.png). */
static int ours(const char *name)
{
    if (strcmp(name, "index.tsv") == 0)
        return 1;
    size_t digits = strspn(name, "0123456789");
    return digits >= 6 && name[digits] == '.' && name[digits + 1] != '\0';
}

/* --out made if missing, and a folder; the files of an earlier dump in it
 * removed (with a line saying how many), so that nothing stale stands
 * beside this run's samples. Other files are left alone. */
static int prepare_out(const char *out)
{
    struct stat st;
    if (cli_mkdir_p(out) < 0 || stat(out, &st) != 0) {
        fprintf(stderr, "pinload-dump: --out %s: %s\n", out, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "pinload-dump: --out %s: not a directory\n", out);
        return -1;
    }
    DIR *d = opendir(out);
    if (!d) {
        fprintf(stderr, "pinload-dump: --out %s: %s\n", out, strerror(errno));
        return -1;
    }
    long removed = 0;
    int rc = 0;
    const struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL)
        if (ours(e->d_name)) {
            if (unlinkat(dirfd(d), e->d_name, 0) == 0)
                removed++;
            else
                rc = -1;
            if (rc < 0)
                fprintf(stderr, "pinload-dump: %s/%s: %s\n", out, e->d_name,
                        strerror(errno));
        }
    closedir(d);
    if (removed > 0)
        fprintf(stderr,
                "pinload-dump: removed %ld file%s of an earlier dump from %s\n",
                removed, removed == 1 ? "" : "s", out);
    return rc;
}

/* After a failed write, index.tsv (path, open as tsv) cut back to its last
 * whole row. */
static void cut_to_last_row(FILE *tsv, const char *path)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return;
    off_t end = lseek(fd, 0, SEEK_END);
    char buf[4096];
    while (end > 0) {
        const off_t from =
            end > (off_t)sizeof buf ? end - (off_t)sizeof buf : 0;
        const ssize_t n = pread(fd, buf, (size_t)(end - from), from);
        if (n <= 0)
            return;
        for (ssize_t k = n - 1; k >= 0; k--)
            if (buf[k] == '\n') {
                if (ftruncate(fileno(tsv), from + k + 1) != 0) {
                    /* the error is reported already */
                }
                close(fd);
                return;
            }
        end = from;
    }
    close(fd);
}

/* The index's writes so far succeeded; else say why and cut it back to its
 * last whole row. 0 or -1. */
static int tsv_check(writer *w, const char *path)
{
    if (!w->tsv || (fflush(w->tsv) == 0 && !ferror(w->tsv)))
        return 0;
    fprintf(stderr, "pinload-dump: %s: %s; it ends at its last whole row\n",
            path, strerror(errno));
    clearerr(w->tsv);
    setvbuf(w->tsv, NULL, _IONBF, 0); /* nothing left to write at close */
    cut_to_last_row(w->tsv, path);
    fclose(w->tsv);
    w->tsv = NULL;
    return -1;
}

static int write_ppm(writer *w, long position, const uint8_t *rgb, int width,
                     int height)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%06ld.ppm", w->dir, position);
    char why[128];
    FILE *f = cli_open_file(path, 1, why, sizeof why);
    if (!f) {
        fprintf(stderr, "pinload-dump: %s: %s\n", path, why);
        return -1;
    }
    fprintf(f, "P6\n%d %d\n255\n", width, height);
    const size_t n = (size_t)width * (size_t)height * 3;
    const int ok = fwrite(rgb, 1, n, f) == n;
    if (fclose(f) != 0 || !ok) {
        fprintf(stderr, "pinload-dump: %s: %s\n", path, strerror(errno));
        unlink(path);
        return -1;
    }
    return 0;
}

/* Sample i's extras of b, each to DIR/NNNNNN.<name>, as stored. */
static int write_extras(const writer *w, long position, const pl_batch *b,
                        int i)
{
    for (int k = 0; k < b->num_extras; k++) {
        const pl_extra *x = &b->extras[k];
        char path[4096], why[128];
        snprintf(path, sizeof path, "%s/%06ld.%s", w->dir, position, x->name);
        FILE *f = cli_open_file(path, 1, why, sizeof why);
        if (!f) {
            fprintf(stderr, "pinload-dump: %s: %s\n", path, why);
            return -1;
        }
        const size_t n = (size_t)(x->offsets[i + 1] - x->offsets[i]);
        const int ok = fwrite(x->data + x->offsets[i], 1, n, f) == n;
        if (fclose(f) != 0 || !ok) {
            fprintf(stderr, "pinload-dump: %s: %s\n", path, strerror(errno));
            unlink(path);
            return -1;
        }
    }
    return 0;
}

/* The PPM of a sample whose row could not be written goes too: every PPM
 * has its row. Returns 1, the dump's status. */
static int drop_ppm(const writer *w, long position)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%06ld.ppm", w->dir, position);
    unlink(path);
    return 1;
}

static void row(writer *w, const char *position, const char *path,
                int32_t label, const char *status)
{
    fprintf(w->tsv, "%s\t", position);
    cli_escape(w->tsv, path);
    fprintf(w->tsv, "\t%d\t", label);
    cli_escape(w->tsv, status);
    fputc('\n', w->tsv);
}

/* The recorded failure of `index`, as a status; 0 if there is none. */
static int failure_status(pl_loader *l, int64_t index, char *status, size_t cap)
{
    pl_failure f[64];
    size_t n, first = 0;
    int found = 0;
    while (pl_loader_failures(l, first, f, 64, &n) == 0 && n > 0) {
        for (size_t i = 0; i < n; i++)
            if (f[i].index == index && f[i].code != 0) {
                snprintf(status, cap, "%s: %s", pl_err_name(f[i].code),
                         f[i].reason);
                found = 1;
            }
        first += n;
    }
    return found;
}

/* Under skip, a sample missing from the delivered sequence was skipped:
 * emit its row, with the recorded reason as status, where it would have
 * been. */
static void skipped_row(writer *w, pl_loader *l, int64_t index)
{
    const char *path;
    int32_t label;
    pl_loader_sample(l, index, &path, &label);
    char status[1024] = "skipped";
    failure_status(l, index, status, sizeof status);
    row(w, "-", path, label, status);
    w->skipped++;
}

/* ---- the two modes ---- */

/* One epoch's batches (or the first --stop-after-batches of them), from
 * epoch position `cursor` on: each sample is written as its place in the
 * epoch (batch index x batch size + its place in the batch), and each
 * position the loader passed over as a skipped row. Positions past the end
 * of the order are the order again, standing in for skipped samples. */
static int dump_batches(writer *w, pl_loader *l, const options *o,
                        const int64_t *order, int64_t order_n, int64_t cursor)
{
    pl_info info;
    pl_loader_info(l, &info);
    long taken = 0;
    int rc;
    const pl_batch *b;
    while ((o->stop_after < 0 || taken < o->stop_after) && !cli_signal &&
           (rc = pl_loader_next(l, &b)) != PL_EPOCH_END) {
        if (rc < 0) {
            cli_say("pinload-dump", pl_last_error());
            return 1;
        }
        taken++;
        for (int i = 0; i < b->count && !cli_signal; i++) {
            if (o->limit >= 0 && w->written >= o->limit)
                break;
            while (order[cursor % order_n] != b->indices[i])
                skipped_row(w, l, order[cursor++ % order_n]);
            cursor++;
            const char *path;
            pl_loader_sample(l, b->indices[i], &path, NULL);
            const long place = (long)(b->index * info.batch_size + i);
            char pos[32];
            snprintf(pos, sizeof pos, "%ld", place);
            if (write_ppm(w, place,
                          (const uint8_t *)b->host +
                              (size_t)i * info.sample_bytes,
                          info.width, info.height) < 0 ||
                write_extras(w, place, b, i) < 0)
                return 1;
            row(w, pos, path, b->labels[i],
                b->status[i] ? pl_err_name(b->status[i]) : "ok");
            if (ferror(w->tsv))
                return drop_ppm(w, place); /* a full disk: main says so */
            w->written++;
            cli_progress("pinload-dump", w->quiet, w->written, w->total,
                         "samples written");
        }
        pl_loader_release(l, b, NULL);
        if (o->limit >= 0 && w->written >= o->limit)
            return 0;
    }
    /* Nothing follows the last sample delivered: under skip the last batch
     * wraps past the order's bad tail (listed above), and what drop_last
     * leaves out is not a skipped file, whether or not the prefetcher
     * happened to decode it already. */
    return 0;
}

/* Sample index's pixels at their own size, from its bytes as stored (a
 * file, or a tar member). */
static int load_sample(pl_loader *l, int64_t index, uint8_t **bytes,
                       size_t *cap, pl_image *img)
{
    size_t len;
    int rc = pl_loader_read_sample(l, index, *bytes, *cap, &len);
    if (rc == PL_EINVAL && len > *cap) { /* a larger buffer, once */
        uint8_t *b = realloc(*bytes, len);
        if (!b)
            return PL_ENOMEM;
        *bytes = b;
        *cap = len;
        rc = pl_loader_read_sample(l, index, *bytes, *cap, &len);
    }
    return rc < 0 ? rc : pl_image_decode(*bytes, len, img);
}

static int dump_raw(writer *w, pl_loader *l, const options *o,
                    const int64_t *order, int64_t order_n)
{
    uint8_t *bytes = NULL;
    size_t cap = 0;
    int status = 0;
    for (int64_t k = 0; k < order_n && !cli_signal; k++) {
        if (o->limit >= 0 && w->written >= o->limit)
            break;
        const char *path;
        int32_t label;
        pl_loader_sample(l, order[k], &path, &label);
        pl_image img;
        const int rc = load_sample(l, order[k], &bytes, &cap, &img);
        if (rc < 0 && o->cfg.on_error == PL_ON_ERROR_FAIL) {
            cli_say("pinload-dump", pl_last_error());
            status = 1;
            break;
        }
        if (rc < 0) {
            char why[1024];
            snprintf(why, sizeof why, "%s: %s", pl_err_name(rc),
                     pl_last_error());
            row(w, "-", path, label, why);
            w->skipped++;
            continue;
        }
        char pos[32];
        snprintf(pos, sizeof pos, "%ld", w->written);
        const int bad =
            write_ppm(w, w->written, img.pixels, img.width, img.height);
        pl_image_free(&img);
        if (bad) {
            status = 1;
            break;
        }
        row(w, pos, path, label, "ok");
        if (ferror(w->tsv)) {
            status = drop_ppm(w, w->written); /* a full disk: main says so */
            break;
        }
        w->written++;
        cli_progress("pinload-dump", w->quiet, w->written, w->total,
                     "samples written");
    }
    free(bytes);
    return status;
}

int main(int argc, char **argv)
{
    options o = {0};
    parse(argc, argv, &o);
    cli_catch_signals("pinload-dump");
    if (o.raw) { /* the loader only lists and orders; keep it small */
        o.cfg.num_workers = 1;
        o.cfg.prefetch = 1;
        o.cfg.batch_size = 1;
    }
    if (prepare_out(o.out) < 0)
        return 1;
    int64_t epoch = o.cfg.first_epoch, position = 0;
    if (o.resume_from) {
        if (read_state(o.resume_from, &o.resume) < 0 ||
            pl_state_get(&o.resume, &epoch, NULL, &position) < 0) {
            if (o.resume_from && pl_last_error()[0])
                fprintf(stderr, "pinload-dump: %s: %s\n", o.resume_from,
                        pl_last_error());
            return 1;
        }
        o.cfg.resume = &o.resume;
    }
    pl_loader *l;
    if (pl_loader_create(&o.cfg, &l) < 0) {
        cli_say("pinload-dump", pl_last_error());
        return 1;
    }
    pl_info info;
    pl_loader_info(l, &info);
    int64_t *order = malloc((size_t)info.samples_per_epoch * sizeof *order);
    char tsv_path[4096];
    snprintf(tsv_path, sizeof tsv_path, "%s/index.tsv", o.out);
    char why[128] = "";
    writer w = {.dir = o.out,
                .tsv = cli_open_file(tsv_path, 1, why, sizeof why)};
    int status = 1;
    if (!order || !w.tsv) {
        fprintf(stderr, "pinload-dump: %s%s%s\n", order ? tsv_path : "",
                order ? ": " : "", order ? why : "out of memory");
        goto done;
    }
    /* Line-buffered: a row reaches the file whole, or fails whole. */
    setvbuf(w.tsv, NULL, _IOLBF, 0);
    cli_graceful = 1;    /* a signal now stops after the sample in hand */
    if (o.resume_from) { /* an elastic restart starts the epoch again */
        pl_state now;
        pl_loader_state(l, &now);
        pl_state_get(&now, &epoch, NULL, &position);
    }
    pl_loader_epoch_order(l, epoch, order, info.samples_per_epoch);
    fprintf(w.tsv, "position\tpath\tlabel\tstatus\n");
    /* What this run writes: the epoch's delivered samples from where it
     * starts, cut by --stop-after-batches and --limit. */
    w.quiet = o.quiet;
    w.total = o.raw ? info.samples_per_epoch
                    : (long)info.batches_per_epoch * info.batch_size;
    if (!o.raw && !o.cfg.drop_last && info.samples_per_epoch < w.total)
        w.total = info.samples_per_epoch;
    if (!o.raw)
        w.total -= (long)position;
    if (!o.raw && o.stop_after >= 0 &&
        o.stop_after * (long)info.batch_size < w.total)
        w.total = o.stop_after * (long)info.batch_size;
    if (o.limit >= 0 && o.limit < w.total)
        w.total = o.limit;
    status = o.raw ? dump_raw(&w, l, &o, order, info.samples_per_epoch)
                   : dump_batches(&w, l, &o, order, info.samples_per_epoch,
                                  position);
    if (tsv_check(&w, tsv_path) < 0)
        status = 1;
    cli_progress("pinload-dump", w.quiet, w.total, w.total, "");
    if (cli_signal) {
        fprintf(stderr,
                "pinload-dump: stopped by signal %d after %ld samples; "
                "they and index.tsv are complete%s\n",
                (int)cli_signal, w.written,
                o.save_state ? " (no state saved mid-batch)" : "");
        status = 128 + cli_signal;
    }
    if (status == 0 && o.save_state) {
        pl_state st;
        pl_loader_state(l, &st);
        status = write_state(o.save_state, &st) < 0;
    }
    /* On failure the one line above names the file; on success, every
     * problem file is listed. */
    if (status == 0) {
        fprintf(stderr, "pinload-dump: wrote %ld samples (%ld skipped) to %s\n",
                w.written, w.skipped, o.out);
        cli_print_failures(stderr, "pinload-dump", l);
    }
done:
    if (w.tsv && fclose(w.tsv) != 0 && status == 0) {
        fprintf(stderr, "pinload-dump: %s: %s\n", tsv_path, strerror(errno));
        status = 1;
    }
    free(order);
    pl_loader_destroy(l);
    return status;
}
