/* methods/sampled.c - the sampled family's ops table (methods/sampled.h)
 * and PEAKEWMA's key and end of a transaction (its estimate: ll_peakewma.c). */
#include "ll_path.h"

/* The tree keeps eligibility only (a timed method): 0. */
ll_key ll_sampled_key_eligible(const ll_vserver *vs, uint32_t slot)
{
    (void)vs;
    (void)slot;
    return ll_key_small(0);
}

void ll_sampled_peak_end(ll_vserver *vs, uint32_t slot, uint32_t ttfb_us) { ll_peak_observe(vs, slot, ttfb_us); }

static int64_t sampled_pick(ll_vserver *vs, uint32_t *round, uint64_t *rng)
{
    (void)round;
    return ll_p2c_pick(vs, rng, vs->drawn);  /* before the root: P2C keeps it stale */
}

/* The family reads single leaves only (its draws), never the tree's
 * minimum: its keys change the leaf alone, O(1), and the inner nodes are
 * rebuilt when the method changes. */
static void sampled_set_key(ll_vserver *vs, uint32_t slot, ll_key key)
{
    ll_tree_load(&vs->tree, slot, key);
}

const ll_family_ops ll_family_sampled = {
    .name = "sampled",
    .id = LL_FAMILY_SAMPLED,
    .draws = 1,
    .startup_rr = 0,
    .pick = sampled_pick,
    .set_key = sampled_set_key,
    .pick_key = NULL,
};
