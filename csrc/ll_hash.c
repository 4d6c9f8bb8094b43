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
 * (src/leastload/hashing/rendezvous.py).
 *
 * ll_neg_log2 takes log2's integer part from the bit length and its
 * fraction from a table of 1,025 points (ll_log2_table.h), interpolated
 * linearly: within 3 units of 2^-20 of the real value.
 *
 * One pass over the slots in bind order, keeping the best so far:
 * - while the eligible weights equal the first one's, the greater x wins
 *   outright (L never grows as x grows): no L at all, and no branch the
 *   processor can mispredict. A vserver whose weights are equal stays in
 *   this loop to the end.
 * - from the first weight that differs on, a slot is first tested against
 *   a bound that needs one multiplication (bound_skips below); only the
 *   few that pass it, about the number of times the best changes, compute
 *   their L and compare exactly.
 * The scores are computed a few slots at a time in vector registers
 * (score_lanes), in a build of the scan chosen for the processor at run
 * time (packed_pick_dispatch). Nothing is allocated and nothing is cached
 * between picks.
 */
#include "ll_hash.h"
#include "ll_log2_table.h"

#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define LL_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define LL_ALWAYS_INLINE inline
#endif

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

static LL_ALWAYS_INLINE uint32_t neg_log2(uint64_t x)
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

uint32_t ll_neg_log2(uint64_t x)
{
    return neg_log2(x);
}

/* The bound. Let g = ~x >> 33 (the top 31 bits of 2^64 - 1 - x). Then
 *     L >= g / (2048 ln 2) - 4:
 * L is never below 2^20 * -log2(v), v = (x/2 + 1) / 2^63 (the table's
 * points and the interpolation are truncated, and the chord of a concave
 * curve lies below it; the tests allow the 4 units besides), and
 * -log2(v) >= (1 - v) / ln 2 with 1 - v = (~x >> 1) / 2^63 >= g / 2^31.
 * So a slot of weight w with g > w * K * (bl / bw + 4), K >= 2048 ln 2,
 * has L / w > bl / bw: it loses to the best (bl, bw) and needs no L.
 * K = 14195655 / 10000 = 1419.5655 (2048 ln 2 = 1419.56543 ...). */
#define BOUND_K_NUM 14195655u
#define BOUND_K_DEN 10000u

/* K * 2^24 / w rounded up (and then some), w = 1..100: skip_above's
 * divisor as a multiplier, since it runs each time the best changes. */
#define BOUND_RECIP(w) (((uint64_t)BOUND_K_NUM << 24) / (BOUND_K_DEN * (uint64_t)(w)) + 1)
#define BOUND_RECIP10(w) BOUND_RECIP(w), BOUND_RECIP(w + 1), BOUND_RECIP(w + 2), BOUND_RECIP(w + 3), \
    BOUND_RECIP(w + 4), BOUND_RECIP(w + 5), BOUND_RECIP(w + 6), BOUND_RECIP(w + 7), BOUND_RECIP(w + 8), \
    BOUND_RECIP(w + 9)
_Static_assert(LL_MAX_WEIGHT == 100, "bound_recip lists the weights 1..100");
static const uint64_t bound_recip[LL_MAX_WEIGHT + 1] = {
    0, BOUND_RECIP10(1), BOUND_RECIP10(11), BOUND_RECIP10(21), BOUND_RECIP10(31), BOUND_RECIP10(41),
    BOUND_RECIP10(51), BOUND_RECIP10(61), BOUND_RECIP10(71), BOUND_RECIP10(81), BOUND_RECIP10(91),
};

/* An integer at least K * (bl / bw + 4): bl + 4 bw < 2^27 and
 * bound_recip[] < 2^35, so the product fits; the result is below 2^38. */
static inline uint64_t skip_above(uint64_t bl, uint64_t bw)
{
    return (((bl + 4 * bw) * bound_recip[bw]) >> 24) + 1;
}

/* g = ~x >> 33 (score_lanes gives it beside x) */
static inline int bound_skips(uint64_t g, uint32_t w, uint64_t above)
{
    /* above < 2^38 and w <= 100: the product fits */
    return g > above * w;
}

/* Slot i's score avalanche(key_hash ^ name's hash), from key_head, the
 * head of the avalanche of key_hash, and the name hash kept with its head
 * applied (ll_hash_name_entry). `named` 0: no name hashes were set (a C
 * caller's omission), and they count as 0. Always inlined, and `named` a
 * constant at every call, so the scan tests nothing per slot. */
static LL_ALWAYS_INLINE uint64_t score(uint64_t key_head, const uint64_t *name_hash, int named, size_t i)
{
    return ll_xxh64_avalanche_tail(key_head ^ (named ? name_hash[i] : 0));
}

/* The scores of slots i .. i + lanes - 1 (name hashes set; lanes 2 or 4,
 * a constant) into x[], and the bound's g = ~x >> 33 of each into g[]
 * (in the vector too: two scalar operations a slot fewer in the weighted
 * loop, which reads g first and x only for the few it does not skip).
 * The scan waits on the integer units, not on the data: on x86-64 with
 * GCC or Clang (vector types) the avalanches run in vector registers
 * beside the scalar compare-and-select. With SSE2 alone
 * (every x86-64) each 64-bit multiply is made of 32-bit ones; packed_pick
 * is also built for AVX2 (four lanes a register) and for AVX-512DQ/VL (one
 * instruction a multiply), chosen at run time (below). Elsewhere scalar:
 * NEON, say, has no 64-bit lane multiply either, and that trade was not
 * measured there. */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__SSE2__)
typedef uint64_t ll_u64x2 __attribute__((vector_size(16)));
typedef uint64_t ll_u64x4 __attribute__((vector_size(32)));

/* Declares `v`, the avalanche tail of key_head ^ the names at i on every
 * lane of a `vtype` vector, and `gv` = ~v >> 33 (score()'s steps, lane-wise). */
#define LL_SCORE_VECTOR(vtype, v, gv)            \
    vtype v;                                     \
    memcpy(&v, name_hash + i, sizeof v);         \
    v ^= key_head;                               \
    v *= LL_XXH_PRIME64_2;                       \
    v ^= v >> 29;                                \
    v *= LL_XXH_PRIME64_3;                       \
    v ^= v >> 32;                                \
    vtype gv = ~v >> 33

/* The lanes are written out, not looped over: a loop measured 50 % slower
 * in the weighted scan. */
static LL_ALWAYS_INLINE void score_lanes(uint64_t key_head, const uint64_t *name_hash, size_t i, uint64_t x[4],
                                         uint64_t g[4], const int lanes)
{
    if (lanes == 2) {
        LL_SCORE_VECTOR(ll_u64x2, v, gv);
        x[0] = v[0];
        x[1] = v[1];
        g[0] = gv[0];
        g[1] = gv[1];
    } else {
        LL_SCORE_VECTOR(ll_u64x4, v, gv);
        x[0] = v[0];
        x[1] = v[1];
        x[2] = v[2];
        x[3] = v[3];
        g[0] = gv[0];
        g[1] = gv[1];
        g[2] = gv[2];
        g[3] = gv[3];
    }
}
#else
static LL_ALWAYS_INLINE void score_lanes(uint64_t key_head, const uint64_t *name_hash, size_t i, uint64_t x[4],
                                         uint64_t g[4], const int lanes)
{
    for (int k = 0; k < lanes; k++) {
        x[k] = ll_xxh64_avalanche_tail(key_head ^ name_hash[i + k]);
        g[k] = ~x[k] >> 33;
    }
}
#endif

/* `leaf`: the packed layout's leaves (t->cell + t->P), read when !wide */
static LL_ALWAYS_INLINE int eligible(const ll_tree *t, const uint64_t *leaf, int wide, uint32_t slot)
{
    if (!wide)
        return leaf[slot] != LL_TREE_EMPTY;
    return !ll_key_eq(ll_tree_wide_key(t, slot), LL_KEY_INF);
}

/* One slot of the several-weights loop: skipped by the bound, or its L
 * computed and compared exactly with the best (L / w, then the greater x,
 * then the earlier slot: i comes after the best). */
struct best {
    int64_t slot;
    uint64_t x, w, l;
    uint64_t above;  /* skip_above(l, w) */
};

static LL_ALWAYS_INLINE void weighted_step(struct best *b, size_t i, uint64_t x, uint64_t g, uint32_t w)
{
    if (bound_skips(g, w, b->above))
        return;
    uint64_t l = neg_log2(x);
    /* L / w against best_L / best_w, exactly: both sides < 2^26 * 100 */
    uint64_t lhs = l * b->w, rhs = b->l * w;
    if (lhs < rhs || (lhs == rhs && x > b->x)) {
        b->slot = (int64_t)i;
        b->x = x;
        b->w = w;
        b->l = l;
        b->above = skip_above(l, w);
    }
}

/* The pick's second part: several weights, from slot i on, the best so
 * far given. The least L / w, then the greatest x, then the first. */
static LL_ALWAYS_INLINE int64_t several_weights(const ll_vserver *vs, uint64_t key_head, const uint64_t *name_hash,
                                                int named, int wide, size_t i, int64_t best, uint64_t best_x,
                                                uint64_t best_w, const int lanes)
{
    const ll_tree *t = &vs->tree;
    const uint64_t *leaf = t->cell + t->P;
    const ll_svc *svc = vs->svc;
    const size_t n = vs->n_slots;
    struct best b = { best, best_x, best_w, neg_log2(best_x), 0 };
    b.above = skip_above(b.l, b.w);
    if (named && !wide) {
        for (; i + (size_t)lanes <= n; i += (size_t)lanes) {
            uint64_t x[4], g[4];
            score_lanes(key_head, name_hash, i, x, g, lanes);
            /* written out: a loop over k keeps x[] in memory when the step is this long */
            if (leaf[i] != LL_TREE_EMPTY)
                weighted_step(&b, i, x[0], g[0], svc[i].weight);
            if (leaf[i + 1] != LL_TREE_EMPTY)
                weighted_step(&b, i + 1, x[1], g[1], svc[i + 1].weight);
            if (lanes == 4 && leaf[i + 2] != LL_TREE_EMPTY)
                weighted_step(&b, i + 2, x[2], g[2], svc[i + 2].weight);
            if (lanes == 4 && leaf[i + 3] != LL_TREE_EMPTY)
                weighted_step(&b, i + 3, x[3], g[3], svc[i + 3].weight);
        }
    }
    for (; i < n; i++)
        if (eligible(t, leaf, wide, (uint32_t)i))
        {
            uint64_t x = score(key_head, name_hash, named, i);
            weighted_step(&b, i, x, ~x >> 33, svc[i].weight);
        }
    return b.slot;
}

/* The greatest x of slot i and the best so far, the first on a tie: by
 * selects, not branches. */
static LL_ALWAYS_INLINE void equal_step(size_t *best, uint64_t *best_x, size_t i, uint64_t x)
{
    int more = x > *best_x;
    *best = more ? i : *best;
    *best_x = more ? x : *best_x;
}

/* The usual case, the packed tree and name hashes set, from `first`, the
 * first eligible slot, `lanes` slots a turn (score_lanes). One weight among the
 * bound services: the greatest x, reading no weight. Else the same while
 * the eligible weights equal the first one's, then several_weights. */
static LL_ALWAYS_INLINE int64_t packed_pick(const ll_vserver *vs, uint64_t key_head, uint32_t first, const int lanes)
{
    const uint64_t *leaf = vs->tree.cell + vs->tree.P;
    const uint64_t *name_hash = ll_col_name_hash(vs);
    const ll_svc *svc = vs->svc;
    const size_t n = vs->n_slots;
    uint64_t best_x = ll_xxh64_avalanche_tail(key_head ^ name_hash[first]), x[4], g[4];
    size_t best = first, i = (size_t)first + 1;
    if (vs->n_weights == 1) {
        for (; i + (size_t)lanes <= n; i += (size_t)lanes) {
            score_lanes(key_head, name_hash, i, x, g, lanes);
            if (leaf[i] != LL_TREE_EMPTY)
                equal_step(&best, &best_x, i, x[0]);
            if (leaf[i + 1] != LL_TREE_EMPTY)
                equal_step(&best, &best_x, i + 1, x[1]);
            if (lanes == 4 && leaf[i + 2] != LL_TREE_EMPTY)
                equal_step(&best, &best_x, i + 2, x[2]);
            if (lanes == 4 && leaf[i + 3] != LL_TREE_EMPTY)
                equal_step(&best, &best_x, i + 3, x[3]);
        }
        for (; i < n; i++)
            if (leaf[i] != LL_TREE_EMPTY)
                equal_step(&best, &best_x, i, ll_xxh64_avalanche_tail(key_head ^ name_hash[i]));
        return (int64_t)best;
    }
    const uint8_t w0 = svc[first].weight;
    for (; i + (size_t)lanes <= n; i += (size_t)lanes) {
        score_lanes(key_head, name_hash, i, x, g, lanes);
        for (int k = 0; k < lanes; k++) {
            if (leaf[i + k] == LL_TREE_EMPTY)
                continue;
            if (svc[i + k].weight != w0) {
                i += (size_t)k;
                goto several;
            }
            equal_step(&best, &best_x, i + k, x[k]);
        }
    }
    for (; i < n; i++) {
        if (leaf[i] == LL_TREE_EMPTY)
            continue;
        if (svc[i].weight != w0)
            goto several;
        equal_step(&best, &best_x, i, ll_xxh64_avalanche_tail(key_head ^ name_hash[i]));
    }
    return (int64_t)best;
several:
    return several_weights(vs, key_head, name_hash, 1, 0, i, (int64_t)best, best_x, w0, lanes);
}

/* packed_pick built three times on x86-64 with GCC or Clang: as is (SSE2),
 * for AVX2 (four lanes a register, its multiplies still of 32-bit ones)
 * and for AVX-512DQ/VL (vpmullq: one instruction a multiply), the build
 * chosen at run time, so one binary serves every processor with the same
 * C and the same integers. On this project's test machine (AMD EPYC,
 * Zen 4) the C pick at n = 64, equal weights, takes 77 ns as SSE2, 62 as
 * AVX2 and 53 as AVX-512. */
static int forced_path;  /* ll_hash_force_path: 0, the processor's best */

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
static int has_avx512(void) { return __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"); }
static int has_avx2(void) { return __builtin_cpu_supports("avx2"); }

static int64_t packed_pick_sse2(const ll_vserver *vs, uint64_t key_head, uint32_t first)
{
    return packed_pick(vs, key_head, first, 2);
}

__attribute__((target("avx2")))
static int64_t packed_pick_avx2(const ll_vserver *vs, uint64_t key_head, uint32_t first)
{
    return packed_pick(vs, key_head, first, 4);
}

__attribute__((target("avx2,avx512f,avx512dq,avx512vl")))
static int64_t packed_pick_avx512(const ll_vserver *vs, uint64_t key_head, uint32_t first)
{
    return packed_pick(vs, key_head, first, 2);  /* measured: two lanes a register beat four here */
}

static int64_t packed_pick_dispatch(const ll_vserver *vs, uint64_t key_head, uint32_t first)
{
    if (forced_path == 0 ? has_avx512() : forced_path == 3)
        return packed_pick_avx512(vs, key_head, first);
    if (forced_path == 0 ? has_avx2() : forced_path == 2)
        return packed_pick_avx2(vs, key_head, first);
    return packed_pick_sse2(vs, key_head, first);
}

int ll_hash_force_path(int path)
{
    if (path < 0 || path > 3)
        return -EINVAL;
    if ((path == 2 && !has_avx2()) || (path == 3 && !has_avx512()))
        return -ENOTSUP;
    forced_path = path;
    return 0;
}
#else
static int64_t packed_pick_dispatch(const ll_vserver *vs, uint64_t key_head, uint32_t first)
{
    return packed_pick(vs, key_head, first, 2);
}

int ll_hash_force_path(int path)
{
    if (path < 0 || path > 3)
        return -EINVAL;
    if (path > 1)
        return -ENOTSUP;
    forced_path = path;
    return 0;
}
#endif

/* The same pick on the wide tree, or without name hashes (`name_hash`
 * NULL: every x is the same), one slot a turn. */
static LL_ALWAYS_INLINE int64_t general_pick(const ll_vserver *vs, uint64_t key_head, const uint64_t *name_hash,
                                             int named, int wide, uint32_t first)
{
    const ll_tree *t = &vs->tree;
    const uint64_t *leaf = t->cell + t->P;
    const ll_svc *svc = vs->svc;
    const size_t n = vs->n_slots;
    const uint32_t w0 = svc[first].weight;
    uint64_t best_x = score(key_head, name_hash, named, first);
    int64_t best = first;
    for (size_t i = (size_t)first + 1; i < n; i++) {
        if (!eligible(t, leaf, wide, (uint32_t)i))
            continue;
        if (svc[i].weight != w0)
            return several_weights(vs, key_head, name_hash, named, wide, i, best, best_x, w0, 2);
        uint64_t x = score(key_head, name_hash, named, i);
        best = x > best_x ? (int64_t)i : best;
        best_x = x > best_x ? x : best_x;
    }
    return best;
}

int64_t ll_hash_pick(const ll_vserver *vs, uint64_t key_hash)
{
    const ll_tree *t = &vs->tree;
    if (ll_key_eq(ll_tree_min_key(t), LL_KEY_INF))
        return -ENOENT;
    const uint64_t *name_hash = ll_col_name_hash(vs);
    int wide = t->wide;
    const uint64_t *leaf = t->cell + t->P;
    uint32_t first = 0;
    while (!eligible(t, leaf, wide, first))  /* one is eligible: the minimum is finite */
        first++;
    uint64_t key_head = ll_xxh64_avalanche_head(key_hash);
    if (!wide && name_hash)
        return packed_pick_dispatch(vs, key_head, first);
    if (name_hash)
        return general_pick(vs, key_head, name_hash, 1, 1, first);
    return general_pick(vs, key_head, NULL, 0, wide, first);
}
