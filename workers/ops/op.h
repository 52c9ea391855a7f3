/* One kind of augmentation op: a row of the op table (op_table.c), and
 * what a row's functions are handed. Every op of a pipeline (ops.h) is an
 * op_instance of a kind: its parameters as parsed from the spec
 * (pl_config.transform, docs/transforms.md) and what its setup derived.
 *
 * Stages, in the order a pipeline must list them (the parser refuses
 * another order, naming the op):
 *
 *   OP_STAGE_GEOMETRY   crops, resizes and flips, fused into the decode:
 *                       each draws its parameters for the image as the ops
 *                       before it left it, then folds itself into an
 *                       op_geometry (geometry.c), which becomes the
 *                       worker's augment_plan: decode the region at a DCT
 *                       scale, resample once, flip. At most one op of a
 *                       pipeline resamples (op_shape.resamples).
 *   OP_STAGE_PIXELS     on the out_w x out_h uint8 RGB image (op_image),
 *                       in place: colour, blur, rotate, ...
 *   OP_STAGE_NORMALIZE  uint8 to float: the one normalize op, which sets
 *                       the table (mean, std) every float format is
 *                       written through; it runs no code per sample.
 *   OP_STAGE_TENSOR     on the written float sample (op_tensor), as timm
 *                       runs random erasing after normalising. A pipeline
 *                       with one makes the host normalise (no
 *                       gpu_normalize).
 *   OP_STAGE_BATCH      on a whole delivered batch (op_batch: every
 *                       sample, the labels, soft labels written), as timm
 *                       runs mixup and cutmix: at most one, last; drawn
 *                       per batch (philox keyed by seed, epoch, the
 *                       batch's number and the rank), not per sample.
 *
 * Randomness: op k of a pipeline draws from its own Philox stream,
 * philox_stream_op(seed, epoch, index, k) (common/philox.h), never a shared
 * one: no op's draws depend on how many numbers another drew (a crop's
 * retries), changing one op's parameters leaves the others' draws as they
 * were (an op's stream is its place k: an op inserted before it moves it),
 * and the bytes depend on (seed, epoch, dataset index) alone, not on
 * workers, prefetch or resume. (The presets train, eval and none
 * keep the draws of the pinload before pipelines: see ops_preset.)
 *
 * How to add an op:
 *   1. A file workers/ops/NAME.c with its parameter table (op_param: name,
 *      type, default as spec text, bounds, one line of doc) and one
 *      `const op_kind op_NAME = {...}`: its stage, setup (defaults from
 *      the config, checks across parameters, derived numbers into aux),
 *      draw (from the rng it is handed, and nothing else), apply (stage
 *      PIXELS: op_image in place; TENSOR: apply_tensor) or geometry and
 *      shape (stage GEOMETRY), and describe (the drawn values as
 *      "key=value,...": pl_transform_params and the reference tests read
 *      them). grayscale.c is the model of a pixel op, flip.c of a
 *      geometric one.
 *   2. One line in OP_KINDS (op_table.c); its file in the Makefile's
 *      OPS_SRC.
 *   3. Its entry in docs/transforms.md (parameters, the torchvision call
 *      it matches, the pixel bound measured), a test of its parameters in
 *      tests/unit/workers/test_ops_spec.c and a reference test against
 *      torchvision in python/tests/test_transforms_ref.py.
 * Ops include common/ and this room only (tools/deps-check.sh): they see
 * pixels, never a decoder, a file or the pool.
 *
 * Thread safety: kinds are constant; an op_instance is written by the
 * parser at create and only read after, by every worker at once; draw,
 * apply and describe write only what they are handed. */
#ifndef PINLOAD_OP_H
#define PINLOAD_OP_H

#include <stddef.h>
#include <stdint.h>

#include "../../common/philox.h"
#include "../../common/blend.h"
#include "pinload.h"

#define OP_PARAMS_MAX 8  /* parameters of one kind */
#define OP_DRAWN_MAX 128 /* bytes of one op's drawn parameters */
#define OP_AUX_MAX 8     /* numbers one op's setup derives */
#define OP_NAME_MAX 32   /* an op's name as written */

typedef enum op_stage {
    OP_STAGE_GEOMETRY = 0,
    OP_STAGE_PIXELS = 1,
    OP_STAGE_NORMALIZE = 2,
    OP_STAGE_TENSOR = 3,
    OP_STAGE_BATCH = 4,
} op_stage;

/* Resampling filters, listed once: the word a spec writes
 * ("interpolation=bicubic"), and the filter the resampler
 * (workers/resample.c) builds. torchvision.transforms.v2's
 * InterpolationMode of the same name, except area: F.interpolate's
 * mode="area" (adaptive average pooling). */
#define OP_INTERP_MAP(XX)                                                      \
    XX(BILINEAR, 0, "bilinear")                                                \
    XX(NEAREST, 1, "nearest")                                                  \
    XX(NEAREST_EXACT, 2, "nearest_exact")                                      \
    XX(BICUBIC, 3, "bicubic")                                                  \
    XX(AREA, 4, "area")

typedef enum op_interp {
#define OP_INTERP_ENUM_(name, value, word) OP_INTERP_##name = value,
    OP_INTERP_MAP(OP_INTERP_ENUM_)
#undef OP_INTERP_ENUM_
} op_interp;

/* The words of OP_INTERP_MAP, in value order, NULL-terminated. */
extern const char *const op_interp_words[];

/* What a parameter's value is, as written in a spec.
 *
 * OP_NUMBER  x (a decimal number, or a fraction a/b: "4/3")
 * OP_RANGE   a:b with a <= b, or a alone for a:a (scale=0.08:1)
 * OP_TRIPLE  a:b:c, one per channel, or a alone for a:a:a (mean); with
 *            `words`, one of them instead (value=random)
 * OP_PAIR    a:b, two numbers in either order, or a alone for a:a
 *            (translate's x and y, a centre's)
 * OP_SIZE    S, or WxH (224, 320x240); S alone means what the op says
 *            (resize: the shorter side; a crop: S x S)
 * OP_WORD    one of `words` (interpolation=bicubic)
 * OP_BOOL    true, false, 1 or 0 */
typedef enum op_type {
    OP_NUMBER,
    OP_RANGE,
    OP_TRIPLE,
    OP_PAIR,
    OP_SIZE,
    OP_WORD,
    OP_BOOL,
} op_type;

/* One row of a kind's parameter table: the parser's and the docs'. */
typedef struct op_param {
    const char *name;
    op_type type;
    /* The default, as a spec would write it ("0.08:1"); NULL: none here
     * (the op's setup supplies it from the config, or it stays unset:
     * the doc says which). */
    const char *def;
    double lo, hi; /* every number of the value lies in [lo, hi] ... */
    int open_lo;   /* ... or (lo, hi] when set */
    /* OP_WORD: NULL-terminated; OP_TRIPLE: NULL, or the words it takes
     * in place of numbers */
    const char *const *words;
    const char *doc; /* one line, for docs/transforms.md */
} op_param;

/* A parsed value. OP_NUMBER: v[0]; OP_RANGE: v[0] <= v[1]; OP_TRIPLE:
 * v[0..2]; OP_PAIR: v[0], v[1]; OP_SIZE: n == 1: v[0] (S); n == 2: v[0] x
 * v[1] (W x H); OP_WORD: v[0] is the word's index; OP_BOOL: v[0] is 0 or
 * 1. */
typedef struct op_value {
    double v[3];
    int n; /* how many numbers were written; 0: not given, no default */
    /* An OP_TRIPLE's word: 1 + its index in the param's words (v[] zero,
     * n 1); 0: numbers. */
    int word;
} op_value;

/* What an op's setup knows of the loader it is made for. */
typedef struct op_setup {
    int out_w, out_h;      /* config.width, config.height */
    pl_format format;      /* the delivered format */
    float mean[3], std[3]; /* the config's */
} op_setup;

struct op_kind;

/* One op of a pipeline. */
typedef struct op_instance {
    const struct op_kind *kind;
    int index; /* its place in the pipeline: its Philox stream */
    char written[OP_NAME_MAX];   /* its name as the spec wrote it ("rrc") */
    op_value arg[OP_PARAMS_MAX]; /* in the kind's table order */
    double aux[OP_AUX_MAX];      /* what setup derived */
} op_instance;

/* What a stage-GEOMETRY op does to the shape, known before any image is
 * seen: the parser checks from it that the pipeline ends at config.width x
 * config.height and resamples at most once. */
typedef struct op_shape {
    int w, h;       /* the image's size now; 0 x 0: not known before the image
                       (its own size, or a shorter side resized) */
    int short_side; /* when w x h is not known: the shorter side, or 0 */
    int resamples;  /* resampling ops so far */
} op_shape;

/* The geometric prefix folded into one plan, in the coordinates of the
 * decoded image (full scale): the source rectangle (which may reach past
 * the image, where the pixels are zero, as torchvision pads a crop larger
 * than the image), scaled to rs_w x rs_h by the one resampling op (rs ==
 * src when there is none), then the window (win_*) of that which is the
 * image now (which may reach past it too: zeros), mirrored as hflip and
 * vflip say. geometry.c composes it; crops on a flipped image are mirrored
 * into it. */
typedef struct op_geometry {
    int img_w, img_h;
    int src_x, src_y, src_w, src_h;
    int resized;
    int rs_w, rs_h;
    int win_x, win_y, win_w, win_h;
    int hflip, vflip;
    int interp;    /* an op_interp, when resized */
    int antialias; /* 1: the filter widens when shrinking */
} op_geometry;

void op_geometry_init(op_geometry *g, int img_w, int img_h);
/* The size of the image as the ops so far left it. */
void op_geometry_size(const op_geometry *g, int *w, int *h);
/* Cut the w x h rectangle at (left, top) out of the image as it is now
 * (any part of it past the image: zeros). */
void op_geometry_crop(op_geometry *g, int top, int left, int h, int w);
/* Resample the image as it is now to w x h (once a pipeline). */
void op_geometry_resize(op_geometry *g, int w, int h, int interp,
                        int antialias);
/* Mirror it left-right (horizontal) or top-bottom. */
void op_geometry_flip(op_geometry *g, int horizontal);

/* torchvision's Resize(S) of a w x h image: the shorter side to S, the
 * longer int(S * long / short), and with max_size > 0 the longer at most
 * max_size (the shorter then scaled alike). [out] *nw, *nh. */
void op_resize_shorter(int w, int h, int s, int max_size, int *nw, int *nh);

/* A worker's scratch memory for ops that need some (a blur's rows, a
 * rotation's copy): grown as needed (common/grow.h), never freed per
 * sample. */
typedef struct op_scratch {
    uint8_t *buf;
    size_t cap;
} op_scratch;

/* The uint8 RGB image a stage-PIXELS op works on, in place: h rows of w
 * pixels, `stride` bytes apart. */
typedef struct op_image {
    uint8_t *px;
    int w, h;
    size_t stride;
    op_scratch *scratch;
} op_image;

/* A packed copy of img's pixels (rows of w * 3 bytes) in its scratch, for
 * an op that reads the image as it was while it writes it (a warp,
 * sharpness, a quarter turn). NULL: the scratch could not grow
 * (PL_ENOMEM; img unchanged). */
const uint8_t *op_image_copy(op_image *img);

/* The written float sample a stage-TENSOR op works on, in place: format
 * F32, F16 or BF16 (the latter two as bit patterns), NCHW planes or
 * interleaved (channels_last), with the table it was normalised by (0 in
 * each channel is lut[c][0]: what a padded or erased pixel holds). */
typedef struct op_tensor {
    void *data;
    pl_format format;
    int w, h;
    int channels_last;
    const float (*lut)[256];
    op_scratch *scratch;
} op_tensor;

/* The delivered batch a stage-BATCH op works on, in place: count samples
 * of w x h in a float format (F32, F16 or BF16 bit patterns; NCHW planes
 * or interleaved), sample_bytes apart; their labels, and the soft labels
 * it writes, [count][num_classes] float32. */
typedef struct op_batch {
    void *data;
    pl_format format;
    int count, w, h;
    int channels_last;
    size_t sample_bytes;
    const int32_t *labels;
    float *soft;
    int num_classes;
    /* 1: the pixels are mixed elsewhere (the GPU's kernel, from `mix`);
     * data is not read, only the soft labels are written here. */
    int pixels_elsewhere;
    /* [out] whether the batch's pixels are mixed, and how (common/blend.h;
     * for that kernel). */
    int mixed;
    blend_batch mix;
} op_batch;

/* A row of the op table. */
typedef struct op_kind {
    const char *name;  /* "random_resized_crop" */
    const char *alias; /* "rrc", or NULL */
    op_stage stage;
    const char *doc; /* one line: what it does, the torchvision call */
    const op_param *params;
    int nparams;
    size_t drawn_size; /* <= OP_DRAWN_MAX */
    /* After parsing: fill unset parameters from the config, check them
     * together, derive aux. 0, or PL_EINVAL with `why` (the parser names
     * the op before it). NULL: nothing to do. */
    int (*setup)(op_instance *op, const op_setup *s, char *why, size_t cap);
    /* Stage GEOMETRY: what it does to the shape (op_shape). */
    void (*shape)(const op_instance *op, op_shape *s);
    /* Its random parameters for one sample, from rng alone, for an image
     * of w x h pixels (as the ops before it left it), into drawn. NULL:
     * none (drawn stays zeroed). */
    void (*draw)(const op_instance *op, philox_stream *rng, int w, int h,
                 void *drawn);
    /* Stage GEOMETRY: fold itself into g. */
    void (*geometry)(const op_instance *op, const void *drawn, op_geometry *g);
    /* Stage PIXELS: change img in place. 0, or PL_ENOMEM (scratch). */
    int (*apply)(const op_instance *op, const void *drawn, op_image *img);
    /* Stage TENSOR: change t in place. 0, or PL_ENOMEM. */
    int (*apply_tensor)(const op_instance *op, const void *drawn, op_tensor *t);
    /* Stage BATCH: change b in place and write its soft labels (drawn for
     * an image of the output's size, from the batch's stream). */
    void (*apply_batch)(const op_instance *op, const void *drawn, op_batch *b);
    /* The drawn values as "key=value,..." (snprintf's return). */
    int (*describe)(const op_instance *op, const void *drawn, char *buf,
                    size_t cap);
} op_kind;

/* The table: every kind, NULL-terminated (op_table.c). */
extern const op_kind *const op_kinds[];

/* The kind named `name` (its name or alias), or NULL. */
const op_kind *op_kind_find(const char *name, size_t len);

/* An OP_SIZE value as w x h: S x S, or W x H. */
void op_size(const op_value *v, int *w, int *h);

/* Unset, it becomes s's output size, W x H. */
void op_size_default(op_value *v, const op_setup *s);

/* The draw and describe of an op applied with a probability, its last
 * parameter p, as torchvision's random transforms decide (torch.rand(1) <
 * p): drawn an op_coin, described "apply=0" or "apply=1" (grayscale,
 * solarize, posterize, equalize, autocontrast). */
typedef struct op_coin {
    int32_t apply;
} op_coin;
void op_coin_draw(const op_instance *op, philox_stream *rng, int w, int h,
                  void *drawn);
int op_coin_describe(const op_instance *op, const void *drawn, char *buf,
                     size_t cap);

/* RandomApply's coin for an op whose parameter `param` is an optional p
 * (not given: 1, and nothing drawn, so the op's draws stay what they were
 * without it): 1 to apply. */
int op_apply_coin(const op_instance *op, int param, philox_stream *rng);

/* Python's round(): halves to the even neighbour, as torchvision's crop
 * arithmetic rounds (rint in the default rounding mode). */
int op_round(double x);

#endif
