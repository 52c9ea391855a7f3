/* Running a pipeline on one sample: each op's draw from its own stream
 * (or, for the presets, op 0's shared in turn), then its stage's work. */
#include <stdio.h>
#include <string.h>

#include "ops.h"

/* The stream op k draws from: its own, or for a preset's geometric ops
 * op 0's, `shared`, which the caller set up, each drawing after the one
 * before it. */
static philox_stream *stream_of(const ops_pipeline *p, int k, uint64_t seed,
                                int64_t epoch, int64_t index,
                                philox_stream *own, philox_stream *shared)
{
    if (p->shared_stream && k < p->ngeometry)
        return shared;
    philox_stream_op(own, seed, (uint64_t)epoch, (uint64_t)index, (unsigned)k);
    return own;
}

/* Drawn parameters, aligned for any of the ops' structs. */
typedef union drawn_buf {
    unsigned char bytes[OP_DRAWN_MAX];
    int64_t align_i;
    double align_d;
} drawn_buf;

/* The geometric ops, each described into *out when it is given. */
static void geometry(const ops_pipeline *p, uint64_t seed, int64_t epoch,
                     int64_t index, int img_w, int img_h, op_geometry *g,
                     philox_stream *shared, drawn_buf *drawn)
{
    op_geometry_init(g, img_w, img_h);
    for (int k = 0; k < p->ngeometry; k++) {
        const op_instance *op = &p->op[k];
        philox_stream own;
        memset(&drawn[k], 0, sizeof drawn[k]);
        if (op->kind->draw) {
            int w, h;
            op_geometry_size(g, &w, &h);
            op->kind->draw(op,
                           stream_of(p, k, seed, epoch, index, &own, shared), w,
                           h, drawn[k].bytes);
        }
        op->kind->geometry(op, drawn[k].bytes, g);
    }
}

void ops_geometry(const ops_pipeline *p, uint64_t seed, int64_t epoch,
                  int64_t index, int img_w, int img_h, op_geometry *g)
{
    philox_stream shared;
    drawn_buf drawn[OPS_MAX];
    philox_stream_op(&shared, seed, (uint64_t)epoch, (uint64_t)index, 0);
    geometry(p, seed, epoch, index, img_w, img_h, g, &shared, drawn);
}

/* Op k's draw for a w x h image into *d. */
static void draw_one(const ops_pipeline *p, int k, uint64_t seed, int64_t epoch,
                     int64_t index, int w, int h, philox_stream *shared,
                     drawn_buf *d)
{
    const op_instance *op = &p->op[k];
    philox_stream own;
    memset(d, 0, sizeof *d);
    if (op->kind->draw)
        op->kind->draw(op, stream_of(p, k, seed, epoch, index, &own, shared), w,
                       h, d->bytes);
}

int ops_pixels(const ops_pipeline *p, uint64_t seed, int64_t epoch,
               int64_t index, op_image *img)
{
    philox_stream shared;
    philox_stream_op(&shared, seed, (uint64_t)epoch, (uint64_t)index, 0);
    for (int k = p->ngeometry; k < p->ngeometry + p->npixels; k++) {
        drawn_buf d;
        draw_one(p, k, seed, epoch, index, img->w, img->h, &shared, &d);
        const int rc = p->op[k].kind->apply(&p->op[k], d.bytes, img);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int ops_tensor(const ops_pipeline *p, uint64_t seed, int64_t epoch,
               int64_t index, op_tensor *t)
{
    philox_stream shared;
    philox_stream_op(&shared, seed, (uint64_t)epoch, (uint64_t)index, 0);
    for (int k = p->ngeometry + p->npixels + p->nnormalize;
         k < p->n - p->nbatch; k++) {
        drawn_buf d;
        draw_one(p, k, seed, epoch, index, t->w, t->h, &shared, &d);
        const int rc = p->op[k].kind->apply_tensor(&p->op[k], d.bytes, t);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The batch op's draw for batch `batch` of `epoch` on an image of w x h,
 * from its stream: keyed by the batch and the rank, not a sample. */
static void batch_draw(const ops_pipeline *p, uint64_t seed, int64_t epoch,
                       int64_t batch, int w, int h, drawn_buf *d)
{
    const op_instance *op = &p->op[p->n - 1];
    philox_stream s;
    philox_stream_init(&s, seed, PHILOX_DOMAIN_BATCH, (uint64_t)epoch,
                       (uint64_t)p->rank << 32 | (uint32_t)batch);
    memset(d, 0, sizeof *d);
    op->kind->draw(op, &s, w, h, d->bytes);
}

void ops_batch(const ops_pipeline *p, uint64_t seed, int64_t epoch,
               int64_t batch, op_batch *b)
{
    if (!p->nbatch)
        return;
    drawn_buf d;
    batch_draw(p, seed, epoch, batch, b->w, b->h, &d);
    const op_instance *op = &p->op[p->n - 1];
    op->kind->apply_batch(op, d.bytes, b);
}

int ops_describe(const ops_pipeline *p, uint64_t seed, int64_t epoch,
                 int64_t index, int img_w, int img_h, char *buf, size_t cap)
{
    philox_stream shared;
    drawn_buf drawn[OPS_MAX];
    op_geometry g;
    philox_stream_op(&shared, seed, (uint64_t)epoch, (uint64_t)index, 0);
    geometry(p, seed, epoch, index, img_w, img_h, &g, &shared, drawn);
    int w, h;
    op_geometry_size(&g, &w, &h);
    for (int k = p->ngeometry; k < p->n - p->nbatch; k++)
        draw_one(p, k, seed, epoch, index, w, h, &shared, &drawn[k]);
    if (p->nbatch)
        batch_draw(p, seed, epoch, index, w, h, &drawn[p->n - 1]);
    size_t len = 0;
#define AT_ (len < cap ? buf + len : NULL), (len < cap ? cap - len : 0)
    if (cap)
        buf[0] = '\0';
    for (int k = 0; k < p->n; k++) {
        const op_instance *op = &p->op[k];
        len += (size_t)snprintf(AT_, "%s%s(", k ? ";" : "", op->kind->name);
        if (op->kind->describe)
            len += (size_t)op->kind->describe(op, drawn[k].bytes, AT_);
        len += (size_t)snprintf(AT_, ")");
    }
#undef AT_
    return (int)len;
}
