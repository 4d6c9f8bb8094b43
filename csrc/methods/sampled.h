/*
 * methods/sampled.h - the sampled family (internal): P2C and PEAKEWMA, not
 * the vendor's. Its ops table is ll_family_sampled (methods/sampled.c).
 *
 * Power of two choices: draw two distinct eligible services at random and
 * take the one with the lower Nw (active transactions x 10000 / weight;
 * the first drawn on a tie). O(1) expected while most services are
 * eligible: a draw is a bound service's rank in bind order (a slot while
 * there are no holes), redrawn when that service is not eligible. After 64
 * draws without an eligible service, the first choice is the first
 * eligible service in bind order (a scan) and the second is given up.
 * P2C reads single leaves of the tree only, so its key changes set the leaf
 * alone (O(1), not O(log n)); the inner nodes are rebuilt when the method
 * changes.
 *
 * The draws are splitmix64 (a published generator: add a constant, then
 * three xor-shift-multiply steps), each reduced modulo the number of bound
 * services; the reference makes the same draws. A pick computes the next
 * state without storing it; take() stores it, so a pick that fails or is
 * only peeked at spends nothing.
 */
#ifndef LL_SAMPLED_H
#define LL_SAMPLED_H

#include "ll_internal.h"
#include "ll_peakewma.h"

extern const ll_family_ops ll_family_sampled;

/* PEAKEWMA's row: its key in the tree (0: eligible) and its end of a
 * transaction (the latency sample). */
ll_key ll_sampled_key_eligible(const ll_vserver *vs, uint32_t slot);
void ll_sampled_peak_end(ll_vserver *vs, uint32_t slot, uint32_t ttfb_us);

#define LL_P2C_TRIES 64

static inline uint64_t ll_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* The slot of the bound service of rank r in bind order (r < n_bound). */
static inline uint32_t ll_slot_of_rank(const ll_vserver *vs, uint32_t r)
{
    if (vs->n_slots == vs->n_bound)
        return r;
    for (uint32_t slot = 0;; slot++)  /* holes left by unbinds: O(slots), until compaction */
        if (vs->svc[slot].bound && r-- == 0)
            return slot;
}

/* A drawn slot's key: P2C's is its leaf; a timed method's (PEAKEWMA) moves
 * with time, so it is computed from its N at the call's time (its leaf says
 * only that it is eligible). */
static inline ll_key ll_sampled_key(const ll_vserver *vs, uint32_t slot)
{
    if (vs->ops->timed)
        return ll_key_make(vs->ops->n(vs, slot), vs->svc[slot].weight);
    return ll_tree_key(&vs->tree, slot);
}

/* One draw: an eligible slot, or -1. */
static inline int64_t ll_p2c_draw(const ll_vserver *vs, uint64_t *state, int64_t other)
{
    for (int k = 0; k < LL_P2C_TRIES; k++) {
        uint32_t slot = ll_slot_of_rank(vs, (uint32_t)(ll_splitmix64(state) % vs->n_bound));
        if ((int64_t)slot != other && !ll_key_eq(ll_tree_key(&vs->tree, slot), LL_KEY_INF))
            return slot;
    }
    return -1;
}

/* The pick, or -ENOENT when nothing is eligible. drawn[] gets the slots
 * drawn (-1: none), for the pick's record. */
static inline int64_t ll_p2c_pick(const ll_vserver *vs, uint64_t *state, int64_t drawn[2])
{
    drawn[0] = drawn[1] = -1;
    if (vs->n_bound == 0)
        return -ENOENT;
    int64_t a = ll_p2c_draw(vs, state, -1);
    if (a < 0) {  /* few eligible: the first in bind order, O(slots) */
        for (uint32_t slot = 0; slot < vs->n_slots && a < 0; slot++)
            if (!ll_key_eq(ll_tree_key(&vs->tree, slot), LL_KEY_INF))
                a = slot;
        if (a < 0)
            return -ENOENT;
    }
    drawn[0] = a;
    if (vs->n_bound < 2)
        return a;  /* no second service to draw */
    int64_t b = ll_p2c_draw(vs, state, a);
    if (b < 0)
        return a;
    drawn[1] = b;
    ll_key ka = ll_sampled_key(vs, (uint32_t)a), kb = ll_sampled_key(vs, (uint32_t)b);
    return ll_key_lt(kb, ka) ? b : a;
}

#endif /* LL_SAMPLED_H */
