/* The bound on page-locked memory (pinned.h).
 *
 * Why half of the node: page-locked pages are out of the kernel's reach
 * (never swapped, never reclaimed), and a training node needs the rest for
 * what cannot be locked away: each process's own heap (the framework, the
 * host side of its CUDA context, NCCL's buffers, the workers' decode
 * buffers), the page cache the dataset is read through (what makes a
 * second epoch a memory read), and the page-locked memory others take
 * besides the loaders (CUDA's staging for pageable copies, a framework's
 * pin_memory). Half leaves that room on a small node and a large one
 * alike. It is a bound against a configuration that cannot work, not a
 * tuning: a ring that needs half a node buys nothing over one that needs
 * far less, since a few batches of prefetch hide as much latency as many.
 *
 * What counts: the ring when it is page-locked (PL_MEMORY_PINNED: CUDA's
 * cudaHostAlloc, or mlock on the host backend), and keep_host's host
 * mirrors (always page-locked). Managed memory is not counted: pinload
 * does not lock it, and its pages move to the device as the copies run.
 * Buffers the pool adds later (max_device_buffers) are not known at
 * create, and not counted either. */
#include "pinned.h"

#include <stdint.h>
#include <stdio.h>

#include "../common/error.h"
#include "pinload.h"

/* a x b, saturated. */
static uint64_t mul(uint64_t a, uint64_t b)
{
    return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

static uint64_t add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* "1.15 GiB", "288.0 MiB", "96 KiB". */
static const char *human(char *buf, size_t cap, uint64_t n)
{
    const double d = (double)n;
    if (d >= 1024.0 * 1024 * 1024)
        snprintf(buf, cap, "%.2f GiB", d / (1024.0 * 1024 * 1024));
    else if (d >= 1024.0 * 1024)
        snprintf(buf, cap, "%.1f MiB", d / (1024.0 * 1024));
    else
        snprintf(buf, cap, "%.0f KiB", d / 1024.0);
    return buf;
}

/* "(the ring: prefetch 4 x 288.0 MiB batches; keep_host: 2 x 288.0 MiB
 * mirrors)" */
static void parts(const pinned_need *n, char *buf, size_t cap)
{
    char a[32], b[32];
    if (n->slots && n->mirrors)
        snprintf(buf, cap,
                 "the ring: prefetch %d x %s batches; keep_host: %d x %s "
                 "mirrors, one per device buffer",
                 n->slots, human(a, sizeof a, n->slot_bytes), n->mirrors,
                 human(b, sizeof b, n->mirror_bytes));
    else if (n->slots)
        snprintf(buf, cap, "the ring: prefetch %d x %s batches", n->slots,
                 human(a, sizeof a, n->slot_bytes));
    else
        snprintf(buf, cap, "keep_host: %d x %s mirrors, one per device buffer",
                 n->mirrors, human(b, sizeof b, n->mirror_bytes));
}

int pinned_check(const pinned_need *need, const machine_memory *m)
{
    const uint64_t per_rank =
        add(mul((uint64_t)need->slots, need->slot_bytes),
            mul((uint64_t)need->mirrors, need->mirror_bytes));
    const int ranks = need->ranks > 0 ? need->ranks : 1;
    const uint64_t total = mul(per_rank, (uint64_t)ranks);
    const uint64_t node = m->limit ? m->limit : m->total;
    if (node == 0 || total <= node / PINNED_SHARE)
        return 0;
    char what[192], t[32], r[32], h[32], half[32], mach[32], whose[128];
    parts(need, what, sizeof what);
    if (m->limit)
        snprintf(whose, sizeof whose,
                 "the %s this process may use (%s; the "
                 "machine has %s)",
                 human(h, sizeof h, node), m->limit_from,
                 human(mach, sizeof mach, m->total));
    else
        snprintf(whose, sizeof whose, "this node's %s of memory",
                 human(h, sizeof h, node));
    return err_set(
        PL_ENOMEM,
        "pl_loader_create: %d rank%s on this node x %s of pinned memory (%s) "
        "= %s, over %s, half of %s: page-locked memory can be neither "
        "swapped "
        "nor reclaimed, and the node would run out of memory. Lower "
        "config.prefetch or config.batch_size%s%s",
        ranks, ranks == 1 ? "" : "s", human(r, sizeof r, per_rank), what,
        human(t, sizeof t, total),
        human(half, sizeof half, node / PINNED_SHARE), whose,
        need->mirrors ? ", set config.keep_host to 0" : "",
        need->slots ? ", or set config.memory to PL_MEMORY_PAGEABLE" : "");
}
