/* pipe: (the schemes' table, scheme.h): a command run by /bin/sh in a
 * process group of its own, its standard output the object, killed with
 * its group when it stalls or the loader closes. No ranges, nothing
 * beside it; a command runs only from what the user wrote in config.data
 * (remote.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/clock.h"
#include "scheme.h"

/* The command, run by /bin/sh in a process group of its own, writing its
 * standard output into fd from byte 0: the child's pid, or -1. */
static pid_t spawn(const char *cmd, int fd)
{
    const pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        if (dup2(fd, 1) < 0)
            _exit(127);
        lseek(1, 0, SEEK_SET);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits for the child: 0 with its *status; or -1, a saying why, once it
 * was killed (with its group) for writing no byte to fd for timeout_ms,
 * because the loader closes, or at create's deadline. */
static int watch(const transfers *t, pid_t pid, int fd, int *status, attempt *a)
{
    int64_t last_size = -1, still_ns = 0;
    while (waitpid(pid, status, WNOHANG) != pid) {
        struct stat st;
        const int64_t now = clock_now_ns();
        if (fstat(fd, &st) == 0 && st.st_size != last_size) {
            last_size = st.st_size;
            still_ns = now;
        }
        if (transfers_stopping(t) ||
            now - still_ns > (int64_t)t->timeout_ms * 1000000) {
            kill(-pid, SIGKILL);
            waitpid(pid, status, 0);
            if (atomic_load(t->stop))
                snprintf(a->why, sizeof a->why, "the loader is closing");
            else if (transfers_past_deadline(t))
                snprintf(a->why, sizeof a->why,
                         "create's deadline passed "
                         "(config.remote_create_timeout_ms, %d ms)",
                         (int)t->deadline_ms);
            else
                snprintf(a->why, sizeof a->why, "the command stalled");
            a->retry = !transfers_stopping(t);
            return -1;
        }
        const struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* The command's standard output into fd, from byte 0; a stall of
 * timeout_ms (no byte written) kills it. */
static void pipe_get(const transfers *t, const char *cmd, int fd, attempt *a)
{
    memset(a, 0, sizeof *a);
    if (ftruncate(fd, 0) != 0) {
        snprintf(a->why, sizeof a->why, "ftruncate: %s", strerror(errno));
        return;
    }
    const pid_t pid = spawn(cmd, fd);
    if (pid < 0) {
        snprintf(a->why, sizeof a->why, "fork: %s", strerror(errno));
        a->retry = 1;
        return;
    }
    int status = 0;
    if (watch(t, pid, fd, &status, a) < 0)
        return;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        a->ok = 1;
        return;
    }
    struct statvfs v;
    if ((WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) ||
        (fstatvfs(fd, &v) == 0 && v.f_bavail == 0)) {
        /* The command's writes failed, or would have: the cache's disk. */
        snprintf(a->why, sizeof a->why,
                 "the command could not write the cache: its disk is full");
        a->no_room = 1;
        return;
    }
    if (WIFEXITED(status))
        snprintf(a->why, sizeof a->why, "the command exited with status %d",
                 WEXITSTATUS(status));
    else
        snprintf(a->why, sizeof a->why, "the command was killed by signal %d",
                 WTERMSIG(status));
    a->retry = 1;
}

/* One run of a pipe: command into fd: 1 if it wrote the whole, else 0
 * (a says why, and whether to try again). */
static int pipe_whole(transfers *t, const char *url, int fd, int64_t have,
                      int64_t expect, attempt *a)
{
    (void)have; /* a command's output is not resumed: it runs anew */
    pipe_get(t, url + 5, fd, a);
    if (!a->ok)
        return 0;
    struct stat st;
    const int64_t got = fstat(fd, &st) == 0 ? st.st_size : -1;
    if (expect < 0 || got == expect)
        return 1;
    snprintf(a->why, sizeof a->why,
             "the command wrote %lld bytes, its index says %lld",
             (long long)got, (long long)expect);
    a->ok = 0;
    a->retry = 1;
    return 0;
}

/* A command is shown, and named in the cache, as it is. */
static void pipe_display(const char *url, char *out, size_t cap)
{
    snprintf(out, cap, "%s", url);
}

static void pipe_key(const transfers *t, const char *url, char *out, size_t cap)
{
    (void)t;
    snprintf(out, cap, "%s", url);
}

const scheme scheme_pipe = {
    .command = 1,
    .whole = pipe_whole,
    .range = NULL,
    .display = pipe_display,
    .cache_key = pipe_key,
};
