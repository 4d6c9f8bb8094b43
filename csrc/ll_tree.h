/*
 * ll_tree.h - tournament tree over slots (internal).
 *
 * Why a tournament tree and not a heap: the tie rule of the vendor is
 * "the first service with the lowest score *after the service selected
 * last*, in cyclic bind order" (docs/semantics.md). A heap keyed on
 * (score, sequence) can only give "least recently selected", which sends
 * Request-6 of the least-bandwidth table to the wrong service. A tree whose
 * leaves are the slots in bind order and whose inner nodes hold the
 * leftmost arg-min of their range answers "first slot >= start with key <=
 * threshold" with one climb and one descent: O(log n) whatever the ties,
 * and all-tied is the cheap case (the climb stops at the first subtree
 * whose minimum equals the global one, and its arg-min is the answer).
 *
 * Layout: P leaves (a power of two); node[1..2P-1] hold slot numbers (4
 * bytes each, not keys: 8 bytes a leaf in all). Leaf i is node P+i and
 * holds i, so reading a node's arg-min never branches on its level.
 * key[] has P entries; unused slots hold LL_KEY_INF.
 *
 * Costs: update O(log P), build O(P), first O(log P). No allocation.
 */
#ifndef LL_TREE_H
#define LL_TREE_H

#include <stdint.h>
#include "ll_key.h"

typedef struct {
    uint32_t P;       /* leaves: a power of two >= 1 */
    uint32_t *node;   /* 2P entries; node[0] unused  */
    ll_key *key;      /* P entries                    */
} ll_tree;

/* Slot holding the minimum of node i's range (leftmost on ties). */
static inline uint32_t ll_tree_arg(const ll_tree *t, uint32_t i)
{
    return t->node[i];
}

/* Slot with the lowest key (leftmost on ties): the root's arg-min. */
static inline uint32_t ll_tree_min_slot(const ll_tree *t) { return ll_tree_arg(t, 1); }

/* Call after key[slot] changed: fixes the path from that leaf to the root.
 * The winner climbing the path stays in registers; at each level it meets
 * the sibling subtree's winner (ties go to the left, i.e. bind order).
 * It stops early where a node keeps a winner other than `slot`: that
 * subtree's minimum (slot and key) is unchanged, so are its ancestors. */
static inline void ll_tree_update(ll_tree *t, uint32_t slot)
{
    uint32_t *node = t->node;
    const ll_key *key = t->key;
    uint32_t win = slot;
    ll_key kw = key[slot];
    for (uint32_t i = t->P + slot; i > 1; i >>= 1) {
        uint32_t other = node[i ^ 1];
        ll_key ko = key[other];
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

/* Sets the leaves and recomputes every inner node from the keys. O(P). */
void ll_tree_build(ll_tree *t);

/* First slot >= start whose key <= thr, or -1 if there is none. */
int64_t ll_tree_first(const ll_tree *t, uint32_t start, ll_key thr);

#endif /* LL_TREE_H */
