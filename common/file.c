#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *not_regular(mode_t m)
{
    return S_ISFIFO(m)   ? "not a regular file (a FIFO)"
           : S_ISDIR(m)  ? "not a regular file (a directory)"
           : S_ISCHR(m)  ? "not a regular file (a character device)"
           : S_ISBLK(m)  ? "not a regular file (a block device)"
           : S_ISSOCK(m) ? "not a regular file (a socket)"
                         : "not a regular file";
}

FILE *file_open_regular(const char *path, const char **why)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    FILE *f = NULL;
    if (fd < 0 || fstat(fd, &st) != 0) {
        *why = strerror(errno);
    } else if (!S_ISREG(st.st_mode)) {
        *why = not_regular(st.st_mode);
        errno = EINVAL;
    } else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 ||
               !(f = fdopen(fd, "r"))) {
        *why = strerror(errno);
    }
    if (!f && fd >= 0) {
        const int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}
