/* pinload-bench --baseline: what libjpeg-turbo alone decodes on these cores.
 * The same files, read into memory once, decoded full size to RGB by the
 * TurboJPEG API on N threads (no pipeline, no resize): the decode limit a
 * loader is measured against. Also the rate at 1/8 scale, where little but
 * the entropy decoding is left: the ceiling for any decoder built on
 * libjpeg-turbo that must read every coefficient. */
#ifndef PINLOAD_BENCH_BASELINE_H
#define PINLOAD_BENCH_BASELINE_H

#include <stddef.h>

typedef struct baseline_files baseline_files;

/* Read every file of the dataset at `data` (as the loader lists it) into
 * memory. NULL on error, with a message on stderr. */
baseline_files *baseline_load(const char *data);
void baseline_free(baseline_files *f);
size_t baseline_count(const baseline_files *f);
/* Files left out because TurboJPEG cannot decode them to RGB. */
size_t baseline_left_out(const baseline_files *f);

/* Images per second decoding the files round-robin on `threads` threads for
 * about `seconds`, at full size (scale_denom 1) or at 1/scale_denom. Files
 * TurboJPEG cannot decode to RGB (CMYK, corrupt) are skipped and counted in
 * *skipped. 0 on error. */
double baseline_rate(const baseline_files *f, int threads, int scale_denom,
                     double seconds, size_t *skipped);

#endif
