/*
 * ll_vserver.c - one virtual server: slots, the bytes/packets window, the
 * methods' sort keys and the selection.
 *
 * Every service has one exact integer key, floor(N * 10000 / weight) (see
 * ll_key.h), kept in a tournament tree over bind order (see ll_tree.h).
 * select() = read the minimum at the root, find the first slot after the
 * cursor holding it, charge the pick, fix one leaf-to-root path.
 * Ineligible slots (holes, not UP, capped out for this second) hold
 * LL_KEY_INF, so eligibility costs nothing on the select path.
 *
 * The window rolls without visiting every service: when the clock enters a
 * new second, only the "live" slots can change (a bucket with traffic, or
 * selections in this second or the last), so the roll walks the live set,
 * takes each expiring bucket out of its slot's total, moves sel_this to
 * sel_last, and refreshes just the keys that moved. A second boundary
 * costs O(live) (O(live log n) in tree updates, or one O(n) rebuild when
 * most of the slots are live), never O(n) for a vserver whose traffic
 * touches few services; the aggregates of the last second are kept running
 * (this_up, this_open) so they need no pass either.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ll_hash.h"
#include "ll_path.h"

#define LL_MAX_SLOTS (1u << 30)

/* ---- the live set ------------------------------------------------------ */

/* Drops entry i of live[] (the last entry takes its place). */
static void live_drop(ll_vserver *vs, uint32_t i)
{
    uint32_t slot = vs->live[i];
    vs->svc[slot].flags = (uint16_t)(vs->svc[slot].flags & ~LL_LIVE);
    vs->live[i] = vs->live[--vs->n_live];
}

static int slot_is_live(const ll_vserver *vs, uint32_t slot)
{
    const ll_svc *s = &vs->svc[slot];
    return (vs->bytes[slot] | vs->packets[slot]) != 0 || s->sel_this != 0 || s->sel_last != 0;
}

/* N as ll_service_info() reports it: the row's (activity where the method
 * has no N of its own: ROUNDROBIN, hash, P2C). */
static uint64_t load_of(const ll_vserver *vs, uint32_t slot)
{
    return vs->ops->n(vs, slot);
}

static inline ll_key key_of(const ll_vserver *vs, uint32_t slot)
{
    return ll_key_with(vs, slot, vs->ops->key);
}

static inline void set_key(ll_vserver *vs, uint32_t slot, ll_key key)
{
    vs->ops->fam->set_key(vs, slot, key);
}

void ll_refresh(ll_vserver *vs, uint32_t slot)
{
    set_key(vs, slot, key_of(vs, slot));
}

static void refresh_all(ll_vserver *vs)
{
    for (uint32_t i = 0; i < vs->n_slots; i++)
        ll_tree_load(&vs->tree, i, key_of(vs, i));
    ll_tree_build(&vs->tree);
}

/* A fixed layout (a shared segment) has its arrays for its whole capacity, but its tree
 * spans only the slots in use, rounded up to a power of two: an update climbs log2(slots)
 * levels, not log2(capacity), and writes as many cache lines, which the other processes
 * sharing the vserver then miss. Rebuilt here, in O(slots), when a bind outgrows it. */
static void span_tree(ll_vserver *vs)
{
    uint32_t P = 1;
    while (P < vs->n_slots)
        P *= 2;
    ll_tree_init(&vs->tree, P, vs->tree.cell, vs->tree.arg);
    refresh_all(vs);
}


/* Adds (sign > 0) or removes (sign < 0) one bound service's share of the
 * aggregates. Every change of state, cap, flags or binding is bracketed by
 * count_svc(-1) ... count_svc(+1), so ll_get_totals() stays O(1). */
static void count_svc(ll_vserver *vs, uint32_t slot, int sign)
{
    const ll_svc *s = &vs->svc[slot];
    ll_totals *t = &vs->totals;
    if (!s->bound)
        return;
    uint32_t one = sign > 0 ? 1u : (uint32_t)-1;      /* modular add of -1 */
    uint64_t last = sign > 0 ? s->sel_last : (uint64_t)0 - s->sel_last;
    uint64_t now = sign > 0 ? s->sel_this : (uint64_t)0 - s->sel_this;
    t->ejected += s->ejected ? one : 0;
    if (s->state != LL_UP)
        return;
    t->up += one;
    t->last_up += last;
    vs->this_up += now;
    if (s->draining || s->ejected)
        return;
    t->pickable += one;
    if (s->cap == LL_NO_CAP) {
        t->open += one;
        t->last_open += last;
        vs->this_open += now;
    }
}

void ll_get_totals(const ll_vserver *vs, ll_totals *out)
{
    *out = vs->totals;
    out->bound = vs->n_bound;
}

/* ---- allocation ------------------------------------------------------ */

static void free_arrays(ll_vserver *vs)
{
    free(vs->tree.cell);
    free(vs->tree.arg);
    free(vs->svc);
    free(vs->bytes);
    free(vs->packets);
    free(vs->bytes_bkt);
    free(vs->packets_bkt);
    free(vs->live);
    for (int c = 0; c < LL_COL_COUNT; c++)
        free(vs->col[c]);
}

/* Moves everything into arrays for `capacity` slots. On -ENOMEM nothing
 * has changed. */
static int resize(ll_vserver *vs, uint32_t capacity)
{
    if (vs->fixed)
        return -ENOSPC;  /* its memory is the caller's, laid out for its capacity once */
    uint32_t P = 1;
    while (P < capacity)
        P *= 2;
    ll_vserver n = *vs;
    n.capacity = capacity;
    n.tree.cell = malloc((size_t)2 * P * sizeof *n.tree.cell);
    n.tree.arg = malloc((size_t)2 * P * sizeof *n.tree.arg);
    n.svc = calloc(capacity, sizeof *n.svc);
    n.bytes = calloc(capacity, sizeof *n.bytes);
    n.packets = calloc(capacity, sizeof *n.packets);
    n.bytes_bkt = calloc((size_t)capacity * vs->window, sizeof *n.bytes_bkt);
    n.packets_bkt = calloc((size_t)capacity * vs->window, sizeof *n.packets_bkt);
    n.live = malloc((size_t)capacity * sizeof *n.live);
    int cols_ok = 1;  /* every column the vserver has, grown */
    for (int c = 0; c < LL_COL_COUNT; c++) {
        n.col[c] = vs->col[c] ? ll_column_alloc(c, capacity) : NULL;
        cols_ok &= !vs->col[c] || n.col[c];
    }
    if (!cols_ok || !n.tree.cell || !n.tree.arg || !n.svc || !n.bytes || !n.packets || !n.bytes_bkt
        || !n.packets_bkt || !n.live) {
        free_arrays(&n);
        return -ENOMEM;
    }
    uint32_t used = vs->n_slots;
    ll_tree_init(&n.tree, P, n.tree.cell, n.tree.arg);
    for (uint32_t i = 0; i < used; i++)
        ll_tree_load(&n.tree, i, ll_tree_key(&vs->tree, i));
    ll_tree_build(&n.tree);
    if (used) {
        memcpy(n.svc, vs->svc, used * sizeof *n.svc);
        memcpy(n.bytes, vs->bytes, used * sizeof *n.bytes);
        memcpy(n.packets, vs->packets, used * sizeof *n.packets);
        memcpy(n.live, vs->live, vs->n_live * sizeof *n.live);
        for (int c = 0; c < LL_COL_COUNT; c++)
            if (vs->col[c])
                memcpy(n.col[c], vs->col[c], used * ll_columns[c].elem);
        for (uint32_t b = 0; b < vs->window; b++) {
            memcpy(n.bytes_bkt + (size_t)b * capacity, vs->bytes_bkt + (size_t)b * vs->capacity,
                   used * sizeof *n.bytes_bkt);
            memcpy(n.packets_bkt + (size_t)b * capacity, vs->packets_bkt + (size_t)b * vs->capacity,
                   used * sizeof *n.packets_bkt);
        }
    }
    free_arrays(vs);
    *vs = n;
    return 0;
}

/* No pick to explain (a new vserver, a new method). */
static void forget_last_pick(ll_vserver *vs)
{
    vs->last.cursor = LL_NO_PICK;
    vs->last.drawn[0] = vs->last.drawn[1] = -1;
}

/* The record keeps what the pick overwrote; the slot picked is the cursor. */
void ll_last_pick(const ll_vserver *vs, ll_pick_record *out)
{
    *out = vs->last;
    out->slot = vs->last.cursor == LL_NO_PICK ? -1 : vs->cursor;
}

/* The columns method m needs from the moment it is set: 0, or -ENOMEM
 * (those allocated stay: memory only, no change of behaviour). */
static int need_method_columns(ll_vserver *vs, ll_method m)
{
    for (int c = 0; c < LL_COL_COUNT; c++)
        if ((ll_columns[c].methods >> m & 1u) && ll_column_need(vs, c) < 0)
            return -ENOMEM;
    return 0;
}

void ll_init_fields(ll_vserver *vs, ll_method method, int64_t sec)
{
    vs->method = method;
    vs->ops = &ll_methods[method];
    vs->rr_round = 1;
    vs->cursor = -1;
    forget_last_pick(vs);
    vs->cur_sec = sec;
    vs->window = LL_WINDOW_SECONDS;
    vs->head = ll_window_bucket(sec, vs->window);
    ll_head_moved(vs);
    vs->now = (double)sec;
    vs->peak_decay_us = 10000000u;
    ll_pol_init(vs);
}

ll_vserver *ll_create(ll_method method, int64_t sec)
{
    if ((unsigned)method >= LL_METHOD_COUNT || !ll_methods[method].supported)
        return NULL;
    ll_vserver *vs = calloc(1, sizeof *vs);
    if (!vs)
        return NULL;
    ll_init_fields(vs, method, sec);
    if (resize(vs, 4) < 0) {
        free(vs);
        return NULL;
    }
    if (need_method_columns(vs, method) < 0) {
        ll_destroy(vs);
        return NULL;
    }
    return vs;
}

void ll_destroy(ll_vserver *vs)
{
    if (!vs || vs->fixed)  /* a fixed vserver's memory is its caller's */
        return;
    free_arrays(vs);
    free(vs);
}

int ll_reserve(ll_vserver *vs, uint32_t slots)
{
    if (slots > LL_MAX_SLOTS)
        return -EINVAL;
    return slots <= vs->capacity ? 0 : resize(vs, slots);
}

size_t ll_memory_bytes(const ll_vserver *vs)
{
    if (vs->fixed)
        return vs->fixed;
    size_t per_slot = sizeof(ll_svc) + 2 * sizeof(uint64_t) * (1 + (size_t)vs->window) + sizeof(uint32_t);
    size_t per_leaf = 2 * sizeof(uint64_t) + 2 * sizeof(uint32_t);  /* ll_tree's cell and arg */
    for (int c = 0; c < LL_COL_COUNT; c++)
        per_slot += vs->col[c] ? ll_columns[c].elem : 0;
    return sizeof *vs + (size_t)vs->capacity * per_slot + (size_t)vs->tree.P * per_leaf;
}

/* ---- services ---------------------------------------------------------- */

/* The inputs only some methods allocate (probes, reported loads, name
 * hashes) start from nothing for a new or emptied slot. */
static void clear_method_inputs(ll_vserver *vs, uint32_t slot)
{
    for (int c = 0; c < LL_COL_COUNT; c++)
        if (vs->col[c])
            ll_column_reset(vs->col[c], c, slot);
}

int64_t ll_bind(ll_vserver *vs, uint32_t weight)
{
    if (weight < 1 || weight > LL_MAX_WEIGHT)
        return -EINVAL;
    if (vs->n_slots == vs->capacity) {
        if (vs->capacity >= LL_MAX_SLOTS)
            return -EOVERFLOW;
        uint32_t grown = vs->capacity * 2 > LL_MAX_SLOTS ? LL_MAX_SLOTS : vs->capacity * 2;
        int rc = resize(vs, grown);
        if (rc < 0)
            return rc;
    }
    uint32_t slot = vs->n_slots++;
    ll_svc *s = &vs->svc[slot];
    memset(s, 0, sizeof *s);
    s->weight = (uint8_t)weight;
    s->state = LL_UP;
    s->bound = 1;
    s->cap = LL_NO_CAP;
    clear_method_inputs(vs, slot);
    vs->n_bound++;
    ll_hash_count_weight(vs, weight, +1);
    count_svc(vs, slot, +1);
    if (slot >= vs->tree.P)
        span_tree(vs);  /* a fixed layout's tree grows with its slots */
    else
        ll_refresh(vs, slot);
    ll_pol_bound(vs, (uint32_t)slot);
    return slot;
}

/* Empties a slot's counters (its buckets included): unbind leaves a clean hole. */
static void clear_slot(ll_vserver *vs, uint32_t slot)
{
    int had_entry = (vs->svc[slot].flags & LL_LIVE) != 0;
    memset(&vs->svc[slot], 0, sizeof vs->svc[slot]);
    /* its entry in live[] stays until the next roll drops it: keep the bit that says so */
    vs->svc[slot].flags = had_entry ? (uint16_t)LL_LIVE : 0;
    vs->bytes[slot] = vs->packets[slot] = 0;
    clear_method_inputs(vs, slot);
    for (uint32_t r = 0; r < vs->ledger_rows; r++)
        vs->ledger[(size_t)r * vs->capacity + slot] = 0;
    for (uint32_t b = 0; b < vs->window; b++) {
        vs->bytes_bkt[(size_t)b * vs->capacity + slot] = 0;
        vs->packets_bkt[(size_t)b * vs->capacity + slot] = 0;
    }
}

int ll_unbind(ll_vserver *vs, uint32_t slot)
{
    if (!ll_slot_ok(vs, slot))
        return -EINVAL;
    int had_ramp = ll_pol_unbinding(vs, slot);
    if (vs->svc[slot].cap != LL_NO_CAP)
        vs->n_capped--;
    count_svc(vs, slot, -1);
    ll_hash_count_weight(vs, vs->svc[slot].weight, -1);
    clear_slot(vs, slot);
    vs->n_bound--;
    /* the record's slots name services: an unbound one is gone from it */
    if ((int64_t)slot == vs->cursor)
        vs->last.cursor = LL_NO_PICK;
    for (int k = 0; k < 2; k++)
        if (vs->last.drawn[k] == (int64_t)slot)
            vs->last.drawn[k] = -1;
    ll_refresh(vs, slot);
    ll_pol_unbound(vs, had_ramp);
    return 0;
}

uint32_t ll_slot_count(const ll_vserver *vs) { return vs->n_slots; }
uint32_t ll_bound_count(const ll_vserver *vs) { return vs->n_bound; }

void ll_compact(ll_vserver *vs)
{
    ll_pol_compacted(vs, NULL, vs->n_slots);  /* the events' slots move with theirs */
    uint32_t j = 0;
    int64_t cursor = -1, last_cursor = -1;
    size_t C = vs->capacity;
    for (uint32_t i = 0; i < vs->n_slots; i++) {
        if (!vs->svc[i].bound)
            continue;
        if ((int64_t)i <= vs->cursor)
            cursor = j;  /* the last bound slot at or before the cursor */
        if ((int64_t)i <= vs->last.cursor)
            last_cursor = j;  /* the same for the record's cursor */
        /* the record's draws are bound (unbind clears them): they move with theirs */
        for (int k = 0; k < 2; k++)
            if (vs->last.drawn[k] == (int64_t)i)
                vs->last.drawn[k] = j;
        if (j != i) {
            vs->svc[j] = vs->svc[i];
            vs->bytes[j] = vs->bytes[i];
            vs->packets[j] = vs->packets[i];
            for (int c = 0; c < LL_COL_COUNT; c++) {
                size_t e = ll_columns[c].elem;
                if (vs->col[c])
                    memcpy((unsigned char *)vs->col[c] + j * e, (unsigned char *)vs->col[c] + i * e, e);
            }
            for (size_t b = 0; b < vs->window; b++) {
                vs->bytes_bkt[b * C + j] = vs->bytes_bkt[b * C + i];
                vs->packets_bkt[b * C + j] = vs->packets_bkt[b * C + i];
            }
            for (size_t r = 0; r < vs->ledger_rows; r++)
                vs->ledger[r * C + j] = vs->ledger[r * C + i];
        }
        j++;
    }
    for (uint32_t i = j; i < vs->n_slots; i++) {
        clear_slot(vs, i);
        ll_tree_load(&vs->tree, i, LL_KEY_INF);
    }
    /* the slots moved: the live set is rebuilt, in O(n) like the rest */
    for (uint32_t i = 0; i < vs->n_slots; i++)
        vs->svc[i].flags = (uint16_t)(vs->svc[i].flags & ~LL_LIVE);
    vs->n_slots = j;
    vs->cursor = cursor;
    if (vs->last.cursor != LL_NO_PICK)
        vs->last.cursor = last_cursor;
    vs->n_live = 0;
    for (uint32_t i = 0; i < j; i++)
        if (slot_is_live(vs, i))
            ll_live_add(vs, i);
    refresh_all(vs);
}

int ll_set_weight(ll_vserver *vs, uint32_t slot, uint32_t weight)
{
    if (!ll_slot_ok(vs, slot) || weight < 1 || weight > LL_MAX_WEIGHT)
        return -EINVAL;
    ll_hash_count_weight(vs, vs->svc[slot].weight, -1);
    ll_hash_count_weight(vs, weight, +1);
    vs->svc[slot].weight = (uint8_t)weight;
    ll_refresh(vs, slot);
    return 0;
}

int ll_set_state(ll_vserver *vs, uint32_t slot, ll_state state)
{
    if (!ll_slot_ok(vs, slot) || (unsigned)state >= LL_STATE_COUNT)
        return -EINVAL;
    int was_down = vs->svc[slot].state == LL_DOWN;
    count_svc(vs, slot, -1);
    vs->svc[slot].state = (uint8_t)state;
    count_svc(vs, slot, +1);
    ll_refresh(vs, slot);
    ll_pol_state(vs, slot, was_down, state);
    return 0;
}

int ll_set_draining(ll_vserver *vs, uint32_t slot)
{
    if (!ll_slot_ok(vs, slot))
        return -EINVAL;
    count_svc(vs, slot, -1);
    vs->svc[slot].draining = 1;
    count_svc(vs, slot, +1);
    ll_refresh(vs, slot);
    if (vs->svc[slot].active)  /* an idle one is unbound by the caller at once */
        ll_pol_draining(vs, slot);
    return 0;
}

int ll_set_ejected(ll_vserver *vs, uint32_t slot, int ejected)
{
    if (!ll_slot_ok(vs, slot))
        return -EINVAL;
    ll_svc *s = &vs->svc[slot];
    count_svc(vs, slot, -1);
    s->ejected = ejected != 0;
    if (ejected)
        s->fails_in_row = 0;  /* after its return it needs a fresh run of failures */
    count_svc(vs, slot, +1);
    ll_refresh(vs, slot);
    return 0;
}

void ll_set_outlier_failures(ll_vserver *vs, uint32_t k) { vs->outlier_k = k; }

int ll_set_cap(ll_vserver *vs, uint32_t slot, uint32_t cap)
{
    if (!ll_slot_ok(vs, slot))
        return -EINVAL;
    ll_svc *s = &vs->svc[slot];
    vs->n_capped += (cap != LL_NO_CAP) - (s->cap != LL_NO_CAP);
    count_svc(vs, slot, -1);
    s->cap = cap;
    count_svc(vs, slot, +1);
    ll_refresh(vs, slot);
    return 0;
}

int ll_set_method(ll_vserver *vs, ll_method method)
{
    if ((unsigned)method >= LL_METHOD_COUNT)
        return -EINVAL;
    if (!ll_methods[method].supported)
        return -ENOTSUP;
    if (need_method_columns(vs, method) < 0)
        return -ENOMEM;
    vs->method = method;
    vs->ops = &ll_methods[method];
    vs->rr_round = 1;
    forget_last_pick(vs);
    refresh_all(vs);
    return 0;
}

ll_method ll_get_method(const ll_vserver *vs) { return vs->method; }

void ll_set_startup_rr(ll_vserver *vs, uint64_t requests) { vs->startup_left = requests; }
uint64_t ll_startup_rr_left(const ll_vserver *vs) { return vs->startup_left; }

static void window_from_buckets(ll_vserver *vs);

int ll_set_window(ll_vserver *vs, uint32_t seconds)
{
    if (seconds < 1 || seconds > LL_MAX_WINDOW_SECONDS)
        return -EINVAL;
    if (seconds == vs->window)
        return 0;
    size_t C = vs->capacity;
    uint64_t *bytes_bkt = calloc(C * seconds, sizeof *bytes_bkt);
    uint64_t *packets_bkt = calloc(C * seconds, sizeof *packets_bkt);
    if (!bytes_bkt || !packets_bkt) {
        free(bytes_bkt);
        free(packets_bkt);
        return -ENOMEM;
    }
    /* the last min(old, new) seconds move to their buckets in the new window */
    uint32_t keep = seconds < vs->window ? seconds : vs->window;
    uint32_t new_head = ll_window_bucket(vs->cur_sec, seconds);
    for (uint32_t k = 0; k < keep; k++) {
        size_t from = (size_t)((vs->head + vs->window - k) % vs->window) * C;
        size_t to = (size_t)((new_head + seconds - k) % seconds) * C;
        memcpy(bytes_bkt + to, vs->bytes_bkt + from, vs->n_slots * sizeof *bytes_bkt);
        memcpy(packets_bkt + to, vs->packets_bkt + from, vs->n_slots * sizeof *packets_bkt);
    }
    if (vs->fixed) {
        /* its arrays have room for the longest window: the new buckets move in */
        memcpy(vs->bytes_bkt, bytes_bkt, C * seconds * sizeof *bytes_bkt);
        memcpy(vs->packets_bkt, packets_bkt, C * seconds * sizeof *packets_bkt);
        free(bytes_bkt);
        free(packets_bkt);
    } else {
        free(vs->bytes_bkt);
        free(vs->packets_bkt);
        vs->bytes_bkt = bytes_bkt;
        vs->packets_bkt = packets_bkt;
    }
    vs->window = seconds;
    vs->head = new_head;
    ll_head_moved(vs);
    window_from_buckets(vs);
    refresh_all(vs);
    return 0;
}

/* The window totals, bucket marks and live set, from the buckets. */
static void window_from_buckets(ll_vserver *vs)
{
    size_t C = vs->capacity;
    uint32_t seconds = vs->window;
    const uint64_t *bytes_bkt = vs->bytes_bkt, *packets_bkt = vs->packets_bkt;
    for (uint32_t i = 0; i < vs->n_slots; i++) {
        uint64_t b = 0, p = 0;
        for (uint32_t k = 0; k < seconds; k++) {
            b += bytes_bkt[(size_t)k * C + i];
            p += packets_bkt[(size_t)k * C + i];
        }
        vs->bytes[i] = b;
        vs->packets[i] = p;
        uint16_t mask = 0;
        for (uint32_t k = 0; seconds <= LL_MASK_WINDOW && k < seconds; k++)
            if (bytes_bkt[(size_t)k * C + i] | packets_bkt[(size_t)k * C + i])
                mask = (uint16_t)(mask | (1u << k));
        vs->svc[i].flags = (uint16_t)((vs->svc[i].flags & LL_LIVE) | mask);
        if (slot_is_live(vs, i))
            ll_live_add(vs, i);
    }
}

uint32_t ll_window(const ll_vserver *vs) { return vs->window; }

/* ---- time ------------------------------------------------------------- */

int64_t ll_current_second(const ll_vserver *vs) { return vs->cur_sec; }
uint32_t ll_full_slot(const ll_vserver *vs) { return vs->full_slot; }
int64_t ll_cursor(const ll_vserver *vs) { return vs->cursor; }
uint32_t ll_rr_round(const ll_vserver *vs) { return vs->rr_round; }
int ll_tree_is_wide(const ll_vserver *vs) { return vs->tree.wide; }

/* One live slot at a second boundary: its expiring buckets (the n_exp
 * indices in exp[], and as a mask, `expiring`, for windows that keep one)
 * leave its totals, and its selection counts move on. Returns nonzero when
 * its key may have changed. */
static int roll_slot(ll_vserver *vs, uint32_t slot, const uint8_t *exp, uint32_t n_exp,
                     uint32_t expiring, int one_second)
{
    ll_svc *s = &vs->svc[slot];
    size_t C = vs->capacity;
    int changed = 0;
    int masked = vs->window <= LL_MASK_WINDOW;
    uint32_t gone = masked ? s->flags & expiring : 0;
    if (masked ? gone != 0 : (vs->bytes[slot] | vs->packets[slot]) != 0) {
        uint64_t bytes = 0, packets = 0;
        for (uint32_t i = 0; i < n_exp; i++) {
            if (masked && !(gone >> exp[i] & 1u))
                continue;
            size_t at = (size_t)exp[i] * C + slot;
            bytes += vs->bytes_bkt[at];
            packets += vs->packets_bkt[at];
            vs->bytes_bkt[at] = vs->packets_bkt[at] = 0;
        }
        vs->bytes[slot] -= bytes;
        vs->packets[slot] -= packets;
        s->flags = (uint16_t)(s->flags & ~gone);
        changed = ((vs->ops->inputs & LL_IN_BYTES) && bytes) || ((vs->ops->inputs & LL_IN_PACKETS) && packets);
    }
    changed |= s->sel_this != 0 && s->cap != LL_NO_CAP;  /* a capped slot may be eligible again */
    s->sel_last = one_second ? s->sel_this : 0;
    s->sel_this = 0;
    return changed;
}

/* The slow half of ll_advance(): the clock entered a later second. Walks
 * the live set only; see the top of this file. */
static int64_t roll(ll_vserver *vs, int64_t sec)
{
    /* sec > cur_sec, so the difference fits in 64 unsigned bits */
    uint64_t moved = (uint64_t)sec - (uint64_t)vs->cur_sec;
    int one_second = moved == 1;
    uint8_t exp[LL_MAX_WINDOW_SECONDS];  /* buckets head+1 .. head+moved, all of them after a long gap */
    uint32_t n_exp = 0, expiring = 0;
    for (uint64_t k = 1; k <= moved && k <= vs->window; k++) {
        exp[n_exp] = (uint8_t)((vs->head + k) % vs->window);
        expiring |= 1u << (exp[n_exp++] & 31u);  /* used only while window <= LL_MASK_WINDOW */
    }
    /* the new sel_last of every UP slot is its sel_this: the running sums become last second's */
    vs->totals.last_up = one_second ? vs->this_up : 0;
    vs->totals.last_open = one_second ? vs->this_open : 0;
    vs->this_up = vs->this_open = 0;
    uint32_t n_changed = 0;
    int rebuild = vs->n_live > vs->n_slots / 8;  /* many keys to fix: one O(n) build beats k log n */
    for (uint32_t i = vs->n_live; i-- > 0;) {  /* downwards: a removal moves in an element already seen */
        uint32_t slot = vs->live[i];
        if (roll_slot(vs, slot, exp, n_exp, expiring, one_second)) {
            n_changed++;
            if (!rebuild)
                ll_refresh(vs, slot);
        }
        if (!slot_is_live(vs, slot))
            live_drop(vs, i);
    }
    vs->cur_sec = sec;
    vs->head = ll_window_bucket(sec, vs->window);
    ll_head_moved(vs);
    if (rebuild && n_changed)
        refresh_all(vs);
    return moved > INT64_MAX ? INT64_MAX : (int64_t)moved;
}

/* Every call that sees time goes through here; the common case is one compare. */
static inline int64_t advance(ll_vserver *vs, int64_t sec)
{
    int64_t moved = sec <= vs->cur_sec ? 0 : roll(vs, sec);  /* back or same: no time passes */
    if (vs->now >= vs->pol.deadline)
        ll_pol_run(vs, vs->now);  /* the policy's due time came (ll_policy.c) */
    return moved;
}

int64_t ll_advance(ll_vserver *vs, int64_t sec) { return advance(vs, sec); }

/* ---- the request path -------------------------------------------------- */

/* The slot select() would take now (ll_pick_as: the family's pick, through the table). */
static int64_t pick(ll_vserver *vs, uint32_t *round_out, uint64_t *rng_out)
{
    return ll_pick_as(vs, round_out, rng_out, 0);
}

int64_t ll_peek(ll_vserver *vs, int64_t sec)
{
    uint32_t round;
    uint64_t rng;
    advance(vs, sec);
    return pick(vs, &round, &rng);
}

/* Charges a pick: the part of ll_select() after pick() (ll_take_as). */
static int64_t take(ll_vserver *vs, int64_t slot, uint32_t round, uint64_t rng)
{
    slot = ll_take_as(vs, slot, round, rng, ll_traits_of(vs->ops), 0);
    if (slot >= 0 && vs->ledger_row)
        vs->ledger_row[slot]++;  /* shared: the transaction is the caller's */
    return slot;
}

int64_t ll_select(ll_vserver *vs, int64_t sec)
{
    uint32_t round;
    uint64_t rng;
    advance(vs, sec);
    int64_t slot = pick(vs, &round, &rng);
    return slot < 0 ? slot : take(vs, slot, round, rng);
}

int64_t ll_select_excluding(ll_vserver *vs, int64_t sec, const uint32_t *excluded, size_t n_excluded)
{
    uint32_t round;
    uint64_t rng;
    advance(vs, sec);
    /* Hide the excluded services behind an infinite key, pick, then give
     * every one its real key back (ll_refresh recomputes it, so repeats and
     * already-ineligible slots need no bookkeeping). */
    for (size_t i = 0; i < n_excluded; i++) {
        if (ll_slot_ok(vs, excluded[i])) {
            set_key(vs, excluded[i], LL_KEY_INF);
        }
    }
    int64_t slot = pick(vs, &round, &rng);
    for (size_t i = 0; i < n_excluded; i++)
        if (ll_slot_ok(vs, excluded[i]))
            ll_refresh(vs, excluded[i]);
    return slot < 0 ? slot : take(vs, slot, round, rng);
}

int ll_record(ll_vserver *vs, uint32_t slot, int64_t sec, uint64_t bytes, uint64_t packets)
{
    if (!ll_slot_ok(vs, slot))
        return -EINVAL;
    advance(vs, sec);
    return ll_record_as(vs, slot, bytes, packets, ll_traits_of(vs->ops), 0);
}

int ll_begin(ll_vserver *vs, uint32_t slot)
{
    if (!ll_slot_ok(vs, slot))
        return -EINVAL;
    if (vs->svc[slot].active == UINT32_MAX)
        return -EOVERFLOW;
    vs->svc[slot].active++;
    if (vs->ledger_row)
        vs->ledger_row[slot]++;
    if (vs->ops->counts_active)
        ll_refresh(vs, slot);
    return 0;
}

int ll_finish(ll_vserver *vs, uint32_t slot, int has_ttfb, uint32_t ttfb_us, int failed)
{
    if (!ll_slot_ok(vs, slot) || (has_ttfb && ttfb_us > LL_MAX_TTFB_US))
        return -EINVAL;
    int rc = ll_finish_as(vs, slot, has_ttfb, ttfb_us, failed, ll_traits_of(vs->ops), 0);
    if (rc >= 0 && vs->ledger)
        ll_ledger_close(vs, slot);
    return rc;
}

/* ---- shared vservers: the ledger and the repair --------------------------- */

void ll_ledger_close(ll_vserver *vs, uint32_t slot)
{
    size_t C = vs->capacity;
    if (vs->ledger_row && vs->ledger_row[slot]) {
        vs->ledger_row[slot]--;
        return;
    }
    for (uint32_t r = 0; r < vs->ledger_rows; r++)  /* opened by another process */
        if (vs->ledger[r * C + slot]) {
            vs->ledger[r * C + slot]--;
            return;
        }
}

int ll_abandon(ll_vserver *vs, uint32_t slot, uint32_t count)
{
    if (!ll_slot_ok(vs, slot))
        return 0;
    ll_svc *s = &vs->svc[slot];
    s->active -= count < s->active ? count : s->active;
    ll_refresh(vs, slot);
    return s->draining && s->active == 0 ? LL_END_DRAINED : 0;
}

void ll_repair(ll_vserver *vs)
{
    memset(&vs->totals, 0, sizeof vs->totals);
    vs->this_up = vs->this_open = 0;
    vs->n_bound = vs->n_capped = 0;
    vs->n_weights = 0;
    memset(vs->n_of_weight, 0, sizeof vs->n_of_weight);
    for (uint32_t i = 0; i < vs->n_slots; i++) {
        ll_svc *s = &vs->svc[i];
        s->flags = 0;  /* marks and live entries: rebuilt below */
        if (!s->bound)
            continue;
        vs->n_bound++;
        vs->n_capped += s->cap != LL_NO_CAP;
        ll_hash_count_weight(vs, s->weight, +1);
        count_svc(vs, i, +1);
    }
    vs->n_live = 0;
    ll_head_moved(vs);
    window_from_buckets(vs);
    if (vs->fixed)
        span_tree(vs);  /* whatever a holder that died left of it */
    else
        refresh_all(vs);
}

int ll_probe(ll_vserver *vs, uint32_t slot, uint32_t rtt_us)
{
    if (!ll_slot_ok(vs, slot) || rtt_us > LL_MAX_TTFB_US)
        return -EINVAL;
    if (ll_column_need(vs, LL_COL_PROBE) < 0)
        return -ENOMEM;
    uint32_t *probe = ll_col_probe(vs);
    uint32_t old = probe[slot];
    /* the same smoothing as the TTFB's (ll_finish_as, ll_path.h) */
    uint32_t us = old ? (uint32_t)((7 * (uint64_t)(old - 1) + rtt_us + 4) / 8) : rtt_us;
    probe[slot] = us + 1;
    if (vs->ops->inputs & LL_IN_PROBE)
        ll_refresh(vs, slot);
    return 0;
}

int ll_set_custom_load(ll_vserver *vs, uint32_t slot, uint64_t load, int over_threshold)
{
    if (!ll_slot_ok(vs, slot) || (load & LL_CUSTOM_OVER))
        return -EINVAL;
    if (ll_column_need(vs, LL_COL_CUSTOM) < 0)
        return -ENOMEM;
    ll_col_custom(vs)[slot] = load | (over_threshold ? LL_CUSTOM_OVER : 0);
    if (vs->ops->inputs & LL_IN_CUSTOM)
        ll_refresh(vs, slot);
    return 0;
}

int ll_service_info(const ll_vserver *vs, uint32_t slot, ll_info *out)
{
    if (slot >= vs->n_slots)
        return -EINVAL;
    const ll_svc *s = &vs->svc[slot];
    out->bytes = vs->bytes[slot];
    out->packets = vs->packets[slot];
    out->load = s->bound ? load_of(vs, slot) : 0;
    out->selected = s->selected;
    out->active = s->active;
    out->ttfb_us = s->ttfb_us;
    out->cap = s->cap;
    out->sel_this_sec = s->sel_this;
    out->sel_last_sec = s->sel_last;
    out->weight = s->weight;
    out->state = s->state;
    out->bound = s->bound;
    out->ttfb_known = s->ttfb_known;
    out->draining = s->draining;
    out->ejected = s->ejected;
    out->fails_in_row = s->fails_in_row;
    out->failures = s->failures;
    out->probe_us = ll_probe_us(vs, slot);
    const uint32_t *probe = ll_col_probe(vs);
    const uint64_t *custom = ll_col_custom(vs);
    const ll_peak *peak = ll_col_peak(vs);
    out->probe_known = probe && probe[slot] != 0;
    out->custom_load = custom ? custom[slot] & ~LL_CUSTOM_OVER : 0;
    out->custom_over = custom && (custom[slot] & LL_CUSTOM_OVER) != 0;
    out->peak_known = peak && peak[slot].known;
    out->peak_us = ll_peak_estimate(vs, slot);
    return 0;
}

/* ---- request keys (the hash family: methods/hash.c, ll_hash.c) ---------- */

int ll_set_name_hash(ll_vserver *vs, uint32_t slot, uint64_t name_hash)
{
    if (!ll_slot_ok(vs, slot))
        return -EINVAL;
    if (ll_column_need(vs, LL_COL_NAME_HASH) < 0)
        return -ENOMEM;
    ll_col_name_hash(vs)[slot] = ll_hash_name_entry(name_hash);
    return 0;
}

void ll_set_rng_seed(ll_vserver *vs, uint64_t seed) { vs->rng = seed; }
void ll_set_time(ll_vserver *vs, double now) { vs->now = now; }

int ll_set_peak_decay(ll_vserver *vs, uint32_t decay_us)
{
    if (decay_us < 1 || decay_us > LL_MAX_TTFB_US)
        return -EINVAL;
    vs->peak_decay_us = decay_us;
    return 0;
}

int64_t ll_select_hash(ll_vserver *vs, int64_t sec, uint64_t key_hash, const uint32_t *excluded, size_t n_excluded)
{
    uint32_t round = vs->rr_round;
    uint64_t rng = vs->rng;
    advance(vs, sec);
    /* excluded slots hide behind an infinite key, as in ll_select_excluding */
    for (size_t i = 0; i < n_excluded; i++)
        if (ll_slot_ok(vs, excluded[i]))
            set_key(vs, excluded[i], LL_KEY_INF);
    /* the family's pick for a key (the hash family's rendezvous), else select's */
    const ll_family_ops *fam = vs->ops->fam;
    int64_t slot = fam->pick_key ? fam->pick_key(vs, key_hash) : pick(vs, &round, &rng);
    for (size_t i = 0; i < n_excluded; i++)
        if (ll_slot_ok(vs, excluded[i]))
            ll_refresh(vs, excluded[i]);
    return slot < 0 ? slot : take(vs, slot, round, rng);
}
