/* Every image is decoded from a state that carries nothing from the image
 * before: a worker's decoder and its resize scratch give each file exactly
 * what a fresh decoder gives it alone. libjpeg keeps quantisation and
 * Huffman tables from one image to the next (a JPEG stream may rely on
 * tables an earlier one defined), so a reused decompressor decoded a file
 * without DHT with the previous file's tables (noise, marked good) and a
 * file without DQT at all. The fixtures are tests/jpegquirks.h's: each
 * leans on one thing a decompressor could keep, and every ordered pair is
 * decoded, through the decoder itself and through a worker's whole path
 * (crop, resize, every output format). */
#include "../workers/decode.h"
#include "../workers/sample.h"
#include "jpegquirks.h"
#include "testutil.h"

#define W 61 /* odd sizes: partial MCUs on both axes */
#define H 45

/* What one decode gave: status, reason, warnings, size and pixels. */
typedef struct outcome {
    int rc, warnings, w, h;
    char reason[SAMPLE_REASON_MAX];
    uint8_t *px;
    size_t n;
} outcome;

static void outcome_free(outcome *o)
{
    free(o->px);
    memset(o, 0, sizeof *o);
}

typedef struct fixtures {
    uint8_t *bytes[JQ_KINDS];
    size_t len[JQ_KINDS];
} fixtures;

static void fixtures_make(fixtures *f)
{
    uint8_t rgb[W * H * 3];
    for (int k = 0; k < JQ_KINDS; k++) {
        tu_pattern(rgb, W, H, (unsigned)k * 3 + 1);
        f->bytes[k] = jq_make((jq_kind)k, rgb, W, H, &f->len[k]);
    }
}

static void fixtures_free(fixtures *f)
{
    for (int k = 0; k < JQ_KINDS; k++)
        free(f->bytes[k]);
}

/* The whole image at full scale through the decoder's own calls. */
static void decode_whole(decoder *d, const uint8_t *b, size_t len, outcome *o)
{
    memset(o, 0, sizeof *o);
    decode_info info;
    o->rc = decoder_open(d, b, len, &info, o->reason);
    if (o->rc == 0)
        o->rc = decoder_start(d, 1, 0, info.width, o->reason);
    if (o->rc == 0) {
        o->w = info.width;
        o->h = info.height;
        o->n = (size_t)o->w * o->h * 3;
        o->px = malloc(o->n);
        o->rc = decoder_read_into(d, o->px, (size_t)o->w * 3, o->h, o->reason);
    }
    o->warnings = decoder_warnings(d, NULL);
    decoder_close(d);
}

/* A worker's path: sample `index` of epoch 3, train augmentation. */
static void process_one(sample_ctx *c, pl_format fmt, int64_t index,
                        const uint8_t *b, size_t len, outcome *o)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f};
    static const float sd[3] = {0.229f, 0.224f, 0.225f};
    augment_params p;
    augment_params_init(&p, PL_AUGMENT_TRAIN, fmt, 23, 17, 11, mean, sd);
    memset(o, 0, sizeof *o);
    o->n = augment_sample_bytes(&p);
    o->px = malloc(o->n);
    memset(o->px, 0x5A, o->n);
    sample_times t = {0};
    o->rc =
        sample_produce_buffer(c, &p, b, len, 3, index, o->px, &t, o->reason);
    o->warnings = c->warnings;
}

static decoder *new_decoder(void)
{
    decode_limits lim;
    decode_limits_default(&lim);
    decoder *d;
    cr_assert_eq(decoder_create(&d, &lim), 0);
    return d;
}

static int same(const outcome *a, const outcome *b)
{
    return a->rc == b->rc && a->warnings == b->warnings && a->w == b->w &&
           a->h == b->h && a->n == b->n && strcmp(a->reason, b->reason) == 0 &&
           (a->n == 0 || memcmp(a->px, b->px, a->n) == 0);
}

/* The fixtures are what they claim to be, decoded alone: the streams
 * missing a table that libjpeg cannot supply fail, the ones missing what
 * has a default decode exactly as the complete file does. */
Test(decode_state, each_fixture_alone_decodes_as_its_kind_says)
{
    fixtures f;
    fixtures_make(&f);
    decoder *d = new_decoder();
    for (int k = 0; k < JQ_KINDS; k++) {
        decoder *fresh = new_decoder();
        outcome o;
        decode_whole(fresh, f.bytes[k], f.len[k], &o);
        decoder_destroy(fresh);
        switch ((jq_kind)k) {
        case JQ_NO_DQT:
        case JQ_ABBREVIATED:
            cr_assert_eq(o.rc, PL_ECORRUPT, "%s: %d", jq_name(k), o.rc);
            cr_assert(strstr(o.reason, "Quantization table") != NULL, "%s",
                      o.reason);
            break;
        case JQ_TABLES_ONLY:
            cr_assert_eq(o.rc, PL_ECORRUPT, "%d", o.rc);
            cr_assert(strstr(o.reason, "no image") != NULL, "%s", o.reason);
            break;
        case JQ_NOT_JPEG:
            cr_assert_eq(o.rc, PL_ENOTIMAGE);
            break;
        case JQ_TRUNCATED:
            cr_assert_eq(o.rc, 0, "%s", o.reason);
            cr_assert_gt(o.warnings, 0);
            break;
        default:
            cr_assert_eq(o.rc, 0, "%s: %s", jq_name(k), o.reason);
            cr_assert_eq(o.warnings, 0, "%s", jq_name(k));
            cr_assert_eq(o.w, W);
            cr_assert_eq(o.h, H);
        }
        outcome_free(&o);
    }
    /* What a stripped marker leaves to its default gives the bytes of the
     * file that spelled the default out. */
    static const struct {
        jq_kind k;
        jpegenc_opts o;
    } full[] = {
        {JQ_NO_DHT, {.quality = 90}},
        {JQ_ARITH_NO_DAC, {.quality = 90, .arith = 1}},
        {JQ_YCC_NO_JFIF, {.quality = 90}},
    };
    for (size_t i = 0; i < sizeof full / sizeof full[0]; i++) {
        uint8_t rgb[W * H * 3];
        tu_pattern(rgb, W, H, (unsigned)full[i].k * 3 + 1);
        unsigned char *enc = NULL;
        unsigned long n = 0;
        jpegenc(rgb, W, H, &full[i].o, NULL, &enc, &n);
        outcome a, b;
        decode_whole(d, enc, n, &a);
        decode_whole(d, f.bytes[full[i].k], f.len[full[i].k], &b);
        cr_assert_lt(f.len[full[i].k], n, "%s: nothing was removed",
                     jq_name(full[i].k));
        cr_assert(same(&a, &b), "%s differs from the complete file",
                  jq_name(full[i].k));
        outcome_free(&a);
        outcome_free(&b);
        free(enc);
    }
    decoder_destroy(d);
    fixtures_free(&f);
}

/* Appends "a>b " to the list of pairs that came out wrong. */
static void note_pair(char *list, size_t cap, int a, int b)
{
    const size_t n = strlen(list);
    snprintf(list + n, cap - n, "%s>%s ", jq_name(a), jq_name(b));
}

/* Every ordered pair (a, b), a == b included: b decoded right after a on
 * one decoder is b decoded alone. */
Test(decode_state, every_file_decodes_as_alone_after_every_other)
{
    fixtures f;
    fixtures_make(&f);
    outcome alone[JQ_KINDS];
    for (int b = 0; b < JQ_KINDS; b++) {
        decoder *fresh = new_decoder();
        decode_whole(fresh, f.bytes[b], f.len[b], &alone[b]);
        decoder_destroy(fresh);
    }
    decoder *d = new_decoder();
    char wrong[4096] = "";
    int nwrong = 0;
    for (int a = 0; a < JQ_KINDS; a++)
        for (int b = 0; b < JQ_KINDS; b++) {
            outcome first, second;
            decode_whole(d, f.bytes[a], f.len[a], &first);
            decode_whole(d, f.bytes[b], f.len[b], &second);
            if (!same(&second, &alone[b])) {
                nwrong++;
                note_pair(wrong, sizeof wrong, a, b);
            }
            outcome_free(&first);
            outcome_free(&second);
        }
    cr_assert_eq(nwrong, 0, "%d pairs differ from the file alone: %s", nwrong,
                 wrong);
    decoder_destroy(d);
    for (int b = 0; b < JQ_KINDS; b++)
        outcome_free(&alone[b]);
    fixtures_free(&f);
}

/* The same through a worker's whole path, whose scratch (file, decoded
 * rows, filtered row, output row) is reused from sample to sample: the
 * pairs differ in crop and size, so anything read from the previous
 * sample's leftovers would show. */
static void check_worker_pairs(pl_format fmt)
{
    fixtures f;
    fixtures_make(&f);
    decode_limits lim;
    decode_limits_default(&lim);
    outcome alone[JQ_KINDS];
    for (int b = 0; b < JQ_KINDS; b++) {
        sample_ctx fresh;
        cr_assert_eq(sample_init(&fresh, &lim), 0);
        process_one(&fresh, fmt, 100 + b, f.bytes[b], f.len[b], &alone[b]);
        sample_fini(&fresh);
    }
    sample_ctx c;
    cr_assert_eq(sample_init(&c, &lim), 0);
    char wrong[4096] = "";
    int nwrong = 0;
    for (int a = 0; a < JQ_KINDS; a++)
        for (int b = 0; b < JQ_KINDS; b++) {
            outcome first, second;
            process_one(&c, fmt, a, f.bytes[a], f.len[a], &first);
            process_one(&c, fmt, 100 + b, f.bytes[b], f.len[b], &second);
            if (!same(&second, &alone[b])) {
                nwrong++;
                note_pair(wrong, sizeof wrong, a, b);
            }
            outcome_free(&first);
            outcome_free(&second);
        }
    cr_assert_eq(nwrong, 0, "format %d: %d pairs differ from alone: %s", fmt,
                 nwrong, wrong);
    sample_fini(&c);
    for (int b = 0; b < JQ_KINDS; b++)
        outcome_free(&alone[b]);
    fixtures_free(&f);
}

Test(decode_state, a_workers_u8_sample_is_its_file_alone_after_every_other)
{
    check_worker_pairs(PL_FORMAT_U8_NHWC);
}

Test(decode_state, a_workers_f32_sample_is_its_file_alone_after_every_other)
{
    check_worker_pairs(PL_FORMAT_F32_NCHW);
}

Test(decode_state, a_workers_f16_sample_is_its_file_alone_after_every_other)
{
    check_worker_pairs(PL_FORMAT_F16_NCHW);
}
