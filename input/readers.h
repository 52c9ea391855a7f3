/* The readers: each adds one kind of data's samples and classes to a
 * catalog, in the order it defines, and names what it cannot read.
 * input.c's dispatcher picks one for config.data. Errors set pl_last_error
 * ("pl_loader_create: <path>: <why>") and return PL_E*; notices (files
 * ignored, link loops) go to lg. */
#ifndef PINLOAD_READERS_H
#define PINLOAD_READERS_H

#include "../common/log.h"
#include "../index/tar.h"
#include "catalog.h"

#define MAX_CLASSES (1 << 20)

/* An ImageFolder tree, or a flat folder of images (one class named after
 * it): folder.c. Files named .jpg, .jpeg, .png or .webp are samples; the
 * other kinds torchvision's ImageFolder reads are named in a notice. */
int folder_read(catalog *c, const char *dir, logger *lg);

/* A list file of "path label" lines, paths relative to its folder:
 * list.c. */
int list_read(catalog *c, const char *path);

/* Tar shards in the WebDataset layout (shards.c): whether `path` names
 * shards (one .tar, or a file that is a tar by its bytes, tar_is_archive;
 * a folder of *.tar and no sub-folder, a brace pattern
 * "train-{000000..000146}.tar", or a list file whose lines are shard
 * paths): 1 with [out] their paths (*paths, *n: the caller frees each and
 * the array), 0 if not, or an error. */
int shards_detect(const char *path, char ***paths, int *n);

/* Index the shards and add their samples: shards in sorted order, members
 * in file order; consecutive members with one key (the path up to the
 * first dot of its last component) make one sample, its image the jpg,
 * jpeg, png or webp member (other image members are named in a notice),
 * its label the cls member (decimal text), 0 without one. */
int shards_read(catalog *c, char **paths, int n, logger *lg);

/* The shard reader's parts that remote shards (remote.c) share. */

/* Shards whose tables are mapped a file each: each mapping is one of the
 * process's vm.max_map_count areas (65,530 by default), which the
 * allocator, the libraries and the threads' stacks need too. Past it
 * local shards' tables come from one dataset table file, mapped once
 * (node_tables.h), and remote shards' are read into the heap. The
 * environment variable PINLOAD_MAPPED_MAX lowers it (a hook for tests
 * only, so that a few dozen shards take that path). */
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
int shards_add_indexed(catalog *c, int s, const char *path, sample_table *tab,
                       int32_t *max_label, unread_members *unread);

/* The notice naming how many shards' tables are in the heap, not mapped
 * from an index file, if any are. */
void shards_say_heap(const catalog *c, logger *lg);

/* The warnings naming the members left out and the keys without a label,
 * if there are any: both change what the caller gets. */
void shards_say_unread(const unread_members *u, logger *lg);

/* The class names: from the file `classes` (one per line, label 0 first;
 * NULL, "" or absent: none), else the decimal labels 0..max_label. */
int shards_add_classes(catalog *c, const char *classes, int32_t max_label,
                       logger *lg);

#endif
