/* pl_config: the documented defaults, validation naming the bad field, the
 * values settled at create time (rank and world from the environment,
 * worker count), and pl_loader_create's argument errors. Criterion runs
 * each test in its own process, so setenv here touches no other test. */
#include <math.h>

#include "../loader/config.h"
#include "../loader/error.h"
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

static void assert_starts_with(const char *s, const char *prefix)
{
    cr_assert(strncmp(s, prefix, strlen(prefix)) == 0,
              "\"%s\" does not start with \"%s\"", s, prefix);
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
    cr_assert_eq(config_resolve(c, &r), PL_EINVAL, "config.%s accepted", field);
    assert_starts_with(pl_last_error(), prefix);
    if (also)
        cr_assert_not_null(strstr(pl_last_error(), also),
                           "\"%s\" does not mention \"%s\"", pl_last_error(),
                           also);

    err_clear();
    pl_loader *l = (pl_loader *)&r; /* not NULL, so that the reset shows */
    cr_assert_eq(pl_loader_create(c, &l), PL_EINVAL);
    cr_assert_null(l, "*out is NULL after a failed create");
    assert_starts_with(pl_last_error(), prefix);
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
    cr_assert_eq(c.num_workers, 0);
    cr_assert_eq(c.prefetch, 2);
    cr_assert_eq(c.memory, PL_MEMORY_PINNED);
    cr_assert_eq(c.device, PL_DEVICE_AUTO);
    cr_assert_eq(c.device_buffers, 2);
    cr_assert_eq(c.keep_host, 0);
    cr_assert_eq(c.on_error, PL_ON_ERROR_SKIP);
    cr_assert_eq(c.strict, 0);
    cr_assert_eq(c.max_width, 32768);
    cr_assert_eq(c.max_height, 32768);
    cr_assert_eq(c.max_pixels, 178956970);
    cr_assert_eq(c.max_file_bytes, (int64_t)256 * 1024 * 1024);
    cr_assert_null(c.log);
    cr_assert_null(c.log_ctx);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(c.reserved[i], 0, "reserved[%d]", i);
}

Test(config, documented_constants_keep_their_values)
{
    cr_assert_eq(PL_FROM_ENV, -1);
    cr_assert_eq(PL_DEVICE_AUTO, -1);
    cr_assert_eq(PL_DEVICE_HOST, -2);
    cr_assert_eq(PL_FORMAT_U8_NHWC, 0);
    cr_assert_eq(PL_FORMAT_F32_NCHW, 1);
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
    config_resolved r;
    cr_assert_eq(config_resolve(&c, &r), 0, "%s", pl_last_error());
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

Test(config, rejects_missing_data)
{
    pl_config c = valid_config();
    c.data = NULL;
    expect_rejected(&c, "data", "required");
    c.data = "";
    expect_rejected(&c, "data", "required");
}

Test(config, rejects_batch_size_zero)
{
    pl_config c = valid_config();
    c.batch_size = 0;
    expect_rejected(&c, "batch_size", "0");
    c.batch_size = -64;
    expect_rejected(&c, "batch_size", "-64");
}

Test(config, rejects_width_zero)
{
    pl_config c = valid_config();
    c.width = 0;
    expect_rejected(&c, "width", NULL);
}

Test(config, rejects_negative_height)
{
    pl_config c = valid_config();
    c.height = -1;
    expect_rejected(&c, "height", "-1");
}

Test(config, rejects_unknown_format)
{
    pl_config c = valid_config();
    c.format = (pl_format)7;
    expect_rejected(&c, "format", "7");
}

Test(config, rejects_unknown_augment)
{
    pl_config c = valid_config();
    /* No value check in the detail here: pl_augment has no negative
     * enumerator, so GCC makes it unsigned and -1 is printed as
     * 4294967295. */
    c.augment = (pl_augment)-1;
    expect_rejected(&c, "augment", NULL);
    c.augment = (pl_augment)3;
    expect_rejected(&c, "augment", "3");
}

Test(config, rejects_zero_negative_or_infinite_std)
{
    pl_config c = valid_config();
    c.std[1] = 0.0f;
    expect_rejected(&c, "std", "std[1]");
    c = valid_config();
    c.std[2] = -0.5f;
    expect_rejected(&c, "std", "std[2]");
    c = valid_config();
    c.std[0] = INFINITY;
    expect_rejected(&c, "std", "std[0]");
    c = valid_config();
    c.std[0] = NAN;
    expect_rejected(&c, "std", "std[0]");
}

Test(config, rejects_non_finite_mean)
{
    pl_config c = valid_config();
    c.mean[0] = NAN;
    expect_rejected(&c, "mean", "mean[0]");
    c = valid_config();
    c.mean[2] = -INFINITY;
    expect_rejected(&c, "mean", "mean[2]");
}

Test(config, rejects_shuffle_other_than_0_or_1)
{
    pl_config c = valid_config();
    c.shuffle = 2;
    expect_rejected(&c, "shuffle", "2");
    c.shuffle = -1;
    expect_rejected(&c, "shuffle", "-1");
}

Test(config, rejects_drop_last_other_than_0_or_1)
{
    pl_config c = valid_config();
    c.drop_last = 2;
    expect_rejected(&c, "drop_last", "2");
}

Test(config, rejects_negative_first_epoch)
{
    pl_config c = valid_config();
    c.first_epoch = -1;
    expect_rejected(&c, "first_epoch", "-1");
}

Test(config, rejects_unknown_shard_mode)
{
    pl_config c = valid_config();
    c.shard_mode = (pl_shard_mode)2;
    expect_rejected(&c, "shard_mode", "2");
}

Test(config, rejects_rank_not_below_world_size)
{
    pl_config c = valid_config();
    c.rank = 5;
    c.world_size = 2;
    expect_rejected(&c, "rank", "5");
    c.rank = 2;
    expect_rejected(&c, "rank", "2");
    c.rank = -2; /* negative, and not PL_FROM_ENV */
    expect_rejected(&c, "rank", "-2");
}

Test(config, rejects_world_size_zero)
{
    pl_config c = valid_config();
    c.world_size = 0;
    expect_rejected(&c, "world_size", "0");
    c.world_size = -2;
    expect_rejected(&c, "world_size", "-2");
}

Test(config, rejects_negative_num_workers)
{
    pl_config c = valid_config();
    c.num_workers = -1;
    expect_rejected(&c, "num_workers", "-1");
}

Test(config, rejects_prefetch_zero)
{
    pl_config c = valid_config();
    c.prefetch = 0;
    expect_rejected(&c, "prefetch", "0");
}

Test(config, rejects_unknown_memory)
{
    pl_config c = valid_config();
    c.memory = (pl_memory)9;
    expect_rejected(&c, "memory", "9");
}

Test(config, rejects_device_below_host)
{
    pl_config c = valid_config();
    c.device = -3;
    expect_rejected(&c, "device", "-3");
}

Test(config, rejects_device_buffers_zero)
{
    pl_config c = valid_config();
    c.device_buffers = 0;
    expect_rejected(&c, "device_buffers", "0");
}

Test(config, rejects_keep_host_and_strict_other_than_0_or_1)
{
    pl_config c = valid_config();
    c.keep_host = 2;
    expect_rejected(&c, "keep_host", "2");
    c = valid_config();
    c.strict = -1;
    expect_rejected(&c, "strict", "-1");
}

Test(config, rejects_unknown_on_error)
{
    pl_config c = valid_config();
    c.on_error = (pl_on_error)3;
    expect_rejected(&c, "on_error", "3");
}

Test(config, rejects_zero_limits)
{
    pl_config c = valid_config();
    c.max_pixels = 0;
    expect_rejected(&c, "max_pixels", NULL);
    c = valid_config();
    c.max_file_bytes = 0;
    expect_rejected(&c, "max_file_bytes", NULL);
    c = valid_config();
    c.max_width = 0;
    expect_rejected(&c, "max_width", "0");
    c = valid_config();
    c.max_height = -1;
    expect_rejected(&c, "max_height", "-1");
}

Test(config, rejects_nonzero_reserved_naming_the_word)
{
    pl_config c = valid_config();
    c.reserved[3] = 1;
    expect_rejected(&c, "reserved", "reserved[3]");
    c = valid_config();
    c.reserved[7] = (uint64_t)1 << 63;
    expect_rejected(&c, "reserved", "reserved[7]");
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
    config_resolved r;
    cr_assert_eq(config_resolve(&c, &r), 0, "%s", pl_last_error());
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
    config_resolved r;
    cr_assert_eq(config_resolve(&c, &r), 0, "%s", pl_last_error());
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
    config_resolved r;
    cr_assert_eq(config_resolve(&c, &r), 0, "%s", pl_last_error());
    cr_assert_eq(r.rank, 1);
    cr_assert_eq(r.world, 4);
}

Test(config, env_and_explicit_values_mix_per_field)
{
    cr_assert_eq(setenv("RANK", "2", 1), 0);
    cr_assert_eq(setenv("WORLD_SIZE", "16", 1), 0);
    pl_config c = valid_config();
    c.rank = PL_FROM_ENV;
    c.world_size = 3;
    config_resolved r;
    cr_assert_eq(config_resolve(&c, &r), 0, "%s", pl_last_error());
    cr_assert_eq(r.rank, 2);
    cr_assert_eq(r.world, 3);

    c.rank = 0;
    c.world_size = PL_FROM_ENV;
    cr_assert_eq(config_resolve(&c, &r), 0, "%s", pl_last_error());
    cr_assert_eq(r.rank, 0);
    cr_assert_eq(r.world, 16);
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
    unsetenv("RANK");
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

    /* Rank from the environment, world explicit. */
    cr_assert_eq(setenv("RANK", "5", 1), 0);
    c.world_size = 2;
    expect_rejected(&c, "rank", "5");
}

/* ---- workers ------------------------------------------------------------- */

Test(config, zero_workers_means_one_per_online_cpu)
{
    pl_config c = valid_config();
    c.num_workers = 0;
    config_resolved r;
    cr_assert_eq(config_resolve(&c, &r), 0, "%s", pl_last_error());
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_gt(n, 0);
    cr_assert_eq(r.num_workers, n > 1024 ? 1024 : (int)n);
    cr_assert_eq(r.cfg.num_workers, 0, "the caller's value is kept");
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
