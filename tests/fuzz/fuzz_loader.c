/* libFuzzer target for the whole loader: a configuration and a file tree
 * from each input (loader_harness.h), or with PINLOAD_FUZZ_SHARDS=1 a
 * configuration and tar shards (fuzz_shards_one). `make fuzz` runs both. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "loader_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char scratch[64];

static void remove_scratch(void)
{
    fz_rm_rf(scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!scratch[0]) {
        snprintf(scratch, sizeof scratch, "/tmp/pinload-fuzz-loader-XXXXXX");
        if (!mkdtemp(scratch))
            abort();
        atexit(remove_scratch);
    }
    static int shards = -1;
    if (shards < 0) {
        const char *v = getenv("PINLOAD_FUZZ_SHARDS");
        shards = v && *v == '1';
    }
    if (shards)
        fuzz_shards_one(data, size, scratch);
    else
        fuzz_loader_one(data, size, scratch);
    return 0;
}
