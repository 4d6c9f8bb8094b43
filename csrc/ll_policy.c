/*
 * ll_policy.c - the policy's driver: its settings, its events, its deadline,
 * and the lifecycle calls (bind, unbind, state, drain) that start, pause or
 * end slow start. The rules themselves are in ll_slowstart.c, ll_ejection.c
 * and ll_utilization.c.
 *
 * The deadline is the earliest due time (a ramp's boundary, an ejection's
 * end, the weights' update, and in manual PERCENT mode the second after the
 * last plan). Every call that ticks compares vs->now with it (ll_vserver.c's
 * advance): a call before it costs that compare. ll_pol_run() then handles
 * what fell due in time order (ties: bind order; the weights' update first),
 * as the reference's _on_deadline() does. The deadline kept is never later
 * than the exact one: a new due time lowers it in O(1) (ll_pol_due), one that
 * goes away leaves it, and a run that finds nothing due only sets it again.
 * Finding the exact next due time visits the slots (O(n)): at a run only,
 * never on a control call or a plain pick.
 */
#include <math.h>
#include <string.h>

#include "ll_internal.h"

ll_pol *ll_pol_of(const ll_vserver *vs, uint32_t slot)
{
    ll_pol *col = ll_col_policy(vs);
    return col && slot < vs->n_slots ? &col[slot] : NULL;
}

int ll_pol_need(ll_vserver *vs) { return ll_column_need(vs, LL_COL_POLICY); }

void ll_pol_init(ll_vserver *vs)
{
    ll_settings_default(&vs->pol.set);
    vs->pol.deadline = vs->pol.percent_due = vs->pol.tick_due = INFINITY;
    vs->pol.lo = 1;
    vs->pol.hi = 0;
}

/* The scans visit lo..hi only: a new service's ramp is at the end of bind
 * order, so a vserver of many services that ramps a few scans a few. */
void ll_pol_member(ll_vserver *vs, uint32_t slot)
{
    if (vs->pol.lo > vs->pol.hi) {
        vs->pol.lo = vs->pol.hi = slot;
        return;
    }
    if (slot < vs->pol.lo)
        vs->pol.lo = slot;
    if (slot > vs->pol.hi)
        vs->pol.hi = slot;
}

void ll_settings_default(ll_settings *out)
{
    memset(out, 0, sizeof *out);
    out->new_service_request_unit = LL_PER_SECOND;
    out->slow_start_handover = LL_HANDOVER_VENDOR;
    out->outlier_ejection_time = 30.0;
    out->outlier_max_ejection_percent = 50;
    out->window_seconds = LL_WINDOW_SECONDS;
    out->netmask = 0xFFFFFFFFu;
    out->v6netmasklen = 128;
    out->hashlength = 80;
    out->peakewma_decay = 10.0;
}

void ll_get_settings(const ll_vserver *vs, ll_settings *out) { *out = vs->pol.set; }

double ll_policy_deadline(const ll_vserver *vs) { return vs->pol.deadline; }

static int settings_ok(const ll_settings *s)
{
    uint32_t rate_max = s->new_service_request_unit == LL_PERCENT ? 100u : LL_MAX_CAP;
    return s->new_service_request <= rate_max && s->new_service_request_unit <= LL_PERCENT
           && s->new_service_request_increment_interval <= 86400u && s->slow_start_handover <= 1u
           && (s->slow_start_guard == 0.0 || (s->slow_start_guard >= 1.0 && s->slow_start_guard <= 100.0))
           && s->weights_from_utilization <= 1u && s->outlier_ejection_time > 0.0
           && s->outlier_ejection_time <= LL_MAX_EJECTION_TIME && s->outlier_max_ejection_percent <= 100u
           && s->window_seconds >= 1u && s->window_seconds <= LL_MAX_WINDOW_SECONDS && s->rtsp_nat <= 1u
           && s->v6netmasklen <= 128u && s->hashlength >= 1u && s->hashlength <= 4096u
           && s->peakewma_decay > 0.0 && s->peakewma_decay <= 3600.0;
}

int ll_set_settings(ll_vserver *vs, const ll_settings *settings)
{
    ll_settings s = *settings, old = vs->pol.set;
    if (!settings_ok(&s))
        return -EINVAL;
    int active = s.new_service_request || s.outlier_failures || s.weights_from_utilization;
    if (active && ll_pol_need(vs) < 0)
        return -ENOMEM;
    if (s.window_seconds != ll_window(vs)) {  /* the one change that can fail: first */
        int rc = ll_set_window(vs, s.window_seconds);
        if (rc < 0)
            return rc;
    }
    double now = vs->now;
    vs->pol.set = s;
    vs->outlier_k = s.outlier_failures;
    if (!ll_col_policy(vs))
        return 0;  /* never active: no ramp, no record, no report to change */
    /* as the reference's set(): the weights' ticks, then slow start, then ejection */
    vs->pol.set.outlier_failures = old.outlier_failures;
    vs->pol.set.outlier_ejection_time = old.outlier_ejection_time;
    vs->pol.set.outlier_max_ejection_percent = old.outlier_max_ejection_percent;
    if (s.weights_from_utilization != old.weights_from_utilization)
        ll_util_start_ticks(vs, now);
    ll_ss_settings(vs, &old, now);
    vs->pol.set.outlier_failures = s.outlier_failures;
    vs->pol.set.outlier_ejection_time = s.outlier_ejection_time;
    vs->pol.set.outlier_max_ejection_percent = s.outlier_max_ejection_percent;
    if (s.outlier_failures == 0)  /* ejection off: every ejected service returns now */
        for (uint32_t i = 0; i < vs->n_slots; i++)
            if (vs->svc[i].bound && ll_col_policy(vs)[i].ejected)
                ll_ej_return(vs, i, now, LL_EV_RETURNED);
    ll_pol_plan(vs, now);
    return 0;
}

/* ---- events -------------------------------------------------------------- */

void ll_pol_event(ll_vserver *vs, double now, uint32_t slot, uint32_t what)
{
    ll_event *e = &vs->pol.ring[vs->pol.n_events % LL_EVENTS];
    e->time = now;
    e->slot = slot;
    e->what = what;
    vs->pol.n_events++;
}

uint64_t ll_event_count(const ll_vserver *vs) { return vs->pol.n_events; }

int ll_event_at(const ll_vserver *vs, uint64_t i, ll_event *out)
{
    if (i >= vs->pol.n_events || vs->pol.n_events - i > LL_EVENTS)
        return -ENOENT;
    *out = vs->pol.ring[i % LL_EVENTS];
    return 0;
}

void ll_pol_compacted(ll_vserver *vs, const uint32_t *unused, uint32_t n_old)
{
    (void)unused;
    if (vs->pol.lo <= vs->pol.hi) {  /* the members move down: every slot, until the next run */
        vs->pol.lo = 0;
        vs->pol.hi = n_old;
    }
    /* before the slots move: each event's slot becomes its rank among the bound */
    uint64_t n = vs->pol.n_events < LL_EVENTS ? vs->pol.n_events : LL_EVENTS;
    for (uint64_t k = 0; k < n; k++) {
        ll_event *e = &vs->pol.ring[k];
        if (e->slot >= n_old || !vs->svc[e->slot].bound) {
            e->slot = LL_EVENT_NO_SLOT;
            continue;
        }
        uint32_t rank = 0;
        for (uint32_t i = 0; i < e->slot; i++)
            rank += vs->svc[i].bound;
        e->slot = rank;
    }
}

/* ---- the deadline -------------------------------------------------------- */

/* The range of slots to visit for the policy's members: from..end-1. */
uint32_t ll_pol_from(const ll_vserver *vs) { return vs->pol.lo; }

uint32_t ll_pol_end(const ll_vserver *vs)
{
    if (!ll_col_policy(vs) || (vs->pol.n_ramps == 0 && vs->pol.n_records == 0) || vs->pol.lo > vs->pol.hi)
        return 0;
    return vs->pol.hi + 1 < vs->n_slots ? vs->pol.hi + 1 : vs->n_slots;
}

/* The earliest due time now, exactly; lo..hi narrowed to the members found. */
static double exact_deadline(ll_vserver *vs)
{
    double d = vs->pol.tick_due;
    if (vs->pol.percent_due < d)
        d = vs->pol.percent_due;
    const ll_pol *col = ll_col_policy(vs);
    uint32_t end = ll_pol_end(vs), lo = 1, hi = 0;
    for (uint32_t i = end ? vs->pol.lo : 0; i < end; i++) {
        const ll_pol *p = &col[i];
        if (!p->ejected && !p->in_ramp)
            continue;
        if (lo > hi)
            lo = i;
        hi = i;
        if (p->ejected && p->until < d)
            d = p->until;
        if (p->in_ramp && !p->paused && p->next_boundary < d)
            d = p->next_boundary;
    }
    vs->pol.lo = lo;
    vs->pol.hi = hi;
    return d;
}

void ll_pol_due(ll_vserver *vs, double t)
{
    if (t < vs->pol.deadline)
        vs->pol.deadline = t;
}

void ll_pol_plan(ll_vserver *vs, double now)
{
    const ll_settings *s = &vs->pol.set;
    vs->pol.percent_due = INFINITY;
    if (vs->pol.n_ramps && s->new_service_request_increment_interval == 0 && s->new_service_request_unit == LL_PERCENT)
        vs->pol.percent_due = floor(now) + 1.0;  /* manual PERCENT follows the others' rate: once a second */
    ll_pol_due(vs, vs->pol.percent_due);
}

void ll_pol_run(ll_vserver *vs, double now)
{
    double due = exact_deadline(vs);
    vs->pol.deadline = due;
    if (!(now >= due))
        return;
    vs->pol.deadline = INFINITY;  /* no re-entry while the rules read the engine */
    ll_pol *col = ll_col_policy(vs);
    for (;;) {
        /* the earliest due item: (time, slot, kind); the weights' update is slot -1 */
        double t = INFINITY;
        int64_t at = -2;
        if (vs->pol.tick_due <= now) {
            t = vs->pol.tick_due;
            at = -1;
        }
        uint32_t end = ll_pol_end(vs);
        for (uint32_t i = end ? vs->pol.lo : 0; i < end; i++) {
            const ll_pol *p = &col[i];
            double d = p->ejected ? p->until : p->in_ramp && !p->paused ? p->next_boundary : INFINITY;
            if (d <= now && d < t) {
                t = d;
                at = i;
            }
        }
        if (at == -2)
            break;
        if (at == -1)
            ll_util_apply(vs, now);
        else if (col[at].ejected)
            ll_ej_return(vs, (uint32_t)at, now, LL_EV_RETURNED);
        else
            ll_ss_due(vs, (uint32_t)at, now);
    }
    if (vs->pol.set.new_service_request_increment_interval == 0)
        ll_ss_manual_caps(vs);
    ll_pol_plan(vs, now);
    vs->pol.deadline = exact_deadline(vs);
}

/* ---- the lifecycle -------------------------------------------------------- */

/* A service other than `besides` (-1: none) that can take what slow start
 * holds back: UP, not draining, not ejected, not capped. O(1). */
int ll_pol_others_up(const ll_vserver *vs, int64_t besides)
{
    uint32_t others = vs->totals.open;
    if (besides >= 0) {
        const ll_svc *s = &vs->svc[besides];
        if (s->bound && ll_svc_open(s) && s->cap == LL_NO_CAP)
            others--;
    }
    return others > 0;
}

void ll_pol_bound(ll_vserver *vs, uint32_t slot)
{
    if (ll_col_policy(vs))
        ll_ss_maybe_begin(vs, slot, vs->now);
}

int ll_pol_unbinding(ll_vserver *vs, uint32_t slot)
{
    ll_pol *p = ll_pol_of(vs, slot);
    int had_ramp = p && p->in_ramp;
    vs->pol.n_ramps -= had_ramp;
    vs->pol.n_records -= p && p->ejected;
    return had_ramp;
}

void ll_pol_unbound(ll_vserver *vs, int had_ramp)
{
    double now = vs->now;
    if (had_ramp)
        ll_pol_plan(vs, now);
    else if (vs->pol.n_ramps && !ll_pol_others_up(vs, -1))
        ll_ss_end_all(vs, now);  /* the last normal service left: nobody takes the surplus */
}

void ll_pol_state(ll_vserver *vs, uint32_t slot, int was_down, ll_state state)
{
    double now = vs->now;
    if (!ll_col_policy(vs))
        return;
    if (was_down && state == LL_UP)
        ll_ss_maybe_begin(vs, slot, now);
    else if (!ll_pol_others_up(vs, -1) && vs->pol.n_ramps)
        ll_ss_end_all(vs, now);  /* nobody left to take the surplus */
    else if (state != LL_UP)
        ll_ss_pause(vs, slot, now);
    else
        ll_ss_resume(vs, slot, now);  /* OUT_OF_SERVICE -> UP: the ramp goes on where it stood */
}

void ll_pol_draining(ll_vserver *vs, uint32_t slot)
{
    double now = vs->now;
    if (!ll_col_policy(vs))
        return;
    if (vs->pol.n_ramps && !ll_pol_others_up(vs, -1))
        ll_ss_end_all(vs, now);  /* it was the last normal service: nobody takes the surplus */
    else
        ll_ss_pause(vs, slot, now);
}
