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
 * greater x wins outright: a vserver whose eligible weights are all equal
 * computes no L, and one with several weights computes one L a weight.
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

/* Slot i's score; name hashes not set yet (a C caller's omission) count as 0. */
static inline uint64_t score(uint64_t key_hash, const uint64_t *name_hash, uint32_t i)
{
    return ll_xxh64_avalanche(key_hash ^ (name_hash ? name_hash[i] : 0));
}

/* The pick over several weights. Between equal weights the greater x
 * wins, so each weight's best slot is found by x alone (the first on a
 * tie); only those, one a weight, are compared by L / w. A candidate whose
 * lower bound of L (from its leading one bits) already loses to the best
 * so far needs no L: a few logarithms a pick, however many weights. *n_weights: the number of
 * distinct eligible weights seen. */
static int64_t weighted_pick(const ll_vserver *vs, uint64_t key_hash, uint32_t *n_weights)
{
    const ll_tree *t = &vs->tree;
    int64_t class_slot[LL_MAX_WEIGHT + 1];
    uint64_t class_x[LL_MAX_WEIGHT + 1];
    uint8_t used[LL_MAX_WEIGHT + 1] = { 0 };
    uint8_t list[LL_MAX_WEIGHT];  /* the weights seen, in no order */
    uint32_t n = 0;
    for (uint32_t i = 0; i < vs->n_slots; i++) {
        if (!eligible(t, i))
            continue;
        uint64_t x = score(key_hash, vs->name_hash, i);
        uint32_t w = vs->svc[i].weight;
        if (!used[w]) {
            used[w] = 1;
            list[n++] = (uint8_t)w;
        } else if (x <= class_x[w]) {
            continue;
        }
        class_x[w] = x;
        class_slot[w] = i;
    }
    *n_weights = n;
    if (n == 0)
        return -ENOENT;  /* not reached: the caller saw an eligible slot */
    if (n == 1)
        return class_slot[list[0]];
    int64_t best = class_slot[list[0]];
    uint64_t best_x = class_x[list[0]], best_w = list[0], best_l = ll_neg_log2(best_x);
    for (uint32_t k = 1; k < n; k++) {
        uint32_t w = list[k];
        uint64_t x = class_x[w], ones = ~x;
        uint64_t bound = ll_neg_log2_ones[ones ? floor_log2_complement(ones) : 64];
        if (bound * best_w > best_l * w)
            continue;  /* its L / w cannot come below best_L / best_w */
        uint64_t l = ll_neg_log2(x);
        /* L / w against best_L / best_w, exactly: both sides < 2^26 * 100 */
        uint64_t lhs = l * best_w, rhs = best_l * w;
        if (lhs < rhs || (lhs == rhs && (x > best_x || (x == best_x && class_slot[w] < best)))) {
            best = class_slot[w];
            best_x = x;
            best_w = w;
            best_l = l;
        }
    }
    return best;
}

/* The equal-weight scan from `first` (an eligible slot) on, in the packed
 * layout (a leaf LL_TREE_EMPTY is not eligible). Returns -1 as soon as an
 * eligible weight differs from the first one's. */
static inline int64_t equal_pick(const ll_vserver *vs, uint64_t key_hash, uint32_t first)
{
    const uint64_t *leaf = vs->tree.cell + vs->tree.P;
    const ll_svc *svc = vs->svc;
    uint32_t w0 = svc[first].weight;
    const uint64_t *name_hash = vs->name_hash;
    uint64_t best_x = score(key_hash, name_hash, first);
    int64_t best = first;
    for (uint32_t i = first + 1; i < vs->n_slots; i++) {
        if (leaf[i] == LL_TREE_EMPTY)
            continue;
        if (svc[i].weight != w0)
            return -1;
        uint64_t x = score(key_hash, name_hash, i);
        best = x > best_x ? (int64_t)i : best;
        best_x = x > best_x ? x : best_x;
    }
    return best;
}

int64_t ll_hash_pick(ll_vserver *vs, uint64_t key_hash)
{
    const ll_tree *t = &vs->tree;
    if (ll_key_eq(ll_tree_min_key(t), LL_KEY_INF))
        return -ENOENT;
    /* The last pick's finding (one weight or several) chooses the pass;
     * the equal-weight pass gives way at the first weight that differs. */
    if (!vs->hash_mixed && !t->wide) {
        uint32_t first = 0;
        while (t->cell[t->P + first] == LL_TREE_EMPTY)  /* one is eligible: the minimum is finite */
            first++;
        int64_t best = equal_pick(vs, key_hash, first);
        if (best >= 0)
            return best;
    }
    uint32_t n_weights;
    int64_t best = weighted_pick(vs, key_hash, &n_weights);
    vs->hash_mixed = n_weights > 1;
    return best;
}
