/* The distributed suites' fixture (tests/system/test_distributed*.c): the
 * data sets, the launchers' variables, pinload-dump forked and exec'd as
 * ranks, and a data-parallel job of every rank of one configuration with
 * its checks (the notice, the shards, equal steps). */
#ifndef PINLOAD_TESTDISTRIBUTED_H
#define PINLOAD_TESTDISTRIBUTED_H

#include <fcntl.h>
#include <sched.h>

#include "../loader/cpus.h"
#include "testrun.h"

extern char **environ;

#define FILES 25 /* in both data sets: 2 and 3 ranks both pad */
#define CLASSES 3
#define BATCH 4
#define SIZE 16
#define MAX_RANKS 5
#define MAX_PER_RANK 16
#define TIMEOUT 60
#define STR_(x) #x
#define STR(x) STR_(x) /* "16" for SIZE, as the command line takes it */

/* ---- the data ---- */

/* FILES JPEGs in data/c0 .. c2, or FILES - 2 and two bad ones: a GIF named
 * .jpg and an empty .jpg. */
typedef struct fixture {
    char root[64];
    char data[80];
    char files[FILES][128]; /* every file, the bad ones last */
    int nbad;
} fixture;

static const uint8_t gif_1x1[] = {
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80,
    0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0x21, 0xf9, 0x04,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b};

static inline void make_fixture(fixture *f, int with_bad)
{
    tu_tmpdir(f->root);
    snprintf(f->data, sizeof f->data, "%s/data", f->root);
    f->nbad = with_bad ? 2 : 0;
    const int good = FILES - f->nbad;
    for (int i = 0; i < good; i++) {
        snprintf(f->files[i], sizeof f->files[i], "%s/c%d/img%02d.jpg", f->data,
                 i % CLASSES, i);
        tu_write_jpeg(f->files[i], 20 + (i % 3) * 4, 16 + (i % 2) * 4,
                      (unsigned)i + 1, NULL);
    }
    if (with_bad) {
        snprintf(f->files[good], sizeof f->files[good], "%s/c1/bad_gif.jpg",
                 f->data);
        tu_write_file(f->files[good], gif_1x1, sizeof gif_1x1);
        snprintf(f->files[good + 1], sizeof f->files[good + 1],
                 "%s/c2/empty.jpg", f->data);
        tu_write_file(f->files[good + 1], "", 0);
    }
}

static inline int is_bad(const fixture *f, const char *path)
{
    for (int i = FILES - f->nbad; i < FILES; i++)
        if (strcmp(f->files[i], path) == 0)
            return 1;
    return 0;
}

/* The label of data/c<k>/...: the class folders sort as c0, c1, c2. */
static inline int label_of(const fixture *f, const char *path)
{
    const size_t n = strlen(f->data);
    cr_assert_eq(strncmp(path, f->data, n), 0, "%s is not under %s", path,
                 f->data);
    cr_assert_eq(strncmp(path + n, "/c", 2), 0, "%s", path);
    return path[n + 2] - '0';
}

/* ---- the launchers ---- */

typedef struct launcher {
    const char *name; /* as the notice names it */
    const char *rank, *world, *local_rank, *local_world;
} launcher;

enum { TORCHRUN, SLURM, OPEN_MPI, MPICH };

static const launcher launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"SLURM", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
     "SLURM_NTASKS_PER_NODE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};

/* Variables a child sets on top of the (launcher-free) inherited ones. */
typedef struct envset {
    char kv[12][96];
    int n;
} envset;

static inline void env_set(envset *e, const char *name, const char *value)
{
    cr_assert_lt(e->n, 12);
    snprintf(e->kv[e->n++], sizeof e->kv[0], "%s=%s", name, value);
}

static inline void env_set_int(envset *e, const char *name, int value)
{
    char v[16];
    snprintf(v, sizeof v, "%d", value);
    env_set(e, name, v);
}

/* Rank r of w as launcher L says it, all ranks on one node except under
 * SLURM with 3 ranks: SLURM_TASKS_PER_NODE "2(x1),1" puts ranks 0 and 1 on
 * node 0 and rank 2 on node 1. Returns the node's rank count. */
static inline int launch_env(envset *e, int L, int r, int w)
{
    const launcher *l = &launchers[L];
    env_set_int(e, l->rank, r);
    env_set_int(e, l->world, w);
    if (L == SLURM && w == 3) {
        env_set(e, "SLURM_TASKS_PER_NODE", "2(x1),1");
        env_set_int(e, "SLURM_NODEID", r < 2 ? 0 : 1);
        env_set_int(e, l->local_rank, r < 2 ? r : 0);
        return r < 2 ? 2 : 1;
    }
    env_set_int(e, l->local_rank, r);
    env_set_int(e, l->local_world, w);
    return w;
}

/* A variable a launcher may have set for this test process itself. */
static inline int launcher_variable(const char *entry)
{
    static const char *const exact[] = {
        "RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE="};
    static const char *const prefix[] = {"SLURM_", "OMPI_", "PMI_", "PMIX_",
                                         "MPI_LOCAL"};
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++)
        if (strncmp(entry, exact[i], strlen(exact[i])) == 0)
            return 1;
    for (size_t i = 0; i < sizeof prefix / sizeof *prefix; i++)
        if (strncmp(entry, prefix[i], strlen(prefix[i])) == 0)
            return 1;
    return 0;
}

/* ---- running ranks ---- */

typedef struct proc {
    pid_t pid;
    char out[160];    /* its --out */
    char output[192]; /* its stdout and stderr */
    int status;       /* exit code; -1 if it did not exit */
    char *text;       /* what it printed */
} proc;

/* p writes to root/name (--out) and its output to root/name.txt. */
static inline void proc_init(proc *p, const char *root, const char *name)
{
    memset(p, 0, sizeof *p);
    snprintf(p->out, sizeof p->out, "%s/%s", root, name);
    snprintf(p->output, sizeof p->output, "%s/%s.txt", root, name);
}

/* taskset's path from $PATH into path; 0 if there is none. */
static inline int find_taskset(char *path, size_t cap)
{
    const char *env = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", env && *env ? env : "/usr/bin:/bin");
    char *rest = dirs;
    for (char *d; (d = strsep(&rest, ":")) != NULL;) {
        snprintf(path, cap, "%s/taskset", *d ? d : ".");
        if (access(path, X_OK) == 0)
            return 1;
    }
    return 0;
}

/* Starts "[taskset -c cpus] pinload-dump args" without waiting, in an
 * environment built here: this process's, less every launcher variable,
 * plus `set`. */
static inline void spawn(proc *p, const envset *set, const char *cpus,
                         const char *const *args)
{
    char tool[512], taskset[512];
    snprintf(tool, sizeof tool, "%s/pinload-dump", tu_build_dir());
    cr_assert_eq(access(tool, X_OK), 0, "%s is missing: run make tools", tool);
    const char *argv[48];
    int a = 0;
    if (cpus) {
        cr_assert(find_taskset(taskset, sizeof taskset), "no taskset");
        argv[a++] = taskset;
        argv[a++] = "-c";
        argv[a++] = cpus;
    }
    argv[a++] = tool;
    while (*args) {
        cr_assert_lt(a, 47);
        argv[a++] = *args++;
    }
    argv[a] = NULL;

    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + (size_t)set->n + 1, sizeof *envp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!launcher_variable(environ[i]))
            envp[k++] = environ[i];
    for (int i = 0; i < set->n; i++)
        envp[k++] = (char *)set->kv[i];

    fflush(NULL);
    p->pid = fork();
    cr_assert_neq(p->pid, -1, "fork: %s", strerror(errno));
    if (p->pid == 0) {
        const int fd = open(p->output, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int nul = open("/dev/null", O_RDONLY);
        if (fd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(fd, 1) < 0 ||
            dup2(fd, 2) < 0)
            _exit(126);
        execve(argv[0], (char *const *)argv, envp);
        _exit(127);
    }
    free(envp);
}

static inline void reap(proc *p)
{
    int st;
    pid_t got;
    while ((got = waitpid(p->pid, &st, 0)) < 0 && errno == EINTR)
        ;
    cr_assert_eq(got, p->pid, "waitpid: %s", strerror(errno));
    p->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    p->text = tu_slurp(p->output);
}

/* The one line of p's output that starts with `prefix`, copied to line;
 * fails if there is not exactly one. */
static inline void only_line(const proc *p, const char *prefix, char *line,
                             size_t cap)
{
    int found = 0;
    for (const char *s = p->text; *s;) {
        const char *nl = strchr(s, '\n');
        const int len = nl ? (int)(nl - s) : (int)strlen(s);
        if (strncmp(s, prefix, strlen(prefix)) == 0) {
            snprintf(line, cap, "%.*s", len, s);
            found++;
        }
        s += len + (nl != NULL);
    }
    cr_assert_eq(found, 1, "%d lines start with \"%s\" in:\n%s", found, prefix,
                 p->text);
}

/* ---- the notice's worker clause ---- */

static inline int cpus_allowed(cpu_set_t *set)
{
    cr_assert_eq(sched_getaffinity(0, sizeof *set, set), 0);
    return CPU_COUNT(set);
}

/* "N worker(s) (why)" for a rank allowed `allowed` CPUs among `local` ranks
 * of its node, as the rule goes: the CPUs are divided among the node's
 * ranks, unless the mask is small enough to be this rank's own (allowed x
 * local <= online CPUs); at most the cgroup quota's share; at least one. */
static inline void workers_clause(int allowed, int local, char *out, size_t cap)
{
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int quota = cpus_cgroup_quota("/sys/fs/cgroup");
    const int own = local > 1 && (long)allowed * local <= online;
    int n = own ? allowed : allowed / local;
    if (quota > 0 && quota / local < n)
        n = quota / local;
    n = n < 1 ? 1 : n;
    char q[48] = "", ranks[80] = "";
    if (quota > 0)
        snprintf(q, sizeof q, ", cgroup quota %d", quota);
    if (local > 1)
        snprintf(ranks, sizeof ranks, ", %d local ranks%s", local,
                 own ? " (each bound to its own CPUs)" : "");
    snprintf(out, cap, "%d worker%s (%d CPUs allowed%s%s)", n,
             n == 1 ? "" : "s", allowed, q, ranks);
}

/* The notice up to its ring clause (pinned or pageable depends on the
 * memlock limit). `source` is "torchrun (RANK, WORLD_SIZE)" or the like. */
static inline void assert_notice(const proc *p, int rank, int world,
                                 const char *source, int allowed, int local)
{
    char line[1024], workers[256], want[1024];
    only_line(p, "pinload: backend: ", line, sizeof line);
    workers_clause(allowed, local, workers, sizeof workers);
    snprintf(want, sizeof want,
             "pinload: backend: host (config.device is PL_DEVICE_HOST); "
             "rank %d of %d from %s; %d files, %d classes; %s; ring ",
             rank, world, source, FILES, CLASSES, workers);
    cr_assert_eq(strncmp(line, want, strlen(want)), 0,
                 "notice:\n  %s\nwanted it to start:\n  %s", line, want);
}

static inline void launcher_source(int L, char *out, size_t cap)
{
    snprintf(out, cap, "%s (%s, %s)", launchers[L].name, launchers[L].rank,
             launchers[L].world);
}

/* ---- one data-parallel job: every rank of one configuration ---- */

enum { CLEAN, SKIP, SUBSTITUTE };
static const char *const policy_flag[] = {"fail", "skip", "substitute"};

typedef struct job {
    int launcher, world, policy, drop_last;
    const char *cpus; /* a taskset list, or NULL */
    int allowed;      /* CPUs in it; 0: this process's affinity */
    const fixture *fx;
    proc ranks[MAX_RANKS];
    int local[MAX_RANKS]; /* the node's rank count, as each rank is told */
} job;

static inline void start_job(job *j)
{
    for (int r = 0; r < j->world; r++) {
        proc *p = &j->ranks[r];
        char name[64];
        snprintf(name, sizeof name, "%d-%d-%d-%d-r%d", j->launcher, j->world,
                 j->policy, j->drop_last, r);
        proc_init(p, j->fx->root, name);
        envset e = {.n = 0};
        j->local[r] = launch_env(&e, j->launcher, r, j->world);
        const char *args[] = {"--data",      j->fx->data,
                              "--out",       p->out,
                              "--size",      STR(SIZE),
                              "--batch",     STR(BATCH),
                              "--device",    "host",
                              "--on-error",  policy_flag[j->policy],
                              "--drop-last", j->drop_last ? "on" : "off",
                              NULL};
        spawn(p, &e, j->cpus, args);
    }
}

/* Rank r's epoch-0 order of paths, from a loader in this process given
 * rank and world in its config rather than by the environment. */
static inline int reference_order(const fixture *fx, int r, int w,
                                  char order[][128])
{
    pl_config c;
    pl_config_default(&c);
    c.data = fx->data;
    c.rank = r;
    c.world_size = w;
    c.batch_size = BATCH;
    c.width = c.height = SIZE;
    c.augment = PL_AUGMENT_NONE;
    c.device = PL_DEVICE_HOST;
    c.memory = PL_MEMORY_PAGEABLE;
    c.num_workers = 1;
    c.on_error = PL_ON_ERROR_SUBSTITUTE;
    c.log = quiet;
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    cr_assert_eq(in.samples_per_epoch, (FILES + w - 1) / w);
    cr_assert_leq(in.samples_per_epoch, MAX_PER_RANK);
    int64_t *idx = epoch_order(l, 0);
    for (int k = 0; k < in.samples_per_epoch; k++) {
        const char *path;
        cr_assert_eq(pl_loader_sample(l, idx[k], &path, NULL), 0);
        snprintf(order[k], 128, "%s", path);
    }
    free(idx);
    pl_loader_destroy(l);
    return (int)in.samples_per_epoch;
}

/* What rank r's run delivered, in delivery order. */
typedef struct delivered {
    int n;
    char path[MAX_PER_RANK][128];
} delivered;

/* A sample's PPM is SIZE x SIZE; zeros where it was substituted. */
static inline void assert_ppm(const char *dir, int k, int zeros)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%06d.ppm", dir, k);
    size_t len;
    uint8_t *b = tu_read_file(p, &len);
    static const char header[] = "P6\n" STR(SIZE) " " STR(SIZE) "\n255\n";
    const size_t hl = sizeof header - 1;
    cr_assert_eq(len, hl + SIZE * SIZE * 3, "%s: %zu bytes", p, len);
    cr_assert_eq(memcmp(b, header, hl), 0, "%s: header", p);
    int nonzero = 0;
    for (size_t i = hl; i < len; i++)
        nonzero += b[i] != 0;
    if (zeros)
        cr_assert_eq(nonzero, 0, "%s: a substituted sample is not zeros", p);
    else
        cr_assert_gt(nonzero, 0, "%s: a decoded sample is all zeros", p);
    free(b);
}

/* One rank's output against what it should deliver: `samples` positions
 * of its order, bad files passed over (skip: the next good one of its
 * order, wrapping to its start) or delivered as zeros (substitute). */
static inline void check_rank(const job *j, int r, char order[][128],
                              int per_rank, int samples, delivered *got)
{
    const proc *p = &j->ranks[r];
    const fixture *fx = j->fx;
    cr_assert_eq(p->status, 0, "rank %d exited %d:\n%s", r, p->status, p->text);
    char source[128];
    launcher_source(j->launcher, source, sizeof source);
    cpu_set_t set;
    const int allowed = j->allowed ? j->allowed : cpus_allowed(&set);
    assert_notice(p, r, j->world, source, allowed, j->local[r]);

    char want[MAX_PER_RANK][128];
    for (int k = 0, at = 0; k < samples; at++) {
        cr_assert_lt(at, 4 * per_rank, "rank %d: no good file", r);
        const char *path = order[at % per_rank];
        if (j->policy != SKIP || !is_bad(fx, path))
            snprintf(want[k++], 128, "%s", path);
    }
    int n, skipped = 0;
    tu_row *rows = tu_read_index(p->out, &n);
    got->n = 0;
    for (int i = 0; i < n; i++) {
        const tu_row *row = &rows[i];
        cr_assert_eq(row->label, label_of(fx, row->path), "%s", row->path);
        if (row->position < 0) {
            cr_assert_eq(j->policy, SKIP,
                         "rank %d: %s listed as skipped "
                         "under --on-error %s",
                         r, row->path, policy_flag[j->policy]);
            cr_assert(is_bad(fx, row->path), "rank %d skipped good %s", r,
                      row->path);
            static const char why[] =
                "PL_ENOTIMAGE: not an image pinload reads (";
            cr_assert_eq(strncmp(row->status, why, sizeof why - 1), 0, "%s: %s",
                         row->path, row->status);
            skipped++;
            continue;
        }
        const int k = got->n++;
        cr_assert_lt(k, samples, "rank %d delivered more than %d", r, samples);
        cr_assert_eq(row->position, k, "rank %d: row %d", r, i);
        cr_assert_str_eq(row->path, want[k], "rank %d position %d", r, k);
        const int bad = is_bad(fx, row->path);
        cr_assert_str_eq(row->status, bad ? "PL_ENOTIMAGE" : "ok", "%s",
                         row->path);
        memcpy(got->path[k], want[k], sizeof want[k]);
        assert_ppm(p->out, k, bad);
    }
    cr_assert_eq(got->n, samples, "rank %d delivered %d, not %d", r, got->n,
                 samples);
    cr_assert_eq(tu_count_ppms(p->out), samples, "rank %d", r);
    /* Without drop_last a rank under skip passes its whole order, so it
     * lists every bad file of it. */
    for (int k = 0; j->policy == SKIP && !j->drop_last && k < per_rank; k++) {
        int listed = !is_bad(fx, order[k]);
        for (int i = 0; i < n && !listed; i++)
            listed = rows[i].position < 0 && !strcmp(rows[i].path, order[k]);
        cr_assert(listed, "rank %d did not list bad %s", r, order[k]);
    }
    free(rows);
    char done[512];
    only_line(p, "pinload-dump: wrote ", done, sizeof done);
    char want_done[512];
    snprintf(want_done, sizeof want_done,
             "pinload-dump: wrote %d samples (%d skipped) to %s", samples,
             skipped, p->out);
    cr_assert_str_eq(done, want_done);
}

/* How many of the ranks' deliveries are `path`. */
static inline int times_delivered(const delivered *d, int w, const char *path)
{
    int c = 0;
    for (int r = 0; r < w; r++)
        for (int k = 0; k < d[r].n; k++)
            c += strcmp(d[r].path[k], path) == 0;
    return c;
}

/* Across the ranks: the padded epoch (every file once, the padding's
 * files twice, and each padding position the epoch's head again), or under
 * drop_last disjoint shards; under skip every good file at least once and
 * no bad one. */
static inline void check_union(const job *j, const delivered *d, int per_rank)
{
    const int w = j->world, pad = w * per_rank - FILES;
    int twice = 0, total = 0;
    for (int r = 0; r < w; r++)
        total += d[r].n;
    for (int i = 0; i < FILES; i++) {
        const char *f = j->fx->files[i];
        const int c = times_delivered(d, w, f);
        if (j->policy == SKIP && is_bad(j->fx, f))
            cr_assert_eq(c, 0, "bad %s delivered %d times", f, c);
        else if (j->policy == SKIP && !j->drop_last)
            cr_assert_geq(c, 1, "%s was delivered by no rank", f);
        else if (j->policy == SKIP)
            continue; /* a stand-in past the last batch may be padding */
        else if (!j->drop_last)
            cr_assert(c == 1 || c == 2, "%s delivered %d times", f, c);
        else
            cr_assert_leq(c, 1, "%s is in two shards", f);
        twice += c == 2;
    }
    const int samples = j->drop_last ? per_rank / BATCH * BATCH : per_rank;
    cr_assert_eq(total, w * samples);
    if (j->policy == SKIP || j->drop_last)
        return;
    cr_assert_eq(twice, pad, "%d files repeated, the padding is %d", twice,
                 pad);
    for (int r = 0; r < w; r++)
        for (int k = 0; k < per_rank; k++) {
            const int p = r + k * w, q = p - FILES;
            if (q >= 0)
                cr_assert_str_eq(d[r].path[k], d[q % w].path[q / w],
                                 "padded position %d (rank %d, %d) is not "
                                 "position %d of the epoch",
                                 p, r, k, q);
        }
}

static inline void finish_job(job *j)
{
    for (int r = 0; r < j->world; r++)
        reap(&j->ranks[r]);
}

static inline void check_job(const job *j)
{
    const int per_rank = (FILES + j->world - 1) / j->world;
    const int batches =
        j->drop_last ? per_rank / BATCH : (per_rank + BATCH - 1) / BATCH;
    const int samples = j->drop_last ? batches * BATCH : per_rank;
    delivered d[MAX_RANKS];
    for (int r = 0; r < j->world; r++) {
        char order[MAX_PER_RANK][128];
        cr_assert_eq(reference_order(j->fx, r, j->world, order), per_rank);
        /* Seed 0 puts a bad file at the head of the epoch, which the
         * padding repeats on the last rank: a bad file on two ranks, and
         * with 2 ranks one rank with both, wrapping twice under skip. */
        if (r == 0 && j->fx->nbad)
            cr_assert(is_bad(j->fx, order[0]), "the order starts with %s",
                      order[0]);
        check_rank(j, r, order, per_rank, samples, &d[r]);
        /* Numbered batch x BATCH + i, samples 0 .. samples - 1 with none
         * missing are `batches` batches, the last one short without
         * drop_last, on every rank alike. */
        cr_assert_eq(d[r].n, d[0].n, "rank %d and rank 0 differ", r);
    }
    check_union(j, d, per_rank);
}

static inline void free_job(job *j)
{
    for (int r = 0; r < j->world; r++)
        free(j->ranks[r].text);
}

/* Every combination of 2 and 3 ranks, drop_last off and on and the given
 * policies, under launcher L, all started before any is waited for. */
static inline void run_jobs(int L, int with_bad)
{
    fixture fx;
    make_fixture(&fx, with_bad);
    const int policies[] = {with_bad ? SKIP : CLEAN, SUBSTITUTE};
    const int npolicies = with_bad ? 2 : 1;
    job jobs[8];
    int n = 0;
    for (int p = 0; p < npolicies; p++)
        for (int w = 2; w <= 3; w++)
            for (int drop = 0; drop <= 1; drop++)
                jobs[n++] = (job){.launcher = L,
                                  .world = w,
                                  .policy = policies[p],
                                  .drop_last = drop,
                                  .fx = &fx};
    for (int i = 0; i < n; i++)
        start_job(&jobs[i]);
    for (int i = 0; i < n; i++)
        finish_job(&jobs[i]);
    for (int i = 0; i < n; i++) {
        check_job(&jobs[i]);
        free_job(&jobs[i]);
    }
    tu_rm_rf(fx.root);
}

#endif
