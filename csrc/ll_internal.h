/*
 * ll_internal.h - the vserver's layout, shared by the core's .c files only.
 */
#ifndef LL_INTERNAL_H
#define LL_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "leastload.h"
#include "ll_columns.h"
#include "ll_method.h"
#include "ll_policy.h"
#include "ll_tree.h"

#define LL_NO_PICK INT64_MIN     /* last.cursor: no pick to explain              */
#define LL_LIVE 0x8000u          /* flags: the slot has an entry in live[] */
#define LL_MASK_WINDOW 15        /* windows up to this long keep a bucket mask   */
#define LL_BUCKET_BITS 0x7FFFu   /* flags: bit b, bucket b holds traffic (those windows) */

/* Per-service scalars: 48 bytes. */
typedef struct {
    uint64_t selected;   /* selections since bind                          */
    uint64_t failures;   /* transactions that failed, since bind            */
    uint32_t fails_in_row; /* consecutive failures (outlier detection)     */
    uint32_t active;     /* open transactions: N of LEASTCONNECTION        */
    uint32_t ttfb_us;    /* smoothed TTFB, integer microseconds            */
    uint32_t cap;        /* slow-start selections per second, LL_NO_CAP    */
    uint32_t sel_this;   /* selections in the current second (saturating)  */
    uint32_t sel_last;   /* selections in the previous second              */
    uint8_t weight;      /* 1..100                                         */
    uint8_t ttfb_known;  /* the first status-200 sample sets the average   */
    /* The four bytes a pick tests, adjacent (ll_svc_open): each 0 or 1 but state */
    uint8_t state;       /* ll_state                                       */
    uint8_t bound;       /* 0: a hole left by ll_unbind                    */
    uint8_t draining;    /* no new picks; the caller unbinds it when idle   */
    uint8_t ejected;     /* passive outlier ejection: no picks until return */
    uint16_t flags;      /* LL_LIVE: in live[]; LL_BUCKET_BITS: buckets with traffic */
} ll_svc;

_Static_assert(offsetof(ll_svc, bound) == offsetof(ll_svc, state) + 1
               && offsetof(ll_svc, draining) == offsetof(ll_svc, state) + 2
               && offsetof(ll_svc, ejected) == offsetof(ll_svc, state) + 3,
               "ll_svc_open reads state, bound, draining and ejected as one word");

/* UP, bound, not draining, not ejected: the four bytes compared at once
 * (both sides read the same way, so byte order does not matter). */
static inline int ll_svc_open(const ll_svc *s)
{
    static const uint8_t open[4] = { LL_UP, 1, 0, 0 };
    uint32_t have, want;
    memcpy(&have, (const unsigned char *)s + offsetof(ll_svc, state), sizeof have);
    memcpy(&want, open, sizeof want);
    return have == want;
}

/* PEAKEWMA: one service's latency estimate (ll_peakewma.h). */
typedef struct {
    double stamp;        /* the clock's reading at the last sample          */
    uint32_t cost_us;    /* the estimate at `stamp`, microseconds            */
    uint32_t known;      /* 0: no sample yet                                 */
} ll_peak;

struct ll_vserver {
    ll_method method;
    const ll_method_ops *ops;  /* &ll_methods[method]                     */
    uint32_t n_slots;        /* slots in use, holes included               */
    uint32_t n_bound;        /* bound services                             */
    uint32_t n_capped;       /* slots with a slow-start cap                */
    uint32_t rr_round;       /* ROUNDROBIN: weights >= round get a turn    */
    int64_t cursor;          /* slot selected last; -1: before the first   */
    int64_t cur_sec;         /* second of the newest window bucket         */
    uint32_t head;           /* bucket index of cur_sec (floor mod 14)     */
    uint64_t startup_left;   /* plain round-robin picks still to serve     */
    uint32_t full_slot;      /* the slot behind the last -EOVERFLOW of a select */
    uint32_t outlier_k;      /* consecutive failures that flag an outlier; 0 off */
    ll_totals totals;        /* aggregates kept by count_svc(), O(1) to read */
    uint64_t this_up;        /* what totals.last_up will be after the next second: */
    uint64_t this_open;      /* sel_this summed like last_up / last_open          */
    uint32_t capacity;       /* slots allocated; tree.P >= capacity (fixed layout: >= n_slots) */
    ll_tree tree;            /* keys and arg-min nodes over the slots      */
    ll_svc *svc;             /* [capacity]                                 */
    uint64_t *bytes;         /* [capacity] window totals                   */
    uint64_t *packets;       /* [capacity]                                 */
    /* Buckets, bucket-major ([b * capacity + slot]) so that rolling one
     * second walks one contiguous array, not one cache line per service. */
    uint64_t *bytes_bkt;     /* [window * capacity] */
    uint64_t *packets_bkt;   /* [window * capacity] */
    uint32_t window;         /* seconds (buckets) in the window, 1..LL_MAX_WINDOW_SECONDS */
    uint16_t head_mark;      /* LL_LIVE | the head bucket's bit while the window keeps
                              * bucket masks: what a record marks (ll_head_moved) */
    uint64_t rng;            /* P2C: the state of its draws (splitmix64)      */
    double now;              /* the caller's clock at its last call (ll_set_time) */
    uint32_t peak_decay_us;  /* PEAKEWMA: the estimate's decay time           */
    /* The live set: the slots a second boundary can change (traffic in a
     * bucket, or selections this second or last). A roll visits only these,
     * so no single call pays O(n) when the clock enters a new second. A slot
     * has at most one entry (its LL_LIVE bit); an unbound slot's entry stays
     * until the next roll drops it. */
    uint32_t n_live;
    uint32_t *live;          /* [capacity] the live slots, in no order      */
    /* Inputs of one method or family each: the columns of ll_columns.h,
     * NULL until allocated; read them through the typed accessors below. */
    void *col[LL_COL_COUNT]; /* [capacity] each                             */
    ll_pick_record last;     /* the last charged pick (explain)              */
    int64_t drawn[2];        /* the sampled family's draws of the pick under way */
    /* The hash methods' pick reads no weight while every bound service has
     * the same one: the bound services by weight (ll_hash_count_weight);
     * last, so that no other field moves. */
    uint32_t n_weights;      /* distinct weights among the bound services */
    uint32_t n_of_weight[LL_MAX_WEIGHT + 1]; /* bound services of each weight */
    /* A vserver laid out in memory it does not own (ll_fixed.c): its arrays
     * follow the struct at offsets fixed by its capacity, nothing is ever
     * reallocated, and its pointers hold for the address `self` they were
     * laid out at (ll_fixed_rebase lays them out again for another mapping).
     * `fixed` is its size in bytes (ll_fixed_size), 0 for a vserver on the heap:
     * ll_memory_bytes reads it, so that ll_vserver.c calls nothing of ll_fixed.c,
     * which builds on it. */
    void *self;
    size_t fixed;
    /* Shared vservers (ll_shared.c): the open transactions of each attached
     * process, per slot ([ledger_rows][capacity]; NULL: none kept), and the
     * row of the process that holds the lock. Per bound slot, the rows sum
     * to svc[slot].active. */
    uint32_t ledger_rows;
    uint32_t *ledger;
    uint32_t *ledger_row;
    /* The policy (ll_policy.h): its settings, deadline, counts and events. */
    ll_policy pol;
};

/* A slot that holds a bound service (slots of unbound ones wait for compaction). */
static inline int ll_slot_ok(const ll_vserver *vs, uint32_t slot)
{
    return slot < vs->n_slots && vs->svc[slot].bound;
}

/* The columns, typed (NULL: not allocated yet). */
#define LL_COLUMN_ACCESSOR(NAME, name, type, methods) \
    static inline type *ll_col_##name(const ll_vserver *vs) { return vs->col[LL_COL_##NAME]; }
LL_COLUMNS(LL_COLUMN_ACCESSOR)
#undef LL_COLUMN_ACCESSOR

/* Column c's array, allocated on its first input: 0, or -ENOMEM. */
static inline int ll_column_need(ll_vserver *vs, int c)
{
    if (!vs->col[c] && !(vs->col[c] = ll_column_alloc(c, vs->capacity)))
        return -ENOMEM;
    return 0;
}

/* The fields of a new vserver (ll_create, ll_fixed_create); arrays not included. */
void ll_init_fields(ll_vserver *vs, ll_method method, int64_t sec);
/* Ends `count` of the slot's open transactions with no outcome (their process
 * is gone): no TTFB, no failure, the row of failures left as it is. Returns
 * LL_END_DRAINED when that leaves a draining service idle, else 0. */
int ll_abandon(ll_vserver *vs, uint32_t slot, uint32_t count);
/* Rebuilds everything derived from the services' own counters (aggregates,
 * window totals and marks, the live set, the weight counts, the tree): after
 * a process died in the middle of a call on a shared vserver. O(n window). */
void ll_repair(ll_vserver *vs);
/* One transaction of `slot` ended: the caller's ledger row if it has one
 * open there, else the first row that has. */
void ll_ledger_close(ll_vserver *vs, uint32_t slot);

/* PEAKEWMA: a status-200 TTFB of `slot` at vs->now (ll_peakewma.c). */
void ll_peak_observe(ll_vserver *vs, uint32_t slot, uint32_t rtt_us);

/* Recomputes key[slot] from the service and fixes the tree. */
void ll_refresh(ll_vserver *vs, uint32_t slot);

/* The bucket of second `sec` in a window of w buckets: floor mod. */
static inline uint32_t ll_window_bucket(int64_t sec, uint32_t w)
{
    int64_t m = sec % (int64_t)w;
    return (uint32_t)(m < 0 ? m + (int64_t)w : m);
}

/* ---- the request path ----------------------------------------------------
 * Its cores, written once with the method's traits as arguments, are in
 * ll_path.h; shared by the public calls (ll_vserver.c) and the batch path
 * (ll_replay.c). */

/* Gives the slot an entry in the live set unless it has one. */
/* After head or window changed: the mark a record of this second sets. */
static inline void ll_head_moved(ll_vserver *vs)
{
    vs->head_mark = (uint16_t)(LL_LIVE | (vs->window <= LL_MASK_WINDOW ? 1u << vs->head : 0u));
}

static inline void ll_live_add(ll_vserver *vs, uint32_t slot)
{
    ll_svc *s = &vs->svc[slot];
    if (!(s->flags & LL_LIVE)) {
        vs->live[vs->n_live++] = slot;
        s->flags = (uint16_t)(s->flags | LL_LIVE);
    }
}

#endif /* LL_INTERNAL_H */
