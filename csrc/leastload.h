/*
 * leastload.h - the selection engine of one load-balancing virtual server.
 *
 * Plain C11, no Python. The engine never reads a clock: every call that can
 * observe time takes the current second (floor of the caller's clock) as an
 * argument, so tests and simulations are deterministic.
 *
 * Services live in "slots". Slot order is bind order, which is also the
 * round-robin order; unbinding leaves a hole until ll_compact() closes the
 * holes (order kept). Slot numbers are the caller's handles.
 *
 * Errors: functions return 0 (or a non-negative result) on success and a
 * negative errno value on failure; on failure nothing has changed, except
 * that the window may have been moved forward to `sec` (time passing is not
 * a change made by the call).
 *   -EINVAL     an argument is out of range (slot, weight, state, method)
 *   -ENOENT     ll_select: no service is UP and eligible
 *   -EOVERFLOW  a counter would leave its documented range
 *   -ENOMEM     allocation failed
 *   -ERANGE     ll_finish on a service with no active transaction
 *   -ENOTSUP    a method this engine does not implement (yet)
 *   -ENOSPC     a shared vserver's fixed capacity is full (ll_shared_open)
 */
#ifndef LEASTLOAD_H
#define LEASTLOAD_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#ifndef EUSERS
/* Windows has none: WSAEUSERS, the number Python's errno.EUSERS has there */
#define EUSERS 10068
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define LL_WINDOW_SECONDS 14     /* the bytes/packets window's default length, seconds */
#define LL_MAX_WINDOW_SECONDS 60 /* ll_set_window: 1..this                 */
#define LL_MAX_WEIGHT 100        /* weights are 1..LL_MAX_WEIGHT            */
#define LL_MAX_TTFB_US 3600000000u /* one hour: keeps active*TTFB in 64 bits */
#define LL_NO_CAP UINT32_MAX     /* ll_set_cap: the service is not capped   */

/* The methods, one line each in methods/list.h: their values are this
 * enum's (LL_LEASTCONNECTION = 1, ...; never renumbered), their names
 * ll_method_name()'s. A value whose row is not supported yet is refused
 * with -ENOTSUP (ll_method_supported()). The Python registry checks its
 * names and values against ll_method_name() at import. */
#define LL_LEAST(ID, value, ...) LL_##ID = value,
#define LL_ROW(ID, value, ...) LL_##ID = value,
typedef enum {
#include "methods/list.h"
} ll_method;
#undef LL_LEAST
#undef LL_ROW

/* How many methods there are: one more than the highest value. */
#define LL_LEAST(ID, ...) LL_COUNT_##ID,
#define LL_ROW(ID, ...) LL_COUNT_##ID,
enum {
#include "methods/list.h"
    LL_METHOD_COUNT
};
#undef LL_LEAST
#undef LL_ROW

/* The method's name as the vendor spells it, or NULL out of range. */
const char *ll_method_name(int method);
/* 1 when this engine implements the method. */
int ll_method_supported(int method);

typedef enum { LL_UP = 0, LL_DOWN = 1, LL_OUT_OF_SERVICE = 2, LL_STATE_COUNT = 3 } ll_state;

typedef struct ll_vserver ll_vserver;

/* What ll_service_info() reports about one slot. */
typedef struct {
    uint64_t bytes;          /* bytes in the current 14-second window      */
    uint64_t packets;        /* packets in the current 14-second window    */
    uint64_t load;           /* N of the vserver's method (LRT, LRTM: microseconds) */
    uint64_t selected;       /* selections since bind                      */
    uint32_t active;         /* open transactions                          */
    uint32_t ttfb_us;        /* smoothed TTFB in microseconds (0: none yet) */
    uint32_t cap;            /* slow-start cap per second, LL_NO_CAP if none */
    uint32_t sel_this_sec;   /* selections in the current second           */
    uint32_t sel_last_sec;   /* selections in the previous second          */
    uint8_t weight;
    uint8_t state;
    uint8_t bound;           /* 0 for a hole left by ll_unbind             */
    uint8_t ttfb_known;      /* 1 once a status-200 TTFB was recorded      */
    uint8_t draining;        /* ll_set_draining: no new picks              */
    uint8_t ejected;         /* ll_set_ejected: no picks until it returns  */
    uint32_t fails_in_row;   /* consecutive failed transactions            */
    uint64_t failures;       /* failed transactions since bind             */
    uint32_t probe_us;       /* smoothed monitor response time (LRTM), us  */
    uint8_t probe_known;     /* 1 once a probe was recorded                */
    uint8_t custom_over;     /* CUSTOMLOAD: a metric at or over its threshold */
    uint64_t custom_load;    /* CUSTOMLOAD: the reported load              */
    uint64_t peak_us;        /* PEAKEWMA: the latency estimate now, us     */
    uint8_t peak_known;      /* PEAKEWMA: 1 once a sample was taken        */
} ll_info;

/* The last charged pick, as explain() needs it (ll_last_pick). Kept by
 * every pick at the cost of a few stores; slots follow ll_compact(). */
typedef struct {
    int64_t slot;            /* the slot picked; -1: none yet, or it was unbound */
    int64_t cursor;          /* the cursor before the pick (-1: before the first) */
    uint32_t rr_round;       /* ROUNDROBIN's round before the pick         */
    uint32_t startup;        /* 1: a startup round-robin pick              */
    int64_t drawn[2];        /* P2C, PEAKEWMA: the two slots drawn (-1: none) */
} ll_pick_record;

/* Aggregates over the bound services, kept up to date by every call that
 * changes a state, a flag, a cap or the per-second counters: O(1) to read.
 * "pickable" = UP, not draining, not ejected; "open" = pickable and without
 * a slow-start cap (a service that can take what slow start holds back). */
typedef struct {
    uint32_t bound;          /* bound services                             */
    uint32_t up;             /* ... in state UP                            */
    uint32_t open;           /* ... pickable and without a slow-start cap  */
    uint32_t pickable;       /* ... UP, not draining and not ejected       */
    uint32_t ejected;        /* ... ejected (any state)                    */
    uint64_t last_up;        /* selections in the last second, UP services */
    uint64_t last_open;      /* the same, open services                    */
} ll_totals;

/* ll_finish()'s non-negative result: what the caller must act on. */
enum {
    LL_END_DRAINED = 1,      /* a draining service has no open transaction left */
    LL_END_OUTLIER = 2       /* consecutive failures reached the outlier threshold */
};

/* Creates an empty vserver whose window starts at second `sec` (its time,
 * ll_set_time, starts at `sec` too).
 * Returns NULL when memory is short or `method` is unknown. */
ll_vserver *ll_create(ll_method method, int64_t sec);
/* Frees everything; NULL is accepted. */
void ll_destroy(ll_vserver *vs);

/* Appends a service at the end of bind order. Returns its slot (>= 0), or
 * -EINVAL (weight), -ENOMEM, -EOVERFLOW (already 2^30 slots, holes included). */
int64_t ll_bind(ll_vserver *vs, uint32_t weight);
/* Removes a service; its slot becomes a hole. -EINVAL for a bad slot. */
int ll_unbind(ll_vserver *vs, uint32_t slot);
/* Makes room for `slots` slots in all (never shrinks), so that binding
 * that many costs no reallocation. 0, -EINVAL (over 2^30), -ENOMEM. */
int ll_reserve(ll_vserver *vs, uint32_t slots);
/* Number of slots in use, holes included (the bound range is 0..this-1). */
uint32_t ll_slot_count(const ll_vserver *vs);
/* Number of bound services. */
uint32_t ll_bound_count(const ll_vserver *vs);
/* Closes the holes, keeping bind order and the round-robin cursor.
 * Slot i moves to the number of bound slots before it. O(n). */
void ll_compact(ll_vserver *vs);

int ll_set_weight(ll_vserver *vs, uint32_t slot, uint32_t weight);
int ll_set_state(ll_vserver *vs, uint32_t slot, ll_state state);
/* Draining: the service gets no new picks (idempotent). The engine does
 * not unbind: the caller does when ll_finish() reports LL_END_DRAINED, or
 * at once if nothing is active. -EINVAL for a bad slot. O(log n). */
int ll_set_draining(ll_vserver *vs, uint32_t slot);
/* Ejected services get no picks. Ejecting resets the consecutive failure
 * count. -EINVAL for a bad slot. O(log n). */
int ll_set_ejected(ll_vserver *vs, uint32_t slot, int ejected);
/* ll_finish() reports LL_END_OUTLIER once a service that is neither
 * ejected nor draining has failed `k` times in a row (0: never). */
void ll_set_outlier_failures(ll_vserver *vs, uint32_t k);
/* The aggregates (see ll_totals). */
void ll_get_totals(const ll_vserver *vs, ll_totals *out);
/* Changes the method; restarts startup round robin (ll_set_startup_rr).
 * -ENOMEM the first time PEAKEWMA is set if its estimates cannot be had. */
int ll_set_method(ll_vserver *vs, ll_method method);
ll_method ll_get_method(const ll_vserver *vs);
/* The bytes/packets window's length in seconds (1..LL_MAX_WINDOW_SECONDS,
 * LL_WINDOW_SECONDS by default). Traffic of the last min(old, new) seconds
 * is kept; O(services x seconds). -EINVAL, -ENOMEM (nothing changed). */
int ll_set_window(ll_vserver *vs, uint32_t seconds);
uint32_t ll_window(const ll_vserver *vs);
/* The caller's clock in seconds at this call: PEAKEWMA's time (its samples
 * and its picks read it). Set it before every call that ticks; the engine
 * reads no clock. */
void ll_set_time(ll_vserver *vs, double now);
/* PEAKEWMA's decay time in microseconds (1..LL_MAX_TTFB_US; default 10 s).
 * -EINVAL out of range. */
int ll_set_peak_decay(ll_vserver *vs, uint32_t decay_us);
/* Seeds P2C's draws (splitmix64; the same sequence as the reference's). */
void ll_set_rng_seed(ll_vserver *vs, uint64_t seed);
/* Requests served plain round robin after the method is set (0: none). */
void ll_set_startup_rr(ll_vserver *vs, uint64_t requests);
uint64_t ll_startup_rr_left(const ll_vserver *vs);
/* Slow-start cap: the service is eligible only while it has been selected
 * fewer than `cap` times in the current second. LL_NO_CAP removes it. */
int ll_set_cap(ll_vserver *vs, uint32_t slot, uint32_t cap);

/* Moves the window to second `sec` (earlier seconds: no time passes).
 * Returns the number of seconds the window moved. */
int64_t ll_advance(ll_vserver *vs, int64_t sec);
int64_t ll_current_second(const ll_vserver *vs);
/* Slot selected last (-1: none yet); round of weighted ROUNDROBIN. */
int64_t ll_cursor(const ll_vserver *vs);
uint32_t ll_rr_round(const ll_vserver *vs);
/* 1 when the tree keeps the exact wide keys, 0 when it packs them into
 * 64-bit nodes (ll_tree.h): the same answers; for tests. */
int ll_tree_is_wide(const ll_vserver *vs);

/* Picks a service at second `sec` and counts one new active transaction on
 * it. Returns its slot, -ENOENT if none is eligible, -EOVERFLOW if the
 * chosen service already has UINT32_MAX active transactions (ll_full_slot()
 * then names it).
 * Never allocates. O(log n). */
int64_t ll_select(ll_vserver *vs, int64_t sec);
uint32_t ll_full_slot(const ll_vserver *vs);
/* ll_select() with the slots in `excluded` treated as not eligible for this
 * pick only (invalid slots and repeats are ignored). Never allocates.
 * O((1 + n_excluded) log n). */
int64_t ll_select_excluding(ll_vserver *vs, int64_t sec, const uint32_t *excluded, size_t n_excluded);
/* The slot ll_select() would pick at `sec`, without picking it (the window
 * does move). -ENOENT if none is eligible. */
int64_t ll_peek(ll_vserver *vs, int64_t sec);
/* Adds traffic to the current bucket. -EOVERFLOW if a window total would
 * pass UINT64_MAX (nothing is added then). */
int ll_record(ll_vserver *vs, uint32_t slot, int64_t sec, uint64_t bytes, uint64_t packets);
/* One more active transaction without a selection. */
int ll_begin(ll_vserver *vs, uint32_t slot);
/* Ends one active transaction. With has_ttfb, ttfb_us (<= LL_MAX_TTFB_US)
 * updates the smoothed TTFB: the first sample sets it, later ones move it
 * an eighth of the way, rounded half up. `failed` (no response, or a 5xx)
 * counts a failure and one more in a row; otherwise the row is reset.
 * Returns 0 or LL_END_* bits for the caller to act on; -ERANGE if nothing
 * is active. */
int ll_finish(ll_vserver *vs, uint32_t slot, int has_ttfb, uint32_t ttfb_us, int failed);

/* A monitor probe's response time (LRTM's input, under any method): the
 * first sample sets the service's average, later ones move it an eighth of
 * the way, rounded half up, as ll_finish() does for TTFB. rtt_us <=
 * LL_MAX_TTFB_US. -ENOMEM the first time if the probe array cannot be had. */
int ll_probe(ll_vserver *vs, uint32_t slot, uint32_t rtt_us);
/* CUSTOMLOAD's input: the service's load as its metrics give it, and
 * whether one of them is at or over its threshold (then it is not
 * eligible under CUSTOMLOAD). -ENOMEM the first time if the array cannot
 * be had. */
int ll_set_custom_load(ll_vserver *vs, uint32_t slot, uint64_t load, int over_threshold);

int ll_service_info(const ll_vserver *vs, uint32_t slot, ll_info *out);

/* ---- the hash methods ---------------------------------------------------
 * The caller hashes each service's name once (ll_set_name_hash, after
 * ll_bind) and each request's key (XXH64 with the vserver's seed, ll_xxh64.h).
 * ll_select_hash() picks by weighted rendezvous hashing over the eligible
 * slots (ll_hash.c) on a hash method, and as ll_select_excluding() on any
 * other method (the key is ignored). O(n), never allocates. */
int ll_set_name_hash(ll_vserver *vs, uint32_t slot, uint64_t name_hash);
int64_t ll_select_hash(ll_vserver *vs, int64_t sec, uint64_t key_hash, const uint32_t *excluded, size_t n_excluded);
/* The last charged pick (see ll_pick_record). */
void ll_last_pick(const ll_vserver *vs, ll_pick_record *out);
/* Bytes allocated by the engine (for the memory figures). */
size_t ll_memory_bytes(const ll_vserver *vs);

/* ---- the policy: slow start, passive ejection, weights from utilization ----
 * The rules of docs/slow-start.md and docs/embedding.md, run by the core at
 * the time the caller last gave ll_set_time(): a call that ticks (ll_select*,
 * ll_peek, ll_record, ll_advance) runs whatever fell due by then (interval
 * boundaries, ejection ends, the weights' update) before it does its own
 * work; a call whose time reaches no due time pays one compare. ll_bind,
 * ll_unbind, ll_set_state, ll_set_draining and ll_finish apply the policy's
 * part at that time too: set it before them. */

/* new_service_request_unit, slow_start_handover */
enum { LL_PER_SECOND = 0, LL_PERCENT = 1 };
enum { LL_HANDOVER_VENDOR = 0, LL_HANDOVER_CAUGHT_UP = 1 };

/* The vserver's settings, one field per row of the Python settings table
 * (leastload/engine/settings.py, which tools/check_c_mirrors.py holds to
 * this struct): the policy's, and those the core only keeps for every
 * process of a shared vserver to read (startup_rr_factor, rtsp_nat and the
 * hash methods' are the callers'). Choices are indices. */
typedef struct {
    uint32_t new_service_request;             /* 0: slow start off; PERCENT: <= 100 */
    uint32_t new_service_request_unit;        /* LL_PER_SECOND, LL_PERCENT          */
    uint32_t new_service_request_increment_interval; /* seconds, <= 86400; 0: manual */
    uint32_t slow_start_handover;             /* LL_HANDOVER_*                      */
    double slow_start_guard;                  /* 0 (off) or 1..100                  */
    uint32_t weights_from_utilization;        /* 0 or 1                             */
    uint32_t outlier_failures;                /* failures in a row that eject; 0: off */
    double outlier_ejection_time;             /* seconds, > 0, <= 300               */
    uint32_t outlier_max_ejection_percent;    /* 0..100                             */
    uint32_t window_seconds;                  /* 1..LL_MAX_WINDOW_SECONDS           */
    uint64_t startup_rr_factor;               /* kept for the callers               */
    uint32_t rtsp_nat;                        /* kept for the callers               */
    uint32_t netmask;                         /* kept: the IPv4 mask, host order    */
    uint32_t v6netmasklen;                    /* kept                               */
    uint32_t hashlength;                      /* kept                               */
    uint64_t hash_seed;                       /* kept                               */
    double peakewma_decay;                    /* kept (ll_set_peak_decay applies it) */
} ll_settings;

/* The defaults (the settings table's). */
void ll_settings_default(ll_settings *out);
/* Replaces the settings at ll_set_time()'s time, with the effects `set lb
 * vserver` has on ramps and ejections (docs/slow-start.md). -EINVAL when a
 * field is out of range, -ENOMEM (window, or the policy's column): nothing
 * changed then. */
int ll_set_settings(ll_vserver *vs, const ll_settings *settings);
void ll_get_settings(const ll_vserver *vs, ll_settings *out);
/* The time the policy runs next at the latest (INFINITY: nothing due). */
double ll_policy_deadline(const ll_vserver *vs);

/* What happened: slow-start exits (why) and ejection events. */
enum {
    LL_EXIT_SWITCHED_OFF = 1, LL_EXIT_NO_OTHER_UP, LL_EXIT_NO_TRAFFIC, LL_EXIT_RATE_BELOW,
    LL_EXIT_CAUGHT_UP, LL_EXIT_INCREMENTS, LL_EXIT_PERCENT, LL_EXIT_FAIR_SHARE,
    LL_EV_EJECTED = 16, LL_EV_RETURNED, LL_EV_RETURNED_EARLY, LL_EV_KEPT_PERCENT, LL_EV_KEPT_LAST
};
#define LL_EVENTS 256            /* the ring keeps the newest this many        */
#define LL_EVENT_NO_SLOT UINT32_MAX /* the service was unbound and its slot closed */
typedef struct {
    double time;             /* the policy's time when it happened              */
    uint32_t slot;           /* the service (slots follow ll_compact)           */
    uint32_t what;           /* LL_EXIT_* or LL_EV_*                            */
} ll_event;
/* Events so far (the ring's positions are 0 .. this-1). */
uint64_t ll_event_count(const ll_vserver *vs);
/* Event number i: 0, or -ENOENT when it is not in the ring (not yet, or
 * overwritten: only the newest LL_EVENTS are kept). */
int ll_event_at(const ll_vserver *vs, uint64_t i, ll_event *out);

/* slow_start_guard: why the last boundary held a ramp back. */
enum { LL_HELD_NONE = 0, LL_HELD_NO_TTFB, LL_HELD_TTFB, LL_HELD_FAILURES };
typedef struct {
    double start;            /* when it became new                             */
    double held_a, held_b;   /* TTFB: its ratio to the peers'; FAILURES: its rate, the peers' */
    uint32_t cap;            /* requests this second                           */
    uint32_t increments;     /* boundaries passed (automated)                  */
    uint32_t held;           /* LL_HELD_*                                       */
    uint32_t manual;         /* 1: manual mode                                 */
} ll_ramp_info;
/* 1 and *out when the slot is in slow start, 0 when not, -EINVAL (slot). */
int ll_slow_start_info(const ll_vserver *vs, uint32_t slot, ll_ramp_info *out);
typedef struct {
    double since, until;     /* the ejection under way                         */
    uint32_t ejections;      /* ejections so far, after decay                  */
} ll_ejection_info;
/* 1 and *out when the slot is ejected now, 0 when not, -EINVAL (slot). */
int ll_ejection_of(const ll_vserver *vs, uint32_t slot, ll_ejection_info *out);
/* Ends the slot's ejection now, as its end time would (slow start applies
 * as after DOWN -> UP): 1, or 0 when it was not ejected; -EINVAL (slot). */
int ll_end_ejection(ll_vserver *vs, uint32_t slot);
/* A load report of the slot (gRPC's weighted round robin: queries and
 * errors per second, utilization): its weight in *weight (0: none). With
 * weights_from_utilization the reports' weights become the engine's once a
 * second. -EINVAL (slot, or a value not finite and >= 0), -ENOMEM. */
int ll_report_utilization(ll_vserver *vs, uint32_t slot, double qps, double eps, double utilization,
                          double *weight);
/* 1 and the slot's weight from its reports now, 0 when none (no report, its
 * blackout, or expired), -EINVAL. */
int ll_utilization_weight(ll_vserver *vs, uint32_t slot, double *weight);

/* ---- a vserver shared by processes (ll_shared.c; the system's part in ll_shared_os.h) ----
 * One shared-memory segment holds a whole vserver, laid out at fixed
 * offsets for a capacity chosen once, with a lock that outlives a holder's
 * death (Linux: a robust mutex; macOS: an owner word; Windows: a named mutex).
 * Any process (any language) maps it by name with ll_shared_open() and then
 * calls the functions above on the vserver ll_shared_lock() hands it, between
 * ll_shared_lock() and ll_shared_unlock(): every such span is one atomic step
 * for all the processes. Open transactions are ledgered per process: those
 * of a process that died (kill -9 included) are ended with no outcome
 * (ll_abandon) by the next lock after its death is seen (a liveness sweep at
 * most every LL_SHARED_SWEEP_NS, run by any process's lock), and a lock whose
 * holder died is repaired before it is handed on. */
#define LL_SHARED_MAGIC 0x31444552414853ULL   /* "SHARED1" */
#define LL_SHARED_VERSION 5u
#define LL_SHARED_MAX_PROCS 64u               /* processes attached at once */
#define LL_SHARED_NAME_BYTES 240u             /* a service name's bytes at most */
#define LL_SHARED_SETTINGS_BYTES 4096u        /* the creator's settings record */
#define LL_SHARED_SWEEP_NS 250000000LL        /* the liveness sweep's period */
#define LL_SHARED_LOCK_WORDS 8u               /* the lock's place: 64 bytes, any platform's */
/* The lock a build takes (the header's lock_kind: builds of other kinds refuse to attach) */
#define LL_SHARED_LOCK_ROBUST 1u              /* Linux: a robust process-shared pthread mutex */
#define LL_SHARED_LOCK_OWNER 2u               /* macOS (and LL_SHARED_LOCK_PORTABLE): an owner word */
#define LL_SHARED_LOCK_WINDOWS 3u             /* Windows: a named mutex beside the segment */

/* One attached process (pid 0: a free entry). `started` is its start time
 * as the system gives it (0: unknown), so that a reused pid is not taken for it. */
typedef struct {
    int32_t pid;
    uint32_t reserved;
    uint64_t started;
} ll_shared_proc;

/* One slot's name: UTF-8 bytes, not NUL-terminated; `serial` tells one
 * binding of the slot from the next (0: no service). */
typedef struct {
    uint64_t serial;
    uint32_t len;
    uint32_t reserved;
    char name[LL_SHARED_NAME_BYTES];
} ll_shared_label;

/* The segment: this header, then the names ([capacity] ll_shared_label at
 * labels_at), the names of the policy's events ([LL_EVENTS] ll_shared_label
 * at events_at: entry i % LL_EVENTS names event i), then the vserver (at vserver_at, 64-byte aligned). Offsets
 * are from the segment's first byte. Fields other than `ready` are read and
 * written under `lock` only. */
typedef struct {
    uint64_t magic;           /* LL_SHARED_MAGIC once the creator is done    */
    uint32_t version;         /* LL_SHARED_VERSION                           */
    uint32_t ready;           /* 1: initialized (atomic; the creator sets it last) */
    uint64_t size;            /* bytes in the segment                        */
    uint32_t capacity;        /* slots, holes included                       */
    uint32_t vserver_bytes;   /* sizeof the core's vserver: this build's layout */
    uint64_t labels_at, events_at, vserver_at;
    uint64_t map_address;     /* where the creator mapped it: openers ask for the same place */
    uint64_t seq;             /* locks taken so far: the global order of calls */
    uint64_t names_gen;       /* moves whenever a slot's name changes        */
    uint64_t next_serial;     /* the last serial handed out                  */
    uint64_t reclaimed;       /* transactions ended for processes that died  */
    uint64_t repairs;         /* locks recovered from a holder that died     */
    int64_t next_sweep_ns;    /* monotonic ns: the next liveness sweep       */
    uint32_t dead;            /* 1: being removed; whoever sees it opens anew */
    uint32_t settings_len;
    uint64_t policy_gen;      /* moves whenever a process changes the settings (ll_shared_settings_changed) */
    uint64_t events_named;    /* the policy's events named so far (at each unlock) */
    uint32_t lock_kind;       /* LL_SHARED_LOCK_*                            */
    uint32_t reserved2;
    uint64_t lock[LL_SHARED_LOCK_WORDS]; /* the lock's state (ll_shared_os.h)  */
    ll_shared_proc procs[LL_SHARED_MAX_PROCS];
    unsigned char settings[LL_SHARED_SETTINGS_BYTES]; /* the creator's, opaque */
} ll_shared_header;

typedef struct ll_shared ll_shared;  /* one process's handle on a segment */

/* Opens the segment `name` ("/" and up to 200 more bytes, no other "/"),
 * creating it when it does not exist or nobody alive has it open (a
 * leftover of a crash is replaced): with `method`, window start `sec`,
 * `capacity` slots (1..2^20) and the caller's `settings` record (up to
 * LL_SHARED_SETTINGS_BYTES bytes, kept for later openers to compare).
 * Otherwise attaches and ignores those four. Returns 1 (created), 0
 * (attached) or -errno: -EINVAL, -ENAMETOOLONG, -EUSERS (LL_SHARED_MAX_PROCS
 * attached), -EPROTO (a segment of another layout or build), -ENOMEM, or
 * what the system reported (shm_open/mmap; CreateFileMapping on Windows). */
int ll_shared_open(const char *name, ll_method method, int64_t sec, uint32_t capacity, const void *settings,
                   uint32_t settings_len, ll_shared **out);
/* Ends this process's open transactions (ll_abandon), leaves the segment,
 * unmaps it. The segment stays until ll_shared_unlink(). NULL accepted. */
void ll_shared_close(ll_shared *sh);
/* Removes the name (mappings stay valid). 0, or -errno (-ENOENT). Windows
 * removes a name when its last handle closes: there, 0 when it exists. */
int ll_shared_unlink(const char *name);
/* Takes the lock (a process-wide wait: use from one thread at a time per
 * handle) and returns the vserver, laid out for this mapping, in *vs.
 * 0, 1 when the previous holder died and the state was repaired (its
 * transactions ended), or -errno. The vserver's calls take no lock. */
int ll_shared_lock(ll_shared *sh, ll_vserver **vs);
/* As ll_shared_lock(), but -EBUSY at once if another holds the lock. */
int ll_shared_trylock(ll_shared *sh, ll_vserver **vs);
/* What a caller last saw of the header's generations (ll_shared_tryenter). */
typedef struct {
    uint64_t names_gen;
    uint64_t policy_gen;
    uint64_t reclaimed;
} ll_shared_seen;
/* ll_shared_trylock() for a caller that keeps `seen`, its hot path: 0 when
 * the lock was taken and none of names_gen, policy_gen and reclaimed moved
 * since `seen`; 1 when it was taken and one did (or the state was repaired):
 * the caller reads the header; -EBUSY or -errno as ll_shared_trylock().
 * *seq gets the header's seq and *vs the vserver when the lock was taken. */
int ll_shared_tryenter(ll_shared *sh, const ll_shared_seen *seen, uint64_t *seq, ll_vserver **vs);
/* As ll_shared_trylock(), tried again up to `spins` times (a CPU pause
 * between tries) before -EBUSY: a call holds the lock for a fraction of a
 * microsecond, so a short spin usually beats sleeping in the kernel. */
int ll_shared_lock_spinning(ll_shared *sh, ll_vserver **vs, unsigned spins);
void ll_shared_unlock(ll_shared *sh);
/* Under the lock: the header (its seq is this span's place in the global
 * order) and the names. */
ll_shared_header *ll_shared_header_of(const ll_shared *sh);
const ll_shared_label *ll_shared_labels(const ll_shared *sh);
/* Under the lock: names `slot` (a new serial; names_gen moves), or clears
 * it (len 0). -EINVAL (slot), -ENAMETOOLONG. */
int ll_shared_set_name(ll_shared *sh, uint32_t slot, const char *name, size_t len);
/* Under the lock: the bound slot named `name`, or -ENOENT. O(n). */
int64_t ll_shared_slot_of(const ll_shared *sh, const char *name, size_t len);
/* Under the lock: says that this process changed the settings
 * (ll_set_settings): policy_gen moves, so the other processes re-read them.
 * The policy's state itself is the vserver's (C only): nothing to store. */
void ll_shared_settings_changed(ll_shared *sh);
/* Under the lock: the names of the policy's events, [LL_EVENTS], entry
 * i % LL_EVENTS for event i < events_named (len 0: its service's slot was
 * reused): each unlock and each compaction names the events made since, so
 * a service unbound afterwards keeps its name there. */
const ll_shared_label *ll_shared_event_names(const ll_shared *sh);
/* Under the lock: ll_compact() with the names and the ledger moved along. */
void ll_shared_compact(ll_shared *sh);
/* Under the lock: ends the transactions of every attached process that has
 * died (run by ll_shared_lock() on its own every LL_SHARED_SWEEP_NS).
 * Returns how many transactions were ended (the header's `reclaimed` counts
 * them all). A draining service that leaves idle stays bound: callers that
 * see `reclaimed` move unbind such services, as after LL_END_DRAINED. */
uint64_t ll_shared_reclaim(ll_shared *sh);

#ifdef __cplusplus
}
#endif
#endif /* LEASTLOAD_H */
