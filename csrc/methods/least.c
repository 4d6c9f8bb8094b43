/* methods/least.c - the least-load family's ops table and its methods' N
 * and keys, out of line for the rows of ll_methods.c (methods/least.h). */
#include "ll_path.h"

/* The out-of-line N and key of each LL_LEAST line of methods/list.h, for
 * its row: the inline ones of methods/least.h. */
#define LL_LEAST(ID, value, N, inputs, counts_active)               \
    uint64_t ll_least_n_##ID(const ll_vserver *vs, uint32_t slot)   \
    {                                                               \
        return ll_least_n_##ID##_i(vs, slot);                       \
    }                                                               \
    ll_key ll_least_key_##ID(const ll_vserver *vs, uint32_t slot)   \
    {                                                               \
        return ll_least_key_##ID##_i(vs, slot);                     \
    }
#define LL_ROW(ID, value, ...)
#include "list.h"
#undef LL_LEAST
#undef LL_ROW

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
