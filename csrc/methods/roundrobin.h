/*
 * methods/roundrobin.h - the round-robin family (internal): ROUNDROBIN.
 * Its ops table is ll_family_roundrobin (methods/roundrobin.c).
 *
 * Weighted rounds in bind order: in round r every eligible service whose
 * weight is >= r gets one turn, rounds 1 .. the highest weight, then again.
 * The key is 100 - weight, so "weight >= r" is "key <= 100 - r" and the
 * tree finds the next service of the round after the cursor in O(log n).
 */
#ifndef LL_ROUNDROBIN_H
#define LL_ROUNDROBIN_H

#include "ll_internal.h"

extern const ll_family_ops ll_family_roundrobin;

/* The row's key (out of line, methods/roundrobin.c). */
ll_key ll_roundrobin_key(const ll_vserver *vs, uint32_t slot);

static inline ll_key ll_rr_key(const ll_vserver *vs, uint32_t slot)
{
    return ll_key_small(LL_MAX_WEIGHT - vs->svc[slot].weight);
}

/* The next turn from `start` in the current round, else the first of the
 * next round; *round is the round the pick belongs to. -1: none eligible. */
static inline int64_t ll_rr_pick(const ll_vserver *vs, uint32_t start, uint32_t *round)
{
    const ll_tree *t = &vs->tree;
    uint32_t max_weight = LL_MAX_WEIGHT - (uint32_t)ll_key_low(ll_tree_min_key(t));
    uint32_t r = *round;
    int64_t slot = r <= max_weight ? ll_tree_first(t, start, ll_key_small(LL_MAX_WEIGHT - r)) : -1;
    if (slot < 0) {
        r = r >= max_weight ? 1 : r + 1;
        slot = ll_tree_first(t, 0, ll_key_small(LL_MAX_WEIGHT - r));
    }
    *round = r;
    return slot;
}

#endif /* LL_ROUNDROBIN_H */
