/* libFuzzer target for the tar shard indexer: `make fuzz`. */
#include "tar_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_tar_one(data, size);
    return 0;
}
