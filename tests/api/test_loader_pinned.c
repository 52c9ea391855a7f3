/* Pinned memory and where it lives, through the public API. The bound:
 * the page-locked memory a loader takes (the ring when pinned, keep_host's
 * mirrors) times the ranks of its node (LOCAL_WORLD_SIZE, as torchrun sets
 * it) must fit in half of what the node may use, the machine's memory or
 * the cgroup's limit; past it pl_loader_create is PL_ENOMEM naming the
 * numbers, and nothing is allocated. The place: pl_info.numa_node and
 * gpu_numa_node, -1 on the host backend; on (simulated) CUDA the GPU's
 * node from a fake sysfs (PINLOAD_SYSFS_ROOT). The machine's memory is
 * faked with PINLOAD_MEMORY_TOTAL. Each test runs in its own process, so
 * the environment it sets touches no other. */
#include <stdarg.h>
#include <sys/stat.h>

#include "testloader.h"

#define MIB (1ull << 20)

/* An empty fake sysfs (no cgroup limit, no device node) in root. */
static void fake_sysfs(char root[64])
{
    tu_tmpdir(root);
    cr_assert_eq(setenv("PINLOAD_SYSFS_ROOT", root, 1), 0);
}

static void fake_file(const char *root, const char *rel, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    tu_write_file(p, text, strlen(text));
}

/* Rank 0 of `ranks` on this node, as torchrun says it. */
static void torchrun(int ranks)
{
    char n[16];
    snprintf(n, sizeof n, "%d", ranks);
    cr_assert_eq(setenv("RANK", "0", 1), 0);
    cr_assert_eq(setenv("WORLD_SIZE", n, 1), 0);
    cr_assert_eq(setenv("LOCAL_RANK", "0", 1), 0);
    cr_assert_eq(setenv("LOCAL_WORLD_SIZE", n, 1), 0);
}

/* 64 samples of 224 x 224 x 3: 9.2 MiB a batch; ranks from the
 * environment. */
static void big_batches(pl_config *c, int prefetch)
{
    c->batch_size = 64;
    c->width = c->height = 224;
    c->prefetch = prefetch;
    c->rank = c->world_size = PL_FROM_ENV;
}

static void assert_has(const char *what)
{
    cr_assert(strstr(pl_last_error(), what), "no \"%s\" in \"%s\"", what,
              pl_last_error());
}

static void assert_refused(const pl_config *c)
{
    pl_loader *l = (pl_loader *)1;
    const int rc = pl_loader_create(c, &l);
    cr_assert_eq(rc, PL_ENOMEM, "%s: %s", pl_err_name(rc), pl_last_error());
    cr_assert_null(l);
}

Test(loader_pinned, past_half_the_nodes_memory_over_its_ranks_is_refused,
     .timeout = TIMEOUT)
{
    char root[64], sys[64];
    pl_config c;
    fx_tree(root, &c, 12, 2);
    fake_sysfs(sys);
    cr_assert_eq(setenv("PINLOAD_MEMORY_TOTAL", "1073741824", 1), 0);
    torchrun(8);
    big_batches(&c, 8);
    /* 8 ranks x 8 slots x 9.2 MiB = 588 MiB, over half of 1 GiB. */
    assert_refused(&c);
    assert_has("pl_loader_create: 8 ranks on this node x 73.5 MiB of pinned "
               "memory (the ring: prefetch 8 x 9.2 MiB batches) = 588.0 MiB, "
               "over 512.0 MiB, half of this node's 1.00 GiB of memory");
    assert_has("config.prefetch or config.batch_size, or set config.memory "
               "to PL_MEMORY_PAGEABLE");

    /* The ranks are what tips it: one rank's 73.5 MiB fits. */
    torchrun(1);
    pl_loader *l = create(&c);
    pl_loader_destroy(l);
    /* So does the node's 8 x 2 x 9.2 MiB = 147 MiB. */
    torchrun(8);
    c.prefetch = 2;
    l = create(&c);
    pl_info info;
    cr_assert_eq(pl_loader_info(l, &info), 0);
    cr_assert_eq(info.world_size, 8);
    cr_assert_eq(info.prefetch, 2);
    fx_done(l, root);
    tu_rm_rf(sys);
}

Test(loader_pinned, the_cgroups_limit_bounds_it_below_the_machines,
     .timeout = TIMEOUT)
{
    char root[64], sys[64];
    pl_config c;
    fx_tree(root, &c, 12, 2);
    fake_sysfs(sys);
    torchrun(8);
    big_batches(&c, 8);
    /* The machine has its own memory (24 GiB here); the cgroup 1 GiB. */
    fake_file(sys, "fs/cgroup/memory.max", "1073741824\n");
    assert_refused(&c);
    assert_has("= 588.0 MiB, over 512.0 MiB, half of the 1.00 GiB this "
               "process may use (cgroup memory.max; the machine has ");
    /* cgroup v1's file, where v2's is not. */
    char v2[128];
    snprintf(v2, sizeof v2, "%s/fs/cgroup/memory.max", sys);
    cr_assert_eq(remove(v2), 0);
    fake_file(sys, "fs/cgroup/memory/memory.limit_in_bytes", "1073741824\n");
    assert_refused(&c);
    assert_has("(cgroup v1 memory.limit_in_bytes; the machine has ");
    /* v1's "no limit" value is none. */
    fake_file(sys, "fs/cgroup/memory/memory.limit_in_bytes",
              "9223372036854771712\n");
    pl_loader *l = create(&c);
    fx_done(l, root);
    tu_rm_rf(sys);
}

/* A pageable ring locks nothing: not bounded. keep_host's mirrors are
 * locked whatever the ring (on CUDA; on the host backend the batch is in
 * host memory already, and there are none). */
Test(loader_pinned, pageable_rings_are_free_but_keep_host_mirrors_count,
     .timeout = TIMEOUT)
{
    char root[64], sys[64];
    pl_config c;
    fx_tree(root, &c, 12, 2);
    fake_sysfs(sys);
    cr_assert_eq(setenv("PINLOAD_MEMORY_TOTAL", "1073741824", 1), 0);
    torchrun(8);
    big_batches(&c, 8);
    c.memory = PL_MEMORY_PAGEABLE;
    pl_loader *l = create(&c);
    pl_loader_destroy(l);
    c.keep_host = 1;
    c.device_buffers = 8;
    if (tu_on_cuda()) {
        assert_refused(&c);
        assert_has("8 ranks on this node x 73.5 MiB of pinned memory "
                   "(keep_host: 8 x 9.2 MiB mirrors, one per device buffer) "
                   "= 588.0 MiB");
        assert_has("Lower config.prefetch or config.batch_size, set "
                   "config.keep_host to 0");
        cr_assert_null(strstr(pl_last_error(), "PL_MEMORY_PAGEABLE"),
                       "the ring is pageable: %s", pl_last_error());
    } else {
        l = create(&c);
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
    tu_rm_rf(sys);
}

static int node_online(int node)
{
    char p[96];
    snprintf(p, sizeof p, "/sys/devices/system/node/node%d", node);
    struct stat st;
    return stat(p, &st) == 0;
}

/* Creates a loader over root with the fake sysfs saying `node` for the
 * (simulated) device 0's slot, 0000:0d:00.0; [out] its info and log. */
static pl_loader *with_gpu_node(pl_config *c, const char *sys, const char *node,
                                tu_log *log, pl_info *info)
{
    fake_file(sys, "bus/pci/devices/0000:0d:00.0/numa_node", node);
    memset(log, 0, sizeof *log);
    pthread_mutex_init(&log->mu, NULL);
    c->log = tu_keep_log;
    c->log_ctx = log;
    pl_loader *l = create(c);
    cr_assert_eq(pl_loader_info(l, info), 0);
    return l;
}

Test(loader_pinned, info_says_which_numa_node_the_ring_is_on,
     .timeout = TIMEOUT)
{
    char root[64], sys[64];
    pl_config c;
    fx_tree(root, &c, 12, 2);
    fake_sysfs(sys);
    tu_log log;
    pl_info info;
    pl_loader *l = with_gpu_node(&c, sys, "0\n", &log, &info);
    if (!tu_on_cuda()) { /* no GPU, no node to be near */
        cr_assert_eq(info.numa_node, -1);
        cr_assert_eq(info.gpu_numa_node, -1);
        cr_assert_null(strstr(log.text, "NUMA"), "%s", log.text);
        fx_done(l, root);
        tu_rm_rf(sys);
        return;
    }
    /* The GPU's node, which this machine has: the ring is on it. */
    cr_assert_eq(info.gpu_numa_node, 0);
    cr_assert_eq(info.numa_node, 0);
    cr_assert(strstr(log.text, "pinned on NUMA node 0 (the GPU's)"), "%s",
              log.text);
    pl_loader_destroy(l);

    /* One this machine may lack: a notice, and the loader works. */
    l = with_gpu_node(&c, sys, "1\n", &log, &info);
    cr_assert_eq(info.gpu_numa_node, 1);
    if (node_online(1)) {
        cr_assert_eq(info.numa_node, 1);
    } else {
        cr_assert_eq(info.numa_node, -1);
        cr_assert(strstr(log.text, "host memory for CUDA device 0 is not "
                                   "placed on its NUMA node 1: "
                                   "set_mempolicy: Invalid argument"),
                  "%s", log.text);
        cr_assert(strstr(log.text, "not placed on the GPU's NUMA node 1"), "%s",
                  log.text);
    }
    run r;
    run_epoch(l, 0, &r);
    cr_assert_eq(r.n, 12, "every sample delivered");
    run_free(&r);
    pl_loader_destroy(l);

    /* No node known (a machine of one): nothing placed, nothing said. */
    l = with_gpu_node(&c, sys, "-1\n", &log, &info);
    cr_assert_eq(info.gpu_numa_node, -1);
    cr_assert_eq(info.numa_node, -1);
    cr_assert_null(strstr(log.text, "NUMA"), "%s", log.text);
    fx_done(l, root);
    tu_rm_rf(sys);
}
