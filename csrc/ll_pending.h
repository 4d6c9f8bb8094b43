/*
 * ll_pending.h - the replay's pending completions (internal): a timing
 * wheel, exact in order, with a binary heap for what does not fit.
 *
 * Why not a binary heap alone: a replay at n = 64 keeps thousands of
 * completions open, and a push plus a pop of a binary heap over them cost
 * ~550 instructions a request, a third of the whole batch path. A wheel
 * costs a few dozen: time is cut into slots of a power-of-two width about
 * the trace's mean gap between arrivals (so a slot holds about one
 * completion), each slot keeps its entries sorted, and a bitmap finds the
 * next occupied slot.
 *
 * Exact order: an entry's key is (time, request index), the time's bits
 * mapped to sort as an unsigned integer, so the order is the binary heap's
 * (time first, the earlier request at equal times) and no two keys are
 * equal. The slot of a time t is floor((t - origin) * 2^k): rounding and
 * scaling by a power of two are monotone, so a lower slot never holds a
 * later time. The wheel holds slots [base, base + W); an entry outside
 * them (too far ahead, or before base) goes to the overflow heap, and a
 * pop takes the lower of the two heads, so every order of pushes is
 * served exactly; the replay's own (a completion is pushed at or after
 * the one popped last) keeps nearly everything in the wheel.
 *
 * peek() may be called with pushes in between before the pop: it
 * remembers the wheel's lowest occupied slot, and a push below it
 * replaces it.
 *
 * Entries live in one pool: push never allocates once room was reserved,
 * so a replay can reserve before the select whose completion it pushes.
 */
#ifndef LL_PENDING_H
#define LL_PENDING_H

#include <stddef.h>
#include <stdint.h>

#include <string.h>

#define LL_PENDING_NIL UINT32_MAX

/* A double's bits, mapped so that integer order is numeric order (no NaN
 * here: traces are validated). Comparing integers instead of doubles keeps
 * the compares cheap and free of unordered cases. */
static inline uint64_t ll_time_order(double t)
{
    uint64_t bits;
    memcpy(&bits, &t, sizeof bits);
    return bits & 0x8000000000000000u ? ~bits : bits | 0x8000000000000000u;
}

static inline double ll_order_time(uint64_t order)  /* ll_time_order() undone */
{
    uint64_t bits = order & 0x8000000000000000u ? order & 0x7FFFFFFFFFFFFFFFu : ~order;
    double t;
    memcpy(&t, &bits, sizeof t);
    return t;
}

typedef struct {
    uint64_t order;  /* completion time, as bits that sort as integers */
    uint32_t req;    /* request index: breaks ties in time             */
    uint32_t svc;    /* trace service                                  */
    uint32_t next;   /* next entry of the same slot (or the free list) */
    uint32_t id;     /* its index in the pool while queued (< cap): where
                      * the caller may keep data of its own beside it    */
} ll_pending;

typedef struct {
    ll_pending *pool;
    uint32_t cap, len;
    uint32_t free_head;      /* unused entries of the pool                   */
    /* the wheel */
    double origin, scale;    /* slot of t: floor((t - origin) * scale)       */
    uint32_t wheel_mask;     /* W - 1, W a power of two                      */
    uint32_t *slot_head;     /* [W] sorted lists of pool entries             */
    uint64_t *slot_used;     /* [W / 64] bit: the slot holds entries         */
    int64_t base;            /* lowest slot the wheel can hold               */
    int64_t min_slot;        /* lowest occupied slot if known, else -1       */
    /* the overflow: a binary heap of pool entries */
    uint32_t *heap;          /* [cap]                                        */
    uint32_t heap_len;
} ll_pending_queue;

/* An empty queue whose slots are 2^-scale_exp seconds wide from `origin`,
 * W = 2^wheel_bits slots (6 <= wheel_bits <= 24). 0, or -ENOMEM. */
int ll_pending_init(ll_pending_queue *q, double origin, int scale_exp, unsigned wheel_bits);
/* An empty queue shaped for completions of requests arriving at
 * `arrival` (n times, sorted). 0, or -ENOMEM. */
int ll_pending_init_for(ll_pending_queue *q, const double *arrival, size_t n);
void ll_pending_free(ll_pending_queue *q);
/* Room for `need` entries in all: 0, or -ENOMEM (nothing changed). */
int ll_pending_reserve(ll_pending_queue *q, size_t need);
/* Room must have been reserved. `time` is the order's time, finite.
 * Returns the entry's id. */
uint32_t ll_pending_push(ll_pending_queue *q, double time, uint64_t order, uint32_t req, uint32_t svc);
/* The entry with the lowest key, or NULL when empty. Valid until the next
 * push, pop or forget. */
const ll_pending *ll_pending_peek(ll_pending_queue *q);
/* Removes and returns the entry with the lowest key; the queue must not be empty. */
ll_pending ll_pending_pop(ll_pending_queue *q);
/* Drops every entry of trace service `svc`. O(entries + W). */
void ll_pending_forget(ll_pending_queue *q, uint32_t svc);

#endif /* LL_PENDING_H */
