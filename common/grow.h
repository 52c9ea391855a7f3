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

#endif
