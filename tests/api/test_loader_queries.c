/* The public loader API, the queries: info, stats, class names, samples and
 * orders, keep_host, an explicit device, missing data. Part of the loader
 * suites (testloader.h), run on the host backend and on simulated CUDA. */
#include "testloader.h"

/* ---- queries
 * ----------------------------------------------------------------------------
 */

Test(loader, info_describes_the_loader, .timeout = TIMEOUT)
{
    char root[64];
    tu_make_tree(root, 23, 3);
    for (int f = 0; f < 2; f++) {
        pl_config c;
        base_cfg(&c, root);
        c.format = f ? PL_FORMAT_F32_NCHW : PL_FORMAT_U8_NHWC;
        c.width = 20;
        c.height = 12;
        c.num_workers = 3;
        c.prefetch = 3;
        c.device_buffers = 4;
        c.memory = f ? PL_MEMORY_PAGEABLE : PL_MEMORY_PINNED;
        pl_loader *l = create(&c);
        const pl_info in = info_of(l);
        cr_assert_eq(in.dataset_size, 23);
        cr_assert_eq(in.samples_per_epoch, 23);
        cr_assert_eq(in.batches_per_epoch, 5);
        cr_assert_eq(in.num_classes, 3);
        cr_assert_eq(in.batch_size, 5);
        cr_assert_eq(in.width, 20);
        cr_assert_eq(in.height, 12);
        cr_assert_eq(in.channels, 3);
        cr_assert_eq(in.format, c.format);
        cr_assert_eq(in.sample_bytes, f ? 20u * 12 * 3 * 4 : 20u * 12 * 3);
        cr_assert_eq(in.batch_bytes, 5 * in.sample_bytes);
        cr_assert_eq(in.backend,
                     tu_on_cuda() ? PL_BACKEND_CUDA : PL_BACKEND_HOST);
        cr_assert_eq(in.device, tu_on_cuda() ? 0 : -1);
        cr_assert_eq(in.num_workers, 3);
        cr_assert_eq(in.prefetch, 3);
        cr_assert_eq(in.device_buffers, 4);
        cr_assert_eq(in.rank, 0);
        cr_assert_eq(in.world_size, 1);
        cr_assert_eq(in.memory, c.memory);
        if (f)
            cr_assert_eq(in.pinned, 0, "pageable memory is never pinned");
        else
            cr_assert(in.pinned == 0 || in.pinned == 1);
        pl_loader_destroy(l);
    }
    pl_info in;
    cr_assert_eq(pl_loader_info(NULL, &in), PL_EINVAL);
    tu_rm_rf(root);
}

Test(loader, stats_count_what_the_caller_received, .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    c.prefetch = 3;
    c.device_buffers = 2;
    pl_loader *l = create(&c);
    const pl_info in = info_of(l);
    run r;
    run_epoch(l, 0, &r);
    uint64_t batches = (uint64_t)r.nb, bytes = 23 * in.sample_bytes;
    uint64_t samples = (uint64_t)r.n;
    run_free(&r);
    /* Hold both buffers and wait for PL_EBUSY: the prefetcher then waits
     * for a buffer, and everything it queued is in the caller's hands. */
    const pl_batch *b0, *b1, *b;
    cr_assert_eq(pl_loader_next(l, &b0), 0);
    cr_assert_eq(pl_loader_next(l, &b1), 0);
    cr_assert_eq(pl_loader_next(l, &b), PL_EBUSY);
    batches += 2;
    samples += (uint64_t)(b0->count + b1->count);
    bytes += b0->bytes + b1->bytes;
    pl_stats st;
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.batches, batches, "%llu batches counted, %llu received",
                 (unsigned long long)st.batches, (unsigned long long)batches);
    cr_assert_eq(st.bytes_copied, bytes, "%llu bytes copied, %llu received",
                 (unsigned long long)st.bytes_copied,
                 (unsigned long long)bytes);
    cr_assert_geq(st.images_decoded, samples);
    cr_assert_eq(st.images_failed, 0);
    cr_assert_gt(st.bytes_read, 0);
    cr_assert_gt(st.ns_read, 0);
    cr_assert_gt(st.ns_decode, 0);
    cr_assert_gt(st.ns_augment, 0);
    cr_assert_gt(st.ns_copy, 0);
    cr_assert_gt(st.ns_wait, 0);
    if (in.pinned)
        cr_assert_eq(st.pinned_bytes, (uint64_t)c.prefetch * in.batch_bytes);
    else
        cr_assert_eq(st.pinned_bytes, 0);
    pl_loader_destroy(l);

    c.memory = PL_MEMORY_PAGEABLE;
    l = create(&c);
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.pinned_bytes, 0);
    cr_assert_eq(info_of(l).pinned, 0);
    cr_assert_eq(pl_loader_stats(NULL, &st), PL_EINVAL);
    cr_assert_eq(pl_loader_stats(l, NULL), PL_EINVAL);
    fx_done(l, root);
}

/* pl_stats.batches is documented as "batches handed to the caller". After
 * one epoch the pipeline runs on by itself: once it has decoded four
 * batches of the next epoch (two device buffers plus two ring slots), the
 * first two were queued, but the caller has received none of them. */
/* The pipeline's stalls are attributed: with the caller holding both
 * device buffers, the prefetcher waits for one (ns_buffer_wait) and the
 * workers, the ring full behind it, wait for a slot (ns_slot_wait); each
 * grows by about the time the caller held them, and neither moved before. */
Test(loader, stats_attribute_the_stalls_to_slots_and_buffers,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 40, 2);
    c.batch_size = 4;
    c.prefetch = 2;
    c.device_buffers = 2;
    c.num_workers = 2;
    pl_loader *l = create(&c);
    const pl_batch *b0, *b1, *b;
    cr_assert_eq(pl_loader_next(l, &b0), 0);
    cr_assert_eq(pl_loader_next(l, &b1), 0);
    pl_stats s0, s1;
    cr_assert_eq(pl_loader_stats(l, &s0), 0);
    usleep(300 * 1000);
    cr_assert_eq(pl_loader_stats(l, &s1), 0);
    const double buf = (double)(s1.ns_buffer_wait - s0.ns_buffer_wait) / 1e6;
    const double slot = (double)(s1.ns_slot_wait - s0.ns_slot_wait) / 1e6;
    /* The waits still open are counted once they end: release a buffer,
     * and the prefetcher's ends, then the workers' as it frees a slot. */
    cr_assert_eq(pl_loader_release(l, b0, NULL), 0);
    cr_assert_eq(pl_loader_next(l, &b), 0);
    usleep(100 * 1000);
    pl_stats s2;
    cr_assert_eq(pl_loader_stats(l, &s2), 0);
    const double buf2 = (double)(s2.ns_buffer_wait - s0.ns_buffer_wait) / 1e6;
    const double slot2 = (double)(s2.ns_slot_wait - s0.ns_slot_wait) / 1e6;
    cr_assert_geq(buf2, 250.0, "prefetcher waited %.1f ms for a buffer "
                               "held for 300 ms (%.1f before the release)",
                  buf2, buf);
    cr_assert_geq(slot2, 2 * 250.0,
                  "two workers waited %.1f ms for a slot in 300 ms (%.1f "
                  "before the release)",
                  slot2, slot);
    cr_assert_eq(pl_loader_release(l, b1, NULL), 0);
    cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    fx_done(l, root);
}

Test(loader, stats_batches_counts_only_batches_handed_to_the_caller,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    c.prefetch = 2;
    c.device_buffers = 2;
    pl_loader *l = create(&c);
    run r;
    run_epoch(l, 0, &r);
    const uint64_t received = (uint64_t)r.nb;
    run_free(&r);
    pl_stats st;
    do {
        usleep(500);
        cr_assert_eq(pl_loader_stats(l, &st), 0);
    } while (st.images_decoded < 23 + 4 * 5);
    usleep(20000); /* time to run on, if it would */
    cr_assert_eq(pl_loader_stats(l, &st), 0);
    cr_assert_eq(st.images_decoded, 23 + 4 * 5, "the pipeline stalls there");
    cr_assert_eq(st.batches, received,
                 "stats.batches is %llu, the caller received %llu",
                 (unsigned long long)st.batches, (unsigned long long)received);
    fx_done(l, root);
}

Test(loader, class_names_samples_and_orders_check_their_arguments,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    pl_loader *l = create(&c);
    const char *name = NULL;
    for (int k = 0; k < 3; k++) {
        char want[16];
        snprintf(want, sizeof want, "c%d", k);
        cr_assert_eq(pl_loader_class_name(l, k, &name), 0);
        cr_assert_str_eq(name, want);
    }
    cr_assert_eq(pl_loader_class_name(l, -1, &name), PL_EINVAL);
    cr_assert_eq(pl_loader_class_name(l, 3, &name), PL_EINVAL);
    cr_assert_not_null(strstr(pl_last_error(), "3"), "%s", pl_last_error());
    cr_assert_eq(pl_loader_class_name(l, 0, NULL), PL_EINVAL);

    /* Index i of make_tree's listing: class folders in order, files sorted
     * by name within each. */
    const char *path = NULL;
    int32_t label = -1;
    cr_assert_eq(pl_loader_sample(l, 0, &path, &label), 0);
    char want[256];
    snprintf(want, sizeof want, "%s/c0/img00.jpg", root);
    cr_assert_str_eq(path, want);
    cr_assert_eq(label, 0);
    cr_assert_eq(pl_loader_sample(l, 22, &path, &label), 0);
    snprintf(want, sizeof want, "%s/c2/img20.jpg", root);
    cr_assert_str_eq(path, want);
    cr_assert_eq(label, 2);
    cr_assert_eq(pl_loader_sample(l, 8, NULL, &label), 0);
    cr_assert_eq(label, 1);
    cr_assert_eq(pl_loader_sample(l, 8, &path, NULL), 0);
    snprintf(want, sizeof want, "%s/c1/img01.jpg", root);
    cr_assert_str_eq(path, want);
    cr_assert_eq(pl_loader_sample(l, -1, &path, &label), PL_EINVAL);
    cr_assert_eq(pl_loader_sample(l, 23, &path, &label), PL_EINVAL);
    cr_assert_eq(pl_loader_sample(NULL, 0, &path, &label), PL_EINVAL);

    int64_t order[24];
    cr_assert_eq(pl_loader_epoch_order(l, 0, order, 22), PL_EINVAL);
    cr_assert_eq(pl_loader_epoch_order(l, 0, order, 24), PL_EINVAL);
    cr_assert_eq(pl_loader_epoch_order(l, -1, order, 23), PL_EINVAL);
    cr_assert_eq(pl_loader_epoch_order(l, 0, NULL, 23), PL_EINVAL);
    cr_assert_eq(pl_loader_epoch_order(l, 0, order, 23), 0);
    int seen[23] = {0};
    for (int k = 0; k < 23; k++)
        seen[order[k]]++;
    for (int k = 0; k < 23; k++)
        cr_assert_eq(seen[k], 1, "the order is a permutation");
    fx_done(l, root);
}

/* On CUDA, keep_host 0 means no host copy at all. */
Test(loader, keep_host_off_still_sets_host_on_the_host_backend,
     .timeout = TIMEOUT)
{
    char root[64];
    pl_config c;
    fx_tree(root, &c, 23, 3);
    c.keep_host = 0;
    pl_loader *l = create(&c);
    const pl_batch *b;
    cr_assert_eq(pl_loader_next(l, &b), 0);
    if (tu_on_cuda()) {
        cr_assert_null(b->host);
    } else {
        cr_assert_not_null(b->host);
        cr_assert_eq(b->host, b->data);
    }
    cr_assert_eq(pl_loader_release(l, b, NULL), 0);
    fx_done(l, root);
}

/* Without a GPU (CI), asking for CUDA device 0 is an error naming it, not
 * a run on the host. */
Test(loader, an_explicit_cuda_device_without_a_gpu_is_an_error,
     .timeout = TIMEOUT)
{
    if (tu_on_cuda())
        cr_skip_test("the host suite's check (test_cuda has the sim's)");
#ifdef PL_HAVE_CUDA
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0)
        cr_skip_test("this machine has a GPU");
#endif
    char root[64];
    pl_config c;
    fx_tree(root, &c, 6, 2);
    c.device = 0;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_ECUDA, "%s", pl_last_error());
    cr_assert_null(l);
    cr_assert_not_null(
        strstr(pl_last_error(), "config.device: CUDA device 0 requested, but"),
        "%s", pl_last_error());
    c.device = PL_DEVICE_AUTO;
    l = create(&c);
    cr_assert_eq(info_of(l).backend, PL_BACKEND_HOST);
    fx_done(l, root);
}

Test(loader, create_rejects_missing_or_empty_data, .timeout = TIMEOUT)
{
    pl_config c;
    base_cfg(&c, NULL);
    pl_loader *l = (pl_loader *)&c;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL);
    cr_assert_null(l);
    cr_assert_not_null(strstr(pl_last_error(), "config.data"), "%s",
                       pl_last_error());
    char root[64];
    tu_tmpdir(root);
    c.data = root;
    cr_assert_eq(pl_loader_create(&c, &l), PL_ENODATA);
    cr_assert_null(l);
    cr_assert_not_null(strstr(pl_last_error(), root), "%s", pl_last_error());
    tu_rm_rf(root);
}
