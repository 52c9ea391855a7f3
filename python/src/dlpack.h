/* The DLPack exchange structs, as the DLPack specification (v1.x) lays
 * them out: the ABI that torch.from_dlpack and numpy.from_dlpack read. Only
 * what pinload hands out is declared. */
#ifndef PINLOAD_PY_DLPACK_H
#define PINLOAD_PY_DLPACK_H

#include <stdint.h>

enum {
    PLDL_CPU = 1,  /* kDLCPU */
    PLDL_CUDA = 2, /* kDLCUDA */
};
enum {
    PLDL_INT = 0,    /* kDLInt */
    PLDL_UINT = 1,   /* kDLUInt */
    PLDL_FLOAT = 2,  /* kDLFloat */
    PLDL_BFLOAT = 4, /* kDLBfloat */
};
#define PLDL_FLAG_READ_ONLY (UINT64_C(1) << 0)
#define PLDL_FLAG_IS_COPIED (UINT64_C(1) << 1)

typedef struct {
    int32_t device_type;
    int32_t device_id;
} pldl_device;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} pldl_dtype;

typedef struct {
    void *data;
    pldl_device device;
    int32_t ndim;
    pldl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* in elements */
    uint64_t byte_offset;
} pldl_tensor;

/* Capsule "dltensor" (unversioned). */
typedef struct pldl_managed {
    pldl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct pldl_managed *self);
} pldl_managed;

/* Capsule "dltensor_versioned" (DLPack 1.0 and later). */
typedef struct {
    uint32_t major;
    uint32_t minor;
} pldl_version;

typedef struct pldl_managed_versioned {
    pldl_version version;
    void *manager_ctx;
    void (*deleter)(struct pldl_managed_versioned *self);
    uint64_t flags;
    pldl_tensor dl_tensor;
} pldl_managed_versioned;

#define PLDL_MAJOR 1
#define PLDL_MINOR 0

#endif
