/* ll_pending.c - the replay's pending completions; see ll_pending.h for the why. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "ll_pending.h"

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#endif

/* Index of the lowest set bit of x (x > 0). */
static inline unsigned lowest_bit64(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctzll(x);
#elif defined(_MSC_VER) && defined(_M_X64)
    unsigned long i;
    _BitScanForward64(&i, x);
    return (unsigned)i;
#else
    unsigned n = 0;
    while (!(x & 1u)) {
        x >>= 1;
        n++;
    }
    return n;
#endif
}

static inline int key_less(const ll_pending *a, const ll_pending *b)
{
    return a->order < b->order || (a->order == b->order && a->req < b->req);
}

int ll_pending_init(ll_pending_queue *q, double origin, int scale_exp, unsigned wheel_bits)
{
    uint32_t w = (uint32_t)1 << wheel_bits;
    q->pool = NULL;
    q->cap = q->len = 0;
    q->free_head = LL_PENDING_NIL;
    q->origin = origin;
    q->scale = ldexp(1.0, scale_exp);
    q->wheel_mask = w - 1;
    q->base = 0;
    q->min_slot = -1;
    q->heap = NULL;
    q->heap_len = 0;
    q->slot_head = malloc(w * sizeof *q->slot_head);
    q->slot_used = calloc(w / 64, sizeof *q->slot_used);
    if (!q->slot_head || !q->slot_used) {
        ll_pending_free(q);
        return -ENOMEM;
    }
    for (uint32_t s = 0; s < w; s++)
        q->slot_head[s] = LL_PENDING_NIL;
    return 0;
}

/* Slots about as wide as the mean gap between arrivals (a power of two, so
 * slots are exact), so a slot holds about one completion, and as many
 * slots as requests up to 2^16 (256 KB of list heads), which spans 2^16
 * mean gaps: completions further ahead go to the overflow heap. */
int ll_pending_init_for(ll_pending_queue *q, const double *arrival, size_t n)
{
    int scale_exp = 20;  /* a degenerate trace (one request, or all at once): 1 us slots */
    double origin = n ? arrival[0] : 0.0;
    if (n >= 2) {
        double gap = (arrival[n - 1] - origin) / (double)n;
        int e;
        if (gap > 0.0 && frexp(gap, &e) != 0.0)  /* gap = m * 2^e, m in [0.5, 1) */
            scale_exp = 1 - e < -60 ? -60 : 1 - e > 60 ? 60 : 1 - e;
    }
    unsigned bits = 6;
    while (bits < 16 && ((size_t)1 << bits) < n)
        bits++;
    return ll_pending_init(q, origin, scale_exp, bits);
}

void ll_pending_free(ll_pending_queue *q)
{
    free(q->pool);
    free(q->heap);
    free(q->slot_head);
    free(q->slot_used);
    q->pool = NULL;
    q->heap = NULL;
    q->slot_head = NULL;
    q->slot_used = NULL;
    q->cap = q->len = q->heap_len = 0;
}

int ll_pending_reserve(ll_pending_queue *q, size_t need)
{
    if (need <= q->cap)
        return 0;
    if (need >= LL_PENDING_NIL)  /* indices are 32-bit, NIL excluded */
        return -ENOMEM;
    size_t cap = q->cap ? q->cap : 256;
    while (cap < need)
        cap *= 2;
    if (cap >= LL_PENDING_NIL)
        cap = LL_PENDING_NIL - 1;
    if (cap > SIZE_MAX / sizeof(ll_pending))
        return -ENOMEM;
    /* the heap first: if the pool then fails, a bigger heap is harmless */
    uint32_t *heap = realloc(q->heap, cap * sizeof *heap);
    if (!heap)
        return -ENOMEM;
    q->heap = heap;
    ll_pending *pool = realloc(q->pool, cap * sizeof *pool);
    if (!pool)
        return -ENOMEM;
    for (size_t j = cap; j-- > q->cap;)  /* new entries join the free list */
        pool[j].next = q->free_head, q->free_head = (uint32_t)j;
    q->pool = pool;
    q->cap = (uint32_t)cap;
    return 0;
}

/* ---- the overflow heap (of pool indices) ------------------------------ */

static inline int idx_less(const ll_pending_queue *q, uint32_t a, uint32_t b)
{
    return key_less(&q->pool[a], &q->pool[b]);
}

static void heap_push(ll_pending_queue *q, uint32_t j)
{
    uint32_t i = q->heap_len++;
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!idx_less(q, j, q->heap[parent]))
            break;
        q->heap[i] = q->heap[parent];
        i = parent;
    }
    q->heap[i] = j;
}

static void heap_pop(ll_pending_queue *q)
{
    uint32_t last = q->heap[--q->heap_len], n = q->heap_len, i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && idx_less(q, q->heap[c + 1], q->heap[c]))
            c++;
        if (!idx_less(q, q->heap[c], last))
            break;
        q->heap[i] = q->heap[c];
        i = c;
    }
    if (n)
        q->heap[i] = last;
}

/* ---- the wheel -------------------------------------------------------- */

/* The slot of time t if the wheel can hold it, else -1. */
static inline int64_t wheel_slot(const ll_pending_queue *q, double t)
{
    double x = (t - q->origin) * q->scale;
    /* compared as doubles first: x may be far beyond int64 */
    if (!(x >= (double)q->base && x < (double)(q->base + (int64_t)q->wheel_mask + 1)))
        return -1;
    int64_t s = (int64_t)x;
    /* (double)base may round; the integer checks are the exact ones */
    return s >= q->base && s <= q->base + (int64_t)q->wheel_mask ? s : -1;
}

uint32_t ll_pending_push(ll_pending_queue *q, double time, uint64_t order, uint32_t req, uint32_t svc)
{
    uint32_t j = q->free_head;
    ll_pending *e = &q->pool[j];
    q->free_head = e->next;
    e->order = order;
    e->req = req;
    e->svc = svc;
    e->id = j;
    q->len++;
    int64_t s = wheel_slot(q, time);
    if (s < 0) {
        heap_push(q, j);
        return j;
    }
    uint32_t w = (uint32_t)s & q->wheel_mask;
    uint32_t *link = &q->slot_head[w];  /* sorted insert: a slot holds a few */
    while (*link != LL_PENDING_NIL && key_less(&q->pool[*link], e))
        link = &q->pool[*link].next;
    e->next = *link;
    *link = j;
    q->slot_used[w >> 6] |= (uint64_t)1 << (w & 63);
    if (q->min_slot >= 0 && s < q->min_slot)
        q->min_slot = s;
    return j;
}

/* The lowest occupied slot of the wheel, or -1 if it is empty. */
static int64_t wheel_first(ll_pending_queue *q)
{
    if (q->min_slot >= 0)
        return q->min_slot;
    if (q->len == q->heap_len)
        return -1;
    /* the bitmap from base's position on, wrapping once: entries lie in
     * [base, base + W), so the first set bit met is the lowest slot */
    uint32_t start = (uint32_t)q->base & q->wheel_mask, words = (q->wheel_mask >> 6) + 1;
    uint64_t bits = q->slot_used[start >> 6] >> (start & 63);
    uint32_t d;
    if (bits) {
        d = lowest_bit64(bits);
    } else {
        uint32_t word = start >> 6;
        do
            word = (word + 1) & (words - 1);
        while (!q->slot_used[word]);  /* the wheel holds an entry: it ends */
        d = ((word << 6 | lowest_bit64(q->slot_used[word])) - start) & q->wheel_mask;
    }
    q->min_slot = q->base + d;
    return q->min_slot;
}

const ll_pending *ll_pending_peek(ll_pending_queue *q)
{
    int64_t s = wheel_first(q);
    const ll_pending *w = s >= 0 ? &q->pool[q->slot_head[(uint32_t)s & q->wheel_mask]] : NULL;
    const ll_pending *h = q->heap_len ? &q->pool[q->heap[0]] : NULL;
    if (!w)
        return h;
    return h && key_less(h, w) ? h : w;
}

ll_pending ll_pending_pop(ll_pending_queue *q)
{
    const ll_pending *first = ll_pending_peek(q);
    uint32_t j;
    if (q->heap_len && first == &q->pool[q->heap[0]]) {
        j = q->heap[0];
        heap_pop(q);
        /* What the wheel holds is no earlier, so its base may move up to
         * this time's slot: fewer of the coming pushes overflow. */
        double x = (ll_order_time(q->pool[j].order) - q->origin) * q->scale;
        if (x > (double)q->base && x < 0x1p62)
            q->base = (int64_t)x;
    } else {
        int64_t s = q->min_slot;
        uint32_t w = (uint32_t)s & q->wheel_mask;
        j = q->slot_head[w];
        q->slot_head[w] = q->pool[j].next;
        if (q->slot_head[w] == LL_PENDING_NIL) {
            q->slot_used[w >> 6] &= ~((uint64_t)1 << (w & 63));
            q->min_slot = -1;
        }
        q->base = s;  /* what is left is no earlier than the slot popped */
    }
    ll_pending top = q->pool[j];
    q->pool[j].next = q->free_head;
    q->free_head = j;
    q->len--;
    return top;
}

void ll_pending_forget(ll_pending_queue *q, uint32_t svc)
{
    uint32_t W = q->wheel_mask + 1;
    for (uint32_t w = 0; w < W; w++) {
        uint32_t *link = &q->slot_head[w];
        while (*link != LL_PENDING_NIL) {
            uint32_t j = *link;
            if (q->pool[j].svc == svc) {
                *link = q->pool[j].next;
                q->pool[j].next = q->free_head;
                q->free_head = j;
                q->len--;
            } else {
                link = &q->pool[j].next;
            }
        }
        if (q->slot_head[w] == LL_PENDING_NIL)
            q->slot_used[w >> 6] &= ~((uint64_t)1 << (w & 63));
    }
    q->min_slot = -1;
    uint32_t kept = 0, n = q->heap_len;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = q->heap[i];
        if (q->pool[j].svc == svc) {
            q->pool[j].next = q->free_head;
            q->free_head = j;
            q->len--;
        } else {
            q->heap[kept++] = j;
        }
    }
    q->heap_len = 0;
    for (uint32_t i = 0; i < kept; i++)  /* re-heap: rare (unbind events) */
        heap_push(q, q->heap[i]);
}
