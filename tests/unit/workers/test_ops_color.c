/* The colour, tone and blur ops (workers/ops/functional.h: color_jitter,
 * gaussian_blur, solarize, posterize, equalize, autocontrast): each one's
 * parameters as the spec parses and writes them, every error naming the
 * op and the parameter; each function of explicit parameters on tiny
 * images whose result is known exactly (solarize at 0 inverts, posterize
 * to 8 bits keeps, equalize keeps a constant image, ...); the draws
 * (color_jitter's order a permutation, its factors in their ranges, a
 * range of one value forcing it) and the pipeline applying the functions
 * in the order drawn. The comparison with torchvision pixel by pixel is
 * python/tests/test_transforms_color_ref.py's. */
#include <math.h>

#include "../workers/ops/functional.h"
#include "../workers/ops/ops.h"
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

Test(ops_color, each_op_parses_with_its_defaults_written_out)
{
    parses_to("resize;color_jitter",
              "resize(size=32x32,interpolation=bilinear,antialias=true);"
              "color_jitter(brightness=1:1,contrast=1:1,saturation=1:1,"
              "hue=0:0)");
    cr_assert_eq(pl.npixels, 1);
    /* One number is torchvision's: [max(0, 1 - b), 1 + b], hue [-h, h]. */
    parses_to("resize;color_jitter(0.4,0.25,1.5,0.1)",
              "resize(size=32x32,interpolation=bilinear,antialias=true);"
              "color_jitter(brightness=0.6:1.4,contrast=0.75:1.25,"
              "saturation=0:2.5,hue=-0.1:0.1)");
    /* Two are the range. */
    parses_to("resize;color_jitter(brightness=0.5:0.9,hue=-0.5:0.2)",
              "resize(size=32x32,interpolation=bilinear,antialias=true);"
              "color_jitter(brightness=0.5:0.9,contrast=1:1,saturation=1:1,"
              "hue=-0.5:0.2)");
    parses_to("resize;gaussian_blur(5);solarize(128);posterize(4);equalize;"
              "autocontrast",
              "resize(size=32x32,interpolation=bilinear,antialias=true);"
              "gaussian_blur(kernel_size=5,sigma=0.1:2);"
              "solarize(threshold=128,p=0.5);posterize(bits=4,p=0.5);"
              "equalize(p=0.5);autocontrast(p=0.5)");
    cr_assert_eq(pl.npixels, 5);
    /* The examples. */
    parses_to("resize;color_jitter(0.4,0.4,0.4,0.1);"
              "gaussian_blur(23,sigma=0.1:2);solarize(128,p=0.2)",
              "resize(size=32x32,interpolation=bilinear,antialias=true);"
              "color_jitter(brightness=0.6:1.4,contrast=0.6:1.4,"
              "saturation=0.6:1.4,hue=-0.1:0.1);"
              "gaussian_blur(kernel_size=23,sigma=0.1:2);"
              "solarize(threshold=128,p=0.2)");
    parses_to("resize;gaussian_blur(kernel_size=5x3,sigma=1.5);"
              "random_solarize(threshold=127.5,p=1);random_posterize(0,0);"
              "random_equalize(1);random_autocontrast(p=0.25)",
              "resize(size=32x32,interpolation=bilinear,antialias=true);"
              "gaussian_blur(kernel_size=5x3,sigma=1.5:1.5);"
              "solarize(threshold=127.5,p=1);posterize(bits=0,p=0);"
              "equalize(p=1);autocontrast(p=0.25)");
}

Test(ops_color, each_error_names_the_op_and_the_parameter)
{
    refused("resize;color_jitter(hue=0.6)",
            "color_jitter: hue=0.6: 0.6 is outside [-0.5, 0.5]");
    refused("resize;color_jitter(hue=-0.1)",
            "color_jitter: hue=-0.1: one number is h for [-h, h], in "
            "[0, 0.5]; a range is lo:hi");
    refused("resize;color_jitter(brightness=-1)",
            "color_jitter: brightness=-1: -1 is outside [0, 100]");
    refused("resize;color_jitter(contrast=1.5:0.5)",
            "color_jitter: contrast=1.5:0.5: 1.5 is above 0.5 (a range is "
            "low:high)");
    refused("resize;color_jitter(saturation=x)",
            "color_jitter: saturation=x: not a number");
    refused("resize;color_jitter(sharpness=1)",
            "color_jitter: \"sharpness\": no such parameter (brightness, "
            "contrast, saturation, hue, p)");
    refused("resize;color_jitter(0.1,0.1,0.1,0.1,0.8,0.1)",
            "color_jitter: \"0.1\" is value 6, but it takes 5 (brightness, "
            "contrast, saturation, hue, p)");
    refused("resize;color_jitter(0.4,p=1.5)",
            "color_jitter: p=1.5: 1.5 is outside [0, 1]");
    refused("resize;gaussian_blur",
            "gaussian_blur: kernel_size: required (an odd size, K or KXxKY, "
            "as GaussianBlur's)");
    refused("resize;gaussian_blur(4)",
            "gaussian_blur: kernel_size=4x4: not odd");
    refused("resize;gaussian_blur(3x6)",
            "gaussian_blur: kernel_size=3x6: not odd");
    refused("resize;gaussian_blur(2.5)",
            "gaussian_blur: kernel_size=2.5: 2.5 is not a whole number");
    refused("resize;gaussian_blur(257)",
            "gaussian_blur: kernel_size=257: 257 is outside [1, 255]");
    refused("resize;gaussian_blur(65)",
            "gaussian_blur: kernel_size=65x65: wider than the 32 x 32 output "
            "allows (half of it must be below each side, to reflect)");
    refused("resize;gaussian_blur(3,sigma=0:1)",
            "gaussian_blur: sigma=0:1: 0 is outside (0, 100]");
    refused("resize;solarize",
            "solarize: threshold: required (0 to 255), as RandomSolarize's");
    refused("resize;solarize(256)",
            "solarize: threshold=256: 256 is outside [0, 255]");
    refused("resize;solarize(128,p=1.5)",
            "solarize: p=1.5: 1.5 is outside [0, 1]");
    refused("resize;posterize",
            "posterize: bits: required (0 to 8), as RandomPosterize's");
    refused("resize;posterize(3.5)", "posterize: bits=3.5: not a whole number");
    refused("resize;posterize(9)", "posterize: bits=9: 9 is outside [0, 8]");
    refused("resize;equalize(p=-0.1)",
            "equalize: p=-0.1: -0.1 is outside [0, 1]");
    refused("resize;autocontrast(0.5,1)",
            "autocontrast: \"1\" is value 2, but it takes 1 (p)");
    /* Pixel ops come after the geometric ones and before normalize. */
    refused("color_jitter(0.4);resize",
            "resize: a geometric op after color_jitter (a pixel op): the "
            "order is geometric ops (fused into the decode), pixel ops, "
            "normalize, after-normalize ops, a batch op");
}

/* A w x h image of the function's pixels, with its scratch. */
typedef struct pic {
    uint8_t px[64 * 64 * 3];
    op_scratch scratch;
    op_image img;
} pic;

static void pic_init(pic *p, int w, int h)
{
    cr_assert_leq(w * h, 64 * 64);
    memset(p, 0, sizeof *p);
    p->img = (op_image){p->px, w, h, (size_t)w * 3, &p->scratch};
}

static void pic_fill(pic *p, uint8_t r, uint8_t g, uint8_t b)
{
    for (int i = 0; i < p->img.w * p->img.h; i++) {
        p->px[3 * i] = r;
        p->px[3 * i + 1] = g;
        p->px[3 * i + 2] = b;
    }
}

static uint8_t at(const pic *p, int x, int y, int c)
{
    return p->px[((size_t)y * p->img.w + x) * 3 + c];
}

Test(ops_color, solarize_and_posterize_are_their_bit_operations)
{
    static pic p, q;
    pic_init(&p, 16, 16);
    for (int i = 0; i < 256 * 3; i++)
        p.px[i] = (uint8_t)(i % 256);
    q = p;
    q.img.px = q.px;
    fn_solarize(&q.img, 0); /* every value inverted */
    for (int i = 0; i < 256 * 3; i++)
        cr_assert_eq(q.px[i], 255 - p.px[i]);
    memcpy(q.px, p.px, sizeof q.px);
    fn_solarize(&q.img, 127.5); /* 128 and up: 127.5 as float32 */
    for (int i = 0; i < 256 * 3; i++)
        cr_assert_eq(q.px[i], p.px[i] >= 128 ? 255 - p.px[i] : p.px[i]);
    memcpy(q.px, p.px, sizeof q.px);
    fn_solarize(&q.img, 255); /* 255 alone: to 0 */
    for (int i = 0; i < 256 * 3; i++)
        cr_assert_eq(q.px[i], p.px[i] == 255 ? 0 : p.px[i]);
    for (int bits = 0; bits <= 8; bits++) {
        memcpy(q.px, p.px, sizeof q.px);
        fn_posterize(&q.img, bits);
        const int mask = (0xff << (8 - bits)) & 0xff;
        for (int i = 0; i < 256 * 3; i++)
            cr_assert_eq(q.px[i], p.px[i] & mask, "bits %d", bits);
    }
    memcpy(q.px, p.px, sizeof q.px);
    fn_posterize(&q.img, 8);
    cr_assert_eq(memcmp(q.px, p.px, sizeof q.px), 0, "8 bits: the image");
}

Test(ops_color, equalize_is_pillows_stepped_histogram)
{
    static pic p;
    pic_init(&p, 16, 16);
    /* A constant image: no pixel below the top value, step 0: kept. */
    pic_fill(&p, 10, 200, 0);
    fn_equalize(&p.img);
    for (int i = 0; i < 256; i++)
        cr_assert(p.px[3 * i] == 10 && p.px[3 * i + 1] == 200 &&
                  p.px[3 * i + 2] == 0);
    /* 255 pixels of 10 and one of 200 in red: step 255 / 255 = 1, 10 maps
     * to cum[9] = 0 and 200 to cum[199] = 255. Green holds every value
     * once: step 1, v to cum[v - 1] = v, the identity. Blue: 128 pixels of
     * 0 and 128 of 255: step 128 / 255 = 0, kept. */
    for (int i = 0; i < 256; i++) {
        p.px[3 * i] = i == 77 ? 200 : 10;
        p.px[3 * i + 1] = (uint8_t)i;
        p.px[3 * i + 2] = i < 128 ? 0 : 255;
    }
    fn_equalize(&p.img);
    for (int i = 0; i < 256; i++) {
        cr_assert_eq(p.px[3 * i], i == 77 ? 255 : 0, "red of %d", i);
        cr_assert_eq(p.px[3 * i + 1], i, "green of %d", i);
        cr_assert_eq(p.px[3 * i + 2], i < 128 ? 0 : 255, "blue of %d", i);
    }
}

Test(ops_color, autocontrast_stretches_each_channel_to_the_full_range)
{
    static pic p;
    pic_init(&p, 8, 1);
    static const uint8_t red[8] = {50, 60, 70, 80, 90, 100, 55, 75};
    for (int x = 0; x < 8; x++) {
        p.px[3 * x] = red[x];
        p.px[3 * x + 1] = 33; /* a constant channel: kept */
        p.px[3 * x + 2] = x == 0 ? 0 : 255;
    }
    fn_autocontrast(&p.img);
    for (int x = 0; x < 8; x++) {
        /* (v - 50) / (50 * float(1/255)) in float32, truncated. */
        const float scale = 50.0f * (float)(1.0 / 255);
        const int want = (int)((float)(red[x] - 50) / scale);
        cr_assert_eq(at(&p, x, 0, 0), want, "red %d", red[x]);
        cr_assert_eq(at(&p, x, 0, 1), 33);
        cr_assert_eq(at(&p, x, 0, 2), x == 0 ? 0 : 255);
    }
    /* As torchvision (its output for these values): float(1/255) is
     * above 1/255, so the top lands just below 255 and truncates to 254,
     * and 30 / 50 of 255 to 152. */
    cr_assert_eq(at(&p, 0, 0, 0), 0);
    cr_assert_eq(at(&p, 5, 0, 0), 254);
    cr_assert_eq(at(&p, 3, 0, 0), 152);
    cr_assert_eq(at(&p, 7, 0, 0), 127);
}

Test(ops_color, brightness_contrast_and_saturation_at_their_known_points)
{
    static pic p, q;
    pic_init(&p, 16, 16);
    for (int i = 0; i < 256; i++) {
        p.px[3 * i] = (uint8_t)i;
        p.px[3 * i + 1] = (uint8_t)(255 - i);
        p.px[3 * i + 2] = (uint8_t)(i * 7);
    }
    q = p;
    q.img.px = q.px;
    fn_adjust_brightness(&q.img, 1.0f);
    fn_adjust_contrast(&q.img, 1.0f);
    fn_adjust_saturation(&q.img, 1.0f);
    cr_assert_eq(memcmp(q.px, p.px, sizeof q.px), 0, "factor 1: the image");
    fn_adjust_brightness(&q.img, 2.0f);
    for (int i = 0; i < 256 * 3; i++)
        cr_assert_eq(q.px[i], p.px[i] * 2 > 255 ? 255 : p.px[i] * 2);
    fn_adjust_brightness(&q.img, 0.0f);
    for (int i = 0; i < 256 * 3; i++)
        cr_assert_eq(q.px[i], 0);
    /* Saturation 0: the floored gray level in all three channels, which
     * is grayscale's (truncated) level. */
    memcpy(q.px, p.px, sizeof q.px);
    fn_adjust_saturation(&q.img, 0.0f);
    for (int i = 0; i < 256; i++) {
        const uint8_t g = (uint8_t)fn_gray_level(p.px + 3 * i);
        cr_assert(q.px[3 * i] == g && q.px[3 * i + 1] == g &&
                      q.px[3 * i + 2] == g,
                  "pixel %d", i);
    }
    /* Contrast 0: every value the mean gray level. Half black, half
     * (200, 200, 200), whose level is floor(199.98) = 199: the mean is
     * 99.5, truncated to 99. */
    for (int i = 0; i < 256; i++)
        memset(q.px + 3 * i, i < 128 ? 0 : 200, 3);
    fn_adjust_contrast(&q.img, 0.0f);
    for (int i = 0; i < 256 * 3; i++)
        cr_assert_eq(q.px[i], 99);
}

Test(ops_color, hue_turns_the_colour_wheel)
{
    static pic p;
    pic_init(&p, 4, 1);
    static const uint8_t in[4][3] = {
        {255, 0, 0}, {0, 255, 0}, {77, 77, 77}, {0, 0, 0}};
    /* Half a turn: red to cyan, green to magenta; grays stay. */
    static const uint8_t half[4][3] = {
        {0, 255, 255}, {255, 0, 255}, {77, 77, 77}, {0, 0, 0}};
    memcpy(p.px, in, sizeof in);
    fn_adjust_hue(&p.img, 0.5f);
    cr_assert_eq(memcmp(p.px, half, sizeof half), 0, "%d %d %d, %d %d %d",
                 p.px[0], p.px[1], p.px[2], p.px[3], p.px[4], p.px[5]);
    memcpy(p.px, in, sizeof in);
    fn_adjust_hue(&p.img, -0.5f);
    cr_assert_eq(memcmp(p.px, half, sizeof half), 0);
    memcpy(p.px, in, sizeof in);
    fn_adjust_hue(&p.img, 0.0f);
    cr_assert_eq(memcmp(p.px, in, sizeof in), 0, "no turn: primaries stay");
}

Test(ops_color, the_blur_keeps_flat_reflects_edges_and_allocates_once)
{
    static pic p;
    pic_init(&p, 20, 9);
    pic_fill(&p, 7, 130, 255);
    cr_assert_eq(fn_gaussian_blur(&p.img, 9, 5, 3.0f, 0.7f), 0);
    for (int i = 0; i < 20 * 9; i++)
        cr_assert(p.px[3 * i] == 7 && p.px[3 * i + 1] == 130 &&
                      p.px[3 * i + 2] == 255,
                  "flat stays flat: pixel %d", i);
    /* Kernel 1: the image. */
    for (int i = 0; i < 20 * 9 * 3; i++)
        p.px[i] = (uint8_t)(i * 31);
    uint8_t before[20 * 9 * 3];
    memcpy(before, p.px, sizeof before);
    cr_assert_eq(fn_gaussian_blur(&p.img, 1, 1, 1.0f, 1.0f), 0);
    cr_assert_eq(memcmp(before, p.px, sizeof before), 0);
    /* A ramp 0, 10, 20, ... along x: the interior keeps it (a symmetric
     * kernel), the edge reflects without repeating the edge pixel: at
     * x = 0 the neighbours are 10 and 10. Sigma 1000 makes the three
     * weights 1/3 (to 1e-7). */
    for (int y = 0; y < 9; y++)
        for (int x = 0; x < 20; x++)
            memset(p.px + ((size_t)y * 20 + x) * 3, 10 * x, 3);
    cr_assert_eq(fn_gaussian_blur(&p.img, 3, 3, 1000.0f, 1000.0f), 0);
    for (int y = 0; y < 9; y++) {
        cr_assert_eq(at(&p, 0, y, 0), 7, "(0 + 10 + 10) / 3 rounded");
        for (int x = 1; x < 19; x++)
            cr_assert_eq(at(&p, x, y, 1), 10 * x, "(%d, %d)", x, y);
        cr_assert_eq(at(&p, 19, y, 2), 183, "(180 + 190 + 180) / 3 rounded");
    }
    /* Its scratch grows once and is reused: no allocation once warm. */
    uint8_t *buf = p.scratch.buf;
    const size_t cap = p.scratch.cap;
    cr_assert_not_null(buf);
    for (int k = 0; k < 3; k++)
        cr_assert_eq(fn_gaussian_blur(&p.img, 5, 5, 1.5f, 1.5f), 0);
    cr_assert(p.scratch.buf == buf && p.scratch.cap == cap);
    /* A kernel wider than the image reflects again (a 2-pixel image). */
    p.img.w = 2;
    p.img.h = 1;
    p.img.stride = 6;
    static const uint8_t two[6] = {0, 0, 0, 90, 90, 90};
    memcpy(p.px, two, 6);
    cr_assert_eq(fn_gaussian_blur(&p.img, 7, 1, 1000.0f, 1.0f), 0);
    /* Row ... 0 90 [0 90] 0 90 ...: seven taps of alternating values
     * around each, about 3/7 or 4/7 of 90. */
    cr_assert_eq(p.px[0], 51);
    cr_assert_eq(p.px[3], 39);
    free(p.scratch.buf);
}

/* ---- the draws and the pipeline ---------------------------------- */

static void parse(const char *spec)
{
    char why[512];
    cr_assert_eq(ops_parse(&pl, spec, &u8_32, why, sizeof why), 0, "%s: %s",
                 spec, why);
}

/* Op k's describe for sample i: its text between '(' and ')'. */
static void described(int64_t i, int k, char *out, size_t cap)
{
    char all[1024];
    ops_describe(&pl, 5, 1, i, 32, 32, all, sizeof all);
    char *p = all;
    for (int j = 0; j < k; j++)
        p = strchr(p, ';') + 1;
    p = strchr(p, '(') + 1;
    const size_t n = strcspn(p, ")");
    snprintf(out, cap, "%.*s", (int)n, p);
}

Test(ops_color, jitter_draws_a_permutation_and_factors_in_their_ranges)
{
    parse("resize;color_jitter(brightness=0.5:0.9,contrast=0.2,"
          "saturation=2:3,hue=-0.3:0.1)");
    int seen[4][4] = {{0}}, orders[24] = {0};
    for (int64_t i = 0; i < 2400; i++) {
        char d[256];
        int o;
        float b, c, s, h;
        described(i, 1, d, sizeof d);
        cr_assert_eq(sscanf(d,
                            "order=%d,brightness=%f,contrast=%f,saturation=%f,"
                            "hue=%f",
                            &o, &b, &c, &s, &h),
                     5, "%s", d);
        const int dig[4] = {o / 1000, o / 100 % 10, o / 10 % 10, o % 10};
        int mask = 0, rank = 0;
        for (int k = 0; k < 4; k++) {
            mask |= 1 << dig[k];
            seen[k][dig[k]]++;
        }
        cr_assert_eq(mask, 15, "a permutation: %s", d);
        /* The permutation's lexicographic rank. */
        for (int k = 0; k < 4; k++) {
            int smaller = 0;
            for (int j = k + 1; j < 4; j++)
                smaller += dig[j] < dig[k];
            rank = rank * (4 - k) + smaller;
        }
        orders[rank]++;
        cr_assert(b >= 0.5f && b <= 0.9f && c >= 0.8f && c <= 1.2f &&
                      s >= 2.0f && s <= 3.0f && h >= -0.3f && h <= 0.1f,
                  "%s", d);
    }
    for (int r = 0; r < 24; r++)
        cr_assert(orders[r] > 50 && orders[r] < 150, "order %d: %d of 2400", r,
                  orders[r]);
    for (int k = 0; k < 4; k++)
        for (int f = 0; f < 4; f++)
            cr_assert(seen[k][f] > 500 && seen[k][f] < 700, "fn %d at %d: %d",
                      f, k, seen[k][f]);
    /* A range of one value is that value, exactly (as float32); a range
     * of the identity alone is not applied, nor described. */
    parse("resize;color_jitter(brightness=1.2:1.2,contrast=1:1,hue=0:0)");
    char d[256];
    described(3, 1, d, sizeof d);
    cr_assert(strstr(d, ",brightness=1.20000005") && !strstr(d, "contrast") &&
                  !strstr(d, "saturation") && !strstr(d, "hue"),
              "%s", d);
    /* Blur: sigma in its range, or the value. */
    parse("resize;gaussian_blur(3,sigma=0.5:1.5);gaussian_blur(3,sigma=0.7)");
    for (int64_t i = 0; i < 200; i++) {
        float s0, s1;
        described(i, 1, d, sizeof d);
        cr_assert_eq(sscanf(d, "sigma=%f", &s0), 1, "%s", d);
        described(i, 2, d, sizeof d);
        cr_assert_eq(sscanf(d, "sigma=%f", &s1), 1, "%s", d);
        cr_assert(s0 >= 0.5f && s0 <= 1.5f, "%g", s0);
        cr_assert_eq(s1, 0.7f);
    }
}

Test(ops_color, the_pipeline_applies_the_functions_as_drawn)
{
    parse("resize;color_jitter(0.4,0.4,0.4,0.1);gaussian_blur(5,sigma=0.5:2);"
          "solarize(140,p=0.5);posterize(3,p=0.5);equalize(p=0.5);"
          "autocontrast(p=0.5)");
    static pic p, q;
    int applied[4] = {0};
    for (int64_t i = 0; i < 40; i++) {
        pic_init(&p, 32, 32);
        pic_init(&q, 32, 32);
        tu_pattern(p.px, 32, 32, (unsigned)i);
        memcpy(q.px, p.px, sizeof q.px);
        cr_assert_eq(ops_pixels(&pl, 5, 1, i, &p.img), 0);
        /* The same by hand, from what describe says was drawn. */
        char d[256];
        int o, on;
        float f[4] = {0}, sigma;
        described(i, 1, d, sizeof d);
        cr_assert_eq(sscanf(d,
                            "order=%d,brightness=%f,contrast=%f,"
                            "saturation=%f,hue=%f",
                            &o, &f[0], &f[1], &f[2], &f[3]),
                     5, "%s", d);
        for (int k = 0; k < 4; k++) {
            const int fn = (int)(o / (int)pow(10, 3 - k)) % 10;
            if (fn == 0)
                fn_adjust_brightness(&q.img, f[0]);
            else if (fn == 1)
                fn_adjust_contrast(&q.img, f[1]);
            else if (fn == 2)
                fn_adjust_saturation(&q.img, f[2]);
            else
                fn_adjust_hue(&q.img, f[3]);
        }
        described(i, 2, d, sizeof d);
        cr_assert_eq(sscanf(d, "sigma=%f", &sigma), 1);
        cr_assert_eq(fn_gaussian_blur(&q.img, 5, 5, sigma, sigma), 0);
        for (int k = 3; k < 7; k++) {
            described(i, k, d, sizeof d);
            cr_assert_eq(sscanf(d, "apply=%d", &on), 1, "%s", d);
            applied[k - 3] += on;
            if (!on)
                continue;
            if (k == 3)
                fn_solarize(&q.img, 140);
            else if (k == 4)
                fn_posterize(&q.img, 3);
            else if (k == 5)
                fn_equalize(&q.img);
            else
                fn_autocontrast(&q.img);
        }
        cr_assert_eq(memcmp(p.px, q.px, 32 * 32 * 3), 0, "sample %lld",
                     (long long)i);
        free(p.scratch.buf);
        free(q.scratch.buf);
    }
    for (int k = 0; k < 4; k++)
        cr_assert(applied[k] > 8 && applied[k] < 32, "op %d: %d of 40", k + 3,
                  applied[k]);
}

Test(ops_color, a_p_applies_jitter_and_blur_with_randomapplys_coin)
{
    /* Written out with p; without one, nothing more is drawn (the
     * describe and the bytes are those of the op without p). */
    parses_to("resize;color_jitter(0.4,0.4,0.4,0.1,p=0.8);"
              "gaussian_blur(3,p=0.3)",
              "resize(size=32x32,interpolation=bilinear,antialias=true);"
              "color_jitter(brightness=0.6:1.4,contrast=0.6:1.4,"
              "saturation=0.6:1.4,hue=-0.1:0.1,p=0.8);"
              "gaussian_blur(kernel_size=3,sigma=0.1:2,p=0.3)");
    static pic p, q;
    int jitter = 0, blur = 0;
    const int N = 3000;
    for (int64_t i = 0; i < N; i++) {
        char d[512];
        ops_describe(&pl, 3, 1, i, 32, 32, d, sizeof d);
        const int j = strstr(d, "color_jitter(apply=1,order=") != NULL;
        const int b = strstr(d, "gaussian_blur(apply=1,sigma=") != NULL;
        cr_assert(j || strstr(d, "color_jitter(apply=0)"), "%s", d);
        cr_assert(b || strstr(d, "gaussian_blur(apply=0)"), "%s", d);
        jitter += j;
        blur += b;
        if (!j && !b && i < 200) { /* neither: the image as it was */
            pic_init(&p, 32, 32);
            for (int k = 0; k < 32 * 32 * 3; k++)
                p.px[k] = (uint8_t)(k * 7 + i);
            q = p;
            q.img.px = q.px;
            q.img.scratch = &q.scratch;
            cr_assert_eq(ops_pixels(&pl, 3, 1, i, &q.img), 0);
            cr_assert_eq(memcmp(p.px, q.px, sizeof p.px), 0);
        }
    }
    cr_assert(fabs(jitter - 0.8 * N) < 4.5 * sqrt(N * 0.16), "%d", jitter);
    cr_assert(fabs(blur - 0.3 * N) < 4.5 * sqrt(N * 0.21), "%d", blur);
    /* Without p: the draws of before (no coin). */
    char with[512], without[512];
    parses_to("resize;color_jitter(0.4,0.4,0.4,0.1,p=1)",
              "resize(size=32x32,interpolation=bilinear,antialias=true);"
              "color_jitter(brightness=0.6:1.4,contrast=0.6:1.4,"
              "saturation=0.6:1.4,hue=-0.1:0.1,p=1)");
    ops_describe(&pl, 3, 1, 5, 32, 32, with, sizeof with);
    parses_to("resize;color_jitter(0.4,0.4,0.4,0.1)",
              "resize(size=32x32,interpolation=bilinear,antialias=true);"
              "color_jitter(brightness=0.6:1.4,contrast=0.6:1.4,"
              "saturation=0.6:1.4,hue=-0.1:0.1)");
    ops_describe(&pl, 3, 1, 5, 32, 32, without, sizeof without);
    cr_assert(strstr(with, "apply=1,order="), "%s", with);
    cr_assert(strstr(without, "color_jitter(order="), "%s", without);
    free(q.scratch.buf);
}
