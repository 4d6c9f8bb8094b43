/*
 * ll_replay.c - the batch path (ll_replay.h): a trace replayed call for
 * call as the per-call driver (src/leastload/sim/replay.py) would make them.
 *
 * Each request is two calls (select, record) and each completion two
 * (record, finish). select and record "tick" like the public calls: the
 * window moves to the call's second, and a call whose time reached the
 * policy deadline stops the run first so the caller can run the hook,
 * exactly where the per-call path would run it.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ll_internal.h"
#include "ll_replay.h"

typedef struct {
    uint64_t order;  /* completion time, as bits that sort as integers */
    uint32_t req;    /* request index: breaks ties in time             */
    uint32_t svc;    /* trace service                                  */
} ll_pending;        /* 16 bytes: the heap moves these, so keep them small */

enum { LL_OP_NONE = 0, LL_OP_ARRIVAL = 1, LL_OP_COMPLETION = 2 };

struct ll_replay {
    /* the trace and the results, borrowed (flattened: read on every request) */
    size_t n;
    const double *arrival, *ttfb_factor, *transfer;
    const uint16_t *status;
    const uint64_t *req_bytes, *resp_bytes, *req_packets, *resp_packets;
    const double *ttfb_base, *ttfb_slope;
    int32_t *chosen;
    uint64_t *selected, *bytes, *packets, *completed;
    /* the mapping, borrowed, valid between runs */
    const int64_t *slot_of;
    const int32_t *service_of;
    /* progress: the next request, the pending heap, the operation under way */
    size_t next;
    ll_pending *heap;
    size_t heap_len, heap_cap;
    int op;              /* LL_OP_*: an operation stopped half way     */
    int phase;           /* its next call: 0 or 1                      */
    int hook_done;       /* the caller ran the hook for this call       */
    ll_pending cur;      /* the completion under way                   */
    double cur_ttfb;     /* its TTFB, seconds                          */
    double now;          /* time of the last call (or of the stop)     */
    uint64_t err_value;
    int err_call;
    int end_flags;
    uint32_t end_svc;
};

ll_replay *ll_replay_create(const ll_trace *t, const ll_replay_out *out)
{
    ll_replay *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->n = t->n;
    r->arrival = t->arrival;
    r->ttfb_factor = t->ttfb_factor;
    r->transfer = t->transfer;
    r->status = t->status;
    r->req_bytes = t->req_bytes;
    r->resp_bytes = t->resp_bytes;
    r->req_packets = t->req_packets;
    r->resp_packets = t->resp_packets;
    r->ttfb_base = t->ttfb_base;
    r->ttfb_slope = t->ttfb_slope;
    r->chosen = out->chosen;
    r->selected = out->selected;
    r->bytes = out->bytes;
    r->packets = out->packets;
    r->completed = out->completed;
    return r;
}

void ll_replay_destroy(ll_replay *r)
{
    if (!r)
        return;
    free(r->heap);
    free(r);
}

void ll_replay_set_mapping(ll_replay *r, const int64_t *slot_of, const int32_t *service_of)
{
    r->slot_of = slot_of;
    r->service_of = service_of;
}

double ll_replay_now(const ll_replay *r) { return r->now; }
void ll_replay_hook_done(ll_replay *r) { r->hook_done = 1; }

void ll_replay_state(const ll_replay *r, ll_replay_state_t *out)
{
    out->err_call = r->err_call;
    out->err_value = r->err_value;
    out->ttfb = r->cur_ttfb;
    out->svc = r->cur.svc;
    out->end_flags = r->end_flags;
    out->end_svc = r->end_svc;
}

/* A double's bits, mapped so that integer order is numeric order (no NaN
 * here: traces are validated). Comparing two integers instead of two
 * doubles keeps the heap's compares cheap and free of unordered cases. */
static uint64_t time_order(double t)
{
    uint64_t bits;
    memcpy(&bits, &t, sizeof bits);
    return bits & 0x8000000000000000u ? ~bits : bits | 0x8000000000000000u;
}

static double order_time(uint64_t order)  /* time_order() undone */
{
    uint64_t bits = order & 0x8000000000000000u ? order & 0x7FFFFFFFFFFFFFFFu : ~order;
    double t;
    memcpy(&t, &bits, sizeof t);
    return t;
}

/* The TTFB of request k on trace service s: the same expression, in the
 * same order, as replay.py (so the same double). */
static double ttfb_of(const ll_replay *r, uint32_t s, size_t k)
{
    return r->ttfb_base[s] * (1.0 + r->ttfb_slope[s] * r->arrival[k]) * r->ttfb_factor[k];
}

static int before(const ll_pending *a, const ll_pending *b)
{
#if defined(__SIZEOF_INT128__) && !defined(LL_NO_INT128)
    /* (order, req) as one 128-bit number: a compare and a borrow, no branch */
    __extension__ typedef unsigned __int128 u128;
    return ((u128)a->order << 64 | a->req) < ((u128)b->order << 64 | b->req);
#else
    return (a->order < b->order) | ((a->order == b->order) & (a->req < b->req));
#endif
}

static int heap_reserve(ll_replay *r, size_t need)
{
    if (need <= r->heap_cap)
        return 0;
    size_t cap = r->heap_cap ? r->heap_cap : 256;
    while (cap < need)
        cap *= 2;
    ll_pending *h = realloc(r->heap, cap * sizeof *h);
    if (!h)
        return -ENOMEM;
    r->heap = h;
    r->heap_cap = cap;
    return 0;
}

/* Room must have been reserved. */
static void heap_push(ll_replay *r, ll_pending p)
{
    size_t i = r->heap_len++;
    /* sift up */
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&p, &r->heap[parent]))
            break;
        r->heap[i] = r->heap[parent];
        i = parent;
    }
    r->heap[i] = p;
}

/* Floyd's pop: walk the hole down to a leaf along the smaller child (a
 * branch-free choice), then sift the last entry up from there; the walk
 * has no data-dependent exit, which suits a branch predictor better than
 * comparing against the moved entry at every level. */
static ll_pending heap_pop(ll_replay *r)
{
    ll_pending *h = r->heap;
    ll_pending top = h[0], last = h[--r->heap_len];
    size_t n = r->heap_len, i = 0;
    if (n == 0)
        return top;
    for (size_t c; (c = 2 * i + 1) < n; i = c) {
        c += (c + 1 < n) & before(&h[c + 1], &h[c]);
        h[i] = h[c];
    }
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&last, &h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = last;
    return top;
}

/* Picks the next operation; LL_REPLAY_DONE / LL_REPLAY_EVENT, or -1 when
 * one is ready in r->op. */
static int next_op(ll_replay *r, double stop_time)
{
    for (;;) {
        int have_c = r->heap_len > 0, have_a = r->next < r->n;
        if (!have_c && !have_a)
            return LL_REPLAY_DONE;
        double tc = have_c ? order_time(r->heap[0].order) : INFINITY;
        double ta = have_a ? r->arrival[r->next] : INFINITY;
        int completion = have_c && (!have_a || tc <= ta);  /* completions first at ties */
        double t = completion ? tc : ta;
        if (t >= stop_time)
            return LL_REPLAY_EVENT;  /* events go first at ties */
        r->now = t;
        r->phase = 0;
        if (!completion) {
            r->op = LL_OP_ARRIVAL;
            return -1;
        }
        r->cur = heap_pop(r);  /* ll_replay_forget() dropped those of unbound services */
        r->cur_ttfb = ttfb_of(r, r->cur.svc, r->cur.req);
        r->op = LL_OP_COMPLETION;
        return -1;
    }
}

static int record(ll_vserver *vs, ll_replay *r, uint32_t svc, int64_t sec, uint64_t b, uint64_t p)
{
    int rc = ll_record(vs, (uint32_t)r->slot_of[svc], sec, b, p);
    if (rc == -EOVERFLOW) {
        ll_info info;
        ll_service_info(vs, (uint32_t)r->slot_of[svc], &info);
        int bytes_full = b > UINT64_MAX - info.bytes;
        r->err_call = bytes_full ? 1 : 2;
        r->err_value = bytes_full ? b : p;
    }
    if (rc < 0)
        return rc;
    r->bytes[svc] += b;
    r->packets[svc] += p;
    return 0;
}

/* The completion's finish (phase 1): 0 to go on, or what ll_replay_run returns. */
static int finish(ll_vserver *vs, ll_replay *r)
{
    uint64_t k = r->cur.req;
    double ttfb = r->cur_ttfb;
    if (!(ttfb >= 0.0 && ttfb <= LL_MAX_TTFB_US / 1e6)) {
        r->err_call = 3;
        return -EINVAL;
    }
    uint32_t us = (uint32_t)floor(ttfb * 1e6 + 0.5);
    int rc = ll_finish(vs, (uint32_t)r->slot_of[r->cur.svc], r->status[k] == 200, us, r->status[k] >= 500);
    if (rc < 0) {
        r->err_call = 3;
        return rc;
    }
    r->completed[r->cur.svc]++;
    r->op = LL_OP_NONE;
    if (rc > 0) {  /* a drain to complete or an outlier to judge: the caller's */
        r->end_flags = rc;
        r->end_svc = r->cur.svc;
        return LL_REPLAY_ENDED;
    }
    return 0;
}

int ll_replay_run(ll_vserver *vs, ll_replay *r, double stop_time, double deadline)
{
    for (;;) {
        if (r->op == LL_OP_NONE) {
            int rc = next_op(r, stop_time);
            if (rc >= 0)
                return rc;
        }
        double t = r->now;
        int64_t sec = (int64_t)t;  /* floor; the caller keeps |t| < 2^53 */
        sec -= (double)sec > t;
        if (!(r->op == LL_OP_COMPLETION && r->phase == 1)) {
            /* select and record tick (finish does not): the window moves
             * and a due policy hook runs first */
            if (sec > vs->cur_sec)
                ll_advance(vs, sec);
            if (t >= deadline && !r->hook_done)
                return LL_REPLAY_DEADLINE;
            r->hook_done = 0;
        }
        int rc;
        if (r->op == LL_OP_ARRIVAL && r->phase == 0) {
            size_t k = r->next;
            if ((rc = heap_reserve(r, r->heap_len + 1)) < 0)
                return rc;
            int64_t slot = ll_select(vs, sec);
            if (slot == -ENOENT) {              /* dropped: nothing eligible */
                r->chosen[k] = -1;
                r->next++;
                r->op = LL_OP_NONE;
                continue;
            }
            if (slot < 0) {
                r->err_call = 0;
                return (int)slot;
            }
            uint32_t s = (uint32_t)r->service_of[slot];
            r->chosen[k] = (int32_t)s;
            r->selected[s]++;
            double done = t + ttfb_of(r, s, k) + r->transfer[k];
            ll_pending p = { time_order(done), (uint32_t)k, s };
            heap_push(r, p);
            r->phase = 1;
            if (t >= deadline)
                continue;  /* the record's own tick stops for the hook: take the long way */
            /* The record at the same time: its tick cannot move the window
             * (same second) nor stop (t < deadline), so it follows at once. */
            if ((rc = record(vs, r, s, sec, r->req_bytes[k], r->req_packets[k])) < 0)
                return rc;
            r->next++;
            r->op = LL_OP_NONE;
        } else if (r->op == LL_OP_ARRIVAL) {
            size_t k = r->next;
            uint32_t s = (uint32_t)r->chosen[k];
            if ((rc = record(vs, r, s, sec, r->req_bytes[k], r->req_packets[k])) < 0)
                return rc;
            r->next++;
            r->op = LL_OP_NONE;
        } else if (r->phase == 0) {
            uint64_t k = r->cur.req;
            if ((rc = record(vs, r, r->cur.svc, sec, r->resp_bytes[k], r->resp_packets[k])) < 0)
                return rc;
            r->phase = 1;
            if ((rc = finish(vs, r)) != 0)  /* finish does not tick: it follows at once */
                return rc;
        } else if ((rc = finish(vs, r)) != 0) {
            return rc;
        }
    }
}

void ll_replay_forget(ll_replay *r, uint32_t svc)
{
    size_t kept = 0;
    for (size_t i = 0; i < r->heap_len; i++)
        if (r->heap[i].svc != svc)
            r->heap[kept++] = r->heap[i];
    if (kept == r->heap_len)
        return;
    ll_pending *h = r->heap;
    r->heap_len = 0;
    for (size_t i = 0; i < kept; i++)  /* re-heap: rare (unbind events), O(n log n) */
        heap_push(r, h[i]);
}

