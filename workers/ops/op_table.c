/* The op table: every kind of augmentation op, one row each (op.h says how
 * to add one), and the few helpers the rows share. */
#include "op.h"

#include "../../common/grow.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* One line per kind, in the order docs/transforms.md lists them. */
#define OP_KINDS(XX)                                                           \
    XX(random_resized_crop)                                                    \
    XX(resize)                                                                 \
    XX(center_crop)                                                            \
    XX(hflip)                                                                  \
    XX(vflip)                                                                  \
    XX(grayscale)                                                              \
    XX(color_jitter)                                                           \
    XX(gaussian_blur)                                                          \
    XX(solarize)                                                               \
    XX(posterize)                                                              \
    XX(equalize)                                                               \
    XX(autocontrast)                                                           \
    XX(rotate)                                                                 \
    XX(affine)                                                                 \
    XX(rand_augment)                                                           \
    XX(trivial_augment_wide)                                                   \
    XX(auto_augment)                                                           \
    XX(normalize)                                                              \
    XX(random_erasing)                                                         \
    XX(mixup)

#define OP_DECLARE_(n) extern const op_kind op_##n;
OP_KINDS(OP_DECLARE_)
#undef OP_DECLARE_

const op_kind *const op_kinds[] = {
#define OP_ROW_(n) &op_##n,
    OP_KINDS(OP_ROW_)
#undef OP_ROW_
        NULL,
};

const char *const op_interp_words[] = {
#define OP_INTERP_WORD_(name, value, word) word,
    OP_INTERP_MAP(OP_INTERP_WORD_)
#undef OP_INTERP_WORD_
        NULL,
};

static int same(const char *word, const char *name, size_t len)
{
    return word && strlen(word) == len && memcmp(word, name, len) == 0;
}

const op_kind *op_kind_find(const char *name, size_t len)
{
    for (int i = 0; op_kinds[i]; i++)
        if (same(op_kinds[i]->name, name, len) ||
            same(op_kinds[i]->alias, name, len))
            return op_kinds[i];
    return NULL;
}

const uint8_t *op_image_copy(op_image *img)
{
    const size_t row = (size_t)img->w * 3;
    op_scratch *s = img->scratch;
    if (grow_scratch(&s->buf, &s->cap, row * (size_t)img->h, 1, 0) < 0)
        return NULL;
    for (int y = 0; y < img->h; y++)
        memcpy(s->buf + (size_t)y * row, img->px + (size_t)y * img->stride,
               row);
    return s->buf;
}

int op_round(double x)
{
    return (int)rint(x);
}

void op_size(const op_value *v, int *w, int *h)
{
    *w = (int)v->v[0];
    *h = v->n == 2 ? (int)v->v[1] : *w;
}

void op_size_default(op_value *v, const op_setup *s)
{
    if (v->n)
        return;
    v->n = 2;
    v->v[0] = s->out_w;
    v->v[1] = s->out_h;
}

void op_coin_draw(const op_instance *op, philox_stream *rng, int w, int h,
                  void *drawn)
{
    (void)w;
    (void)h;
    const double p = op->arg[op->kind->nparams - 1].v[0];
    ((op_coin *)drawn)->apply = philox_next_double(rng) < p;
}

int op_apply_coin(const op_instance *op, int param, philox_stream *rng)
{
    const op_value *p = &op->arg[param];
    return !p->n || philox_next_double(rng) < p->v[0];
}

int op_coin_describe(const op_instance *op, const void *drawn, char *buf,
                     size_t cap)
{
    (void)op;
    return snprintf(buf, cap, "apply=%d", (int)((const op_coin *)drawn)->apply);
}
