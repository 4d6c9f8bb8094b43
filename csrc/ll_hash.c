/*
 * ll_hash.c - the hash family's pick: weighted rendezvous hashing.
 *
 * For key hash k, a slot with name hash h and weight w scores
 *     x = avalanche(k ^ h),  L = ll_neg_log2(x),
 * and the pick is the least L / w, then the greatest x, then the first in
 * bind order. With u = x / 2^64 uniform, -ln(u) / w is exponential with
 * rate w, so the least one is slot i's with probability w_i / sum(w):
 * weighted shares, and a slot leaving (DOWN, unbound, excluded, capped
 * out) hands over only the keys it held. No floating point: the same
 * answer on every platform, and the same integers as the reference
 * (src/leastload/_hash.py).
 *
 * ll_neg_log2 takes log2's integer part from the bit length and its
 * fraction from a table of 1,025 points (ll_log2_table.h), interpolated
 * linearly: within 3 units of 2^-20 of the real value.
 *
 * L never grows as x grows, so between two slots of equal weight the
 * greater x wins outright: L is computed only when weights differ, and a
 * vserver whose weights are all equal never computes it.
 */
#include "ll_hash.h"
#include "ll_log2_table.h"
#include "ll_xxh64.h"

/* 63 - floor(log2(y)) for y > 0: the count of leading zero bits. */
static inline int floor_log2_complement(uint64_t y)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_clzll(y);
#else
    int n = 0;
    while (!(y >> 63)) {
        y <<= 1;
        n++;
    }
    return n;
#endif
}

uint32_t ll_neg_log2(uint64_t x)
{
    uint64_t y = (x >> 1) + 1;  /* 1 .. 2^63 */
    int e = 63 - floor_log2_complement(y);
    /* the mantissa in 1.31 fixed point, in [1, 2) */
    uint64_t m = e >= 31 ? y >> (e - 31) : y << (31 - e);
    const int shift = 31 - LL_LOG_TABLE_BITS;
    uint32_t k = (uint32_t)(m >> shift) - (1u << LL_LOG_TABLE_BITS);
    uint64_t r = m & (((uint64_t)1 << shift) - 1);
    uint32_t lo = ll_log2_table[k], hi = ll_log2_table[k + 1];
    uint32_t frac = lo + (uint32_t)(((uint64_t)(hi - lo) * r) >> shift);
    return ((uint32_t)63 << LL_LOG_FRAC_BITS) - (((uint32_t)e << LL_LOG_FRAC_BITS) | frac);
}

static inline int eligible(const ll_tree *t, uint32_t slot)
{
    if (!t->wide)
        return t->cell[t->P + slot] != LL_TREE_EMPTY;
    return !ll_key_eq(ll_tree_wide_key(t, slot), LL_KEY_INF);
}

int64_t ll_hash_pick(const ll_vserver *vs, uint64_t key_hash)
{
    const ll_tree *t = &vs->tree;
    if (ll_key_eq(ll_tree_min_key(t), LL_KEY_INF))
        return -ENOENT;
    int64_t best = -1;
    uint64_t best_x = 0, best_w = 0, best_l = 0;
    int best_l_known = 0;
    for (uint32_t i = 0; i < vs->n_slots; i++) {
        if (!eligible(t, i))
            continue;
        const ll_svc *s = &vs->svc[i];
        uint64_t x = ll_xxh64_avalanche(key_hash ^ s->name_hash);
        uint64_t w = s->weight;
        int better;
        if (best < 0) {
            better = 1;
        } else if (w == best_w) {
            better = x > best_x;  /* equal weights: L ordered against x */
        } else {
            uint64_t l = ll_neg_log2(x);
            if (!best_l_known)
                best_l = ll_neg_log2(best_x);
            /* L / w < best_L / best_w, exactly: both sides < 2^26 * 100 */
            uint64_t lhs = l * best_w, rhs = best_l * w;
            better = lhs < rhs || (lhs == rhs && x > best_x);
            if (better) {
                best_l = l;
                best_l_known = 1;
            }
        }
        if (better) {
            if (best < 0 || w == best_w)
                best_l_known = 0;  /* computed again if a weight differs later */
            best = i;
            best_x = x;
            best_w = w;
        }
    }
    return best;
}
