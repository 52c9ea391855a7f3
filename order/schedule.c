#include "schedule.h"

#include "sampler.h"

static void start_epoch(schedule *s, int64_t epoch, int64_t pos, int64_t done)
{
    s->epoch = epoch;
    s->pos = s->first = pos;
    s->end = pos > s->cfg.positions ? pos : s->cfg.positions;
    s->batch = pos / s->cfg.batch_size;
    s->pending = s->good = 0;
    s->need = s->cfg.target - done;
    s->round_first = pos;
    s->round_good0 = s->dry = 0;
}

void schedule_init(schedule *s, const schedule_config *cfg)
{
    s->cfg = *cfg;
    s->dead = 0;
    const resume_point *r = &cfg->start;
    /* Mid-epoch, the epoch goes on at its position, with what the batches
     * before delivered counting towards its target. */
    if (r->done)
        start_epoch(s, r->epoch + 1, 0, 0);
    else
        start_epoch(s, r->epoch, r->position,
                    cfg->target ? r->batch * cfg->batch_size : 0);
}

/* Everything scheduled for the epoch is handed out: schedule more of it (a
 * top-up), or the next epoch. Returns 0 when that cannot be known yet
 * (positions still being decoded). */
static int plan_more(schedule *s)
{
    if (!s->cfg.target) {
        start_epoch(s, s->epoch + 1, 0, 0);
        return 1;
    }
    if (s->pending > 0)
        return 0;
    const int64_t need = s->need - s->good;
    const int64_t claimed = s->end - s->first;
    if (need <= 0) {
        start_epoch(s, s->epoch + 1, 0, 0);
        return 1;
    }
    /* Positions since the last good sample; a whole pass over the order
     * without one: no sample can be decoded (any more), and topping up
     * again would loop for ever. */
    if (s->good == s->round_good0)
        s->dry += s->end - s->round_first;
    else
        s->dry = 0;
    s->round_first = s->end;
    s->round_good0 = s->good;
    if (s->dry >= s->cfg.order_len) {
        s->dead = 1;
        return 1;
    }
    /* As many positions as the good fraction so far says, at most one more
     * pass over the order per round. */
    double extra = s->good ? (double)need * (double)claimed / (double)s->good
                           : (double)need;
    const double most =
        (double)(need > s->cfg.order_len ? need : s->cfg.order_len);
    extra = extra > most ? most : extra;
    s->end += (int64_t)extra + ((double)(int64_t)extra < extra);
    return 1;
}

int schedule_next(schedule *s, nominal_batch *nb)
{
    if (!s->dead && s->pos == s->end && !plan_more(s))
        return 0;
    nb->epoch = s->epoch;
    nb->batch = s->batch++;
    nb->first = s->pos;
    nb->no_good = s->dead;
    if (s->dead) {
        nb->count = 0;
        return 1;
    }
    const int64_t left = s->end - s->pos;
    nb->count = left < s->cfg.batch_size ? (int)left : s->cfg.batch_size;
    s->pos += nb->count;
    return 1;
}

void schedule_claimed(schedule *s)
{
    s->pending++;
}

int schedule_finished(schedule *s, int64_t epoch, int good)
{
    if (epoch != s->epoch)
        return 0;
    s->good += good != 0;
    return --s->pending == 0 && s->cfg.target;
}

int64_t schedule_nominal_batches(const schedule *s)
{
    return batches_per_epoch(s->cfg.positions, s->cfg.batch_size, 0);
}
