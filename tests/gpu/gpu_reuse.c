/* The CUDA-path suite (test_gpu.c): a device buffer and keep_host's
 * mirror are refilled only after the work queued on the release stream;
 * the mirrors on the GPU's NUMA node; destroy with batches held. */
#include <linux/mempolicy.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gpu_test.h"

/* ---- release orders reuse ---- */

/* With one device buffer, the next batch must not land in it before the
 * caller's slow kernel has read the current one: release is stream-ordered
 * and the host never waits. */
outcome release_orders_buffer_reuse(const char *data, const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    cudaStream_t stream = NULL;
    uint8_t **copies = NULL, *h = NULL;
    int ncopies = 0;
    pl_config cfg = base_config(data);
    cfg.device_buffers = 1;
    cfg.prefetch = 3;
    if (!host_reference(cfg, 1, &ref))
        goto done;
    cfg.device = 0;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const long long cycles = cycles_in_ms(20);
    CHECK(cycles > 0, "no clock rate for device 0");
    copies = calloc((size_t)ref.n, sizeof *copies);
    h = malloc(ref.batch_bytes);
    CHECK(copies && h, "out of memory");
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CHECK(ncopies < ref.n, "more batches than the host gave");
        CUDA_OK(cudaMalloc((void **)&copies[ncopies], b->bytes));
        CHECK(pl_batch_wait(b, stream) == 0, "%s", pl_last_error());
        CUDA_OK(
            gk_slow_copy(stream, b->data, copies[ncopies], b->bytes, cycles));
        ncopies++;
        CHECK(pl_loader_release(l, b, stream) == 0, "%s", pl_last_error());
    }
    CHECK(rc == PL_EPOCH_END, "%s", pl_last_error());
    CUDA_OK(cudaStreamSynchronize(stream));
    CHECK(ncopies == ref.n, "%d batches, host gave %d", ncopies, ref.n);
    for (int k = 0; k < ncopies; k++) {
        CUDA_OK(cudaMemcpy(h, copies[k], ref.size[k], cudaMemcpyDeviceToHost));
        CHECK(memcmp(h, ref_bytes(&ref, k), ref.size[k]) == 0,
              "batch %d was overwritten before the caller's kernel read it "
              "(%zu bytes differ)",
              k, bytes_differing(h, ref_bytes(&ref, k), ref.size[k]));
    }
    result = PASSED;
done:
    if (stream)
        cudaStreamSynchronize(stream);
    pl_loader_destroy(l);
    for (int k = 0; k < ncopies; k++)
        cudaFree(copies[k]);
    free(copies);
    free(h);
    if (stream)
        cudaStreamDestroy(stream);
    ref_free(&ref);
    return result;
}

outcome keep_host_mirrors_the_batch(const char *data, const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    pl_config cfg = base_config(data);
    if (!host_reference(cfg, 1, &ref))
        goto done;
    cfg.device = 0;
    cfg.keep_host = 1;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    const pl_batch *b;
    int k = 0, rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        CHECK(k < ref.n, "more batches than the host gave");
        CHECK(b->host != NULL && b->host != b->data, "no host mirror");
        struct cudaPointerAttributes attr;
        CUDA_OK(cudaPointerGetAttributes(&attr, b->host));
        CHECK(attr.type == cudaMemoryTypeHost, "mirror is not pinned host");
        CHECK(memcmp(b->host, ref_bytes(&ref, k), b->bytes) == 0,
              "batch %d host mirror differs", k);
        pl_loader_release(l, b, NULL);
        k++;
    }
    CHECK(rc == PL_EPOCH_END && k == ref.n, "rc %d, %d batches", rc, k);
    result = PASSED;
done:
    pl_loader_destroy(l);
    ref_free(&ref);
    return result;
}

/* keep_host's mirror is the caller's until the work queued on the release
 * stream is done, as the device buffer is: a copy out of b->host queued
 * behind a slow kernel, then pl_loader_release on that stream, must read
 * that batch's bytes even though the caller goes on at once taking and
 * releasing the next batches (on another stream) and one device buffer
 * (and so one mirror) serves them all. */
outcome keep_host_mirror_waits_for_the_release_stream(const char *data,
                                                      const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    ref_batches ref;
    pl_loader *l = NULL;
    cudaStream_t slow = NULL, fast = NULL;
    uint8_t **copies = NULL, *h = NULL;
    pl_config cfg = base_config(data);
    cfg.keep_host = 1;
    cfg.device_buffers = 1;
    cfg.prefetch = 2;
    if (!host_reference(cfg, 2, &ref))
        goto done;
    cfg.device = 0;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    CUDA_OK(cudaStreamCreateWithFlags(&slow, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&fast, cudaStreamNonBlocking));
    const long long cycles = cycles_in_ms(20);
    CHECK(cycles > 0, "no clock rate for device 0");
    copies = calloc((size_t)ref.n, sizeof *copies);
    h = malloc(ref.batch_bytes);
    CHECK(copies && h, "out of memory");
    /* Every third batch is read through the mirror, allocated beforehand
     * (cudaMalloc may synchronise, which would hide the race). */
    for (int k = 0; k < ref.n; k += 3)
        CUDA_OK(cudaMalloc((void **)&copies[k], ref.batch_bytes));
    int k = 0;
    for (int e = 0; e < 2; e++) {
        const pl_batch *b;
        int rc;
        while ((rc = pl_loader_next(l, &b)) == 0) {
            CHECK(k < ref.n, "more batches than the host gave");
            CHECK(b->host != NULL && b->host != b->data, "no host mirror");
            if (!copies[k]) {
                CHECK(pl_loader_release(l, b, fast) == 0, "%s",
                      pl_last_error());
                k++;
                continue;
            }
            /* A pageable mirror would be read at the call (staged), and
             * the test would show nothing. */
            struct cudaPointerAttributes attr;
            CUDA_OK(cudaPointerGetAttributes(&attr, b->host));
            CHECK(attr.type == cudaMemoryTypeHost,
                  "the mirror is not pinned host memory (type %d)",
                  (int)attr.type);
            CUDA_OK(gk_slow_copy(slow, NULL, NULL, 0, cycles));
            CUDA_OK(cudaMemcpyAsync(copies[k], b->host, b->bytes,
                                    cudaMemcpyHostToDevice, slow));
            CHECK(pl_loader_release(l, b, slow) == 0, "%s", pl_last_error());
            k++;
        }
        CHECK(rc == PL_EPOCH_END, "%s", pl_last_error());
    }
    CHECK(k == ref.n, "%d batches, host gave %d", k, ref.n);
    CUDA_OK(cudaStreamSynchronize(slow));
    for (int i = 0; i < ref.n; i += 3) {
        CUDA_OK(cudaMemcpy(h, copies[i], ref.size[i], cudaMemcpyDeviceToHost));
        CHECK(memcmp(h, ref_bytes(&ref, i), ref.size[i]) == 0,
              "batch %d: the copy queued from b->host before its release read "
              "a refilled mirror (%zu of %zu bytes differ)",
              i, bytes_differing(h, ref_bytes(&ref, i), ref.size[i]),
              ref.size[i]);
    }
    result = PASSED;
done:
    if (slow)
        cudaStreamSynchronize(slow);
    pl_loader_destroy(l);
    for (int i = 0; copies && i < ref.n; i++)
        cudaFree(copies[i]);
    free(copies);
    free(h);
    if (slow)
        cudaStreamDestroy(slow);
    if (fast)
        cudaStreamDestroy(fast);
    ref_free(&ref);
    return result;
}

outcome destroy_with_batches_held(const char *data, const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    pl_loader *l = NULL;
    pl_config cfg = base_config(data);
    cfg.device = 0;
    for (int held = 0; held <= 2; held++) {
        CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
        for (int i = 0; i < held; i++) {
            const pl_batch *b;
            CHECK(pl_loader_next(l, &b) == 0, "%s", pl_last_error());
        }
        pl_loader_destroy(l);
        l = NULL;
    }
    result = PASSED;
done:
    pl_loader_destroy(l);
    return result;
}

/* ---- where host memory lives ---- */

/* The NUMA node of device 0's slot, read here as pinload should read it
 * (sysfs, from the bus id), or -1. */
static int sysfs_node_of_device0(void)
{
    char bus[32], path[128], line[16] = "";
    unsigned d, b, s, f;
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, 0) != cudaSuccess ||
        sscanf(bus, "%x:%x:%x.%x", &d, &b, &s, &f) != 4)
        return -1;
    snprintf(path, sizeof path,
             "/sys/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", d, b, s, f);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    const int ok = fgets(line, sizeof line, fp) != NULL;
    fclose(fp);
    return ok ? atoi(line) : -1;
}

/* The notices of a loader, kept for a failing check to print. */
static void keep_notices(void *ctx, pl_log_level level, const char *msg)
{
    (void)level;
    char *buf = ctx;
    const size_t n = strlen(buf);
    snprintf(buf + n, 4096 - n, "  %s\n", msg);
}

/* pl_info says the GPU's node as sysfs does; the ring and keep_host's
 * mirrors are placed on it (a mirror's page, asked with move_pages, lies
 * there where the kernel can tell), and create leaves the calling thread's
 * memory policy as it found it. On one node there is nothing to place. */
outcome host_memory_on_the_gpus_numa_node(const char *data, const void *arg)
{
    (void)arg;
    outcome result = FAILED;
    static char notices[4096];
    notices[0] = '\0';
    const int want = sysfs_node_of_device0();
    pl_config cfg = base_config(data);
    cfg.device = 0;
    cfg.keep_host = 1;
    cfg.log = keep_notices;
    cfg.log_ctx = notices;
    pl_loader *l = NULL;
    CHECK(pl_loader_create(&cfg, &l) == 0, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    printf("  sysfs: node %d; pl_info: gpu_numa_node %d, numa_node %d\n%s",
           want, info.gpu_numa_node, info.numa_node, notices);
    CHECK(info.gpu_numa_node == want, "gpu_numa_node %d, sysfs %d",
          info.gpu_numa_node, want);
    int mode = -1;
    CHECK(syscall(SYS_get_mempolicy, &mode, NULL, 0ul, NULL, 0ul) == 0 &&
              mode == MPOL_DEFAULT,
          "the caller's policy is %d after create", mode);
    if (want < 0) {
        CHECK(info.numa_node == -1, "numa_node %d", info.numa_node);
        result = SKIPPED;
        snprintf(skip_reason, sizeof skip_reason,
                 "sysfs gives device 0 no NUMA node (one node): nothing to "
                 "place");
        goto done;
    }
    CHECK(info.numa_node == want, "ring on node %d, not the GPU's %d",
          info.numa_node, want);
    const pl_batch *b;
    CHECK(pl_loader_next(l, &b) == 0, "%s", pl_last_error());
    void *page = (void *)((uintptr_t)b->host & ~(uintptr_t)4095);
    int status = -1;
    const long r = syscall(SYS_move_pages, 0, 1ul, &page, NULL, &status, 0);
    printf("  the mirror's first page: move_pages %ld, status %d\n", r, status);
    CHECK(r != 0 || status < 0 || status == want,
          "the mirror's page is on node %d, not %d", status, want);
    pl_loader_release(l, b, NULL);
    result = PASSED;
done:
    pl_loader_destroy(l);
    return result;
}
