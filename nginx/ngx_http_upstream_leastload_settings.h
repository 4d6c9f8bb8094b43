/*
 * The upstream block's configuration of ngx_http_upstream_leastload_module:
 * what the directives set (ngx_http_upstream_leastload_settings.c parses
 * them) and what init_upstream builds from the servers.
 */
#ifndef NGX_HTTP_UPSTREAM_LEASTLOAD_SETTINGS_H
#define NGX_HTTP_UPSTREAM_LEASTLOAD_SETTINGS_H

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "leastload.h"

#define LL_NGX_DEFAULT_CAPACITY 1024

typedef struct ll_ngx_segment_s ll_ngx_segment_t;

/* One address of a `server` line: a service of the vserver. */
typedef struct {
    struct sockaddr *sockaddr;
    socklen_t socklen;
    ngx_str_t name;      /* the service's name in the segment: the address as nginx prints it */
    uint32_t slot;
} ll_ngx_peer_t;

typedef struct {
    ngx_uint_t enabled;                 /* `leastload` was given in this block */
    ll_method method;
    ngx_http_complex_value_t *key;      /* the hash methods' key */
    ll_settings settings;
    ngx_str_t shared;                   /* the segment's name after "/leastload." */
    ngx_uint_t capacity;
    /* built by init_upstream */
    ngx_str_t upstream;                 /* the block's name */
    ll_ngx_peer_t *peers;
    ngx_uint_t npeers;
    int32_t *peer_of_slot;              /* [nslots]: index into peers, -1: not this config's */
    uint32_t nslots;                    /* the segment's capacity */
    ll_ngx_segment_t *segment;
} ngx_http_upstream_leastload_conf_t;

/* One engine setting's directive (leastload_<setting>): its cmd->post. */
typedef enum { LL_NGX_U32, LL_NGX_U64, LL_NGX_DOUBLE, LL_NGX_HANDOVER } ll_ngx_setting_kind;
typedef struct {
    ll_ngx_setting_kind kind;
    size_t offset;          /* in ll_settings */
    double min, max;        /* the range (whole numbers for the ints) */
    const char *must;       /* what the error says a value must be */
} ll_ngx_setting_desc;

extern const ll_ngx_setting_desc ll_ngx_outlier_failures, ll_ngx_outlier_ejection_time,
    ll_ngx_outlier_max_ejection_percent, ll_ngx_window_seconds, ll_ngx_startup_rr_factor, ll_ngx_hashlength,
    ll_ngx_hash_seed, ll_ngx_slow_start_guard, ll_ngx_peakewma_decay, ll_ngx_slow_start_handover;

char *ngx_http_upstream_leastload_method(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_upstream_leastload_slow_start(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_upstream_leastload_setting(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_http_upstream_leastload_shared(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);

/* The settings record kept in the segment for Python openers (JSON, the keys
 * of leastload.engine.settings.SHARED_RECORD). Returns its length, or 0 when it
 * does not fit in `cap` bytes. */
size_t ll_ngx_settings_record(const ngx_http_upstream_leastload_conf_t *llcf, u_char *buf, size_t cap);

/* The method's directive value spelled as the vendor does. */
const char *ll_ngx_method_name(ll_method method);

#endif
