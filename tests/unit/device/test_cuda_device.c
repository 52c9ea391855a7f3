/* The CUDA backend on the simulated runtime (tests/cudasim): which device
 * a loader runs on. AUTO is the caller's current device, an explicit or
 * local-rank ordinal is used as given, no call moves the caller's thread,
 * an ordinal that cannot be had is an error, and managed memory needs
 * concurrent managed access. Built only by `make CUDA=sim`. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "cudasim.h"
#include "pinload.h"
#include "testcuda.h"
#include "testsim.h"
#include "testutil.h"

#define TIMEOUT 120

/* ---- which device ---- */

static int current_device(void)
{
    int d = -1;
    cr_assert_eq(cudaGetDevice(&d), cudaSuccess);
    return d;
}

/* One epoch through every call a training loop makes, checking after each
 * that the calling thread is still on `want`; releases on s, a stream of
 * the loader's device. */
static void run_epoch_on(pl_loader *l, int want, cudaStream_t s)
{
    const pl_batch *b;
    int rc, n = 0;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        cr_assert_eq(current_device(), want, "after next");
        uint8_t *px = malloc(b->bytes);
        tu_batch_pixels(b, px);
        free(px);
        cr_assert_eq(pl_loader_release(l, b, s), 0, "%s", pl_last_error());
        cr_assert_eq(current_device(), want, "after release");
        n++;
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    cr_assert_gt(n, 0);
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(current_device(), want, "after stats");
}

/* AUTO is the calling thread's current device, as cudaSetDevice (or
 * torch.cuda.set_device) left it; an explicit ordinal is used as given.
 * Either way no call moves the caller's thread to another device. */
Test(cuda, auto_is_the_callers_device_and_no_call_moves_the_caller,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    for (int k = 0; k < 3; k++) {
        const int thread_dev = k == 0 ? 1 : 0;
        c.device = k == 0 ? PL_DEVICE_AUTO : k == 1 ? 1 : 0;
        const int want = k == 0 ? 1 : c.device;
        cudaStream_t s; /* the consumer's, on the loader's device */
        cr_assert_eq(cudaSetDevice(want), cudaSuccess);
        cr_assert_eq(cudaStreamCreate(&s), cudaSuccess);
        cr_assert_eq(cudaSetDevice(thread_dev), cudaSuccess);
        pl_loader *l = create(&c);
        cr_assert_eq(current_device(), thread_dev, "after create");
        pl_info in;
        pl_loader_info(l, &in);
        cr_assert_eq(in.device, want, "case %d", k);
        const pl_batch *b;
        cr_assert_eq(pl_loader_next(l, &b), 0);
        struct cudaPointerAttributes at;
        cr_assert_eq(cudaPointerGetAttributes(&at, b->data), cudaSuccess);
        cr_assert_eq(at.device, want, "the batch lives on device %d", want);
        cr_assert_eq(pl_loader_release(l, b, s), 0, "%s", pl_last_error());
        /* NULL is the loader's device's legacy stream, wherever the
         * caller's thread is. */
        cr_assert_eq(pl_loader_next(l, &b), 0);
        cr_assert_eq(pl_loader_release(l, b, NULL), 0, "%s", pl_last_error());
        cr_assert_eq(current_device(), thread_dev, "after a NULL release");
        run_epoch_on(l, thread_dev, s);
        pl_loader_destroy(l);
        cr_assert_eq(current_device(), thread_dev, "after destroy");
        cr_assert_eq(cudaStreamDestroy(s), cudaSuccess);
    }
    assert_nothing_live("after the loaders");
    tu_rm_rf(root);
}

/* PL_DEVICE_LOCAL_RANK: the launcher's local rank is the ordinal. */
Test(cuda, local_rank_device_follows_the_launcher, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    c.device = PL_DEVICE_LOCAL_RANK;
    c.rank = PL_FROM_ENV;
    c.world_size = PL_FROM_ENV;
    cr_assert_eq(setenv("RANK", "3", 1), 0);
    cr_assert_eq(setenv("WORLD_SIZE", "4", 1), 0);
    cr_assert_eq(setenv("LOCAL_RANK", "1", 1), 0);
    cr_assert_eq(setenv("LOCAL_WORLD_SIZE", "2", 1), 0);
    pl_loader *l = create(&c);
    pl_info in;
    pl_loader_info(l, &in);
    cr_assert_eq(in.device, 1);
    cr_assert_eq(in.rank, 3);
    cr_assert_eq(current_device(), 0, "the caller's device is kept");
    pl_loader_destroy(l);
    cr_assert_eq(setenv("LOCAL_RANK", "2", 1), 0);
    cr_assert_eq(setenv("LOCAL_WORLD_SIZE", "3", 1), 0);
    pl_loader *none = NULL;
    cr_assert_eq(pl_loader_create(&c, &none), PL_EINVAL, "only 2 devices");
    cr_assert_not_null(strstr(pl_last_error(), "CUDA device 2 requested"), "%s",
                       pl_last_error());
    tu_rm_rf(root);
}

/* A log callback keeping the notices. */
static char notices[4096];

static void keep_notices(void *ctx, pl_log_level level, const char *msg)
{
    (void)ctx;
    if (level == PL_LOG_NOTICE) {
        strncat(notices, msg, sizeof notices - strlen(notices) - 2);
        strcat(notices, "\n");
    }
}

/* Launchers that give each rank its GPU through CUDA_VISIBLE_DEVICES leave
 * every process one device, ordinal 0, whatever its local rank: that is
 * the one to use, with a notice saying so. With two devices visible, local
 * rank 2 is still an error (the previous test). */
Test(cuda, local_rank_with_one_visible_device_is_device_0, .timeout = TIMEOUT)
{
    cudasim_config sc;
    cudasim_get_config(&sc);
    sc.devices = 1;
    cr_assert_eq(cudasim_set_config(&sc), 0);
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    c.device = PL_DEVICE_LOCAL_RANK;
    c.log = keep_notices;
    c.rank = PL_FROM_ENV;
    c.world_size = PL_FROM_ENV;
    cr_assert_eq(setenv("RANK", "3", 1), 0);
    cr_assert_eq(setenv("WORLD_SIZE", "4", 1), 0);
    cr_assert_eq(setenv("LOCAL_RANK", "3", 1), 0);
    cr_assert_eq(setenv("LOCAL_WORLD_SIZE", "4", 1), 0);
    cr_assert_eq(setenv("CUDA_VISIBLE_DEVICES", "3", 1), 0);
    pl_loader *l = create(&c);
    pl_info in;
    pl_loader_info(l, &in);
    cr_assert_eq(in.device, 0);
    cr_assert_not_null(strstr(notices, "local rank 3, but this process sees "
                                       "one CUDA device "
                                       "(CUDA_VISIBLE_DEVICES=3): using it, "
                                       "device 0"),
                       "%s", notices);
    run_epoch_on(l, 0, NULL);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* An ordinal that cannot be had is an error naming it, never a silent
 * fall back to the host; only AUTO falls back, with its notice. */
Test(cuda, an_ordinal_that_cannot_be_had_is_an_error, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    c.device = 5;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_null(l);
    cr_assert_not_null(strstr(pl_last_error(), "config.device: CUDA device 5 "
                                               "requested, 2 present"),
                       "%s", pl_last_error());

    cudasim_config sc; /* now a machine without a GPU */
    cudasim_get_config(&sc);
    sc.devices = 0;
    cr_assert_eq(cudasim_set_config(&sc), 0);
    c.device = 0;
    cr_assert_eq(pl_loader_create(&c, &l), PL_ECUDA);
    cr_assert_not_null(strstr(pl_last_error(), "CUDA device 0 requested, but "
                                               "no CUDA-capable device"),
                       "%s", pl_last_error());
    c.device = PL_DEVICE_AUTO;
    l = create(&c);
    pl_info in;
    pl_loader_info(l, &in);
    cr_assert_eq(in.backend, PL_BACKEND_HOST);
    cr_assert_not_null(strstr(in.backend_name, "no CUDA-capable device"), "%s",
                       in.backend_name);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}

/* Managed memory is written by the workers while the device works, which
 * a device without concurrent managed access (Windows, WSL) forbids: the
 * loader refuses it there, naming the reason, rather than fault. */
Test(cuda, managed_memory_needs_concurrent_managed_access, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    sim_tree(root, &c, 12, 2);
    c.memory = PL_MEMORY_MANAGED;
    pl_loader *l = create(&c); /* the default: concurrent access */
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    pl_loader_release(l, b, NULL);
    pl_loader_destroy(l);

    cudasim_config sc;
    cudasim_get_config(&sc);
    sc.concurrent_managed = 0;
    cr_assert_eq(cudasim_set_config(&sc), 0);
    l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_null(l);
    cr_assert_not_null(strstr(pl_last_error(),
                              "config.memory: managed memory needs concurrent "
                              "managed access, which CUDA device 0 lacks"),
                       "%s", pl_last_error());
    c.memory = PL_MEMORY_PINNED;
    l = create(&c);
    pl_loader_destroy(l);
    tu_rm_rf(root);
}
