/*
 * ll_floor.c - the floor of the batch path (ll_floor.h): the replay's
 * decisions with nothing but the engine's tournament tree (packed), N per
 * service and the completion queue.
 */
#include <errno.h>
#include <stdlib.h>

#include "ll_floor.h"
#include "ll_internal.h"
#include "ll_pending.h"
#include "ll_tree.h"

typedef struct {
    ll_method method;
    ll_tree tree;
    const uint8_t *weight;
    uint64_t *n;          /* N: active transactions, or window bytes */
    /* LEASTBANDWIDTH's window: service-major buckets, and the services with traffic */
    uint64_t *bucket;     /* [n_services * 14] */
    uint16_t *mask;       /* buckets holding traffic */
    uint32_t *live, n_live;
    int64_t cur_sec;
    uint32_t head;
    int overflow;
} floor_state;

static inline void set_n(floor_state *f, uint32_t s, uint64_t n)
{
    f->n[s] = n;
    if (n > UINT64_MAX / 10000u) {
        f->overflow = 1;
        return;
    }
    ll_tree_set(&f->tree, s, ll_key_small(n * 10000u / f->weight[s]));
    f->overflow |= f->tree.wide;  /* the floor is the packed tree's */
}

/* LEASTBANDWIDTH: the window moves to `sec`; buckets that leave it leave N. */
static void advance(floor_state *f, int64_t sec)
{
    if (sec <= f->cur_sec)
        return;
    uint64_t moved = (uint64_t)sec - (uint64_t)f->cur_sec;
    uint32_t expiring = 0;
    for (uint64_t k = 1; k <= moved && k <= LL_WINDOW_SECONDS; k++)
        expiring |= 1u << ((f->head + k) % LL_WINDOW_SECONDS);
    for (uint32_t i = f->n_live; i-- > 0;) {
        uint32_t s = f->live[i];
        uint32_t gone = f->mask[s] & expiring;
        if (!gone)
            continue;
        uint64_t sum = 0;
        for (uint32_t b = 0; b < LL_WINDOW_SECONDS; b++)
            if (gone >> b & 1u) {
                sum += f->bucket[(size_t)s * LL_WINDOW_SECONDS + b];
                f->bucket[(size_t)s * LL_WINDOW_SECONDS + b] = 0;
            }
        f->mask[s] = (uint16_t)(f->mask[s] & ~gone);
        if (sum)
            set_n(f, s, f->n[s] - sum);
        if (!f->mask[s])
            f->live[i] = f->live[--f->n_live];
    }
    f->cur_sec = sec;
    f->head = ll_window_bucket(sec, LL_WINDOW_SECONDS);
}

static void add_bytes(floor_state *f, uint32_t s, uint64_t bytes)
{
    if (!bytes)
        return;
    if (bytes > UINT64_MAX - f->n[s]) {
        f->overflow = 1;
        return;
    }
    f->bucket[(size_t)s * LL_WINDOW_SECONDS + f->head] += bytes;
    if (!f->mask[s])
        f->live[f->n_live++] = s;
    f->mask[s] = (uint16_t)(f->mask[s] | 1u << f->head);
    set_n(f, s, f->n[s] + bytes);
}

int ll_floor_replay(const ll_trace *t, ll_method method, const uint8_t *weights,
                    uint32_t n_services, int32_t *chosen)
{
    if ((method != LL_LEASTCONNECTION && method != LL_LEASTBANDWIDTH) || n_services == 0
        || n_services > (1u << 30))
        return -EINVAL;
    for (uint32_t s = 0; s < n_services; s++)
        if (weights[s] < 1 || weights[s] > LL_MAX_WEIGHT)
            return -EINVAL;
    int lb = method == LL_LEASTBANDWIDTH;
    floor_state f = { 0 };
    f.method = method;
    f.weight = weights;
    uint32_t P = 1;
    while (P < n_services)
        P *= 2;
    ll_pending_queue q;
    int rc = ll_pending_init_for(&q, t->arrival, t->n);
    if (rc < 0)
        return rc;
    uint64_t *cell = malloc(2 * (size_t)P * sizeof *cell);
    uint32_t *arg = malloc(2 * (size_t)P * sizeof *arg);
    f.n = calloc(n_services, sizeof *f.n);
    if (lb) {
        f.bucket = calloc((size_t)n_services * LL_WINDOW_SECONDS, sizeof *f.bucket);
        f.mask = calloc(n_services, sizeof *f.mask);
        f.live = malloc(n_services * sizeof *f.live);
    }
    rc = -ENOMEM;
    if (!cell || !arg || !f.n || (lb && (!f.bucket || !f.mask || !f.live))
        || ll_pending_reserve(&q, t->n ? t->n : 1) < 0)
        goto out;
    ll_tree_init(&f.tree, P, cell, arg);
    for (uint32_t s = 0; s < n_services; s++)
        ll_tree_load(&f.tree, s, ll_key_small(0));
    ll_tree_build(&f.tree);
    f.cur_sec = t->n ? ll_trace_second(t->arrival[0]) : 0;
    f.head = ll_window_bucket(f.cur_sec, LL_WINDOW_SECONDS);

    int64_t cursor = -1;
    size_t next = 0;
    for (;;) {
        const ll_pending *first = ll_pending_peek(&q);
        if (first && (next == t->n || ll_order_time(first->order) <= t->arrival[next])) {
            ll_pending c = ll_pending_pop(&q);  /* completions first at equal times */
            if (lb) {
                advance(&f, ll_trace_second(ll_order_time(c.order)));
                add_bytes(&f, c.svc, t->resp_bytes[c.req]);
            } else {
                set_n(&f, c.svc, f.n[c.svc] - 1);
            }
        } else if (next < t->n) {
            size_t k = next++;
            double at = t->arrival[k];
            if (lb)
                advance(&f, ll_trace_second(at));
            uint32_t s = ll_tree_pick_min(&f.tree, (uint32_t)(cursor + 1));
            cursor = s;
            chosen[k] = (int32_t)s;
            if (lb)
                add_bytes(&f, s, t->req_bytes[k]);
            else
                set_n(&f, s, f.n[s] + 1);
            double done = at + ll_trace_ttfb(t, s, k) + t->transfer[k];
            ll_pending_push(&q, done, ll_time_order(done), (uint32_t)k, s);
        } else {
            break;
        }
        if (f.overflow) {
            rc = -EOVERFLOW;
            goto out;
        }
    }
    rc = 0;
out:
    ll_pending_free(&q);
    free(cell);
    free(arg);
    free(f.n);
    free(f.bucket);
    free(f.mask);
    free(f.live);
    return rc;
}
