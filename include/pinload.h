/* pinload: a pinned-memory JPEG, PNG and WebP data loader that keeps GPUs fed.
 *
 * A pool of worker threads reads images (JPEG, PNG, WebP) from a folder, a
 * list file, WebDataset tar shards or remote object storage (http(s)://,
 * s3://, pipe:), decodes them (libjpeg-turbo, libspng, libwebp) and
 * augments them straight into a ring of page-locked host buffers; a
 * prefetcher thread copies each finished batch to device memory on its own
 * CUDA stream, so the copy overlaps the caller's kernels. Without a CUDA
 * driver the same pipeline runs on a host backend, where "device" buffers
 * are ordinary memory.
 *
 * The life of a program:
 *
 *     pl_config cfg;
 *     pl_config_default(&cfg);
 *     cfg.data = "train";                      // ImageFolder tree
 *     pl_loader *l;
 *     if (pl_loader_create(&cfg, &l) < 0)
 *         die(pl_last_error());
 *     for (int epoch = 0; epoch < 90; epoch++) {
 *         const pl_batch *b;
 *         int rc;
 *         while ((rc = pl_loader_next(l, &b)) == 0) {
 *             pl_batch_wait(b, stream);        // stream waits, host does not
 *             train_step(b->data, b->labels, b->count, stream);
 *             pl_loader_release(l, b, stream);
 *         }
 *         if (rc != PL_EPOCH_END)
 *             die(pl_last_error());
 *     }
 *     pl_loader_destroy(l);
 *
 * Status codes: every function that can fail returns an int; 0 is success,
 * errors are negative PL_E* codes, and pl_last_error() gives a sentence
 * naming what failed ("pl_loader_create: data/train: no JPEG, PNG or WebP
 * files found").
 *
 * Thread safety: functions that take no object are safe from any thread;
 * each object's comment says, in one sentence, how it may be shared.
 * Loaders share nothing: several may live in one process. After fork(), a
 * child may not use its parent's loaders (their calls return PL_EINVAL;
 * destroy there only forgets them). */
/* ABI: structs the caller allocates and the library fills or reads
 * (pl_config, pl_info, pl_stats, pl_failure, pl_image) only grow, at their
 * end, and every function that takes one is a macro over a *_sized
 * function that is also given the caller's sizeof: the library reads and
 * writes no byte past it, so a program built against an older header keeps
 * working with a newer library. A pl_config field added later reads as 0
 * from an older caller, and 0 always means its default. Structs the library
 * owns and hands out by pointer (pl_batch) may grow at their end too.
 * pl_state is 128 opaque bytes for good. Struct fields are fixed-width;
 * enum values are stored in int32_t fields. Binders (cffi, ctypes) call the
 * *_sized functions with explicit sizes. docs/ABI.md has the rules. */
#ifndef PINLOAD_H
#define PINLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "pinload/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the library exports. Windows: dllexport when building the DLL
 * (PL_BUILDING), dllimport when using it, nothing for a static build
 * (PL_STATIC). Elsewhere: default visibility under GCC and Clang (the
 * library builds with -fvisibility=hidden), nothing for other compilers
 * and for binders that read this header (cffi, ctypesgen). */
#if defined(_WIN32) && defined(PL_STATIC)
#define PL_EXPORT
#elif defined(_WIN32) && defined(PL_BUILDING)
#define PL_EXPORT __declspec(dllexport)
#elif defined(_WIN32)
#define PL_EXPORT __declspec(dllimport)
#elif defined(__GNUC__)
#define PL_EXPORT __attribute__((visibility("default")))
#else
#define PL_EXPORT
#endif

/* CUDA's own handle types, declared so that this header needs no CUDA
 * headers: a cudaStream_t is a struct CUstream_st *, a cudaEvent_t a
 * struct CUevent_st *. NULL is CUDA's legacy default stream. */
struct CUstream_st;
struct CUevent_st;

/* ---------------------------------------------------------------------------
 * Versions and errors */

/* The library's version as "MAJOR.MINOR.PATCH"; static storage. */
PL_EXPORT const char *pl_version(void);

/* The library's version as PL_VERSION_HEX computes it. */
PL_EXPORT unsigned pl_version_number(void);

/* Status codes: every function that can fail returns one. The list, once:
 * name, value and message (pl_err_name() and pl_strerror() give them).
 * Values never change; new codes are appended. PL_EPOCH_END is not an
 * error: pl_loader_next's "this epoch has no more batches". A binding may
 * expand the list with its own XX(name, value, message), as the enum below
 * does. A code renamed keeps its old name in the enum, after the list, for
 * the same value: PL_ENOTJPEG is PL_ENOTIMAGE's first name. */
#define PL_STATUS_MAP(XX)                                                      \
    XX(OK, 0, "success")                                                       \
    XX(EPOCH_END, 1, "end of epoch")                                           \
    XX(EINVAL, -1, "invalid argument")                                         \
    XX(ENOMEM, -2, "out of memory")                                            \
    XX(EIO, -3, "input/output error")                                          \
    XX(ENODATA, -4, "no images found")                                         \
    XX(ENOTIMAGE, -5, "not an image pinload reads (JPEG, PNG, WebP)")          \
    XX(ECORRUPT, -6, "corrupt image data")                                     \
    XX(EUNSUPPORTED, -7, "unsupported image feature")                          \
    XX(ELIMIT, -8, "image exceeds a configured limit")                         \
    XX(ECUDA, -9, "CUDA runtime error")                                        \
    XX(ETHREAD, -10, "cannot create thread")                                   \
    XX(EBUSY, -11, "every batch is held by the caller")                        \
    XX(ECLOSED, -12, "the loader is being destroyed")                          \
    XX(ENOEXTRA, -13, "a sample lacks a requested extra")

typedef enum pl_status {
#define PL_STATUS_ENUM_(name, value, msg) PL_##name = value,
    PL_STATUS_MAP(PL_STATUS_ENUM_)
#undef PL_STATUS_ENUM_
    /* clang-format off */
    PL_ENOTJPEG = PL_ENOTIMAGE /* the old name */
    /* clang-format on */
} pl_status;

/* A one-line description of a status code ("corrupt image data"), or
 * "unknown status" for a value no version defined. Static storage. */
PL_EXPORT const char *pl_strerror(int status);

/* The code's name ("PL_ECORRUPT"), or "PL_UNKNOWN". Static storage. */
PL_EXPORT const char *pl_err_name(int status);

/* The detail of the last error returned to the calling thread by any pinload
 * function, such as "pl_loader_next: train/cat/7.gif: not an image pinload
 * reads (GIF data)". Empty before the first error. Thread-local:
 * valid until the calling thread's next pinload call. */
PL_EXPORT const char *pl_last_error(void);

/* ---------------------------------------------------------------------------
 * Configuration */

/* The values of the enums below, and the device field's special values,
 * are listed once each, as the status codes are: PL_FORMAT_MAP(XX) and its
 * kin give each value as XX(NAME, value, "word") and generate the enum
 * (PL_FORMAT_NAME = value) and its pl_*_name() function. The word is what
 * people type: the tools' options (--format f32) and Python's keywords
 * (format="f32") take exactly these, and tools/config-fields.py writes
 * Python's from here. Values never change; new ones are appended. Each
 * pl_*_name() gives the word of a value its list holds, in static storage,
 * and NULL for any other value; it is safe from any thread. A binding may
 * expand a list with its own XX. */

/* Output formats (pl_config.format, pl_info.format).
 *
 * PL_FORMAT_U8_NHWC: uint8 RGB, [count][height][width][3].
 *
 * PL_FORMAT_F32_NCHW: float32, [count][3][height][width], each channel
 * (v / 255 - mean) / std.
 *
 * PL_FORMAT_F16_NCHW: the same values as IEEE half floats (round to nearest
 * even), as uint16_t bit patterns.
 *
 * PL_FORMAT_BF16_NCHW: the same values as bfloat16 (float32's exponent, 8
 * bits of mantissa; round to nearest even), as uint16_t bit patterns. */
#define PL_FORMAT_MAP(XX)                                                      \
    XX(U8_NHWC, 0, "u8")                                                       \
    XX(F32_NCHW, 1, "f32")                                                     \
    XX(F16_NCHW, 2, "f16")                                                     \
    XX(BF16_NCHW, 3, "bf16")

typedef enum pl_format {
#define PL_FORMAT_ENUM_(name, value, word) PL_FORMAT_##name = value,
    PL_FORMAT_MAP(PL_FORMAT_ENUM_)
#undef PL_FORMAT_ENUM_
} pl_format;

/* The format's word ("f32"), or NULL. */
PL_EXPORT const char *pl_format_name(pl_format format);

/* Augmentations (pl_config.augment).
 *
 * PL_AUGMENT_NONE: resize the whole image to width x height (aspect not
 * kept).
 *
 * PL_AUGMENT_EVAL: torchvision's Resize(s) + CenterCrop: the shorter side
 * is scaled to s = floor(max(width, height) * 256 / 224), then the centre
 * width x height is cut out.
 *
 * PL_AUGMENT_TRAIN: torchvision's RandomResizedCrop(scale (0.08, 1), ratio
 * (3/4, 4/3)) to width x height, then a horizontal flip with p = 0.5. */
#define PL_AUGMENT_MAP(XX)                                                     \
    XX(NONE, 0, "none")                                                        \
    XX(EVAL, 1, "eval")                                                        \
    XX(TRAIN, 2, "train")

typedef enum pl_augment {
#define PL_AUGMENT_ENUM_(name, value, word) PL_AUGMENT_##name = value,
    PL_AUGMENT_MAP(PL_AUGMENT_ENUM_)
#undef PL_AUGMENT_ENUM_
} pl_augment;

/* The augmentation's word ("train"), or NULL. */
PL_EXPORT const char *pl_augment_name(pl_augment augment);

/* The host ring's memory (pl_config.memory, pl_info.memory).
 *
 * PL_MEMORY_PINNED: a page-locked host ring: cudaHostAlloc, or mlock on the
 * host backend (pageable, with a notice, where mlock is not permitted). On
 * CUDA it is allocated on the NUMA node of the GPU's PCI slot
 * (pl_info.numa_node). Bounded with the node's other ranks: see
 * pl_loader_create.
 *
 * PL_MEMORY_PAGEABLE: ordinary aligned host memory; on CUDA its pages
 * prefer the GPU's NUMA node, as the workers first write them.
 *
 * PL_MEMORY_MANAGED: CUDA managed memory (cudaMallocManaged): workers write
 * the ring in place and each run of samples is migrated to the GPU with
 * cudaMemPrefetchAsync before it is copied into the device buffer, as code
 * built on unified memory does. On the host backend this is pageable
 * memory, with a notice. A device without concurrent managed access
 * (Windows, WSL), where the host may not write managed memory while the
 * device works, refuses it: PL_EINVAL. */
#define PL_MEMORY_MAP(XX)                                                      \
    XX(PINNED, 0, "pinned")                                                    \
    XX(PAGEABLE, 1, "pageable")                                                \
    XX(MANAGED, 2, "managed")

typedef enum pl_memory {
#define PL_MEMORY_ENUM_(name, value, word) PL_MEMORY_##name = value,
    PL_MEMORY_MAP(PL_MEMORY_ENUM_)
#undef PL_MEMORY_ENUM_
} pl_memory;

/* The memory's word ("pinned"), or NULL. */
PL_EXPORT const char *pl_memory_name(pl_memory memory);

/* What a bad sample does (pl_config.on_error).
 *
 * PL_ON_ERROR_FAIL: the batch holding it is not delivered; pl_loader_next
 * returns the error, naming the file, from then on.
 *
 * PL_ON_ERROR_SKIP: its place goes to the next good sample of this rank's
 * epoch order, wrapping around to the order's start when its end is
 * reached (as DistributedSampler pads): every epoch of every rank delivers
 * exactly pl_info.batches_per_epoch batches of the nominal sizes, whatever
 * the other ranks met. An epoch in which not one sample of the rank's
 * order can be decoded ends in PL_ENODATA.
 *
 * PL_ON_ERROR_SUBSTITUTE: it is delivered as an all-zero image, and its
 * entry in pl_batch.status holds the (negative) error code. */
#define PL_ON_ERROR_MAP(XX)                                                    \
    XX(FAIL, 0, "fail")                                                        \
    XX(SKIP, 1, "skip")                                                        \
    XX(SUBSTITUTE, 2, "substitute")

typedef enum pl_on_error {
#define PL_ON_ERROR_ENUM_(name, value, word) PL_ON_ERROR_##name = value,
    PL_ON_ERROR_MAP(PL_ON_ERROR_ENUM_)
#undef PL_ON_ERROR_ENUM_
} pl_on_error;

/* The policy's word ("skip"), or NULL. */
PL_EXPORT const char *pl_on_error_name(pl_on_error on_error);

/* How an epoch is cut into world_size shards (pl_config.shard_mode).
 *
 * PL_SHARD_PAD: as DistributedSampler(drop_last=False): pad the epoch by
 * wrapping around its start to a multiple of world_size.
 *
 * PL_SHARD_DROP: as DistributedSampler(drop_last=True): cut the epoch's
 * tail to a multiple of world_size. */
#define PL_SHARD_MODE_MAP(XX)                                                  \
    XX(PAD, 0, "pad")                                                          \
    XX(DROP, 1, "drop")

typedef enum pl_shard_mode {
#define PL_SHARD_MODE_ENUM_(name, value, word) PL_SHARD_##name = value,
    PL_SHARD_MODE_MAP(PL_SHARD_MODE_ENUM_)
#undef PL_SHARD_MODE_ENUM_
} pl_shard_mode;

/* The shard mode's word ("pad"), or NULL. */
PL_EXPORT const char *pl_shard_mode_name(pl_shard_mode shard_mode);

/* Sample orders (pl_config.order).
 *
 * PL_ORDER_GLOBAL: the exact global order: each epoch a seeded permutation
 * of every sample, dealt to the ranks as DistributedSampler deals it (any
 * sample may come next: random reads over the whole dataset).
 *
 * PL_ORDER_SHARDS: tar shards only, for streaming: each epoch a seeded
 * permutation of the shards, their samples laid end to end and cut into
 * world_size equal contiguous ranges (padded or cut as shard_mode says), so
 * each rank reads whole shards in sequence, plus parts of at most two at
 * its ends; within the rank's range the samples are shuffled inside
 * windows of shuffle_window consecutive positions. Reads stay within a
 * window's few shards, at the cost of a weaker shuffle (docs/DATA.md gives
 * the exact definition). */
#define PL_ORDER_MAP(XX)                                                       \
    XX(GLOBAL, 0, "global")                                                    \
    XX(SHARDS, 1, "shards")

typedef enum pl_order {
#define PL_ORDER_ENUM_(name, value, word) PL_ORDER_##name = value,
    PL_ORDER_MAP(PL_ORDER_ENUM_)
#undef PL_ORDER_ENUM_
} pl_order;

/* The order's word ("global"), or NULL. */
PL_EXPORT const char *pl_order_name(pl_order order);

/* Backends (pl_info.backend). PL_BACKEND_HOST: "device" buffers in host
 * memory, memcpy copies. PL_BACKEND_CUDA: the CUDA runtime. */
#define PL_BACKEND_MAP(XX)                                                     \
    XX(HOST, 0, "host")                                                        \
    XX(CUDA, 1, "cuda")

typedef enum pl_backend {
#define PL_BACKEND_ENUM_(name, value, word) PL_BACKEND_##name = value,
    PL_BACKEND_MAP(PL_BACKEND_ENUM_)
#undef PL_BACKEND_ENUM_
} pl_backend;

/* The backend's word ("cuda"), or NULL. */
PL_EXPORT const char *pl_backend_name(pl_backend backend);

/* A message's level says whether it changes what the caller gets.
 *
 * PL_LOG_NOTICE: how it runs: the backend, the workers, memory fallbacks
 * (pinned to pageable), indexes, the cache, a buffer pool that grows.
 *
 * PL_LOG_WARNING: what it delivers: a bad file skipped or substituted,
 * files left out of the dataset, samples without a label (labelled 0), a
 * resume that delivers samples again. */
#define PL_LOG_LEVEL_MAP(XX)                                                   \
    XX(NOTICE, 0, "notice")                                                    \
    XX(WARNING, 1, "warning")

typedef enum pl_log_level {
#define PL_LOG_LEVEL_ENUM_(name, value, word) PL_LOG_##name = value,
    PL_LOG_LEVEL_MAP(PL_LOG_LEVEL_ENUM_)
#undef PL_LOG_LEVEL_ENUM_
} pl_log_level;

/* The level's word ("warning"), or NULL. */
PL_EXPORT const char *pl_log_level_name(pl_log_level level);

/* Where JPEGs are decoded (pl_config.decode, pl_info.decode).
 *
 * PL_DECODE_CPU: by the worker threads, with libjpeg-turbo, as every other
 * format is: the bytes are those of every release before the GPU decoder.
 *
 * PL_DECODE_GPU: on the loader's GPU with NVIDIA's nvJPEG (its hardware
 * decoder where the GPU has one, its GPU-hybrid decoder elsewhere),
 * loaded at run time (libnvjpeg.so.13, or the file $PINLOAD_NVJPEG names):
 * the workers read each file and parse its header, and a baseline or
 * progressive JPEG (8-bit Huffman, grey or YCbCr) is decoded, cropped,
 * resized, flipped and written in the output format on the GPU, into the
 * same batches. PNG, WebP, CMYK/YCCK, arithmetic-coded and 12-bit JPEGs,
 * and any file nvJPEG refuses, are decoded by the workers, sample by
 * sample, under the same error policy. Decoded at full size whatever
 * dct_scaling says; its pixels differ from the CPU's by nvJPEG's IDCT and
 * chroma upsampling (docs/ARCHITECTURE.md, GPU decoding). Needs the CUDA
 * backend, nvJPEG and keep_host 0: pl_loader_create fails naming which is
 * missing.
 *
 * PL_DECODE_AUTO: PL_DECODE_GPU where it can be had; else the CPU, which
 * one notice says, with the reason. */
#define PL_DECODE_MAP(XX)                                                      \
    XX(CPU, 0, "cpu")                                                          \
    XX(GPU, 1, "gpu")                                                          \
    XX(AUTO, 2, "auto")

typedef enum pl_decode {
#define PL_DECODE_ENUM_(name, value, word) PL_DECODE_##name = value,
    PL_DECODE_MAP(PL_DECODE_ENUM_)
#undef PL_DECODE_ENUM_
} pl_decode;

/* The decode's word ("gpu"), or NULL. */
PL_EXPORT const char *pl_decode_name(pl_decode decode);

/* The device field's special values; 0, 1, ... are CUDA ordinals. An
 * ordinal that cannot be had (no driver, no such device) makes
 * pl_loader_create fail, naming it and why; only AUTO falls back to the host
 * backend, with a notice. No pinload call leaves the calling thread on
 * another CUDA device than it found it on.
 *
 * PL_DEVICE_AUTO: the calling thread's current CUDA device (cudaGetDevice:
 * what cudaSetDevice or torch.cuda.set_device chose), else the host
 * backend.
 *
 * PL_DEVICE_HOST: the host backend, CUDA or not.
 *
 * PL_DEVICE_LOCAL_RANK: the ordinal of the launcher's local rank
 * (LOCAL_RANK, SLURM_LOCALID, ...; see PL_FROM_ENV), 0 without a launcher:
 * one GPU per process on a node. */
#define PL_DEVICE_MAP(XX)                                                      \
    XX(AUTO, -1, "auto")                                                       \
    XX(HOST, -2, "host")                                                       \
    XX(LOCAL_RANK, -3, "local_rank")

typedef enum pl_device {
#define PL_DEVICE_ENUM_(name, value, word) PL_DEVICE_##name = value,
    PL_DEVICE_MAP(PL_DEVICE_ENUM_)
#undef PL_DEVICE_ENUM_
} pl_device;

/* A special value's word ("local_rank"); NULL for a CUDA ordinal and for
 * any other value. */
PL_EXPORT const char *pl_device_name(pl_device device);

/* Rank and world size: take them from the launcher's environment at create
 * time, from the first family set: torchrun (RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE), SLURM (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
 * SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE), Open MPI
 * (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE), MPICH/PMI
 * (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS); 0 and 1 when none
 * is. Half a pair, or a rank outside [0, world), is an error naming the
 * variables; the create notice says which family was used. */
#define PL_FROM_ENV (-1)

/* Called from any of the loader's threads, never concurrently for one
 * loader; msg is one line without a newline and is valid during the call
 * (control characters in file names appear as \n, \r, \t or \xHH). */
typedef void (*pl_log_fn)(void *ctx, pl_log_level level, const char *msg);

struct pl_image;
/* config.sample_fn: see there. */
typedef int (*pl_sample_fn)(void *ctx, struct pl_image *img, int64_t index,
                            int64_t epoch, uint64_t key);

/* Where a loader stands, to resume from after a restart: plain bytes,
 * little-endian, versioned and checksummed, to be stored as they are (in a
 * checkpoint beside the model). Thread safety: plain data, the caller's. */
#define PL_STATE_BYTES 128
typedef struct pl_state {
    uint8_t bytes[PL_STATE_BYTES];
} pl_state;

/* Construction settings. Fill with pl_config_default(), then change what
 * you need; pl_loader_create() copies what it keeps (strings included) and
 * rejects bad values naming the field. The fields come in groups: the
 * input, the output, the order, resuming, the pipeline, bad input and its
 * limits, logging. A pl_config is the caller's: the library reads it during
 * pl_loader_create only, and keeps no pointer into it (but see log_ctx). */
/* pl_config.num_workers and .prefetch: chosen by the loader as it runs. */
#define PL_AUTO (-1)

typedef struct pl_config {
    /* ---- The input */
    /* Required. A directory (ImageFolder layout root/<class>/.../x.jpg, or a
     * flat folder of images with label 0: .jpg .jpeg .png .webp files, the
     * format told by the bytes; other image kinds are named in a notice) or
     * a list file of "path label"
     * lines, paths relative to the list file's folder. Or tar shards in the
     * WebDataset layout: a .tar file, a folder of *.tar, a brace pattern
     * ("train-{000000..000146}.tar") or a list file of shard paths; a
     * sample is a key's jpg/jpeg member, labelled by its cls member (0
     * without), and its path reads "shard.tar:member". Default NULL. */
    const char *data;

    /* ---- The output */
    int32_t batch_size; /* samples per batch; default 64 */
    int32_t width;      /* output width in pixels; default 224 */
    int32_t height;     /* output height in pixels; default 224 */
    int32_t format;     /* a pl_format; default PL_FORMAT_U8_NHWC */
    int32_t augment;    /* a pl_augment; default PL_AUGMENT_TRAIN */
    /* Float formats' normalisation, (x / 255 - mean) / std per channel:
     * mean, default ImageNet's 0.485 0.456 0.406; std, default ImageNet's
     * 0.229 0.224 0.225. */
    float mean[3];
    float std[3]; /* see mean; default 0.229 0.224 0.225 */
    /* 1: decode at 1/2, 1/4 or 1/8 scale (libjpeg's DCT scaling, as
     * Pillow's draft mode) whenever the crop still has at least as many
     * pixels as the resize needs: much faster, pixels slightly different.
     * 0: decode at full size, pixels within 1 level of Pillow/torchvision.
     * Default 1. */
    int32_t dct_scaling;

    /* ---- The order: which samples, in which epoch, on which rank */
    uint64_t seed;      /* order and augmentation; default 0 */
    int32_t shuffle;    /* 1: permute each epoch; 0: file order; default 1
                           (PL_ORDER_SHARDS: the shards and the windows) */
    int32_t drop_last;  /* 1: no short last batch; default 0 */
    int32_t rank;       /* this process's shard; default PL_FROM_ENV */
    int32_t world_size; /* number of shards; default PL_FROM_ENV */
    int32_t shard_mode; /* a pl_shard_mode; default PL_SHARD_PAD */

    /* ---- Resuming */
    int64_t first_epoch; /* the first epoch's number; default 0 */
    /* NULL (default): start at first_epoch. Else go on from this state, made
     * by pl_loader_state() in an earlier run (first_epoch is then ignored):
     * exactly the batches that run would have delivered next. Refused with
     * PL_EINVAL, naming what differs, if it was saved for other data, batch
     * size, output, augmentation, seed, order or error policy, or by another
     * rank. Saved with another world_size (an elastic restart), the state's
     * epoch starts again from its beginning, with a notice. Read during
     * pl_loader_create only. */
    const pl_state *resume;

    /* ---- The pipeline: threads, memory, device */
    /* Decode threads. 0 (default): the CPUs this process may run on (its
     * affinity mask, and a cgroup CPU quota where one is set) shared among
     * the launcher's ranks on this node, at least 1; the create notice
     * says how many and why. PL_AUTO: as many threads as 0 starts, of
     * which the loader uses the fewest that keep pl_loader_next from
     * waiting, measured as it runs (the others sleep): fewer when the
     * training step is slower than decoding, so that the step keeps its
     * CPUs; a notice says what it settled on, pl_stats.workers_active the
     * count now. The bytes delivered do not depend on it. */
    int32_t num_workers;
    /* 1: worker i runs on the i-th CPU the process may use (modulo their
     * number), so a worker's caches stay its own. Default 0. */
    int32_t pin_workers;
    /* N > 0: ask the kernel (posix_fadvise WILLNEED) to start reading the
     * file N samples ahead of the one being claimed, for storage where
     * files are not in the page cache. Default 0 (off). */
    int32_t readahead;
    /* Batch slots in the host ring; default 2. A pinned ring takes
     * prefetch x pl_info.batch_bytes of page-locked memory (as the workers
     * write it: uint8 when the GPU normalises), bounded with the node's
     * other ranks (pl_loader_create). PL_AUTO: 2 slots at first, one more
     * whenever a window of the run shows batches late while the workers
     * wait for a free slot (one slow sample holding its batch back), up to
     * 8 or what the node's pinned bound allows every rank
     * (pl_info.prefetch_max); never fewer. A notice says where it settled,
     * pl_stats.prefetch_active the slots now. The bytes delivered do not
     * depend on it. */
    int32_t prefetch;
    /* A pl_memory, for the host ring; default PL_MEMORY_PINNED. */
    int32_t memory;
    /* 1: if pinned memory cannot be had (cudaHostAlloc fails, mlock is not
     * permitted), use pageable memory and say why in a notice; 0: fail
     * pl_loader_create with the reason. Default 1. A ring over the node's
     * bound on pinned memory (pl_loader_create) is refused either way:
     * that is a configuration to change, not memory missing now. */
    int32_t pinned_fallback;
    /* A CUDA ordinal, or PL_DEVICE_AUTO (default), _HOST or _LOCAL_RANK. */
    int32_t device;
    /* Device buffers, each with its copy stream; default 2. */
    int32_t device_buffers;
    /* 1: pl_batch.host holds the batch in page-locked host memory too, at
     * the cost of one host copy per batch on the CUDA backend (and
     * device_buffers x pl_info.batch_bytes more page-locked memory, on the
     * GPU's NUMA node, counted in the bound of pl_loader_create). On the
     * host backend pl_batch.host is always set. Default 0. */
    int32_t keep_host;
    /* 1: on the CUDA backend, float formats cross the bus as uint8 (a
     * quarter of float32's bytes) and are normalised on the GPU, on the copy
     * stream, into exactly the bytes the host path would make. Needs a
     * build with nvcc, and keep_host 0. Default 1. */
    int32_t gpu_normalize;

    /* ---- Bad input: the policy, and the limits past which a sample is
     * bad (PL_ELIMIT, the reason naming the limit; the next sample starts
     * afresh). 0 is each limit's default. */
    int32_t on_error; /* a pl_on_error; default PL_ON_ERROR_SKIP */
    /* 1: libjpeg warnings (corrupt data, premature end) anywhere in the
     * file make the sample bad, whatever the crop; default 0. */
    int32_t strict;
    int32_t max_width;      /* an image's width; default 32768 */
    int32_t max_height;     /* an image's height; default 32768 */
    int64_t max_pixels;     /* its width x height; default 178956970, as
                             * Pillow's bomb limit */
    int64_t max_file_bytes; /* its file's bytes; default 256 MiB */
    /* Wall-clock time of one decode, from the header to the last row:
     * default 5000 ms (the slowest real photo of the test data takes
     * 0.2 s); -1: none. It also bounds how long pl_loader_destroy waits for
     * a worker. */
    int32_t max_decode_ms;
    /* Scans of a progressive file: default 256 (real files have about
     * 10; each scan costs a pass over the whole image). */
    int32_t max_scans;
    /* Bytes decoding one image may hold, checked from its header before
     * anything is decoded, whatever the crop. JPEG: libjpeg's memory (a
     * progressive file keeps all of its DCT coefficients, 128 bytes per
     * 8x8 block per component), then enforced as libjpeg's
     * max_memory_to_use; baseline images need a few rows whatever their
     * size. PNG and WebP, decoded at full size: every pixel (3 bytes) and
     * the decoder's buffers (a WebP's decoded rectangle, 3 bytes a pixel
     * more; a lossless one's ARGB image; an interlaced PNG whole), and a
     * PNG's text and ICC profile chunks (at most 1 MiB each and 64 MiB in
     * all, as Pillow). Default 512 MiB: a progressive 4:4:4 JPEG of 85
     * megapixels, 4:2:0 of 170; a PNG of 178, a lossy WebP of 89, a
     * lossless one of 51. At least 1 MiB. */
    int64_t max_decode_memory;

    /* ---- Logging */
    /* Notices and warnings; default NULL: one line each on stderr. */
    pl_log_fn log;
    /* Passed to log as it is. The library keeps it: it must stay valid
     * until pl_loader_destroy returns (log may be called until then, from
     * any of the loader's threads). */
    void *log_ctx;

    /* ---- Added after 0.1's grouping (fields are appended here; each,
     * with its comment, is a Python keyword once tools/config-fields.py
     * has run) */
    /* 1: float formats channels-last, [count][height][width][3] (the
     * values of the NCHW layout, interleaved as u8 is; PyTorch's
     * channels_last). 0 (default): NCHW. u8 is always NHWC. */
    int32_t channels_last;
    /* What pl_loader_next does when the caller holds all device_buffers
     * batches and asks for another. 0 (default): PL_EBUSY. N >
     * device_buffers: the loader adds a device buffer (with its stream),
     * up to N in all, and the batch comes as usual; buffers added stay
     * until destroy and are reused (pl_stats.device_buffers counts them;
     * a notice says so the first time). -1: no bound but memory, as the
     * Python binding sets it: batches the caller keeps cost memory, never
     * an error. */
    int32_t max_device_buffers;
    /* ---- Remote shards: config.data of http(s)://, s3://, gs://, hf:// or
     * pipe: URLs (docs/DATA.md); any other scheme is PL_EINVAL naming it.
     * A pipe: command runs only from config.data itself: a list file's
     * pipe: lines are refused unless the environment sets
     * PINLOAD_ALLOW_PIPE_LISTS=1, and a tar is never read as a list. */
    /* The node's cache of fetched shards, shared by the ranks of a node
     * (file locks: each shard is fetched once per node). Default NULL:
     * $PINLOAD_CACHE_DIR, else $XDG_CACHE_HOME/pinload/shards, else
     * ~/.cache/pinload/shards, else /tmp/pinload-UID/shards. Folders it
     * makes are 0700; one another user could change (not yours, writable
     * by others, under another user's folder) is refused, PL_EIO naming
     * it; a group's setgid folder named here is shared on purpose
     * (docs/DATA.md). The library keeps no pointer after create. */
    const char *cache_dir;
    /* Bytes the cache may hold: 0 (default): no bound. Beyond it the least
     * recently used shards no rank reads are evicted; when the remote
     * dataset is larger than the bound, members are read one by one with
     * ranged requests instead (the exact order needs any member at any
     * time), except in PL_ORDER_SHARDS, where each rank streams its own
     * shards whole, a few at a time, if the bound holds those of the
     * node's ranks (docs/DATA.md). */
    int64_t cache_limit;
    /* A transfer that moves no byte for this long is cut and retried
     * (also the connect timeout), in ms: 0 (default): 30000. */
    int32_t remote_timeout_ms;
    /* Attempts after the first on a transport error, a short body, a
     * stall, HTTP 408, 429 or 5xx, with backoff (100 ms doubling, at most
     * 5 s); a download resumes where it stopped (Range). 0 (default): 5;
     * -1: none. */
    int32_t remote_retries;
    /* ---- The order, continued */
    /* A pl_order; default PL_ORDER_GLOBAL. PL_ORDER_SHARDS needs tar
     * shards (local or remote): a folder or list file is refused,
     * PL_EINVAL naming config.order. */
    int32_t order;
    /* PL_ORDER_SHARDS: the samples of this many consecutive positions of a
     * rank's epoch are shuffled among themselves (with shuffle 1); 1: none,
     * the shards' samples in file order. 0 (default): 4096. Set with
     * PL_ORDER_GLOBAL it is refused (PL_EINVAL): it would do nothing. */
    int32_t shuffle_window;
    /* ---- Side data delivered with the pixels (pl_batch.extras) */
    /* The extras each batch carries, per sample, as stored: a comma-
     * separated list of at most PL_EXTRAS_MAX names ("txt,json"). From tar
     * shards, a name is a member's extension after the key ("txt" is
     * KEY.txt, "seg.png" KEY.seg.png; matched as written, case aside); from
     * a list file, the columns after the label in the order named, the
     * lines then tab-separated ("path<TAB>label<TAB>caption"; columns
     * past those named are not read); from a folder, the file beside each
     * image with the name's extension in place of its own (x.jpg's "txt"
     * is x.txt). Default NULL: none. The library keeps no pointer after
     * create. */
    const char *extras;
    /* What a sample lacking one of them gets. 0 (default): an empty entry
     * (0 bytes). 1: the sample is bad, PL_ENOEXTRA naming the member, and
     * on_error decides as for an image that cannot be read. */
    int32_t extras_required;
    /* Tar shards: each sample's label from this top-level field of its
     * JSON member (KEY.json), an integer in [0, 2^20), instead of its cls
     * member. Every json member is read at create (one read a sample, once
     * a create). A key whose label cannot be had so (no json member, not
     * JSON, no such field, not such an integer) is bad by construction,
     * PL_ECORRUPT saying why. Local shards only: remote ones, folders and
     * list files are PL_EINVAL. Default NULL: the cls member. The library
     * keeps no pointer after create. */
    const char *label_field;
    /* ---- Augmentation as ops (docs/transforms.md) */
    /* The ops each sample goes through, as a spec: ops separated by ';',
     * each a name with its values in parentheses, positional then
     * key=value ("rrc(224,scale=0.08:1);hflip(0.5);grayscale(0.1);
     * normalize(mean=0.485:0.456:0.406,std=0.229:0.224:0.225)"): first
     * the geometric ops (random_resized_crop or rrc, resize, center_crop,
     * hflip, vflip: fused into the decode, one resample at most, ending at
     * width x height), then the pixel ops (grayscale, color_jitter,
     * gaussian_blur, solarize, posterize, equalize, autocontrast, rotate,
     * affine, and the policies rand_augment, trivial_augment_wide and
     * auto_augment), then normalize (float formats only; without it they are
     * normalised with mean and std), then random_erasing (erase: on the
     * normalised sample, as timm), each op drawing from its own random
     * stream, keyed by (seed, epoch, dataset index, its place); and last,
     * at most one batch op, mixup (timm's Mixup and CutMix on each
     * delivered batch, soft labels in pl_batch.soft_labels; drawn per batch
     * and rank). Parsed at
     * create: PL_EINVAL names the op and the parameter
     * ("config.transform: rrc: scale=0.08:x: not a number");
     * pl_transform_check checks one without a loader. Default NULL:
     * augment's preset (which a spec replaces). The library keeps no
     * pointer after create. */
    const char *transform;
    /* ---- Remote shards, continued */
    /* The most pl_loader_create spends on the remote shards' transfers
     * (their indexes, the shards without one fetched whole, classes.txt),
     * attempts, backoff and waits for another rank's download included, in
     * ms: past it they are cut and create fails, PL_EIO naming the first
     * shard in order and this field. 0 (default): 600000 (10 minutes); -1:
     * none. */
    int32_t remote_create_timeout_ms;
    /* ---- Decoding */
    /* A pl_decode: where JPEGs are decoded; default PL_DECODE_CPU.
     * PL_DECODE_GPU and PL_DECODE_AUTO decode them on the GPU with nvJPEG
     * (see PL_DECODE_MAP), the others on the CPU; pl_info.decode says
     * which runs. */
    int32_t decode;
    /* ---- A per-sample hook */
    /* What the ops lack, in C: called by a worker thread for each sample
     * after the pixel ops (config.transform's, or the preset's crop, resize
     * and flip), before normalize and random_erasing, with the sample's
     * uint8 RGB image at width x height (img->pixels packed rows, the
     * loader's: change them in place, keep no pointer), its dataset index,
     * the epoch and its random key: 64 bits of the sample's own random
     * stream (seed, epoch, index), so that a hook drawing from it gives
     * the same bytes for any worker count, prefetch or resume. Several
     * workers call it at once: it must be thread-safe. It returns 0, or a
     * negative PL_E* code (any other value is PL_EINVAL): the sample is
     * then a bad file, handled as on_error says, its failure naming the
     * file and "config.sample_fn returned ...". A JPEG a hook will see is
     * decoded on the CPU. A saved state cannot tell one hook from
     * another. Default NULL: none. */
    pl_sample_fn sample_fn;
    void *sample_ctx; /* handed to sample_fn */
    /* ---- Several views of each sample */
    /* num_views transform specs (docs/transforms.md), 2 to PL_VIEWS_MAX,
     * each made from every sample and delivered in the same batch, each
     * view its own tensor (pl_batch.views): SimCLR's two crops, DINO's two
     * global and N local crops of other sizes. Each spec ends the image
     * at its own size (its last crop or resize to WxH, or S: S x S), in
     * config.format. The image is decoded once, at full size, and each
     * view made from it (as dct_scaling 0 would make it); view v draws
     * from seed + v, so view v's bytes are those a loader with
     * transform = views[v] and seed + v would give with dct_scaling 0.
     * config.transform and augment are then not used, and width and height
     * are view 0's; not with a batch op (mixup), decode=gpu (the views are
     * decoded on the CPU: auto says so), gpu_normalize (the workers write
     * the floats) or sample_fn. The library keeps no pointer after
     * create. Default NULL and 0: one view, config.transform's. */
    const char *const *views;
    int32_t num_views; /* views' length; default 0 */
    /* ---- The CPU's share */
    /* N > 0: the most worker threads that take samples at once, the cores
     * the workers may keep busy: num_workers 0 (the default) and PL_AUTO
     * stay within it, and a num_workers above it is refused. With decode
     * PL_DECODE_AUTO the GPU decodes what the budget's workers do not.
     * Default 0: none. */
    int32_t cpu_budget;
} pl_config;

/* Fill *cfg with the defaults listed above. */
#define pl_config_default(cfg) pl_config_default_sized((cfg), sizeof(pl_config))
PL_EXPORT void pl_config_default_sized(pl_config *cfg, size_t size);

/* ---------------------------------------------------------------------------
 * Transforms: what a loader does to one image, without a loader */

/* Check cfg's transform (config.transform, or config.augment's preset)
 * for cfg's output (width, height, format, mean, std) as pl_loader_create
 * checks it; cfg->data is not read. 0, or PL_EINVAL naming the op and the
 * parameter. [out] canonical (may be NULL): the ops with every parameter
 * written out, NUL-terminated within cap bytes (cut short if it does not
 * fit). Any thread. */
#define pl_transform_check(cfg, canonical, cap)                                \
    pl_transform_check_sized((cfg), sizeof(pl_config), (canonical), (cap))
PL_EXPORT int pl_transform_check_sized(const pl_config *cfg, size_t size,
                                       char *canonical, size_t cap);

/* What cfg's transform draws for dataset index `index` of `epoch` (with
 * cfg->seed) on an image of img_w x img_h pixels: every op's parameters,
 * in the spec's grammar ("random_resized_crop(top=3,left=10,height=200,
 * width=150);hflip(flip=1)"), NUL-terminated in buf[0, cap); a batch op
 * (mixup) says what it draws for the batch numbered `index` of the epoch
 * on rank cfg->rank ("mixup(lam=0.71,cutmix=0)"). PL_EINVAL if it does
 * not fit; [out] *len (may be NULL): its length. Any thread. */
#define pl_transform_params(cfg, img_w, img_h, epoch, index, buf, cap, len)    \
    pl_transform_params_sized((cfg), sizeof(pl_config), (img_w), (img_h),      \
                              (epoch), (index), (buf), (cap), (len))
PL_EXPORT int pl_transform_params_sized(const pl_config *cfg, size_t size,
                                        int32_t img_w, int32_t img_h,
                                        int64_t epoch, int64_t index, char *buf,
                                        size_t cap, size_t *len);

/* The sample a loader of cfg makes for dataset index `index` of `epoch`
 * (before a batch op: mixup mixes whole batches) from an image decoded at
 * full size (no DCT scaling, whatever
 * cfg->dct_scaling says): rgb, img_h rows of img_w RGB pixels, packed
 * (pl_image's pixels); into out, out_bytes = pl_info.sample_bytes of cfg's
 * format. Any thread. */
#define pl_transform_image(cfg, rgb, img_w, img_h, epoch, index, out, bytes)   \
    pl_transform_image_sized((cfg), sizeof(pl_config), (rgb), (img_w),         \
                             (img_h), (epoch), (index), (out), (bytes))
PL_EXPORT int pl_transform_image_sized(const pl_config *cfg, size_t size,
                                       const uint8_t *rgb, int32_t img_w,
                                       int32_t img_h, int64_t epoch,
                                       int64_t index, void *out,
                                       size_t out_bytes);

/* ---------------------------------------------------------------------------
 * The loader */

/* A loader. Thread safety: every function taking one may be called from
 * several threads at once, and pl_loader_destroy while others wait in
 * pl_loader_next (a watchdog stopping a training loop: they return
 * PL_ECLOSED before anything is freed), but no call may start once destroy
 * has begun. */
typedef struct pl_loader pl_loader;

/* One extra of a batch (config.extras): sample i's bytes, as stored, are
 * data[offsets[i], offsets[i + 1]) for i < count (an empty entry: a member
 * the sample lacks, or a substituted sample's). Host memory, valid as the
 * batch is; owned by the loader. */
#define PL_EXTRAS_MAX 8
/* The most views config.views may give. */
#define PL_VIEWS_MAX 16

/* One view of a batch (config.views): its own [count] samples, contiguous,
 * in the batch's format and memory (data on the device, host where
 * pl_batch.host is set). */
typedef struct pl_view {
    const void *data;
    const void *host;
    size_t bytes;        /* count * sample_bytes */
    size_t sample_bytes; /* one sample of this view */
    int32_t width, height;
} pl_view;
typedef struct pl_extra {
    const char *name;        /* "txt", as config.extras named it */
    const uint8_t *data;     /* the entries, one after another */
    const uint64_t *offsets; /* [count + 1], offsets[0] = 0 */
} pl_extra;

/* One batch, owned by the loader. Every pointer in it is valid from the
 * pl_loader_next() that returned it until pl_loader_release() of it (or
 * pl_loader_destroy()); none may be written through. Thread safety: any
 * thread may read it, and one (any) releases it, once. */
typedef struct pl_batch {
    /* Samples in this batch: batch_size, or fewer in an epoch's last. */
    int32_t count;
    int64_t epoch; /* the epoch it belongs to */
    int64_t index; /* its number within the epoch, from 0 */
    size_t bytes;  /* count * pl_info.sample_bytes */
    /* The pixels: CUDA device memory on the CUDA backend (read them on a
     * stream that pl_batch_wait() made wait), host memory on the host
     * backend. */
    const void *data;
    /* The pixels in host memory, or NULL: see pl_config.keep_host (and
     * a mixup op in a build without its GPU kernel, which then mixes the
     * batch in host memory first). */
    const void *host;
    const int32_t *labels;  /* [count] class labels */
    const int64_t *indices; /* [count] dataset index of each sample */
    const int32_t *status;  /* [count] 0, or the error code of a sample
                               substituted under PL_ON_ERROR_SUBSTITUTE */
    /* Recorded on the copy stream after the batch's copy; NULL on the host
     * backend, where data is complete on return. */
    struct CUevent_st *ready;
    /* config.extras' entries, in the order named (0 and NULL without). */
    int32_t num_extras;
    const pl_extra *extras;
    /* With a mixup op in config.transform: [count][num_classes] float32
     * soft labels in host memory (timm's mixup_target: one-hot rows,
     * smoothed, blended by the batch's lambda); else NULL and 0. */
    int32_t num_classes;
    const float *soft_labels;
    /* With config.views: each view's samples (views[0] is data and bytes
     * above); else NULL and 0. */
    int32_t num_views;
    const pl_view *views;
} pl_batch;

/* Create a loader from *cfg: list the data, start the workers and the
 * prefetcher, allocate the ring and the device buffers. Prints one notice
 * naming the backend in use and where the ring lives. [out] *out,
 * destroyed by pl_loader_destroy (NULL on failure). PL_EINVAL names the
 * bad field; PL_EIO if the data cannot be read; PL_ENODATA if no image is
 * found; PL_ENOMEM, PL_ECUDA, PL_ETHREAD when a resource cannot be had.
 *
 * Pinned memory is bounded before any is allocated: the page-locked memory
 * this loader takes (a PL_MEMORY_PINNED ring, prefetch x batch; keep_host's
 * mirrors on CUDA, device_buffers x batch), times the ranks on this node
 * (the launcher's local world size, LOCAL_WORLD_SIZE and its kin, when rank
 * and world come from it; 1 otherwise), must fit in half of what the node
 * may use: its memory, or the cgroup's memory limit (v2 memory.max, v1
 * memory.limit_in_bytes) where that is lower. Page-locked memory can be
 * neither swapped nor reclaimed, and the rest is the processes', the page
 * cache's and the framework's. Past it: PL_ENOMEM, the detail naming the
 * numbers ("8 ranks on this node x 73.5 MiB of pinned memory (the ring:
 * prefetch 8 x 9.2 MiB batches) = 588.0 MiB, over 512.0 MiB, half of this
 * node's 1.00 GiB of memory") and what to change (a smaller prefetch or
 * batch, keep_host 0, or PL_MEMORY_PAGEABLE), whatever pinned_fallback
 * says. Managed memory, which pinload does not lock, is not counted, nor are
 * buffers added later (max_device_buffers). */
#define pl_loader_create(cfg, out)                                             \
    pl_loader_create_sized((cfg), sizeof(pl_config), (out))
PL_EXPORT int pl_loader_create_sized(const pl_config *cfg, size_t size,
                                     pl_loader **out);

/* Stop and join every thread and free everything, at any moment: before
 * the first batch, mid-epoch, with batches held (they become invalid).
 * On CUDA it waits for the copies in flight and for the work queued on the
 * streams given to pl_loader_release (the host blocks until the caller's
 * kernels reading released batches are done); work reading a batch still
 * held must be complete before the call, as for any memory one frees.
 * Threads waiting in pl_loader_next return PL_ECLOSED first. Returns once
 * every worker has finished the sample in hand: within the decode's time
 * limit (config.max_decode_ms, 5 s by default) plus one file read,
 * whatever the data. The wait for the caller's kernels on released batches
 * has the same bound: past it, the buffers they still use (and the host
 * ring) are left allocated rather than freed under them, with a warning.
 * NULL is a no-op. */
PL_EXPORT void pl_loader_destroy(pl_loader *l);

/* The next batch of the current epoch, in order, waiting for it if needed.
 * [out] *out, valid until pl_loader_release(). Returns 0; PL_EPOCH_END once
 * when the epoch has no more batches (the next call starts the following
 * epoch); PL_EBUSY if the caller holds all device_buffers batches (and
 * config.max_device_buffers lets no more be added); or an
 * error that stays: a bad sample's under PL_ON_ERROR_FAIL, PL_ENODATA when
 * no sample of an epoch's order can be decoded (naming the epoch), or
 * PL_ECUDA when a CUDA call fails or the device fails under a copy (within
 * about 100 ms of the failure, never a wait for a batch that cannot come);
 * PL_ECLOSED if another thread destroys the loader while this call waits. */
PL_EXPORT int pl_loader_next(pl_loader *l, const pl_batch **out);

/* Give a batch back. On CUDA the device buffer is reused only after the
 * work queued on `stream` up to now (the caller's kernels reading it) has
 * completed; the host does not wait. `stream` must be a stream of the
 * loader's device (NULL: the legacy default stream of the loader's device,
 * cudaStreamPerThread: the calling thread's per-thread default stream of
 * it, whatever the calling thread's current device, which the call leaves
 * as it was); it is ignored on the host backend. The per-thread stream of
 * another thread cannot be named: release work queued there from that
 * thread, or on NULL (the legacy stream waits for every per-thread
 * stream). PL_EINVAL if b is not a batch of l that is held, or if `stream`
 * is capturing a CUDA graph (whose replays could not release this one
 * batch): the batch is then still the caller's, and the capture is left
 * intact. Otherwise the batch is no longer the caller's when the call
 * returns, whatever it returns. Where the release event cannot be recorded
 * on `stream` (a stream of another context or device), the host waits for
 * `stream` instead, so the ordering still holds, and the call succeeds
 * (a notice, once per loader, says so); if even that wait fails, PL_ECUDA:
 * the buffer is retired and pl_loader_next returns the error from then
 * on. The loader's own threads never break a CUDA graph capture of the
 * caller's, in any capture mode, nor does any call of this API (each runs
 * in CUDA's relaxed capture mode and restores the thread's own). */
PL_EXPORT int pl_loader_release(pl_loader *l, const pl_batch *b,
                                struct CUstream_st *stream);

/* pl_loader_release for a batch read on several streams (each DLPack
 * consumer's, say): the buffer is refilled only after the work queued so
 * far on every one of streams[0 .. n), 1 <= n <= PL_RELEASE_STREAMS_MAX,
 * each taken as pl_loader_release takes its `stream`. PL_EINVAL for n out
 * of range; otherwise as pl_loader_release. */
#define PL_RELEASE_STREAMS_MAX 8
PL_EXPORT int pl_loader_release_streams(pl_loader *l, const pl_batch *b,
                                        struct CUstream_st *const *streams,
                                        int n);

/* Make `stream` wait until b's pixels are on the device, without blocking
 * the host (cudaStreamWaitEvent on b->ready); b as pl_loader_next gave it
 * (a batch's pointer, not a copy). NULL, cudaStreamLegacy and
 * cudaStreamPerThread name the streams of the loader's device, whatever
 * the calling thread's current device, which the call leaves as it was.
 * PL_EINVAL if `stream` is capturing a CUDA graph (wait on a stream outside
 * the capture, and copy the batch into the graph's own inputs); the
 * capture is left intact. No-op on the host backend. */
PL_EXPORT int pl_batch_wait(const pl_batch *b, struct CUstream_st *stream);

/* ---------------------------------------------------------------------------
 * What a loader is */

/* What a loader is, once created. Thread safety: the caller's copy,
 * filled during the call and never touched after it. */
typedef struct pl_info {
    int64_t dataset_size;      /* files listed */
    int64_t samples_per_epoch; /* this rank's share, padding included */
    int64_t batches_per_epoch; /* batches in every epoch, on every rank and
                                  under every error policy */
    int32_t num_classes;
    int32_t batch_size, width, height, channels;
    int32_t format;      /* a pl_format */
    size_t sample_bytes; /* bytes of one output sample */
    size_t batch_bytes;  /* batch_size * sample_bytes (every view's) */
    int32_t backend;     /* a pl_backend */
    int32_t device;      /* CUDA ordinal, or -1 on the host backend */
    int32_t num_workers, prefetch, device_buffers;
    int32_t rank, world_size;
    int32_t memory; /* a pl_memory */
    int32_t pinned; /* 1 if the host ring is page-locked */
    /* "cuda device 0 (NVIDIA H100 80GB HBM3)" or "host (why)"; valid until
     * pl_loader_destroy. */
    const char *backend_name;
    int32_t gpu_normalize; /* 1 if float output is normalised on the GPU */
    int32_t channels_last; /* 1 if float output is [count][h][w][3] */
    /* The NUMA node the host ring was placed on: the GPU's (where its
     * pages go; pinned pages are allocated on it at create, pageable ones
     * as the workers first write them), or the node its first page fell
     * on when the GPU's was full; -1 when it was not placed: the host
     * backend, managed memory, a GPU whose node is not known (a machine of
     * one node), or a kernel that refused the memory policy (a node not
     * online; a container's seccomp filter), which a notice names. keep_host's
     * mirrors are placed the same way. */
    int32_t numa_node;
    /* The NUMA node of the GPU's PCI slot (sysfs), -1 where not known or
     * on the host backend. */
    int32_t gpu_numa_node;
    /* The decoder in use: PL_DECODE_GPU (JPEGs on the GPU, the rest on the
     * CPU) or PL_DECODE_CPU (config.decode cpu, or auto without a GPU
     * decoder). */
    int32_t decode;
    /* "nvJPEG 13.3.2 (hardware, GPU-hybrid)", or "cpu" and why the GPU's
     * is not used ("cpu (decode auto: libnvjpeg.so.13: cannot open shared
     * object file)"); valid until pl_loader_destroy. */
    const char *decoder_name;
    /* Device memory the GPU decoder took at create: its device slots
     * (prefetch x batch_size samples, as the workers write them) and its
     * tables; 0 with PL_DECODE_CPU. Its per-worker buffers grow with the
     * largest image met (pl_stats.gpu_decode_bytes). */
    uint64_t gpu_decode_bytes;
    /* The most slots the host ring may hold: config.prefetch, or under
     * PL_AUTO the bound it may grow to (pl_info.prefetch is then the 2 it
     * starts with). */
    int32_t prefetch_max;
    /* config.num_views (width, height and sample_bytes above are view 0's;
     * batch_bytes is every view's), or 1. */
    int32_t num_views;
} pl_info;

#define pl_loader_info(l, out) pl_loader_info_sized((l), (out), sizeof(pl_info))
PL_EXPORT int pl_loader_info_sized(const pl_loader *l, pl_info *out,
                                   size_t size);

/* The name of class `label` (the ImageFolder folder name; the decimal label
 * for a list file; the folder's own name for a flat folder). [out] *name,
 * valid until pl_loader_destroy. */
PL_EXPORT int pl_loader_class_name(const pl_loader *l, int32_t label,
                                   const char **name);

/* The file and label of dataset index `index`. [out] *path (may be NULL),
 * valid until pl_loader_destroy; [out] *label (may be NULL). A tar shard
 * sample's path ("shard.tar:member") is made the first time it is asked
 * for and kept until destroy, so the loader's memory grows with the
 * distinct indexes asked for (about the path's length each); PL_ENOMEM if
 * it cannot be made. Any thread. */
PL_EXPORT int pl_loader_sample(const pl_loader *l, int64_t index,
                               const char **path, int32_t *label);

/* The bytes of dataset index `index` as stored (the image file, or its tar
 * member), read now, into buf[0, cap); [out] *len: how many. With buf NULL
 * or cap too small nothing is copied, *len says how many bytes are needed
 * and PL_EINVAL is returned. PL_EIO / PL_ELIMIT (over max_file_bytes) /
 * PL_ENOTIMAGE (a tar key without an image) name the file. */
PL_EXPORT int pl_loader_read_sample(const pl_loader *l, int64_t index,
                                    void *buf, size_t cap, size_t *len);

/* The bytes of extra `extra` (config.extras' k-th name) of dataset index
 * `index`, read now, as pl_loader_read_sample reads the image: into
 * buf[0, cap), [out] *len. PL_ENOEXTRA (with *len 0) if the sample has
 * none; PL_EINVAL for an extra outside [0, pl_batch.num_extras). */
PL_EXPORT int pl_loader_read_extra(const pl_loader *l, int64_t index,
                                   int32_t extra, void *buf, size_t cap,
                                   size_t *len);

/* This rank's dataset indices for `epoch`, in delivery order when no sample
 * is skipped. [out] order[0 .. samples_per_epoch); n must be
 * pl_info.samples_per_epoch. */
PL_EXPORT int pl_loader_epoch_order(const pl_loader *l, int64_t epoch,
                                    int64_t *order, int64_t n);

/* ---------------------------------------------------------------------------
 * Where a loader stands */

/* [out] *state: where l stands: after the last batch pl_loader_next returned
 * (released or not), or at the start of the epoch after the last
 * PL_EPOCH_END. A loader created with config.resume pointing at it delivers
 * exactly the batches (bytes, labels, indices, epoch and batch numbers) l
 * would deliver next, whatever num_workers, prefetch, device_buffers,
 * memory or device, without decoding what came before. Each rank saves and
 * resumes its own (under PL_ON_ERROR_SKIP where a rank stands depends on
 * the bad files it met). */
PL_EXPORT int pl_loader_state(const pl_loader *l, pl_state *state);

/* What a state says: [out] its epoch, the index of the next batch in it,
 * and the position in this rank's epoch order where that batch starts
 * (from samples_per_epoch on, the order again from its start: the samples
 * that stand in for skipped ones). Any may be NULL. PL_EINVAL if the bytes
 * are not a state this version reads (damaged, or of another format). */
PL_EXPORT int pl_state_get(const pl_state *state, int64_t *epoch,
                           int64_t *batch, int64_t *position);

/* ---------------------------------------------------------------------------
 * What a loader did */

/* Counters since create; times are summed over threads, in nanoseconds.
 * Thread safety: the caller's copy, a snapshot taken during the call. */
typedef struct pl_stats {
    uint64_t images_decoded; /* samples written to the ring */
    uint64_t images_failed;  /* bad samples (each time one was met) */
    uint64_t batches;        /* batches handed to the caller */
    uint64_t bytes_read;     /* image bytes read from files */
    uint64_t bytes_copied;   /* bytes copied to device buffers */
    uint64_t pinned_bytes;   /* page-locked host memory held now */
    uint64_t ns_read;        /* workers: reading files */
    uint64_t ns_decode;      /* workers: entropy decoding, IDCT, colour */
    uint64_t ns_augment;     /* workers: crop, resize, flip, format */
    uint64_t ns_copy;        /* prefetcher: issuing or doing copies */
    uint64_t ns_wait;        /* caller: blocked in pl_loader_next */
    uint64_t ns_h2d;         /* CUDA: GPU time of the host-to-device copies
                                timed and completed so far (0 on the host
                                backend); a copy issued while eight timed
                                ones are in flight is not timed */
    uint64_t bytes_h2d;      /* CUDA: bytes of those same copies, so
                                bytes_h2d / ns_h2d is the copy bandwidth */
    uint64_t images_warned;  /* decoded despite libjpeg warnings */
    uint64_t device_buffers; /* now: config.device_buffers, plus those
                                added while the caller held them all
                                (config.max_device_buffers) */
    /* Where the pipeline stalls, summed over the threads that waited:
     * workers with no ring slot to fill (every slot holds a batch whose
     * copy has not completed: the copies wait for device buffers, which
     * wait for the caller's releases), and the prefetcher with no device
     * buffer to copy into (the caller holds or has not released them). */
    uint64_t ns_slot_wait;   /* workers: waiting for a free ring slot */
    uint64_t ns_buffer_wait; /* prefetcher: waiting for a device buffer */
    /* PL_DECODE_GPU: JPEGs decoded on the GPU (counted in images_decoded
     * too), and those offered to it that nvJPEG refused, decoded by the
     * workers instead; the device memory the GPU decoder holds now. */
    uint64_t images_gpu;
    uint64_t images_gpu_declined;
    uint64_t gpu_decode_bytes;
    /* Workers taking samples now: num_workers, or under PL_AUTO the count
     * the loader settled on (pl_info.num_workers threads exist). */
    uint64_t workers_active;
    /* Host ring slots now: config.prefetch, or under PL_AUTO the count it
     * grew to (pl_info.prefetch_max at most). */
    uint64_t prefetch_active;
} pl_stats;

#define pl_loader_stats(l, out)                                                \
    pl_loader_stats_sized((l), (out), sizeof(pl_stats))
PL_EXPORT int pl_loader_stats_sized(const pl_loader *l, pl_stats *out,
                                    size_t size);

/* One bad file, or one decoded despite libjpeg warnings (code 0: corrupt
 * data or a premature end that libjpeg papered over; accepted unless
 * config.strict), as recorded the first time it was met. Thread safety:
 * the caller's copy; its strings are the loader's, read-only, valid until
 * pl_loader_destroy. */
typedef struct pl_failure {
    int64_t index;      /* dataset index */
    const char *path;   /* valid until pl_loader_destroy */
    int32_t code;       /* PL_E*, or 0 for a file decoded with warnings */
    const char *reason; /* "not an image pinload reads (BMP data)", or the
                           first warning; valid until pl_loader_destroy */
    int64_t count;      /* times met so far */
    int32_t warnings;   /* libjpeg warnings in the rows decoded, first time */
} pl_failure;

/* Copy up to `cap` failure records, from the `first`-th recorded, to
 * out[]; [out] *n: how many were copied. Records are in the order met. */
#define pl_loader_failures(l, first, out, cap, n)                              \
    pl_loader_failures_sized((l), (first), (out), (cap), (n),                  \
                             sizeof(pl_failure))
PL_EXPORT int pl_loader_failures_sized(const pl_loader *l, size_t first,
                                       pl_failure *out, size_t cap, size_t *n,
                                       size_t size);

/* ---------------------------------------------------------------------------
 * Decoding one file: the loader's own decoder, without crop or resize */

/* A decoded image. Thread safety: the caller's; calls on different images
 * may run at once in any threads. */
typedef struct pl_image {
    int32_t width, height;
    uint8_t *pixels; /* RGB, [height][width][3], owned by the pl_image */
} pl_image;

/* Decode the JPEG, PNG or WebP file at `path` (the bytes tell which) to
 * RGB at its own size (grayscale replicated, CMYK/YCCK converted, palettes
 * expanded, alpha dropped: Pillow's convert("RGB")), with
 * pl_config_default()'s limits.
 * [out] *img, to be freed with pl_image_free. */
#define pl_image_load(path, img)                                               \
    pl_image_load_sized((path), (img), sizeof(pl_image))
PL_EXPORT int pl_image_load_sized(const char *path, pl_image *img, size_t size);

/* The same for the image in buf[0, len) (pl_loader_read_sample's bytes,
 * say); buf may be NULL when len is 0 (an empty file: PL_ENOTIMAGE, "not
 * an image pinload reads (empty)"). */
#define pl_image_decode(buf, len, img)                                         \
    pl_image_decode_sized((buf), (len), (img), sizeof(pl_image))
PL_EXPORT int pl_image_decode_sized(const void *buf, size_t len, pl_image *img,
                                    size_t size);

/* Free img's pixels and zero it; NULL and zeroed images are no-ops. */
PL_EXPORT void pl_image_free(pl_image *img);

#ifdef __cplusplus
}
#endif

#endif
