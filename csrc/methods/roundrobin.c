/* methods/roundrobin.c - the round-robin family's ops table (methods/roundrobin.h). */
#include "ll_path.h"

ll_key ll_roundrobin_key(const ll_vserver *vs, uint32_t slot) { return ll_rr_key(vs, slot); }

static int64_t rr_pick(ll_vserver *vs, uint32_t *round, uint64_t *rng)
{
    (void)rng;
    if (ll_key_eq(ll_tree_min_key(&vs->tree), LL_KEY_INF))
        return -ENOENT;
    return ll_rr_pick(vs, (uint32_t)(vs->cursor + 1), round);
}

static void rr_set_key(ll_vserver *vs, uint32_t slot, ll_key key)
{
    ll_tree_set_inline(&vs->tree, slot, key);
}

const ll_family_ops ll_family_roundrobin = {
    .name = "roundrobin",
    .id = LL_FAMILY_ROUNDROBIN,
    .draws = 0,
    .startup_rr = 0,
    .pick = rr_pick,
    .set_key = rr_set_key,
    .pick_key = NULL,
};
