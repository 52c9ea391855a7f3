/* The default worker count with real processes: pinload-dump under
 * taskset, with no launcher and as two local ranks of one node, takes the
 * CPUs of its affinity mask, shared among the node's ranks. Runs the
 * binary from $PINLOAD_BUILD (make tools). */
#include <sched.h>

#include "testdistributed.h"
#include "testrun.h"

/* ---- the default worker count ---- */

/* The n-th CPU this process may run on. */
static int nth_allowed_cpu(int n)
{
    cpu_set_t set;
    cpus_allowed(&set);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set) && n-- == 0)
            return c;
    return -1;
}

#define TASKSET_OR_SKIP()                                                      \
    do {                                                                       \
        char ts_[512];                                                         \
        if (!find_taskset(ts_, sizeof ts_))                                    \
            cr_skip_test("taskset (util-linux) is not installed");             \
    } while (0)

/* `taskset -c C pinload-dump` with no launcher: one CPU, one worker. */
Test(distributed, taskset_to_one_cpu_gives_one_worker_by_default,
     .timeout = TIMEOUT)
{
    TASKSET_OR_SKIP();
    fixture fx;
    make_fixture(&fx, 0);
    char cpu[16];
    snprintf(cpu, sizeof cpu, "%d", nth_allowed_cpu(0));
    proc p;
    proc_init(&p, fx.root, "one-cpu");
    const envset none = {.n = 0};
    const char *args[] = {"--data",  fx.data,    "--out", p.out, "--size",
                          STR(SIZE), "--device", "host",  NULL};
    spawn(&p, &none, cpu, args);
    reap(&p);
    cr_assert_eq(p.status, 0, "%s", p.text);
    assert_notice(&p, 0, 1, "defaults (no launcher variables)", 1, 1);
    char line[1024];
    only_line(&p, "pinload: backend: ", line, sizeof line);
    cr_assert_not_null(strstr(line, "; 1 worker (1 CPUs allowed"), "%s", line);
    cr_assert_eq(tu_count_ppms(p.out), FILES);
    free(p.text);
    tu_rm_rf(fx.root);
}

/* Two ranks of one node (LOCAL_WORLD_SIZE=2) on the same 2-CPU mask share
 * it: a worker each, unless the machine has CPUs enough for the mask to be
 * each rank's own (4 or more online), then the mask's two. Their shards are
 * the padded epoch as ever. */
Test(distributed, two_local_ranks_on_a_two_cpu_mask_share_it,
     .timeout = TIMEOUT)
{
    TASKSET_OR_SKIP();
    const int a = nth_allowed_cpu(0), b = nth_allowed_cpu(1);
    if (b < 0)
        cr_skip_test("needs two allowed CPUs");
    fixture fx;
    make_fixture(&fx, 0);
    char cpus[32];
    snprintf(cpus, sizeof cpus, "%d,%d", a, b);
    job j = {.launcher = TORCHRUN,
             .world = 2,
             .policy = CLEAN,
             .cpus = cpus,
             .allowed = 2,
             .fx = &fx};
    start_job(&j);
    finish_job(&j);
    check_job(&j);
    const int share = sysconf(_SC_NPROCESSORS_ONLN) >= 4 ? 2 : 1;
    const int quota = cpus_cgroup_quota("/sys/fs/cgroup");
    const int want = quota > 0 && quota / 2 < share ? quota / 2 : share;
    for (int r = 0; r < 2; r++) {
        char line[1024], clause[96];
        only_line(&j.ranks[r], "pinload: backend: ", line, sizeof line);
        snprintf(clause, sizeof clause, "; %d worker%s (2 CPUs allowed",
                 want < 1 ? 1 : want, want > 1 ? "s" : "");
        cr_assert_not_null(strstr(line, clause), "%s", line);
        cr_assert_not_null(strstr(line, ", 2 local ranks"), "%s", line);
    }
    free_job(&j);
    tu_rm_rf(fx.root);
}
