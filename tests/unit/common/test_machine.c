/* common/machine.c: a PCI device's NUMA node from sysfs (a fake tree under
 * PINLOAD_SYSFS_ROOT), the memory the machine has and the cgroup's limit
 * on it (v2 and v1, the smallest on the way to the root), and the memory
 * policies: a thread's preferred node set and given back, a refused node
 * leaving the policy as it was, a range's preferred node. Each test runs
 * in its own process, so the environment and the thread's policy it
 * changes touch no other. */
#include <errno.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/machine.h"
#include "pinload.h"
#include "testutil.h"

#define GIB (1ull << 30)
#define MIB (1ull << 20)

/* A fake sysfs with `rel` holding `text`, under root (made if empty). */
static void fake(char root[64], const char *rel, const char *text)
{
    if (!root[0])
        tu_tmpdir(root);
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    tu_write_file(p, text, strlen(text));
    cr_assert_eq(setenv("PINLOAD_SYSFS_ROOT", root, 1), 0);
}

Test(machine, pci_node_reads_sysfs_for_the_bus_id_cuda_writes)
{
    char root[64] = "";
    fake(root, "bus/pci/devices/0000:0d:00.0/numa_node", "1\n");
    fake(root, "bus/pci/devices/10000:e1:00.0/numa_node", "3\n");
    /* CUDA writes capitals; sysfs names devices in small letters. */
    cr_assert_eq(machine_pci_node("0000:0D:00.0"), 1);
    cr_assert_eq(machine_pci_node("0000:0d:00.0"), 1);
    /* A domain written wider (NVML's 8 digits) is the same device. */
    cr_assert_eq(machine_pci_node("00000000:0D:00.0"), 1);
    /* A domain past 4 digits (a VMD domain) keeps its width. */
    cr_assert_eq(machine_pci_node("10000:E1:00.0"), 3);
    tu_rm_rf(root);
}

Test(machine, pci_node_is_unknown_where_sysfs_does_not_say)
{
    char root[64] = "";
    fake(root, "bus/pci/devices/0000:0d:00.0/numa_node", "-1\n");
    fake(root, "bus/pci/devices/0000:1b:00.0/numa_node", "node one\n");
    cr_assert_eq(machine_pci_node("0000:0D:00.0"), -1, "one node: -1");
    cr_assert_eq(machine_pci_node("0000:1B:00.0"), -1, "not a number");
    cr_assert_eq(machine_pci_node("0000:3B:00.0"), -1, "no such device");
    cr_assert_eq(machine_pci_node("not a bus id"), -1);
    cr_assert_eq(machine_pci_node("0000:0D:00.0 trailing"), -1);
    cr_assert_eq(machine_pci_node(NULL), -1);
    tu_rm_rf(root);
}

Test(machine, memory_is_the_machines_or_the_hook_and_no_limit_without_one)
{
    char root[64] = "";
    fake(root, "bus/.keep", ""); /* a tree with no cgroup files */
    machine_memory m;
    machine_memory_get(&m);
    const uint64_t pages = (uint64_t)sysconf(_SC_PHYS_PAGES);
    cr_assert_eq(m.total, pages * (uint64_t)sysconf(_SC_PAGESIZE));
    cr_assert_eq(m.limit, 0);
    cr_assert_eq(setenv("PINLOAD_MEMORY_TOTAL", "1073741824", 1), 0);
    machine_memory_get(&m);
    cr_assert_eq(m.total, GIB);
    tu_rm_rf(root);
}

/* This process's cgroup in the hierarchy whose controller field is `ctl`
 * ("" for v2), as /proc/self/cgroup says; "/" if none. */
static void own_cgroup(const char *ctl, char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    snprintf(out, cap, "/");
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b)
            continue;
        *b = '\0';
        if (strcmp(a + 1, ctl) == 0)
            snprintf(out, cap, "%s", b + 1);
    }
    if (f)
        fclose(f);
}

Test(machine, cgroup_v2_limit_is_the_smallest_up_to_the_root)
{
    char root[64] = "", cg[512], rel[700];
    cr_assert_eq(setenv("PINLOAD_MEMORY_TOTAL", "68719476736", 1), 0);
    fake(root, "fs/cgroup/memory.max", "2147483648\n"); /* 2 GiB */
    machine_memory m;
    machine_memory_get(&m);
    cr_assert_eq(m.total, 64 * GIB);
    cr_assert_eq(m.limit, 2 * GIB);
    cr_assert_str_eq(m.limit_from, "cgroup memory.max");
    own_cgroup("", cg, sizeof cg);
    if (strcmp(cg, "/") != 0) {
        /* A larger limit below a smaller one: the smaller holds. */
        snprintf(rel, sizeof rel, "fs/cgroup%s/memory.max", cg);
        fake(root, rel, "4294967296\n");
        machine_memory_get(&m);
        cr_assert_eq(m.limit, 2 * GIB);
        fake(root, rel, "1073741824\n");
        machine_memory_get(&m);
        cr_assert_eq(m.limit, GIB, "the process's own cgroup, %s", cg);
    }
    /* "max", and a limit above the machine, are no limit. */
    fake(root, "fs/cgroup/memory.max", "max\n");
    if (strcmp(cg, "/") != 0)
        fake(root, rel, "max\n");
    machine_memory_get(&m);
    cr_assert_eq(m.limit, 0);
    fake(root, "fs/cgroup/memory.max", "137438953472\n"); /* 128 GiB */
    machine_memory_get(&m);
    cr_assert_eq(m.limit, 0);
    tu_rm_rf(root);
}

Test(machine, cgroup_v1_limit_counts_and_its_no_limit_does_not)
{
    char root[64] = "", cg[512], rel[700];
    cr_assert_eq(setenv("PINLOAD_MEMORY_TOTAL", "68719476736", 1), 0);
    own_cgroup("memory", cg, sizeof cg);
    snprintf(rel, sizeof rel, "fs/cgroup/memory%s/memory.limit_in_bytes",
             strcmp(cg, "/") ? cg : "");
    fake(root, rel, "3221225472\n"); /* 3 GiB */
    machine_memory m;
    machine_memory_get(&m);
    cr_assert_eq(m.limit, 3 * GIB, "%s", rel);
    cr_assert_str_eq(m.limit_from, "cgroup v1 memory.limit_in_bytes");
    /* v1's "no limit": PAGE_COUNTER_MAX pages, near 2^63. */
    fake(root, rel, "9223372036854771712\n");
    machine_memory_get(&m);
    cr_assert_eq(m.limit, 0);
    tu_rm_rf(root);
}

/* The calling thread's policy: mode and first node (-1: none). */
static void thread_policy(int *mode, int *node)
{
    unsigned long mask[MACHINE_MAX_NODES / (8 * sizeof(unsigned long))] = {0};
    cr_assert_eq(syscall(SYS_get_mempolicy, mode, mask,
                         (unsigned long)MACHINE_MAX_NODES, NULL, 0ul),
                 0, "get_mempolicy: %s", strerror(errno));
    *node = -1;
    for (int i = MACHINE_MAX_NODES - 1; i >= 0; i--)
        if (mask[i / 64] >> (i % 64) & 1)
            *node = i;
}

/* A kernel without NUMA (or a filter refusing the calls) has no policy to
 * test. */
static void numa_or_skip(void)
{
    int mode;
    if (syscall(SYS_get_mempolicy, &mode, NULL, 0ul, NULL, 0ul) != 0)
        cr_skip_test("get_mempolicy: %s", strerror(errno));
}

Test(machine, prefer_sets_the_node_and_restore_gives_the_policy_back)
{
    numa_or_skip();
    int mode, node;
    thread_policy(&mode, &node);
    cr_assert_eq(mode, MPOL_DEFAULT);
    machine_policy saved;
    cr_assert_eq(machine_prefer(0, &saved), 0);
    thread_policy(&mode, &node);
    cr_assert_eq(mode, MPOL_PREFERRED);
    cr_assert_eq(node, 0);
    machine_restore(&saved);
    thread_policy(&mode, &node);
    cr_assert_eq(mode, MPOL_DEFAULT, "the thread's own policy again");

    /* A policy of the caller's own is what comes back, not the default. */
    unsigned long one = 1;
    cr_assert_eq(syscall(SYS_set_mempolicy, MPOL_BIND, &one, 2ul), 0);
    cr_assert_eq(machine_prefer(0, &saved), 0);
    machine_restore(&saved);
    thread_policy(&mode, &node);
    cr_assert_eq(mode, MPOL_BIND);
    cr_assert_eq(node, 0);
}

Test(machine, a_node_not_online_is_refused_and_the_policy_kept)
{
    numa_or_skip();
    machine_policy saved;
    /* No machine has node 1023 online. */
    cr_assert_eq(machine_prefer(MACHINE_MAX_NODES - 1, &saved), -EINVAL);
    cr_assert_eq(machine_prefer(MACHINE_MAX_NODES, &saved), -EINVAL);
    cr_assert_eq(machine_prefer(-1, &saved), -EINVAL);
    int mode, node;
    thread_policy(&mode, &node);
    cr_assert_eq(mode, MPOL_DEFAULT);
}

Test(machine, a_range_prefers_the_node_until_forgotten)
{
    numa_or_skip();
    const size_t n = 16 * (size_t)sysconf(_SC_PAGESIZE);
    char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    cr_assert_neq(p, MAP_FAILED);
    cr_assert_eq(machine_prefer_range(p, n, 0), 0);
    int mode = -1;
    unsigned long mask[MACHINE_MAX_NODES / 64] = {0};
    cr_assert_eq(syscall(SYS_get_mempolicy, &mode, mask,
                         (unsigned long)MACHINE_MAX_NODES, p + n - 1,
                         (unsigned long)MPOL_F_ADDR),
                 0);
    cr_assert_eq(mode, MPOL_PREFERRED);
    cr_assert_eq(mask[0], 1ul, "node 0 alone");
    memset(p, 1, n);
    cr_assert_eq(machine_page_node(p + n - 1), 0);
    cr_assert_eq(machine_prefer_range(p, n, MACHINE_MAX_NODES - 1), -EINVAL);
    machine_forget_range(p, n);
    cr_assert_eq(syscall(SYS_get_mempolicy, &mode, mask,
                         (unsigned long)MACHINE_MAX_NODES, p,
                         (unsigned long)MPOL_F_ADDR),
                 0);
    cr_assert_eq(mode, MPOL_DEFAULT);
    munmap(p, n);
}
