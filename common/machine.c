/* The machine: NUMA nodes and memory policies, installed memory and the
 * cgroup's limit (machine.h). The policy calls go through syscall(), with
 * the kernel's own constants (<linux/mempolicy.h>): glibc wraps none of
 * them, and libnuma would be a dependency for three calls. */
#include "machine.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/mempolicy.h>

#define MASK_BITS MACHINE_MAX_NODES

/* sysfs, or the fake tree a test put in its place. */
static const char *sysfs_root(void)
{
    const char *r = getenv("PINLOAD_SYSFS_ROOT");
    return r && *r ? r : "/sys";
}

/* The first line of `path`, without its newline; 0 if it cannot be read. */
static int read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    const int ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

int machine_pci_node(const char *bus_id)
{
    /* CUDA writes the id in capitals, sysfs names the device in small
     * letters with a 4-digit domain; parsing and printing again gives
     * sysfs's name whatever the case and the domain's width. */
    unsigned dom, bus, dev, fn;
    char end;
    if (!bus_id ||
        sscanf(bus_id, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &end) != 4)
        return -1;
    char path[PATH_MAX], line[32];
    snprintf(path, sizeof path,
             "%s/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", sysfs_root(),
             dom, bus, dev, fn);
    if (!read_line(path, line, sizeof line))
        return -1;
    char *e;
    errno = 0;
    const long node = strtol(line, &e, 10);
    if (e == line || *e || errno || node < 0 || node >= MACHINE_MAX_NODES)
        return -1;
    return (int)node;
}

/* ---- memory policies ---- */

static void mask_of(int node, unsigned long *mask, size_t words)
{
    const size_t bits = 8 * sizeof *mask;
    memset(mask, 0, words * sizeof *mask);
    mask[(size_t)node / bits] |= 1ul << ((size_t)node % bits);
}

/* set_mempolicy and mbind read maxnode - 1 bits ("nodemask points to a bit
 * mask of node IDs that contains up to maxnode bits"; the kernel drops the
 * last, as libnuma's + 1 allows for); get_mempolicy writes maxnode. */
int machine_prefer(int node, machine_policy *saved)
{
    if (node < 0 || node >= MACHINE_MAX_NODES)
        return -EINVAL;
    if (syscall(SYS_get_mempolicy, &saved->mode, saved->mask,
                (unsigned long)MASK_BITS, NULL, 0ul) != 0)
        return -errno;
    unsigned long mask[MASK_BITS / (8 * sizeof(unsigned long))];
    mask_of(node, mask, sizeof mask / sizeof mask[0]);
    if (syscall(SYS_set_mempolicy, MPOL_PREFERRED, mask,
                (unsigned long)MASK_BITS + 1) != 0)
        return -errno;
    return 0;
}

void machine_restore(const machine_policy *saved)
{
    /* The mode carries its flags (MPOL_F_STATIC_NODES...), as
     * set_mempolicy takes them; the default and local policies have an
     * empty mask. */
    const int mode =
        saved->mode & ~(MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES);
    const int empty = mode == MPOL_DEFAULT || mode == MPOL_LOCAL;
    (void)syscall(SYS_set_mempolicy, saved->mode, empty ? NULL : saved->mask,
                  empty ? 0ul : (unsigned long)MASK_BITS + 1);
}

int machine_prefer_range(void *p, size_t n, int node)
{
    if (node < 0 || node >= MACHINE_MAX_NODES)
        return -EINVAL;
    unsigned long mask[MASK_BITS / (8 * sizeof(unsigned long))];
    mask_of(node, mask, sizeof mask / sizeof mask[0]);
    if (syscall(SYS_mbind, p, n, MPOL_PREFERRED, mask,
                (unsigned long)MASK_BITS + 1, 0u) != 0)
        return -errno;
    return 0;
}

void machine_forget_range(void *p, size_t n)
{
    (void)syscall(SYS_mbind, p, n, MPOL_DEFAULT, NULL, 0ul, 0u);
}

int machine_page_node(const void *p)
{
    int node = -1;
    if (syscall(SYS_get_mempolicy, &node, NULL, 0ul, p,
                (unsigned long)(MPOL_F_NODE | MPOL_F_ADDR)) != 0)
        return -1;
    return node;
}

/* ---- memory and its limit ---- */

/* A byte count from `path`: 1 and *v, or 0 for none ("max", absent). */
static int read_bytes(const char *path, uint64_t *v)
{
    char line[64];
    if (!read_line(path, line, sizeof line))
        return 0;
    char *e;
    errno = 0;
    const unsigned long long x = strtoull(line, &e, 10);
    if (e == line || *e || errno)
        return 0; /* "max": no limit */
    *v = (uint64_t)x;
    return 1;
}

/* Whether the comma-separated list names controller c. */
static int has_controller(const char *list, const char *c)
{
    const size_t n = strlen(c);
    for (const char *p = list; p; p = strchr(p, ',')) {
        p += *p == ',';
        if (strncmp(p, c, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    }
    return 0;
}

/* This process's cgroup for `controller` ("" for v2's unified hierarchy)
 * from /proc/self/cgroup ("0::/a/b", "4:memory:/a/b"), into path; 0 if
 * it has none. */
static int cgroup_of(const char *controller, char *path, size_t cap)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return 0;
    char line[PATH_MAX + 64];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *ctl = strchr(line, ':');
        char *p = ctl ? strchr(ctl + 1, ':') : NULL;
        if (!p)
            continue;
        *p++ = '\0';
        ctl++;
        if (*controller ? has_controller(ctl, controller) : *ctl == '\0') {
            snprintf(path, cap, "%s", p);
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* The smallest `file` from the process's cgroup under `mount` up to the
 * mount's root (a limit holds for everything below it); 0 if none. */
static uint64_t cgroup_limit(const char *mount, const char *controller,
                             const char *file)
{
    char cg[PATH_MAX] = "/";
    if (!cgroup_of(controller, cg, sizeof cg))
        snprintf(cg, sizeof cg, "/");
    uint64_t best = 0;
    for (;;) {
        char path[PATH_MAX + 256];
        uint64_t v;
        snprintf(path, sizeof path, "%s/fs/cgroup%s%s/%s", sysfs_root(), mount,
                 strcmp(cg, "/") ? cg : "", file);
        if (read_bytes(path, &v) && (best == 0 || v < best))
            best = v;
        char *slash = strrchr(cg, '/');
        if (!slash || slash == cg)
            break;
        *slash = '\0';
    }
    if (strcmp(cg, "/") != 0) { /* the mount's root itself */
        char path[PATH_MAX + 256];
        uint64_t v;
        snprintf(path, sizeof path, "%s/fs/cgroup%s/%s", sysfs_root(), mount,
                 file);
        if (read_bytes(path, &v) && (best == 0 || v < best))
            best = v;
    }
    return best;
}

void machine_memory_get(machine_memory *m)
{
    memset(m, 0, sizeof *m);
    const char *hook = getenv("PINLOAD_MEMORY_TOTAL");
    if (hook && *hook) {
        m->total = strtoull(hook, NULL, 10);
    } else {
        const long pages = sysconf(_SC_PHYS_PAGES);
        const long page = sysconf(_SC_PAGESIZE);
        m->total = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    }
    /* v2's memory.max, else v1's memory.limit_in_bytes (whose "no limit"
     * is a number near 2^63: above total, so no limit either). */
    uint64_t lim = cgroup_limit("", "", "memory.max");
    const char *from = "cgroup memory.max";
    if (lim == 0) {
        lim = cgroup_limit("/memory", "memory", "memory.limit_in_bytes");
        from = "cgroup v1 memory.limit_in_bytes";
    }
    if (lim > 0 && (m->total == 0 || lim < m->total)) {
        m->limit = lim;
        snprintf(m->limit_from, sizeof m->limit_from, "%s", from);
    }
}
