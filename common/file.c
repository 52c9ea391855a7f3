#include "file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/resource.h>
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

long file_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    long k = 0;
    for (const struct dirent *e; (e = readdir(d));)
        k += e->d_name[0] != '.';
    closedir(d);
    return k - 1; /* the listing's own */
}

long file_fds_room(long want, long margin)
{
    struct rlimit rl;
    if (want <= 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return want > 0 ? want : 0;
    const rlim_t used = (rlim_t)file_open_fds() + (rlim_t)margin,
                 need = used + (rlim_t)want;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        const rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need
                          ? rl.rlim_max
                          : need;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            rl.rlim_cur = was;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return want;
    return rl.rlim_cur > used ? (long)(rl.rlim_cur - used) : 0;
}

ssize_t file_pread_full(int fd, void *buf, size_t n, off_t off)
{
    size_t got = 0;
    while (got < n) {
        const ssize_t r = pread(fd, (char *)buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}
