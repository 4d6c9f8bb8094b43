/*
 * ll_method.h - a load-balancing method as one unit (internal).
 *
 * A method is one line of methods/list.h, which makes its row of
 * ll_methods[] (ll_methods.c): its family's ops table, its N, its key, the
 * per-service inputs its key reads and whether it moves with active
 * transactions. A family is one ll_family_ops, in the manner of HAProxy's
 * lbprm, exported by its file under methods/ (least.c, roundrobin.c,
 * hash.c, sampled.c): how it picks, how a key reaches the tree, what a
 * request key does. The vserver's common code (ll_vserver.c, ll_path.h)
 * calls through the row and its table, never by the method's name or a
 * switch on the family; the batch replay (ll_replay.c) runs a loop
 * specialised for each least-load method (calling its static inline key
 * and the family's pick of methods/least.h directly, as constants the
 * compiler inlines), else the generic loop, which goes through the table.
 *
 * Adding a least-X method touches one file in csrc: its LL_LEAST line in
 * methods/list.h (its value, its N as an expression, the inputs it reads,
 * counts_active), which gives its enum value, its N and key functions, its
 * row and its replay loop. A key that is not floor(Nw) (CUSTOMLOAD's) is
 * an LL_ROW line and its functions in methods/least.c. Outside csrc: its
 * reference rule (its N in src/leastload/engine/rules.py), its registry
 * row (engine/methods.py), its tests and docs.
 *
 * A new per-service input, in csrc: its column (one line of LL_COLUMNS in
 * ll_columns.h: the vserver then allocates, grows, clears, compacts and
 * counts it by itself, and ll_col_<name>() reads it), its LL_IN_* bit
 * here, its setter (declared in leastload.h, defined in ll_vserver.c: it
 * stores the value and refreshes the key of rows whose inputs have the
 * bit), and the N of its method (its line in methods/list.h); a field of
 * ll_info if info() is to show it. Outside csrc (docs/internals.md has a
 * worked example): its declaration in _cengine.pxd (CI checks it against
 * the header), the setter's binding (_engine.pyx) and its info() key
 * (_binding/reading.pxi), its stub (_interface.pyi), its argument check
 * (errors.py, shared by both engines), the reference's input and setter
 * (oracle.py), its field of rules.Seen and its rule, explain.py's Seen,
 * the registry row; tests and docs.
 */
#ifndef LL_METHOD_H
#define LL_METHOD_H

#include <stdint.h>

#include "leastload.h"
#include "ll_key.h"

typedef enum {
    LL_FAMILY_LEAST = 0,       /* lowest Nw = N * 10000 / weight, ties cyclic from the cursor */
    LL_FAMILY_ROUNDROBIN = 1,  /* weighted rounds in bind order                              */
    LL_FAMILY_HASH = 2,        /* the request's key decides (rendezvous)                     */
    LL_FAMILY_SAMPLED = 3,     /* two random eligible services, the lower Nw (P2C, PEAKEWMA)  */
} ll_family;

/* The per-service inputs a method's key reads besides the slot's scalars
 * (weight, active): a change of one refreshes the key of the methods that
 * read it, and of no other. */
enum {
    LL_IN_BYTES = 1u << 0,    /* the window's bytes (ll_record)          */
    LL_IN_PACKETS = 1u << 1,  /* the window's packets (ll_record)        */
    LL_IN_PROBE = 1u << 2,    /* the monitor's probe (ll_probe)          */
    LL_IN_CUSTOM = 1u << 3,   /* the reported load (ll_set_custom_load)  */
};

typedef uint64_t (*ll_n_fn)(const ll_vserver *vs, uint32_t slot);
typedef ll_key (*ll_key_fn)(const ll_vserver *vs, uint32_t slot);

/* A family: the part of the request path a method's family decides. */
typedef struct {
    const char *name;
    uint8_t id;          /* ll_family                                        */
    uint8_t startup_rr;  /* ll_set_startup_rr() applies: picks in bind order first */
    uint8_t draws;       /* the pick draws (vs->drawn): the pick's record keeps them */
    /* The slot a select would take now, -ENOENT when nothing is eligible; no
     * side effects on the vserver's choice state. *round and *rng come in
     * as the vserver's (rr_round, rng) and go out as the pick leaves them. */
    int64_t (*pick)(ll_vserver *vs, uint32_t *round, uint64_t *rng);
    /* Puts an eligible or LL_KEY_INF key into the tree. */
    void (*set_key)(ll_vserver *vs, uint32_t slot, ll_key key);
    /* The pick for a request key (ll_select_hash); NULL: the family ignores
     * the key and picks as select does. */
    int64_t (*pick_key)(const ll_vserver *vs, uint64_t key_hash);
} ll_family_ops;

typedef struct {
    const char *name;       /* as the vendor spells it                          */
    uint8_t supported;      /* 0: a reserved value, refused with -ENOTSUP        */
    uint8_t inputs;         /* LL_IN_*: the inputs its key reads                 */
    uint8_t counts_active;  /* the key moves when a transaction starts or ends   */
    uint8_t timed;          /* N moves with time: the tree keeps eligibility only,
                             * the pick computes the key (PEAKEWMA)              */
    const ll_family_ops *fam;
    ll_n_fn n;              /* N as ll_service_info() reports it                 */
    ll_key_fn key;          /* the key of an eligible slot                       */
    /* A finished transaction's TTFB, after the vserver's own smoothing; NULL: none. */
    void (*on_end)(ll_vserver *vs, uint32_t slot, uint32_t ttfb_us);
} ll_method_ops;

extern const ll_method_ops ll_methods[LL_METHOD_COUNT];

#endif /* LL_METHOD_H */
