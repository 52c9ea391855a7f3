/* The enums' words: pl_format_name() and its kin give each value of their
 * list in pinload.h its word, NULL for anything else; the values are the
 * ABI's and never change (the tools' words: tests/tools/test_cli.c). */
#include <limits.h>

#include "pinload.h"
#include "testutil.h"

/* One list: its values and words as the X-macro gives them, and what its
 * function says of each value. */
typedef struct {
    const char *list;
    const char *(*name_of)(int);
    int n;
    int values[8];
    const char *words[8];
} list_t;

#define VALUE_(name, value, word) value,
#define WORD_(name, value, word) word,
#define COUNT_(name, value, word) +1
/* The pl_*_name functions take their enum; through an int for the table. */
#define NAME_OF_(fn, type)                                                     \
    static const char *fn##_int(int v)                                         \
    {                                                                          \
        return fn((type)v);                                                    \
    }
NAME_OF_(pl_format_name, pl_format)
NAME_OF_(pl_augment_name, pl_augment)
NAME_OF_(pl_memory_name, pl_memory)
NAME_OF_(pl_on_error_name, pl_on_error)
NAME_OF_(pl_shard_mode_name, pl_shard_mode)
NAME_OF_(pl_order_name, pl_order)
NAME_OF_(pl_backend_name, pl_backend)
NAME_OF_(pl_log_level_name, pl_log_level)
NAME_OF_(pl_device_name, pl_device)
#define LIST_(MAP, fn)                                                         \
    {                                                                          \
        .list = #MAP, .name_of = fn##_int, .n = 0 MAP(COUNT_),                 \
        .values = {MAP(VALUE_)}, .words = {MAP(WORD_)},                        \
    }

static const list_t lists[] = {
    LIST_(PL_FORMAT_MAP, pl_format_name),
    LIST_(PL_AUGMENT_MAP, pl_augment_name),
    LIST_(PL_MEMORY_MAP, pl_memory_name),
    LIST_(PL_ON_ERROR_MAP, pl_on_error_name),
    LIST_(PL_SHARD_MODE_MAP, pl_shard_mode_name),
    LIST_(PL_ORDER_MAP, pl_order_name),
    LIST_(PL_BACKEND_MAP, pl_backend_name),
    LIST_(PL_LOG_LEVEL_MAP, pl_log_level_name),
    LIST_(PL_DEVICE_MAP, pl_device_name),
};
#define NLISTS (sizeof lists / sizeof lists[0])

Test(names, every_value_of_every_list_has_its_word_and_no_two_share_one)
{
    for (size_t l = 0; l < NLISTS; l++) {
        const list_t *t = &lists[l];
        cr_assert_gt(t->n, 1, "%s", t->list);
        for (int i = 0; i < t->n; i++) {
            const char *w = t->name_of(t->values[i]);
            cr_assert_not_null(w, "%s: %d has no word", t->list, t->values[i]);
            cr_assert_str_eq(w, t->words[i], "%s", t->list);
            cr_assert_gt(strlen(w), 0);
            for (const char *c = w; *c; c++) /* what people type */
                cr_assert((*c >= 'a' && *c <= 'z') ||
                              (*c >= '0' && *c <= '9') || *c == '_',
                          "%s: \"%s\"", t->list, w);
            for (int j = 0; j < i; j++) {
                cr_assert_neq(t->values[i], t->values[j], "%s", t->list);
                cr_assert_str_neq(w, t->words[j], "%s", t->list);
            }
        }
    }
}

Test(names, a_value_no_list_holds_is_null)
{
    for (size_t l = 0; l < NLISTS; l++) {
        const list_t *t = &lists[l];
        int lo = t->values[0], hi = t->values[0];
        for (int i = 1; i < t->n; i++) {
            lo = t->values[i] < lo ? t->values[i] : lo;
            hi = t->values[i] > hi ? t->values[i] : hi;
        }
        cr_assert_null(t->name_of(lo - 1), "%s: %d", t->list, lo - 1);
        cr_assert_null(t->name_of(hi + 1), "%s: %d", t->list, hi + 1);
        cr_assert_null(t->name_of(INT_MIN), "%s", t->list);
        cr_assert_null(t->name_of(INT_MAX), "%s", t->list);
    }
    /* A CUDA ordinal is a device, but none of the special values. */
    cr_assert_null(pl_device_name((pl_device)0));
    cr_assert_null(pl_device_name((pl_device)7));
}

/* The values are the ABI (docs/ABI.md: they never change), and the words
 * what scripts, configs and command lines hold: both are written out here
 * once more, on purpose. */
Test(names, values_and_words_never_change)
{
    const struct {
        int value, want;
        const char *word, *want_word;
    } fixed[] = {
        {PL_FORMAT_U8_NHWC, 0, pl_format_name(PL_FORMAT_U8_NHWC), "u8"},
        {PL_FORMAT_F32_NCHW, 1, pl_format_name(PL_FORMAT_F32_NCHW), "f32"},
        {PL_FORMAT_F16_NCHW, 2, pl_format_name(PL_FORMAT_F16_NCHW), "f16"},
        {PL_FORMAT_BF16_NCHW, 3, pl_format_name(PL_FORMAT_BF16_NCHW), "bf16"},
        {PL_AUGMENT_NONE, 0, pl_augment_name(PL_AUGMENT_NONE), "none"},
        {PL_AUGMENT_EVAL, 1, pl_augment_name(PL_AUGMENT_EVAL), "eval"},
        {PL_AUGMENT_TRAIN, 2, pl_augment_name(PL_AUGMENT_TRAIN), "train"},
        {PL_MEMORY_PINNED, 0, pl_memory_name(PL_MEMORY_PINNED), "pinned"},
        {PL_MEMORY_PAGEABLE, 1, pl_memory_name(PL_MEMORY_PAGEABLE), "pageable"},
        {PL_MEMORY_MANAGED, 2, pl_memory_name(PL_MEMORY_MANAGED), "managed"},
        {PL_ON_ERROR_FAIL, 0, pl_on_error_name(PL_ON_ERROR_FAIL), "fail"},
        {PL_ON_ERROR_SKIP, 1, pl_on_error_name(PL_ON_ERROR_SKIP), "skip"},
        {PL_ON_ERROR_SUBSTITUTE, 2, pl_on_error_name(PL_ON_ERROR_SUBSTITUTE),
         "substitute"},
        {PL_SHARD_PAD, 0, pl_shard_mode_name(PL_SHARD_PAD), "pad"},
        {PL_SHARD_DROP, 1, pl_shard_mode_name(PL_SHARD_DROP), "drop"},
        {PL_ORDER_GLOBAL, 0, pl_order_name(PL_ORDER_GLOBAL), "global"},
        {PL_ORDER_SHARDS, 1, pl_order_name(PL_ORDER_SHARDS), "shards"},
        {PL_BACKEND_HOST, 0, pl_backend_name(PL_BACKEND_HOST), "host"},
        {PL_BACKEND_CUDA, 1, pl_backend_name(PL_BACKEND_CUDA), "cuda"},
        {PL_LOG_NOTICE, 0, pl_log_level_name(PL_LOG_NOTICE), "notice"},
        {PL_LOG_WARNING, 1, pl_log_level_name(PL_LOG_WARNING), "warning"},
        {PL_DEVICE_AUTO, -1, pl_device_name(PL_DEVICE_AUTO), "auto"},
        {PL_DEVICE_HOST, -2, pl_device_name(PL_DEVICE_HOST), "host"},
        {PL_DEVICE_LOCAL_RANK, -3, pl_device_name(PL_DEVICE_LOCAL_RANK),
         "local_rank"},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        cr_assert_eq(fixed[i].value, fixed[i].want, "%s", fixed[i].want_word);
        cr_assert_not_null(fixed[i].word, "%s", fixed[i].want_word);
        cr_assert_str_eq(fixed[i].word, fixed[i].want_word);
    }
}
