/* The shortest correct pinload program: one epoch over an ImageFolder tree,
 * printing each batch's size and first label.
 *
 *     build/samples/minimal path/to/train
 */
#include <stdio.h>

#include "pinload.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
        return 2;
    }
    pl_config cfg;
    pl_config_default(&cfg);
    cfg.data = argv[1];
    cfg.batch_size = 32;

    pl_loader *loader;
    if (pl_loader_create(&cfg, &loader) < 0) {
        fprintf(stderr, "%s\n", pl_last_error());
        return 1;
    }
    const pl_batch *b;
    int rc;
    while ((rc = pl_loader_next(loader, &b)) == 0) {
        /* A training step would read b->data here, on a stream made to
         * wait with pl_batch_wait(b, stream). */
        printf("epoch %lld batch %lld: %d samples, first label %d\n",
               (long long)b->epoch, (long long)b->index, b->count,
               b->labels[0]);
        pl_loader_release(loader, b, NULL);
    }
    if (rc != PL_EPOCH_END)
        fprintf(stderr, "%s\n", pl_last_error());
    pl_loader_destroy(loader);
    return rc == PL_EPOCH_END ? 0 : 1;
}
