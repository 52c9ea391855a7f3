/* The CPUs this process may use, for num_workers 0's default. */
#include "cpus.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int read_long2(const char *path, long long *a, long long *b)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char buf[128] = "";
    const int ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok)
        return 0;
    if (strncmp(buf, "max", 3) == 0) {
        *a = -1;
        return 1;
    }
    return sscanf(buf, "%lld %lld", a, b);
}

int cpus_cgroup_quota(const char *root)
{
    char p[512];
    long long quota = -1, period = 0;
    snprintf(p, sizeof p, "%s/cpu.max", root);
    int n = read_long2(p, &quota, &period);
    if (n == 0) { /* cgroup v1 */
        snprintf(p, sizeof p, "%s/cpu/cpu.cfs_quota_us", root);
        long long unused;
        if (read_long2(p, &quota, &unused) == 0)
            return 0;
        snprintf(p, sizeof p, "%s/cpu/cpu.cfs_period_us", root);
        if (read_long2(p, &period, &unused) == 0)
            return 0;
        n = 2;
    }
    if (n < 2 || quota <= 0 || period <= 0)
        return 0;
    const long long cpus = (quota + period - 1) / period;
    return cpus > 1 << 20 ? 1 << 20 : (int)cpus;
}

/* The CPUs this process may run on (its affinity mask). */
static int allowed_cpus(void)
{
    for (int ncpu = 1024; ncpu <= 1 << 16; ncpu *= 4) {
        cpu_set_t *set = CPU_ALLOC((size_t)ncpu);
        if (!set)
            break;
        const size_t size = CPU_ALLOC_SIZE((size_t)ncpu);
        const int ok = sched_getaffinity(0, size, set) == 0;
        const int n = ok ? CPU_COUNT_S(size, set) : 0;
        CPU_FREE(set);
        if (ok)
            return n;
        if (errno != EINVAL)
            break;
    }
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int cpus_default_workers(int local_world, char *why, size_t cap)
{
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    const int allowed = allowed_cpus(), lw = local_world;
    const int own = lw > 1 && (long)allowed * lw <= online;
    int n = own ? allowed : allowed / lw;
    const int quota = cpus_cgroup_quota("/sys/fs/cgroup");
    if (quota > 0 && quota / lw < n)
        n = quota / lw;
    n = n < 1 ? 1 : n > 1024 ? 1024 : n;
    char q[48] = "";
    if (quota > 0)
        snprintf(q, sizeof q, ", cgroup quota %d", quota);
    if (lw > 1)
        snprintf(why, cap, "%d CPUs allowed%s, %d local ranks%s", allowed, q,
                 lw, own ? " (each bound to its own CPUs)" : "");
    else
        snprintf(why, cap, "%d CPUs allowed%s", allowed, q);
    return n;
}
