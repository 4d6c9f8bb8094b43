/*
 * ll_shared.c - one vserver in a shared-memory segment, used by every
 * process that opens it by name (leastload.h has the segment's layout).
 *
 * The vserver is a fixed one (ll_fixed.c) placed after the header and the
 * names: its arrays sit at offsets fixed by its capacity, so a process that
 * maps the segment at another address only lays the pointers out again
 * when it takes the lock (forked workers map it at the same address: one
 * compare). Every call on it happens under one process-shared lock that
 * survives its holder's death (ll_shared_os.h: the segment, the lock and
 * liveness on each platform).
 *
 * A process can die anywhere. Its open transactions are in its ledger row
 * (the core counts them on every pick, begin and finish), so whoever sees it
 * dead ends them: the lock's next holder at once when it died holding the
 * lock (the lock reports that: LL_OS_OWNER_DIED), otherwise the liveness sweep
 * that any lock runs every LL_SHARED_SWEEP_NS. A holder that died in the
 * middle of a call may have left the state half-changed: the counts that
 * matter are rebuilt from what is whole (each service's open transactions
 * from the ledger of the living, everything derived by ll_repair).
 *
 * Plain C11 over ll_shared_os.h; the engine itself still reads no clock
 * (only the sweep does, to pace itself).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ll_fixed.h"
#include "ll_internal.h"
#include "ll_shared_os.h"

#define NAME_MAX_BYTES 201     /* "/" and 200 more */
#define WAIT_READY_MS 2000     /* a creator is given this long to initialize */
#define NO_ROW UINT32_MAX

struct ll_shared {
    unsigned char *base;
    size_t size;
    ll_shared_header *hdr;
    ll_shared_label *labels;
    ll_vserver *vs;
    uint32_t me;          /* this process's entry in procs[] and row of the ledger */
    uint64_t fork_gen;    /* the fork generation `me` was taken in */
    uint32_t locks;       /* locks taken here: every 16th reads the sweep's clock */
    ll_os_map map;        /* this process's mapping of the segment */
    ll_os_lock lock;      /* and its handle on the segment's lock */
};

static size_t up64(size_t x) { return (x + 63) & ~(size_t)63; }

/* ---- liveness ------------------------------------------------------------ */

/* 0 when the process is gone, a zombie, or its pid belongs to another one now. */
static int proc_alive(const ll_shared_proc *p)
{
    uint64_t started;
    if (!ll_os_proc(p->pid, &started))
        return 0;
    return p->started == 0 || started == 0 || started == p->started;
}

/* Makes the vserver this process's to use, under the lock: its pointers laid out
 * for this mapping when the last holder had it elsewhere, the method table this
 * process's (its library may sit at another address even where the segment sits
 * at the same one: a process started by spawn or exec), and this process's
 * ledger row. Every lock does this, whoever locked before: the vserver's
 * per-process fields are only ever trusted between this call and the unlock.
 * (A cheaper rule once skipped it when the same handle had locked last, and an
 * attach in between left that handle another process's method table.) */
static void adopt(ll_shared *sh)
{
    ll_vserver *vs = sh->vs;
    if (vs->self != (void *)vs)
        ll_fixed_rebase(vs);
    vs->ops = &ll_methods[vs->method];
    vs->ledger_row = sh->me == NO_ROW ? NULL : vs->ledger + (size_t)sh->me * vs->capacity;
}

/* ---- the ledger ------------------------------------------------------------ */

/* The slot is unbound (serial 0); its name stays readable until compaction
 * reuses the slot, so that the policy's events about it can still be named. */
static void clear_name(ll_shared *sh, uint32_t slot)
{
    ll_shared_label *l = &sh->labels[slot];
    if (l->serial) {
        l->serial = 0;
        sh->hdr->names_gen++;
    }
}

/* Ends the transactions of row r with no outcome and frees its entry. */
static uint64_t reclaim_row(ll_shared *sh, uint32_t r)
{
    ll_vserver *vs = sh->vs;
    uint32_t *row = vs->ledger + (size_t)r * vs->capacity;
    uint64_t n = 0;
    for (uint32_t slot = 0; slot < vs->n_slots; slot++) {
        uint32_t c = row[slot];
        if (!c)
            continue;
        row[slot] = 0;
        n += c;
        ll_abandon(vs, slot, c);  /* a draining service left idle: the callers unbind it */
    }
    memset(&sh->hdr->procs[r], 0, sizeof sh->hdr->procs[r]);
    sh->hdr->reclaimed += n;
    return n;
}

uint64_t ll_shared_reclaim(ll_shared *sh)
{
    uint64_t n = 0;
    for (uint32_t r = 0; r < LL_SHARED_MAX_PROCS; r++)
        if (r != sh->me && sh->hdr->procs[r].pid && !proc_alive(&sh->hdr->procs[r]))
            n += reclaim_row(sh, r);
    return n;
}

static void maybe_sweep(ll_shared *sh)
{
    int64_t now = ll_os_monotonic_ns();
    if (now < sh->hdr->next_sweep_ns)
        return;
    sh->hdr->next_sweep_ns = now + LL_SHARED_SWEEP_NS;
    ll_shared_reclaim(sh);
}

/* Takes an entry (and ledger row) for this process: a free one, or one whose
 * process has died (its transactions ended first). Under the lock. */
static int join(ll_shared *sh)
{
    ll_shared_proc *procs = sh->hdr->procs;
    uint32_t r = NO_ROW;
    for (uint32_t i = 0; i < LL_SHARED_MAX_PROCS && r == NO_ROW; i++)
        if (!procs[i].pid)
            r = i;
    for (uint32_t i = 0; i < LL_SHARED_MAX_PROCS && r == NO_ROW; i++)
        if (!proc_alive(&procs[i])) {
            reclaim_row(sh, i);
            r = i;
        }
    if (r == NO_ROW)
        return -EUSERS;
    ll_os_self(&procs[r].pid, &procs[r].started);
    sh->me = r;
    sh->fork_gen = ll_os_fork_gen;
    return 0;
}

/* The holder before us died, maybe in the middle of a call. */
static void recover(ll_shared *sh)
{
    ll_vserver *vs = sh->vs;
    adopt(sh);
    vs->ledger_row = NULL;  /* nothing the repair does is counted to this process */
    ll_shared_reclaim(sh);
    size_t C = vs->capacity;
    for (uint32_t slot = 0; slot < vs->n_slots; slot++) {
        ll_shared_label *l = &sh->labels[slot];
        if (l->len > LL_SHARED_NAME_BYTES)
            l->len = 0;
        if (vs->svc[slot].bound && !l->serial) {  /* bound, never named: a bind cut short */
            ll_unbind(vs, slot);
            continue;
        }
        if (!vs->svc[slot].bound) {
            clear_name(sh, slot);
            continue;
        }
        uint64_t open = 0;  /* what the living have open there */
        for (uint32_t r = 0; r < vs->ledger_rows; r++)
            open += vs->ledger[r * C + slot];
        vs->svc[slot].active = open > UINT32_MAX ? UINT32_MAX : (uint32_t)open;
    }
    ll_repair(vs);
    sh->hdr->names_gen++;
    sh->hdr->repairs++;
}

/* ---- the lock ---------------------------------------------------------- */

static int locked(ll_shared *sh, int rc, ll_vserver **out)
{
    int repaired = 0;
    if (rc == LL_OS_OWNER_DIED) {
        recover(sh);
        ll_os_lock_consistent(&sh->lock);
        repaired = 1;
    } else if (rc != 0) {
        return rc;
    }
    if (sh->fork_gen != ll_os_fork_gen) {  /* a forked child: a row of its own first */
        int j = join(sh);
        if (j < 0) {
            ll_os_lock_release(&sh->lock);
            return j;
        }
    }
    adopt(sh);
    sh->hdr->seq++;
    if ((++sh->locks & 15u) == 0)
        maybe_sweep(sh);
    *out = sh->vs;
    return repaired;
}

int ll_shared_lock(ll_shared *sh, ll_vserver **vs)
{
    return locked(sh, ll_os_lock_take(&sh->lock, 1), vs);
}

int ll_shared_trylock(ll_shared *sh, ll_vserver **vs)
{
    return locked(sh, ll_os_lock_take(&sh->lock, 0), vs);
}

int ll_shared_tryenter(ll_shared *sh, const ll_shared_seen *seen, uint64_t *seq, ll_vserver **vs)
{
    ll_shared_header *h = sh->hdr;
    int rc = locked(sh, ll_os_lock_take(&sh->lock, 0), vs);
    if (rc < 0)
        return rc;
    *seq = h->seq;
    return rc == 0 && h->names_gen == seen->names_gen && h->policy_gen == seen->policy_gen
           && h->reclaimed == seen->reclaimed ? 0 : 1;
}

int ll_shared_lock_spinning(ll_shared *sh, ll_vserver **vs, unsigned spins)
{
    for (unsigned i = 0;; i++) {
        int rc = ll_os_lock_take(&sh->lock, 0);
        if (rc != -EBUSY)
            return locked(sh, rc, vs);
        if (i >= spins)
            return -EBUSY;
        ll_os_cpu_relax();
    }
}

static void name_events(ll_shared *sh);

void ll_shared_unlock(ll_shared *sh)
{
    name_events(sh);
    ll_os_lock_release(&sh->lock);
}

ll_shared_header *ll_shared_header_of(const ll_shared *sh) { return sh->hdr; }
const ll_shared_label *ll_shared_labels(const ll_shared *sh) { return sh->labels; }

/* ---- names ----------------------------------------------------------------- */

int ll_shared_set_name(ll_shared *sh, uint32_t slot, const char *name, size_t len)
{
    if (slot >= sh->hdr->capacity || (len && !name))
        return -EINVAL;
    if (len > LL_SHARED_NAME_BYTES)
        return -ENAMETOOLONG;
    if (!len) {
        clear_name(sh, slot);
        return 0;
    }
    ll_shared_label *l = &sh->labels[slot];
    memcpy(l->name, name, len);
    l->len = (uint32_t)len;
    l->serial = ++sh->hdr->next_serial;
    sh->hdr->names_gen++;
    return 0;
}

void ll_shared_settings_changed(ll_shared *sh)
{
    sh->hdr->policy_gen++;
}

const ll_shared_label *ll_shared_event_names(const ll_shared *sh)
{
    return (const ll_shared_label *)(const void *)(sh->base + sh->hdr->events_at);
}

/* Names the policy's events made since the last time, from the labels now
 * (an unbound slot keeps its name until compaction): run at every unlock and
 * before every compaction, so each event is named while its slot is its own. */
static void name_events(ll_shared *sh)
{
    ll_shared_header *h = sh->hdr;
    uint64_t n = ll_event_count(sh->vs);
    if (h->events_named == n)
        return;
    ll_shared_label *names = (ll_shared_label *)(void *)(sh->base + h->events_at);
    for (uint64_t i = n - h->events_named > LL_EVENTS ? n - LL_EVENTS : h->events_named; i < n; i++) {
        ll_event e;
        ll_shared_label *to = &names[i % LL_EVENTS];
        if (ll_event_at(sh->vs, i, &e) == 0 && e.slot < h->capacity)
            *to = sh->labels[e.slot];
        else
            memset(to, 0, sizeof *to);
    }
    h->events_named = n;
}

int64_t ll_shared_slot_of(const ll_shared *sh, const char *name, size_t len)
{
    const ll_vserver *vs = sh->vs;
    for (uint32_t slot = 0; slot < vs->n_slots; slot++) {
        const ll_shared_label *l = &sh->labels[slot];
        if (vs->svc[slot].bound && l->serial && l->len == len && memcmp(l->name, name, len) == 0)
            return slot;
    }
    return -ENOENT;
}

void ll_shared_compact(ll_shared *sh)
{
    ll_vserver *vs = sh->vs;
    uint32_t j = 0, n = vs->n_slots;
    name_events(sh);  /* before the labels move */
    for (uint32_t i = 0; i < n; i++)
        if (vs->svc[i].bound) {
            if (j != i)
                sh->labels[j] = sh->labels[i];
            j++;
        }
    for (uint32_t i = j; i < n; i++)
        memset(&sh->labels[i], 0, sizeof sh->labels[i]);
    ll_compact(vs);
    sh->hdr->names_gen++;
}

/* ---- opening and closing ---------------------------------------------------- */

static int name_ok(const char *name)
{
    if (!name || name[0] != '/')
        return -EINVAL;
    size_t n = strlen(name);
    if (n < 2)
        return -EINVAL;
    if (n > NAME_MAX_BYTES)
        return -ENAMETOOLONG;
    return strchr(name + 1, '/') ? -EINVAL : 0;
}

static void place(ll_shared *sh, unsigned char *base, size_t size)
{
    sh->base = base;
    sh->size = size;
    sh->hdr = (ll_shared_header *)(void *)base;
    sh->labels = (ll_shared_label *)(void *)(base + sh->hdr->labels_at);
    sh->vs = (ll_vserver *)(void *)(base + sh->hdr->vserver_at);
    sh->me = NO_ROW;
}

/* Where the events' names and the vserver go, after the header and the names. */
static size_t events_at(size_t labels_at, uint32_t capacity)
{
    return up64(labels_at + (size_t)capacity * sizeof(ll_shared_label));
}

static int create(const char *name, ll_method method, int64_t sec, uint32_t capacity, const void *settings,
                  uint32_t settings_len, ll_shared **out)
{
    size_t labels_at = up64(sizeof(ll_shared_header));
    size_t vserver_at = up64(events_at(labels_at, capacity) + LL_EVENTS * sizeof(ll_shared_label));
    size_t size = vserver_at + ll_fixed_size(capacity, LL_SHARED_MAX_PROCS);
    ll_os_map map;
    int rc = ll_os_create(name, size, &map);
    if (rc)
        return rc;
    void *mem = map.base;
    ll_shared *sh = calloc(1, sizeof *sh);
    if (!sh)
        rc = -ENOMEM;
    if (!rc) {
        sh->map = map;
        ll_shared_header *h = mem;
        h->version = LL_SHARED_VERSION;
        h->size = size;
        h->capacity = capacity;
        h->vserver_bytes = (uint32_t)sizeof(ll_vserver);
        h->map_address = (uint64_t)(uintptr_t)mem;
        h->labels_at = labels_at;
        h->events_at = events_at(labels_at, capacity);
        h->vserver_at = vserver_at;
        h->settings_len = settings_len;
        if (settings_len)
            memcpy(h->settings, settings, settings_len);
        h->lock_kind = LL_OS_LOCK_KIND;
        rc = ll_os_lock_init(h->lock, name, &sh->lock);
        if (!rc && !ll_fixed_create((unsigned char *)mem + vserver_at, size - vserver_at, method, sec, capacity,
                                    LL_SHARED_MAX_PROCS))
            rc = -EINVAL;
    }
    if (!rc) {
        place(sh, mem, size);
        rc = join(sh);
    }
    if (rc) {
        if (sh)
            ll_os_lock_close(&sh->lock);
        free(sh);
        ll_os_close(&map);
        ll_os_unlink(name);
        return rc;
    }
    ll_os_opened(&sh->map);
    sh->hdr->magic = LL_SHARED_MAGIC;
    __atomic_store_n(&sh->hdr->ready, 1u, __ATOMIC_RELEASE);
    *out = sh;
    return 1;
}

/* 0 attached; -EAGAIN: gone, being removed, or a leftover (removed here): open again. */
static int attach(const char *name, ll_shared **out)
{
    ll_os_map map;
    int rc = ll_os_open(name, &map);
    if (rc < 0)
        return rc == -ENOENT ? -EAGAIN : rc;
    void *mem = NULL;
    size_t size = 0;
    for (int waited = 0; waited <= WAIT_READY_MS; waited++) {
        if ((rc = ll_os_size(&map, &size)) < 0) {
            ll_os_close(&map);
            return rc;
        }
        if (size >= sizeof(ll_shared_header)) {
            if ((rc = ll_os_view(&map, size)) < 0) {
                ll_os_close(&map);
                return rc;
            }
            mem = map.base;
            if (__atomic_load_n(&((ll_shared_header *)mem)->ready, __ATOMIC_ACQUIRE) == 1u)
                break;
            ll_os_unview(&map);
            mem = NULL;
        }
        ll_os_sleep_ms(1);
    }
    if (!mem) {  /* its creator died before it was ready */
        ll_os_close(&map);
        ll_os_unlink(name);
        return -EAGAIN;
    }
    ll_shared_header *h = mem;
    if (!LL_OS_SIZE_EXACT && h->size <= size)  /* the system counts whole pages */
        size = map.size = h->size;
    if (h->lock_kind != LL_OS_LOCK_KIND) {  /* another platform's or build's lock */
        ll_os_close(&map);
        return -EPROTO;
    }
    size_t labels_at = up64(sizeof(ll_shared_header));
    if (h->magic != LL_SHARED_MAGIC || h->version != LL_SHARED_VERSION || h->vserver_bytes != sizeof(ll_vserver)
        || h->size != size || h->labels_at != labels_at || h->capacity < 1 || h->capacity > LL_FIXED_MAX_CAPACITY
        || h->events_at != events_at(labels_at, h->capacity)
        || h->vserver_at != up64(h->events_at + LL_EVENTS * sizeof(ll_shared_label))
        || h->vserver_at + ll_fixed_size(h->capacity, LL_SHARED_MAX_PROCS) != size) {
        ll_os_close(&map);
        return -EPROTO;
    }
    /* at the creator's address when that place is free here too, so that no
     * lock ever has to lay the vserver's pointers out again */
    ll_os_move_to(&map, (void *)(uintptr_t)h->map_address);
    ll_os_opened(&map);
    mem = map.base;
    h = mem;
    ll_shared *sh = calloc(1, sizeof *sh);
    if (!sh) {
        ll_os_close(&map);
        return -ENOMEM;
    }
    sh->map = map;
    place(sh, mem, size);
    if ((rc = ll_os_lock_open(h->lock, name, &sh->lock)) < 0) {
        free(sh);
        ll_os_close(&map);
        return rc;
    }
    rc = ll_os_lock_take(&sh->lock, 1);
    if (rc == LL_OS_OWNER_DIED) {
        recover(sh);
        ll_os_lock_consistent(&sh->lock);
    } else if (rc != 0) {
        ll_os_lock_close(&sh->lock);
        free(sh);
        ll_os_close(&map);
        return rc;
    }
    adopt(sh);
    int alive = 0;
    for (uint32_t r = 0; r < LL_SHARED_MAX_PROCS; r++)
        alive += proc_alive(&h->procs[r]);
    if (h->dead || !alive) {
        if (!h->dead) {  /* nobody alive has it: a leftover, replaced */
            h->dead = 1;
            ll_os_unlink(name);
        }
        rc = -EAGAIN;
    } else {
        rc = join(sh);
    }
    ll_os_lock_release(&sh->lock);
    if (rc) {
        ll_os_lock_close(&sh->lock);
        free(sh);
        ll_os_close(&map);
        return rc;
    }
    *out = sh;
    return 0;
}

int ll_shared_open(const char *name, ll_method method, int64_t sec, uint32_t capacity, const void *settings,
                   uint32_t settings_len, ll_shared **out)
{
    int rc = name_ok(name);
    if (rc < 0)
        return rc;
    if (!out || capacity < 1 || capacity > LL_FIXED_MAX_CAPACITY || settings_len > LL_SHARED_SETTINGS_BYTES
        || (settings_len && !settings) || (unsigned)method >= LL_METHOD_COUNT || !ll_methods[method].supported)
        return -EINVAL;
    ll_os_init();
    for (int attempt = 0; attempt < 50; attempt++) {
        rc = create(name, method, sec, capacity, settings, settings_len, out);
        if (rc != -EEXIST)
            return rc;
        rc = attach(name, out);
        if (rc != -EAGAIN)
            return rc;
    }
    return -EBUSY;
}

void ll_shared_close(ll_shared *sh)
{
    if (!sh)
        return;
    ll_vserver *vs;
    if (ll_shared_lock(sh, &vs) >= 0) {
        reclaim_row(sh, sh->me);  /* nobody will finish what this process had open */
        ll_shared_unlock(sh);
    }
    ll_os_lock_close(&sh->lock);
    ll_os_close(&sh->map);
    free(sh);
}

int ll_shared_unlink(const char *name)
{
    int rc = name_ok(name);
    if (rc < 0)
        return rc;
    return ll_os_unlink(name);
}
