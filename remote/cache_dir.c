/* The node cache's folder (cache_dir.h): made 0700 where missing,
 * and refused when another user could change what lies in it, as ssh and
 * tmux refuse a folder of theirs that someone else owns or may write.
 * Without HOME and XDG_CACHE_HOME the cache is /tmp/pinload-UID/shards, a
 * name anyone can make first: a folder there that another user made (or
 * a link another user planted) must not be where a root job writes. */
#include "cache_dir.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/error.h"

/* Whose folders the cache may lie in. */
typedef struct trust {
    uid_t euid;
    /* The folder is a group's, shared on purpose (named by the user,
     * setgid, group-writable, not writable by all): its owner, another
     * member of the group, is trusted as the user is. */
    int shared;
    uid_t share_uid;
} trust;

static int trusted(const trust *t, uid_t u)
{
    return u == 0 || u == t->euid || (t->shared && u == t->share_uid);
}

/* Why a folder (or a symbolic link to one) above the cache folder lets
 * another user put something else in the cache's place; NULL if it does
 * not. Group write is accepted here (a private group's 0775 under umask
 * 002 is common); writable by all is accepted only with the sticky bit,
 * which keeps others from renaming what is ours (/tmp). */
static const char *above_fault(const trust *t, const struct stat *st)
{
    if (!S_ISDIR(st->st_mode) && !S_ISLNK(st->st_mode))
        return "is not a folder";
    if (!trusted(t, st->st_uid))
        return S_ISLNK(st->st_mode)
                   ? "is a symbolic link that belongs to another user"
                   : "belongs to another user";
    if (S_ISDIR(st->st_mode) && (st->st_mode & S_IWOTH) &&
        !(st->st_mode & S_ISVTX))
        return "is writable by every user and has no sticky bit (as /tmp "
               "has)";
    return NULL;
}

/* Why the cache folder itself lets another user change its files; NULL
 * if it does not: the user's, and writable by no one else, unless it is
 * a group's shared on purpose. */
static const char *cache_fault(const trust *t, const struct stat *st)
{
    if (!S_ISDIR(st->st_mode))
        return "is not a folder";
    if (st->st_mode & S_IWOTH)
        return "is writable by every user";
    if (t->shared)
        return st->st_uid == t->share_uid && (st->st_mode & S_ISGID) &&
                       (st->st_mode & S_IWGRP)
                   ? NULL
                   : "changed while it was checked";
    if (st->st_uid != t->euid)
        return "belongs to another user";
    if (st->st_mode & S_IWGRP)
        return "is writable by its group";
    return NULL;
}

/* The refusal: the folder, why, its owner and mode, and what to do. */
static int refuse(const trust *t, const char *at, const struct stat *st,
                  const char *why, const char *cache, int is_cache)
{
    const long uid = (long)st->st_uid, me = (long)t->euid;
    const unsigned mode = (unsigned)st->st_mode & 07777;
    if (!S_ISDIR(st->st_mode) && !S_ISLNK(st->st_mode))
        return err_set(PL_EIO,
                       "pl_loader_create: config.cache_dir: %s is not a "
                       "folder",
                       at);
    if (is_cache)
        return err_set(
            PL_EIO,
            "pl_loader_create: config.cache_dir: the cache folder %s %s "
            "(owner uid %ld, mode %04o; you are uid %ld): another user "
            "could change the files pinload writes and reads there. Set "
            "config.cache_dir (or $PINLOAD_CACHE_DIR) to a folder of your "
            "own%s; to share a cache between users on purpose, make it a "
            "group's setgid folder (chmod 2770) and name it there "
            "(docs/DATA.md)",
            at, why, uid, mode, me,
            uid != me ? ", or remove this one if it is not yours"
            : S_ISDIR(st->st_mode) && (st->st_mode & (S_IWGRP | S_IWOTH))
                ? ", or chmod go-w this one"
                : "");
    return err_set(PL_EIO,
                   "pl_loader_create: config.cache_dir: %s, above the cache "
                   "folder %s, %s (owner uid %ld, mode %04o; you are uid "
                   "%ld): another user could put a folder of their own in "
                   "the cache's place. Set config.cache_dir (or "
                   "$PINLOAD_CACHE_DIR) to a folder under folders that only "
                   "you or root can change",
                   at, cache, why, uid, mode, me);
}

static int failed(const char *what, const char *at)
{
    return err_set(PL_EIO, "pl_loader_create: config.cache_dir: %s %s: %s",
                   what, at, strerror(errno));
}

/* Every folder of `real` (a path without links: realpath's), from / on,
 * checked; the last as the cache folder if `last_is_cache`, else as one
 * above it. */
static int check_real(const trust *t, const char *real, int last_is_cache,
                      const char *cache)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", real) >= (int)sizeof p)
        return err_set(PL_EIO,
                       "pl_loader_create: config.cache_dir: %s: "
                       "the path is too long",
                       real);
    const size_t len = strlen(p);
    for (size_t i = 0; i <= len; i++) {
        if (i < len && p[i] != '/')
            continue;
        const char c = p[i];
        p[i] = '\0';
        const char *at = i == 0 ? "/" : p;
        struct stat st;
        if (lstat(at, &st) != 0)
            return failed("cannot look at", at);
        const int is_cache = last_is_cache && i == len;
        const char *why = is_cache ? cache_fault(t, &st) : above_fault(t, &st);
        if (why)
            return refuse(t, at, &st, why, cache, is_cache);
        p[i] = c;
    }
    return 0;
}

/* The path as written, one folder at a time: each made 0700 if missing,
 * and each checked before the next is made in it (a link, and the folders
 * its target lies in, too), so that nothing is made where another user
 * leads. `cache` is absolute. */
static int walk(const trust *t, const char *cache)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", cache);
    const size_t len = strlen(p);
    for (size_t i = 1; i <= len; i++) {
        if ((i < len && p[i] != '/') || p[i - 1] == '/')
            continue;
        const char c = p[i];
        p[i] = '\0';
        struct stat st;
        int rc = lstat(p, &st);
        if (rc != 0 && errno == ENOENT) {
            if (mkdir(p, 0700) != 0 && errno != EEXIST)
                rc = failed("cannot make", p);
            else
                rc = lstat(p, &st) == 0 ? 0 : failed("cannot look at", p);
        } else if (rc != 0) {
            rc = failed("cannot look at", p);
        }
        /* The cache folder itself is checked once resolved, but a link
         * to it must be one the user or root made. */
        const char *why = NULL;
        if (rc == 0 && (S_ISLNK(st.st_mode) || i < len))
            why = above_fault(t, &st);
        if (rc == 0 && why)
            rc = refuse(t, p, &st, why, cache, i == len);
        char real[PATH_MAX];
        if (rc == 0 && S_ISLNK(st.st_mode))
            rc = realpath(p, real) ? check_real(t, real, 0, cache)
                                   : failed("cannot follow", p);
        p[i] = c;
        if (rc < 0)
            return rc;
    }
    return 0;
}

int cache_dir_prepare(const char *dir, int named, char *real, size_t cap,
                      int *shared)
{
    char abs[PATH_MAX], cwd[PATH_MAX];
    int n;
    if (dir[0] == '/')
        n = snprintf(abs, sizeof abs, "%s", dir);
    else if (getcwd(cwd, sizeof cwd))
        n = snprintf(abs, sizeof abs, "%s/%s", cwd, dir);
    else
        return failed("cannot resolve", dir);
    if (n < 0 || n >= (int)sizeof abs || cap < PATH_MAX)
        return err_set(PL_EIO,
                       "pl_loader_create: config.cache_dir: %s: "
                       "the path is too long",
                       dir);
    trust t = {.euid = geteuid()};
    struct stat st;
    if (named && stat(abs, &st) == 0 && S_ISDIR(st.st_mode) &&
        (st.st_mode & S_ISGID) && (st.st_mode & S_IWGRP) &&
        !(st.st_mode & S_IWOTH)) {
        t.shared = 1;
        t.share_uid = st.st_uid;
    }
    int rc = walk(&t, abs);
    if (rc == 0 && !realpath(abs, real))
        rc = failed("cannot resolve", abs);
    if (rc == 0)
        rc = check_real(&t, real, 1, real);
    *shared = t.shared;
    return rc;
}
