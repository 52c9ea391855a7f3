// The same from C++: the header must compile as C++ and link unmangled.
#include <pinload.h>

#include <cstdio>
#include <memory>

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: hello DATA\n");
        return 2;
    }
    pl_config c;
    pl_config_default(&c);
    c.data = argv[1];
    c.device = PL_DEVICE_HOST;
    c.batch_size = 4;
    c.width = c.height = 32;
    pl_loader *raw = nullptr;
    if (pl_loader_create(&c, &raw) != 0) {
        std::fprintf(stderr, "hello++: %s\n", pl_last_error());
        return 1;
    }
    std::unique_ptr<pl_loader, void (*)(pl_loader *)> l(raw,
                                                        pl_loader_destroy);
    const pl_batch *b = nullptr;
    if (pl_loader_next(l.get(), &b) != 0 || b->count != 4) {
        std::fprintf(stderr, "hello++: %s\n", pl_last_error());
        return 1;
    }
    std::printf("pinload %s (C++): batch of %d\n", pl_version(), b->count);
    return pl_loader_release(l.get(), b, nullptr) == 0 ? 0 : 1;
}
