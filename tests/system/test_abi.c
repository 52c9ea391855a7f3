/* The ABI rule of pinload.h: caller-allocated structs are passed with the
 * caller's sizeof (the *_sized functions behind the macros). A newer,
 * larger struct is filled up to the library's size and zeroed past it,
 * never written past the caller's size; a size below the first stable one
 * is PL_EINVAL naming the struct; a config from a newer header may not set
 * fields this library does not know. Also: the header as a binder reads it
 * (no GCC attribute, plain enum values), and the exported symbols. */
#include <fcntl.h>
#include <stdalign.h>

#include "pinload.h"
#include "testutil.h"

#define CANARY 0xA5
#define EXTRA 64 /* bytes a "newer header" adds to a struct */

/* A struct of the library's size plus EXTRA bytes, then a canary. */
typedef struct {
    alignas(16) unsigned char bytes[1024 + EXTRA];
    unsigned char canary[64];
} bigger;

static void fill(bigger *b)
{
    memset(b, CANARY, sizeof *b);
}

static void assert_canary(const bigger *b, size_t from, const char *what)
{
    for (size_t k = from; k < sizeof b->bytes; k++)
        cr_assert_eq(b->bytes[k], CANARY, "%s: byte %zu written", what, k);
    for (size_t k = 0; k < sizeof b->canary; k++)
        cr_assert_eq(b->canary[k], CANARY, "%s: canary %zu written", what, k);
}

static void assert_zero(const bigger *b, size_t from, size_t to,
                        const char *what)
{
    for (size_t k = from; k < to; k++)
        cr_assert_eq(b->bytes[k], 0, "%s: byte %zu of a newer field not 0",
                     what, k);
}

static pl_loader *small_loader(char root[64])
{
    tu_make_tree(root, 8, 2);
    pl_config c;
    pl_config_default(&c);
    c.data = root;
    c.device = PL_DEVICE_HOST;
    c.batch_size = 4;
    c.width = c.height = 16;
    c.log = NULL;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    return l;
}

Test(abi, a_newer_callers_config_gets_defaults_and_zeros_past_ours)
{
    bigger b;
    fill(&b);
    const size_t size = sizeof(pl_config) + EXTRA;
    pl_config_default_sized((pl_config *)b.bytes, size);
    pl_config want;
    pl_config_default(&want);
    cr_assert_eq(memcmp(b.bytes, &want, sizeof want), 0);
    assert_zero(&b, sizeof want, size, "pl_config_default");
    assert_canary(&b, size, "pl_config_default");
}

/* A program built against the header before pl_config gained decode
 * passes its smaller struct: accepted, the field it lacks its default (the
 * CPU), and pl_config_default_sized writes no byte past it. */
Test(abi, a_config_from_before_decode_decodes_on_the_cpu)
{
    char root[64];
    tu_make_tree(root, 8, 2);
    bigger b;
    fill(&b);
    const size_t old = offsetof(pl_config, decode);
    pl_config *c = (pl_config *)b.bytes;
    pl_config_default_sized(c, old);
    assert_canary(&b, old, "pl_config_default");
    c->data = root;
    c->device = PL_DEVICE_HOST;
    c->batch_size = 4;
    c->width = c->height = 16;
    pl_loader *l;
    cr_assert_eq(pl_loader_create_sized(c, old, &l), 0, "%s", pl_last_error());
    pl_info in;
    cr_assert_eq(pl_loader_info(l, &in), 0);
    cr_assert_eq(in.decode, PL_DECODE_CPU);
    cr_assert_str_eq(in.decoder_name, "cpu");
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(abi, a_config_from_a_newer_header_is_used_if_its_new_fields_are_0)
{
    char root[64];
    tu_make_tree(root, 8, 2);
    bigger b;
    fill(&b);
    const size_t size = sizeof(pl_config) + EXTRA;
    pl_config *c = (pl_config *)b.bytes;
    pl_config_default_sized(c, size);
    c->data = root;
    c->device = PL_DEVICE_HOST;
    c->batch_size = 4;
    c->width = c->height = 16;
    pl_loader *l;
    cr_assert_eq(pl_loader_create_sized(c, size, &l), 0, "%s", pl_last_error());
    pl_loader_destroy(l);
    /* A field this library does not know, set: refused, not ignored. */
    b.bytes[sizeof(pl_config) + 5] = 1;
    cr_assert_eq(pl_loader_create_sized(c, size, &l), PL_EINVAL);
    cr_assert_null(l);
    cr_assert_not_null(strstr(pl_last_error(), "does not know"), "%s",
                       pl_last_error());
    tu_rm_rf(root);
}

Test(abi, sizes_below_the_first_stable_ones_are_einval_naming_the_struct)
{
    char root[64];
    pl_loader *l = small_loader(root);
    pl_config c;
    pl_config_default(&c);
    pl_loader *l2;
    cr_assert_eq(
        pl_loader_create_sized(&c, offsetof(pl_config, decode) - 8, &l2),
        PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "sizeof(pl_config)"), "%s",
                       pl_last_error());
    pl_info info;
    cr_assert_eq(
        pl_loader_info_sized(l, &info, offsetof(pl_info, numa_node) - 4),
        PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "sizeof(pl_info)"));
    pl_stats st;
    cr_assert_eq(pl_loader_stats_sized(l, &st, 8), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "sizeof(pl_stats)"));
    pl_failure f[2];
    size_t n;
    cr_assert_eq(pl_loader_failures_sized(l, 0, f, 2, &n, 4), PL_EINVAL);
    pl_image img;
    cr_assert_eq(pl_image_load_sized("/nonexistent.jpg", &img, 2), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "sizeof(pl_image)"));
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* A program built against the header before pl_stats gained its stall
 * times passes the smaller size: it gets every field it knows, and no
 * byte past its struct is written. */
Test(abi, stats_of_an_older_header_still_fill)
{
    char root[64];
    pl_loader *l = small_loader(root);
    const pl_batch *bt;
    cr_assert_eq(pl_loader_next(l, &bt), 0);
    pl_loader_release(l, bt, NULL);
    const size_t old = offsetof(pl_stats, ns_slot_wait);
    bigger b;
    fill(&b);
    cr_assert_eq(pl_loader_stats_sized(l, (pl_stats *)b.bytes, old), 0, "%s",
                 pl_last_error());
    cr_assert_geq(((pl_stats *)b.bytes)->batches, 1);
    cr_assert_eq(((pl_stats *)b.bytes)->device_buffers, 2);
    assert_canary(&b, old, "pl_loader_stats");
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* The same for pl_info before it said where the ring lives (numa_node,
 * gpu_numa_node). */
Test(abi, info_of_an_older_header_still_fills)
{
    char root[64];
    pl_loader *l = small_loader(root);
    const size_t old = offsetof(pl_info, numa_node);
    bigger b;
    fill(&b);
    cr_assert_eq(pl_loader_info_sized(l, (pl_info *)b.bytes, old), 0, "%s",
                 pl_last_error());
    cr_assert_eq(((pl_info *)b.bytes)->batch_size, 4);
    cr_assert_eq(((pl_info *)b.bytes)->channels_last, 0);
    assert_canary(&b, old, "pl_loader_info");
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(abi, info_and_stats_fill_a_newer_struct_to_our_size_and_no_further)
{
    char root[64];
    pl_loader *l = small_loader(root);
    const pl_batch *bt;
    cr_assert_eq(pl_loader_next(l, &bt), 0);
    pl_loader_release(l, bt, NULL);
    bigger b;
    fill(&b);
    cr_assert_eq(
        pl_loader_info_sized(l, (pl_info *)b.bytes, sizeof(pl_info) + EXTRA),
        0);
    pl_info want;
    pl_loader_info(l, &want);
    cr_assert_eq(memcmp(b.bytes, &want, sizeof want), 0);
    cr_assert_eq(((pl_info *)b.bytes)->batch_size, 4);
    assert_zero(&b, sizeof want, sizeof want + EXTRA, "pl_loader_info");
    assert_canary(&b, sizeof want + EXTRA, "pl_loader_info");
    fill(&b);
    cr_assert_eq(
        pl_loader_stats_sized(l, (pl_stats *)b.bytes, sizeof(pl_stats) + EXTRA),
        0);
    cr_assert_geq(((pl_stats *)b.bytes)->batches, 1);
    assert_zero(&b, sizeof(pl_stats), sizeof(pl_stats) + EXTRA,
                "pl_loader_stats");
    assert_canary(&b, sizeof(pl_stats) + EXTRA, "pl_loader_stats");
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* A newer caller's pl_failure array: each record at its stride. */
Test(abi, failures_are_written_at_the_callers_stride)
{
    char root[64];
    tu_make_tree(root, 8, 2);
    char bad[128];
    for (int k = 0; k < 2; k++) {
        snprintf(bad, sizeof bad, "%s/c%d/zz_bad.jpg", root, k);
        tu_write_file(bad, "not a jpeg", 10);
    }
    pl_config c;
    pl_config_default(&c);
    c.data = root;
    c.device = PL_DEVICE_HOST;
    c.batch_size = 2;
    c.width = c.height = 16;
    c.shuffle = 0;
    c.log = NULL;
    pl_loader *l;
    cr_assert_eq(pl_loader_create(&c, &l), 0, "%s", pl_last_error());
    const pl_batch *bt;
    int rc;
    while ((rc = pl_loader_next(l, &bt)) == 0)
        pl_loader_release(l, bt, NULL);
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    const size_t stride = sizeof(pl_failure) + EXTRA;
    unsigned char *arr = malloc(3 * stride + 64);
    memset(arr, CANARY, 3 * stride + 64);
    size_t n;
    cr_assert_eq(
        pl_loader_failures_sized(l, 0, (pl_failure *)arr, 3, &n, stride), 0);
    cr_assert_eq(n, 2);
    for (size_t i = 0; i < n; i++) {
        const pl_failure *f = (const pl_failure *)(arr + i * stride);
        cr_assert_eq(f->code, PL_ENOTIMAGE);
        cr_assert_not_null(strstr(f->path, "zz_bad.jpg"), "%s", f->path);
        for (size_t k = sizeof(pl_failure); k < stride; k++)
            cr_assert_eq(arr[i * stride + k], 0, "record %zu byte %zu", i, k);
    }
    for (size_t k = 2 * stride; k < 3 * stride + 64; k++)
        cr_assert_eq(arr[k], CANARY, "byte %zu past the records", k);
    free(arr);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

Test(abi, image_load_fills_a_newer_struct_and_free_touches_only_its_fields)
{
    char dir[64], path[128];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/x.jpg", dir);
    tu_write_jpeg(path, 20, 10, 3, NULL);
    bigger b;
    fill(&b);
    const size_t size = sizeof(pl_image) + EXTRA;
    pl_image *img = (pl_image *)b.bytes;
    cr_assert_eq(pl_image_load_sized(path, img, size), 0, "%s",
                 pl_last_error());
    cr_assert_eq(img->width, 20);
    cr_assert_eq(img->height, 10);
    assert_zero(&b, sizeof(pl_image), size, "pl_image_load");
    assert_canary(&b, size, "pl_image_load");
    pl_image_free(img);
    cr_assert_null(img->pixels);
    assert_zero(&b, sizeof(pl_image), size, "pl_image_free");
    tu_rm_rf(dir);
}

/* What a binder sees: the header preprocessed by a compiler that is not
 * GCC (no __GNUC__) holds no attribute, and every status code and enum
 * value is a plain "NAME = value" enumerator. */
Test(abi, the_header_reads_plainly_without_gcc_extensions)
{
    char dir[64], out[128], cmd[1024];
    tu_tmpdir(dir);
    snprintf(out, sizeof out, "%s/h.i", dir);
    snprintf(cmd, sizeof cmd,
             "cc -E -P -undef -D__STDC__=1 -D__STDC_VERSION__=201112L "
             "-Iinclude -I%s include/pinload.h -o %s 2>%s/err",
             dir, out, dir);
    /* stddef.h and stdint.h as a binder declares them. */
    char stub[128];
    snprintf(stub, sizeof stub, "%s/stddef.h", dir);
    tu_write_file(stub, "typedef unsigned long size_t;\n", 30);
    snprintf(stub, sizeof stub, "%s/stdint.h", dir);
    static const char ints[] =
        "typedef signed char int8_t; typedef unsigned char uint8_t;\n"
        "typedef short int16_t; typedef unsigned short uint16_t;\n"
        "typedef int int32_t; typedef unsigned uint32_t;\n"
        "typedef long int64_t; typedef unsigned long uint64_t;\n";
    tu_write_file(stub, ints, sizeof ints - 1);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    char *text = tu_slurp(out);
    cr_assert_null(strstr(text, "__attribute__"), "%s", text);
    cr_assert_null(strstr(text, "PL_STATUS_MAP"));
    cr_assert_null(strstr(text, "XX("));
    static const char *const codes[] = {
        "PL_OK = 0,",         "PL_EPOCH_END = 1,", "PL_EINVAL = -1,",
        "PL_ENOMEM = -2,",    "PL_EIO = -3,",      "PL_ENODATA = -4,",
        "PL_ENOTIMAGE = -5,", "PL_ECORRUPT = -6,", "PL_EUNSUPPORTED = -7,",
        "PL_ELIMIT = -8,",    "PL_ECUDA = -9,",    "PL_ETHREAD = -10,",
        "PL_EBUSY = -11,",    "PL_ECLOSED = -12,"};
    for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++)
        cr_assert_not_null(strstr(text, codes[k]), "no \"%s\"", codes[k]);
    /* A renamed code keeps its first name, for the same value. */
    cr_assert_not_null(strstr(text, "PL_ENOTJPEG = PL_ENOTIMAGE"), "%s", text);
    /* The enums made from lists (PL_FORMAT_MAP...) read the same way. */
    cr_assert_null(strstr(text, "_MAP("), "%s", text);
    static const char *const values[] = {
        "PL_FORMAT_BF16_NCHW = 3,",  "PL_AUGMENT_TRAIN = 2,",
        "PL_MEMORY_MANAGED = 2,",    "PL_ON_ERROR_SUBSTITUTE = 2,",
        "PL_SHARD_DROP = 1,",        "PL_ORDER_SHARDS = 1,",
        "PL_BACKEND_CUDA = 1,",      "PL_LOG_WARNING = 1,",
        "PL_DEVICE_LOCAL_RANK = -3,"};
    for (size_t k = 0; k < sizeof values / sizeof values[0]; k++)
        cr_assert_not_null(strstr(text, values[k]), "no \"%s\"", values[k]);
    cr_assert_not_null(strstr(text, "pl_loader_create_sized("));
    free(text);
    tu_rm_rf(dir);
}

/* The symbol check fails on a symbol removed from the list (an accidental
 * export) and on one added (a removal from the library), naming it. */
Test(abi, the_symbol_check_fails_on_an_extra_or_a_missing_symbol)
{
    char dir[64], cmd[2048], so[256];
    tu_tmpdir(dir);
    snprintf(so, sizeof so, "%s/libpinload.so", tu_build_dir());
    snprintf(cmd, sizeof cmd,
             "tools/abi-check.sh include/pinload.sym %s >/dev/null 2>&1", so);
    cr_assert_eq(system(cmd), 0, "the list matches the library");
    snprintf(cmd, sizeof cmd,
             "grep -v '^pl_loader_next$' include/pinload.sym >%s/less && "
             "tools/abi-check.sh %s/less %s 2>%s/err",
             dir, dir, so, dir);
    cr_assert_neq(system(cmd), 0, "an export not in the list passes");
    char path[128];
    snprintf(path, sizeof path, "%s/err", dir);
    char *err = tu_slurp(path);
    cr_assert_not_null(strstr(err, "does not list: pl_loader_next"), "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd,
             "{ cat include/pinload.sym; echo pl_removed; } >%s/more && "
             "tools/abi-check.sh %s/more %s 2>%s/err",
             dir, dir, so, dir);
    cr_assert_neq(system(cmd), 0, "a listed symbol missing passes");
    err = tu_slurp(path);
    cr_assert_not_null(strstr(err, "does not export"), "%s", err);
    cr_assert_not_null(strstr(err, "pl_removed"), "%s", err);
    free(err);
    tu_rm_rf(dir);
}
