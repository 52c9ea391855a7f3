/* What a data file and another user of the machine may make pinload do
 * (issue 34): a data file never runs a command (a tar is a shard, a
 * binary file is never a list, a list's pipe: lines run only when the
 * user allows it), and the node cache cannot be turned against its user
 * (a folder another user could change is refused; no file in it is opened
 * through a link). Real files, real commands, the loopback server of
 * tests/remote/httpd.py; each case of docs/RELIABILITY.md's "Data files
 * and other users" table is named in its test. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinload.h"
#include "testremote.h"
#include "testrun.h"

#define RS_TIMEOUT 120
#define OTHER_UID 12345 /* a user of the machine who is not us */

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static void expect_in(const char *text, const char *needle)
{
    cr_assert_not_null(strstr(text, needle), "no \"%s\" in:\n%s", needle, text);
}

/* ---- a data file never runs a command ---- */

static void allow_pipe_lists(int on)
{
    if (on)
        setenv("PINLOAD_ALLOW_PIPE_LISTS", "1", 1);
    else
        unsetenv("PINLOAD_ALLOW_PIPE_LISTS");
}

/* A tar given as data, named .tar or not, is a shard: its first member's
 * name is never read as a list's first line, so the command in it never
 * runs, with the list opt-in set or not; a tar with an image is read as
 * the shard it is (its sample's name, label and bytes). Before, the
 * member's name ran at create. */
Test(remote_safety, a_tar_given_as_data_is_a_shard_never_a_command,
     .timeout = RS_TIMEOUT)
{
    char dir[64], marker[128], bare[128], sample[128], jpeg[128], cache[128];
    tu_tmpdir(dir);
    snprintf(marker, sizeof marker, "%s/marker", dir);
    snprintf(bare, sizeof bare, "%s/x.tar", dir);
    snprintf(sample, sizeof sample, "%s/data.bin", dir);
    snprintf(jpeg, sizeof jpeg, "%s/k0.jpg", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    tu_write_jpeg(jpeg, 24, 20, 5, NULL);
    tu_hostile_tar(bare, marker, NULL);
    tu_hostile_tar(sample, marker, jpeg);
    size_t want_len;
    uint8_t *want = tu_read_file(jpeg, &want_len);
    for (int opt_in = 0; opt_in < 2; opt_in++) {
        allow_pipe_lists(opt_in);
        pl_config c;
        base_cfg(&c, bare);
        c.cache_dir = cache;
        pl_loader *l = NULL;
        const int rc = pl_loader_create(&c, &l);
        cr_assert(!exists(marker), "x.tar ran its member's name (opt-in %d)",
                  opt_in);
        /* A shard of one key without an image: that sample's error. */
        cr_assert_eq(rc, 0, "%s", pl_last_error());
        const char *name = NULL;
        cr_assert_eq(pl_loader_sample(l, 0, &name, NULL), 0);
        expect_in(name, "x.tar:pipe:touch ");
        pl_loader_destroy(l);

        base_cfg(&c, sample);
        c.cache_dir = cache;
        l = create(&c);
        cr_assert(!exists(marker), "data.bin ran its member's name");
        cr_assert_eq(info_of(l).dataset_size, 2);
        int32_t label = -1;
        cr_assert_eq(pl_loader_sample(l, 1, &name, &label), 0);
        cr_assert_str_eq(strrchr(name, '/') + 1, "data.bin:k0.jpg");
        cr_assert_eq(label, 2);
        uint8_t got[8192];
        size_t len = 0;
        cr_assert_eq(pl_loader_read_sample(l, 1, got, sizeof got, &len), 0);
        cr_assert_eq(len, want_len);
        cr_assert_eq(memcmp(got, want, len), 0, "not the member's bytes");
        pl_loader_destroy(l);
    }
    cr_assert(!exists(cache), "a tar was read through the remote cache");
    free(want);
    tu_rm_rf(dir);
}

/* A binary file (a NUL byte) is never a list, whatever its first bytes
 * say: "pipe:touch MARKER #\0..." is refused naming the file, line and
 * byte, and nothing runs, opt-in or not. So is a list of URLs that turns
 * binary after its first line. Before, the line was cut at the NUL and
 * run. */
Test(remote_safety, a_binary_file_is_never_a_list, .timeout = RS_TIMEOUT)
{
    char dir[64], marker[128], path[128], text[256], cache[128];
    tu_tmpdir(dir);
    snprintf(marker, sizeof marker, "%s/marker", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir); /* if it ran: not ~ */
    snprintf(path, sizeof path, "%s/list.txt", dir);
    static const char binary[] = "\0\x01\x02\xff\xfe binary\n";
    int n = snprintf(text, sizeof text, "pipe:touch %s #", marker);
    memcpy(text + n, binary, sizeof binary - 1);
    tu_write_file(path, text, (size_t)n + sizeof binary - 1);
    for (int opt_in = 0; opt_in < 2; opt_in++) {
        allow_pipe_lists(opt_in);
        pl_config c;
        base_cfg(&c, path);
        c.cache_dir = cache;
        pl_loader *l = NULL;
        const int rc = pl_loader_create(&c, &l);
        cr_assert(!exists(marker), "the binary file ran (opt-in %d)", opt_in);
        cr_assert_eq(rc, PL_EINVAL, "%s", pl_last_error());
        expect_in(pl_last_error(), "list.txt:1: NUL byte");
    }
    /* URLs, then bytes that are not UTF-8 on a pipe: line. */
    n = snprintf(text, sizeof text,
                 "http://127.0.0.1:9/a.tar\npipe:touch %s #\xff\n", marker);
    tu_write_file(path, text, (size_t)n);
    pl_config c;
    base_cfg(&c, path);
    c.cache_dir = cache;
    c.remote_retries = -1;
    pl_loader *l = NULL;
    const int rc = pl_loader_create(&c, &l);
    cr_assert(!exists(marker), "a list's line with bytes not UTF-8 ran");
    cr_assert_eq(rc, PL_EINVAL, "%s", pl_last_error());
    expect_in(pl_last_error(),
              "list.txt:2: a control byte, or bytes that are not UTF-8 in a "
              "list of URLs");
    tu_rm_rf(dir);
}

/* A list file whose lines are pipe: commands: refused without the
 * opt-in, naming the file, the line and PINLOAD_ALLOW_PIPE_LISTS, and
 * nothing runs; with PINLOAD_ALLOW_PIPE_LISTS=1 the commands are the
 * shards, the local pack's samples. pipe: in config.data itself needs no
 * opt-in (test_remote: pipe_commands_give_the_local_shards_bytes). Before,
 * the list's commands ran unasked. */
Test(remote_safety, a_list_files_pipe_commands_run_only_when_allowed,
     .timeout = RS_TIMEOUT)
{
    char dir[64], list[128], runs[128], cache[128], local[256];
    tu_tmpdir(dir);
    rt_make_pack(dir);
    snprintf(list, sizeof list, "%s/urls.txt", dir);
    snprintf(runs, sizeof runs, "%s/runs", dir);
    snprintf(cache, sizeof cache, "%s/cache", dir);
    snprintf(local, sizeof local, "%s/pack/shard-{000000..%06d}.tar", dir,
             RT_SHARDS - 1);
    char text[2048];
    size_t k = (size_t)snprintf(text, sizeof text, "# the pack\n");
    for (int s = 0; s < RT_SHARDS; s++)
        k += (size_t)snprintf(text + k, sizeof text - k,
                              "pipe:echo ran >> %s; cat %s/pack/"
                              "shard-%06d.tar\n",
                              runs, dir, s);
    tu_write_file(list, text, k);

    allow_pipe_lists(0);
    pl_config c;
    base_cfg(&c, list);
    c.cache_dir = cache;
    pl_loader *l = NULL;
    const int rc = pl_loader_create(&c, &l);
    cr_assert(!exists(runs), "a list's command ran without the opt-in");
    cr_assert_eq(rc, PL_EINVAL, "%s", pl_last_error());
    expect_in(pl_last_error(), "urls.txt:2: a pipe: command in a list file "
                               "is not run");
    expect_in(pl_last_error(), "PINLOAD_ALLOW_PIPE_LISTS=1");
    setenv("PINLOAD_ALLOW_PIPE_LISTS", "yes", 1); /* only 1 allows */
    cr_assert_eq(pl_loader_create(&c, &l), PL_EINVAL, "%s", pl_last_error());
    cr_assert(!exists(runs));

    allow_pipe_lists(1);
    run want[1], got[1];
    pl_config lc;
    base_cfg(&lc, local);
    run_loader(&lc, 1, want);
    run_loader(&c, 1, got);
    assert_same_run(&want[0], &got[0], "a list of pipe: commands, allowed");
    char *ran = tu_slurp(runs);
    int lines = 0;
    for (const char *p = ran; (p = strchr(p, '\n')); p++)
        lines++;
    free(ran);
    cr_assert_eq(lines, RT_SHARDS, "the commands ran %d times", lines);
    run_free(&want[0]);
    run_free(&got[0]);
    tu_rm_rf(dir);
}

/* ---- the cache cannot be turned against its user ---- */

/* A create of two remote shards at a port nobody serves, through the
 * cache folder `cache`: its status, the detail in pl_last_error. The
 * folder is checked before any transfer. */
static int create_through(const char *cache)
{
    pl_config c;
    base_cfg(&c, "http://127.0.0.1:9/shard-{0..1}.tar");
    c.cache_dir = cache;
    c.remote_timeout_ms = 500;
    c.remote_retries = -1;
    pl_loader *l = NULL;
    const int rc = pl_loader_create(&c, &l);
    pl_loader_destroy(l);
    return rc;
}

typedef struct refusal {
    const char *what;  /* the case */
    const char *cache; /* under the test's folder */
    const char *says;  /* in the error, after the folder's path */
    const char *named; /* the folder the error names, under the test's */
    const char *owner; /* "owner uid N, mode M" it names */
} refusal;

/* Each case's folders, under dir. */
static void make_case(const char *dir, int i)
{
    char p[256], q[256];
    switch (i) {
    case 0: /* the cache folder is another user's */
        snprintf(p, sizeof p, "%s/theirs", dir);
        cr_assert_eq(mkdir(p, 0755), 0);
        cr_assert_eq(chown(p, OTHER_UID, OTHER_UID), 0);
        break;
    case 1: /* ours, but anyone may write it */
        snprintf(p, sizeof p, "%s/open", dir);
        cr_assert_eq(mkdir(p, 0700), 0);
        cr_assert_eq(chmod(p, 0777), 0);
        break;
    case 2: /* ours, group-writable, not a group's shared folder */
        snprintf(p, sizeof p, "%s/group", dir);
        cr_assert_eq(mkdir(p, 0700), 0);
        cr_assert_eq(chmod(p, 0770), 0);
        break;
    case 3: /* /tmp/pinload-UID made first by another user */
        snprintf(p, sizeof p, "%s/pinload-0", dir);
        cr_assert_eq(mkdir(p, 0755), 0);
        cr_assert_eq(chown(p, OTHER_UID, OTHER_UID), 0);
        break;
    case 4: /* a link to a folder of ours, planted by another user */
        snprintf(p, sizeof p, "%s/real", dir);
        snprintf(q, sizeof q, "%s/link", dir);
        cr_assert_eq(mkdir(p, 0700), 0);
        cr_assert_eq(symlink(p, q), 0);
        cr_assert_eq(lchown(q, OTHER_UID, OTHER_UID), 0);
        break;
    case 5: /* a folder above it anyone may write, without the sticky bit */
        snprintf(p, sizeof p, "%s/shared-tmp", dir);
        cr_assert_eq(mkdir(p, 0700), 0);
        cr_assert_eq(chmod(p, 0777), 0);
        break;
    }
}

static const refusal REFUSALS[] = {
    {"another user's folder", "theirs",
     " belongs to another user (owner uid 12345, mode 0755; you are uid 0)",
     "theirs", "remove this one"},
    {"a folder every user may write", "open",
     " is writable by every user (owner uid 0, mode 0777", "open",
     "chmod go-w this one"},
    {"a group-writable folder not shared on purpose", "group",
     " is writable by its group (owner uid 0, mode 0770", "group",
     "chmod go-w this one"},
    {"a folder above it made by another user", "pinload-0/shards",
     ", above the cache folder ", "pinload-0",
     "belongs to another user (owner uid 12345, mode 0755"},
    {"a link to it another user planted", "link",
     " is a symbolic link that belongs to another user (owner uid 12345",
     "link", "config.cache_dir"},
    {"a folder above it every user may write", "shared-tmp/cache",
     ", above the cache folder ", "shared-tmp",
     "is writable by every user and has no sticky bit"},
};

/* A cache folder another user could change is refused before any
 * transfer, the error naming the folder, its owner and mode, and what to
 * do; and nothing is made inside a folder another user owns. Before, each
 * was used as it was. (We are root here, as a job run by root is.) */
Test(remote_safety, a_cache_folder_another_user_could_change_is_refused,
     .timeout = RS_TIMEOUT)
{
    cr_assert_eq(geteuid(), 0, "this test makes folders of another user");
    for (size_t i = 0; i < sizeof REFUSALS / sizeof *REFUSALS; i++) {
        const refusal *r = &REFUSALS[i];
        char dir[64], cache[256], named[256], says[512];
        tu_tmpdir(dir);
        make_case(dir, (int)i);
        snprintf(cache, sizeof cache, "%s/%s", dir, r->cache);
        snprintf(named, sizeof named, "%s/%s", dir, r->named);
        cr_assert_eq(create_through(cache), PL_EIO, "%s: %s", r->what,
                     pl_last_error());
        const char *err = pl_last_error();
        snprintf(says, sizeof says, "%s%s", named, r->says);
        cr_assert_not_null(strstr(err, says), "%s: no \"%s\" in:\n%s", r->what,
                           says, err);
        cr_assert_not_null(strstr(err, r->owner), "%s: no \"%s\" in:\n%s",
                           r->what, r->owner, err);
        expect_in(err, "pl_loader_create: config.cache_dir: ");
        if (i == 3)
            cr_assert(!exists(cache), "made %s in another user's folder",
                      cache);
        tu_rm_rf(dir);
    }
}

/* The folders the cache makes are the user's alone (0700), each one of
 * a path that did not exist; a link of ours to a folder of ours is
 * followed (the cache's files then lie in the folder it leads to). */
Test(remote_safety, the_folders_the_cache_makes_are_private,
     .timeout = RS_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    char p[256];
    snprintf(p, sizeof p, "%s/a/b/cache", f.dir);
    pl_config c;
    base_cfg(&c, f.url);
    c.cache_dir = p;
    pl_loader_destroy(create(&c));
    const char *made[] = {"a", "a/b", "a/b/cache"};
    for (int i = 0; i < 3; i++) {
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", f.dir, made[i]);
        cr_assert_eq(lstat(p, &st), 0, "%s", p);
        cr_assert(S_ISDIR(st.st_mode));
        cr_assert_eq(st.st_mode & 07777, 0700, "%s: mode %04o", p,
                     (unsigned)st.st_mode & 07777);
    }
    /* A link of ours: followed, the files where it leads. */
    char link[256];
    snprintf(link, sizeof link, "%s/link", f.dir);
    cr_assert_eq(symlink(p, link), 0);
    c.cache_dir = link;
    pl_loader_destroy(create(&c));
    cr_assert_eq(rt_count(&f.srv, "GET /shard-000000.tar.idx "), 1,
                 "the link's folder is not the same cache");
    rt_pack_down(&f);
}

/* The cache's file whose name ends in `suffix` for shard s, into out: ""
 * if there is none. */
static void cache_file(const char *cache, int s, const char *suffix, char *out,
                       size_t cap)
{
    char end[64];
    snprintf(end, sizeof end, "-shard-%06d.tar%s", s, suffix);
    out[0] = '\0';
    DIR *d = opendir(cache);
    cr_assert_not_null(d, "%s", cache);
    for (struct dirent *e; (e = readdir(d));) {
        const size_t a = strlen(e->d_name), b = strlen(end);
        if (a > b && strcmp(e->d_name + a - b, end) == 0)
            snprintf(out, cap, "%s/%s", cache, e->d_name);
    }
    closedir(d);
}

/* A NAME.part planted as a link to a victim file is not followed: the
 * link is removed (with a warning), the shard fetched into a file of the
 * cache's own, the victim unchanged and the epoch the local one; a
 * NAME.lock planted as a link to a file that does not exist makes that
 * shard's error, saying why, and the file is never made. Before, the
 * download wrote into the victim and the lock made the file. */
Test(remote_safety, a_link_planted_in_the_cache_is_never_followed,
     .timeout = RS_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    run want[1], got[1];
    pl_config c;
    base_cfg(&c, f.local);
    run_loader(&c, 1, want);
    rt_remote_cfg(&f, &c, 2);
    run_loader(&c, 1, got); /* the cache holds the shards and indexes */
    run_free(&got[0]);

    /* Shard 0 gone, its .part a link to the victim. */
    char victim[128], made[128], shard[512], part[520], lock[520];
    snprintf(victim, sizeof victim, "%s/victim", f.dir);
    snprintf(made, sizeof made, "%s/made-by-the-lock", f.dir);
    tu_write_file(victim, "the victim's bytes\n", 19);
    cache_file(f.cache, 0, "", shard, sizeof shard);
    cr_assert(shard[0], "no cached shard 0");
    snprintf(part, sizeof part, "%s.part", shard);
    cr_assert_eq(unlink(shard), 0);
    cr_assert_eq(symlink(victim, part), 0);
    rt_log g = {0};
    c.log = rt_log_fn;
    c.log_ctx = &g;
    run_loader(&c, 1, got);
    assert_same_run(&want[0], &got[0], "through a planted .part link");
    run_free(&got[0]);
    size_t vlen;
    uint8_t *v = tu_read_file(victim, &vlen);
    cr_assert(vlen == 19 && memcmp(v, "the victim's bytes\n", 19) == 0,
              "the victim was written: %zu bytes", vlen);
    free(v);
    struct stat st;
    cr_assert_eq(lstat(shard, &st), 0);
    cr_assert(S_ISREG(st.st_mode), "the shard is not a file of its own");
    cr_assert(!exists(part));
    expect_in(g.text, "was not a file it may use (a symbolic link");

    /* Shard 1 gone, its .lock a link to a file that does not exist. */
    cache_file(f.cache, 1, "", shard, sizeof shard);
    snprintf(lock, sizeof lock, "%s.lock", shard);
    cr_assert_eq(unlink(shard), 0);
    cr_assert_eq(unlink(lock), 0);
    cr_assert_eq(symlink(made, lock), 0);
    pl_loader *l = create(&c);
    int rc = 0;
    for (int b = 0; b < 8 && rc == 0; b++) {
        const pl_batch *bt = NULL;
        rc = pl_loader_next(l, &bt);
        if (rc == 0)
            pl_loader_release(l, bt, NULL);
    }
    cr_assert_eq(rc, PL_EIO, "%s", pl_last_error());
    expect_in(pl_last_error(), "its .lock file is a symbolic link or not a "
                               "plain file, which pinload never follows");
    pl_loader_destroy(l);
    cr_assert(!exists(made), "the planted .lock link made a file");
    run_free(&want[0]);
    rt_pack_down(&f);
}

/* A cache shared by a group on purpose: named in config.cache_dir, the
 * group's setgid folder (2770), owned by another member: accepted, and
 * the files made there are the group's to write (0660) whatever the
 * umask, so that a member resumes another's download and takes its locks.
 * The same folder without the setgid bit is refused. */
Test(remote_safety, a_groups_setgid_folder_is_a_cache_shared_on_purpose,
     .timeout = RS_TIMEOUT)
{
    rt_pack f;
    rt_pack_up(&f, NULL);
    char cache[128];
    snprintf(cache, sizeof cache, "%s/team", f.dir);
    cr_assert_eq(mkdir(cache, 0700), 0);
    cr_assert_eq(chown(cache, OTHER_UID, getegid()), 0);
    cr_assert_eq(chmod(cache, 0770), 0);
    pl_config c;
    base_cfg(&c, f.url);
    c.cache_dir = cache;
    c.remote_timeout_ms = 2000;
    pl_loader *l = NULL;
    cr_assert_eq(pl_loader_create(&c, &l), PL_EIO);
    expect_in(pl_last_error(), "belongs to another user");
    cr_assert_eq(chmod(cache, 02770), 0);
    const mode_t old = umask(022);
    run got[1];
    run_loader(&c, 1, got);
    umask(old);
    cr_assert_eq(got[0].n, RT_SAMPLES);
    run_free(&got[0]);
    char p[512];
    const char *ends[] = {"", ".lock"};
    for (int i = 0; i < 2; i++) {
        cache_file(cache, 0, ends[i], p, sizeof p);
        struct stat st;
        cr_assert_eq(lstat(p, &st), 0, "no %s", p);
        cr_assert_eq(st.st_mode & 0777, 0660, "%s: mode %04o", p,
                     (unsigned)st.st_mode & 0777);
    }
    rt_pack_down(&f);
}
