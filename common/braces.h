/* Lists of paths (or URLs), and the brace patterns that name many of them
 * at once ("train-{000000..000146}.tar"): how the shard readers, local
 * (input/shards.c) and remote (remote/remote.c), make theirs. */
#ifndef PINLOAD_BRACES_H
#define PINLOAD_BRACES_H

#include <stddef.h>

/* The paths one list may hold, a pattern's range included. */
#define PATHS_MAX (1 << 20)

/* "train-{000000..000146}.tar" (any text around the braces, a URL too):
 * the numbers from a to b, zero-padded to a's width when a starts with 0,
 * into *paths (empty before; the caller frees each and the array, on
 * failure too) and *n. 1, 0 if `path` has no such pattern, or an error
 * (PL_EINVAL with pl_last_error naming a range that is empty or over
 * PATHS_MAX; PL_ENOMEM). */
int braces_expand(const char *path, char ***paths, int *n);

/* s (malloc'd: taken, and freed on failure; NULL counts as out of
 * memory) appended to (*p)[0, *n), grown in *cap. 0, or PL_ENOMEM (past
 * PATHS_MAX paths too). */
int paths_push(char ***p, int *n, size_t *cap, char *s);

/* Frees p[0, n) and p; NULL is accepted. */
void paths_free(char **p, int n);

#endif
