/* An out-of-tree program built against an installed pinload (C). Creates a
 * loader on the folder given, takes one batch and checks its shape. */
#include <pinload.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: hello DATA\n");
        return 2;
    }
    pl_config c;
    pl_config_default(&c);
    c.data = argv[1];
    c.device = PL_DEVICE_HOST;
    c.batch_size = 4;
    c.width = c.height = 32;
    pl_loader *l;
    if (pl_loader_create(&c, &l) != 0) {
        fprintf(stderr, "hello: %s\n", pl_last_error());
        return 1;
    }
    const pl_batch *b;
    int rc = pl_loader_next(l, &b);
    if (rc == 0) {
        printf("pinload %s: batch of %d, first label %d\n", pl_version(),
               b->count, b->labels[0]);
        rc = b->count == 4 ? pl_loader_release(l, b, NULL) : 1;
    } else {
        fprintf(stderr, "hello: %s\n", pl_last_error());
    }
    pl_loader_destroy(l);
    return rc == 0 ? 0 : 1;
}
