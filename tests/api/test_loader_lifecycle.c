/* The public loader API, the life cycle: destroy at any point, repeated
 * create/destroy, two loaders at once. Part of the loader suites
 * (testloader.h), run on the host backend and on simulated CUDA. */
#include <sys/wait.h>

#include "testloader.h"

/* ---- life cycle ---- */

Test(loader, destroy_mid_epoch_with_zero_one_or_two_batches_held,
     .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    for (int held = 0; held <= 2; held++) {
        pl_config c;
        base_cfg(&c, root);
        pl_loader *l = create(&c);
        const pl_batch *b;
        cr_assert_eq(pl_loader_next(l, &b), 0);
        cr_assert_eq(pl_loader_release(l, b, NULL), 0); /* now mid-epoch */
        for (int i = 0; i < held; i++)
            cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
}

Test(loader, destroy_right_after_create_and_destroy_null, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    pl_loader_destroy(create(&c));
    pl_loader_destroy(NULL);
    tu_rm_rf(root);
}

Test(loader, fifty_create_destroy_cycles, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 12, 2);
    for (int i = 0; i < 50; i++) {
        pl_config c;
        base_cfg(&c, root);
        c.batch_size = 4;
        c.num_workers = 1 + i % 3;
        pl_loader *l = create(&c);
        if (i % 2) {
            const pl_batch *b;
            cr_assert_eq(pl_loader_next(l, &b), 0, "cycle %d", i);
            cr_assert_eq(b->index, 0);
            if (i % 4 == 1)
                cr_assert_eq(pl_loader_release(l, b, NULL), 0);
        }
        pl_loader_destroy(l);
    }
    tu_rm_rf(root);
}

Test(loader, two_loaders_at_once_each_deliver_their_own_labels,
     .timeout = TIMEOUT)
{
    char a_root[64], b_root[64], list[128];
    tu_make_tree(a_root, 23, 3);
    /* The second: a list file with labels 4 and 6 over other images. */
    tu_tmpdir(b_root);
    snprintf(list, sizeof list, "%s/list.txt", b_root);
    FILE *f = fopen(list, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 10; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/img %d.jpg", b_root, i);
        tu_write_jpeg(p, 48, 40, (unsigned)i + 100, NULL);
        fprintf(f, "img %d.jpg %d\n", i, i % 2 ? 6 : 4);
    }
    fclose(f);

    pl_config ca, cb;
    base_cfg(&ca, a_root);
    base_cfg(&cb, list);
    cb.batch_size = 3;
    pl_loader *la = create(&ca), *lb = create(&cb);
    cr_assert_eq(info_of(lb).num_classes, 7);
    for (int e = 0; e < 2; e++) {
        int seen_a[23] = {0}, seen_b[10] = {0};
        int done_a = 0, done_b = 0;
        while (!done_a || !done_b) {
            const pl_batch *b;
            if (!done_a) {
                const int rc = pl_loader_next(la, &b);
                if (rc == PL_EPOCH_END) {
                    done_a = 1;
                } else {
                    cr_assert_eq(rc, 0, "%s", pl_last_error());
                    for (int i = 0; i < b->count; i++) {
                        const char *p;
                        pl_loader_sample(la, b->indices[i], &p, NULL);
                        cr_assert_eq(b->labels[i], folder_label(a_root, p));
                        seen_a[b->indices[i]]++;
                    }
                    pl_loader_release(la, b, NULL);
                }
            }
            if (!done_b) {
                const int rc = pl_loader_next(lb, &b);
                if (rc == PL_EPOCH_END) {
                    done_b = 1;
                } else {
                    cr_assert_eq(rc, 0, "%s", pl_last_error());
                    for (int i = 0; i < b->count; i++) {
                        const int64_t k = b->indices[i];
                        cr_assert(k >= 0 && k < 10);
                        cr_assert_eq(b->labels[i], k % 2 ? 6 : 4);
                        seen_b[k]++;
                    }
                    pl_loader_release(lb, b, NULL);
                }
            }
        }
        for (int i = 0; i < 23; i++)
            cr_assert_eq(seen_a[i], 1);
        for (int i = 0; i < 10; i++)
            cr_assert_eq(seen_b[i], 1);
    }
    /* A batch of one loader is not a batch of the other. */
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(la, &b), 0);
    cr_assert_eq(pl_loader_release(lb, b, NULL), PL_EINVAL);
    cr_assert_eq(pl_loader_release(la, b, NULL), 0);
    pl_loader_destroy(la);
    pl_loader_destroy(lb);
    tu_rm_rf(a_root);
    tu_rm_rf(b_root);
}

/* A child forked after create has none of the loader's threads: its calls
 * are refused with a reason (before, its pl_loader_next blocked for ever),
 * its destroy returns at once, and the parent's loader goes on unharmed. */
Test(loader, a_forked_child_is_refused_and_the_parent_goes_on,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0, "%s", pl_last_error());
    fflush(NULL);
    const pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        /* Exit codes: 0 all as expected, 10 + step otherwise. */
        alarm(20); /* a hang fails the test rather than stopping it */
        const pl_batch *cb = NULL;
        if (pl_loader_next(l, &cb) != PL_EINVAL || cb)
            _exit(11);
        if (!strstr(pl_last_error(), "after fork()") ||
            !strstr(pl_last_error(), "pl_loader_next"))
            _exit(12);
        if (pl_loader_release(l, b, NULL) != PL_EINVAL)
            _exit(13);
        pl_stats st;
        if (pl_loader_stats(l, &st) != PL_EINVAL)
            _exit(14);
        pl_state ps;
        if (pl_loader_state(l, &ps) != PL_EINVAL)
            _exit(15);
        pl_info info; /* immutable: answered */
        if (pl_loader_info(l, &info) != 0)
            _exit(16);
        pl_loader_destroy(l);
        _exit(0);
    }
    int status;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status), "child killed by signal %d",
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    cr_assert_eq(WEXITSTATUS(status), 0, "child failed at step %d",
                 WEXITSTATUS(status) - 10);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0, "%s", pl_last_error());
    int batches = 1, rc;
    while ((rc = pl_loader_next(l, &b)) == 0) {
        batches++;
        cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    }
    cr_assert_eq(rc, PL_EPOCH_END, "%s", pl_last_error());
    pl_info info;
    pl_loader_info(l, &info);
    cr_assert_eq(batches, info.batches_per_epoch);
    fx_done(l, root);
}

/* A thread waits in pl_loader_next for a slow first batch (one large image
 * decoded at full size) while another destroys the loader, as a watchdog
 * does: the waiter returns PL_ECLOSED, destroy returns once the sample in
 * hand is done, and neither hangs (before, both did). */
typedef struct waiter {
    pl_loader *l;
    _Atomic int entered;
    int rc;
    char detail[256];
} waiter;

static void *wait_for_batch(void *arg)
{
    waiter *w = arg;
    const pl_batch *b;
    w->entered = 1;
    w->rc = pl_loader_next(w->l, &b);
    snprintf(w->detail, sizeof w->detail, "%s", pl_last_error());
    return NULL;
}

Test(loader, destroy_while_another_thread_waits_in_next, .timeout = TIMEOUT)
{
    char root[64], path[128];
    tu_tmpdir(root);
    snprintf(path, sizeof path, "%s/big.jpg", root);
    tu_write_jpeg(path, 6000, 4000, 1, NULL);
    pl_config c;
    base_cfg(&c, root);
    c.batch_size = 1;
    c.num_workers = 1;
    c.augment = PL_AUGMENT_NONE;
    c.dct_scaling = 0; /* decode all 24 megapixels: a slow first batch */
    waiter w = {.l = create(&c)};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, wait_for_batch, &w), 0);
    while (!w.entered)
        sched_yield();
    const struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL); /* inside pl_loader_next by now */
    const double t0 = tu_seconds();
    pl_loader_destroy(w.l);
    const double took = tu_seconds() - t0;
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(w.rc, PL_ECLOSED, "%s: %s", pl_err_name(w.rc), w.detail);
    cr_assert_not_null(strstr(w.detail, "being destroyed"), "%s", w.detail);
    /* The sample in hand is finished: bounded by the decode's time limit. */
    cr_assert_lt(took, 30.0, "destroy took %.1f s", took);
    tu_rm_rf(root);
}
