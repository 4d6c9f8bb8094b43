/*
 * ll_ejection.c - passive outlier ejection (docs/embedding.md): a service
 * that failed outlier_failures times in a row is ejected for
 * outlier_ejection_time x its ejection count (at most 300 s), unless that
 * would eject more than outlier_max_ejection_percent of the bound services
 * or leave none to pick. One ejection is forgiven per healthy period since
 * its last return. It comes back as from DOWN to UP (slow start applies).
 * The reference states the same rules in ref_policy.py.
 */
#include <math.h>

#include "ll_internal.h"

void ll_ej_judge(ll_vserver *vs, uint32_t slot)
{
    ll_pol *p = ll_pol_of(vs, slot);
    const ll_settings *s = &vs->pol.set;
    if (!p || !s->outlier_failures)
        return;  /* set by ll_set_outlier_failures() alone: the caller judges */
    double now = vs->now;
    const ll_totals *t = &vs->totals;
    if (((uint64_t)t->ejected + 1) * 100 > (uint64_t)s->outlier_max_ejection_percent * vs->n_bound) {
        ll_pol_event(vs, now, slot, LL_EV_KEPT_PERCENT);
        return;
    }
    if ((int64_t)t->pickable - (vs->svc[slot].state == LL_UP) < 1) {
        ll_pol_event(vs, now, slot, LL_EV_KEPT_LAST);
        return;
    }
    if (p->has_returned) {  /* decay: one ejection forgiven per healthy period */
        double healthy = floor((now - p->returned) / s->outlier_ejection_time);
        healthy = healthy > 4e9 ? 4e9 : healthy < -4e9 ? -4e9 : healthy;  /* time that went back adds */
        int64_t left = (int64_t)p->ejections - (int64_t)healthy;
        p->ejections = left < 0 ? 0 : left > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)left;
    }
    p->has_record = 1;
    p->ejections += p->ejections != UINT32_MAX;
    p->since = now;
    double length = s->outlier_ejection_time * p->ejections;
    p->until = now + (length < LL_MAX_EJECTION_TIME ? length : LL_MAX_EJECTION_TIME);
    p->ejected = 1;
    vs->pol.n_records++;
    ll_pol_member(vs, slot);
    ll_pol_due(vs, p->until);
    ll_set_ejected(vs, slot, 1);
    ll_pol_event(vs, now, slot, LL_EV_EJECTED);
    if (vs->pol.n_ramps && !ll_pol_others_up(vs, -1))
        ll_ss_end_all(vs, now);  /* it was the last normal service: nobody takes the surplus */
    else
        ll_ss_pause(vs, slot, now);
    ll_pol_plan(vs, now);
}

void ll_ej_return(ll_vserver *vs, uint32_t slot, double now, uint32_t what)
{
    ll_pol *p = ll_pol_of(vs, slot);
    p->ejected = 0;
    vs->pol.n_records--;
    p->has_returned = 1;
    p->returned = now;
    ll_set_ejected(vs, slot, 0);
    ll_pol_event(vs, now, slot, what);
    ll_ss_maybe_begin(vs, slot, now);
}

int ll_end_ejection(ll_vserver *vs, uint32_t slot)
{
    if (!ll_slot_ok(vs, slot))
        return -EINVAL;
    ll_pol *p = ll_pol_of(vs, slot);
    if (!p || !p->ejected)
        return 0;
    ll_ej_return(vs, slot, vs->now, LL_EV_RETURNED_EARLY);
    ll_pol_plan(vs, vs->now);
    return 1;
}

int ll_ejection_of(const ll_vserver *vs, uint32_t slot, ll_ejection_info *out)
{
    if (!ll_slot_ok(vs, slot))
        return -EINVAL;
    const ll_pol *p = ll_pol_of(vs, slot);
    if (!p || !p->ejected)
        return 0;
    out->since = p->since;
    out->until = p->until;
    out->ejections = p->ejections;
    return 1;
}
