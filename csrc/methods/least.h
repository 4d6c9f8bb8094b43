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
 * out-of-line copies of methods/least.c. Its methods are the LL_LEAST
 * lines of methods/list.h, and CUSTOMLOAD.
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

/* ---- each least-load method's N and key (its LL_LEAST line of
 * methods/list.h): inline for the replay's loops, ll_least_n_<ID>_i and
 * ll_least_key_<ID>_i, and out of line for its row (methods/least.c),
 * ll_least_n_<ID> and ll_least_key_<ID>. Keys are floor(N * 10000 /
 * weight), exact (ll_key.h). ---- */

#define LL_LEAST(ID, value, N, inputs, counts_active)                                   \
    static inline uint64_t ll_least_n_##ID##_i(const ll_vserver *vs, uint32_t slot)     \
    {                                                                                    \
        return (N);                                                                      \
    }                                                                                    \
    static inline ll_key ll_least_key_##ID##_i(const ll_vserver *vs, uint32_t slot)     \
    {                                                                                    \
        return ll_key_make(ll_least_n_##ID##_i(vs, slot), vs->svc[slot].weight);          \
    }                                                                                    \
    uint64_t ll_least_n_##ID(const ll_vserver *vs, uint32_t slot);                      \
    ll_key ll_least_key_##ID(const ll_vserver *vs, uint32_t slot);
#define LL_ROW(ID, value, ...)
#include "list.h"
#undef LL_LEAST
#undef LL_ROW

/* CUSTOMLOAD's N and key (its key is not floor(Nw): methods/least.c) */
uint64_t ll_least_n_custom(const ll_vserver *vs, uint32_t slot);
ll_key ll_least_key_custom(const ll_vserver *vs, uint32_t slot);

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
