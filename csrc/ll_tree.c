/* ll_tree.c - tournament tree over slots; see ll_tree.h for the why. */
#include "ll_tree.h"

void ll_tree_build(ll_tree *t)
{
    for (uint32_t i = 0; i < t->P; i++)
        t->node[t->P + i] = i;
    for (uint32_t i = t->P - 1; i >= 1; i--) {
        uint32_t l = ll_tree_arg(t, 2 * i), r = ll_tree_arg(t, 2 * i + 1);
        t->node[i] = ll_key_lt(t->key[r], t->key[l]) ? r : l;
    }
}

int64_t ll_tree_first(const ll_tree *t, uint32_t start, ll_key thr)
{
    if (start >= t->P)
        return -1;
    /* Climb: visit, left to right, the maximal subtrees that cover
     * [start, P) until one holds a key <= thr. */
    uint32_t i = t->P + start;
    while (!ll_key_le(t->key[ll_tree_arg(t, i)], thr)) {
        while (i & 1)       /* a right child: its parent adds nothing new */
            i >>= 1;
        if (i == 0)         /* climbed past the root: nothing to the right */
            return -1;
        i++;                /* the right sibling covers the next range */
    }
    /* Descend to the leftmost leaf <= thr. If the subtree's minimum equals
     * thr, its leftmost arg-min is that leaf (the all-tied fast path). */
    for (;;) {
        uint32_t a = ll_tree_arg(t, i);
        if (i >= t->P || ll_key_eq(t->key[a], thr))  /* a leaf, or all-tied */
            return a;
        i *= 2;
        if (!ll_key_le(t->key[ll_tree_arg(t, i)], thr))
            i++;
    }
}
