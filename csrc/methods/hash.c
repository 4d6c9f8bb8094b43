/* methods/hash.c - the hash family's ops table (methods/hash.h). */
#include "ll_hash.h"
#include "ll_path.h"

static int64_t hash_pick(ll_vserver *vs, uint32_t *round, uint64_t *rng)
{
    return ll_least_pick_i(vs, round, rng, 0);
}

static void hash_set_key(ll_vserver *vs, uint32_t slot, ll_key key)
{
    ll_tree_set_inline(&vs->tree, slot, key);
}

const ll_family_ops ll_family_hash = {
    .name = "hash",
    .id = LL_FAMILY_HASH,
    .draws = 0,
    .startup_rr = 0,
    .pick = hash_pick,
    .set_key = hash_set_key,
    .pick_key = ll_hash_pick,
};
