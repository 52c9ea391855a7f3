/* The tools and the training sample built against the simulated CUDA
 * runtime (tests/cudasim): they name the simulated device and agree with
 * the host backend byte for byte (pinload-dump), measure its copies
 * (pinload-bench), and take the CUDA path to the host path's losses
 * (train_classifier), and train_loop runs on its local rank's device.
 * Built only by `make CUDA=sim`; the tests were
 * test_cuda.c's, hence their suite name. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"

#define TIMEOUT 120

/* ---- the tools and samples on simulated CUDA ---- */

static int run_cmd(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "%s", cmd);
    const size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    return pclose(p);
}

/* pinload-dump built against the simulator says so in its create notice,
 * and writes what the host backend writes. */
Test(cuda, the_tools_name_the_simulated_device_and_agree_with_the_host,
     .timeout = TIMEOUT)
{
    char root[64], out[64], cmd[1024], text[4096];
    tu_make_tree(root, 15, 3);
    tu_tmpdir(out);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-dump --data %s --out %s/cuda --size 24 --batch 4 "
             "--device 0 2>&1",
             tu_build_dir(), root, out);
    cr_assert_eq(run_cmd(cmd, text, sizeof text), 0, "%s", text);
    cr_assert_not_null(strstr(text, "backend: cuda device 0 (simulated)"), "%s",
                       text);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-dump --data %s --out %s/host --size 24 --batch 4 "
             "--device host 2>&1 && diff -r %s/cuda %s/host",
             tu_build_dir(), root, out, out, out);
    cr_assert_eq(run_cmd(cmd, text, sizeof text), 0, "%s", text);
    snprintf(cmd, sizeof cmd,
             "%s/pinload-bench --data %s --device cuda --batch 4 --size 24 "
             "--workers 1 --prefetch 2 --pin on --batches 6 --compute-ms 1 "
             "2>&1",
             tu_build_dir(), root);
    cr_assert_eq(run_cmd(cmd, text, sizeof text), 0, "%s", text);
    cr_assert_not_null(strstr(text, "(simulated)"), "%s", text);
    /* Both of cudaMemcpy's ceilings, for the batch as it crosses the bus:
     * uint8 with GPU normalisation, float32 (4x) without. */
    static const char *const norm[] = {"on", "off"};
    static const char *const want[] = {"cudaMemcpy for 6912-byte copies: ",
                                       "cudaMemcpy for 27648-byte copies: "};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd,
                 "%s/pinload-bench --data %s --device cuda --batch 4 --size 24 "
                 "--workers 1 --prefetch 2 --pin on,off --batches 2 "
                 "--format f32 --gpu-normalize %s --json %s/b.json 2>&1 && "
                 "cat %s/b.json",
                 tu_build_dir(), root, norm[i], out, out);
        cr_assert_eq(run_cmd(cmd, text, sizeof text), 0, "%s", text);
        cr_assert_not_null(strstr(text, want[i]), "%s", text);
        cr_assert_not_null(strstr(text, "GB/s from pageable memory"), "%s",
                           text);
        cr_assert_not_null(strstr(text, "\"memcpy_pageable_gb_per_s\": "),
                           "the JSON is whole: %s", text);
        cr_assert_null(strstr(text, "_gb_per_s\": -1"), "%s", text);
    }
    tu_rm_rf(out);
    tu_rm_rf(root);
}

/* train_classifier on simulated CUDA takes the CUDA path (the loader's
 * protocol on its own stream) with the host maths: from the same weights
 * the losses equal the host path's exactly. */
Test(cuda, the_training_sample_on_cuda_matches_the_host_path,
     .timeout = TIMEOUT)
{
    char root[64], cmd[1024], cu[8192], host[8192];
    tu_make_tree(root, 40, 4);
    const char *fmt = "%s/examples/train_classifier --data %s --epochs 2 "
                      "--batch 8 --size 8 --workers 2 --device %s 2>&1 | "
                      "grep -o 'loss [0-9.]*\\|accuracy [0-9.]*%%\\|CUDA'";
    snprintf(cmd, sizeof cmd, fmt, tu_build_dir(), root, "cuda");
    cr_assert_eq(run_cmd(cmd, cu, sizeof cu), 0, "%s", cu);
    snprintf(cmd, sizeof cmd, fmt, tu_build_dir(), root, "host");
    cr_assert_eq(run_cmd(cmd, host, sizeof host), 0, "%s", host);
    cr_assert_eq(strncmp(cu, "CUDA\n", 5), 0, "%s", cu);
    cr_assert_str_eq(cu + 5, host, "CUDA:\n%s\nhost:\n%s", cu, host);
    cr_assert_not_null(strstr(host, "loss"), "%s", host);
    tu_rm_rf(root);
}

/* samples/train_loop takes its local rank's simulated GPU (device 1 for
 * local rank 1: its stream must be on the loader's device, or the release
 * fails) and prints the batches the host backend does (CUDASIM_DEVICES=0:
 * no GPU); a state saved on CUDA resumes on the host. */
Test(cuda, the_training_loop_sample_runs_on_its_local_ranks_gpu,
     .timeout = TIMEOUT)
{
    char root[64], cmd[1024], cu[8192], host[8192];
    tu_make_tree(root, 30, 3);
    const char *fmt = "%s %s/samples/train_loop %s --epochs 2 %s 2>&1";
    static const char *const ranks[] = {"", "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 "
                                            "LOCAL_WORLD_SIZE=2"};
    static const char *const want[] = {"backend: cuda device 0 (simulated)",
                                       "backend: cuda device 1 (simulated)"};
    for (int r = 0; r < 2; r++) {
        snprintf(cmd, sizeof cmd, fmt, ranks[r], tu_build_dir(), root, "");
        cr_assert_eq(run_cmd(cmd, cu, sizeof cu), 0, "%s", cu);
        cr_assert_not_null(strstr(cu, want[r]), "%s", cu);
        cr_assert_not_null(strstr(cu, "\ndone: 2 batches\n"), "%s", cu);
        char env[128];
        snprintf(env, sizeof env, "CUDASIM_DEVICES=0 %s", ranks[r]);
        snprintf(cmd, sizeof cmd, fmt, env, tu_build_dir(), root, "");
        cr_assert_eq(run_cmd(cmd, host, sizeof host), 0, "%s", host);
        cr_assert_not_null(strstr(host, "backend: host"), "%s", host);
        const char *a = strstr(cu, "epoch 0 batch 0:"),
                   *b = strstr(host, "epoch 0 batch 0:");
        cr_assert(a && b, "%s\n%s", cu, host);
        cr_assert_eq(strncmp(a, b, (size_t)(strstr(a, "done") - a)), 0,
                     "CUDA:\n%s\nhost:\n%s", cu, host);
    }
    char state[128], args[256];
    snprintf(state, sizeof state, "%s/state", root);
    snprintf(args, sizeof args, "--save %s --every 1 --stop-after 1", state);
    snprintf(cmd, sizeof cmd, fmt, "", tu_build_dir(), root, args);
    cr_assert_eq(run_cmd(cmd, cu, sizeof cu), 0, "%s", cu);
    snprintf(args, sizeof args, "--resume %s", state);
    snprintf(cmd, sizeof cmd, fmt, "CUDASIM_DEVICES=0", tu_build_dir(), root,
             args);
    cr_assert_eq(run_cmd(cmd, host, sizeof host), 0, "%s", host);
    cr_assert_not_null(strstr(host, "\nepoch 1 batch 0: 30 samples, "), "%s",
                       host);
    cr_assert_not_null(strstr(host, "\ndone: 1 batches"), "%s", host);
    tu_rm_rf(root);
}
