/* pinload-bench's command line: the usage, strict values, the sweep's
 * lists and the defaults. */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"

const char bench_usage[] =
    "usage: pinload-bench --data PATH [--batch B] [--size N] "
    "[--augment " CLI_AUGMENT_USAGE "]\n"
    "       [--format u8|f32|f16|bf16] [--gpu-normalize on|off] [--workers "
    "LIST]\n"
    "       [--decode cpu,gpu,auto]\n"
    "       [--prefetch LIST] [--pin LIST] [--rounds R]\n"
    "       [--batches N | --seconds S] [--warmup N] [--compute-ms X]\n"
    "       [--device " CLI_DEVICES "] [--csv FILE] [--json FILE]\n"
    "       [--plot FILE.png] [--quiet] [--baseline [--baseline-seconds S]]\n"
    "       [--cache-limit BYTES] " CLI_ORDER_USAGE "\n"
    "       [--timeline FILE] [--wide] [--version] [--help]\n"
    "       pinload-bench --plan --samples N --shards S --bytes B [--nodes K]\n"
    "       [--ranks-per-node R] [--batch B] [--epochs E] [--cache-limit X]\n"
    "       [--bandwidth Y] [--order global|shards] [--name-bytes L] [--size "
    "N]\n"
    "       [--prefetch P] [--json] | pinload-bench --plan --constants\n"
    "PATH may be remote shards (http(s)://, s3://, pipe:); --cache-limit is "
    "then\nconfig.cache_limit (below the data: every sample a ranged "
    "request).\n"
    "LIST is comma-separated, e.g. --workers 1,2,4 --prefetch 1,2,4 --pin "
    "on,off,managed;\n"
    "--workers 0 is the library's default (this process's share of the "
    "CPUs); --workers\nauto the loader's own choice (num_workers PL_AUTO: "
    "the table shows auto:N, the\ncount it settled on); --prefetch auto "
    "likewise (prefetch PL_AUTO: auto:N, the\nslots the ring grew to). "
    "Without a GPU "
    "(the host backend) --pin defaults to on alone:\npinned and pageable "
    "memory differ only in copies to a GPU.\n"
    "Every combination runs once a round, one loader at a time, after a "
    "warm-up, the\nrounds interleaved (--rounds, default 3: round 1 runs "
    "every row, then round 2...);\na row shows each figure's median over "
    "its rounds, img/s with its lowest and\nhighest round. A row is named "
    "best only where its lowest round beats every\nother row's highest; "
    "the last lines give the settings to paste, in C and Python.\n"
    "--baseline first measures plain TurboJPEG full-size decoding of the same "
    "files,\nfrom memory, on as many threads as each row's workers (and at 1/8 "
    "scale, the\nceiling), and shows every row as a ratio to it.\n"
    "The table fits 100 columns: the H2D, step/overlap and ratio columns, "
    "when they\napply, replace the per-stage times; --wide shows them all "
    "(as the CSV and JSON do).\n"
    "--timeline FILE (with --compute-ms on a GPU) writes each step's launch, "
    "start\nand end, and the GPU's idle gap before it, as CSV; the CSV and "
    "JSON give every\nrow's mean gap, the part of it the batch was late, "
    "and the loader's own waits.\n"
    "--augment takes a preset or a spec of ops, as config.transform "
    "(docs/transforms.md):\n--augment 'rrc(scale=0.5:1);hflip;"
    "grayscale(0.2)'.\n"
    "--gpu-normalize off makes the CPU normalise float formats on CUDA (on, "
    "the\n"
    "default, copies uint8 and normalises on the GPU).\n"
    "--decode gpu decodes JPEGs on the GPU with nvJPEG (config.decode; auto: "
    "where it\ncan be had, else the CPU); cpu, the default, on the "
    "workers. A list (cpu,gpu,auto)\nis swept like --workers; given, the "
    "table adds the decoder each row used and\nthe process's CPU time per "
    "image (getrusage: every thread's).\n"
    "--order shards (tar shards only) deals a permutation of the shards to "
    "the\nranks, each read in sequence and shuffled within --shuffle-window "
    "positions\n(default 4096); global, the default, is the exact global "
    "shuffle.\n"
    "--plan reads no image: it computes, for a dataset of S tar shards of "
    "N samples\nand B bytes and a job of K nodes of R ranks (default 1 x 8), "
    "each rank's memory\nand create time, and with --bandwidth Y (bytes/s a "
    "node from the store: remote\nshards) the node cache's size, the bytes "
    "each node fetches an epoch, the cache's\nhit rate and the epoch's "
    "bandwidth bound, for the global order and the shard\norder (--order "
    "picks one). Sizes and counts take K, M, G, T (1e3 ... 1e12).\n"
    "--cache-limit X is config.cache_limit a node (0: none); --name-bytes "
    "L is\nread but changes nothing now (no name is kept a shard sample). "
    "--constants lists\nthe model's numbers and where each came from; "
    "docs/SCALE.md gives the formulas.\n" CLI_EXIT_CODES;

/* ---- arguments ---- */

static void bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pinload-bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n%s", bench_usage);
    va_end(ap);
    exit(2);
}

static long parse_long(const char *flag, const char *v, long lo, long hi)
{
    return cli_long("pinload-bench", bench_usage, flag, v, lo, hi);
}

static double parse_double(const char *flag, const char *v, double lo,
                           double hi)
{
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (!*v || *end || errno || !(x >= lo && x <= hi))
        bad("%s: \"%s\" is not a number in [%g, %g]", flag, v, lo, hi);
    return x;
}

static int pin_value(const char *flag, const char *v)
{
    const int pin = cli_pin(v);
    if (pin < 0)
        bad("%s: \"%s\" is not on, off or managed", flag, v);
    return pin;
}

/* A comma-separated list; empty items and empty lists are errors. */
static int parse_list(const char *flag, const char *v, int *out, int pin,
                      int lo)
{
    if (!*v)
        bad("%s: empty list", flag);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == MAX_LIST)
            bad("%s: more than %d values", flag, MAX_LIST);
        if ((!strcmp(flag, "--workers") || !strcmp(flag, "--prefetch")) &&
            !strcmp(tok, "auto"))
            out[n++] = PL_AUTO; /* the loader's own choice */
        else
            out[n++] = pin ? pin_value(flag, tok)
                           : (int)parse_long(flag, tok, lo, 1024);
    }
    if (n == 0 || v[strlen(v) - 1] == ',' || strstr(v, ",,") || v[0] == ',')
        bad("%s: empty item in \"%s\"", flag, v);
    return n;
}

/* --decode's comma-separated words (PL_DECODE_MAP's), each once. */
static int parse_decodes(const char *flag, const char *v, int *out)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        const int d = cli_decode("pinload-bench", bench_usage, flag, tok);
        for (int i = 0; i < n; i++)
            if (out[i] == d)
                bad("%s: \"%s\" twice", flag, tok);
        out[n++] = d;
    }
    if (n == 0 || v[strlen(v) - 1] == ',' || strstr(v, ",,") || v[0] == ',')
        bad("%s: empty item in \"%s\"", flag, v);
    return n;
}

static int choice(const char *flag, const char *v, const char *const *names,
                  int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i]))
            return i;
    bad("%s: unknown value \"%s\"", flag, v);
    return -1;
}

static void set_defaults(options *o)
{
    memset(o, 0, sizeof *o);
    o->batch = 64;
    o->size = 224;
    o->augment = PL_AUGMENT_TRAIN;
    o->format = PL_FORMAT_U8_NHWC;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (int w = 1; w <= (cores > 1 ? cores : 1) && o->nworkers < MAX_LIST;
         w *= 2)
        o->workers[o->nworkers++] = w;
    if (o->workers[o->nworkers - 1] != cores && cores > 1 &&
        o->nworkers < MAX_LIST)
        o->workers[o->nworkers++] = (int)cores;
    o->prefetch[0] = 1;
    o->prefetch[1] = 2;
    o->prefetch[2] = 4;
    o->nprefetch = 3;
    o->pin[0] = PL_MEMORY_PINNED;
    o->pin[1] = PL_MEMORY_PAGEABLE;
    o->npin = 2;
    o->rounds = 3;
    o->batches = 30;
    o->warmup = 4;
    o->device = PL_DEVICE_AUTO;
    o->baseline_seconds = 3.0;
    o->gpu_normalize = 1;
    o->decode[0] = PL_DECODE_CPU;
    o->ndecode = 1;
}

void bench_parse(int argc, char **argv, options *o)
{
    static const char *const onoff[] = {"on", "off"};
    static const char *const valued[] = {"--data",
                                         "--batch",
                                         "--size",
                                         "--augment",
                                         "--format",
                                         "--workers",
                                         "--prefetch",
                                         "--pin",
                                         "--rounds",
                                         "--batches",
                                         "--seconds",
                                         "--warmup",
                                         "--compute-ms",
                                         "--device",
                                         "--baseline-seconds",
                                         "--csv",
                                         "--json",
                                         "--plot",
                                         "--gpu-normalize",
                                         "--decode",
                                         "--cache-limit",
                                         "--order",
                                         "--shuffle-window",
                                         "--timeline",
                                         NULL};
    set_defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (cli_common("pinload-bench", bench_usage, f, &o->quiet))
            continue;
        if (!strcmp(f, "--wide")) {
            o->wide = 1;
            continue;
        }
        if (!strcmp(f, "--baseline")) {
            o->baseline = 1;
            continue;
        }
        const char *v =
            cli_value("pinload-bench", bench_usage, valued, argc, argv, &i);
        if (!strcmp(f, "--data"))
            o->data = v;
        else if (!strcmp(f, "--batch"))
            o->batch = (int)parse_long(f, v, 1, 65536);
        else if (!strcmp(f, "--size"))
            o->size = (int)parse_long(f, v, 1, 16384);
        else if (!strcmp(f, "--augment"))
            o->augment = cli_augment_spec(v, &o->transform);
        else if (!strcmp(f, "--format"))
            o->format = cli_format("pinload-bench", bench_usage, f, v);
        else if (!strcmp(f, "--gpu-normalize"))
            o->gpu_normalize = choice(f, v, onoff, 2) == 0;
        else if (!strcmp(f, "--decode"))
            o->ndecode = parse_decodes(f, v, o->decode), o->decode_given = 1;
        else if (!strcmp(f, "--workers"))
            o->nworkers = parse_list(f, v, o->workers, 0, 0);
        else if (!strcmp(f, "--prefetch"))
            o->nprefetch = parse_list(f, v, o->prefetch, 0, 1);
        else if (!strcmp(f, "--pin"))
            o->npin = parse_list(f, v, o->pin, 1, 0), o->pin_given = 1;
        else if (!strcmp(f, "--rounds"))
            o->rounds = (int)parse_long(f, v, 1, BENCH_ROUNDS_MAX);
        else if (!strcmp(f, "--batches"))
            o->batches = parse_long(f, v, 1, 100000000), o->seconds = 0;
        else if (!strcmp(f, "--seconds"))
            o->seconds = parse_double(f, v, 0.01, 1e6);
        else if (!strcmp(f, "--warmup"))
            o->warmup = (int)parse_long(f, v, 0, 1000000);
        else if (!strcmp(f, "--compute-ms"))
            o->compute_ms = parse_double(f, v, 0, 1e5);
        else if (!strcmp(f, "--device"))
            o->device =
                cli_device("pinload-bench", bench_usage, f, v, &o->want_cuda);
        else if (!strcmp(f, "--cache-limit"))
            o->cache_limit = parse_long(f, v, 0, LONG_MAX);
        else if (!strcmp(f, "--order"))
            o->order = cli_order("pinload-bench", bench_usage, f, v);
        else if (!strcmp(f, "--shuffle-window"))
            o->shuffle_window = (int)parse_long(f, v, 1, INT_MAX);
        else if (!strcmp(f, "--baseline-seconds"))
            o->baseline_seconds = parse_double(f, v, 0.1, 3600);
        else if (!strcmp(f, "--csv"))
            o->csv = v;
        else if (!strcmp(f, "--json"))
            o->json = v;
        else if (!strcmp(f, "--plot"))
            o->plot = v;
        else if (!strcmp(f, "--timeline"))
            o->timeline_path = v;
        else
            bad("unknown option %s", f);
    }
    if (!o->data)
        bad("--data is required");
    pl_config check;
    pl_config_default(&check);
    check.width = check.height = o->size;
    check.format = o->format;
    check.transform = o->transform;
    cli_check_transform("pinload-bench", bench_usage, &check);
    for (int w = 0; w < o->nworkers && o->baseline; w++)
        if (o->workers[w] <= 0)
            bad("--workers %s with --baseline: give thread counts, the "
                "baseline runs as many threads as each row's workers",
                o->workers[w] == 0 ? "0" : "auto");
    /* Remote shards (URLs, pipe:) are the library's to check. */
    const int remote =
        strstr(o->data, "://") || strncmp(o->data, "pipe:", 5) == 0;
    if (!remote && access(o->data, R_OK) != 0)
        bad("--data: %s: %s", o->data, strerror(errno));
    if (!isatty(2))
        o->quiet = 1; /* no progress line into logs */
}
