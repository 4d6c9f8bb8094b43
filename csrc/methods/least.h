/*
 * methods/least.h - the least-load family (internal): LEASTCONNECTION,
 * LEASTREQUEST, LEASTRESPONSETIME, LRTM, LEASTBANDWIDTH, LEASTPACKETS,
 * CUSTOMLOAD. Its ops table is ll_family_least (methods/least.c).
 *
 * Each method's N (its row's n), its key floor(N * 10000 / weight)
 * (ll_key.h: exact, so equal Nw tie), and the pick: the lowest key, ties
 * to the first slot after the cursor in cyclic bind order, found by the
 * tournament tree (ll_tree.h) in O(log n); while the startup round robin
 * lasts, the first eligible slot after the cursor instead.
 *
 * The functions here are static inline so that the batch replay's loops
 * (ll_replay.c) call them directly; the rows (ll_methods.c) hold the
 * out-of-line copies of methods/least.c.
 */
#ifndef LL_LEAST_H
#define LL_LEAST_H

#include "ll_internal.h"

#define LL_CUSTOM_OVER ((uint64_t)1 << 63)  /* custom[]: a metric at or over its threshold */

extern const ll_family_ops ll_family_least;

/* The smoothed probe of a slot in microseconds (0: none yet). probe[] keeps
 * it plus one, so that 0 means "no probe". */
static inline uint32_t ll_probe_us(const ll_vserver *vs, uint32_t slot)
{
    const uint32_t *probe = ll_col_probe(vs);
    return probe && probe[slot] ? probe[slot] - 1 : 0;
}

/* ---- the methods' N: the products stay below 2^64 (active < 2^32, a
 * smoothed time <= LL_MAX_TTFB_US < 2^32) ---- */

static inline uint64_t ll_least_n_active_i(const ll_vserver *vs, uint32_t slot)
{
    return vs->svc[slot].active;
}

static inline uint64_t ll_least_n_active_ttfb_i(const ll_vserver *vs, uint32_t slot)
{
    return (uint64_t)vs->svc[slot].active * vs->svc[slot].ttfb_us;
}

static inline uint64_t ll_least_n_bytes_i(const ll_vserver *vs, uint32_t slot) { return vs->bytes[slot]; }
static inline uint64_t ll_least_n_packets_i(const ll_vserver *vs, uint32_t slot) { return vs->packets[slot]; }

/* The key floor(N * 10000 / weight) of an N function, inline. */
#define LL_LEAST_KEY_OF(n_fn, vs, slot) ll_key_make(n_fn((vs), (slot)), (vs)->svc[(slot)].weight)

static inline ll_key ll_least_key_active_i(const ll_vserver *vs, uint32_t slot)
{
    return LL_LEAST_KEY_OF(ll_least_n_active_i, vs, slot);
}

static inline ll_key ll_least_key_active_ttfb_i(const ll_vserver *vs, uint32_t slot)
{
    return LL_LEAST_KEY_OF(ll_least_n_active_ttfb_i, vs, slot);
}

static inline ll_key ll_least_key_bytes_i(const ll_vserver *vs, uint32_t slot)
{
    return LL_LEAST_KEY_OF(ll_least_n_bytes_i, vs, slot);
}

static inline ll_key ll_least_key_packets_i(const ll_vserver *vs, uint32_t slot)
{
    return LL_LEAST_KEY_OF(ll_least_n_packets_i, vs, slot);
}

/* The out-of-line N and key of each method (methods/least.c), for its row:
 * ll_least_n_<x> and ll_least_key_<x>. */
#define LL_LEAST_DECLARE(x)                                      \
    uint64_t ll_least_n_##x(const ll_vserver *vs, uint32_t slot); \
    ll_key ll_least_key_##x(const ll_vserver *vs, uint32_t slot)

LL_LEAST_DECLARE(active);
LL_LEAST_DECLARE(active_ttfb);
LL_LEAST_DECLARE(bytes);
LL_LEAST_DECLARE(packets);
LL_LEAST_DECLARE(active_probe);
LL_LEAST_DECLARE(custom);

/* ---- the pick ---- */

/* The family's pick (ll_family_ops.pick); the hash family's pick without a
 * request key is the same without the startup round robin. */
static inline int64_t ll_least_pick_i(ll_vserver *vs, uint32_t *round, uint64_t *rng, int startup_rr)
{
    (void)round;
    (void)rng;
    const ll_tree *t = &vs->tree;
    if (ll_key_eq(ll_tree_min_key(t), LL_KEY_INF))
        return -ENOENT;
    uint32_t start = (uint32_t)(vs->cursor + 1);
    if (startup_rr && vs->startup_left) {
        /* startup round robin: any eligible (finite) key qualifies */
        int64_t slot = ll_tree_first(t, start, LL_KEY_MAX_FINITE);
        return slot >= 0 ? slot : ll_tree_first(t, 0, LL_KEY_MAX_FINITE);
    }
    return ll_tree_pick_min(t, start);
}

#endif /* LL_LEAST_H */
