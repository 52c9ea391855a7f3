/* decode = PL_DECODE_AUTO's split (balance.h has the rule and why). */
#include "balance.h"

void balance_init(balance *b)
{
    b->share = 0.5;
    b->acc = 0.0;
    b->gpu_ns = b->cpu_ns = 0.0;
    b->since = 0;
}

int balance_take_gpu(balance *b)
{
    b->acc += b->share;
    if (b->acc >= 1.0) {
        b->acc -= 1.0;
        return 1;
    }
    return 0;
}

static double mean(double m, uint64_t ns)
{
    return m == 0.0 ? (double)ns : 0.875 * m + 0.125 * (double)ns;
}

void balance_note(balance *b, int gpu, uint64_t ns)
{
    if (gpu)
        b->gpu_ns = mean(b->gpu_ns, ns);
    else
        b->cpu_ns = mean(b->cpu_ns, ns);
    if (++b->since < BALANCE_EVERY || b->gpu_ns == 0.0 || b->cpu_ns == 0.0)
        return;
    b->since = 0;
    b->share += b->gpu_ns < b->cpu_ns ? BALANCE_STEP : -BALANCE_STEP;
    if (b->share < BALANCE_FLOOR)
        b->share = BALANCE_FLOOR;
    if (b->share > 1.0 - BALANCE_FLOOR)
        b->share = 1.0 - BALANCE_FLOOR;
}
