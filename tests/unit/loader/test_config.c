/* pl_config: the documented defaults, validation naming the bad field, the
 * values settled at create time (rank and world from the environment,
 * worker count), and pl_loader_create's argument errors. Criterion runs
 * each test in its own process, so setenv here touches no other test. */
#include <math.h>
#include <sched.h>

#include "../loader/config.h"
#include "../loader/cpus.h"
#include "../common/error.h"
#include "testutil.h"

/* ---- helpers ------------------------------------------------------------- */

/* Defaults, a data path (never opened by config_resolve) and an explicit
 * rank and world, so that nothing depends on the environment. */
static pl_config valid_config(void)
{
    pl_config c;
    pl_config_default(&c);
    c.data = "train";
    c.rank = 0;
    c.world_size = 1;
    c.device = PL_DEVICE_HOST;
    return c;
}

/* "row <name>: " while the table of rejections runs, so that a failure
 * names its row; empty otherwise. */
static const char *row_label = "";

static void assert_starts_with(const char *s, const char *prefix)
{
    cr_assert(strncmp(s, prefix, strlen(prefix)) == 0,
              "%s\"%s\" does not start with \"%s\"", row_label, s, prefix);
}

/* config_resolve and pl_loader_create both reject c with PL_EINVAL and a
 * detail "pl_loader_create: config.<field>: ..." that also holds `also`
 * (when not NULL). */
static void expect_rejected(const pl_config *c, const char *field,
                            const char *also)
{
    char prefix[128];
    snprintf(prefix, sizeof prefix, "pl_loader_create: config.%s: ", field);

    err_clear();
    config_resolved r;
    cr_assert_eq(config_resolve(c, &r), PL_EINVAL, "%sconfig.%s accepted",
                 row_label, field);
    assert_starts_with(pl_last_error(), prefix);
    if (also)
        cr_assert_not_null(strstr(pl_last_error(), also),
                           "%s\"%s\" does not mention \"%s\"", row_label,
                           pl_last_error(), also);

    err_clear();
    pl_loader *l = (pl_loader *)&r; /* not NULL, so that the reset shows */
    cr_assert_eq(pl_loader_create(c, &l), PL_EINVAL,
                 "%spl_loader_create accepted config.%s", row_label, field);
    cr_assert_null(l, "%s*out is NULL after a failed create", row_label);
    assert_starts_with(pl_last_error(), prefix);
}

/* config_resolve must accept c; its result. */
static config_resolved resolve_ok(const pl_config *c)
{
    config_resolved r;
    cr_assert_eq(config_resolve(c, &r), 0, "%s", pl_last_error());
    return r;
}

static void expect_accepted(const pl_config *c, const char *what)
{
    config_resolved r;
    const int rc = config_resolve(c, &r);
    cr_assert_eq(rc, 0, "%s rejected: %s", what, pl_last_error());
}

/* ---- defaults ------------------------------------------------------------ */

Test(config, defaults_are_the_documented_values)
{
    pl_config c;
    memset(&c, 0xa5, sizeof c); /* every field must be written */
    pl_config_default(&c);
    cr_assert_null(c.data);
    cr_assert_eq(c.batch_size, 64);
    cr_assert_eq(c.width, 224);
    cr_assert_eq(c.height, 224);
    cr_assert_eq(c.format, PL_FORMAT_U8_NHWC);
    cr_assert_eq(c.augment, PL_AUGMENT_TRAIN);
    cr_assert_eq(c.mean[0], 0.485f);
    cr_assert_eq(c.mean[1], 0.456f);
    cr_assert_eq(c.mean[2], 0.406f);
    cr_assert_eq(c.std[0], 0.229f);
    cr_assert_eq(c.std[1], 0.224f);
    cr_assert_eq(c.std[2], 0.225f);
    cr_assert_eq(c.seed, 0);
    cr_assert_eq(c.shuffle, 1);
    cr_assert_eq(c.drop_last, 0);
    cr_assert_eq(c.first_epoch, 0);
    cr_assert_eq(c.rank, PL_FROM_ENV);
    cr_assert_eq(c.world_size, PL_FROM_ENV);
    cr_assert_eq(c.shard_mode, PL_SHARD_PAD);
    cr_assert_eq(c.order, PL_ORDER_GLOBAL);
    cr_assert_eq(c.shuffle_window, 0);
    cr_assert_eq(c.num_workers, 0);
    cr_assert_eq(c.prefetch, 2);
    cr_assert_eq(c.memory, PL_MEMORY_PINNED);
    cr_assert_eq(c.device, PL_DEVICE_AUTO);
    cr_assert_eq(c.device_buffers, 2);
    cr_assert_eq(c.max_device_buffers, 0);
    cr_assert_eq(c.keep_host, 0);
    cr_assert_eq(c.on_error, PL_ON_ERROR_SKIP);
    cr_assert_eq(c.strict, 0);
    cr_assert_eq(c.max_width, 32768);
    cr_assert_eq(c.max_height, 32768);
    cr_assert_eq(c.max_pixels, 178956970);
    cr_assert_eq(c.max_file_bytes, (int64_t)256 * 1024 * 1024);
    cr_assert_null(c.log);
    cr_assert_null(c.log_ctx);
}

Test(config, documented_constants_keep_their_values)
{
    cr_assert_eq(PL_FROM_ENV, -1);
    cr_assert_eq(PL_DEVICE_AUTO, -1);
    cr_assert_eq(PL_DEVICE_HOST, -2);
    cr_assert_eq(PL_FORMAT_U8_NHWC, 0);
    cr_assert_eq(PL_FORMAT_F32_NCHW, 1);
    cr_assert_eq(PL_FORMAT_F16_NCHW, 2);
    cr_assert_eq(PL_FORMAT_BF16_NCHW, 3);
    cr_assert_eq(PL_AUGMENT_TRAIN, 2);
    cr_assert_eq(PL_ON_ERROR_SUBSTITUTE, 2);
    cr_assert_eq(PL_SHARD_DROP, 1);
    cr_assert_eq(PL_MEMORY_PAGEABLE, 1);
}

Test(config, defaults_with_data_resolve)
{
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    pl_config c;
    pl_config_default(&c);
    c.data = "train";
    config_resolved r = resolve_ok(&c);
    cr_assert_eq(r.rank, 0);
    cr_assert_eq(r.world, 1);
    cr_assert_gt(r.num_workers, 0);
    /* The copy keeps the caller's string, and every other field. */
    cr_assert_eq(r.cfg.data, c.data);
    cr_assert_eq(r.cfg.batch_size, 64);
    cr_assert_eq(r.cfg.width, 224);
    cr_assert_eq(r.cfg.std[2], 0.225f);
    cr_assert_eq(r.cfg.max_file_bytes, (int64_t)256 << 20);
    cr_assert_eq(r.cfg.rank, PL_FROM_ENV);
}

/* ---- rejected values ----------------------------------------------------- */

/* Every rejection, one row each: how valid_config() is spoilt, the field
 * the detail must name and what else it must hold (NULL: nothing). The
 * rows keep the order, the values and the expectations of the tests they
 * replaced (rejects_missing_data ... rejects_zero_limits), one row per
 * spoilt config. pl_augment has no negative enumerator, so GCC makes it
 * unsigned and -1 would be printed as 4294967295: that row checks no
 * value. */
#define REJECTIONS(X)                                                          \
    X(missing_data_null, c->data = NULL, "data", "required")                   \
    X(missing_data_empty, c->data = "", "data", "required")                    \
    X(batch_size_zero, c->batch_size = 0, "batch_size", "0")                   \
    X(batch_size_negative, c->batch_size = -64, "batch_size", "-64")           \
    X(width_zero, c->width = 0, "width", NULL)                                 \
    X(negative_height, c->height = -1, "height", "-1")                         \
    X(unknown_format, c->format = (pl_format)7, "format", "7")                 \
    X(channels_last_two, c->channels_last = 2, "channels_last", "2")           \
    X(augment_minus_one, c->augment = (pl_augment)-1, "augment", NULL)         \
    X(unknown_augment, c->augment = (pl_augment)3, "augment", "3")             \
    X(zero_std, c->std[1] = 0.0f, "std", "std[1]")                             \
    X(negative_std, c->std[2] = -0.5f, "std", "std[2]")                        \
    X(infinite_std, c->std[0] = INFINITY, "std", "std[0]")                     \
    X(nan_std, c->std[0] = NAN, "std", "std[0]")                               \
    X(nan_mean, c->mean[0] = NAN, "mean", "mean[0]")                           \
    X(infinite_mean, c->mean[2] = -INFINITY, "mean", "mean[2]")                \
    X(shuffle_two, c->shuffle = 2, "shuffle", "2")                             \
    X(shuffle_negative, c->shuffle = -1, "shuffle", "-1")                      \
    X(drop_last_two, c->drop_last = 2, "drop_last", "2")                       \
    X(negative_first_epoch, c->first_epoch = -1, "first_epoch", "-1")          \
    X(unknown_shard_mode, c->shard_mode = (pl_shard_mode)2, "shard_mode", "2") \
    X(rank_above_world, (c->rank = 5, c->world_size = 2), "rank", "5")         \
    X(rank_equal_to_world, (c->rank = 2, c->world_size = 2), "rank", "2")      \
    X(rank_negative_not_from_env, (c->rank = -2, c->world_size = 2), "rank",   \
      "-2")                                                                    \
    X(world_size_zero, c->world_size = 0, "world_size", "0")                   \
    X(world_size_negative, c->world_size = -2, "world_size", "-2")             \
    X(negative_num_workers, c->num_workers = -2, "num_workers", "-2")          \
    X(prefetch_zero, c->prefetch = 0, "prefetch", "0")                         \
    X(cpu_budget_negative, c->cpu_budget = -1, "cpu_budget", "-1")             \
    X(workers_above_cpu_budget, (c->num_workers = 3, c->cpu_budget = 2),       \
      "num_workers", "3 is above config.cpu_budget (2)")                       \
    X(unknown_memory, c->memory = (pl_memory)9, "memory", "9")                 \
    X(device_below_host, c->device = -4, "device", "-4")                       \
    X(device_buffers_zero, c->device_buffers = 0, "device_buffers", "0")       \
    X(max_device_buffers_below_device_buffers,                                 \
      (c->device_buffers = 3, c->max_device_buffers = 2),                      \
      "max_device_buffers", "less than device_buffers (3)")                    \
    X(max_device_buffers_minus_two, c->max_device_buffers = -2,                \
      "max_device_buffers", "-2")                                              \
    X(keep_host_two, c->keep_host = 2, "keep_host", "2")                       \
    X(strict_negative, c->strict = -1, "strict", "-1")                         \
    X(unknown_on_error, c->on_error = (pl_on_error)3, "on_error", "3")         \
    X(max_pixels_zero, c->max_pixels = 0, "max_pixels", NULL)                  \
    X(max_file_bytes_zero, c->max_file_bytes = 0, "max_file_bytes", NULL)      \
    X(max_width_zero, c->max_width = 0, "max_width", "0")                      \
    X(max_height_negative, c->max_height = -1, "max_height", "-1")             \
    X(cache_limit_negative, c->cache_limit = -1, "cache_limit", "-1")          \
    X(remote_timeout_negative, c->remote_timeout_ms = -5, "remote_timeout_ms", \
      "-5")                                                                    \
    X(remote_retries_minus_two, c->remote_retries = -2, "remote_retries",      \
      "-2")                                                                    \
    X(unknown_order, c->order = 2, "order", "2")                               \
    X(shuffle_window_negative,                                                 \
      (c->order = PL_ORDER_SHARDS, c->shuffle_window = -1), "shuffle_window",  \
      "-1")                                                                    \
    X(shuffle_window_with_the_global_order, c->shuffle_window = 64,            \
      "shuffle_window", "PL_ORDER_SHARDS only")

#define SPOIL_FN(name, spoil, field, also)                                     \
    static void spoil_##name(pl_config *c)                                     \
    {                                                                          \
        spoil;                                                                 \
    }
REJECTIONS(SPOIL_FN)

typedef struct rejection {
    const char *name;
    void (*spoil)(pl_config *c);
    const char *field; /* named in "config.<field>: " */
    const char *also;  /* also in the detail, or NULL */
} rejection;

#define REJECTION_ROW(name, spoil, field, also)                                \
    {#name, spoil_##name, field, also},
static const rejection rejections[] = {REJECTIONS(REJECTION_ROW)};

/* Each row: config_resolve and pl_loader_create both return PL_EINVAL,
 * and the detail names the field (expect_rejected); a failure names the
 * row. */
Test(config, rejects_every_bad_value_naming_the_field)
{
    const size_t n = sizeof rejections / sizeof rejections[0];
    cr_assert_eq(n, 48,
                 "the rows of the 22 rejects_* tests it replaced, "
                 "channels_last, max_device_buffers, the remote "
                 "fields, order, shuffle_window and cpu_budget's two");
    for (size_t i = 0; i < n; i++) {
        const rejection *row = &rejections[i];
        char label[96];
        snprintf(label, sizeof label, "row %zu (%s): ", i, row->name);
        row_label = label;
        pl_config c = valid_config();
        row->spoil(&c);
        expect_rejected(&c, row->field, row->also);
    }
    row_label = "";
}

Test(config, accepts_the_smallest_valid_values)
{
    pl_config c = valid_config();
    c.batch_size = 1;
    c.width = 1;
    c.height = 1;
    c.format = PL_FORMAT_F32_NCHW;
    c.augment = PL_AUGMENT_NONE;
    c.std[0] = c.std[1] = c.std[2] = 1e-6f;
    c.mean[0] = -1e6f;
    c.shuffle = 0;
    c.drop_last = 1;
    c.shard_mode = PL_SHARD_DROP;
    c.num_workers = 1;
    c.prefetch = 1;
    c.memory = PL_MEMORY_PAGEABLE;
    c.device = PL_DEVICE_HOST;
    c.device_buffers = 1;
    c.keep_host = 1;
    c.on_error = PL_ON_ERROR_SUBSTITUTE;
    c.strict = 1;
    c.max_width = 1;
    c.max_height = 1;
    c.max_pixels = 1;
    c.max_file_bytes = 1;
    c.rank = 3;
    c.world_size = 4;
    c.first_epoch = (int64_t)1 << 40;
    expect_accepted(&c, "smallest values");
    config_resolved r;
    cr_assert_eq(config_resolve(&c, &r), 0);
    cr_assert_eq(r.rank, 3);
    cr_assert_eq(r.world, 4);
    cr_assert_eq(r.num_workers, 1);
}

Test(config, reports_the_first_bad_field_in_field_order)
{
    /* data is checked before everything else. */
    pl_config c = valid_config();
    c.data = NULL;
    c.batch_size = 0;
    c.prefetch = 0;
    expect_rejected(&c, "data", NULL);
}

Test(config, null_config_is_rejected)
{
    config_resolved r;
    err_clear();
    cr_assert_eq(config_resolve(NULL, &r), PL_EINVAL);
    cr_assert_str_eq(pl_last_error(), "pl_loader_create: config is NULL");
}

/* ---- rank and world from the environment --------------------------------- */

Test(config, rank_and_world_come_from_the_environment)
{
    cr_assert_eq(setenv("RANK", "3", 1), 0);
    cr_assert_eq(setenv("WORLD_SIZE", "8", 1), 0);
    pl_config c = valid_config();
    c.rank = PL_FROM_ENV;
    c.world_size = PL_FROM_ENV;
    config_resolved r = resolve_ok(&c);
    cr_assert_eq(r.rank, 3);
    cr_assert_eq(r.world, 8);
    /* The config itself is left as the caller set it. */
    cr_assert_eq(r.cfg.rank, PL_FROM_ENV);
    cr_assert_eq(r.cfg.world_size, PL_FROM_ENV);
}

Test(config, unset_environment_means_rank_0_of_1)
{
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    pl_config c = valid_config();
    c.rank = PL_FROM_ENV;
    c.world_size = PL_FROM_ENV;
    config_resolved r = resolve_ok(&c);
    cr_assert_eq(r.rank, 0);
    cr_assert_eq(r.world, 1);
}

Test(config, explicit_rank_and_world_ignore_the_environment)
{
    cr_assert_eq(setenv("RANK", "7", 1), 0);
    cr_assert_eq(setenv("WORLD_SIZE", "abc", 1), 0);
    pl_config c = valid_config();
    c.rank = 1;
    c.world_size = 4;
    config_resolved r = resolve_ok(&c);
    cr_assert_eq(r.rank, 1);
    cr_assert_eq(r.world, 4);
}

/* Rank and world size are a pair: one from the config and the other from
 * the environment is refused, naming both fields and where each came
 * from (it used to mix them: "rank 0 of 4" on every process of a job the
 * environment did not describe). */
static void expect_half_pair(const pl_config *c, const char *want1,
                             const char *want2)
{
    config_resolved r;
    err_clear();
    cr_assert_eq(config_resolve(c, &r), PL_EINVAL, "accepted: rank %d of %d",
                 r.rank, r.world);
    const char *e = pl_last_error();
    cr_assert_not_null(strstr(e, "config.rank and config.world_size: "), "%s",
                       e);
    cr_assert_not_null(strstr(e, want1), "no \"%s\" in %s", want1, e);
    cr_assert_not_null(strstr(e, want2), "no \"%s\" in %s", want2, e);
    cr_assert_not_null(strstr(e, "set both, or neither"), "%s", e);
}

Test(config, half_a_rank_and_world_pair_is_refused_naming_both)
{
    cr_assert_eq(setenv("RANK", "2", 1), 0);
    cr_assert_eq(setenv("WORLD_SIZE", "16", 1), 0);
    pl_config c = valid_config();
    c.rank = PL_FROM_ENV;
    c.world_size = 3;
    expect_half_pair(&c, "world_size is 3 in the config",
                     "rank is PL_FROM_ENV (2 from torchrun (RANK, "
                     "WORLD_SIZE))");
    c.rank = 0;
    c.world_size = PL_FROM_ENV;
    expect_half_pair(&c, "rank is 0 in the config",
                     "world_size is PL_FROM_ENV (16 from torchrun");
    /* No launcher at all: not "rank 0 of 4" on every process. */
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    c.rank = PL_FROM_ENV;
    c.world_size = 4;
    expect_half_pair(&c, "world_size is 4 in the config",
                     "rank is PL_FROM_ENV (0 by default: no launcher "
                     "variables are set)");
}

Test(config, malformed_rank_in_environment_is_rejected)
{
    unsetenv("WORLD_SIZE");
    pl_config c = valid_config();
    c.rank = PL_FROM_ENV;
    c.world_size = 4;
    static const char *bad[] = {"abc", "-1", "3x", " ", "1.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(setenv("RANK", bad[i], 1), 0);
        char want[64];
        snprintf(want, sizeof want, "RANK=\"%s\"", bad[i]);
        expect_rejected(&c, "rank", want);
    }
}

Test(config, malformed_world_size_in_environment_is_rejected)
{
    unsetenv("RANK");
    pl_config c = valid_config();
    c.rank = 0;
    c.world_size = PL_FROM_ENV;
    static const char *bad[] = {"abc", "-1", "8 ", "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(setenv("WORLD_SIZE", bad[i], 1), 0);
        char want[64];
        snprintf(want, sizeof want, "WORLD_SIZE=\"%s\"", bad[i]);
        expect_rejected(&c, "world_size", want);
    }
}

Test(config, world_size_zero_in_environment_is_rejected)
{
    cr_assert_eq(setenv("RANK", "0", 1), 0);
    cr_assert_eq(setenv("WORLD_SIZE", "0", 1), 0);
    pl_config c = valid_config();
    c.rank = PL_FROM_ENV;
    c.world_size = PL_FROM_ENV;
    expect_rejected(&c, "world_size", NULL);
}

Test(config, environment_rank_not_below_world_is_rejected)
{
    cr_assert_eq(setenv("RANK", "4", 1), 0);
    cr_assert_eq(setenv("WORLD_SIZE", "4", 1), 0);
    pl_config c = valid_config();
    c.rank = PL_FROM_ENV;
    c.world_size = PL_FROM_ENV;
    expect_rejected(&c, "rank", "4");
}

/* Each launcher family, alone in the environment: rank, world, the local
 * rank and size, and the source the create notice names. */
typedef struct family_case {
    const char *vars[6][2];
    int rank, world, local_rank, local_world;
    const char *source;
} family_case;

static void resolve_with(const family_case *f)
{
    for (int i = 0; i < 6 && f->vars[i][0]; i++)
        cr_assert_eq(setenv(f->vars[i][0], f->vars[i][1], 1), 0);
    pl_config c = valid_config();
    c.rank = PL_FROM_ENV;
    c.world_size = PL_FROM_ENV;
    config_resolved r = resolve_ok(&c);
    cr_assert_eq(r.rank, f->rank, "%s", f->source);
    cr_assert_eq(r.world, f->world, "%s", f->source);
    cr_assert_eq(r.local_rank, f->local_rank, "%s", f->source);
    cr_assert_eq(r.local_world, f->local_world, "%s", f->source);
    cr_assert_str_eq(r.rank_source, f->source);
    for (int i = 0; i < 6 && f->vars[i][0]; i++)
        unsetenv(f->vars[i][0]);
}

Test(config, every_launcher_familys_variables_are_read)
{
    static const family_case cases[] = {
        {{{"RANK", "5"},
          {"WORLD_SIZE", "8"},
          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "4"}},
         5,
         8,
         1,
         4,
         "torchrun (RANK, WORLD_SIZE)"},
        {{{"SLURM_PROCID", "6"},
          {"SLURM_NTASKS", "7"},
          {"SLURM_LOCALID", "2"},
          {"SLURM_NTASKS_PER_NODE", "3"}},
         6,
         7,
         2,
         3,
         "SLURM (SLURM_PROCID, SLURM_NTASKS)"},
        {{{"SLURM_PROCID", "6"},
          {"SLURM_NTASKS", "11"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_TASKS_PER_NODE", "4(x2),3"},
          {"SLURM_NODEID", "2"}},
         6,
         11,
         1,
         3,
         "SLURM (SLURM_PROCID, SLURM_NTASKS)"},
        {{{"OMPI_COMM_WORLD_RANK", "3"},
          {"OMPI_COMM_WORLD_SIZE", "16"},
          {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"}},
         3,
         16,
         3,
         8,
         "Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)"},
        {{{"PMI_RANK", "2"},
          {"PMI_SIZE", "3"},
          {"MPI_LOCALRANKID", "0"},
          {"MPI_LOCALNRANKS", "1"}},
         2,
         3,
         0,
         1,
         "MPICH/PMI (PMI_RANK, PMI_SIZE)"},
        {{{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}},
         1,
         2,
         0,
         1,
         "MPICH/PMI (PMI_RANK, PMI_SIZE)"},
        {{{"UNRELATED", "1"}}, 0, 1, 0, 1, "defaults (no launcher variables)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        resolve_with(&cases[i]);
}

/* torchrun inside a SLURM allocation sets both: torchrun's are the ranks
 * of the processes pinload runs in. */
Test(config, torchrun_comes_before_slurm_and_mpi)
{
    cr_assert_eq(setenv("SLURM_PROCID", "0", 1), 0);
    cr_assert_eq(setenv("SLURM_NTASKS", "1", 1), 0);
    cr_assert_eq(setenv("OMPI_COMM_WORLD_RANK", "9", 1), 0);
    cr_assert_eq(setenv("OMPI_COMM_WORLD_SIZE", "10", 1), 0);
    resolve_with(&(family_case){{{"RANK", "3"}, {"WORLD_SIZE", "4"}},
                                3,
                                4,
                                0,
                                1,
                                "torchrun (RANK, WORLD_SIZE)"});
    resolve_with(&(family_case){{{"SLURM_LOCALID", "0"}},
                                0,
                                1,
                                0,
                                1,
                                "SLURM (SLURM_PROCID, SLURM_NTASKS)"});
}

Test(config, half_a_launchers_pair_is_an_error_naming_both_variables)
{
    pl_config c = valid_config();
    c.rank = PL_FROM_ENV;
    c.world_size = PL_FROM_ENV;
    cr_assert_eq(setenv("SLURM_PROCID", "1", 1), 0);
    expect_rejected(&c, "world_size",
                    "sets SLURM_PROCID but not SLURM_NTASKS (SLURM's pair)");
    unsetenv("SLURM_PROCID");
    cr_assert_eq(setenv("PMI_SIZE", "4", 1), 0);
    expect_rejected(&c, "rank", "sets PMI_SIZE but not PMI_RANK");
    unsetenv("PMI_SIZE");
    cr_assert_eq(setenv("OMPI_COMM_WORLD_RANK", "4", 1), 0);
    cr_assert_eq(setenv("OMPI_COMM_WORLD_SIZE", "4", 1), 0);
    expect_rejected(&c, "rank", "4 is not below world_size 4 (from Open MPI");
}

/* ---- workers ------------------------------------------------------------- */

static int cpus_allowed(void)
{
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    return CPU_COUNT(&set);
}

Test(config, zero_workers_means_the_cpus_this_process_may_use)
{
    pl_config c = valid_config();
    c.num_workers = 0;
    config_resolved r = resolve_ok(&c);
    const int quota = cpus_cgroup_quota("/sys/fs/cgroup");
    const int n = cpus_allowed();
    cr_assert_eq(r.num_workers, quota > 0 && quota < n ? quota : n, "%s",
                 r.workers_why);
    cr_assert_eq(r.cfg.num_workers, 0, "the caller's value is kept");
    char want[64];
    snprintf(want, sizeof want, "%d CPUs allowed", n);
    cr_assert_not_null(strstr(r.workers_why, want), "%s", r.workers_why);
}

/* cpu_budget bounds the default count and PL_AUTO's threads; a count
 * within it is kept. */
Test(config, cpu_budget_bounds_the_workers)
{
    pl_config c = valid_config();
    c.num_workers = 0;
    c.cpu_budget = 1;
    config_resolved r = resolve_ok(&c);
    cr_assert_eq(r.num_workers, 1, "%s", r.workers_why);
    if (cpus_allowed() > 1)
        cr_assert_not_null(strstr(r.workers_why, "config.cpu_budget 1"), "%s",
                           r.workers_why);
    c.num_workers = PL_AUTO;
    r = resolve_ok(&c);
    cr_assert_eq(r.num_workers, 1, "%s", r.workers_why);
    cr_assert_eq(r.auto_workers, 1);
    c.num_workers = 2;
    c.cpu_budget = 2;
    r = resolve_ok(&c);
    cr_assert_eq(r.num_workers, 2);
    cr_assert_str_eq(r.workers_why, "config");
}

/* As under `taskset -c 0`: one CPU allowed, one worker. */
Test(config, one_allowed_cpu_gives_one_worker)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
    pl_config c = valid_config();
    config_resolved r = resolve_ok(&c);
    cr_assert_eq(r.num_workers, 1, "%s", r.workers_why);
    cr_assert_not_null(strstr(r.workers_why, "1 CPUs allowed"), "%s",
                       r.workers_why);
}

/* The ranks of a node share its CPUs: a mask they all have is divided
 * among them, a mask that is one rank's own is not. */
Test(config, default_workers_share_the_cpus_among_the_nodes_ranks)
{
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 2 || cpus_allowed() != online)
        cr_skip_test("needs every CPU of at least two allowed");
    cr_assert_eq(setenv("RANK", "1", 1), 0);
    cr_assert_eq(setenv("WORLD_SIZE", "2", 1), 0);
    cr_assert_eq(setenv("LOCAL_RANK", "1", 1), 0);
    cr_assert_eq(setenv("LOCAL_WORLD_SIZE", "2", 1), 0);
    pl_config c = valid_config();
    c.rank = PL_FROM_ENV;
    c.world_size = PL_FROM_ENV;
    config_resolved r = resolve_ok(&c);
    const int quota = cpus_cgroup_quota("/sys/fs/cgroup");
    const int share = (quota > 0 && quota < online ? quota : (int)online) / 2;
    cr_assert_eq(r.num_workers, share < 1 ? 1 : share, "%s", r.workers_why);
    cr_assert_not_null(strstr(r.workers_why, "2 local ranks"), "%s",
                       r.workers_why);

    cpu_set_t one; /* this rank bound to a CPU of its own */
    CPU_ZERO(&one);
    CPU_SET(1, &one);
    cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
    cr_assert_eq(config_resolve(&c, &r), 0, "%s", pl_last_error());
    cr_assert_eq(r.num_workers, 1, "%s", r.workers_why);
    if (online == 2)
        cr_assert_not_null(strstr(r.workers_why, "own CPUs"), "%s",
                           r.workers_why);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    tu_write_file(p, text, strlen(text));
}

Test(config, cgroup_quotas_are_read_from_v2_and_v1_files)
{
    char root[64];
    tu_tmpdir(root);
    cr_assert_eq(cpus_cgroup_quota(root), 0, "no files: no quota");
    write_text(root, "cpu.max", "max 100000\n");
    cr_assert_eq(cpus_cgroup_quota(root), 0, "v2 unlimited");
    write_text(root, "cpu.max", "250000 100000\n");
    cr_assert_eq(cpus_cgroup_quota(root), 3, "2.5 CPUs round up");
    write_text(root, "cpu.max", "100000 100000\n");
    cr_assert_eq(cpus_cgroup_quota(root), 1);
    char v1[128];
    snprintf(v1, sizeof v1, "%s/v1", root);
    write_text(v1, "cpu/cpu.cfs_quota_us", "-1\n");
    write_text(v1, "cpu/cpu.cfs_period_us", "100000\n");
    cr_assert_eq(cpus_cgroup_quota(v1), 0, "v1 unlimited");
    write_text(v1, "cpu/cpu.cfs_quota_us", "400000\n");
    cr_assert_eq(cpus_cgroup_quota(v1), 4);
    tu_rm_rf(root);
}

Test(config, explicit_workers_are_kept)
{
    pl_config c = valid_config();
    static const int ns[] = {1, 3, 1024};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        c.num_workers = ns[i];
        config_resolved r;
        cr_assert_eq(config_resolve(&c, &r), 0, "%s", pl_last_error());
        cr_assert_eq(r.num_workers, ns[i]);
    }
}

/* ---- pl_loader_create and pl_loader_destroy ------------------------------ */

Test(config, create_with_null_config_is_einval)
{
    pl_loader *l = (pl_loader *)&l;
    err_clear();
    cr_assert_eq(pl_loader_create(NULL, &l), PL_EINVAL);
    cr_assert_null(l);
    assert_starts_with(pl_last_error(), "pl_loader_create: ");
    cr_assert_not_null(strstr(pl_last_error(), "config"));
}

Test(config, create_with_null_out_is_einval)
{
    pl_config c = valid_config();
    err_clear();
    cr_assert_eq(pl_loader_create(&c, NULL), PL_EINVAL);
    assert_starts_with(pl_last_error(), "pl_loader_create: ");
    cr_assert_not_null(strstr(pl_last_error(), "out"));
    err_clear();
    cr_assert_eq(pl_loader_create(NULL, NULL), PL_EINVAL);
}

Test(config, create_on_a_missing_path_is_eio_naming_the_path)
{
    char dir[64];
    tu_tmpdir(dir);
    char path[128];
    snprintf(path, sizeof path, "%s/no-such-folder", dir);
    pl_config c = valid_config();
    c.data = path;
    pl_loader *l = (pl_loader *)&l;
    err_clear();
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO);
    cr_assert_null(l);
    assert_starts_with(pl_last_error(), "pl_loader_create: ");
    cr_assert_not_null(strstr(pl_last_error(), path), "\"%s\" does not name %s",
                       pl_last_error(), path);
    tu_rm_rf(dir);
}

Test(config, destroy_null_is_a_no_op)
{
    err_set(PL_EIO, "before");
    pl_loader_destroy(NULL);
    cr_assert_str_eq(pl_last_error(), "before", "no error detail is set");
}

/* Values the code cannot compute with are refused naming the field: a
 * pixel limit whose memory budget would overflow, an epoch number that
 * would wrap, a std that makes infinities in the output format. */
Test(config, bounds_every_field_to_what_the_code_can_compute_with)
{
    pl_config c = valid_config();
    c.max_pixels = INT64_MAX;
    expect_rejected(&c, "max_pixels", NULL);
    c.max_pixels = (int64_t)65535 * 65535;
    expect_accepted(&c, "the largest pixel limit");
    c = valid_config();
    c.first_epoch = INT64_MAX;
    expect_rejected(&c, "first_epoch", NULL);
    c.first_epoch = (int64_t)1 << 48;
    expect_accepted(&c, "the largest first epoch");
    c = valid_config();
    c.max_file_bytes = INT64_MAX;
    expect_rejected(&c, "max_file_bytes", NULL);
    c = valid_config();
    c.max_device_buffers = (1 << 20) + 1;
    expect_rejected(&c, "max_device_buffers", NULL);
    c.max_device_buffers = 1 << 20;
    expect_accepted(&c, "the largest bound on the pool");
    c.max_device_buffers = -1;
    expect_accepted(&c, "no bound on the pool");

    c = valid_config();
    c.format = PL_FORMAT_F32_NCHW;
    c.std[1] = 1e-40f;
    expect_rejected(&c, "std", "beyond what float32 holds");
    c.std[1] = 1e-6f;
    expect_accepted(&c, "float32 holds 1e6");
    c.format = PL_FORMAT_F16_NCHW;
    expect_rejected(&c, "std", "std[1] = 1e-06 with mean[1] = 0.456");
    c.std[1] = 1e-4f; /* 0.544 / 1e-4 = 5440: float16 holds it */
    expect_accepted(&c, "float16 holds 5440");
    c.format = PL_FORMAT_U8_NHWC;
    c.std[1] = 1e-40f; /* not used for uint8 output */
    expect_accepted(&c, "std unused by u8");
}
