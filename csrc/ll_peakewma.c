/* ll_peakewma.c - PEAKEWMA's decay and samples (ll_peakewma.h). */
#include <math.h>

#include "ll_peakewma.h"

/* round(2^32 * 2^-(2^j / 65536)) for j = 0..15 */
static const uint32_t pow2_fraction[16] = {
    4294921870u, 4294876445u, 4294785595u, 4294603903u, 4294240540u, 4293513907u, 4292061010u, 4289156690u,
    4283353945u, 4271771996u, 4248701965u, 4202935003u, 4112874773u, 3938502376u, 3611622603u, 3037000500u,
};

uint64_t ll_peak_decay_q32(double elapsed, uint32_t decay_us)
{
    if (!(elapsed > 0.0))
        return LL_PEAK_ONE;
    double d = floor(elapsed * 1e6);
    if (d >= (double)LL_PEAK_DECAY_LIMIT * decay_us)
        return 0;
    /* d < 23 * 3.6e9 < 2^37, so d * 94548 < 2^54 */
    uint64_t steps = (uint64_t)d * LL_PEAK_LOG2E_Q16 / decay_us;
    uint64_t w = LL_PEAK_ONE;
    for (int j = 0; j < 16; j++)
        if (steps >> j & 1u)
            w = w * pow2_fraction[j] >> 32;  /* w <= 2^32: fits */
    return w >> (steps >> 16);  /* steps < 23 * 94548: a shift of at most 33 */
}

void ll_peak_observe(ll_vserver *vs, uint32_t slot, uint32_t rtt_us)
{
    ll_peak *p = &ll_col_peak(vs)[slot];
    uint64_t w = ll_peak_decay_q32(vs->now - p->stamp, vs->peak_decay_us);
    if (!p->known || rtt_us > ((uint64_t)p->cost_us * w >> 32))
        p->cost_us = rtt_us;  /* the peak: taken at once */
    else  /* both terms < 2^32 * 2^32 together: max(cost, rtt) * 2^32 */
        p->cost_us = (uint32_t)(((uint64_t)p->cost_us * w + (uint64_t)rtt_us * (LL_PEAK_ONE - w)) >> 32);
    p->stamp = vs->now;
    p->known = 1;
}

uint64_t ll_peak_estimate(const ll_vserver *vs, uint32_t slot)
{
    const ll_peak *p = ll_col_peak(vs) ? &ll_col_peak(vs)[slot] : NULL;
    if (!p || !p->known)
        return 0;
    /* cost < 2^32 and w <= 2^32: the product fits */
    return (uint64_t)p->cost_us * ll_peak_decay_q32(vs->now - p->stamp, vs->peak_decay_us) >> 32;
}

/* E <= LL_MAX_TTFB_US < 2^32 and active + 1 <= 2^32: E * (active + 1) stays
 * below LL_PEAK_PENALTY. */
uint64_t ll_peak_n(const ll_vserver *vs, uint32_t slot)
{
    uint64_t e = ll_peak_estimate(vs, slot), active = vs->svc[slot].active;
    if (e)
        return e * (active + 1);
    return active ? LL_PEAK_PENALTY + active : 0;
}
