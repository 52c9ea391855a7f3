/* The CPUs this process may use: its affinity mask and its cgroup's CPU
 * quota, read from the system (not the config), for num_workers 0. */
#ifndef PINLOAD_CPUS_H
#define PINLOAD_CPUS_H

#include <stddef.h>

/* The CPUs a cgroup quota allows under `root` (cgroup v2's cpu.max, or v1's
 * cpu/cpu.cfs_quota_us and cfs_period_us), rounded up; 0 when no quota is
 * set or none can be read. `root` is a parameter for the tests' fake
 * hierarchies; the loader reads /sys/fs/cgroup. */
int cpus_cgroup_quota(const char *root);

/* num_workers 0's count: this rank's share of the CPUs it may use, among
 * the local_world ranks of its node, with [out] why[cap] saying how it was
 * reached ("2 CPUs allowed, cgroup quota 2"). An affinity mask small enough
 * to be this rank's own (a launcher that binds each rank to its CPUs) is
 * used as it is; a mask the ranks of the node share is divided among them,
 * and so is a cgroup quota. 1 to 1024. */
int cpus_default_workers(int local_world, char *why, size_t cap);

#endif
