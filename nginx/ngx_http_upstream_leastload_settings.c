/*
 * The directives of ngx_http_upstream_leastload_module: the method, slow
 * start, the engine's other settings (one directive each, named after the
 * engine's settings: leastload_<name>), the shared segment's name; and the
 * settings record kept in the segment for Python openers.
 *
 * A bad value is an emerg naming the directive and the value, as nginx's own
 * directives say it ("invalid value ... in ... directive, it must be ...").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ngx_http_upstream_leastload_settings.h"

ngx_int_t ngx_http_upstream_init_leastload(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us);
extern ngx_module_t ngx_http_upstream_leastload_module;

/* The hash methods' keys when the directive names none (the request's parts
 * the vendor hashes); NULL: the method needs a key given. */
static const struct {
    ll_method method;
    const char *key;
} default_keys[] = {
    {LL_SOURCEIPHASH, "$remote_addr"},
    {LL_DESTINATIONIPHASH, "$server_addr"},
    {LL_SRCIPDESTIPHASH, "$remote_addr$server_addr"},
    {LL_SRCIPSRCPORTHASH, "$remote_addr$remote_port"},
    {LL_URLHASH, "$request_uri"},
    {LL_DOMAINHASH, "$host"},
    {LL_CALLIDHASH, NULL},
    {LL_TOKEN, NULL},
};

const char *ll_ngx_method_name(ll_method method)
{
    const char *name = ll_method_name((int)method);
    return name ? name : "?";
}

static char *invalid(ngx_conf_t *cf, ngx_command_t *cmd, ngx_str_t *value, const char *must)
{
    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "invalid value \"%V\" in \"%V\" directive, it must be %s", value,
                       &cmd->name, must);
    return NGX_CONF_ERROR;
}

/* A whole decimal unsigned number up to `max`: 0, or -1. */
static int parse_u64(ngx_str_t *v, uint64_t max, uint64_t *out)
{
    uint64_t n = 0;
    if (v->len == 0 || v->len > 20)
        return -1;
    for (size_t i = 0; i < v->len; i++) {
        if (v->data[i] < '0' || v->data[i] > '9')
            return -1;
        unsigned d = (unsigned)(v->data[i] - '0');
        if (n > (UINT64_MAX - d) / 10)
            return -1;
        n = n * 10 + d;
    }
    if (n > max)
        return -1;
    *out = n;
    return 0;
}

/* A finite decimal number (no hex, no exponent surprises beyond strtod's): 0, or -1. */
static int parse_double(ngx_str_t *v, double *out)
{
    char buf[64];
    char *end;
    if (v->len == 0 || v->len >= sizeof buf)
        return -1;
    for (size_t i = 0; i < v->len; i++)
        if (!((v->data[i] >= '0' && v->data[i] <= '9') || v->data[i] == '.'))
            return -1;
    memcpy(buf, v->data, v->len);
    buf[v->len] = '\0';
    double d = strtod(buf, &end);
    if (end != buf + v->len || !isfinite(d))
        return -1;
    *out = d;
    return 0;
}

char *ngx_http_upstream_leastload_method(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_upstream_leastload_conf_t *llcf = conf;
    ngx_str_t *value = cf->args->elts;
    ngx_http_upstream_srv_conf_t *uscf;
    int found = -1;

    if (llcf->enabled)
        return "is duplicate";
    for (int m = 0; m < LL_METHOD_COUNT; m++) {
        const char *name = ll_method_name(m);
        if (name && strlen(name) == value[1].len && ngx_strncasecmp((u_char *)name, value[1].data, value[1].len) == 0)
            found = m;
    }
    if (found < 0 || !ll_method_supported(found))
        return invalid(cf, cmd, &value[1],
                       "one of LEASTCONNECTION, ROUNDROBIN, LEASTRESPONSETIME, LEASTBANDWIDTH, LEASTPACKETS, "
                       "LEASTREQUEST, SOURCEIPHASH, DESTINATIONIPHASH, SRCIPDESTIPHASH, SRCIPSRCPORTHASH, URLHASH, "
                       "DOMAINHASH, CALLIDHASH, TOKEN, P2C, PEAKEWMA");
    if (found == LL_LRTM || found == LL_CUSTOMLOAD)
        return invalid(cf, cmd, &value[1],
                       "a method nginx can feed: LRTM needs a monitor's probes and CUSTOMLOAD the services' load "
                       "reports, which nginx has not");
    llcf->method = (ll_method)found;

    const char *default_key = "";
    int hashed = 0;
    for (size_t i = 0; i < sizeof default_keys / sizeof default_keys[0]; i++)
        if (default_keys[i].method == llcf->method) {
            hashed = 1;
            default_key = default_keys[i].key;
        }
    if (cf->args->nelts == 3 && !hashed)
        return invalid(cf, cmd, &value[2], "absent: only the hash methods take a key");
    if (hashed) {
        ngx_http_compile_complex_value_t ccv;
        ngx_str_t key;
        if (cf->args->nelts == 3) {
            key = value[2];
        } else if (default_key == NULL) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"%V\" directive: method \"%V\" needs a key, e.g. "
                               "\"leastload %V $http_x_token;\"", &cmd->name, &value[1], &value[1]);
            return NGX_CONF_ERROR;
        } else {
            key.data = (u_char *)default_key;
            key.len = strlen(default_key);
        }
        llcf->key = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
        if (llcf->key == NULL)
            return NGX_CONF_ERROR;
        ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));
        ccv.cf = cf;
        ccv.value = &key;
        ccv.complex_value = llcf->key;
        if (ngx_http_compile_complex_value(&ccv) != NGX_OK)
            return NGX_CONF_ERROR;
    }

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);
    if (uscf->peer.init_upstream)
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0, "load balancing method redefined");
    uscf->peer.init_upstream = ngx_http_upstream_init_leastload;
    uscf->flags = NGX_HTTP_UPSTREAM_CREATE | NGX_HTTP_UPSTREAM_WEIGHT | NGX_HTTP_UPSTREAM_DOWN;
    llcf->enabled = 1;
    return NGX_CONF_OK;
}

char *ngx_http_upstream_leastload_slow_start(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_upstream_leastload_conf_t *llcf = conf;
    ngx_str_t *value = cf->args->elts;
    uint64_t rate, interval = llcf->settings.new_service_request_increment_interval;
    uint32_t unit = LL_PER_SECOND;

    for (ngx_uint_t i = 2; i < cf->args->nelts; i++) {
        if (ngx_strcmp(value[i].data, "per_second") == 0) {
            unit = LL_PER_SECOND;
        } else if (ngx_strcmp(value[i].data, "percent") == 0) {
            unit = LL_PERCENT;
        } else if (ngx_strncmp(value[i].data, "interval=", 9) == 0) {
            ngx_str_t v = {value[i].len - 9, value[i].data + 9};
            if (parse_u64(&v, 86400, &interval) < 0)
                return invalid(cf, cmd, &value[i], "interval=SECONDS, 0..86400 (0: manual slow start)");
        } else {
            return invalid(cf, cmd, &value[i], "per_second, percent or interval=SECONDS");
        }
    }
    if (parse_u64(&value[1], unit == LL_PERCENT ? 100 : 0xFFFFFFFEu, &rate) < 0)
        return invalid(cf, cmd, &value[1],
                       unit == LL_PERCENT ? "a whole number 0..100 with percent (0: slow start off)"
                                          : "a whole number 0..4294967294 of requests per second (0: off)");
    llcf->settings.new_service_request = (uint32_t)rate;
    llcf->settings.new_service_request_unit = unit;
    llcf->settings.new_service_request_increment_interval = (uint32_t)interval;
    return NGX_CONF_OK;
}

/* ---- the engine's other settings: one directive each, described by cmd->post ---- */

#define DESC(name, kind, field, min, max, must) \
    const ll_ngx_setting_desc name = {kind, offsetof(ll_settings, field), min, max, must}

DESC(ll_ngx_outlier_failures, LL_NGX_U32, outlier_failures, 0, 4294967295.0,
     "a whole number 0..4294967295 of failures in a row (0: ejection off)");
DESC(ll_ngx_outlier_ejection_time, LL_NGX_DOUBLE, outlier_ejection_time, 0, 300,
     "a number of seconds above 0 and at most 300");
DESC(ll_ngx_outlier_max_ejection_percent, LL_NGX_U32, outlier_max_ejection_percent, 0, 100, "a whole number 0..100");
DESC(ll_ngx_window_seconds, LL_NGX_U32, window_seconds, 1, 60, "a whole number of seconds 1..60");
DESC(ll_ngx_startup_rr_factor, LL_NGX_U64, startup_rr_factor, 0, 0, "a whole number 0..18446744073709551615");
DESC(ll_ngx_hashlength, LL_NGX_U32, hashlength, 1, 4096, "a whole number of bytes 1..4096");
DESC(ll_ngx_hash_seed, LL_NGX_U64, hash_seed, 0, 0, "a whole number 0..18446744073709551615");
DESC(ll_ngx_slow_start_guard, LL_NGX_DOUBLE, slow_start_guard, 1, 100, "0 (off), or a number from 1 to 100");
DESC(ll_ngx_peakewma_decay, LL_NGX_DOUBLE, peakewma_decay, 0.001, 3600, "a number of seconds in 0.001..3600");
DESC(ll_ngx_slow_start_handover, LL_NGX_HANDOVER, slow_start_handover, 0, 0, "vendor or caught_up");

char *ngx_http_upstream_leastload_setting(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_upstream_leastload_conf_t *llcf = conf;
    ngx_str_t *value = cf->args->elts;
    const ll_ngx_setting_desc *d = cmd->post;
    unsigned char *field = (unsigned char *)&llcf->settings + d->offset;
    uint64_t n;
    double x;

    switch (d->kind) {
    case LL_NGX_U32:
        if (parse_u64(&value[1], (uint64_t)d->max, &n) < 0 || (double)n < d->min)
            return invalid(cf, cmd, &value[1], d->must);
        *(uint32_t *)(void *)field = (uint32_t)n;
        break;
    case LL_NGX_U64:
        if (parse_u64(&value[1], UINT64_MAX, &n) < 0)
            return invalid(cf, cmd, &value[1], d->must);
        *(uint64_t *)(void *)field = n;
        break;
    case LL_NGX_DOUBLE:
        if (parse_double(&value[1], &x) < 0)
            return invalid(cf, cmd, &value[1], d->must);
        /* outlier_ejection_time: above 0; slow_start_guard: 0 is "off" too */
        if (d->offset == offsetof(ll_settings, outlier_ejection_time) ? !(x > 0 && x <= d->max)
            : d->offset == offsetof(ll_settings, slow_start_guard) ? !(x == 0 || (x >= d->min && x <= d->max))
            : !(x >= d->min && x <= d->max))
            return invalid(cf, cmd, &value[1], d->must);
        *(double *)(void *)field = x;
        break;
    case LL_NGX_HANDOVER:
        if (ngx_strcmp(value[1].data, "vendor") == 0)
            n = LL_HANDOVER_VENDOR;
        else if (ngx_strcmp(value[1].data, "caught_up") == 0)
            n = LL_HANDOVER_CAUGHT_UP;
        else
            return invalid(cf, cmd, &value[1], d->must);
        *(uint32_t *)(void *)field = (uint32_t)n;
        break;
    }
    return NGX_CONF_OK;
}

/* leastload_shared NAME [capacity=N]; */
char *ngx_http_upstream_leastload_shared(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_upstream_leastload_conf_t *llcf = conf;
    ngx_str_t *value = cf->args->elts;
    uint64_t cap;

    if (value[1].len < 1 || value[1].len > 180)
        return invalid(cf, cmd, &value[1], "1 to 180 of the characters A-Z a-z 0-9 . _ -");
    for (size_t i = 0; i < value[1].len; i++) {
        u_char c = value[1].data[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_'
              || c == '-'))
            return invalid(cf, cmd, &value[1], "1 to 180 of the characters A-Z a-z 0-9 . _ -");
    }
    llcf->shared = value[1];
    if (cf->args->nelts == 3) {
        ngx_str_t v = value[2];
        if (v.len < 10 || ngx_strncmp(v.data, "capacity=", 9) != 0)
            return invalid(cf, cmd, &value[2], "capacity=N, N services 1..1048576 (holes included)");
        v.data += 9;
        v.len -= 9;
        if (parse_u64(&v, 1048576, &cap) < 0 || cap < 1)
            return invalid(cf, cmd, &value[2], "capacity=N, N services 1..1048576 (holes included)");
        llcf->capacity = (ngx_uint_t)cap;
    }
    return NGX_CONF_OK;
}

/* ---- the record for Python openers ------------------------------------------ */

size_t ll_ngx_settings_record(const ngx_http_upstream_leastload_conf_t *llcf, u_char *buf, size_t cap)
{
    const ll_settings *s = &llcf->settings;
    uint32_t m = s->netmask;
    int n = snprintf((char *)buf, cap,
                     "{\"method\": \"%s\", \"new_service_request\": %u, \"new_service_request_unit\": \"%s\", "
                     "\"new_service_request_increment_interval\": %u, \"startup_rr_factor\": %llu, "
                     "\"rtsp_nat\": false, \"outlier_failures\": %u, \"outlier_ejection_time\": %.17g, "
                     "\"outlier_max_ejection_percent\": %u, \"window_seconds\": %u, "
                     "\"netmask\": \"%u.%u.%u.%u\", \"v6netmasklen\": %u, \"hashlength\": %u, "
                     "\"hash_seed\": %llu, \"slow_start_handover\": \"%s\", \"slow_start_guard\": %.17g, "
                     "\"weights_from_utilization\": false, \"peakewma_decay\": %.17g, \"shared_capacity\": %u}",
                     ll_ngx_method_name(llcf->method), s->new_service_request,
                     s->new_service_request_unit == LL_PERCENT ? "PERCENT" : "PER_SECOND",
                     s->new_service_request_increment_interval, (unsigned long long)s->startup_rr_factor,
                     s->outlier_failures, s->outlier_ejection_time, s->outlier_max_ejection_percent,
                     s->window_seconds, (m >> 24) & 255, (m >> 16) & 255, (m >> 8) & 255, m & 255, s->v6netmasklen,
                     s->hashlength, (unsigned long long)s->hash_seed,
                     s->slow_start_handover == LL_HANDOVER_CAUGHT_UP ? "caught_up" : "vendor", s->slow_start_guard,
                     s->peakewma_decay, (unsigned)llcf->capacity);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}
