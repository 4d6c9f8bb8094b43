/*
 * ll_utilization.c - weights from the load the services report, after
 * gRPC's weighted round robin (the formula and its constants:
 * leastload/engine/utilization.py, the reference's statement):
 * weight = qps / (utilization + eps / qps), counted once its blackout has
 * passed and until it expires; with weights_from_utilization the weights
 * become the engine's once a second (ll_util_apply), the largest as 100.
 */
#include <math.h>

#include "ll_internal.h"

int ll_report_utilization(ll_vserver *vs, uint32_t slot, double qps, double eps, double utilization,
                          double *weight)
{
    if (!ll_slot_ok(vs, slot) || !(qps >= 0 && qps < INFINITY)
        || !(eps >= 0 && eps < INFINITY) || !(utilization >= 0 && utilization < INFINITY))
        return -EINVAL;
    if (ll_pol_need(vs) < 0)
        return -ENOMEM;
    ll_pol *p = ll_pol_of(vs, slot);
    double w = qps <= 0 || utilization <= 0 ? 0.0 : qps / (utilization + eps / qps * 1.0);
    *weight = w;
    if (w == 0.0)
        return 0;  /* gRPC ignores such a report: the last weight stays */
    if (!p->u_has_since) {
        p->u_has_since = 1;
        p->u_since = vs->now;
    }
    p->u_known = 1;
    p->u_weight = w;
    p->u_last = vs->now;
    return 0;
}

/* 1 and *w when the slot's reports give a weight at `now` (an expired one
 * starts its blackout over at its next report). */
static int weight_at(ll_vserver *vs, uint32_t slot, double now, double *w)
{
    ll_pol *p = ll_pol_of(vs, slot);
    if (!p || !p->u_known || !p->u_has_since)
        return 0;
    if (now - p->u_last >= LL_UTIL_EXPIRATION) {
        p->u_has_since = 0;
        return 0;
    }
    if (now - p->u_since < LL_UTIL_BLACKOUT)
        return 0;
    *w = p->u_weight;
    return 1;
}

int ll_utilization_weight(ll_vserver *vs, uint32_t slot, double *weight)
{
    if (!ll_slot_ok(vs, slot))
        return -EINVAL;
    return weight_at(vs, slot, vs->now, weight);
}

void ll_util_start_ticks(ll_vserver *vs, double now)
{
    vs->pol.tick_due = vs->pol.set.weights_from_utilization ? now + LL_UTIL_PERIOD : INFINITY;
    ll_pol_due(vs, vs->pol.tick_due);
    ll_pol_plan(vs, now);
}

void ll_util_apply(ll_vserver *vs, double now)
{
    /* two passes over the bound services: the known weights' mean and top,
     * then each service's engine weight (those without one get the mean) */
    double sum = 0.0, top = 0.0, w;
    uint32_t known = 0;
    for (uint32_t i = 0; i < vs->n_slots; i++)
        if (vs->svc[i].bound && weight_at(vs, i, now, &w)) {
            sum += w;
            known++;
        }
    double mean = known ? sum / known : 0.0;
    for (uint32_t i = 0; i < vs->n_slots && known >= 2; i++)
        if (vs->svc[i].bound) {
            double v = weight_at(vs, i, now, &w) ? w : mean;
            if (v > top)
                top = v;
        }
    for (uint32_t i = 0; i < vs->n_slots; i++) {
        if (!vs->svc[i].bound)
            continue;
        uint32_t weight = 1;
        if (known >= 2) {
            double v = weight_at(vs, i, now, &w) ? w : mean;
            double r = rint(100.0 * v / top);  /* half to even, as Python's round() */
            weight = r < 1.0 ? 1u : r > 100.0 ? 100u : (uint32_t)r;
        }
        if (vs->svc[i].weight != weight)
            ll_set_weight(vs, i, weight);
    }
    ll_util_start_ticks(vs, now);
}
