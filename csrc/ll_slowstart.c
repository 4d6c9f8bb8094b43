/*
 * ll_slowstart.c - slow start (docs/slow-start.md): a new service (bound,
 * DOWN -> UP, back from an ejection) gets at most `cap` picks a second.
 * Manual mode (interval 0): the cap is the rate. Automated: it starts at 0
 * and steps up at every interval boundary, leaving at the vendor's four
 * exits (and the two of slow_start_handover / slow_start_guard, which are
 * not the vendor's). A ramp's clock stands while its service cannot be
 * picked. The reference states the same rules in ref_policy.py.
 */
#include <math.h>

#include "ll_internal.h"

/* Average picks in the last second of the services that take what slow
 * start holds back (0 when there are none). */
static double others_rate(const ll_vserver *vs)
{
    return vs->totals.open ? (double)vs->totals.last_open / (double)vs->totals.open : 0.0;
}

/* Python's float floor division for a >= 0, b > 0 (the reference's `//`). */
static double py_floordiv(double a, double b)
{
    double mod = fmod(a, b);
    double div = (a - mod) / b;
    double fl = floor(div);
    if (div - fl > 0.5)
        fl += 1.0;
    return fl;
}

static uint32_t cut(double x)
{
    return x >= (double)LL_MAX_CAP ? LL_MAX_CAP : (uint32_t)x;
}

uint32_t ll_ss_cap_for(const ll_vserver *vs, const ll_pol *p)
{
    const ll_settings *s = &vs->pol.set;
    uint64_t steps = s->new_service_request_increment_interval == 0 ? 1 : p->increments;
    double others = others_rate(vs);
    if (s->new_service_request_unit == LL_PERCENT)
        return cut(py_floordiv((double)(steps * s->new_service_request) * others, 100.0));
    uint64_t cap = steps * s->new_service_request;
    if (s->new_service_request_increment_interval && others > 0 && (double)cap > others)
        cap = (uint64_t)others;  /* a final increment never gives it more than the others */
    return cap > LL_MAX_CAP ? LL_MAX_CAP : (uint32_t)cap;
}

/* The cap of a ramp that holds: the others' rate, rounded up (at least 1). */
static uint32_t fair_cap(const ll_vserver *vs)
{
    double c = ceil(others_rate(vs));
    return c < 1.0 ? 1u : cut(c);
}

static int is_open(const ll_vserver *vs, uint32_t i)
{
    const ll_svc *s = &vs->svc[i];
    return s->bound && ll_svc_open(s) && s->cap == LL_NO_CAP;
}

static double score(ll_vserver *vs, uint32_t slot)
{
    ll_info info;
    ll_service_info(vs, slot, &info);
    ll_method m = vs->method;
    double load = (m == LL_LEASTRESPONSETIME || m == LL_LRTM || m == LL_PEAKEWMA) ? (double)info.load / 1e6
                                                                                  : (double)info.load;
    return load * 10000.0 / info.weight;
}

/* Its Nw is at least the mean Nw of the open services. O(n). */
static int caught_up(ll_vserver *vs, uint32_t slot)
{
    double sum = 0.0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < vs->n_slots; i++)
        if (i != slot && is_open(vs, i)) {
            sum += score(vs, i);
            n++;
        }
    return n == 0 || score(vs, slot) >= sum / n;
}

/* slow_start_guard: whether the slot should not step up now (LL_HELD_*). O(n). */
static uint32_t unhealthy(ll_vserver *vs, uint32_t slot, ll_pol *p, uint64_t traffic)
{
    ll_info me, peer;
    ll_service_info(vs, slot, &me);
    uint64_t failures = me.failures - p->failure_mark;
    p->failure_mark = me.failures;
    double ttfbs = 0.0, peer_failures = 0.0;
    uint32_t n_ttfb = 0;
    uint64_t picked = 0, failed = 0;
    for (uint32_t i = 0; i < vs->n_slots; i++) {
        if (i == slot || !is_open(vs, i))
            continue;
        ll_service_info(vs, i, &peer);
        if (peer.ttfb_known) {
            ttfbs += peer.ttfb_us / 1e6;
            n_ttfb++;
        }
        picked += peer.selected;
        failed += peer.failures;
    }
    if (!me.ttfb_known && n_ttfb && p->increments)
        return LL_HELD_NO_TTFB;  /* past its first step: judged on evidence only */
    if (me.ttfb_known && n_ttfb && ttfbs > 0) {
        double ratio = (me.ttfb_us / 1e6) / (ttfbs / n_ttfb);
        if (ratio > vs->pol.set.slow_start_guard) {
            p->held_a = ratio;
            return LL_HELD_TTFB;
        }
    }
    if (traffic) {
        double rate = (double)failures / (double)traffic;
        peer_failures = picked ? (double)failed / (double)picked : 0.0;
        if (rate > 0.01 && rate > vs->pol.set.slow_start_guard * peer_failures) {
            p->held_a = rate;
            p->held_b = peer_failures;
            return LL_HELD_FAILURES;
        }
    }
    return LL_HELD_NONE;
}

void ll_ss_end(ll_vserver *vs, uint32_t slot, uint32_t why, double now)
{
    ll_pol *p = ll_pol_of(vs, slot);
    p->in_ramp = 0;
    vs->pol.n_ramps--;
    ll_set_cap(vs, slot, LL_NO_CAP);  /* the aggregates count it among the others now */
    ll_pol_event(vs, now, slot, why);
}

void ll_ss_end_all(ll_vserver *vs, double now)
{
    uint32_t why = vs->pol.set.new_service_request == 0 ? LL_EXIT_SWITCHED_OFF : LL_EXIT_NO_OTHER_UP;
    uint32_t end = ll_pol_end(vs);
    for (uint32_t i = end ? ll_pol_from(vs) : 0; i < end && vs->pol.n_ramps; i++)
        if (vs->svc[i].bound && ll_col_policy(vs)[i].in_ramp)
            ll_ss_end(vs, i, why, now);
    ll_pol_plan(vs, now);
}

/* Drops the slot's ramp without an exit (it cannot be picked, or slow start
 * does not apply to it any more). */
static void drop(ll_vserver *vs, uint32_t slot, double now)
{
    ll_pol *p = ll_pol_of(vs, slot);
    if (!p->in_ramp)
        return;
    p->in_ramp = 0;
    vs->pol.n_ramps--;
    ll_set_cap(vs, slot, LL_NO_CAP);
    ll_pol_plan(vs, now);
}

void ll_ss_maybe_begin(ll_vserver *vs, uint32_t slot, double now)
{
    const ll_settings *s = &vs->pol.set;
    const ll_svc *sv = &vs->svc[slot];
    ll_pol *p = ll_pol_of(vs, slot);
    if (s->new_service_request && (sv->ejected || sv->draining) && sv->state == LL_UP) {
        drop(vs, slot, now);  /* it cannot be picked: its ramp begins when it can, once */
        return;
    }
    if (s->new_service_request == 0 || sv->state != LL_UP || !ll_pol_others_up(vs, slot)) {
        drop(vs, slot, now);  /* off, or nobody else to take the surplus: its full share at once */
        return;
    }
    uint32_t interval = s->new_service_request_increment_interval;
    if (!p->in_ramp)
        vs->pol.n_ramps++;
    p->in_ramp = 1;
    ll_pol_member(vs, slot);
    p->start = now;
    p->increments = 0;
    p->cap = 0;
    p->next_boundary = interval ? now + interval : INFINITY;
    p->selected_mark = sv->selected;
    p->quiet = 0;
    p->paused = 0;
    p->paused_left = 0.0;
    p->holding = 0;
    p->failure_mark = s->slow_start_guard != 0.0 ? sv->failures : 0;
    p->held = LL_HELD_NONE;
    if (interval == 0)
        p->cap = ll_ss_cap_for(vs, p);
    ll_set_cap(vs, slot, p->cap);
    ll_pol_due(vs, p->next_boundary);
    ll_pol_plan(vs, now);
}

void ll_ss_pause(ll_vserver *vs, uint32_t slot, double now)
{
    ll_pol *p = ll_pol_of(vs, slot);
    if (!p || !p->in_ramp || p->paused)
        return;
    p->paused = 1;
    p->paused_left = p->next_boundary - now;  /* inf for a manual ramp */
    p->next_boundary = INFINITY;
    ll_pol_plan(vs, now);
}

void ll_ss_resume(ll_vserver *vs, uint32_t slot, double now)
{
    ll_pol *p = ll_pol_of(vs, slot);
    const ll_svc *sv = &vs->svc[slot];
    if (!p || !p->in_ramp || !p->paused || sv->ejected || sv->draining)
        return;  /* not paused, or still not to be picked */
    p->next_boundary = now + p->paused_left;
    p->paused = 0;
    ll_pol_due(vs, p->next_boundary);
    ll_pol_plan(vs, now);
}

/* One interval boundary of an automated ramp: the exits, then the increment.
 * 1 when the ramp ended. */
static int boundary(ll_vserver *vs, uint32_t slot, ll_pol *p, double now)
{
    const ll_settings *s = &vs->pol.set;
    uint64_t selected = vs->svc[slot].selected;
    uint64_t traffic = selected - p->selected_mark;
    p->selected_mark = selected;
    if (p->cap > 0)
        p->quiet = traffic ? 0 : p->quiet + 1;
    uint64_t total = vs->totals.last_up, up = vs->totals.up;
    p->next_boundary += s->new_service_request_increment_interval;
    if (p->quiet >= LL_NO_TRAFFIC_INTERVALS) {
        ll_ss_end(vs, slot, LL_EXIT_NO_TRAFFIC, now);
        return 1;
    }
    if (p->cap > 0 && total > 0 && total < p->cap) {
        ll_ss_end(vs, slot, LL_EXIT_RATE_BELOW, now);
        return 1;
    }
    if (p->holding) {
        if (caught_up(vs, slot)) {
            ll_ss_end(vs, slot, LL_EXIT_CAUGHT_UP, now);
            return 1;
        }
        p->cap = fair_cap(vs);
        return 0;
    }
    if (s->slow_start_guard != 0.0) {
        p->held = (uint8_t)unhealthy(vs, slot, p, traffic);
        if (p->held != LL_HELD_NONE) {  /* closed loop: one increment back, never below the first */
            p->increments = p->increments ? (p->increments > 1 ? p->increments - 1 : 1) : 0;
            p->cap = p->increments ? ll_ss_cap_for(vs, p) : 0;
            return 0;
        }
    }
    p->increments++;
    uint32_t why = 0;
    if (p->increments >= LL_MAX_INCREMENTS) {
        why = LL_EXIT_INCREMENTS;
    } else if (s->new_service_request_unit == LL_PERCENT
               && (uint64_t)p->increments * s->new_service_request >= 100) {
        why = LL_EXIT_PERCENT;
    } else {
        p->cap = ll_ss_cap_for(vs, p);
        if (total > 0 && (uint64_t)p->cap * up >= total)
            why = LL_EXIT_FAIR_SHARE;
    }
    if (!why)
        return 0;
    ll_method m = vs->method;
    if (s->slow_start_handover == LL_HANDOVER_CAUGHT_UP && (m == LL_LEASTBANDWIDTH || m == LL_LEASTPACKETS)
        && !caught_up(vs, slot)) {
        /* handing over to a window that still holds less than its peers' would send it
         * everything for seconds: hold at the fair share instead */
        p->holding = 1;
        p->cap = fair_cap(vs);
        return 0;
    }
    ll_ss_end(vs, slot, why, now);
    return 1;
}

void ll_ss_due(ll_vserver *vs, uint32_t slot, double now)
{
    ll_pol *p = ll_pol_of(vs, slot);
    while (p->next_boundary <= now)
        if (boundary(vs, slot, p, now))
            return;
    ll_set_cap(vs, slot, p->cap);
}

void ll_ss_manual_caps(ll_vserver *vs)
{
    ll_pol *col = ll_col_policy(vs);
    uint32_t end = ll_pol_end(vs);
    for (uint32_t i = end ? ll_pol_from(vs) : 0; col && i < end; i++)
        if (vs->svc[i].bound && col[i].in_ramp) {
            col[i].cap = ll_ss_cap_for(vs, &col[i]);
            ll_set_cap(vs, i, col[i].cap);
        }
}

void ll_ss_settings(ll_vserver *vs, const ll_settings *old, double now)
{
    const ll_settings *s = &vs->pol.set;
    uint32_t interval = s->new_service_request_increment_interval;
    if (s->new_service_request == 0) {
        ll_ss_end_all(vs, now);
        return;
    }
    ll_pol *col = ll_col_policy(vs);
    uint32_t end = ll_pol_end(vs);
    for (uint32_t i = end ? ll_pol_from(vs) : 0; i < end; i++) {
        ll_pol *p = &col[i];
        if (!vs->svc[i].bound || !p->in_ramp)
            continue;
        double due = p->paused ? now + p->paused_left : p->next_boundary;
        if (interval == 0) {
            due = INFINITY;
        } else if (old->new_service_request_increment_interval == 0) {
            /* manual -> automated: each ramp starts over from now */
            p->start = now;
            p->increments = p->cap = p->quiet = 0;
            due = now + interval;
        } else if (now + interval < due) {
            due = now + interval;  /* a new interval counts from now; a new rate from the next boundary */
        }
        if (p->paused)
            p->paused_left = due - now;  /* its clock still stands: only the time left changes */
        else
            ll_pol_due(vs, p->next_boundary = due);
        if (interval == 0)
            p->cap = ll_ss_cap_for(vs, p);
        ll_set_cap(vs, i, p->cap);
    }
}

int ll_slow_start_info(const ll_vserver *vs, uint32_t slot, ll_ramp_info *out)
{
    if (!ll_slot_ok(vs, slot))
        return -EINVAL;
    const ll_pol *p = ll_pol_of(vs, slot);
    if (!p || !p->in_ramp)
        return 0;
    out->start = p->start;
    out->cap = p->cap;
    out->increments = p->increments;
    out->held = p->held;
    out->held_a = p->held_a;
    out->held_b = p->held_b;
    out->manual = vs->pol.set.new_service_request_increment_interval == 0;
    return 1;
}
