/* Measurement behind docs/BENCHMARKS.md (not part of the library): where a
 * full libjpeg-turbo decode of a dataset's files spends its time. Per image,
 * one thread, from memory: full decode to RGB; entropy decoding alone
 * (jpeg_read_coefficients: no IDCT, upsampling or colour conversion), which
 * any libjpeg-based decoder pays for every row it reads; and decoding at
 * each DCT scale M/8.
 *
 *     build/compare-ceiling FILE.jpg...
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <jpeglib.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct blob {
    unsigned char *data;
    unsigned long len;
} blob;

static int load(const char *path, blob *b)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    b->len = (unsigned long)ftell(f);
    fseek(f, 0, SEEK_SET);
    b->data = malloc(b->len);
    const int ok = b->data && fread(b->data, 1, b->len, f) == b->len;
    fclose(f);
    return ok ? 0 : -1;
}

/* Microseconds per image: mode 0 decodes at scale m/8, mode 1 entropy only. */
static double pass(struct jpeg_decompress_struct *c, const blob *b, int n,
                   int mode, int m, unsigned char *row)
{
    const int reps = 3;
    const double t0 = now();
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++) {
            jpeg_mem_src(c, b[i].data, b[i].len);
            jpeg_read_header(c, TRUE);
            if (mode == 1) {
                jpeg_read_coefficients(c);
                jpeg_finish_decompress(c);
                continue;
            }
            c->out_color_space = JCS_RGB;
            c->scale_num = (unsigned)m;
            c->scale_denom = 8;
            jpeg_start_decompress(c);
            while (c->output_scanline < c->output_height) {
                JSAMPROW p = row;
                jpeg_read_scanlines(c, &p, 1);
            }
            jpeg_finish_decompress(c);
        }
    return (now() - t0) / (reps * n) * 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE.jpg...\n", argv[0]);
        return 2;
    }
    const int n = argc - 1;
    blob *b = calloc((size_t)n, sizeof *b);
    for (int i = 0; i < n; i++)
        if (load(argv[i + 1], &b[i]) < 0) {
            fprintf(stderr, "%s: cannot read\n", argv[i + 1]);
            return 1;
        }
    struct jpeg_decompress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_decompress(&c);
    unsigned char *row = malloc(65536 * 3);
    const double full = pass(&c, b, n, 0, 8, row);
    const double entropy = pass(&c, b, n, 1, 8, row);
    printf("%d files, one thread, from memory, us per image\n", n);
    printf("full decode     %8.1f\n", full);
    printf("entropy only    %8.1f  (%.0f%% of full; ceiling %.2fx)\n", entropy,
           100 * entropy / full, full / entropy);
    for (int m = 7; m >= 1; m--) {
        const double t = pass(&c, b, n, 0, m, row);
        printf("scale %d/8       %8.1f  (%.2fx the full decode's rate)\n", m, t,
               full / t);
    }
    return 0;
}
