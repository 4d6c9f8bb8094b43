/*
 * ll_policy.h - the policy around the pick (internal): slow start
 * (ll_slowstart.c), passive ejection (ll_ejection.c), weights from the
 * services' reported utilization (ll_utilization.c), and the driver that
 * runs them when the clock reaches their next due time (ll_policy.c).
 *
 * The rules are the reference's (leastload/engine/ref_policy.py), written a
 * second time: docs/slow-start.md and docs/embedding.md state them. The
 * policy never reads a clock: it runs at vs->now (ll_set_time). Its state
 * lives in the vserver (one column a slot, one struct), so a shared
 * vserver's segment holds it and every process runs the one policy.
 */
#ifndef LL_POLICY_H
#define LL_POLICY_H

#include <math.h>
#include <stdint.h>

#include "leastload.h"

#define LL_MAX_INCREMENTS 200          /* the vendor leaves automated slow start after 200 */
#define LL_NO_TRAFFIC_INTERVALS 3      /* ... or after three intervals without traffic     */
#define LL_MAX_EJECTION_TIME 300.0     /* seconds: an ejection never lasts longer          */
#define LL_MAX_CAP 0xFFFFFFFEu         /* the highest cap (LL_NO_CAP is one more)          */
#define LL_UTIL_BLACKOUT 10.0          /* gRPC's blackout_period, seconds                   */
#define LL_UTIL_EXPIRATION 180.0       /* weight_expiration_period                          */
#define LL_UTIL_PERIOD 1.0             /* weight_update_period                              */

/* One slot's policy state (the POLICY column; all zero: nothing). */
typedef struct {
    /* slow start: the ramp (in_ramp) */
    double start;            /* when it became new (bind, DOWN -> UP, a return)   */
    double next_boundary;    /* the next interval boundary; INFINITY: none        */
    double paused_left;      /* paused: time left to the boundary (may be inf)    */
    double held_a, held_b;   /* slow_start_guard: the figures of `held`           */
    uint64_t selected_mark;  /* its selections at the last boundary               */
    uint64_t failure_mark;   /* slow_start_guard: its failures at the last boundary */
    uint32_t increments;     /* automated: boundaries passed so far               */
    uint32_t cap;            /* the cap now                                       */
    uint32_t quiet;          /* successive intervals without traffic              */
    uint8_t in_ramp, paused, holding, held; /* held: LL_HELD_*                    */
    /* passive ejection: the record, kept from the first ejection to unbind */
    uint8_t has_record, ejected, has_returned, u_known;
    uint32_t ejections;      /* ejections so far, after decay                     */
    double since, until;     /* the ejection under way                            */
    double returned;         /* when the last one ended (has_returned)            */
    /* weights from utilization: the last report (u_known), gRPC's endpoint */
    double u_weight, u_since, u_last;
    uint8_t u_has_since, reserved[7];
} ll_pol;

/* The vserver's policy state (ll_vserver.pol). */
typedef struct {
    ll_settings set;         /* the settings now                                  */
    double deadline;         /* run at or after this (never later than the exact one) */
    double percent_due;      /* manual PERCENT: the second after the last plan    */
    double tick_due;         /* weights_from_utilization: the next application    */
    uint32_t lo, hi;         /* every slot in slow start or ejected is in lo..hi (lo > hi: none) */
    uint32_t n_ramps;        /* slots in slow start                               */
    uint32_t n_records;      /* slots ejected now                                 */
    uint64_t n_events;       /* events so far; the ring keeps the last LL_EVENTS  */
    ll_event ring[LL_EVENTS];
} ll_policy;

/* ll_policy.c */
ll_pol *ll_pol_of(const ll_vserver *vs, uint32_t slot);      /* NULL: no policy column */
int ll_pol_need(ll_vserver *vs);                             /* 0, -ENOMEM */
void ll_pol_event(ll_vserver *vs, double now, uint32_t slot, uint32_t what);
void ll_pol_plan(ll_vserver *vs, double now);                /* after a change: its due times again */
void ll_pol_due(ll_vserver *vs, double t);                   /* a new due time: the deadline is at most t */
void ll_pol_member(ll_vserver *vs, uint32_t slot);           /* the slot has a ramp or an ejection now */
uint32_t ll_pol_from(const ll_vserver *vs);  /* the members' slots: from .. end-1 (end 0: none) */
uint32_t ll_pol_end(const ll_vserver *vs);
void ll_pol_run(ll_vserver *vs, double now);
int ll_pol_others_up(const ll_vserver *vs, int64_t besides);
void ll_pol_bound(ll_vserver *vs, uint32_t slot);
/* Before an unbound slot is cleared: its ramp and ejection leave the counts; 1 if it ramped. */
int ll_pol_unbinding(ll_vserver *vs, uint32_t slot);
void ll_pol_unbound(ll_vserver *vs, int had_ramp);
void ll_pol_state(ll_vserver *vs, uint32_t slot, int was_down, ll_state state);
void ll_pol_draining(ll_vserver *vs, uint32_t slot);
void ll_pol_compacted(ll_vserver *vs, const uint32_t *moved_to, uint32_t n_old);
void ll_pol_init(ll_vserver *vs);

/* ll_slowstart.c */
void ll_ss_maybe_begin(ll_vserver *vs, uint32_t slot, double now);
void ll_ss_pause(ll_vserver *vs, uint32_t slot, double now);
void ll_ss_resume(ll_vserver *vs, uint32_t slot, double now);
void ll_ss_end(ll_vserver *vs, uint32_t slot, uint32_t why, double now);
void ll_ss_end_all(ll_vserver *vs, double now);
void ll_ss_due(ll_vserver *vs, uint32_t slot, double now);   /* its boundaries up to now */
void ll_ss_manual_caps(ll_vserver *vs);
uint32_t ll_ss_cap_for(const ll_vserver *vs, const ll_pol *p);
void ll_ss_settings(ll_vserver *vs, const ll_settings *old, double now);

/* ll_ejection.c */
void ll_ej_judge(ll_vserver *vs, uint32_t slot);             /* outlier_failures in a row */
void ll_ej_return(ll_vserver *vs, uint32_t slot, double now, uint32_t what);

/* ll_utilization.c */
void ll_util_start_ticks(ll_vserver *vs, double now);
void ll_util_apply(ll_vserver *vs, double now);

#endif /* LL_POLICY_H */
