/* A tar shard's indexed samples into the catalog, the part of reading
 * shards that local ones (input/shards.c) and remote ones
 * (remote/remote.c) share: each key of a shard's sample table a sample,
 * its label from its cls member or from config.label_field's JSON field,
 * the image members left out and the keys without a label counted for
 * one warning each, and the class names (classes.txt beside the shards,
 * else the decimal labels). Errors set pl_last_error and return PL_E*. */
#ifndef PINLOAD_SHARD_SAMPLES_H
#define PINLOAD_SHARD_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

#include "../common/log.h"
#include "../index/sample_table.h"
#include "catalog.h"

/* Shards whose tables are read from an index file each: each keeps its
 * file open (sample_table.h), a descriptor beside its shard's (and, when
 * it was mapped, each was one of the process's vm.max_map_count areas,
 * 65,530 by default: the name stays). Past it, or where the limit on
 * open files leaves no room for them, local shards' tables come from one
 * dataset table file, open once (index/node_tables.h), and remote
 * shards' are read into the heap. The environment variable
 * PINLOAD_MAPPED_MAX lowers it (a hook for tests only, so that a few
 * dozen shards take that path). */
#define SHARDS_MAPPED_MAX 32768

#define SHARDS_UNREAD_NAMED 5 /* members the notice names */

/* Image members of kinds not read (bmp, pgm, ppm, tif, tiff), across
 * every shard: a count and the first few "shard.tar:member" names, for
 * one create warning (nothing is left out silently); and the keys read so
 * far, and those of them without a cls member (labelled 0, unless
 * config.label_field names their labels' field). */
typedef struct unread_members {
    size_t count;
    char names[SHARDS_UNREAD_NAMED * 160];
    size_t len;
    int64_t keys, unlabelled;
    char unlabelled_name[240]; /* the first of them, "shard.tar:key" */
} unread_members;

/* The samples of one indexed shard, source `s` of the catalog, named
 * "path:member", from its table (the catalog takes it, on failure too);
 * *max_label rises to the largest label seen; image members of kinds not
 * read are noted in *unread. */
int shard_samples_add(catalog *c, int s, const char *path, sample_table *tab,
                      int32_t *max_label, unread_members *unread);

/* The notice naming how many shards' tables are in the heap, not read
 * from an index file, if any are. */
void shard_samples_say_heap(const catalog *c, logger *lg);

/* The warnings naming the members left out and the keys without a label,
 * if there are any: both change what the caller gets. */
void shard_samples_say_unread(const unread_members *u, logger *lg);

/* The class names: from the file `classes` (one per line, label 0 first;
 * NULL, "" or absent: none), else the decimal labels 0..max_label. */
int shard_samples_add_classes(catalog *c, const char *classes,
                              int32_t max_label, logger *lg);

#endif
