/*
 * ll_replay.c - the batch path (ll_replay.h): a trace replayed call for
 * call as the per-call driver (src/leastload/sim/replay.py) would make them.
 *
 * Each request is two calls (select, record) and each completion two
 * (record, finish). select and record "tick" like the public calls: the
 * window moves to the call's second, and a call whose time reached the
 * policy deadline stops the run first so the caller can run the hook,
 * exactly where the per-call path would run it.
 *
 * Specialised by what the method needs: the loop is one body whose method
 * traits (ll_traits, ll_path.h: the row of ll_method.h) are an argument,
 * instantiated with constants for each least-load method of methods/list.h
 * (its static inline key and pick, called directly) and once with the row
 * read at run time for the rest, which calls through the row's ops. With
 * constants the compiler keeps only what
 * the method needs: LEASTCONNECTION's loop refreshes its key from `active`
 * inline and skips the byte and packet key tests; LEASTBANDWIDTH's select
 * refreshes nothing. The window's totals are kept under every method (info()
 * and snapshots report them): that part costs a few stores, not the keys.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ll_path.h"
#include "ll_pending.h"
#include "ll_replay.h"

enum { LL_OP_NONE = 0, LL_OP_ARRIVAL = 1, LL_OP_COMPLETION = 2 };

/* What a completion needs of its request, kept beside its pending entry
 * (by its id) from the select on: the request's arrays are read in order
 * then, while a completion comes thousands of requests later, where five
 * arrays would cost five cache misses and this one line costs one. */
typedef struct {
    double ttfb;            /* seconds: ll_trace_ttfb(), the same double  */
    uint64_t resp_bytes, resp_packets;
    uint16_t status;
} ll_due;

struct ll_replay {
    /* the trace and the results, borrowed */
    ll_trace trace;
    int32_t *chosen;
    uint64_t *selected, *bytes, *packets, *completed;
    /* the mapping, borrowed, valid between runs */
    const int64_t *slot_of;
    const int32_t *service_of;
    /* progress: the next request, the pending completions, the operation under way */
    size_t next;
    ll_pending_queue pending;
    ll_due *due;         /* [due_cap]: by pending entry id            */
    uint32_t due_cap;    /* == pending.cap before any push            */
    int op;              /* LL_OP_*: an operation stopped half way     */
    int phase;           /* its next call: 0 or 1                      */
    int hook_done;       /* the caller ran the hook for this call       */
    ll_pending cur;      /* the completion under way                   */
    ll_due cur_due;      /* ... and what it needs of its request       */
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
    r->trace = *t;
    r->chosen = out->chosen;
    r->selected = out->selected;
    r->bytes = out->bytes;
    r->packets = out->packets;
    r->completed = out->completed;
    if (ll_pending_init_for(&r->pending, t->arrival, t->n) < 0) {
        free(r);
        return NULL;
    }
    return r;
}

void ll_replay_destroy(ll_replay *r)
{
    if (!r)
        return;
    ll_pending_free(&r->pending);
    free(r->due);
    free(r);
}

/* Room for one more pending completion and its ll_due (an entry's id can
 * be any index below the queue's cap): 0 or -ENOMEM. */
static int reserve_one(ll_replay *r)
{
    int rc = ll_pending_reserve(&r->pending, (size_t)r->pending.len + 1);
    if (rc < 0)
        return rc;
    size_t cap = r->pending.cap;  /* below 2^32 */
    if (cap > SIZE_MAX / sizeof(ll_due))
        return -ENOMEM;
    ll_due *due = realloc(r->due, cap * sizeof *due);
    if (!due)
        return -ENOMEM;  /* the queue's bigger room is harmless: due_cap says */
    r->due = due;
    r->due_cap = r->pending.cap;
    return 0;
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
    out->ttfb = r->cur_due.ttfb;
    out->svc = r->cur.svc;
    out->end_flags = r->end_flags;
    out->end_svc = r->end_svc;
}


/* Picks the next operation; LL_REPLAY_DONE / LL_REPLAY_EVENT, or -1 when
 * one is ready in r->op. */
LL_INLINE int next_op(ll_replay *r, double stop_time)
{
    const ll_pending *first = ll_pending_peek(&r->pending);
    int have_c = first != NULL, have_a = r->next < r->trace.n;
    if (!have_c && !have_a)
        return LL_REPLAY_DONE;
    double tc = have_c ? ll_order_time(first->order) : INFINITY;
    double ta = have_a ? r->trace.arrival[r->next] : INFINITY;
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
    r->cur = ll_pending_pop(&r->pending);  /* ll_replay_forget() dropped those of unbound services */
    r->cur_due = r->due[r->cur.id];
    r->op = LL_OP_COMPLETION;
    return -1;
}

/* A record that would overflow a window total: which one, for ll_replay_state(). */
static void record_overflow(ll_vserver *vs, ll_replay *r, uint32_t svc, uint64_t b, uint64_t p)
{
    ll_info info;
    ll_service_info(vs, (uint32_t)r->slot_of[svc], &info);
    int bytes_full = b > UINT64_MAX - info.bytes;
    r->err_call = bytes_full ? 1 : 2;
    r->err_value = bytes_full ? b : p;
}

/* Both of the replay's records follow a tick to their second, on a bound
 * slot: the core alone. */
LL_INLINE int record(ll_vserver *vs, ll_replay *r, uint32_t svc, uint64_t b, uint64_t p, ll_traits tr, int spec)
{
    int rc = ll_record_as(vs, (uint32_t)r->slot_of[svc], b, p, tr, spec);
    if (rc < 0) {
        if (rc == -EOVERFLOW)
            record_overflow(vs, r, svc, b, p);
        return rc;
    }
    r->bytes[svc] += b;
    r->packets[svc] += p;
    return 0;
}

/* The completion's finish (phase 1): 0 to go on, or what ll_replay_run returns. */
LL_INLINE int finish(ll_vserver *vs, ll_replay *r, ll_traits tr, int spec)
{
    double ttfb = r->cur_due.ttfb;
    if (!(ttfb >= 0.0 && ttfb <= LL_MAX_TTFB_US / 1e6)) {
        r->err_call = 3;
        return -EINVAL;
    }
    /* floor(ttfb * 1e6 + 0.5): the value is in [0.5, 3.6e9 + 0.5], where
     * the conversion's truncation is the floor, without a libm call */
    uint32_t us = (uint32_t)(ttfb * 1e6 + 0.5);
    /* a bound slot (completions of unbound services are forgotten), a TTFB in range */
    int rc = ll_finish_as(vs, (uint32_t)r->slot_of[r->cur.svc], r->cur_due.status == 200, us,
                          r->cur_due.status >= 500, tr, spec);
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

/* The select of an arrival: ll_select() after its tick (the loop moved the
 * window to `sec` already, so its own advance would be a no-op). */
LL_INLINE int64_t select_at(ll_vserver *vs, ll_traits tr, int spec)
{
    uint32_t round;
    uint64_t rng;
    int64_t slot = ll_pick_as(vs, &round, &rng, spec);
    return slot < 0 ? slot : ll_take_as(vs, slot, round, rng, tr, spec);
}

/* The loop, with the method's traits as arguments (see the top of the file). */
LL_INLINE int run_as(ll_vserver *vs, ll_replay *r, double stop_time, double deadline, ll_traits tr, int spec)
{
    for (;;) {
        if (r->op == LL_OP_NONE) {
            int rc = next_op(r, stop_time);
            if (rc >= 0)
                return rc;
        }
        double t = r->now;
        int64_t sec = ll_trace_second(t);
        vs->now = t;  /* every call's time (PEAKEWMA's samples and picks) */
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
            if ((r->pending.len >= r->pending.cap || r->due_cap != r->pending.cap) && (rc = reserve_one(r)) < 0)
                return rc;
            int64_t slot = select_at(vs, tr, spec);
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
            double ttfb = ll_trace_ttfb(&r->trace, s, k);
            double done = t + ttfb + r->trace.transfer[k];
            uint32_t id = ll_pending_push(&r->pending, done, ll_time_order(done), (uint32_t)k, s);
            r->due[id] = (ll_due){ ttfb, r->trace.resp_bytes[k], r->trace.resp_packets[k], r->trace.status[k] };
            r->phase = 1;
            if (t >= deadline)
                continue;  /* the record's own tick stops for the hook: take the long way */
            /* The record at the same time: its tick cannot move the window
             * (same second) nor stop (t < deadline), so it follows at once. */
            if ((rc = record(vs, r, s, r->trace.req_bytes[k], r->trace.req_packets[k], tr, spec)) < 0)
                return rc;
            r->next++;
            r->op = LL_OP_NONE;
        } else if (r->op == LL_OP_ARRIVAL) {
            size_t k = r->next;
            uint32_t s = (uint32_t)r->chosen[k];
            if ((rc = record(vs, r, s, r->trace.req_bytes[k], r->trace.req_packets[k], tr, spec)) < 0)
                return rc;
            r->next++;
            r->op = LL_OP_NONE;
        } else if (r->phase == 0) {
            if ((rc = record(vs, r, r->cur.svc, r->cur_due.resp_bytes, r->cur_due.resp_packets, tr, spec)) < 0)
                return rc;
            r->phase = 1;
            if ((rc = finish(vs, r, tr, spec)) != 0)  /* finish does not tick: it follows at once */
                return rc;
        } else if ((rc = finish(vs, r, tr, spec)) != 0) {
            return rc;
        }
    }
}

/* One loop for each least-load method (its LL_LEAST line of methods/list.h),
 * with its static inline key as a constant (methods/least.h); the rest share
 * the generic one, which calls through the row. */
#define LL_LEAST(ID, value, N, inputs_, counts_active_)                                              \
    static int run_##ID(ll_vserver *vs, ll_replay *r, double stop, double deadline)                  \
    {                                                                                                \
        ll_traits tr = { .key = ll_least_key_##ID##_i, .on_end = NULL, .startup_rr = 1, .draws = 0,  \
                         .inputs = (inputs_), .counts_active = (counts_active_) };                   \
        return run_as(vs, r, stop, deadline, tr, 1);                                                 \
    }
#define LL_ROW(ID, value, ...)
#include "methods/list.h"
#undef LL_LEAST
#undef LL_ROW

typedef int (*run_fn)(ll_vserver *vs, ll_replay *r, double stop, double deadline);

#define LL_LEAST(ID, value, ...) [LL_##ID] = run_##ID,
#define LL_ROW(ID, value, ...)
static const run_fn specialised[LL_METHOD_COUNT] = {
#include "methods/list.h"
};
#undef LL_LEAST
#undef LL_ROW

static int run_generic(ll_vserver *vs, ll_replay *r, double stop, double deadline)
{
    return run_as(vs, r, stop, deadline, ll_traits_of(vs->ops), 0);
}

int ll_replay_run(ll_vserver *vs, ll_replay *r, double stop_time, double deadline)
{
    /* the method cannot change during a run (only between runs, by the caller) */
    run_fn run = specialised[vs->method];
    return (run ? run : run_generic)(vs, r, stop_time, deadline);
}

void ll_replay_forget(ll_replay *r, uint32_t svc)
{
    ll_pending_forget(&r->pending, svc);
}
