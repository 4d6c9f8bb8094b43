/*
 * ll_tree.h - tournament tree over slots (internal).
 *
 * Why a tournament tree and not a heap: the tie rule of the vendor is
 * "the first service with the lowest score *after the service selected
 * last*, in cyclic bind order" (docs/semantics.md). A heap keyed on
 * (score, sequence) can only give "least recently selected", which sends
 * Request-6 of the least-bandwidth table to the wrong service. A tree whose
 * leaves are the slots in bind order and whose inner nodes hold the
 * leftmost minimum of their range answers "first slot >= start with key <=
 * threshold" with one climb and one descent: O(log n) whatever the ties,
 * and all-tied is the cheap case (the climb stops at the first subtree
 * whose minimum equals the threshold, and its holder is the answer).
 *
 * Two layouts, the same answers:
 * - packed (the usual one): node i is one 64-bit word, key << bits | slot,
 *   the minimum of its range. Comparing two words compares keys, then
 *   slots, so the smaller word is the leftmost minimum: a level of an
 *   update is one load, one compare, one store, with no lookup. Used while
 *   every key is below 2^(64 - bits) - 1 (bits = log2 P): a connection
 *   count always is at P <= 2^18, a byte count over the window until
 *   petabytes per weight unit.
 * - wide: the exact 78-bit keys (ll_key.h) per slot, and per node the slot
 *   holding its range's minimum (leftmost on ties). Taken, in O(P), when a
 *   key does not pack; a rebuild (ll_tree_build) returns to packed when
 *   every key packs again.
 * Both live in the same two arrays, always allocated: cell[2P] 64-bit
 * words (packed: the nodes; wide: each slot's key as lo, hi) and arg[2P]
 * 32-bit slots (wide: the nodes' holders; packed: scratch for a switch).
 * Every access to cell is as uint64_t, whatever the layout. 24 bytes a
 * leaf either way.
 *
 * Costs: set O(log P) (O(P) once when it switches to wide), build O(P),
 * first O(log P). No allocation.
 */
#ifndef LL_TREE_H
#define LL_TREE_H

#include <stdint.h>
#include "ll_key.h"

#define LL_TREE_EMPTY UINT64_MAX  /* packed: a leaf whose key is LL_KEY_INF */

typedef struct {
    uint32_t P;        /* leaves: a power of two >= 1       */
    uint32_t bits;     /* log2(P): the slot's bits in a packed node */
    int wide;          /* the layout in use                  */
    uint64_t key_max;  /* packed: the largest key that packs */
    uint64_t *cell;    /* [2P] see above                     */
    uint32_t *arg;     /* [2P] see above                     */
} ll_tree;

/* Takes the two arrays (cell: 2P words, arg: 2P slots) for P leaves, all
 * empty (LL_KEY_INF), packed. */
void ll_tree_init(ll_tree *t, uint32_t P, uint64_t *cell, uint32_t *arg);

/* ---- wide layout helpers ------------------------------------------------ */

static inline ll_key ll_tree_wide_key(const ll_tree *t, uint32_t slot)
{
    return ll_key_from_parts(t->cell[2 * (uint64_t)slot + 1], t->cell[2 * (uint64_t)slot]);
}

/* ---- reading ------------------------------------------------------------- */

static inline ll_key ll_tree_key(const ll_tree *t, uint32_t slot)
{
    if (t->wide)
        return ll_tree_wide_key(t, slot);
    uint64_t v = t->cell[t->P + slot];
    return v == LL_TREE_EMPTY ? LL_KEY_INF : ll_key_small(v >> t->bits);
}

/* Slot with the lowest key (leftmost on ties). */
static inline uint32_t ll_tree_min_slot(const ll_tree *t)
{
    if (t->wide)
        return t->arg[1];
    return (uint32_t)(t->cell[1] & (((uint64_t)1 << t->bits) - 1));
}

/* The lowest key. */
static inline ll_key ll_tree_min_key(const ll_tree *t)
{
    if (t->wide)
        return ll_tree_wide_key(t, t->arg[1]);
    uint64_t v = t->cell[1];
    return v == LL_TREE_EMPTY ? LL_KEY_INF : ll_key_small(v >> t->bits);
}

/* ---- writing ------------------------------------------------------------- */

/* Switches to the wide layout (keys unchanged). O(P). */
void ll_tree_widen(ll_tree *t);

/* The packed word of key k at `slot`, or 0 with *fits = 0 when it does not pack. */
static inline uint64_t ll_tree_pack(const ll_tree *t, uint32_t slot, ll_key k, int *fits)
{
    if (ll_key_eq(k, LL_KEY_INF)) {
        *fits = 1;
        return LL_TREE_EMPTY;
    }
    *fits = ll_key_fits64(k) && ll_key_low(k) <= t->key_max;
    return ll_key_low(k) << t->bits | slot;
}

/* Packed: fixes the path above a leaf whose word changed to v. The running
 * minimum stays in a register; it stops where a node already holds the new
 * minimum of its range (then so do its ancestors). */
static inline void ll_tree_packed_update(ll_tree *t, uint32_t slot, uint64_t v)
{
    uint64_t *node = t->cell;
    uint32_t i = t->P + slot;
    node[i] = v;
    for (; i > 1; i >>= 1) {
        uint64_t sib = node[i ^ 1];
        v = sib < v ? sib : v;
        if (node[i >> 1] == v)
            return;
        node[i >> 1] = v;
    }
}

/* Wide: fixes the path from a leaf whose key changed. The winner climbing
 * the path stays in registers; at each level it meets the sibling subtree's
 * winner (ties go to the left, i.e. bind order). It stops early where a
 * node keeps a winner other than `slot`: that subtree's minimum (slot and
 * key) is unchanged, so are its ancestors. */
static inline void ll_tree_wide_update(ll_tree *t, uint32_t slot)
{
    uint32_t *node = t->arg;
    uint32_t win = slot;
    ll_key kw = ll_tree_wide_key(t, slot);
    for (uint32_t i = t->P + slot; i > 1; i >>= 1) {
        uint32_t other = node[i ^ 1];
        ll_key ko = ll_tree_wide_key(t, other);
        /* the sibling wins if lower, or equal and on the left (i odd): in
         * bitwise form, since the path's shape is data the predictor can't guess */
        int take = ll_key_lt(ko, kw) | ((int)(i & 1) & ll_key_eq(ko, kw));
        win = take ? other : win;
        kw = take ? ko : kw;
        if (node[i >> 1] == win && win != slot)
            return;
        node[i >> 1] = win;
    }
}

/* Sets slot's key and fixes the tree. */
static inline void ll_tree_set(ll_tree *t, uint32_t slot, ll_key k)
{
    if (!t->wide) {
        int fits;
        uint64_t v = ll_tree_pack(t, slot, k, &fits);
        if (fits) {
            ll_tree_packed_update(t, slot, v);
            return;
        }
        ll_tree_widen(t);
    }
    t->cell[2 * (uint64_t)slot] = ll_key_low(k);
    t->cell[2 * (uint64_t)slot + 1] = ll_key_high(k);
    ll_tree_wide_update(t, slot);
}

/* Sets slot's key without fixing the tree: call ll_tree_build() after a
 * batch of these. */
void ll_tree_load(ll_tree *t, uint32_t slot, ll_key k);

/* Recomputes every inner node from the leaves, packed again if every key
 * packs. O(P). */
void ll_tree_build(ll_tree *t);

/* First slot >= start whose key <= thr, or -1 if there is none. */
int64_t ll_tree_first(const ll_tree *t, uint32_t start, ll_key thr);

/* Packed: the first of the ranges covering [start, P), left to right, whose
 * word is below `limit` (a key below limit >> bits), as a node index; 0 when
 * none is. A right child's parent adds nothing new, so the climb goes up
 * past right children and then on to the right sibling. */
static inline uint32_t ll_tree_packed_climb(const ll_tree *t, uint32_t start, uint64_t limit)
{
    if (start >= t->P)
        return 0;
    for (uint32_t i = t->P + start;; i++) {
        if (t->cell[i] < limit)
            return i;
        while (i & 1)
            i >>= 1;
        if (i == 0)
            return 0;
    }
}

/* The vendor's tie rule among the lowest keys: the first slot >= start
 * holding the minimum, else (wrapping) the leftmost. The minimum must be
 * finite. Packed, a range whose word is below `limit` holds the minimum and
 * its word names the range's leftmost holder: the climb alone answers. */
static inline uint32_t ll_tree_pick_min(const ll_tree *t, uint32_t start)
{
    if (t->wide) {
        int64_t slot = ll_tree_first(t, start, ll_tree_min_key(t));
        return slot >= 0 ? (uint32_t)slot : ll_tree_min_slot(t);
    }
    const uint64_t *node = t->cell;
    uint64_t limit = ((node[1] >> t->bits) + 1) << t->bits, mask = ((uint64_t)1 << t->bits) - 1;
    uint32_t i = ll_tree_packed_climb(t, start, limit);
    return (uint32_t)(node[i ? i : 1] & mask);
}

#endif /* LL_TREE_H */
