/*
 * ll_path.h - the request path's cores (internal), each written once with
 * the method's traits as arguments: its family, its load kind and whether
 * its key moves with active transactions (the row of ll_method.h).
 *
 * Why arguments and not vs->ops: the per-call API (ll_vserver.c) passes the
 * vserver's row, read at run time, and behaves as one generic path; the
 * batch replay (ll_replay.c) instantiates the same functions with constant
 * traits for the common rows, so the compiler drops every branch a method
 * does not need (LEASTCONNECTION tests no byte counts for its key, takes no
 * round-robin or sampled branch, pays no call into a generic refresh).
 * One definition, so the answers cannot differ between the two paths.
 *
 * The cores that refresh a key take `spec` too: 1 where the traits are
 * constants (inline the refresh), 0 where they are read at run time.
 *
 * The cores assume what their callers checked: a bound slot, arguments in
 * range, the window already at the call's second.
 */
#ifndef LL_PATH_H
#define LL_PATH_H

#include "ll_internal.h"
#include "ll_least.h"
#include "ll_roundrobin.h"
#include "ll_sampled.h"

/* Forced where the traits must reach the body as constants. */
#if defined(__GNUC__) || defined(__clang__)
#define LL_INLINE static inline __attribute__((always_inline))
#else
#define LL_INLINE static inline
#endif

/* ---- keys -------------------------------------------------------------- */

/* A slot's key: LL_KEY_INF when it is not eligible, else its family's. */
LL_INLINE ll_key ll_key_as(const ll_vserver *vs, uint32_t slot, int family, int load)
{
    const ll_svc *s = &vs->svc[slot];
    /* unbound slots are zeroed, so their state byte is LL_UP: test bound too */
    if (s->state != LL_UP || !s->bound || s->draining || s->ejected || s->sel_this >= s->cap)
        return LL_KEY_INF;
    if (family == LL_FAMILY_ROUNDROBIN)
        return ll_rr_key(vs, slot);
    return ll_least_key_as(vs, slot, load);
}

/* ll_tree_set() with its usual case, a packed key, inlined here: left to
 * itself the compiler calls it out of line from the replay's loop, which
 * costs more than the update. */
LL_INLINE void ll_tree_set_inline(ll_tree *t, uint32_t slot, ll_key k)
{
    if (!t->wide) {
        int fits;
        uint64_t v = ll_tree_pack(t, slot, k, &fits);
        if (fits) {
            ll_tree_packed_update(t, slot, v);
            return;
        }
    }
    ll_tree_set(t, slot, k);
}

/* Sets a slot's key. The sampled family reads single leaves only (its
 * draws), never the tree's minimum: its keys change the leaf alone, O(1),
 * and the inner nodes are rebuilt when the method changes. */
LL_INLINE void ll_set_key_as(ll_vserver *vs, uint32_t slot, ll_key key, int family)
{
    if (family == LL_FAMILY_SAMPLED)
        ll_tree_load(&vs->tree, slot, key);
    else
        ll_tree_set_inline(&vs->tree, slot, key);
}

/* Recomputes key[slot] and fixes the tree (ll_refresh with the traits given). */
LL_INLINE void ll_refresh_as(ll_vserver *vs, uint32_t slot, int family, int load)
{
    ll_set_key_as(vs, slot, ll_key_as(vs, slot, family, load), family);
}

/* The refresh inside a core: inlined where the traits are the caller's
 * constants (spec = 1, the replay's loops), a call otherwise (spec = 0:
 * the per-call functions stay small; ll_refresh reads the same traits from
 * vs->ops). */
LL_INLINE void ll_core_refresh(ll_vserver *vs, uint32_t slot, int family, int load, int spec)
{
    if (spec)
        ll_refresh_as(vs, slot, family, load);
    else
        ll_refresh(vs, slot);
}

/* ---- the pick and its charge ------------------------------------------- */

/* The slot a select would take now, and the round it would leave; no side
 * effects. -ENOENT when nothing is eligible. */
LL_INLINE int64_t ll_pick_as(ll_vserver *vs, uint32_t *round_out, uint64_t *rng_out, int family)
{
    *rng_out = vs->rng;
    const ll_tree *t = &vs->tree;
    uint32_t start = (uint32_t)(vs->cursor + 1);
    uint32_t round = vs->rr_round;
    int64_t slot;
    *round_out = round;
    if (family == LL_FAMILY_SAMPLED)
        return ll_p2c_pick(vs, rng_out, vs->drawn);  /* before the root: P2C keeps it stale */
    if (ll_key_eq(ll_tree_min_key(t), LL_KEY_INF))
        return -ENOENT;
    if (family == LL_FAMILY_ROUNDROBIN) {
        slot = ll_rr_pick(vs, start, &round);
        *round_out = round;
        return slot;
    }
    /* the least-load family; also the hash family's pick without a key
     * (DOMAINHASH without a domain), which takes no startup round robin */
    if (vs->startup_left && family == LL_FAMILY_LEAST) {
        /* startup round robin: any eligible (finite) key qualifies */
        slot = ll_tree_first(t, start, LL_KEY_MAX_FINITE);
        return slot >= 0 ? slot : ll_tree_first(t, 0, LL_KEY_MAX_FINITE);
    }
    return ll_tree_pick_min(t, start);
}

/* Charges a pick: the part of a select after the pick. */
LL_INLINE int64_t ll_take_as(ll_vserver *vs, int64_t slot, uint32_t round, uint64_t rng, int family, int load,
                             int counts_active, int spec)
{
    ll_svc *s = &vs->svc[slot];
    if (s->active == UINT32_MAX) {
        vs->full_slot = (uint32_t)slot;
        return -EOVERFLOW;
    }
    /* the record explain() reads: the state the pick was made from */
    vs->last.cursor = vs->cursor;
    vs->last.rr_round = vs->rr_round;
    vs->last.startup = vs->startup_left && family == LL_FAMILY_LEAST;
    if (family == LL_FAMILY_SAMPLED) {
        vs->last.drawn[0] = vs->drawn[0];
        vs->last.drawn[1] = vs->drawn[1];
    }
    vs->cursor = slot;
    vs->rr_round = round;
    vs->rng = rng;  /* P2C's draws are spent only by a pick that is charged */
    if (vs->last.startup)
        vs->startup_left--;
    s->active++;
    s->selected++;
    if (s->sel_this < UINT32_MAX - 1) {  /* saturates below LL_NO_CAP */
        s->sel_this++;
        /* a pick is UP, bound, not draining, not ejected: counted in this_up */
        vs->this_up++;
        vs->this_open += s->cap == LL_NO_CAP;
        ll_live_add(vs, (uint32_t)slot);
    }
    if (counts_active || s->cap != LL_NO_CAP)
        ll_core_refresh(vs, (uint32_t)slot, family, load, spec);
    return slot;
}

/* ---- traffic and the end of a transaction ------------------------------ */

/* ll_record() on a bound slot, the window already at the call's second. */
LL_INLINE int ll_record_as(ll_vserver *vs, uint32_t slot, uint64_t bytes, uint64_t packets, int family, int load,
                           int spec)
{
    if (bytes > UINT64_MAX - vs->bytes[slot] || packets > UINT64_MAX - vs->packets[slot])
        return -EOVERFLOW;
    size_t at = (size_t)vs->head * vs->capacity + slot;
    vs->bytes_bkt[at] += bytes;
    vs->packets_bkt[at] += packets;
    if (bytes | packets) {
        /* a window up to LL_MASK_WINDOW long marks the bucket, so that a roll
         * reads only buckets that hold traffic; longer ones read them all */
        if (vs->window <= LL_MASK_WINDOW)
            vs->svc[slot].flags = (uint16_t)(vs->svc[slot].flags | (1u << vs->head));
        ll_live_add(vs, slot);
    }
    vs->bytes[slot] += bytes;
    vs->packets[slot] += packets;
    if ((load == LL_N_BYTES && bytes) || (load == LL_N_PACKETS && packets))
        ll_core_refresh(vs, slot, family, load, spec);
    return 0;
}

/* ll_finish() on a bound slot with a TTFB in range. */
LL_INLINE int ll_finish_as(ll_vserver *vs, uint32_t slot, int has_ttfb, uint32_t ttfb_us, int failed, int family,
                           int load, int counts_active, int spec)
{
    ll_svc *s = &vs->svc[slot];
    if (s->active == 0)
        return -ERANGE;
    s->active--;
    if (has_ttfb) {
        /* EWMA, alpha 1/8, rounded half up; 7 * 3.6e9 fits in 64 bits */
        s->ttfb_us = s->ttfb_known ? (uint32_t)((7 * (uint64_t)s->ttfb_us + ttfb_us + 4) / 8) : ttfb_us;
        s->ttfb_known = 1;
        if (load == LL_N_PEAK)
            ll_peak_observe(vs, slot, ttfb_us);
    }
    if (failed) {
        s->failures += s->failures != UINT64_MAX;
        s->fails_in_row += s->fails_in_row != UINT32_MAX;
    } else {
        s->fails_in_row = 0;
    }
    if (counts_active)
        ll_core_refresh(vs, slot, family, load, spec);
    int flags = 0;
    if (s->draining && s->active == 0)
        flags |= LL_END_DRAINED;
    if (vs->outlier_k && s->fails_in_row >= vs->outlier_k && !s->ejected && !s->draining)
        flags |= LL_END_OUTLIER;
    return flags;
}

#endif /* LL_PATH_H */
