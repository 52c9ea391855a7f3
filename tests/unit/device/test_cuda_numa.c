/* The CUDA backend on the simulated runtime: host memory placed on the
 * NUMA node of the device's PCI slot. The node comes from sysfs (a fake
 * tree under PINLOAD_SYSFS_ROOT) for the bus id cudaDeviceGetPCIBusId
 * gives; page-locked memory is allocated while the calling thread prefers
 * that node, and the thread gets its own policy back; a pageable range
 * prefers it before any worker touches it; managed memory is not placed;
 * a node that is not online, or a bus id the runtime will not give, is a
 * notice and the loader works. Built only by `make CUDA=sim`. */
#include <errno.h>
#include <linux/mempolicy.h>
#include <sys/syscall.h>

#include "../device/backend.h"
#include "../common/log.h"
#include "cudasim.h"
#include "pinload.h"
#include "testcuda.h"
#include "testsim.h"
#include "testutil.h"

#define TIMEOUT 120

/* A fake sysfs in root where the slot `bus` (sysfs's name) is on `node`. */
static void fake_node(char root[64], const char *bus, const char *node)
{
    if (!root[0])
        tu_tmpdir(root);
    char p[256];
    snprintf(p, sizeof p, "%s/bus/pci/devices/%s/numa_node", root, bus);
    tu_write_file(p, node, strlen(node));
    cr_assert_eq(setenv("PINLOAD_SYSFS_ROOT", root, 1), 0);
}

/* The calling thread's policy: mode and first node (-1: none). */
static void thread_policy(int *mode, int *node)
{
    unsigned long mask[16] = {0};
    cr_assert_eq(syscall(SYS_get_mempolicy, mode, mask, 1024ul, NULL, 0ul), 0,
                 "get_mempolicy: %s", strerror(errno));
    *node = -1;
    for (int i = 1023; i >= 0; i--)
        if (mask[i / 64] >> (i % 64) & 1)
            *node = i;
}

/* The policy of the range holding p (mbind's). */
static void range_policy(const void *p, int *mode, int *node)
{
    unsigned long mask[16] = {0};
    cr_assert_eq(syscall(SYS_get_mempolicy, mode, mask, 1024ul, p,
                         (unsigned long)MPOL_F_ADDR),
                 0, "get_mempolicy: %s", strerror(errno));
    *node = -1;
    for (int i = 1023; i >= 0; i--)
        if (mask[i / 64] >> (i % 64) & 1)
            *node = i;
}

static void numa_or_skip(void)
{
    int mode;
    if (syscall(SYS_get_mempolicy, &mode, NULL, 0ul, NULL, 0ul) != 0)
        cr_skip_test("get_mempolicy: %s", strerror(errno));
}

Test(cuda_numa, the_sims_bus_ids_are_per_device_and_settable)
{
    char bus[32];
    CUDA_OK(cudaDeviceGetPCIBusId(bus, sizeof bus, 0));
    cr_assert_str_eq(bus, "0000:0D:00.0");
    CUDA_OK(cudaDeviceGetPCIBusId(bus, sizeof bus, 1));
    cr_assert_str_eq(bus, "0000:1B:00.0");
    ASSERT_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, 2),
                cudaErrorInvalidDevice);
    ASSERT_CUDA(cudaDeviceGetPCIBusId(NULL, 16, 0), cudaErrorInvalidValue);
    (void)cudaGetLastError();
    cudasim_config sc;
    cudasim_get_config(&sc);
    snprintf(sc.pci_bus_id[1], sizeof sc.pci_bus_id[1], "0000:AB:00.0");
    cr_assert_eq(cudasim_set_config(&sc), 0);
    CUDA_OK(cudaDeviceGetPCIBusId(bus, sizeof bus, 1));
    cr_assert_str_eq(bus, "0000:AB:00.0");
    CUDA_OK(cudaDeviceGetPCIBusId(bus, 5, 1)); /* cut to len */
    cr_assert_str_eq(bus, "0000");
}

/* The backend of device `d`, with a logger into *log. */
static backend *open_device(int d, logger *lg, tu_log *log)
{
    memset(log, 0, sizeof *log);
    pthread_mutex_init(&log->mu, NULL);
    logger_init(lg, tu_keep_log, log);
    backend *b = NULL;
    cr_assert_eq(backend_open(&b, d, 0, lg), 0, "%s", pl_last_error());
    cr_assert_eq(b->kind, PL_BACKEND_CUDA);
    return b;
}

Test(cuda_numa, each_device_has_its_own_slots_node, .timeout = TIMEOUT)
{
    char sys[64] = "";
    fake_node(sys, "0000:0d:00.0", "1\n");
    fake_node(sys, "0000:1b:00.0", "0\n");
    logger lg;
    tu_log log;
    backend *b = open_device(0, &lg, &log);
    cr_assert_eq(b->numa_node, 1);
    backend_close(b);
    b = open_device(1, &lg, &log);
    cr_assert_eq(b->numa_node, 0);
    backend_close(b);
    /* Another bus id for device 1, with no sysfs entry: unknown. */
    cudasim_config sc;
    cudasim_get_config(&sc);
    snprintf(sc.pci_bus_id[1], sizeof sc.pci_bus_id[1], "0000:AB:00.0");
    cr_assert_eq(cudasim_set_config(&sc), 0);
    b = open_device(1, &lg, &log);
    cr_assert_eq(b->numa_node, -1);
    cr_assert_str_eq(log.text, "", "an unknown node says nothing");
    backend_close(b);
    backend *h = NULL;
    cr_assert_eq(backend_open(&h, PL_DEVICE_HOST, 0, &lg), 0);
    cr_assert_eq(h->numa_node, -1, "the host backend: no device, no node");
    backend_close(h);
    logger_fini(&lg);
    tu_rm_rf(sys);
}

/* cudaHostAlloc pins, so faults in, every page within the call: the
 * calling thread prefers the device's node for it, and only for it. */
Test(cuda_numa, pinned_memory_is_allocated_preferring_the_devices_node,
     .timeout = TIMEOUT)
{
    numa_or_skip();
    char sys[64] = "";
    fake_node(sys, "0000:0d:00.0", "0\n");
    /* The caller's own policy, which must come back. */
    unsigned long one = 1;
    cr_assert_eq(syscall(SYS_set_mempolicy, MPOL_BIND, &one, 2ul), 0);
    logger lg;
    tu_log log;
    backend *b = open_device(0, &lg, &log);
    cr_assert_eq(b->numa_node, 0);
    void *p;
    hostmem kind;
    int node = -2, mode, pnode;
    cr_assert_eq(
        b->ops->host_alloc(b, 3 << 20, PL_MEMORY_PINNED, &p, &kind, &node), 0,
        "%s", pl_last_error());
    cr_assert_eq(kind, HOSTMEM_PINNED);
    cr_assert_eq(node, 0);
    cr_assert_eq(cudasim_host_policy(p, &mode, &pnode), 0);
    cr_assert_eq(mode, MPOL_PREFERRED, "the policy during cudaHostAlloc");
    cr_assert_eq(pnode, 0);
    thread_policy(&mode, &pnode);
    cr_assert_eq(mode, MPOL_BIND, "the caller's policy, given back");
    cr_assert_eq(pnode, 0);
    b->ops->host_free(b, p, 3 << 20, kind);
    cr_assert_str_eq(log.text, "");

    /* Pageable memory is touched later, by the workers: the range itself
     * prefers the node, and forgets it when freed. */
    cr_assert_eq(
        b->ops->host_alloc(b, 3 << 20, PL_MEMORY_PAGEABLE, &p, &kind, &node),
        0);
    cr_assert_eq(kind, HOSTMEM_PAGEABLE);
    cr_assert_eq(node, 0);
    range_policy(p, &mode, &pnode);
    cr_assert_eq(mode, MPOL_PREFERRED);
    cr_assert_eq(pnode, 0);
    range_policy((char *)p + (3 << 20) - 1, &mode, &pnode);
    cr_assert_eq(mode, MPOL_PREFERRED, "to the last byte");
    thread_policy(&mode, &pnode);
    cr_assert_eq(mode, MPOL_BIND, "the thread's own untouched");
    b->ops->host_free(b, p, 3 << 20, kind);

    /* Managed memory moves to the device as it is used: not placed. */
    cr_assert_eq(
        b->ops->host_alloc(b, 1 << 20, PL_MEMORY_MANAGED, &p, &kind, &node), 0);
    cr_assert_eq(kind, HOSTMEM_MANAGED);
    cr_assert_eq(node, -1);
    b->ops->host_free(b, p, 1 << 20, kind);
    backend_close(b);
    logger_fini(&lg);
    tu_rm_rf(sys);
}

/* A node the kernel will not have (not online here, nor anywhere: 1023):
 * one notice, memory wherever it comes, the policy untouched. */
Test(cuda_numa, a_node_not_online_is_one_notice_and_no_failure,
     .timeout = TIMEOUT)
{
    numa_or_skip();
    char sys[64] = "";
    fake_node(sys, "0000:0d:00.0", "1023\n");
    logger lg;
    tu_log log;
    backend *b = open_device(0, &lg, &log);
    cr_assert_eq(b->numa_node, 1023);
    void *p[3];
    hostmem kind[3];
    int node[3], mode, pnode;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(b->ops->host_alloc(b, 1 << 20, PL_MEMORY_PINNED, &p[i],
                                        &kind[i], &node[i]),
                     0, "%s", pl_last_error());
        cr_assert_eq(node[i], -1);
        cr_assert_eq(cudasim_host_policy(p[i], &mode, &pnode), 0);
        cr_assert_eq(mode, MPOL_DEFAULT);
    }
    cr_assert_eq(b->ops->host_alloc(b, 1 << 20, PL_MEMORY_PAGEABLE, &p[2],
                                    &kind[2], &node[2]),
                 0);
    cr_assert_eq(node[2], -1);
    thread_policy(&mode, &pnode);
    cr_assert_eq(mode, MPOL_DEFAULT);
    cr_assert_str_eq(log.text,
                     "host memory for CUDA device 0 is not placed on its "
                     "NUMA node 1023: set_mempolicy: Invalid argument (is "
                     "the node online?)\n",
                     "one notice for every allocation: %s", log.text);
    for (int i = 0; i < 3; i++)
        b->ops->host_free(b, p[i], 1 << 20, kind[i]);
    backend_close(b);
    logger_fini(&lg);
    tu_rm_rf(sys);
}

/* The loader: the ring and keep_host's mirrors on the GPU's node, said in
 * pl_info and the create notice; the caller's thread keeps its policy. */
Test(cuda_numa, a_loaders_ring_and_mirrors_are_on_the_gpus_node,
     .timeout = TIMEOUT)
{
    numa_or_skip();
    char root[64], sys[64] = "";
    pl_config c;
    sim_tree(root, &c, 12, 2);
    fake_node(sys, "0000:0d:00.0", "0\n");
    tu_log log;
    memset(&log, 0, sizeof log);
    pthread_mutex_init(&log.mu, NULL);
    c.log = tu_keep_log;
    c.log_ctx = &log;
    c.keep_host = 1;
    c.gpu_normalize = 0;
    pl_loader *l = create(&c);
    pl_info in;
    cr_assert_eq(pl_loader_info(l, &in), 0);
    cr_assert_eq(in.numa_node, 0);
    cr_assert_eq(in.gpu_numa_node, 0);
    cr_assert(strstr(log.text, "pinned on NUMA node 0 (the GPU's)"), "%s",
              log.text);
    const pl_batch *bt;
    cr_assert_eq(pl_loader_next(l, &bt), 0, "%s", pl_last_error());
    int mode, pnode;
    cr_assert_eq(cudasim_host_policy(bt->host, &mode, &pnode), 0,
                 "the mirror is pinned memory");
    cr_assert_eq(mode, MPOL_PREFERRED);
    cr_assert_eq(pnode, 0);
    cr_assert_eq(pl_loader_release(l, bt, NULL), 0);
    thread_policy(&mode, &pnode);
    cr_assert_eq(mode, MPOL_DEFAULT, "create gave the caller its policy back");
    pl_loader_destroy(l);

    /* Pageable and managed rings: the first placed, the second not. */
    c.keep_host = 0;
    c.memory = PL_MEMORY_PAGEABLE;
    l = create(&c);
    cr_assert_eq(pl_loader_info(l, &in), 0);
    cr_assert_eq(in.numa_node, 0);
    pl_loader_destroy(l);
    c.memory = PL_MEMORY_MANAGED;
    memset(log.text, 0, sizeof log.text);
    l = create(&c);
    cr_assert_eq(pl_loader_info(l, &in), 0);
    cr_assert_eq(in.numa_node, -1);
    cr_assert_eq(in.gpu_numa_node, 0);
    cr_assert(strstr(log.text, "managed, not placed on the GPU's NUMA node 0"),
              "%s", log.text);
    pl_loader_destroy(l);
    tu_rm_rf(root);
    tu_rm_rf(sys);
}

/* A bus id the runtime will not give: the node is unknown, a notice says
 * so, and the loader works. */
Test(cuda_numa, no_bus_id_is_a_notice_not_an_error, .timeout = TIMEOUT)
{
    char root[64], sys[64] = "";
    pl_config c;
    sim_tree(root, &c, 12, 2);
    fake_node(sys, "0000:0d:00.0", "0\n");
    tu_log log;
    memset(&log, 0, sizeof log);
    pthread_mutex_init(&log.mu, NULL);
    c.log = tu_keep_log;
    c.log_ctx = &log;
    const cudasim_fault f = {.call = "cudaDeviceGetPCIBusId",
                             .nth = 1,
                             .error = cudaErrorNotSupported};
    cr_assert_geq(cudasim_inject(&f), 0);
    pl_loader *l = create(&c);
    pl_info in;
    cr_assert_eq(pl_loader_info(l, &in), 0);
    cr_assert_eq(in.gpu_numa_node, -1);
    cr_assert_eq(in.numa_node, -1);
    cr_assert(strstr(log.text, "CUDA device 0: cudaDeviceGetPCIBusId: "
                               "operation not supported: its NUMA node is "
                               "not known"),
              "%s", log.text);
    ASSERT_CUDA(cudaGetLastError(), cudaSuccess); /* not left pending */
    const pl_batch *bt;
    cr_assert_eq(pl_loader_next(l, &bt), 0, "%s", pl_last_error());
    cr_assert_eq(pl_loader_release(l, bt, NULL), 0);
    pl_loader_destroy(l);
    tu_rm_rf(root);
    tu_rm_rf(sys);
}
