/* tools/deps-check.sh, the dependency rule's guard: on a small tree that
 * follows the rule (every allowed arrow once) it passes; each kind of
 * forbidden arrow fails it, named with its file and line. And the real
 * tree passes. */
#include <criterion/criterion.h>

#include <sys/wait.h>

#include "testutil.h"

#define SCRIPT "tools/deps-check.sh"

static void put(const char *root, const char *path, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", root, path);
    tu_mkdirs_for(p);
    tu_write_file(p, text, strlen(text));
}

/* A tree that follows the rule: every allowed arrow once. */
static void lawful_tree(char root[64])
{
    tu_tmpdir(root);
    put(root, "include/pinload.h", "int pl(void);\n");
    put(root, "common/grow.h", "#include \"pinload.h\"\n");
    put(root, "index/tar.h",
        "#include \"../codecs/codec.h\"\n#include \"../common/grow.h\"\n");
    put(root, "device/backend.h", "#include \"../common/grow.h\"\n");
    put(root, "codecs/codec.h", "#include \"../common/grow.h\"\n");
    put(root, "catalog/catalog.h",
        "#include \"../index/tar.h\"\n#include \"../codecs/codec.h\"\n"
        "#include \"../common/grow.h\"\n");
    put(root, "remote/remote.h",
        "#include \"../catalog/catalog.h\"\n#include \"../index/tar.h\"\n"
        "#include \"../codecs/codec.h\"\n#include \"../common/grow.h\"\n");
    put(root, "workers/pool.h",
        "#include \"../codecs/codec.h\"\n#include \"../common/grow.h\"\n"
        "#include \"ops/op.h\"\n");
    put(root, "workers/ops/op.h", "#include \"../../common/grow.h\"\n");
    put(root, "input/input.h",
        "#include \"../remote/remote.h\"\n#include \"../catalog/catalog.h\"\n"
        "#include \"../index/tar.h\"\n#include \"../codecs/codec.h\"\n"
        "#include \"../common/grow.h\"\n");
    put(root, "loader/loader.c",
        "#include \"pinload.h\"\n#include \"state.h\"\n"
        "#include \"../input/input.h\"\n#include \"../remote/remote.h\"\n"
        "#include \"../catalog/catalog.h\"\n#include \"../index/tar.h\"\n"
        "#include \"../workers/pool.h\"\n#include \"../codecs/codec.h\"\n"
        "#include \"../device/backend.h\"\n"
        "#include \"../workers/ops/op.h\"\n"
        "#include \"../order/sampler.h\"\n"
        "#include \"../delivery/ring.h\"\n");
    put(root, "order/sampler.h", "#include \"../common/grow.h\"\n");
    put(root, "delivery/ring.h",
        "#include \"../order/sampler.h\"\n#include \"../catalog/catalog.h\"\n"
        "#include \"../workers/pool.h\"\n#include \"../device/backend.h\"\n"
        "#include \"../common/grow.h\"\n");
    put(root, "loader/state.h", "#include \"../common/grow.h\"\n");
    put(root, "tools/bench.c", "#include \"pinload.h\"\n#include \"cli.h\"\n");
    put(root, "tools/cli.h", "#include <stdio.h>\n");
    put(root, "tools/bench.h", "#include \"pinload.h\"\n");
    put(root, "samples/minimal.c", "#include \"pinload.h\"\n");
    put(root, "examples/big/main.c",
        "#include \"pinload.h\"\n#include \"../../tools/cli.h\"\n");
}

/* Runs the script on root; exit status, its stdout in *out. */
static int check(const char *root, char **out)
{
    char cmd[512], path[128];
    snprintf(path, sizeof path, "%s.out", root);
    snprintf(cmd, sizeof cmd, "sh %s %s >%s 2>&1", SCRIPT, root, path);
    const int st = system(cmd);
    *out = tu_slurp(path);
    unlink(path);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void expect_forbidden(const char *path, const char *text,
                             const char *arrow)
{
    char root[64], *out;
    lawful_tree(root);
    put(root, path, text);
    cr_assert_eq(check(root, &out), 1, "%s passed:\n%s", path, out);
    cr_assert_not_null(strstr(out, arrow), "no '%s' in:\n%s", arrow, out);
    free(out);
    tu_rm_rf(root);
}

Test(depscheck, a_tree_that_follows_the_rule_passes)
{
    char root[64], *out;
    lawful_tree(root);
    cr_assert_eq(check(root, &out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "46 includes in 19 files"), "%s", out);
    free(out);
    tu_rm_rf(root);
}

Test(depscheck, common_includes_nothing_above_it)
{
    expect_forbidden("common/log.c", "#include \"../loader/state.h\"\n",
                     "common/log.c:1: common -> loader");
}

Test(depscheck, rooms_side_by_side_never_include_one_another)
{
    expect_forbidden("workers/decode.c",
                     "#include <stdio.h>\n#include \"../input/input.h\"\n",
                     "workers/decode.c:2: workers -> input");
    expect_forbidden("input/folder.c", "#include \"../device/backend.h\"\n",
                     "input/folder.c:1: input -> device");
    expect_forbidden("device/cuda.c", "#include \"../workers/pool.h\"\n",
                     "device/cuda.c:1: device -> workers");
    expect_forbidden("index/tar.c", "#include \"../device/backend.h\"\n",
                     "index/tar.c:1: index -> device");
    expect_forbidden("workers/pool.c", "#include \"../catalog/catalog.h\"\n",
                     "workers/pool.c:1: workers -> catalog");
    expect_forbidden("codecs/webp.c", "#include \"../device/backend.h\"\n",
                     "codecs/webp.c:1: codecs -> device");
}

Test(depscheck, no_room_includes_one_above_it)
{
    expect_forbidden("index/sample_table.c",
                     "#include \"../catalog/catalog.h\"\n",
                     "index/sample_table.c:1: index -> catalog");
    expect_forbidden("catalog/catalog.c", "#include \"../remote/remote.h\"\n",
                     "catalog/catalog.c:1: catalog -> remote");
    expect_forbidden("remote/remote.c",
                     "#include \"../common/grow.h\"\n"
                     "#include \"../input/input.h\"\n",
                     "remote/remote.c:2: remote -> input");
    expect_forbidden("codecs/jpeg.c", "#include \"../workers/pool.h\"\n",
                     "codecs/jpeg.c:1: codecs -> workers");
    expect_forbidden("codecs/png.c", "#include \"../index/tar.h\"\n",
                     "codecs/png.c:1: codecs -> index");
    expect_forbidden("order/sampler.c", "#include \"../catalog/catalog.h\"\n",
                     "order/sampler.c:1: order -> catalog");
    expect_forbidden("delivery/copier.c", "#include \"../input/input.h\"\n",
                     "delivery/copier.c:1: delivery -> input");
    expect_forbidden("delivery/copier.c", "#include \"../loader/state.h\"\n",
                     "delivery/copier.c:1: delivery -> loader");
}

Test(depscheck, the_ops_room_sees_pixels_only)
{
    expect_forbidden("workers/ops/blur.c", "#include \"../pool.h\"\n",
                     "workers/ops/blur.c:1: workers/ops -> workers");
    expect_forbidden("workers/ops/blur.c",
                     "#include \"../../codecs/codec.h\"\n",
                     "workers/ops/blur.c:1: workers/ops -> codecs");
    expect_forbidden("device/host.c", "#include \"../workers/ops/op.h\"\n",
                     "device/host.c:1: device -> workers/ops");
}

Test(depscheck, nothing_below_includes_the_loader)
{
    expect_forbidden("device/host.c", "#  include \"../loader/state.h\"\n",
                     "device/host.c:1: device -> loader");
}

Test(depscheck, tools_and_samples_see_the_public_header_only)
{
    expect_forbidden("tools/dump.c", "#include \"../loader/state.h\"\n",
                     "tools/dump.c:1: tools -> loader");
    expect_forbidden("samples/train.c", "#include \"../common/grow.h\"\n",
                     "samples/train.c:1: samples -> common");
    expect_forbidden("examples/big/run.c",
                     "#include \"../../tools/cli.h\"\n"
                     "#include \"../../tools/bench.h\"\n",
                     "examples/big/run.c:2: examples -> tools");
}

Test(depscheck, an_include_found_nowhere_is_named)
{
    expect_forbidden("loader/state.c", "#include \"nowhere.h\"\n",
                     "loader/state.c:1: \"nowhere.h\" is neither beside it");
}

Test(depscheck, the_source_tree_follows_the_rule)
{
    char *out;
    cr_assert_eq(check(".", &out), 0, "%s", out);
    free(out);
}
