# Declarations of the C core's public header (csrc/leastload.h).
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "leastload.h" nogil:
    enum:
        LL_WINDOW_SECONDS
        LL_MAX_WEIGHT
        LL_MAX_TTFB_US
    const uint32_t LL_NO_CAP

    ctypedef enum ll_method:
        LL_ROUNDROBIN
        LL_LEASTCONNECTION
        LL_LEASTRESPONSETIME
        LL_LEASTBANDWIDTH
        LL_LEASTPACKETS
        LL_LEASTREQUEST
        LL_LRTM
        LL_CUSTOMLOAD
        LL_P2C
        LL_METHOD_COUNT

    const char *ll_method_name(int method)
    int ll_method_supported(int method)

    ctypedef enum ll_state:
        LL_UP
        LL_DOWN
        LL_OUT_OF_SERVICE

    ctypedef struct ll_vserver:
        pass

    ctypedef struct ll_info:
        uint64_t bytes
        uint64_t packets
        uint64_t load
        uint64_t selected
        uint32_t active
        uint32_t ttfb_us
        uint32_t cap
        uint32_t sel_this_sec
        uint32_t sel_last_sec
        uint8_t weight
        uint8_t state
        uint8_t bound
        uint8_t ttfb_known
        uint8_t draining
        uint8_t ejected
        uint32_t fails_in_row
        uint64_t failures
        uint32_t probe_us
        uint8_t probe_known
        uint8_t custom_over
        uint64_t custom_load
        uint64_t peak_us
        uint8_t peak_known

    ctypedef struct ll_pick_record:
        int64_t slot
        int64_t cursor
        uint32_t rr_round
        uint32_t startup
        int64_t drawn[2]

    ctypedef struct ll_totals:
        uint32_t bound
        uint32_t up
        uint32_t open
        uint32_t pickable
        uint32_t ejected
        uint64_t last_up
        uint64_t last_open

    enum:
        LL_END_DRAINED
        LL_END_OUTLIER

    ll_vserver *ll_create(ll_method method, int64_t sec)
    void ll_destroy(ll_vserver *vs)
    int64_t ll_bind(ll_vserver *vs, uint32_t weight)
    int ll_unbind(ll_vserver *vs, uint32_t slot)
    int ll_reserve(ll_vserver *vs, uint32_t slots)
    uint32_t ll_slot_count(const ll_vserver *vs)
    uint32_t ll_bound_count(const ll_vserver *vs)
    void ll_compact(ll_vserver *vs)
    int ll_set_weight(ll_vserver *vs, uint32_t slot, uint32_t weight)
    int ll_set_state(ll_vserver *vs, uint32_t slot, ll_state state)
    int ll_set_draining(ll_vserver *vs, uint32_t slot)
    int ll_set_ejected(ll_vserver *vs, uint32_t slot, int ejected)
    void ll_set_outlier_failures(ll_vserver *vs, uint32_t k)
    void ll_get_totals(const ll_vserver *vs, ll_totals *out)
    int ll_set_method(ll_vserver *vs, ll_method method)
    ll_method ll_get_method(const ll_vserver *vs)
    void ll_set_startup_rr(ll_vserver *vs, uint64_t requests)
    uint64_t ll_startup_rr_left(const ll_vserver *vs)
    int ll_set_cap(ll_vserver *vs, uint32_t slot, uint32_t cap)
    int64_t ll_advance(ll_vserver *vs, int64_t sec)
    int64_t ll_current_second(const ll_vserver *vs)
    int64_t ll_cursor(const ll_vserver *vs)
    uint32_t ll_rr_round(const ll_vserver *vs)
    int ll_tree_is_wide(const ll_vserver *vs)
    int64_t ll_peek(ll_vserver *vs, int64_t sec)
    int64_t ll_select(ll_vserver *vs, int64_t sec)
    int64_t ll_select_excluding(ll_vserver *vs, int64_t sec, const uint32_t *excluded, size_t n_excluded)
    uint32_t ll_full_slot(const ll_vserver *vs)
    int ll_record(ll_vserver *vs, uint32_t slot, int64_t sec, uint64_t bytes, uint64_t packets)
    int ll_begin(ll_vserver *vs, uint32_t slot)
    int ll_finish(ll_vserver *vs, uint32_t slot, int has_ttfb, uint32_t ttfb_us, int failed)
    void ll_set_rng_seed(ll_vserver *vs, uint64_t seed)
    void ll_set_time(ll_vserver *vs, double now)

    # the policy (slow start, ejection, weights from utilization)
    enum:
        LL_PER_SECOND
        LL_PERCENT
        LL_EVENTS
        LL_EVENT_NO_SLOT
        LL_HELD_NONE
        LL_HELD_NO_TTFB
        LL_HELD_TTFB
        LL_HELD_FAILURES
    ctypedef struct ll_settings:
        uint32_t new_service_request
        uint32_t new_service_request_unit
        uint32_t new_service_request_increment_interval
        uint32_t slow_start_handover
        double slow_start_guard
        uint32_t weights_from_utilization
        uint32_t outlier_failures
        double outlier_ejection_time
        uint32_t outlier_max_ejection_percent
        uint32_t window_seconds
        uint64_t startup_rr_factor
        uint32_t rtsp_nat
        uint32_t netmask
        uint32_t v6netmasklen
        uint32_t hashlength
        uint64_t hash_seed
        double peakewma_decay
    void ll_settings_default(ll_settings *out)
    int ll_set_settings(ll_vserver *vs, const ll_settings *settings)
    void ll_get_settings(const ll_vserver *vs, ll_settings *out)
    double ll_policy_deadline(const ll_vserver *vs)
    ctypedef struct ll_event:
        double time
        uint32_t slot
        uint32_t what
    uint64_t ll_event_count(const ll_vserver *vs)
    int ll_event_at(const ll_vserver *vs, uint64_t i, ll_event *out)
    ctypedef struct ll_ramp_info:
        double start
        double held_a
        double held_b
        uint32_t cap
        uint32_t increments
        uint32_t held
        uint32_t manual
    int ll_slow_start_info(const ll_vserver *vs, uint32_t slot, ll_ramp_info *out)
    ctypedef struct ll_ejection_info:
        double since
        double until
        uint32_t ejections
    int ll_ejection_of(const ll_vserver *vs, uint32_t slot, ll_ejection_info *out)
    int ll_end_ejection(ll_vserver *vs, uint32_t slot)
    int ll_report_utilization(ll_vserver *vs, uint32_t slot, double qps, double eps, double utilization, double *weight)
    int ll_utilization_weight(ll_vserver *vs, uint32_t slot, double *weight)
    void ll_last_pick(const ll_vserver *vs, ll_pick_record *out)
    int ll_set_peak_decay(ll_vserver *vs, uint32_t decay_us)
    int ll_set_window(ll_vserver *vs, uint32_t seconds)
    uint32_t ll_window(const ll_vserver *vs)
    int ll_probe(ll_vserver *vs, uint32_t slot, uint32_t rtt_us)
    int ll_set_custom_load(ll_vserver *vs, uint32_t slot, uint64_t load, int over_threshold)
    int ll_service_info(const ll_vserver *vs, uint32_t slot, ll_info *out)
    size_t ll_memory_bytes(const ll_vserver *vs)

    # a vserver shared by processes (ll_shared.c)
    enum:
        LL_SHARED_NAME_BYTES
        LL_SHARED_SETTINGS_BYTES
        LL_SHARED_MAX_PROCS
        LL_SHARED_LOCK_ROBUST
        LL_SHARED_LOCK_OWNER
        LL_SHARED_LOCK_WINDOWS

    ctypedef struct ll_shared_proc:
        int32_t pid
        uint64_t started

    ctypedef struct ll_shared_label:
        uint64_t serial
        uint32_t len
        char name[240]

    ctypedef struct ll_shared_header:
        uint32_t capacity
        uint32_t lock_kind
        uint64_t seq
        uint64_t names_gen
        uint64_t reclaimed
        uint64_t repairs
        uint32_t settings_len
        uint64_t policy_gen
        uint64_t events_named
        ll_shared_proc procs[64]
        unsigned char settings[4096]

    ctypedef struct ll_shared:
        pass

    int ll_shared_open(const char *name, ll_method method, int64_t sec, uint32_t capacity, const void *settings,
                       uint32_t settings_len, ll_shared **out)
    void ll_shared_close(ll_shared *sh)
    int ll_shared_unlink(const char *name)
    int ll_shared_lock(ll_shared *sh, ll_vserver **vs)
    int ll_shared_trylock(ll_shared *sh, ll_vserver **vs)
    ctypedef struct ll_shared_seen:
        uint64_t names_gen
        uint64_t policy_gen
        uint64_t reclaimed

    int ll_shared_tryenter(ll_shared *sh, const ll_shared_seen *seen, uint64_t *seq, ll_vserver **vs)
    int ll_shared_lock_spinning(ll_shared *sh, ll_vserver **vs, unsigned spins)
    void ll_shared_unlock(ll_shared *sh)
    ll_shared_header *ll_shared_header_of(const ll_shared *sh)
    const ll_shared_label *ll_shared_labels(const ll_shared *sh)
    int ll_shared_set_name(ll_shared *sh, uint32_t slot, const char *name, size_t len)
    void ll_shared_compact(ll_shared *sh)
    void ll_shared_settings_changed(ll_shared *sh)
    const ll_shared_label *ll_shared_event_names(const ll_shared *sh)
    uint64_t ll_shared_reclaim(ll_shared *sh)
    int ll_set_name_hash(ll_vserver *vs, uint32_t slot, uint64_t name_hash)
    int64_t ll_select_hash(ll_vserver *vs, int64_t sec, uint64_t key_hash, const uint32_t *excluded, size_t n_excluded)


cdef extern from "ll_replay.h" nogil:
    # the batch path, apart from the engine: a trace replayed inside C
    ctypedef struct ll_trace:
        size_t n
        const double *arrival
        const double *ttfb_factor
        const double *transfer
        const uint16_t *status
        const uint64_t *req_bytes
        const uint64_t *resp_bytes
        const uint64_t *req_packets
        const uint64_t *resp_packets
        const double *ttfb_base
        const double *ttfb_slope

    ctypedef struct ll_replay_out:
        int32_t *chosen
        uint64_t *selected
        uint64_t *bytes
        uint64_t *packets
        uint64_t *completed

    ctypedef struct ll_replay:
        pass

    enum:
        LL_REPLAY_DONE
        LL_REPLAY_EVENT
        LL_REPLAY_DEADLINE
        LL_REPLAY_ENDED

    ctypedef struct ll_replay_state_t:
        int err_call
        uint64_t err_value
        double ttfb
        uint32_t svc
        int end_flags
        uint32_t end_svc

    ll_replay *ll_replay_create(const ll_trace *trace, const ll_replay_out *out)
    void ll_replay_destroy(ll_replay *r)
    void ll_replay_set_mapping(ll_replay *r, const int64_t *slot_of, const int32_t *service_of)
    int ll_replay_run(ll_vserver *vs, ll_replay *r, double stop_time, double deadline)
    double ll_replay_now(const ll_replay *r)
    void ll_replay_hook_done(ll_replay *r)
    void ll_replay_forget(ll_replay *r, uint32_t svc)
    void ll_replay_state(const ll_replay *r, ll_replay_state_t *out)


cdef extern from "ll_floor.h" nogil:
    # the floor the batch path is measured against (benchmarks only)
    int ll_floor_replay(const ll_trace *trace, ll_method method, const uint8_t *weights,
                        uint32_t n_services, int32_t *chosen)


cdef extern from "ll_xxh64.h" nogil:
    # XXH64 (the hash methods' key and name hash)
    uint64_t ll_xxh64(const void *data, size_t length, uint64_t seed)


cdef extern from "ll_hash.h" nogil:
    uint32_t ll_neg_log2(uint64_t x)
    int ll_hash_force_path(int path)
