/* Data parallelism with real processes: pinload-dump forked and exec'd as
 * 2 and 3 concurrent ranks under each launcher's variables (torchrun,
 * SLURM, Open MPI, MPICH/PMI). Each rank's create notice names its rank,
 * world and launcher; the shards are DistributedSampler's (disjoint but for
 * the padding, which repeats the head of the epoch's order); every rank
 * delivers the same number of samples in the same number of batches, over
 * clean data and with bad files under skip and substitute, drop_last on and
 * off. Also: half a launcher's pair is refused naming its variables. The
 * default worker count under taskset is test_distributed_workers.c's. Runs
 * the binary from $PINLOAD_BUILD (make tools). */
#include "testdistributed.h"
#include "testrun.h"

/* ---- clean data: the padded epoch, split ---- */

Test(distributed, torchrun_ranks_split_the_padded_epoch, .timeout = TIMEOUT)
{
    run_jobs(TORCHRUN, 0);
}

Test(distributed, slurm_ranks_split_the_padded_epoch, .timeout = TIMEOUT)
{
    run_jobs(SLURM, 0);
}

Test(distributed, open_mpi_ranks_split_the_padded_epoch, .timeout = TIMEOUT)
{
    run_jobs(OPEN_MPI, 0);
}

Test(distributed, mpich_ranks_split_the_padded_epoch, .timeout = TIMEOUT)
{
    run_jobs(MPICH, 0);
}

/* ---- bad files: equal steps under skip and substitute ---- */

Test(distributed, torchrun_ranks_take_equal_steps_over_bad_files,
     .timeout = TIMEOUT)
{
    run_jobs(TORCHRUN, 1);
}

Test(distributed, slurm_ranks_take_equal_steps_over_bad_files,
     .timeout = TIMEOUT)
{
    run_jobs(SLURM, 1);
}

Test(distributed, open_mpi_ranks_take_equal_steps_over_bad_files,
     .timeout = TIMEOUT)
{
    run_jobs(OPEN_MPI, 1);
}

Test(distributed, mpich_ranks_take_equal_steps_over_bad_files,
     .timeout = TIMEOUT)
{
    run_jobs(MPICH, 1);
}

/* ---- refusals ---- */

/* Half of each launcher's pair, or a rank outside the world, or a value
 * that is no count: pinload-dump exits 1 before writing anything, with
 * one line naming the variables. */
Test(distributed, half_a_pair_or_a_rank_outside_the_world_is_refused,
     .timeout = TIMEOUT)
{
    fixture fx;
    make_fixture(&fx, 0);
    enum { CASES = 4 };
    proc procs[4][CASES];
    char want[4][CASES][256];
    for (int L = 0; L < 4; L++) {
        const launcher *l = &launchers[L];
        char src[128];
        launcher_source(L, src, sizeof src);
        for (int c = 0; c < CASES; c++) {
            envset e = {.n = 0};
            char *w = want[L][c];
            if (c == 0) {
                env_set(&e, l->rank, "0");
                snprintf(w, 256,
                         "pinload-dump: pl_loader_create: config.world_size: "
                         "the environment sets %s but not %s (%s's pair): "
                         "set both, or neither",
                         l->rank, l->world, l->name);
            } else if (c == 1) {
                env_set(&e, l->world, "2");
                snprintf(w, 256,
                         "pinload-dump: pl_loader_create: config.rank: the "
                         "environment sets %s but not %s (%s's pair): set "
                         "both, or neither",
                         l->world, l->rank, l->name);
            } else if (c == 2) {
                env_set(&e, l->rank, "2");
                env_set(&e, l->world, "2");
                snprintf(w, 256,
                         "pinload-dump: pl_loader_create: config.rank: 2 is "
                         "not below world_size 2 (from %s)",
                         src);
            } else {
                env_set(&e, l->rank, "one");
                env_set(&e, l->world, "2");
                snprintf(w, 256,
                         "pinload-dump: pl_loader_create: config.rank: "
                         "environment variable %s=\"one\" is not a valid "
                         "count",
                         l->rank);
            }
            strcat(w, "\n"); /* the whole of its output */
            proc *p = &procs[L][c];
            char name[64];
            snprintf(name, sizeof name, "refused-%d-%d", L, c);
            proc_init(p, fx.root, name);
            const char *args[] = {"--data",   fx.data,  "--out",
                                  p->out,     "--size", STR(SIZE),
                                  "--device", "host",   NULL};
            spawn(p, &e, NULL, args);
        }
    }
    for (int L = 0; L < 4; L++)
        for (int c = 0; c < CASES; c++) {
            proc *p = &procs[L][c];
            reap(p);
            cr_assert_eq(p->status, 1, "%s case %d: exit %d:\n%s",
                         launchers[L].name, c, p->status, p->text);
            cr_assert_str_eq(p->text, want[L][c], "%s case %d",
                             launchers[L].name, c);
            cr_assert_eq(tu_count_ppms(p->out), 0);
            char tsv[256];
            snprintf(tsv, sizeof tsv, "%s/index.tsv", p->out);
            cr_assert_neq(access(tsv, F_OK), 0, "%s was written", tsv);
            free(p->text);
        }
    tu_rm_rf(fx.root);
}

/* torchrun's variables before SLURM's, SLURM's before Open MPI's, Open
 * MPI's before MPICH's: with several launchers' set, the first one's rank
 * and world shard the data. */
Test(distributed, the_first_launcher_in_order_wins_when_several_are_set,
     .timeout = TIMEOUT)
{
    fixture fx;
    make_fixture(&fx, 0);
    static const int rank[4] = {1, 2, 3, 4}, world[4] = {2, 3, 4, 5};
    proc procs[4];
    for (int first = 0; first < 4; first++) {
        envset e = {.n = 0};
        for (int L = first; L < 4; L++) {
            env_set_int(&e, launchers[L].rank, rank[L]);
            env_set_int(&e, launchers[L].world, world[L]);
        }
        proc *p = &procs[first];
        char name[64];
        snprintf(name, sizeof name, "first-%d", first);
        proc_init(p, fx.root, name);
        const char *args[] = {"--data",   fx.data,   "--out",   p->out,
                              "--size",   STR(SIZE), "--batch", STR(BATCH),
                              "--device", "host",    NULL};
        spawn(p, &e, NULL, args);
    }
    cpu_set_t set;
    const int allowed = cpus_allowed(&set);
    for (int first = 0; first < 4; first++) {
        proc *p = &procs[first];
        reap(p);
        cr_assert_eq(p->status, 0, "%s", p->text);
        char src[128];
        launcher_source(first, src, sizeof src);
        assert_notice(p, rank[first], world[first], src, allowed, 1);
        char order[MAX_PER_RANK][128];
        const int n = reference_order(&fx, rank[first], world[first], order);
        cr_assert_eq(tu_count_ppms(p->out), n);
        int rows;
        tu_row *r = tu_read_index(p->out, &rows);
        cr_assert_eq(rows, n);
        for (int k = 0; k < n; k++)
            cr_assert_str_eq(r[k].path, order[k], "%s: position %d",
                             launchers[first].name, k);
        free(r);
        free(p->text);
    }
    tu_rm_rf(fx.root);
}
