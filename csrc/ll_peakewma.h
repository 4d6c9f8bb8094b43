/*
 * ll_peakewma.h - PEAKEWMA's latency estimate (internal), not the vendor's:
 * after Finagle's and Linkerd's peak-sensitive moving average. The pick is
 * the sampled family's (methods/sampled.h): two services drawn, the lower Nw;
 * its row (ll_methods.c) holds ll_peak_n as its N and ll_peak_observe
 * (through methods/sampled.c) as its end of a transaction.
 *
 * A service's estimate is a cost in microseconds and the clock reading of
 * its last sample. Between samples it decays towards zero,
 *     E(t) = cost * w(t - stamp),  w(d) = exp(-d / decay);
 * a status-200 TTFB above E(t) replaces it (the peak), one at or below it
 * is blended in: cost' = cost * w + rtt * (1 - w). N = E * (active + 1);
 * a service with no estimate has N 0 while idle and LL_PEAK_PENALTY +
 * active otherwise (it is tried, but not piled on).
 *
 * w is exact integer arithmetic, the same on every platform and in the
 * reference (src/leastload/engine/peakewma.py): d in whole microseconds times
 * 94548 / decay_us (94548 = round(65536 / ln 2)) is d / decay in steps of
 * ln(2) / 65536; the integer part halves w, each set bit j of the 16-bit
 * fraction multiplies it by 2^-(2^j / 65536) in 32-bit fixed point.
 *
 * The engine reads no clock: the caller gives every call's time with
 * ll_set_time() (vs->now), and the pick and the samples read it.
 */
#ifndef LL_PEAKEWMA_H
#define LL_PEAKEWMA_H

#include "ll_internal.h"

#define LL_PEAK_ONE ((uint64_t)1 << 32)             /* w = 1                          */
#define LL_PEAK_LOG2E_Q16 94548u                    /* round(65536 / ln 2)            */
#define LL_PEAK_DECAY_LIMIT 23                      /* w < 2^-32 past 23 decay times  */
#define LL_PEAK_PENALTY (UINT64_MAX - UINT32_MAX)   /* 2^64 - 2^32: above E * (active + 1) */

/* w(elapsed seconds) in 32-bit fixed point; no time passed or the clock
 * went back: 1. decay_us is 1..LL_MAX_TTFB_US. */
uint64_t ll_peak_decay_q32(double elapsed, uint32_t decay_us);

/* E(now) of a slot in microseconds (0: none yet). */
uint64_t ll_peak_estimate(const ll_vserver *vs, uint32_t slot);

/* N = E * (active + 1), or the no-estimate rule above: PEAKEWMA's row's N.
 * Out of line (a row's N is called through its pointer). */
uint64_t ll_peak_n(const ll_vserver *vs, uint32_t slot);

#endif /* LL_PEAKEWMA_H */
