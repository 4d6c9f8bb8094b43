/*
 * ll_floor.h - the floor the batch path is measured against (benchmarks).
 *
 * A bare loop that makes the replay's decisions on the same trace with as
 * little as this machine needs: a tournament tree whose nodes carry their
 * key packed with the slot (key << slot_bits | slot, so a node is one
 * 64-bit compare and no lookup), the replay's completion queue, and per
 * service only N. No vserver, no results but the choices, no per-call
 * state machine, no slow start, no events. `bench` times it beside
 * ll_replay_run() on the same trace and checks that the choices agree.
 *
 * Applies to LEASTCONNECTION and LEASTBANDWIDTH (over the 14-second window)
 * on a trace whose services are all bound, UP and uncapped, in trace order,
 * from a fresh vserver, with every TTFB and size the trace gives.
 */
#ifndef LL_FLOOR_H
#define LL_FLOOR_H

#include <stddef.h>
#include <stdint.h>

#include "leastload.h"
#include "ll_replay.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Replays `trace` over `n_services` services of `weights` (1..100), the
 * choice of request k into chosen[k]. 0; -EINVAL (another method, a weight
 * out of range, no service), -ENOMEM, or -EOVERFLOW (a key too wide to pack:
 * the floor does not apply to that trace). */
int ll_floor_replay(const ll_trace *trace, ll_method method, const uint8_t *weights,
                    uint32_t n_services, int32_t *chosen);

#ifdef __cplusplus
}
#endif
#endif /* LL_FLOOR_H */
