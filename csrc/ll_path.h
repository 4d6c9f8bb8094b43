/*
 * ll_path.h - the request path's cores (internal), each written once with
 * the method's traits (ll_traits: the row of ll_method.h and its family's
 * flags) as an argument.
 *
 * Two ways in. The per-call API (ll_vserver.c) and the replay's generic
 * loop pass the vserver's row, read at run time (ll_traits_of(vs->ops),
 * spec = 0): the family's pick, its key and how a key reaches the tree go
 * through the row and its ops table (ll_method.h), one indirect call each.
 * The batch replay's specialised loops (ll_replay.c) pass constant traits
 * (spec = 1) naming the least-load family's static inline functions
 * (methods/least.h): the compiler inlines them and drops every branch the
 * method does not need (LEASTCONNECTION tests no byte counts for its key,
 * calls nothing through a pointer, pays no call into a generic refresh).
 * One definition, so the answers cannot differ between the two paths.
 *
 * The cores assume what their callers checked: a bound slot, arguments in
 * range, the window already at the call's second.
 */
#ifndef LL_PATH_H
#define LL_PATH_H

#include "ll_internal.h"
#include "methods/least.h"
#include "methods/roundrobin.h"
#include "methods/sampled.h"

/* Forced where the traits must reach the body as constants. */
#if defined(__GNUC__) || defined(__clang__)
#define LL_INLINE static inline __attribute__((always_inline))
#else
#define LL_INLINE static inline
#endif

/* What a core needs of the method. With spec = 1 the traits are constants
 * of the least-load family (its pick and set_key, called directly). */
typedef struct {
    ll_key_fn key;          /* the row's key (spec: a static inline one)      */
    void (*on_end)(ll_vserver *vs, uint32_t slot, uint32_t ttfb_us);
    uint8_t startup_rr;     /* the family's                                   */
    uint8_t draws;          /* the family's                                   */
    uint8_t inputs;         /* LL_IN_*                                        */
    uint8_t counts_active;
} ll_traits;

LL_INLINE ll_traits ll_traits_of(const ll_method_ops *m)
{
    ll_traits t = { m->key, m->on_end, m->fam->startup_rr, m->fam->draws, m->inputs, m->counts_active };
    return t;
}

/* ---- keys -------------------------------------------------------------- */

/* A slot's key: LL_KEY_INF when it is not eligible, else the method's. */
LL_INLINE ll_key ll_key_with(const ll_vserver *vs, uint32_t slot, ll_key_fn key)
{
    const ll_svc *s = &vs->svc[slot];
    /* unbound slots are zeroed, so their state byte is LL_UP: test bound too */
    if (!ll_svc_open(s) || s->sel_this >= s->cap)
        return LL_KEY_INF;
    return key(vs, slot);
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

/* The refresh inside a core: inlined where the traits are the caller's
 * constants (spec = 1, the replay's loops: the least-load family, whose
 * keys go into the tree by ll_tree_set), a call otherwise (spec = 0: the
 * per-call functions stay small; ll_refresh goes through the row). */
LL_INLINE void ll_core_refresh(ll_vserver *vs, uint32_t slot, ll_traits t, int spec)
{
    if (spec)
        ll_tree_set_inline(&vs->tree, slot, ll_key_with(vs, slot, t.key));
    else
        ll_refresh(vs, slot);
}

/* ---- the pick and its charge ------------------------------------------- */

/* The slot a select would take now, and the round and generator state it
 * would leave; no side effects on the choice. -ENOENT when nothing is
 * eligible. The family's pick: direct with spec, through the table else. */
LL_INLINE int64_t ll_pick_as(ll_vserver *vs, uint32_t *round_out, uint64_t *rng_out, int spec)
{
    *rng_out = vs->rng;
    *round_out = vs->rr_round;
    if (spec)
        return ll_least_pick_i(vs, round_out, rng_out, 1);
    return vs->ops->fam->pick(vs, round_out, rng_out);
}

/* Charges a pick: the part of a select after the pick. */
LL_INLINE int64_t ll_take_as(ll_vserver *vs, int64_t slot, uint32_t round, uint64_t rng, ll_traits t, int spec)
{
    ll_svc *s = &vs->svc[slot];
    if (s->active == UINT32_MAX) {
        vs->full_slot = (uint32_t)slot;
        return -EOVERFLOW;
    }
    /* the record explain() reads: the state the pick was made from */
    vs->last.cursor = vs->cursor;
    vs->last.rr_round = vs->rr_round;
    vs->last.startup = vs->startup_left && t.startup_rr;
    if (t.draws) {
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
    if (t.counts_active || s->cap != LL_NO_CAP)
        ll_core_refresh(vs, (uint32_t)slot, t, spec);
    return slot;
}

/* ---- traffic and the end of a transaction ------------------------------ */

/* ll_record() on a bound slot, the window already at the call's second. */
LL_INLINE int ll_record_as(ll_vserver *vs, uint32_t slot, uint64_t bytes, uint64_t packets, ll_traits t, int spec)
{
    if (bytes > UINT64_MAX - vs->bytes[slot] || packets > UINT64_MAX - vs->packets[slot])
        return -EOVERFLOW;
    size_t at = (size_t)vs->head * vs->capacity + slot;
    vs->bytes_bkt[at] += bytes;
    vs->packets_bkt[at] += packets;
    if (bytes | packets) {
        /* a window up to LL_MASK_WINDOW long marks the bucket, so that a roll
         * reads only buckets that hold traffic; longer ones read them all.
         * Once a second a slot: after that its mark is there already. */
        ll_svc *s = &vs->svc[slot];
        if ((s->flags & vs->head_mark) != vs->head_mark) {
            s->flags = (uint16_t)(s->flags | (vs->head_mark & ~LL_LIVE));
            ll_live_add(vs, slot);
        }
    }
    vs->bytes[slot] += bytes;
    vs->packets[slot] += packets;
    if (((t.inputs & LL_IN_BYTES) && bytes) || ((t.inputs & LL_IN_PACKETS) && packets))
        ll_core_refresh(vs, slot, t, spec);
    return 0;
}

/* ll_finish() on a bound slot with a TTFB in range. */
LL_INLINE int ll_finish_as(ll_vserver *vs, uint32_t slot, int has_ttfb, uint32_t ttfb_us, int failed, ll_traits t,
                           int spec)
{
    ll_svc *s = &vs->svc[slot];
    if (s->active == 0)
        return -ERANGE;
    s->active--;
    if (has_ttfb) {
        /* EWMA, alpha 1/8, rounded half up; 7 * 3.6e9 fits in 64 bits */
        s->ttfb_us = s->ttfb_known ? (uint32_t)((7 * (uint64_t)s->ttfb_us + ttfb_us + 4) / 8) : ttfb_us;
        s->ttfb_known = 1;
        if (t.on_end)
            t.on_end(vs, slot, ttfb_us);
    }
    if (failed) {
        s->failures += s->failures != UINT64_MAX;
        s->fails_in_row += s->fails_in_row != UINT32_MAX;
    } else {
        s->fails_in_row = 0;
    }
    if (t.counts_active)
        ll_core_refresh(vs, slot, t, spec);
    int flags = 0;
    if (s->draining && s->active == 0)
        flags |= LL_END_DRAINED;
    if (vs->outlier_k && s->fails_in_row >= vs->outlier_k && !s->ejected && !s->draining) {
        flags |= LL_END_OUTLIER;
        ll_ej_judge(vs, slot);  /* eject it, or say why not (ll_ejection.c) */
    }
    return flags;
}

#endif /* LL_PATH_H */
