/*
 * ngx_http_upstream_leastload_module: the NetScaler methods, slow start and
 * passive ejection of leastload's C core as an nginx upstream balancer.
 *
 * One engine for every worker: each upstream block's vserver lives in the
 * core's shared segment (/dev/shm/leastload.NAME, csrc/ll_shared.c), created
 * or attached by the master when it loads the configuration (init_upstream)
 * and inherited by the workers, each of which takes its own row of the
 * segment's ledger at its first lock. A worker that dies (kill -9 included)
 * is repaired by the core: its lock by the robust mutex, its open
 * transactions by the liveness sweep that every worker runs on a timer.
 *
 * Per request: init_peer evaluates the hash key (hash methods); get picks
 * under the segment's lock (ll_select_excluding: retries skip what was
 * tried) and counts the request's bytes; free notes what u->state says (the
 * rest of the bytes, TTFB of a 200, TCP_INFO's segments, NGX_PEER_FAILED)
 * and the transaction ends at this worker's next
 * lock of the segment: its next pick's, or the one taken once at the end of
 * the event-loop turn (a posted event). So a busy worker takes the lock about
 * once a request instead of twice, and its own picks always see its ended
 * transactions (a retry sees the failure). Nothing is allocated per request
 * beyond the request's pool.
 */
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>

#include "ll_xxh64.h"
#include "ngx_http_upstream_leastload_settings.h"

#define LL_NGX_MAX_SEGMENTS 256      /* upstream blocks with leastload, per master */
#define LL_NGX_LOCK_SPINS 100        /* tries before sleeping on the segment's lock */
#define LL_NGX_SWEEP_MSEC 250        /* each worker's liveness sweep (dead workers' transactions) */
#define LL_NGX_SEGMENT_PREFIX "/leastload."
#define LL_NGX_RECORD_BYTES 1024
#define LL_NGX_ENDED_MAX 64          /* ended transactions waiting for a lock; more: applied at once */

/* One segment this process has open (kept across reloads: the master's table,
 * inherited by each generation of workers). */
struct ll_ngx_segment_s {
    char name[LL_NGX_RECORD_BYTES / 4];   /* "/leastload." + the shared name */
    ll_shared *sh;
    uint64_t reclaimed_seen;               /* the header's `reclaimed` this process last acted on */
    ngx_uint_t cycle_generation;           /* the configuration that last claimed it */
};

static ll_ngx_segment_t ll_ngx_segments[LL_NGX_MAX_SEGMENTS];
static ngx_uint_t ll_ngx_nsegments;
static ngx_uint_t ll_ngx_generation;       /* moves at each configuration load */
static ngx_event_t ll_ngx_sweep_event;
static ngx_connection_t ll_ngx_dummy_connection;

/* A transaction that free ended, waiting for this worker's next lock of its segment. */
typedef struct {
    ngx_http_upstream_leastload_conf_t *conf;
    uint64_t bytes, packets;
    uint32_t slot, ttfb_us;
    unsigned has_ttfb:1;
    unsigned failed:1;
} ll_ngx_ended_t;

static ll_ngx_ended_t ll_ngx_ended[LL_NGX_ENDED_MAX];   /* this worker's, in the order they ended */
static ngx_uint_t ll_ngx_nended;
static ngx_event_t ll_ngx_flush_event;                   /* posted while ll_ngx_ended has entries */

/* Linux's struct tcp_info up to tcpi_segs_in (linux/tcp.h; glibc's netinet/tcp.h stops earlier). */
typedef struct {
    uint8_t head[8];
    uint32_t words[24];
    uint64_t wide[4];
    uint32_t segs_out;
    uint32_t segs_in;
} ll_ngx_tcp_info;

/* One request's state, in its pool. */
typedef struct {
    ngx_http_upstream_leastload_conf_t *conf;
    ngx_http_request_t *request;
    uint64_t key_hash;
    uint32_t *tried;                        /* slots tried or refused, for ll_select_excluding */
    ngx_uint_t ntried, max_tried;
    uint32_t slot;
    uint64_t dispatched;                    /* the request's bytes, counted at the pick */
    unsigned open:1;                        /* a transaction is open on `slot` */
} ll_ngx_peer_data_t;

static void *ngx_http_upstream_leastload_create_conf(ngx_conf_t *cf);
static ngx_int_t ngx_http_upstream_leastload_init_process(ngx_cycle_t *cycle);
static void ngx_http_upstream_leastload_exit_process(ngx_cycle_t *cycle);
static void ngx_http_upstream_leastload_exit_master(ngx_cycle_t *cycle);
ngx_int_t ngx_http_upstream_init_leastload(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us);

#define SETTING_CMD(name, desc)                                                                                   \
    {ngx_string(name), NGX_HTTP_UPS_CONF | NGX_CONF_TAKE1, ngx_http_upstream_leastload_setting,                    \
     NGX_HTTP_SRV_CONF_OFFSET, 0, (void *)&desc}

static ngx_command_t ngx_http_upstream_leastload_commands[] = {
    {ngx_string("leastload"), NGX_HTTP_UPS_CONF | NGX_CONF_TAKE12, ngx_http_upstream_leastload_method,
     NGX_HTTP_SRV_CONF_OFFSET, 0, NULL},
    {ngx_string("leastload_slow_start"), NGX_HTTP_UPS_CONF | NGX_CONF_TAKE123, ngx_http_upstream_leastload_slow_start,
     NGX_HTTP_SRV_CONF_OFFSET, 0, NULL},
    {ngx_string("leastload_shared"), NGX_HTTP_UPS_CONF | NGX_CONF_TAKE12, ngx_http_upstream_leastload_shared,
     NGX_HTTP_SRV_CONF_OFFSET, 0, NULL},
    SETTING_CMD("leastload_outlier_failures", ll_ngx_outlier_failures),
    SETTING_CMD("leastload_outlier_ejection_time", ll_ngx_outlier_ejection_time),
    SETTING_CMD("leastload_outlier_max_ejection_percent", ll_ngx_outlier_max_ejection_percent),
    SETTING_CMD("leastload_window_seconds", ll_ngx_window_seconds),
    SETTING_CMD("leastload_startup_rr_factor", ll_ngx_startup_rr_factor),
    SETTING_CMD("leastload_hashlength", ll_ngx_hashlength),
    SETTING_CMD("leastload_hash_seed", ll_ngx_hash_seed),
    SETTING_CMD("leastload_slow_start_guard", ll_ngx_slow_start_guard),
    SETTING_CMD("leastload_slow_start_handover", ll_ngx_slow_start_handover),
    SETTING_CMD("leastload_peakewma_decay", ll_ngx_peakewma_decay),
    ngx_null_command};

/* Called once per configuration load: the segments' claims start anew. */
static void *ngx_http_upstream_leastload_create_main_conf(ngx_conf_t *cf)
{
    ll_ngx_generation++;
    return ngx_pcalloc(cf->pool, sizeof(ngx_uint_t));
}

static ngx_http_module_t ngx_http_upstream_leastload_module_ctx = {
    NULL, NULL, ngx_http_upstream_leastload_create_main_conf, NULL,
    ngx_http_upstream_leastload_create_conf, NULL, /* server configuration: the upstream block's */
    NULL, NULL};

ngx_module_t ngx_http_upstream_leastload_module = {
    NGX_MODULE_V1,
    &ngx_http_upstream_leastload_module_ctx,
    ngx_http_upstream_leastload_commands,
    NGX_HTTP_MODULE,
    NULL,                                   /* init master */
    NULL,                                   /* init module */
    ngx_http_upstream_leastload_init_process,
    NULL,                                   /* init thread */
    NULL,                                   /* exit thread */
    ngx_http_upstream_leastload_exit_process,
    ngx_http_upstream_leastload_exit_master,
    NGX_MODULE_V1_PADDING};

static void *ngx_http_upstream_leastload_create_conf(ngx_conf_t *cf)
{
    ngx_http_upstream_leastload_conf_t *conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_upstream_leastload_conf_t));
    if (conf == NULL)
        return NULL;
    conf->method = LL_LEASTCONNECTION;
    ll_settings_default(&conf->settings);
    conf->capacity = LL_NGX_DEFAULT_CAPACITY;
    return conf;
}

/* ---- the clock: nginx's cached monotonic milliseconds (CLOCK_MONOTONIC, as Python's) ---- */

static double ll_ngx_now(void)
{
    return (double)ngx_current_msec / 1000.0;
}

/* ---- the segment's lock ------------------------------------------------------ */

/* Draining services left idle by a reclaim are unbound, as their last finish would have done. */
static void ll_ngx_unbind_drained(ll_ngx_segment_t *seg, ll_vserver *vs)
{
    ll_shared_header *h = ll_shared_header_of(seg->sh);
    if (h->reclaimed == seg->reclaimed_seen)
        return;
    seg->reclaimed_seen = h->reclaimed;
    for (uint32_t slot = 0; slot < ll_slot_count(vs); slot++) {
        ll_info info;
        if (ll_service_info(vs, slot, &info) == 0 && info.bound && info.draining && info.active == 0) {
            ll_unbind(vs, slot);
            ll_shared_set_name(seg->sh, slot, NULL, 0);
        }
    }
}

static ll_vserver *ll_ngx_lock(ll_ngx_segment_t *seg, ngx_log_t *log)
{
    ll_vserver *vs = NULL;
    int rc = ll_shared_lock_spinning(seg->sh, &vs, LL_NGX_LOCK_SPINS);
    if (rc == -EBUSY)
        rc = ll_shared_lock(seg->sh, &vs);
    if (rc < 0) {
        ngx_log_error(NGX_LOG_ALERT, log, -rc, "leastload: cannot take the lock of shared vserver \"%s\"",
                      seg->name + sizeof(LL_NGX_SEGMENT_PREFIX) - 1);
        return NULL;
    }
    if (rc == 1)
        ngx_log_error(NGX_LOG_NOTICE, log, 0,
                      "leastload: shared vserver \"%s\" repaired: a process died holding its lock",
                      seg->name + sizeof(LL_NGX_SEGMENT_PREFIX) - 1);
    ll_set_time(vs, ll_ngx_now());
    ll_ngx_unbind_drained(seg, vs);
    return vs;
}

/* ---- configuration: the segment, the services -------------------------------- */

static const char *ll_ngx_open_error(int rc)
{
    switch (rc) {
    case -EPROTO:
        return "it was made by another build or version of leastload (a layout mismatch): remove it "
               "(leastload.unlink_shared, or rm /dev/shm/leastload.NAME) or name another with leastload_shared";
    case -EUSERS:
        return "64 processes have it open already";
    case -EINVAL:
        return "a bad name or capacity";
    case -ENAMETOOLONG:
        return "its name is too long";
    default:
        return "the system refused it";
    }
}

static ll_ngx_segment_t *ll_ngx_segment(ngx_conf_t *cf, ngx_http_upstream_leastload_conf_t *llcf,
                                        const u_char *record, size_t record_len, int *created)
{
    char name[sizeof(((ll_ngx_segment_t *)0)->name)];
    ngx_uint_t i;
    ll_shared *sh = NULL;

    ngx_snprintf((u_char *)name, sizeof name - 1, "%s%V%Z", LL_NGX_SEGMENT_PREFIX, &llcf->shared);
    *created = 0;
    for (i = 0; i < ll_ngx_nsegments; i++)
        if (ll_ngx_segments[i].sh && strcmp(ll_ngx_segments[i].name, name) == 0)
            break;
    if (i < ll_ngx_nsegments) {
        if (ll_ngx_segments[i].cycle_generation == ll_ngx_generation) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "leastload: upstream \"%V\" names shared vserver \"%V\", which another upstream of "
                               "this configuration has (leastload_shared)", &llcf->upstream, &llcf->shared);
            return NULL;
        }
        ll_ngx_segments[i].cycle_generation = ll_ngx_generation;
        return &ll_ngx_segments[i];
    }
    if (ll_ngx_nsegments == LL_NGX_MAX_SEGMENTS) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "leastload: more than %d upstreams with leastload",
                           LL_NGX_MAX_SEGMENTS);
        return NULL;
    }
    int rc = ll_shared_open(name, llcf->method, (int64_t)floor(ll_ngx_now()), (uint32_t)llcf->capacity, record,
                            (uint32_t)record_len, &sh);
    if (rc < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, -rc, "leastload: cannot open shared vserver \"%V\" (%s) of upstream "
                           "\"%V\": %s", &llcf->shared, name, &llcf->upstream, ll_ngx_open_error(rc));
        return NULL;
    }
    ll_ngx_segment_t *seg = &ll_ngx_segments[ll_ngx_nsegments++];
    strcpy(seg->name, name);
    seg->sh = sh;
    seg->cycle_generation = ll_ngx_generation;
    seg->reclaimed_seen = ll_shared_header_of(sh)->reclaimed;
    *created = rc == 1;
    return seg;
}

/* The settings (and the method) of this configuration on the vserver: at
 * creation, and at a reload that changed them. */
static int ll_ngx_apply_settings(ngx_conf_t *cf, ngx_http_upstream_leastload_conf_t *llcf, ll_ngx_segment_t *seg,
                                 ll_vserver *vs, const u_char *record, size_t record_len, int created)
{
    ll_settings now;
    ll_get_settings(vs, &now);
    int rc = 0;
    if (ll_get_method(vs) != llcf->method)
        rc = ll_set_method(vs, llcf->method);
    if (!rc && memcmp(&now, &llcf->settings, sizeof now) != 0)
        rc = ll_set_settings(vs, &llcf->settings);
    if (!rc && llcf->method == LL_PEAKEWMA)
        rc = ll_set_peak_decay(vs, (uint32_t)floor(llcf->settings.peakewma_decay * 1e6 + 0.5));
    if (rc < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "leastload: upstream \"%V\": the engine refused its settings "
                           "(%d)", &llcf->upstream, rc);
        return -1;
    }
    if (created) {
        ll_set_startup_rr(vs, llcf->settings.startup_rr_factor);
        ll_set_rng_seed(vs, llcf->settings.hash_seed);
    }
    ll_shared_header *h = ll_shared_header_of(seg->sh);
    if (record_len != h->settings_len || memcmp(h->settings, record, record_len) != 0) {
        memcpy(h->settings, record, record_len);  /* what Python openers compare: this configuration's */
        h->settings_len = (uint32_t)record_len;
    }
    ll_shared_settings_changed(seg->sh);
    return 0;
}

/* Binds this configuration's services (the ones the segment has keep their state;
 * new ones start under slow start) and drains the ones it no longer names. */
static int ll_ngx_bind_services(ngx_conf_t *cf, ngx_http_upstream_leastload_conf_t *llcf, ll_ngx_segment_t *seg,
                                ll_vserver *vs, const ngx_uint_t *weights, const ngx_uint_t *downs)
{
    uint32_t keep_n = ll_slot_count(vs), needed = 0;
    for (ngx_uint_t k = 0; k < llcf->npeers; k++)  /* first: room for the new ones, before anything changes */
        needed += ll_shared_slot_of(seg->sh, (const char *)llcf->peers[k].name.data, llcf->peers[k].name.len) < 0;
    if (needed > llcf->nslots - keep_n) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "leastload: shared vserver \"%V\" of upstream \"%V\" is full: its "
                           "segment holds %uD services, holes included, and %uD more are needed "
                           "(leastload_shared %V capacity=N, then restart nginx)", &llcf->shared, &llcf->upstream,
                           llcf->nslots, needed - (llcf->nslots - keep_n), &llcf->shared);
        return -1;
    }
    for (uint32_t slot = 0; slot < keep_n; slot++) {
        ll_info info;
        if (ll_service_info(vs, slot, &info) < 0 || !info.bound)
            continue;
        const ll_shared_label *l = &ll_shared_labels(seg->sh)[slot];
        ngx_uint_t k;
        for (k = 0; k < llcf->npeers; k++)
            if (llcf->peers[k].name.len == l->len && ngx_memcmp(llcf->peers[k].name.data, l->name, l->len) == 0)
                break;
        if (k < llcf->npeers)
            continue;
        if (info.active == 0) {  /* not in this configuration: gone now, or once idle */
            ll_unbind(vs, slot);
            ll_shared_set_name(seg->sh, slot, NULL, 0);
        } else {
            ll_set_draining(vs, slot);
        }
    }
    for (ngx_uint_t k = 0; k < llcf->npeers; k++) {
        ll_ngx_peer_t *p = &llcf->peers[k];
        int64_t slot = ll_shared_slot_of(seg->sh, (const char *)p->name.data, p->name.len);
        if (slot < 0) {
            slot = ll_bind(vs, (uint32_t)weights[k]);
            if (slot == -ENOSPC || slot == -EOVERFLOW || (slot >= 0 && (uint32_t)slot >= llcf->nslots)) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "leastload: shared vserver \"%V\" of upstream \"%V\" is "
                                   "full: its segment holds %ui services, holes included (leastload_shared %V "
                                   "capacity=N, then restart nginx)", &llcf->shared, &llcf->upstream,
                                   (ngx_uint_t)ll_shared_header_of(seg->sh)->capacity, &llcf->shared);
                return -1;
            }
            if (slot < 0 || ll_shared_set_name(seg->sh, (uint32_t)slot, (const char *)p->name.data, p->name.len) < 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "leastload: upstream \"%V\": cannot bind \"%V\" (%L)",
                                   &llcf->upstream, &p->name, (int64_t)slot);
                return -1;
            }
        } else {
            ll_set_weight(vs, (uint32_t)slot, (uint32_t)weights[k]);
        }
        ll_state want = downs[k] ? LL_OUT_OF_SERVICE : LL_UP;
        ll_info info;
        if (ll_service_info(vs, (uint32_t)slot, &info) == 0 && info.state != want)
            ll_set_state(vs, (uint32_t)slot, want);
        /* the hash methods' rendezvous: each service's fixed hash, XXH64 of its name with seed 0
         * (as leastload.hashing.rendezvous.name_hash: a Python process's picks agree) */
        if (llcf->key && ll_set_name_hash(vs, (uint32_t)slot, ll_xxh64(p->name.data, p->name.len, 0)) < 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "leastload: upstream \"%V\": cannot set the name hash of \"%V\"",
                               &llcf->upstream, &p->name);
            return -1;
        }
        p->slot = (uint32_t)slot;
        llcf->peer_of_slot[slot] = (int32_t)k;
    }
    return 0;
}

static ngx_int_t ngx_http_upstream_init_leastload_peer(ngx_http_request_t *r, ngx_http_upstream_srv_conf_t *us);

ngx_int_t ngx_http_upstream_init_leastload(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us)
{
    ngx_http_upstream_leastload_conf_t *llcf = ngx_http_conf_upstream_srv_conf(us, ngx_http_upstream_leastload_module);
    ngx_http_upstream_server_t *server;
    ngx_uint_t i, j, n = 0;

    us->peer.init = ngx_http_upstream_init_leastload_peer;
    llcf->upstream = us->host;
    if (us->servers == NULL || us->servers->nelts == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "no servers in upstream \"%V\" in %s:%ui", &us->host, us->file_name,
                           us->line);
        return NGX_ERROR;
    }
    if (llcf->shared.len == 0) {  /* nginx.<upstream>, other characters as "_" */
        u_char *d = ngx_pnalloc(cf->pool, 6 + us->host.len);
        if (d == NULL)
            return NGX_ERROR;
        ngx_memcpy(d, "nginx.", 6);
        for (i = 0; i < us->host.len; i++) {
            u_char c = us->host.data[i];
            d[6 + i] = ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.'
                        || c == '_' || c == '-') ? c : '_';
        }
        llcf->shared.data = d;
        llcf->shared.len = ngx_min(6 + us->host.len, 180);
    }
    server = us->servers->elts;
    for (i = 0; i < us->servers->nelts; i++) {
        if (server[i].backup) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "leastload: upstream \"%V\": \"backup\" servers are not "
                               "supported (the engine has one pool)", &us->host);
            return NGX_ERROR;
        }
        if (server[i].max_conns != 0 || server[i].max_fails != 1 || server[i].fail_timeout != 10) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "leastload: upstream \"%V\": server \"%V\" has max_conns, "
                               "max_fails or fail_timeout, which the engine does not take (ejection: "
                               "leastload_outlier_failures, leastload_outlier_ejection_time)", &us->host,
                               &server[i].name);
            return NGX_ERROR;
        }
        if (server[i].weight < 1 || server[i].weight > LL_MAX_WEIGHT) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid value \"weight=%ui\" for server \"%V\" in upstream "
                               "\"%V\", it must be 1..%d with leastload", server[i].weight, &server[i].name,
                               &us->host, LL_MAX_WEIGHT);
            return NGX_ERROR;
        }
        n += server[i].naddrs;
    }
    if (n > llcf->capacity) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "leastload: upstream \"%V\" has %ui addresses, more than its shared "
                           "vserver's capacity %ui (leastload_shared NAME capacity=N)", &us->host, n, llcf->capacity);
        return NGX_ERROR;
    }
    llcf->peers = ngx_pcalloc(cf->pool, n * sizeof(ll_ngx_peer_t));
    ngx_uint_t *weights = ngx_pcalloc(cf->pool, n * sizeof(ngx_uint_t));
    ngx_uint_t *downs = ngx_pcalloc(cf->pool, n * sizeof(ngx_uint_t));
    if (!llcf->peers || !weights || !downs)
        return NGX_ERROR;
    n = 0;
    for (i = 0; i < us->servers->nelts; i++)
        for (j = 0; j < server[i].naddrs; j++) {
            ll_ngx_peer_t *p = &llcf->peers[n];
            p->sockaddr = server[i].addrs[j].sockaddr;
            p->socklen = server[i].addrs[j].socklen;
            p->name = server[i].addrs[j].name;
            for (ngx_uint_t k = 0; k < n; k++)
                if (llcf->peers[k].name.len == p->name.len
                    && ngx_memcmp(llcf->peers[k].name.data, p->name.data, p->name.len) == 0) {
                    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "leastload: upstream \"%V\" names %V twice",
                                       &us->host, &p->name);
                    return NGX_ERROR;
                }
            weights[n] = server[i].weight;
            downs[n] = server[i].down;
            n++;
        }
    llcf->npeers = n;

    /* nginx -t and nginx -s leave the running engine alone */
    if (ngx_test_config || ngx_process == NGX_PROCESS_SIGNALLER)
        return NGX_OK;

    u_char record[LL_NGX_RECORD_BYTES];
    size_t record_len = ll_ngx_settings_record(llcf, record, sizeof record);
    int created;
    ll_ngx_segment_t *seg = ll_ngx_segment(cf, llcf, record, record_len, &created);
    if (seg == NULL)
        return NGX_ERROR;
    if (ll_shared_header_of(seg->sh)->capacity < llcf->capacity) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "leastload: shared vserver \"%V\" exists with capacity %ui; upstream "
                           "\"%V\" asks for %ui (restart nginx to make it anew)", &llcf->shared,
                           (ngx_uint_t)ll_shared_header_of(seg->sh)->capacity, &us->host, llcf->capacity);
        return NGX_ERROR;
    }
    llcf->nslots = ll_shared_header_of(seg->sh)->capacity;
    llcf->peer_of_slot = ngx_palloc(cf->pool, llcf->nslots * sizeof(int32_t));
    if (llcf->peer_of_slot == NULL)
        return NGX_ERROR;
    for (i = 0; i < llcf->nslots; i++)
        llcf->peer_of_slot[i] = -1;
    ll_vserver *vs = ll_ngx_lock(seg, cf->log);
    if (vs == NULL)
        return NGX_ERROR;
    int bad = ll_ngx_apply_settings(cf, llcf, seg, vs, record, record_len, created) < 0
              || ll_ngx_bind_services(cf, llcf, seg, vs, weights, downs) < 0;
    ll_shared_unlock(seg->sh);
    if (bad)
        return NGX_ERROR;
    llcf->segment = seg;
    ngx_log_error(NGX_LOG_NOTICE, cf->log, 0, "leastload: upstream \"%V\": %s shared vserver \"%V\", method %s, "
                  "%ui services", &us->host, created ? "created" : "attached", &llcf->shared,
                  ll_ngx_method_name(llcf->method), n);
    return NGX_OK;
}

/* ---- ended transactions: applied under a lock this worker takes anyway ------------- */

/* Ends one transaction (under the segment's lock). */
static void ll_ngx_end(ll_ngx_segment_t *seg, ll_vserver *vs, const ll_ngx_ended_t *e, int64_t sec)
{
    ngx_http_upstream_leastload_conf_t *llcf = e->conf;
    if (e->bytes || e->packets)
        ll_record(vs, e->slot, sec, e->bytes, e->packets);
    int rc = ll_finish(vs, e->slot, e->has_ttfb, e->ttfb_us, e->failed);
    if (rc > 0 && (rc & LL_END_DRAINED)) {  /* the last transaction of a service a reload removed */
        ll_unbind(vs, e->slot);
        ll_shared_set_name(seg->sh, e->slot, NULL, 0);
    }
    if (rc > 0 && (rc & LL_END_OUTLIER)) {
        ngx_int_t k = e->slot < llcf->nslots ? llcf->peer_of_slot[e->slot] : -1;
        ngx_str_t unknown = ngx_string("?");
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0, "leastload: upstream \"%V\": %V failed %ui times in a row "
                      "(outlier: ejected unless the ejection limit keeps it)", &llcf->upstream,
                      k >= 0 ? &llcf->peers[k].name : &unknown, (ngx_uint_t)llcf->settings.outlier_failures);
    } else if (rc < 0) {
        ngx_log_error(NGX_LOG_ERR, ngx_cycle->log, 0, "leastload: upstream \"%V\": finish refused (%d)",
                      &llcf->upstream, rc);
    }
}

/* Under seg's lock: ends this worker's waiting transactions on seg, in the order they ended. */
static void ll_ngx_apply_ended(ll_ngx_segment_t *seg, ll_vserver *vs)
{
    int64_t sec = (int64_t)(ngx_current_msec / 1000);
    ngx_uint_t kept = 0;
    for (ngx_uint_t i = 0; i < ll_ngx_nended; i++) {
        if (ll_ngx_ended[i].conf->segment == seg)
            ll_ngx_end(seg, vs, &ll_ngx_ended[i], sec);
        else
            ll_ngx_ended[kept++] = ll_ngx_ended[i];
    }
    ll_ngx_nended = kept;
    if (kept == 0 && ll_ngx_flush_event.posted) {  /* braces: the macro is two statements */
        ngx_delete_posted_event(&ll_ngx_flush_event);
    }
}

/* Ends every waiting transaction: one lock per segment they are on. */
static void ll_ngx_flush(ngx_log_t *log)
{
    while (ll_ngx_nended) {
        ll_ngx_segment_t *seg = ll_ngx_ended[0].conf->segment;
        ll_vserver *vs = seg->sh ? ll_ngx_lock(seg, log) : NULL;
        if (vs == NULL) {  /* no lock (logged): these stay open until this worker exits or dies */
            ngx_uint_t kept = 0;
            for (ngx_uint_t i = 0; i < ll_ngx_nended; i++)
                if (ll_ngx_ended[i].conf->segment != seg)
                    ll_ngx_ended[kept++] = ll_ngx_ended[i];
            ll_ngx_nended = kept;
            continue;
        }
        ll_ngx_apply_ended(seg, vs);
        ll_shared_unlock(seg->sh);
    }
    if (ll_ngx_flush_event.posted) {
        ngx_delete_posted_event(&ll_ngx_flush_event);
    }
}

static void ll_ngx_flush_handler(ngx_event_t *ev)
{
    ll_ngx_flush(ev->log);
}

/* ---- per request ----------------------------------------------------------------- */

static ngx_int_t ngx_http_upstream_get_leastload_peer(ngx_peer_connection_t *pc, void *data);
static void ngx_http_upstream_free_leastload_peer(ngx_peer_connection_t *pc, void *data, ngx_uint_t state);
#if (NGX_SSL || NGX_COMPAT)
static ngx_int_t ll_ngx_set_session(ngx_peer_connection_t *pc, void *data) { return NGX_OK; }
static void ll_ngx_save_session(ngx_peer_connection_t *pc, void *data) {}
#endif

static ngx_int_t ngx_http_upstream_init_leastload_peer(ngx_http_request_t *r, ngx_http_upstream_srv_conf_t *us)
{
    ngx_http_upstream_leastload_conf_t *llcf = ngx_http_conf_upstream_srv_conf(us, ngx_http_upstream_leastload_module);
    ll_ngx_peer_data_t *lp;

    if (llcf->segment == NULL) {
        ngx_log_error(NGX_LOG_ALERT, r->connection->log, 0, "leastload: upstream \"%V\" has no shared vserver",
                      &llcf->upstream);
        return NGX_ERROR;
    }
    lp = ngx_palloc(r->pool, sizeof(ll_ngx_peer_data_t));
    if (lp == NULL)
        return NGX_ERROR;
    lp->conf = llcf;
    lp->request = r;
    lp->open = 0;
    lp->dispatched = 0;
    lp->ntried = 0;
    lp->max_tried = llcf->npeers + 8;  /* the tried, and a few slots of another configuration */
    lp->tried = ngx_palloc(r->pool, lp->max_tried * sizeof(uint32_t));
    if (lp->tried == NULL)
        return NGX_ERROR;
    lp->key_hash = 0;
    if (llcf->key) {
        ngx_str_t key;
        if (ngx_http_complex_value(r, llcf->key, &key) != NGX_OK)
            return NGX_ERROR;
        size_t len = ngx_min(key.len, (size_t)llcf->settings.hashlength);
        lp->key_hash = ll_xxh64(key.data, len, llcf->settings.hash_seed);
    }
    r->upstream->peer.data = lp;
    r->upstream->peer.get = ngx_http_upstream_get_leastload_peer;
    r->upstream->peer.free = ngx_http_upstream_free_leastload_peer;
    r->upstream->peer.tries = llcf->npeers;
#if (NGX_SSL || NGX_COMPAT)
    r->upstream->peer.set_session = ll_ngx_set_session;
    r->upstream->peer.save_session = ll_ngx_save_session;
#endif
    return NGX_OK;
}

/* The bytes nginx is about to send to the service: the request it made (u->request_bufs,
 * head and buffered body). Counted into the window at the pick, as a proxy counts what it
 * sends when it sends it: a slow service's requests in flight then weigh at once, and
 * LEASTBANDWIDTH does not pile a burst of requests on it before its first answer ends. */
static uint64_t ll_ngx_request_bytes(ngx_http_request_t *r)
{
    uint64_t n = 0;
    for (ngx_chain_t *cl = r->upstream ? r->upstream->request_bufs : NULL; cl; cl = cl->next)
        if (cl->buf && ngx_buf_size(cl->buf) > 0)
            n += (uint64_t)ngx_buf_size(cl->buf);
    return n;
}

static ngx_int_t ngx_http_upstream_get_leastload_peer(ngx_peer_connection_t *pc, void *data)
{
    ll_ngx_peer_data_t *lp = data;
    ngx_http_upstream_leastload_conf_t *llcf = lp->conf;
    ll_ngx_segment_t *seg = llcf->segment;
    int64_t slot;

    pc->cached = 0;
    pc->connection = NULL;
    ll_vserver *vs = ll_ngx_lock(seg, pc->log);
    if (vs == NULL)
        return NGX_ERROR;
    ll_ngx_apply_ended(seg, vs);
    int64_t sec = (int64_t)(ngx_current_msec / 1000);
    for (;;) {
        if (llcf->key)
            slot = ll_select_hash(vs, sec, lp->key_hash, lp->tried, lp->ntried);
        else
            slot = ll_select_excluding(vs, sec, lp->tried, lp->ntried);
        if (slot < 0 || ((uint32_t)slot < llcf->nslots && llcf->peer_of_slot[slot] >= 0))
            break;
        /* a service of a newer configuration, which this (old) worker cannot reach: not taken */
        ll_finish(vs, (uint32_t)slot, 0, 0, 0);
        if (lp->ntried == lp->max_tried) {
            slot = -ENOENT;
            break;
        }
        lp->tried[lp->ntried++] = (uint32_t)slot;
    }
    lp->dispatched = 0;
    if (slot >= 0) {
        lp->dispatched = ll_ngx_request_bytes(lp->request);
        if (lp->dispatched)
            ll_record(vs, (uint32_t)slot, sec, lp->dispatched, 0);
    }
    ll_shared_unlock(seg->sh);
    if (slot < 0) {
        if (slot != -ENOENT)
            ngx_log_error(NGX_LOG_ERR, pc->log, 0, "leastload: upstream \"%V\": the engine refused a pick (%L)",
                          &llcf->upstream, slot);
        pc->name = &llcf->upstream;
        return NGX_BUSY;
    }
    ll_ngx_peer_t *p = &llcf->peers[llcf->peer_of_slot[slot]];
    pc->sockaddr = p->sockaddr;
    pc->socklen = p->socklen;
    pc->name = &p->name;
    lp->slot = (uint32_t)slot;
    lp->open = 1;
    if (lp->ntried < lp->max_tried)
        lp->tried[lp->ntried++] = (uint32_t)slot;
    return NGX_OK;
}

/* Segments in and out on the upstream connection (0: not known). */
static uint64_t ll_ngx_packets(ngx_connection_t *c)
{
#if (NGX_LINUX)
    ll_ngx_tcp_info ti;
    socklen_t len = sizeof ti;
    if (c == NULL || c->fd == (ngx_socket_t)-1)
        return 0;
    ngx_memzero(&ti, sizeof ti);
    if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 || len < sizeof ti)
        return 0;
    return (uint64_t)ti.segs_in + ti.segs_out;
#else
    return 0;
#endif
}

static void ngx_http_upstream_free_leastload_peer(ngx_peer_connection_t *pc, void *data, ngx_uint_t state)
{
    ll_ngx_peer_data_t *lp = data;
    ngx_http_upstream_leastload_conf_t *llcf = lp->conf;
    ngx_http_upstream_state_t *st = lp->request->upstream->state;

    if (pc->tries)
        pc->tries--;
    if (!lp->open)
        return;
    lp->open = 0;
    if (ll_ngx_nended == LL_NGX_ENDED_MAX)
        ll_ngx_flush(pc->log);
    ll_ngx_ended_t *e = &ll_ngx_ended[ll_ngx_nended++];
    e->conf = llcf;
    e->slot = lp->slot;
    e->failed = (state & NGX_PEER_FAILED) != 0;
    /* TCP_INFO is a system call: read only where it is the method's N, here, while the connection is this attempt's */
    e->packets = llcf->method == LL_LEASTPACKETS ? ll_ngx_packets(pc->connection) : 0;
    e->bytes = 0;
    e->has_ttfb = 0;
    e->ttfb_us = 0;
    if (st) {
        if (st->bytes_sent > 0)
            e->bytes += (uint64_t)st->bytes_sent;
        if (st->bytes_received > 0)
            e->bytes += (uint64_t)st->bytes_received;
        /* the rest: what the pick counted is not counted twice (an attempt that failed before
         * sending all of it keeps the count: at most the request's size, once per attempt) */
        e->bytes = e->bytes > lp->dispatched ? e->bytes - lp->dispatched : 0;
        if (!e->failed && st->status == NGX_HTTP_OK && st->header_time != (ngx_msec_t)-1) {
            uint64_t us = (uint64_t)st->header_time * 1000;
            e->has_ttfb = 1;
            e->ttfb_us = us > LL_MAX_TTFB_US ? LL_MAX_TTFB_US : (uint32_t)us;
        }
    }
    ngx_post_event(&ll_ngx_flush_event, &ngx_posted_events);  /* once: the macro checks `posted` */
}

/* ---- the workers: a row each at start, the sweep, leaving ------------------------------ */

static void ll_ngx_sweep(ngx_event_t *ev)
{
    for (ngx_uint_t i = 0; i < ll_ngx_nsegments; i++) {
        ll_ngx_segment_t *seg = &ll_ngx_segments[i];
        if (seg->sh == NULL)
            continue;
        ll_vserver *vs = ll_ngx_lock(seg, ev->log);
        if (vs == NULL)
            continue;
        ll_ngx_apply_ended(seg, vs);
        uint64_t n = ll_shared_reclaim(seg->sh);
        ll_ngx_unbind_drained(seg, vs);
        ll_advance(vs, (int64_t)(ngx_current_msec / 1000));  /* the policy's due times run without traffic too */
        ll_shared_unlock(seg->sh);
        if (n)
            ngx_log_error(NGX_LOG_NOTICE, ev->log, 0, "leastload: shared vserver \"%s\": ended %uL open "
                          "transactions of processes that died", seg->name + sizeof(LL_NGX_SEGMENT_PREFIX) - 1, n);
    }
    if (!ngx_exiting)
        ngx_add_timer(ev, LL_NGX_SWEEP_MSEC);
}

static ngx_int_t ngx_http_upstream_leastload_init_process(ngx_cycle_t *cycle)
{
    if (ngx_process != NGX_PROCESS_WORKER && ngx_process != NGX_PROCESS_SINGLE)
        return NGX_OK;
    if (ll_ngx_nsegments == 0)
        return NGX_OK;
    /* the first lock gives this worker its row of the ledger (ll_shared.c: a forked child) */
    for (ngx_uint_t i = 0; i < ll_ngx_nsegments; i++)
        if (ll_ngx_segments[i].sh && ll_ngx_lock(&ll_ngx_segments[i], cycle->log))
            ll_shared_unlock(ll_ngx_segments[i].sh);
    ll_ngx_dummy_connection.fd = (ngx_socket_t)-1;
    ngx_memzero(&ll_ngx_sweep_event, sizeof ll_ngx_sweep_event);
    ll_ngx_sweep_event.handler = ll_ngx_sweep;
    ll_ngx_sweep_event.log = cycle->log;
    ll_ngx_sweep_event.data = &ll_ngx_dummy_connection;
    ll_ngx_sweep_event.cancelable = 1;
    ngx_add_timer(&ll_ngx_sweep_event, LL_NGX_SWEEP_MSEC);
    ngx_memzero(&ll_ngx_flush_event, sizeof ll_ngx_flush_event);
    ll_ngx_flush_event.handler = ll_ngx_flush_handler;
    ll_ngx_flush_event.log = cycle->log;
    ll_ngx_flush_event.data = &ll_ngx_dummy_connection;
    return NGX_OK;
}

static void ngx_http_upstream_leastload_exit_process(ngx_cycle_t *cycle)
{
    /* the transactions that ended here are applied; the still open ones end (ll_shared_close); the segments stay */
    ll_ngx_flush(cycle->log);
    for (ngx_uint_t i = 0; i < ll_ngx_nsegments; i++)
        if (ll_ngx_segments[i].sh) {
            ll_shared_close(ll_ngx_segments[i].sh);
            ll_ngx_segments[i].sh = NULL;
        }
}

static void ngx_http_upstream_leastload_exit_master(ngx_cycle_t *cycle)
{
    /* nginx stops: the names go (a later start makes the vservers anew) */
    for (ngx_uint_t i = 0; i < ll_ngx_nsegments; i++) {
        ll_shared_unlink(ll_ngx_segments[i].name);  /* by name: a single process closed its handle already */
        if (ll_ngx_segments[i].sh) {
            ll_shared_close(ll_ngx_segments[i].sh);
            ll_ngx_segments[i].sh = NULL;
        }
    }
}
