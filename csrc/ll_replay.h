/*
 * ll_replay.h - a whole request trace replayed inside C (the batch path).
 *
 * The simulation harness's C half, apart from the engine (leastload.h): the
 * engine knows nothing of traces. The replay makes exactly the calls the
 * per-call driver of src/leastload/sim/replay.py makes, in the same order,
 * with the same values: for each request, in arrival order, first every
 * completion due at or before its arrival (record the response traffic,
 * then finish), then select + record the request traffic. So its decisions
 * equal driving the vserver one call at a time. Service events (state
 * changes, bind, unbind) and the slow-start policy stay with the caller:
 * the run stops before any operation at or after `stop_time` (the next
 * event), before any call whose time reaches `deadline` (the policy hook),
 * and after a finish that ll_finish() flagged (LL_END_*: a drain to
 * complete, an outlier to judge), and resumes where it stopped.
 */
#ifndef LL_REPLAY_H
#define LL_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "leastload.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The trace, borrowed for the replay's life: n requests sorted by arrival,
 * fewer than 2^32, every time in it (arrival, arrival + TTFB + transfer)
 * finite and below 2^53 in magnitude. */
typedef struct {
    size_t n;
    const double *arrival, *ttfb_factor, *transfer;
    const uint16_t *status;
    const uint64_t *req_bytes, *resp_bytes, *req_packets, *resp_packets;
    const double *ttfb_base, *ttfb_slope;   /* per trace service */
} ll_trace;

/* The TTFB of request k on trace service s, seconds: the same expression,
 * in the same order, as the Python side's (so the same double). */
static inline double ll_trace_ttfb(const ll_trace *t, uint32_t s, size_t k)
{
    return t->ttfb_base[s] * (1.0 + t->ttfb_slope[s] * t->arrival[k]) * t->ttfb_factor[k];
}

/* The second of a trace time: floor, without a libm call (|t| < 2^53). */
static inline int64_t ll_trace_second(double t)
{
    int64_t sec = (int64_t)t;
    return sec - ((double)sec > t);
}

/* Where the results go, borrowed: per request, and per trace service. */
typedef struct {
    int32_t *chosen;   /* trace service, -1: dropped (nothing eligible) */
    uint64_t *selected, *bytes, *packets, *completed;
} ll_replay_out;

typedef struct ll_replay ll_replay;  /* opaque: the progress of one replay */

enum { LL_REPLAY_DONE = 0, LL_REPLAY_EVENT = 1, LL_REPLAY_DEADLINE = 2, LL_REPLAY_ENDED = 3 };

/* A replay of `trace` into `out`, not started. NULL when out of memory. */
ll_replay *ll_replay_create(const ll_trace *trace, const ll_replay_out *out);
void ll_replay_destroy(ll_replay *r);

/* The mapping between trace services and the vserver's slots, borrowed; set
 * it before the first run and again whenever the caller's binds changed it.
 * slot_of: trace service -> slot, -1 if unbound; service_of: slot -> service. */
void ll_replay_set_mapping(ll_replay *r, const int64_t *slot_of, const int32_t *service_of);

/* Runs from where it stopped, until everything is done (LL_REPLAY_DONE,
 * every completion drained), or the next operation's time is >= stop_time
 * (LL_REPLAY_EVENT), or a call's time is >= deadline (LL_REPLAY_DEADLINE:
 * the window has moved to ll_replay_now(); run the hook, call
 * ll_replay_hook_done(), resume), or a finish returned LL_END_* bits
 * (LL_REPLAY_ENDED: ll_replay_state() says which; act on them, resume).
 * Errors: -ENOMEM (the pending completions could not grow), -EINVAL (a TTFB
 * over LL_MAX_TTFB_US), -EOVERFLOW (a window total, or a service's active
 * count); ll_replay_state() tells which call. Nothing of the failing call
 * has been applied; earlier calls stand. */
int ll_replay_run(ll_vserver *vs, ll_replay *r, double stop_time, double deadline);

/* The time of the last call (or of the stop). */
double ll_replay_now(const ll_replay *r);
/* After LL_REPLAY_DEADLINE: the caller ran the hook for this call. */
void ll_replay_hook_done(ll_replay *r);
/* Drops the pending completions of trace service `svc`: call it when svc is
 * unbound, as its open transactions are gone. O(pending). */
void ll_replay_forget(ll_replay *r, uint32_t svc);

/* What stopped the run, for LL_REPLAY_ENDED and for errors. */
typedef struct {
    int err_call;        /* 0 select, 1 record bytes, 2 record packets, 3 finish */
    uint64_t err_value;  /* the value behind an error (bytes, packets)            */
    double ttfb;         /* the TTFB of the completion under way, seconds         */
    uint32_t svc;        /* ... and its trace service                             */
    int end_flags;       /* LL_REPLAY_ENDED: ll_finish()'s LL_END_* bits          */
    uint32_t end_svc;    /* ... and the trace service it finished                 */
} ll_replay_state_t;
void ll_replay_state(const ll_replay *r, ll_replay_state_t *out);

#ifdef __cplusplus
}
#endif
#endif /* LL_REPLAY_H */
