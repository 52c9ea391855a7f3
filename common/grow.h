/* Growing a buffer: the one realloc pattern of the library. */
#ifndef PINLOAD_GROW_H
#define PINLOAD_GROW_H

#include <stddef.h>

/* Make the array *pp (of elements of `elem` bytes; pp is the address of a
 * typed pointer) hold at least `need` elements, *cap counting those it
 * holds now. With first == 0 it grows to exactly `need` (a buffer sized
 * for the largest image so far); otherwise it starts at `first` and
 * doubles (an array appended to one element at a time). Returns 0, or
 * PL_ENOMEM with *pp and *cap unchanged (and still valid). */
int grow(void *pp, size_t *cap, size_t need, size_t elem, size_t first);

/* The most a worker's scratch buffer keeps between samples once one
 * unusually large sample grew it. */
#define GROW_KEEP_BYTES ((size_t)32 << 20)

/* grow() for a worker's scratch buffer: a buffer holding more than
 * GROW_KEEP_BYTES is first given back when `need` fits in that, so one huge
 * sample does not leave a worker holding its size for the rest of the
 * run. */
int grow_scratch(void *pp, size_t *cap, size_t need, size_t elem, size_t first);

#endif
