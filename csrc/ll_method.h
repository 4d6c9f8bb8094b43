/*
 * ll_method.h - a load-balancing method as one unit (internal).
 *
 * A method is one row of ll_methods[] (ll_methods.c): its family, what its
 * N is, and whether N moves with active transactions; the family's file
 * holds how it scores a service and how it picks (ll_least.h,
 * ll_roundrobin.h). The vserver's common code (ll_vserver.c, ll_path.h)
 * asks the row, never the method's name; the batch replay (ll_replay.c)
 * runs a loop specialised for the row's shape when it has one, else the
 * generic loop.
 *
 * Adding a least-X method: its value in leastload.h's ll_method, its row
 * in ll_methods.c; if its N is new, a load kind here and its case in
 * ll_least.h (ll_least_n_as); if it reads a new per-service input, a column
 * (ll_columns.h), which the vserver then allocates, grows, clears and
 * compacts by itself. Outside csrc: its reference rule (its N in
 * src/leastload/engine/rules.py), its registry row (engine/methods.py), its
 * tests and docs.
 */
#ifndef LL_METHOD_H
#define LL_METHOD_H

#include <stdint.h>

#include "leastload.h"

typedef enum {
    LL_FAMILY_LEAST = 0,       /* lowest Nw = N * 10000 / weight, ties cyclic from the cursor */
    LL_FAMILY_ROUNDROBIN = 1,  /* weighted rounds in bind order                              */
    LL_FAMILY_HASH = 2,        /* the request's key decides (rendezvous)                     */
    LL_FAMILY_SAMPLED = 3,     /* two random eligible services, the lower Nw (P2C, PEAKEWMA)  */
} ll_family;

/* The kinds from LL_N_CUSTOM on have keys that are not floor(Nw) (ll_least.h). */
typedef enum {
    LL_N_ACTIVE = 0,        /* open transactions                                */
    LL_N_ACTIVE_TTFB = 1,   /* open transactions x smoothed TTFB (us)           */
    LL_N_BYTES = 2,         /* bytes in the window                              */
    LL_N_PACKETS = 3,       /* packets in the window                            */
    LL_N_ACTIVE_PROBE = 4,  /* open transactions x smoothed monitor probe (us)  */
    LL_N_CUSTOM = 5,        /* the load the caller reported (ll_set_custom_load) */
    LL_N_PEAK = 6,          /* latency estimate x (active + 1), at the call's time (ll_peakewma.h) */
} ll_load_kind;

typedef struct {
    const char *name;       /* as the vendor spells it                        */
    uint8_t supported;      /* 0: a reserved value, refused with -ENOTSUP      */
    uint8_t family;         /* ll_family                                      */
    uint8_t load;           /* ll_load_kind: what N is (ROUNDROBIN: reported only) */
    uint8_t counts_active;  /* the key moves when a transaction starts or ends */
} ll_method_ops;

extern const ll_method_ops ll_methods[LL_METHOD_COUNT];

#endif /* LL_METHOD_H */
