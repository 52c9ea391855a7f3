/* Which decoder a sample goes to. Where the loader offers another one (the
 * GPU's: pool_source.offload), a worker reads the file, reads the image's
 * header and plans its crop as for any sample; a JPEG of the common kind
 * (decode_info.common_jpeg) is handed over with its bytes and its
 * filters, planned at full size (the other decoder has no DCT scaling);
 * anything else (a plan the GPU's kernels do not do: config.transform's
 * vflip, other filters, padded crops, pixel and tensor ops), or what the
 * other decoder refuses, the worker decodes itself, so every error is the
 * CPU path's. */
#ifndef PINLOAD_ROUTE_H
#define PINLOAD_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "augment.h"
#include "decode.h"
#include "resample.h"

/* One sample offered to the other decoder: valid during the offer. */
typedef struct offload_sample {
    const uint8_t *bytes;
    size_t len;
    int width, height;          /* the image's, from its header */
    const resample_axis *h, *v; /* the filters over the whole image */
    int flip;
} offload_sample;

/* A worker's own: the filters' memory, reused. */
typedef struct route_ctx {
    resample_axis h, v;
} route_ctx;

void route_fini(route_ctx *r);

/* Whether the image in buf[0, len) (dataset index `index` of `epoch`) may
 * go to the other decoder: 1 with *o filled (the header read with dec,
 * which is left closed), 0 when the worker decodes it (not a common JPEG,
 * a header in error, no memory for the filters). */
int route_plan(route_ctx *r, decoder *dec, const augment_params *p,
               const uint8_t *buf, size_t len, int64_t epoch, int64_t index,
               offload_sample *o);

#endif
