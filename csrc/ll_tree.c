/* ll_tree.c - tournament tree over slots; see ll_tree.h for the why. */
#include "ll_tree.h"

void ll_tree_init(ll_tree *t, uint32_t P, uint64_t *cell, uint32_t *arg)
{
    t->P = P;
    for (t->bits = 0; ((uint64_t)1 << t->bits) < P; t->bits++)
        ;
    t->wide = 0;
    t->key_max = (UINT64_MAX >> t->bits) - 1;  /* all ones is LL_TREE_EMPTY */
    t->cell = cell;
    t->arg = arg;
    for (uint64_t i = 0; i < 2 * (uint64_t)P; i++)
        cell[i] = LL_TREE_EMPTY;
}

static void build_wide(ll_tree *t)
{
    for (uint32_t i = 0; i < t->P; i++)
        t->arg[t->P + i] = i;
    for (uint32_t i = t->P - 1; i >= 1; i--) {
        uint32_t l = t->arg[2 * i], r = t->arg[2 * i + 1];
        t->arg[i] = ll_key_lt(ll_tree_wide_key(t, r), ll_tree_wide_key(t, l)) ? r : l;
    }
}

static void build_packed(ll_tree *t)
{
    uint64_t *node = t->cell;
    for (uint32_t i = t->P - 1; i >= 1; i--)
        node[i] = node[2 * i] < node[2 * i + 1] ? node[2 * i] : node[2 * i + 1];
}

/* The switches go through arg as scratch (a 64-bit word as two 32-bit
 * halves, so every array is only ever accessed as its own type): the
 * packed leaves sit where the wide keys go, and the other way round. */
static void scratch_put(ll_tree *t, uint32_t i, uint64_t w)
{
    t->arg[2 * (uint64_t)i] = (uint32_t)w;
    t->arg[2 * (uint64_t)i + 1] = (uint32_t)(w >> 32);
}

static uint64_t scratch_get(const ll_tree *t, uint32_t i)
{
    return t->arg[2 * (uint64_t)i] | (uint64_t)t->arg[2 * (uint64_t)i + 1] << 32;
}

void ll_tree_widen(ll_tree *t)
{
    uint32_t P = t->P;
    for (uint32_t i = 0; i < P; i++) {
        uint64_t v = t->cell[P + i];
        scratch_put(t, i, v == LL_TREE_EMPTY ? v : v >> t->bits);
    }
    for (uint32_t i = 0; i < P; i++) {
        uint64_t k = scratch_get(t, i);
        t->cell[2 * (uint64_t)i] = k;                               /* lo */
        t->cell[2 * (uint64_t)i + 1] = k == LL_TREE_EMPTY ? k : 0;  /* hi: LL_KEY_INF is all ones */
    }
    t->wide = 1;
    build_wide(t);
}

void ll_tree_load(ll_tree *t, uint32_t slot, ll_key k)
{
    if (!t->wide) {
        int fits;
        uint64_t v = ll_tree_pack(t, slot, k, &fits);
        if (fits) {
            t->cell[t->P + slot] = v;
            return;
        }
        ll_tree_widen(t);
    }
    t->cell[2 * (uint64_t)slot] = ll_key_low(k);
    t->cell[2 * (uint64_t)slot + 1] = ll_key_high(k);
}

void ll_tree_build(ll_tree *t)
{
    if (t->wide) {
        uint32_t P = t->P;
        int fits = 1;
        for (uint32_t i = 0; i < P && fits; i++)
            scratch_put(t, i, ll_tree_pack(t, i, ll_tree_wide_key(t, i), &fits));
        if (!fits) {
            build_wide(t);
            return;
        }
        for (uint32_t i = 0; i < P; i++)  /* every key packs: back to the packed layout */
            t->cell[P + i] = scratch_get(t, i);
        t->wide = 0;
    }
    build_packed(t);
}

static int64_t first_wide(const ll_tree *t, uint32_t start, ll_key thr)
{
    /* Climb: visit, left to right, the maximal subtrees that cover
     * [start, P) until one holds a key <= thr. */
    uint32_t i = t->P + start;
    while (!ll_key_le(ll_tree_wide_key(t, t->arg[i]), thr)) {
        while (i & 1)       /* a right child: its parent adds nothing new */
            i >>= 1;
        if (i == 0)         /* climbed past the root: nothing to the right */
            return -1;
        i++;                /* the right sibling covers the next range */
    }
    /* Descend to the leftmost leaf <= thr. If the subtree's minimum equals
     * thr, its leftmost holder is that leaf (the all-tied fast path). */
    for (;;) {
        uint32_t a = t->arg[i];
        if (i >= t->P || ll_key_eq(ll_tree_wide_key(t, a), thr))  /* a leaf, or all-tied */
            return a;
        i *= 2;
        if (!ll_key_le(ll_tree_wide_key(t, t->arg[i]), thr))
            i++;
    }
}

int64_t ll_tree_first(const ll_tree *t, uint32_t start, ll_key thr)
{
    if (start >= t->P)
        return -1;
    if (t->wide)
        return first_wide(t, start, thr);
    /* Packed: a word below `limit` holds a key <= thr. A threshold above
     * every packable key admits every non-empty leaf. */
    const uint64_t *node = t->cell;
    int exact = ll_key_fits64(thr) && ll_key_low(thr) <= t->key_max;
    uint64_t tk = exact ? ll_key_low(thr) : t->key_max;
    uint64_t limit = (tk + 1) << t->bits, mask = ((uint64_t)1 << t->bits) - 1;
    uint32_t i = ll_tree_packed_climb(t, start, limit);
    if (i == 0)
        return -1;
    for (;;) {
        uint64_t v = node[i];
        if (i >= t->P || (exact && v >> t->bits == tk))  /* a leaf, or all-tied */
            return (int64_t)(v & mask);
        i *= 2;
        if (node[i] >= limit)
            i++;
    }
}
