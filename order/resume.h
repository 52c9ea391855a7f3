/* Where a loader's first epoch starts, settled once at create (from
 * config.first_epoch, or config.resume's state) and passed down as it is
 * to the claim schedule, the copy engine and the hand-off, which each
 * take what they need from it. */
#ifndef PINLOAD_RESUME_H
#define PINLOAD_RESUME_H

#include <stdint.h>

typedef struct resume_point {
    int64_t epoch;    /* the first epoch's number */
    int64_t batch;    /* resuming mid-epoch: its first batch to deliver */
    int64_t position; /* and where in the rank's order that batch starts */
    int done;         /* the epoch's batches were all delivered already:
                         the loader starts at epoch + 1 */
} resume_point;

#endif
