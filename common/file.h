/* Files, the few ways every room reads them: opening one the user named
 * (a list file, an index) the one safe way, without blocking, so that a
 * FIFO, a device or a socket given in its place is refused at once
 * instead of waited on for ever, and only when it is a regular file;
 * reading n bytes at an offset whole; the descriptors a process may
 * still open. */
#ifndef PINLOAD_FILE_H
#define PINLOAD_FILE_H

#include <stdio.h>
#include <sys/types.h>

/* `path` open for reading (close-on-exec), or NULL with errno set and
 * *why a reason to print after the path: strerror's, or "not a regular
 * file (a FIFO)" and the like (errno EINVAL). */
FILE *file_open_regular(const char *path, const char **why);

/* Room for `want` more open descriptors beside those open now and
 * `margin` for everything else, the soft limit on open files raised
 * towards the hard one where it is below (quietly: the caller says what
 * it does with less): how many of them fit, 0 to want. */
long file_fds_room(long want, long margin);

/* Descriptors this process has open now, or 0 if it cannot tell. */
long file_open_fds(void);

/* n bytes of fd at `off` into buf, read again after EINTR and short
 * reads: n, fewer where the file ends first (what was read), or -1 with
 * errno. */
ssize_t file_pread_full(int fd, void *buf, size_t n, off_t off);

#endif
