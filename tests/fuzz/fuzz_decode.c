/* libFuzzer target for the decode and augment path: `make fuzz`. */
#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* One context for the whole run, as a worker keeps its own: reuse after
     * every kind of failure is part of what is tested, and so is that each
     * input gives what it gives a fresh context. */
    static sample_ctx ctx;
    static int ready;
    if (!ready) {
        decode_limits lim;
        fuzz_limits(&lim);
        if (sample_init(&ctx, &lim) < 0)
            abort();
        ready = 1;
    }
    fuzz_one_as_alone(&ctx, data, size);
    return 0;
}
