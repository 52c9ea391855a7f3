/* The tools' shared command line (tools/cli.h) takes the words of the
 * header's lists (PL_FORMAT_MAP...), those pl_*_name() gives: each word
 * its value, an unknown one a usage error naming them, and each tool's
 * --help shows them. */
#include <sys/wait.h>

#include "../../tools/cli.h"
#include "testutil.h"

/* The tools' parsers (tools/cli.h) read the same lists: each word gives
 * its value. */
Test(cli, the_tools_take_each_word_for_its_value)
{
    const char *u = "usage\n";
    for (int f = 0; f <= PL_FORMAT_BF16_NCHW; f++)
        cr_assert_eq((int)cli_format("t", u, "--format", pl_format_name(f)), f);
    for (int a = 0; a <= PL_AUGMENT_TRAIN; a++)
        cr_assert_eq((int)cli_augment("t", u, "--augment", pl_augment_name(a)),
                     a);
    for (int m = 0; m <= PL_MEMORY_MANAGED; m++) {
        cr_assert_eq((int)cli_memory("t", u, "--memory", pl_memory_name(m)), m);
        cr_assert_eq(cli_pin(pl_memory_name(m)), m);
    }
    cr_assert_eq(cli_pin("on"), PL_MEMORY_PINNED);
    cr_assert_eq(cli_pin("off"), PL_MEMORY_PAGEABLE);
    cr_assert_eq(cli_pin("yes"), -1);
    for (int e = 0; e <= PL_ON_ERROR_SUBSTITUTE; e++)
        cr_assert_eq(
            (int)cli_on_error("t", u, "--on-error", pl_on_error_name(e)), e);
    for (int s = 0; s <= PL_SHARD_DROP; s++)
        cr_assert_eq(
            (int)cli_shard_mode("t", u, "--shard-mode", pl_shard_mode_name(s)),
            s);
    for (int o = 0; o <= PL_ORDER_SHARDS; o++)
        cr_assert_eq((int)cli_order("t", u, "--order", pl_order_name(o)), o);
    for (int d = PL_DEVICE_LOCAL_RANK; d <= PL_DEVICE_AUTO; d++) {
        int must_cuda = -1;
        cr_assert_eq(
            cli_device("t", u, "--device", pl_device_name(d), &must_cuda), d);
        cr_assert_eq(must_cuda, 0);
    }
}

/* An unknown word exits 2, naming the list's words in its order. */
Test(cli, an_unknown_word_exits_2_naming_the_lists_words)
{
    char dir[64], path[128];
    tu_tmpdir(dir);
    snprintf(path, sizeof path, "%s/err", dir);
    const pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (!freopen(path, "w", stderr))
            _exit(99);
        cli_on_error("pinload-t", "usage\n", "--on-error", "ignore");
        _exit(0);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status %d", st);
    char *err = tu_slurp(path);
    cr_assert_str_eq(err, "pinload-t: --on-error: unknown value \"ignore\" "
                          "(fail, skip or substitute)\nusage\n");
    free(err);
    tu_rm_rf(dir);
}

/* The words of a list joined by '|', as a usage shows them. */
#define JOIN_(name, value, word) "|" word

static int help_shows(const char *tool, const char *what)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/%s --help", tu_build_dir(), tool);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "%s", cmd);
    static char text[1 << 16];
    const size_t n = fread(text, 1, sizeof text - 1, p);
    text[n] = '\0';
    cr_assert_eq(pclose(p), 0, "%s", cmd);
    /* Usages break their lines at will: compare with single spaces. */
    char flat[1 << 16];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!(text[i] == ' ' || text[i] == '\n') ||
            (k > 0 && flat[k - 1] != ' '))
            flat[k++] = text[i] == '\n' ? ' ' : text[i];
    flat[k] = '\0';
    return strstr(flat, what) != NULL;
}

Test(cli, each_tools_help_shows_the_words_of_the_lists_it_takes)
{
    /* Each list's words from the list itself: "|u8|f32|f16|bf16". */
    const struct {
        const char *tool, *flag, *words;
    } shown[] = {
        {"pinload-dump", "--augment", PL_AUGMENT_MAP(JOIN_)},
        {"pinload-dump", "--on-error", PL_ON_ERROR_MAP(JOIN_)},
        {"pinload-dump", "--order", PL_ORDER_MAP(JOIN_)},
        {"pinload-dump", "--device", PL_DEVICE_MAP(JOIN_) "|cuda|cuda:N"},
        {"pinload-bench", "--augment", PL_AUGMENT_MAP(JOIN_)},
        {"pinload-bench", "--format", PL_FORMAT_MAP(JOIN_)},
        {"pinload-bench", "--order", PL_ORDER_MAP(JOIN_)},
        {"pinload-bench", "--device", PL_DEVICE_MAP(JOIN_) "|cuda|cuda:N"},
    };
    for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
        char want[256];
        /* words + 1: past the leading '|' */
        snprintf(want, sizeof want, "%s %s", shown[i].flag, shown[i].words + 1);
        cr_assert(help_shows(shown[i].tool, want), "%s --help lacks \"%s\"",
                  shown[i].tool, want);
    }
}
