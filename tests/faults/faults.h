/* Fault injection for tests/system/test_faults.c. That suite links its own
 * build of the library objects, compiled with `-include tests/faults/faults.h`:
 * the library's allocations, thread creations, mlock, openat and read calls go
 * through hooks the test defines (counting live allocations, failing the
 * N-th call on request, cutting reads short, refusing a named file). The
 * library itself has no hook and no global state for this; only that build
 * does. */
#ifndef PINLOAD_FAULTS_H
#define PINLOAD_FAULTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

void *fault_malloc(size_t n);
void *fault_calloc(size_t n, size_t size);
void *fault_realloc(void *p, size_t n);
void *fault_aligned_alloc(size_t align, size_t n);
void fault_free(void *p);
char *fault_strdup(const char *s);
char *fault_strndup(const char *s, size_t n);
ssize_t fault_getline(char **line, size_t *cap, FILE *f);
int fault_pthread_create(pthread_t *t, const pthread_attr_t *attr,
                         void *(*fn)(void *), void *arg);
int fault_mlock(const void *p, size_t n);
ssize_t fault_read(int fd, void *buf, size_t n);
int fault_openat(int dirfd, const char *path, int flags, ...);

/* The library's build for test_faults defines PL_FAULT_INJECTION; the test
 * itself includes this header for the prototypes alone. */
#ifdef PL_FAULT_INJECTION
#define malloc fault_malloc
#define calloc fault_calloc
#define realloc fault_realloc
#define aligned_alloc fault_aligned_alloc
#define free fault_free
#define strdup fault_strdup
#define strndup fault_strndup
#define getline fault_getline
#define pthread_create fault_pthread_create
#define mlock fault_mlock
#define read fault_read
#define openat fault_openat
#endif

#endif
