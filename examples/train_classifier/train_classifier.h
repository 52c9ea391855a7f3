/* What train_classifier.c and train_kernels.cu share: the model's shape and
 * hyper-parameters, and the CUDA half's entry points. Internal to the example;
 * not part of pinload's API. */
#ifndef TRAIN_CLASSIFIER_H
#define TRAIN_CLASSIFIER_H

#include <stddef.h>
#include <stdint.h>

#include "pinload.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A hidden layer and the output layer at most. */
#define TC_MAX_LAYERS 2

/* One fully connected layer, y = x W^T + b over a batch: x is [count][in],
 * y is [count][out], W is [out][in] row-major. W and b live at offsets in
 * the model's single parameter array, so that one SGD step, one momentum
 * buffer and one host-to-device copy cover every layer. */
typedef struct tc_layer {
    int in, out;
    size_t w, b; /* offsets of W and b in the parameter array */
    int relu;    /* 1: a ReLU follows (the hidden layer) */
} tc_layer;

/* The classifier and how it is trained. Filled once by the C side and
 * handed to the CUDA side as is, so both paths train the same model with
 * the same hyper-parameters. */
typedef struct tc_model {
    int num_layers;
    tc_layer layer[TC_MAX_LAYERS];
    size_t num_params;
    int inputs, classes;
    float lr, momentum;
} tc_model;

#ifndef PL_SAMPLE_NO_CUDA
/* The CUDA half (train_kernels.cu). Every function returns 0 or -1; after
 * -1, tc_cuda_error() says what failed. Used from one thread. */
typedef struct tc_cuda tc_cuda;

/* Select `device`, create a stream, allocate the weights, momentum,
 * gradients and activations for batches of up to max_batch samples on it,
 * and copy params[m->num_params] (the initial weights) there. [out] *out,
 * freed by tc_cuda_destroy; on failure err[errlen] says why. */
int tc_cuda_create(const tc_model *m, const float *params, int max_batch,
                   int device, tc_cuda **out, char *err, size_t errlen);

/* The stream every kernel runs on: the one to give pl_batch_wait() and
 * pl_loader_release(). */
struct CUstream_st *tc_cuda_stream(const tc_cuda *c);

/* Queue one step on the stream: copy labels[count] (host memory, read
 * before the call returns) to the device, run the forward pass on x
 * (device memory, [count][inputs]), add the batch's summed loss and number
 * of correct predictions to the device totals and, if train, the backward
 * pass and an SGD update. The host does not wait for the kernels. */
int tc_cuda_step(tc_cuda *c, const float *x, const int32_t *labels, int count,
                 int train);

/* Wait for the stream, then read and reset the totals: the loss summed
 * over samples and the number of correct predictions since the last call.
 * The one host synchronisation of an epoch. */
int tc_cuda_totals(tc_cuda *c, double *loss_sum, int64_t *correct);

/* What the last failed call on c failed on. */
const char *tc_cuda_error(const tc_cuda *c);

/* Wait for the stream and free everything. NULL is a no-op. */
void tc_cuda_destroy(tc_cuda *c);
#endif

#ifdef __cplusplus
}
#endif

#endif
