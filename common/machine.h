/* The machine, as Linux describes it: the NUMA node a PCI device hangs
 * off, the memory policy of the calling thread and of a range of memory,
 * where a page lies, the memory installed and the cgroup's limit on it.
 * machine.c is the one file that makes these system calls and reads these
 * files. Two environment variables are test hooks, for suites only:
 * PINLOAD_SYSFS_ROOT stands for /sys (a fake tree: a device's numa_node,
 * the cgroup's limits under fs/cgroup) and PINLOAD_MEMORY_TOTAL for the
 * machine's memory in bytes. */
#ifndef PINLOAD_MACHINE_H
#define PINLOAD_MACHINE_H

#include <stddef.h>
#include <stdint.h>

/* Node ids the policy calls handle: the kernel's own limit
 * (CONFIG_NODES_SHIFT at most 10). */
#define MACHINE_MAX_NODES 1024

/* The NUMA node of PCI device `bus_id` as CUDA writes it
 * ("0000:0D:00.0": domain, bus, device, function in hexadecimal, any
 * case), from sysfs's bus/pci/devices/<0000:0d:00.0>/numa_node; -1 when
 * it is not known: no such file, or -1 in it (a machine of one node, or
 * firmware that does not say). */
int machine_pci_node(const char *bus_id);

/* A thread's memory policy, as get_mempolicy gave it. */
typedef struct machine_policy {
    int mode;
    unsigned long mask[MACHINE_MAX_NODES / (8 * sizeof(unsigned long))];
} machine_policy;

/* Make the calling thread prefer `node` for the pages it allocates from
 * now on (MPOL_PREFERRED: another node when that one is full, never a
 * failure), keeping the policy it had in *saved for machine_restore.
 * 0, or -errno (EINVAL: the node is not online; EPERM, ENOSYS: refused,
 * as a container's seccomp filter may), the thread's policy unchanged. */
int machine_prefer(int node, machine_policy *saved);

/* Give the calling thread back the policy machine_prefer saved. */
void machine_restore(const machine_policy *saved);

/* Make [p, p + n) prefer `node` for the pages faulted in from now on
 * (mbind MPOL_PREFERRED; p page-aligned). 0 or -errno, as
 * machine_prefer. */
int machine_prefer_range(void *p, size_t n, int node);

/* Give [p, p + n) back the thread's policy (mbind MPOL_DEFAULT), so that
 * memory freed to the heap keeps no node of ours. */
void machine_forget_range(void *p, size_t n);

/* The node the page holding p lies on, or -1 when it cannot be told (not
 * faulted in, or memory the kernel does not manage as pages). */
int machine_page_node(const void *p);

/* What the machine has in memory, and what this process may have. */
typedef struct machine_memory {
    uint64_t total; /* installed: physical pages x page size */
    /* The cgroup's limit on this process's memory (the smallest from its
     * cgroup up to the root), 0 when none is set or it is not below
     * total. */
    uint64_t limit;
    char limit_from[64]; /* "cgroup memory.max" or "cgroup v1
                            memory.limit_in_bytes", when limit is set */
} machine_memory;

void machine_memory_get(machine_memory *m);

#endif
