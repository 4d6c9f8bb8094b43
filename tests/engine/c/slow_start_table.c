/*
 * slow_start_table.c - the vendor's automated PER_SECOND slow-start table
 * (docs/slow-start.md) through the C API alone: ROUNDROBIN, S1..S4 bound,
 * S5 bound at t = 0 with newServiceRequest 4 PER_SECOND every 10 s, 100
 * requests a second, each ended at once. The core's policy (ll_set_settings,
 * ll_set_time) caps S5; nothing is computed here.
 *
 * Usage:
 *   slow_start_table -                      a private vserver, seconds 0..59
 *   slow_start_table NAME BASE FROM TO      the shared vserver NAME made from
 *       Python at second BASE, S1..S4 bound, then those settings: binds S5
 *       (when FROM is 0) and runs seconds FROM..TO-1 after BASE
 * Prints one line per second: "t S1 S2 S3 S4 S5" (requests each got), then
 * one line per slow-start exit: "exit t NAME WHY", t after BASE.
 * Exit 0; 1 on any error. tests/engine/test_slow_start_c.py builds and runs it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "leastload.h"

#define RATE 100  /* requests a second */

static const char *NAMES[5] = { "S1", "S2", "S3", "S4", "S5" };

typedef struct {
    ll_shared *sh;   /* NULL: private */
    ll_vserver *vs;  /* private: the vserver; shared: the lock's */
    int64_t slot[5]; /* S1..S5 */
} table;

static int fail(const char *what, int rc)
{
    fprintf(stderr, "%s: %s\n", what, strerror(-rc));
    return 1;
}

static ll_vserver *take(table *tb)
{
    if (tb->sh && ll_shared_lock(tb->sh, &tb->vs) < 0)
        return NULL;
    return tb->vs;
}

static void give(table *tb)
{
    if (tb->sh)
        ll_shared_unlock(tb->sh);
}

/* Seconds from..to-1 after base: RATE requests each, counted per service. */
static int run(table *tb, double base, int from, int to)
{
    for (int sec = from; sec < to; sec++) {
        int got[5] = { 0 };
        for (int k = 0; k < RATE; k++) {
            double t = base + sec + (double)k / RATE;
            ll_vserver *vs = take(tb);
            if (!vs)
                return fail("ll_shared_lock", -1);
            ll_set_time(vs, t);  /* the policy's time: what fell due runs in the select */
            int64_t slot = ll_select(vs, (int64_t)floor(t));
            if (slot < 0) {
                give(tb);
                return fail("ll_select", (int)slot);
            }
            ll_finish(vs, (uint32_t)slot, 0, 0, 0);
            give(tb);
            for (int s = 0; s < 5; s++)
                got[s] += tb->slot[s] == slot;
        }
        printf("%d %d %d %d %d %d\n", sec, got[0], got[1], got[2], got[3], got[4]);
    }
    return 0;
}

static const char *why(uint32_t what)
{
    static const char *text[] = { "?", "switched-off", "no-other-up", "no-traffic", "rate-below", "caught-up",
                                  "200-increments", "percent-100", "fair-share" };
    return what < sizeof text / sizeof *text ? text[what] : "?";
}

static void exits(table *tb, double base)
{
    ll_vserver *vs = take(tb);
    if (!vs)
        return;
    for (uint64_t i = 0; i < ll_event_count(vs); i++) {
        ll_event e;
        if (ll_event_at(vs, i, &e) == 0 && e.what < LL_EV_EJECTED)
            for (int s = 0; s < 5; s++)
                if (tb->slot[s] == (int64_t)e.slot)
                    printf("exit %g %s %s\n", e.time - base, NAMES[s], why(e.what));
    }
    give(tb);
}

static int private_table(void)
{
    table tb = { .sh = NULL };
    tb.vs = ll_create(LL_ROUNDROBIN, 0);
    if (!tb.vs)
        return fail("ll_create", -12);
    ll_set_time(tb.vs, 0.0);
    for (int s = 0; s < 4; s++)
        tb.slot[s] = ll_bind(tb.vs, 1);
    ll_settings st;
    ll_settings_default(&st);
    st.new_service_request = 4;
    st.new_service_request_unit = LL_PER_SECOND;
    st.new_service_request_increment_interval = 10;
    int rc = ll_set_settings(tb.vs, &st);
    if (rc < 0)
        return fail("ll_set_settings", rc);
    tb.slot[4] = ll_bind(tb.vs, 1);  /* new at t = 0: its ramp starts */
    rc = run(&tb, 0.0, 0, 60);
    exits(&tb, 0.0);
    ll_destroy(tb.vs);
    return rc;
}

static int shared_table(const char *name, double base, int from, int to)
{
    char segment[256];
    snprintf(segment, sizeof segment, "/leastload.%s", name);
    table tb;
    int rc = ll_shared_open(segment, LL_ROUNDROBIN, 0, 1, NULL, 0, &tb.sh);
    if (rc < 0)
        return fail("ll_shared_open", rc);
    if (rc == 1) {
        ll_shared_close(tb.sh);
        ll_shared_unlink(segment);
        fprintf(stderr, "no shared vserver %s\n", name);
        return 1;
    }
    ll_vserver *vs = take(&tb);
    if (!vs)
        return fail("ll_shared_lock", -1);
    if (from == 0) {  /* S5 is new now: the core starts its ramp (the creator set the rate) */
        ll_set_time(vs, base);
        int64_t slot = ll_bind(vs, 1);
        if (slot < 0 || ll_shared_set_name(tb.sh, (uint32_t)slot, "S5", 2) < 0) {
            give(&tb);
            return fail("ll_bind", slot < 0 ? (int)slot : -22);
        }
    }
    for (int s = 0; s < 5; s++)
        tb.slot[s] = ll_shared_slot_of(tb.sh, NAMES[s], strlen(NAMES[s]));
    give(&tb);
    rc = run(&tb, base, from, to);
    exits(&tb, base);
    fflush(stdout);
    ll_shared_close(tb.sh);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "-") == 0)
        return private_table();
    if (argc == 5)
        return shared_table(argv[1], atof(argv[2]), atoi(argv[3]), atoi(argv[4]));
    fprintf(stderr, "usage: %s - | NAME BASE FROM TO\n", argv[0]);
    return 1;
}
