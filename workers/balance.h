/* decode = PL_DECODE_AUTO's split between the GPU and the workers
 * (issue 38): each worker, for each JPEG the GPU could take
 * (workers/route.c), offers it to the GPU or decodes it itself, by what
 * each way has cost it lately. Offering costs a worker the GPU decoder's
 * host phase (parsing, and nvJPEG's Huffman decoding with its hybrid
 * backends) and, once the GPU is behind, the wait for the buffers its
 * queued samples still use; decoding costs it the decode and the resize.
 * So the GPU's share of a worker's samples rises while an offered sample
 * costs it less than a decoded one and falls while it costs more: at the
 * GPU's limit the workers take the rest, and with hardware decoding (a
 * cheap offer) nearly everything goes to the GPU. Each way keeps a share
 * of 1/256 at least, so that its cost stays measured. A worker's own
 * state, no lock; pure, so that tests drive it with made-up costs. */
#ifndef PINLOAD_BALANCE_H
#define PINLOAD_BALANCE_H

#include <stdint.h>

#define BALANCE_EVERY 16            /* samples between two adjustments */
#define BALANCE_STEP 0.0625         /* the share moves by this much */
#define BALANCE_FLOOR (1.0 / 256.0) /* the least share of either way */

typedef struct balance {
    double share;          /* of the GPU, in [FLOOR, 1 - FLOOR] */
    double acc;            /* the share accumulated: a sample per unit */
    double gpu_ns, cpu_ns; /* each way's cost, a moving mean (0: none) */
    int since;             /* samples since the last adjustment */
} balance;

/* Half each way at first, until both are measured. */
void balance_init(balance *b);

/* 1: offer the next JPEG to the GPU; 0: decode it here. Deterministic:
 * the share is spread evenly over the samples. */
int balance_take_gpu(balance *b);

/* What the last such sample cost this worker, in ns, the way it went
 * (gpu: offered and taken; else decoded here). */
void balance_note(balance *b, int gpu, uint64_t ns);

#endif
