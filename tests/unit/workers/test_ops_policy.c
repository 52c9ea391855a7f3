/* The augmentation policies (workers/ops/policy.h: rand_augment,
 * trivial_augment_wide, auto_augment): their parameters as the spec parses
 * and writes them, each error naming the op and the parameter; the
 * magnitudes' bins as torchvision's tensors hold them (values known by
 * hand); what each draws (uniform transforms, the one bin, signs, a
 * sub-policy's probabilities) and that the pipeline applies what it drew;
 * sharpness and invert, the functions they add, on images whose result is
 * known exactly. The comparison with torchvision pixel by pixel and the
 * draws' distributions against its samplers are
 * python/tests/test_transforms_policy_ref.py's. */
#include <math.h>

#include "../workers/ops/functional.h"
#include "../workers/ops/ops.h"
#include "../workers/ops/policy.h"
#include "pinload.h"
#include "testops.h"
#include "testutil.h"

static const op_setup u8_32 = {32,
                               32,
                               PL_FORMAT_U8_NHWC,
                               {0.485f, 0.456f, 0.406f},
                               {0.229f, 0.224f, 0.225f}};

static ops_pipeline pl; /* large: not on the stack */

static void parses_to(const char *spec, const char *want)
{
    tops_parses_to(&pl, &u8_32, spec, want);
}

static void refused(const char *spec, const char *want)
{
    tops_refused(&pl, &u8_32, spec, want);
}

#define RESIZE "resize(size=32x32,interpolation=bilinear,antialias=true);"

Test(ops_policy, each_policy_parses_with_its_defaults_written_out)
{
    parses_to("resize;rand_augment;trivial_augment_wide;auto_augment",
              RESIZE "rand_augment(num_ops=2,magnitude=9,"
                     "num_magnitude_bins=31,interpolation=nearest);"
                     "trivial_augment_wide(num_magnitude_bins=31,"
                     "interpolation=nearest);"
                     "auto_augment(policy=imagenet,interpolation=nearest)");
    cr_assert_eq(pl.npixels, 3);
    /* Positional in torchvision's order, aliases, a fill. */
    parses_to("resize;randaugment(3,15,51,bilinear,128);"
              "trivial_augment(11,fill=1:2:3);autoaugment(svhn)",
              RESIZE "rand_augment(num_ops=3,magnitude=15,"
                     "num_magnitude_bins=51,interpolation=bilinear,"
                     "fill=128:128:128);"
                     "trivial_augment_wide(num_magnitude_bins=11,"
                     "interpolation=nearest,fill=1:2:3);"
                     "auto_augment(policy=svhn,interpolation=nearest)");
}

Test(ops_policy, each_error_names_the_op_and_the_parameter)
{
    refused("resize;rand_augment(magnitude=31)",
            "rand_augment: magnitude=31: past the last bin of "
            "num_magnitude_bins=31 (0 to 30)");
    refused("resize;rand_augment(2,5,5)",
            "rand_augment: magnitude=5: past the last bin of "
            "num_magnitude_bins=5 (0 to 4)");
    refused("resize;rand_augment(1.5)",
            "rand_augment: num_ops=1.5: not a whole number");
    refused("resize;rand_augment(17)",
            "rand_augment: num_ops=17: 17 is outside [0, 16]");
    refused("resize;rand_augment(num_magnitude_bins=1,magnitude=0)",
            "rand_augment: num_magnitude_bins=1: 1 is outside [2, 1001]");
    refused("resize;trivial_augment_wide(30.5)",
            "trivial_augment_wide: num_magnitude_bins=30.5: not a whole "
            "number");
    refused("resize;auto_augment(cifar)",
            "auto_augment: policy=cifar: not imagenet, cifar10 or svhn");
    refused("resize;auto_augment(interpolation=bicubic)",
            "auto_augment: interpolation=bicubic: not nearest or bilinear");
    refused("resize;rand_augment(fill=300)",
            "rand_augment: fill=300: 300 is outside [0, 255]");
}

/* ---- the bins ---- */

static float bin(policy_bins b, double end, int n, int i, int w, int h)
{
    const policy_entry e = {POLICY_SHEAR_X, (uint8_t)b, 0, end};
    return policy_magnitude(&e, n, i, w, h);
}

Test(ops_policy, the_bins_are_torchvisions_tensors)
{
    /* torch.linspace(0, 0.3, 31)[9]: 0.09 as float32, from the start;
     * [30] the end itself; [20] from the end: 0.3f - 10 * 0.01f. */
    cr_assert_eq(bin(POLICY_BINS_LINEAR, 0.3, 31, 0, 1, 1), 0.0f);
    cr_assert_eq(bin(POLICY_BINS_LINEAR, 0.3, 31, 9, 1, 1),
                 (float)(9.0 * (double)(0.3f / 30.0f)));
    cr_assert_eq(bin(POLICY_BINS_LINEAR, 0.3, 31, 30, 1, 1), 0.3f);
    cr_assert_eq(bin(POLICY_BINS_LINEAR, 0.3, 31, 20, 1, 1),
                 (float)((double)0.3f - 10.0 * (double)(0.3f / 30.0f)));
    cr_assert_eq(bin(POLICY_BINS_LINEAR, 30.0, 31, 9, 1, 1), 9.0f);
    cr_assert_eq(bin(POLICY_BINS_LINEAR, 135.0, 31, 30, 1, 1), 135.0f);
    /* Translations: 150 / 331 of the width or height; the last bin is
     * the end as float32. */
    cr_assert_eq(bin(POLICY_BINS_WIDTH, 150.0 / 331.0, 31, 30, 224, 100),
                 (float)(150.0 / 331.0 * 224));
    cr_assert_eq(bin(POLICY_BINS_HEIGHT, 150.0 / 331.0, 31, 30, 224, 100),
                 (float)(150.0 / 331.0 * 100));
    /* Posterize, 31 bins: round(8 - i / 7.5): 8 at 0, 7 at 9 (6.8), 6 at
     * 15, 4 at 30; TrivialAugment's (n - 1) / 6 = 5: 8 - 13 / 5 = 5.4 is
     * 5, and 2 at 30. */
    cr_assert_eq(bin(POLICY_BINS_POSTERIZE, 4, 31, 0, 1, 1), 8.0f);
    cr_assert_eq(bin(POLICY_BINS_POSTERIZE, 4, 31, 9, 1, 1), 7.0f);
    cr_assert_eq(bin(POLICY_BINS_POSTERIZE, 4, 31, 15, 1, 1), 6.0f);
    cr_assert_eq(bin(POLICY_BINS_POSTERIZE, 4, 31, 30, 1, 1), 4.0f);
    cr_assert_eq(bin(POLICY_BINS_POSTERIZE, 6, 31, 13, 1, 1), 5.0f);
    cr_assert_eq(bin(POLICY_BINS_POSTERIZE, 6, 31, 30, 1, 1), 2.0f);
    /* Halves go to the even neighbour (torch.round): 9 bins, a divisor
     * of 2. */
    cr_assert_eq(bin(POLICY_BINS_POSTERIZE, 4, 9, 5, 1, 1), 6.0f,
                 "8 - 5 / 2 = 5.5: to the even 6");
    cr_assert_eq(bin(POLICY_BINS_POSTERIZE, 4, 9, 3, 1, 1), 6.0f,
                 "8 - 3 / 2 = 6.5: to the even 6");
    /* Solarize: from 1 down to 0. */
    cr_assert_eq(bin(POLICY_BINS_SOLARIZE, 0, 31, 0, 1, 1), 1.0f);
    cr_assert_eq(bin(POLICY_BINS_SOLARIZE, 0, 31, 30, 1, 1), 0.0f);
    cr_assert_eq(bin(POLICY_BINS_SOLARIZE, 0, 11, 5, 1, 1), 0.5f);
    cr_assert_eq(bin(POLICY_BINS_NONE, 0, 31, 7, 1, 1), 0.0f);
}

/* ---- the draws ---- */

/* The transforms and magnitudes op 1 (after the resize) drew for index i,
 * read back from its description. [out] ops (policy_op), m; the count. */
static int drew(int64_t i, int ops[16], double m[16], int *sub)
{
    char buf[1024];
    ops_describe(&pl, 7, 0, i, 32, 32, buf, sizeof buf);
    const char *p = strchr(buf, ';');
    cr_assert_not_null(p, "%s", buf);
    p = strchr(p, '(') + 1;
    *sub = -1;
    if (strncmp(p, "sub=", 4) == 0) {
        *sub = atoi(p + 4);
        p = strchr(p, ',') + 1;
    }
    int n = 0;
    while (*p && *p != ')') {
        char word[32];
        int k, used;
        cr_assert_eq(
            sscanf(p, "op%d=%31[a-z_],m%*d=%lf%n", &k, word, &m[n], &used), 3,
            "%s", p);
        cr_assert_eq(k, n, "%s", buf);
        ops[n] = -1;
        for (int o = 0; o < POLICY_NOPS; o++)
            if (strcmp(policy_op_words[o], word) == 0)
                ops[n] = o;
        cr_assert_neq(ops[n], -1, "%s", word);
        n++;
        p += used;
        if (*p == ',')
            p++;
    }
    return n;
}

static void parse_ok(const char *spec)
{
    char why[256];
    cr_assert_eq(ops_parse(&pl, spec, &u8_32, why, sizeof why), 0, "%s: %s",
                 spec, why);
}

Test(ops_policy, rand_augment_draws_num_ops_uniform_transforms_at_one_bin)
{
    parse_ok("resize;rand_augment(4,9)");
    int count[POLICY_NOPS] = {0}, negative = 0, signed_ = 0;
    const int N = 2800;
    for (int64_t i = 0; i < N / 4; i++) {
        int ops[16], sub;
        double m[16];
        cr_assert_eq(drew(i, ops, m, &sub), 4);
        for (int k = 0; k < 4; k++) {
            count[ops[k]]++;
            const double a = fabs(m[k]);
            switch (ops[k]) {
            case POLICY_SHEAR_X:
            case POLICY_SHEAR_Y: /* linspace(0, 0.3, 31)[9] */
                cr_assert_eq((float)a, (float)(9.0 * (double)(0.3f / 30.0f)));
                break;
            case POLICY_ROTATE:
                cr_assert_eq(a, 9.0);
                break;
            case POLICY_TRANSLATE_X: /* of a 32-pixel image */
                cr_assert_eq(
                    (float)a,
                    (float)(9.0 *
                            (double)((float)(150.0 / 331.0 * 32) / 30.0f)));
                break;
            case POLICY_POSTERIZE:
                cr_assert_eq(m[k], 7.0);
                break;
            case POLICY_SOLARIZE: /* linspace(1, 0, 31)[9] */
                cr_assert_eq((float)m[k],
                             (float)(9.0 * (double)(-1.0f / 30.0f) + 1.0));
                break;
            case POLICY_IDENTITY:
            case POLICY_AUTOCONTRAST:
            case POLICY_EQUALIZE:
                cr_assert_eq(m[k], 0.0);
                break;
            case POLICY_INVERT:
                cr_assert(0, "Invert is not RandAugment's");
                break;
            default:
                break;
            }
            if (ops[k] >= POLICY_SHEAR_X && ops[k] <= POLICY_SHARPNESS) {
                signed_++;
                negative += m[k] < 0;
            }
        }
    }
    /* 14 transforms, 200 expected each: 4.5 standard deviations either
     * way is [140, 260]. */
    for (int o = 0; o < POLICY_INVERT; o++)
        cr_assert(count[o] > 140 && count[o] < 260, "%s drawn %d times of %d",
                  policy_op_words[o], count[o], N);
    cr_assert(abs(2 * negative - signed_) < 4.5 * sqrt(signed_), "%d of %d",
              negative, signed_);
}

Test(ops_policy, trivial_augment_draws_one_transform_and_a_bin)
{
    parse_ok("resize;trivial_augment_wide(num_magnitude_bins=5)");
    int rot[5] = {0}, rotations = 0;
    for (int64_t i = 0; i < 1400; i++) {
        int ops[16], sub;
        double m[16];
        cr_assert_eq(drew(i, ops, m, &sub), 1);
        if (ops[0] != POLICY_ROTATE)
            continue;
        /* linspace(0, 135, 5): 0, 33.75, 67.5, 101.25, 135. */
        const int b = (int)lround(fabs(m[0]) / 33.75);
        cr_assert_eq(fabs(m[0]), b * 33.75, "%g", m[0]);
        rot[b]++;
        rotations++;
    }
    cr_assert(rotations > 60 && rotations < 140, "%d rotations", rotations);
    for (int b = 0; b < 5; b++)
        cr_assert(rot[b] > 0, "bin %d never drawn", b);
}

Test(ops_policy, auto_augment_draws_a_sub_policy_and_each_steps_coin)
{
    /* imagenet's sub-policy 2 is (Equalize 0.8, Equalize 0.6), 12 is
     * (Equalize 0.0, Equalize 0.8), 14 (Color 0.6 at bin 4, Contrast 1.0
     * at 8): each step applied with its probability, magnitudes at their
     * bins of 10. */
    parse_ok("resize;auto_augment");
    int subs[25] = {0}, s2[2] = {0}, n2 = 0, s12[2] = {0}, n12 = 0;
    for (int64_t i = 0; i < 5000; i++) {
        int ops[16], sub;
        double m[16];
        cr_assert_eq(drew(i, ops, m, &sub), 2);
        cr_assert(sub >= 0 && sub < 25);
        subs[sub]++;
        if (sub == 2 || sub == 12) {
            for (int k = 0; k < 2; k++) {
                cr_assert(ops[k] == POLICY_EQUALIZE ||
                          ops[k] == POLICY_IDENTITY);
                (sub == 2 ? s2 : s12)[k] += ops[k] == POLICY_EQUALIZE;
            }
            *(sub == 2 ? &n2 : &n12) += 1;
        }
        if (sub == 14) {
            cr_assert(ops[0] == POLICY_COLOR || ops[0] == POLICY_IDENTITY);
            cr_assert_eq(ops[1], POLICY_CONTRAST, "p = 1: always");
            /* linspace(0, 0.9, 10), a step of 0.1f: [8] from the end,
             * [4] from the start. */
            const float step = 0.9f / 9.0f;
            cr_assert_eq((float)fabs(m[1]),
                         (float)((double)0.9f - (double)step));
            if (ops[0] == POLICY_COLOR)
                cr_assert_eq((float)fabs(m[0]), (float)(4.0 * (double)step));
        }
    }
    for (int s = 0; s < 25; s++)
        cr_assert(subs[s] > 130 && subs[s] < 270, "sub-policy %d: %d", s,
                  subs[s]);
    cr_assert_eq(s12[0], 0, "p = 0: never");
    cr_assert(fabs((double)s2[0] / n2 - 0.8) < 4.5 * sqrt(0.16 / n2));
    cr_assert(fabs((double)s2[1] / n2 - 0.6) < 4.5 * sqrt(0.24 / n2));
    cr_assert(fabs((double)s12[1] / n12 - 0.8) < 4.5 * sqrt(0.16 / n12));
}

/* ---- applying ---- */

typedef struct pic {
    uint8_t px[32 * 32 * 3];
    op_scratch scratch;
    op_image img;
} pic;

/* p's pixels from seed; a scratch it held before is freed (the pics are
 * static: zeroed at first). */
static void pic_init(pic *p, int w, int h, uint32_t seed)
{
    free(p->scratch.buf);
    memset(p, 0, sizeof *p);
    p->img = (op_image){p->px, w, h, (size_t)w * 3, &p->scratch};
    for (int i = 0; i < w * h * 3; i++) {
        seed = seed * 1664525u + 1013904223u;
        p->px[i] = (uint8_t)(seed >> 24);
    }
}

Test(ops_policy, the_pipeline_applies_what_was_drawn)
{
    /* Each sample of rand_augment(2, 9) is the image through the two
     * transforms its description names, by policy_apply; none is the
     * identity of the whole. */
    parse_ok("resize;rand_augment(2,9)");
    static pic p, q;
    int changed = 0;
    for (int64_t i = 0; i < 60; i++) {
        int ops[16], sub;
        double m[16];
        cr_assert_eq(drew(i, ops, m, &sub), 2);
        pic_init(&p, 32, 32, (uint32_t)i);
        pic_init(&q, 32, 32, (uint32_t)i);
        cr_assert_eq(ops_pixels(&pl, 7, 0, i, &p.img), 0);
        for (int k = 0; k < 2; k++)
            cr_assert_eq(policy_apply(&q.img, ops[k], (float)m[k],
                                      OP_INTERP_NEAREST, NULL),
                         0);
        cr_assert_eq(memcmp(p.px, q.px, sizeof p.px), 0, "index %lld",
                     (long long)i);
        pic_init(&q, 32, 32, (uint32_t)i);
        changed += memcmp(p.px, q.px, sizeof p.px) != 0;
    }
    pic_init(&p, 1, 1, 0); /* frees the scratch */
    pic_init(&q, 1, 1, 0);
    cr_assert_gt(changed, 50);
}

Test(ops_policy, no_ops_leave_the_image)
{
    parse_ok("resize;rand_augment(0)");
    static pic p, q;
    pic_init(&p, 32, 32, 5);
    pic_init(&q, 32, 32, 5);
    cr_assert_eq(ops_pixels(&pl, 7, 0, 3, &p.img), 0);
    cr_assert_eq(memcmp(p.px, q.px, sizeof p.px), 0);
    char buf[256];
    ops_describe(&pl, 7, 0, 3, 32, 32, buf, sizeof buf);
    cr_assert_str_eq(buf, "resize(width=32,height=32);rand_augment()");
}

Test(ops_policy, sharpness_zero_is_the_rounded_smoothing_and_one_the_image)
{
    static pic p, q;
    pic_init(&p, 9, 7, 11);
    pic_init(&q, 9, 7, 11);
    cr_assert_eq(fn_adjust_sharpness(&q.img, 1.0), 0);
    cr_assert_eq(memcmp(p.px, q.px, sizeof p.px), 0, "1: the image");
    cr_assert_eq(fn_adjust_sharpness(&q.img, 0.0), 0);
    /* (8 neighbours + 5 x centre) / 13, rounded: a sum over 13 is never
     * a half, so integers say it exactly; the border rows and columns
     * stay. */
    for (int y = 0; y < 7; y++)
        for (int x = 0; x < 9; x++)
            for (int c = 0; c < 3; c++) {
                const uint8_t *at = p.px + ((size_t)y * 9 + (size_t)x) * 3 + c;
                int want = *at;
                if (y > 0 && y < 6 && x > 0 && x < 8) {
                    int sum = 4 * *at;
                    for (int dy = -1; dy <= 1; dy++)
                        for (int dx = -1; dx <= 1; dx++)
                            sum += at[(dy * 9 + dx) * 3];
                    want = (2 * sum + 13) / 26;
                }
                cr_assert_eq(q.px[((size_t)y * 9 + (size_t)x) * 3 + c], want,
                             "(%d, %d) channel %d", x, y, c);
            }
    /* 2: twice the image less the smoothing, clamped, truncated. A flat
     * image is its own smoothing: unchanged. */
    pic_init(&q, 3, 3, 0);
    memset(q.px, 77, 27);
    cr_assert_eq(fn_adjust_sharpness(&q.img, 2.0), 0);
    for (int i = 0; i < 27; i++)
        cr_assert_eq(q.px[i], 77);
    /* 2 pixels wide: left as it is, as torchvision leaves it. */
    pic_init(&p, 2, 5, 3);
    pic_init(&q, 2, 5, 3);
    cr_assert_eq(fn_adjust_sharpness(&q.img, 0.0), 0);
    cr_assert_eq(memcmp(p.px, q.px, sizeof p.px), 0);
    pic_init(&p, 1, 1, 0);
    pic_init(&q, 1, 1, 0);
}

Test(ops_policy, invert_is_255_minus_each_value)
{
    static pic p, q;
    pic_init(&p, 8, 8, 1);
    pic_init(&q, 8, 8, 1);
    fn_invert(&q.img);
    for (int i = 0; i < 8 * 8 * 3; i++)
        cr_assert_eq(q.px[i], 255 - p.px[i]);
}
