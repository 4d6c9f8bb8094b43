/* methods/least.c - the least-load family's ops table and its methods' N
 * and keys, out of line for the rows of ll_methods.c (methods/least.h). */
#include "ll_path.h"

/* Defines ll_least_n_<x> from an expression of vs and slot, and its key
 * floor(N * 10000 / weight), ll_least_key_<x>. */
#define LL_LEAST_METHOD(x, expr)                                   \
    uint64_t ll_least_n_##x(const ll_vserver *vs, uint32_t slot)   \
    {                                                              \
        return (expr);                                             \
    }                                                              \
    ll_key ll_least_key_##x(const ll_vserver *vs, uint32_t slot)   \
    {                                                              \
        return LL_LEAST_KEY_OF(ll_least_n_##x, vs, slot);          \
    }

LL_LEAST_METHOD(active, ll_least_n_active_i(vs, slot))            /* LEASTCONNECTION, LEASTREQUEST */
LL_LEAST_METHOD(active_ttfb, ll_least_n_active_ttfb_i(vs, slot))  /* LEASTRESPONSETIME */
LL_LEAST_METHOD(bytes, ll_least_n_bytes_i(vs, slot))              /* LEASTBANDWIDTH */
LL_LEAST_METHOD(packets, ll_least_n_packets_i(vs, slot))          /* LEASTPACKETS */
LL_LEAST_METHOD(active_probe, (uint64_t)vs->svc[slot].active * ll_probe_us(vs, slot))  /* LRTM */

/* CUSTOMLOAD: N is the reported load. Its key is not floor(Nw): a service
 * with a metric over its threshold is not eligible, an idle one comes
 * first (key 0), the others by their weighted load, one above, so that
 * none ties with an idle one. */
uint64_t ll_least_n_custom(const ll_vserver *vs, uint32_t slot)
{
    const uint64_t *custom = ll_col_custom(vs);
    return custom ? custom[slot] & ~LL_CUSTOM_OVER : 0;
}

ll_key ll_least_key_custom(const ll_vserver *vs, uint32_t slot)
{
    const uint64_t *custom = ll_col_custom(vs);
    uint64_t c = custom ? custom[slot] : 0;
    if (c & LL_CUSTOM_OVER)
        return LL_KEY_INF;
    if (vs->svc[slot].active == 0)
        return ll_key_small(0);
    return ll_key_plus_one(ll_key_make(c, vs->svc[slot].weight));
}

static int64_t least_pick(ll_vserver *vs, uint32_t *round, uint64_t *rng)
{
    return ll_least_pick_i(vs, round, rng, 1);
}

static void least_set_key(ll_vserver *vs, uint32_t slot, ll_key key)
{
    ll_tree_set_inline(&vs->tree, slot, key);
}

const ll_family_ops ll_family_least = {
    .name = "least",
    .id = LL_FAMILY_LEAST,
    .draws = 0,
    .startup_rr = 1,
    .pick = least_pick,
    .set_key = least_set_key,
    .pick_key = NULL,
};
