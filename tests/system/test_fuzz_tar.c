/* The tar indexer's fuzz harness (fuzz/tar_harness.h) in the regular suite:
 * archives written by GNU tar in its three formats (long names included),
 * each mutated many times from a fixed pseudo-random sequence (bytes of
 * headers flipped, sizes and checksums rewritten, cut anywhere), and every
 * input in tests/fuzz/regressions-tar. */
#include <criterion/criterion.h>

#include "fuzz/tar_harness.h"
#include "testutil.h"

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint8_t *make_archive(const char *dir, const char *format, size_t *len)
{
    char p[256], cmd[1024];
    snprintf(p, sizeof p,
             "%s/stage/a.folder.with.dots/and-a-name-long-enough-to-need-"
             "an-extension-header-in-every-format-that-has-one-0123456789/"
             "k0.jpg",
             dir);
    tu_write_jpeg(p, 20, 10, 1, NULL);
    snprintf(p, sizeof p, "%s/stage/k1.cls", dir);
    tu_write_file(p, "3\n", 2);
    snprintf(p, sizeof p, "%s/stage/k1.jpg", dir);
    tu_write_jpeg(p, 12, 12, 2, NULL);
    snprintf(cmd, sizeof cmd,
             "cd %s/stage && tar --format=%s -cf ../%s.tar $(find . -type f "
             "| sort)",
             dir, format, format);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(p, sizeof p, "%s/%s.tar", dir, format);
    return tu_read_file(p, len);
}

Test(fuzz_tar, mutated_archives_keep_the_contract, .timeout = 300)
{
    char dir[64];
    tu_tmpdir(dir);
    static const char *formats[] = {"ustar", "gnu", "pax"};
    uint64_t s = 0x5eed;
    for (int f = 0; f < 3; f++) {
        size_t len;
        uint8_t *good = make_archive(dir, formats[f], &len);
        fuzz_tar_one(good, len); /* the archive itself */
        uint8_t *m = malloc(len);
        for (int round = 0; round < 400; round++) {
            memcpy(m, good, len);
            size_t n = len;
            const unsigned kind = (unsigned)(next_rand(&s) % 4);
            const size_t block = (size_t)(next_rand(&s) % (len / 512)) * 512;
            if (kind == 0) { /* a few bytes of one header */
                for (int k = 0; k < 1 + (int)(next_rand(&s) % 4); k++)
                    m[block + next_rand(&s) % 512] ^=
                        (uint8_t)(1 + next_rand(&s) % 255);
            } else if (kind == 1) { /* a size field, checksum fixed up */
                snprintf((char *)m + block + 124, 12, "%011llo",
                         (unsigned long long)(next_rand(&s) % (1u << 20)));
                unsigned sum = 0;
                memset(m + block + 148, ' ', 8);
                for (int i = 0; i < 512; i++)
                    sum += m[block + (size_t)i];
                snprintf((char *)m + block + 148, 8, "%06o", sum);
            } else if (kind == 2) { /* cut anywhere */
                n = (size_t)(next_rand(&s) % len);
            } else { /* a header's type changed, checksum fixed up */
                static const char types[] = "0125LKxgV7";
                m[block + 156] = (uint8_t)types[next_rand(&s) % 10];
                unsigned sum = 0;
                memset(m + block + 148, ' ', 8);
                for (int i = 0; i < 512; i++)
                    sum += m[block + (size_t)i];
                snprintf((char *)m + block + 148, 8, "%06o", sum);
            }
            fuzz_tar_one(m, n);
        }
        free(m);
        free(good);
    }
    tu_rm_rf(dir);
}

Test(fuzz_tar, every_regression_input_keeps_the_contract, .timeout = 300)
{
    const int n = tu_each_file("tests/fuzz/regressions-tar", fuzz_tar_one);
    cr_assert_gt(n, 0, "no input in tests/fuzz/regressions-tar");
    cr_log_info("%d regression inputs", n);
}
