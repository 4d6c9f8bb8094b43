/*
 * ll_least.h - the least-load family (internal): LEASTCONNECTION,
 * LEASTREQUEST, LEASTRESPONSETIME, LRTM, LEASTBANDWIDTH, LEASTPACKETS,
 * CUSTOMLOAD.
 *
 * Each method's N (its row's load kind), its key floor(N * 10000 / weight)
 * (ll_key.h: exact, so equal Nw tie), and the pick: the lowest key, ties
 * to the first slot after the cursor in cyclic bind order, found by the
 * tournament tree (ll_tree.h) in O(log n).
 */
#ifndef LL_LEAST_H
#define LL_LEAST_H

#include "ll_internal.h"
#include "ll_peakewma.h"

#define LL_CUSTOM_OVER ((uint64_t)1 << 63)  /* custom[]: a metric at or over its threshold */

/* The smoothed probe of a slot in microseconds (0: none yet). probe[] keeps
 * it plus one, so that 0 means "no probe". */
static inline uint32_t ll_probe_us(const ll_vserver *vs, uint32_t slot)
{
    const uint32_t *probe = ll_col_probe(vs);
    return probe && probe[slot] ? probe[slot] - 1 : 0;
}

/* N of load kind `load` for one slot. The products stay below 2^64:
 * active < 2^32 and a smoothed time <= LL_MAX_TTFB_US < 2^32. The kind is
 * an argument so that a caller passing a constant (ll_path.h) gets the one
 * case alone. */
static inline uint64_t ll_least_n_as(const ll_vserver *vs, uint32_t slot, int load)
{
    const ll_svc *s = &vs->svc[slot];
    switch ((ll_load_kind)load) {
    case LL_N_ACTIVE_TTFB: return (uint64_t)s->active * s->ttfb_us;
    case LL_N_BYTES: return vs->bytes[slot];
    case LL_N_PACKETS: return vs->packets[slot];
    case LL_N_ACTIVE_PROBE: return (uint64_t)s->active * ll_probe_us(vs, slot);
    case LL_N_CUSTOM: return ll_col_custom(vs) ? ll_col_custom(vs)[slot] & ~LL_CUSTOM_OVER : 0;
    case LL_N_PEAK: return ll_peak_n(vs, slot);
    case LL_N_ACTIVE: break;
    }
    return s->active;
}

/* N of the vserver's method. */
static inline uint64_t ll_least_n(const ll_vserver *vs, uint32_t slot)
{
    return ll_least_n_as(vs, slot, vs->ops->load);
}

/* The keys that are not floor(Nw): CUSTOMLOAD's (a service with a metric
 * over its threshold is not eligible, an idle one comes first, key 0, the
 * others by their weighted load, one above, so none ties with an idle one)
 * and PEAKEWMA's (its N moves with time: the pick computes it, ll_sampled.h,
 * and the tree keeps 0 for "eligible"). */
static inline ll_key ll_least_special_key(const ll_vserver *vs, uint32_t slot, int load)
{
    const ll_svc *s = &vs->svc[slot];
    if (load == LL_N_PEAK)
        return ll_key_small(0);
    const uint64_t *custom = ll_col_custom(vs);
    uint64_t c = custom ? custom[slot] : 0;
    if (c & LL_CUSTOM_OVER)
        return LL_KEY_INF;
    if (s->active == 0)
        return ll_key_small(0);
    return ll_key_plus_one(ll_key_make(c, s->weight));
}

/* The key of an eligible slot under load kind `load`. */
static inline ll_key ll_least_key_as(const ll_vserver *vs, uint32_t slot, int load)
{
    if (load >= LL_N_CUSTOM)  /* one compare for the common methods */
        return ll_least_special_key(vs, slot, load);
    return ll_key_make(ll_least_n_as(vs, slot, load), vs->svc[slot].weight);
}

#endif /* LL_LEAST_H */
