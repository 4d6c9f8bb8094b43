/*
 * ll_shared.c - one vserver in a POSIX shared-memory segment, used by every
 * process that opens it by name (leastload.h has the segment's layout).
 *
 * The vserver is a fixed one (ll_fixed.c) placed after the header and the
 * names: its arrays sit at offsets fixed by its capacity, so a process that
 * maps the segment at another address only lays the pointers out again
 * when it takes the lock (forked workers map it at the same address: one
 * compare). Every call on it happens under one robust process-shared mutex.
 *
 * A process can die anywhere. Its open transactions are in its ledger row
 * (the core counts them on every pick, begin and finish), so whoever sees it
 * dead ends them: the lock's next holder at once when it died holding the
 * lock (the kernel reports that: EOWNERDEAD), otherwise the liveness sweep
 * that any lock runs every LL_SHARED_SWEEP_NS. A holder that died in the
 * middle of a call may have left the state half-changed: the counts that
 * matter are rebuilt from what is whole (each service's open transactions
 * from the ledger of the living, everything derived by ll_repair).
 *
 * POSIX, not plain C11 like the rest of the core; the engine itself still
 * reads no clock (only the sweep does, to pace itself).
 */
#define _GNU_SOURCE 1 /* MAP_FIXED_NOREPLACE; the rest is POSIX.1-2008 */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ll_fixed.h"
#include "ll_internal.h"

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
};

/* Moves in every child a fork makes: a forked handle takes a row of its own. */
static uint64_t fork_generation;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void on_fork_child(void) { fork_generation++; }
static void install_atfork(void) { pthread_atfork(NULL, NULL, on_fork_child); }

static size_t up64(size_t x) { return (x + 63) & ~(size_t)63; }

/* ---- liveness ------------------------------------------------------------ */

/* /proc/<pid>/stat's state and start time: 0, -ENOENT (no such process),
 * or -1 (no /proc to ask). */
static int read_stat(int pid, char *state, uint64_t *started)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ENOENT : -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');  /* the command name may hold anything */
    if (!p || p[1] != ' ')
        return -1;
    p += 2;
    *state = *p;
    for (int field = 3; field < 22; field++) {  /* the start time is field 22 */
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    *started = strtoull(p, NULL, 10);
    return 0;
}

/* 0 when the process is gone, a zombie, or its pid belongs to another one now. */
static int proc_alive(const ll_shared_proc *p)
{
    if (p->pid <= 0)
        return 0;
    if (kill(p->pid, 0) < 0 && errno == ESRCH)
        return 0;
    char state;
    uint64_t started;
    int rc = read_stat(p->pid, &state, &started);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return 1;  /* no /proc: kill's answer */
    if (state == 'Z' || state == 'X' || state == 'x')
        return 0;
    return p->started == 0 || started == p->started;
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

static void clear_name(ll_shared *sh, uint32_t slot)
{
    ll_shared_label *l = &sh->labels[slot];
    if (l->serial || l->len) {
        l->serial = 0;
        l->len = 0;
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
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return;
    int64_t now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
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
    char state;
    uint64_t started = 0;
    if (read_stat((int)getpid(), &state, &started) < 0)
        started = 0;
    procs[r].pid = (int32_t)getpid();
    procs[r].started = started;
    sh->me = r;
    sh->fork_gen = fork_generation;
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
    if (rc == EOWNERDEAD) {
        recover(sh);
        pthread_mutex_consistent(&sh->hdr->lock);
        repaired = 1;
    } else if (rc != 0) {
        return -rc;
    }
    if (sh->fork_gen != fork_generation) {  /* a forked child: a row of its own first */
        int j = join(sh);
        if (j < 0) {
            pthread_mutex_unlock(&sh->hdr->lock);
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
    return locked(sh, pthread_mutex_lock(&sh->hdr->lock), vs);
}

int ll_shared_trylock(ll_shared *sh, ll_vserver **vs)
{
    return locked(sh, pthread_mutex_trylock(&sh->hdr->lock), vs);
}

int ll_shared_tryenter(ll_shared *sh, const ll_shared_seen *seen, uint64_t *seq, ll_vserver **vs)
{
    ll_shared_header *h = sh->hdr;
    int rc = locked(sh, pthread_mutex_trylock(&h->lock), vs);
    if (rc < 0)
        return rc;
    *seq = h->seq;
    return rc == 0 && h->names_gen == seen->names_gen && h->policy_gen == seen->policy_gen
           && h->reclaimed == seen->reclaimed ? 0 : 1;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int ll_shared_lock_spinning(ll_shared *sh, ll_vserver **vs, unsigned spins)
{
    for (unsigned i = 0;; i++) {
        int rc = pthread_mutex_trylock(&sh->hdr->lock);
        if (rc != EBUSY)
            return locked(sh, rc, vs);
        if (i >= spins)
            return -EBUSY;
        cpu_relax();
    }
}

void ll_shared_unlock(ll_shared *sh)
{
    pthread_mutex_unlock(&sh->hdr->lock);
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

int ll_shared_set_policy(ll_shared *sh, const void *data, uint32_t len)
{
    if (len > LL_SHARED_POLICY_BYTES || (len && !data))
        return len > LL_SHARED_POLICY_BYTES ? -E2BIG : -EINVAL;
    if (len)
        memcpy(sh->base + sh->hdr->policy_at, data, len);
    sh->hdr->policy_len = len;
    sh->hdr->policy_gen++;
    return 0;
}

const unsigned char *ll_shared_policy(const ll_shared *sh) { return sh->base + sh->hdr->policy_at; }

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

/* Where the policy record and the vserver go, after the header and the names. */
static size_t policy_at(size_t labels_at, uint32_t capacity)
{
    return up64(labels_at + (size_t)capacity * sizeof(ll_shared_label));
}

static int create(const char *name, ll_method method, int64_t sec, uint32_t capacity, const void *settings,
                  uint32_t settings_len, ll_shared **out)
{
    size_t labels_at = up64(sizeof(ll_shared_header));
    size_t vserver_at = up64(policy_at(labels_at, capacity) + LL_SHARED_POLICY_BYTES);
    size_t size = vserver_at + ll_fixed_size(capacity, LL_SHARED_MAX_PROCS);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        return -errno;
    int rc = 0;
    void *mem = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) < 0)
        rc = -errno;
    else if ((mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
        rc = -errno;
    close(fd);
    ll_shared *sh = rc ? NULL : calloc(1, sizeof *sh);
    if (!rc && !sh)
        rc = -ENOMEM;
    if (!rc) {
        ll_shared_header *h = mem;
        h->version = LL_SHARED_VERSION;
        h->size = size;
        h->capacity = capacity;
        h->vserver_bytes = (uint32_t)sizeof(ll_vserver);
        h->map_address = (uint64_t)(uintptr_t)mem;
        h->labels_at = labels_at;
        h->policy_at = policy_at(labels_at, capacity);
        h->vserver_at = vserver_at;
        h->settings_len = settings_len;
        if (settings_len)
            memcpy(h->settings, settings, settings_len);
        pthread_mutexattr_t attr;
        if (pthread_mutexattr_init(&attr) != 0)
            rc = -ENOMEM;
        else {
            if (pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) != 0
                || pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) != 0
                || pthread_mutex_init(&h->lock, &attr) != 0)
                rc = -ENOTSUP;
            pthread_mutexattr_destroy(&attr);
        }
        if (!rc && !ll_fixed_create((unsigned char *)mem + vserver_at, size - vserver_at, method, sec, capacity,
                                    LL_SHARED_MAX_PROCS))
            rc = -EINVAL;
    }
    if (!rc) {
        place(sh, mem, size);
        rc = join(sh);
    }
    if (rc) {
        free(sh);
        if (mem != MAP_FAILED)
            munmap(mem, size);
        shm_unlink(name);
        return rc;
    }
    sh->hdr->magic = LL_SHARED_MAGIC;
    __atomic_store_n(&sh->hdr->ready, 1u, __ATOMIC_RELEASE);
    *out = sh;
    return 1;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* The segment mapped at the creator's address when that place is free here too
 * (Linux: MAP_FIXED_NOREPLACE), so that no lock ever has to lay the vserver's
 * pointers out again; else `mem` as it is. */
static void *map_where_the_creator_did(void *mem, size_t size, int fd)
{
#ifdef MAP_FIXED_NOREPLACE
    void *want = (void *)(uintptr_t)((ll_shared_header *)mem)->map_address;
    if (want && want != mem) {
        void *there = mmap(want, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
        if (there == want) {
            munmap(mem, size);
            return there;
        }
        if (there != MAP_FAILED)  /* an old kernel took the flag for a hint and mapped elsewhere */
            munmap(there, size);
    }
#else
    (void)size;
    (void)fd;
#endif
    return mem;
}

/* 0 attached; -EAGAIN: gone, being removed, or a leftover (removed here): open again. */
static int attach(const char *name, ll_shared **out)
{
    int fd = shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return errno == ENOENT ? -EAGAIN : -errno;
    void *mem = MAP_FAILED;
    size_t size = 0;
    for (int waited = 0; waited <= WAIT_READY_MS; waited++) {
        struct stat st;
        if (fstat(fd, &st) < 0) {
            int e = -errno;
            close(fd);
            return e;
        }
        if ((size_t)st.st_size >= sizeof(ll_shared_header)) {
            size = (size_t)st.st_size;
            mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (mem == MAP_FAILED) {
                int e = -errno;
                close(fd);
                return e;
            }
            if (__atomic_load_n(&((ll_shared_header *)mem)->ready, __ATOMIC_ACQUIRE) == 1u)
                break;
            munmap(mem, size);
            mem = MAP_FAILED;
        }
        sleep_ms(1);
    }
    if (mem == MAP_FAILED) {  /* its creator died before it was ready */
        close(fd);
        shm_unlink(name);
        return -EAGAIN;
    }
    ll_shared_header *h = mem;
    size_t labels_at = up64(sizeof(ll_shared_header));
    if (h->magic != LL_SHARED_MAGIC || h->version != LL_SHARED_VERSION || h->vserver_bytes != sizeof(ll_vserver)
        || h->size != size || h->labels_at != labels_at || h->capacity < 1 || h->capacity > LL_FIXED_MAX_CAPACITY
        || h->policy_at != policy_at(labels_at, h->capacity)
        || h->vserver_at != up64(h->policy_at + LL_SHARED_POLICY_BYTES) || h->policy_len > LL_SHARED_POLICY_BYTES
        || h->vserver_at + ll_fixed_size(h->capacity, LL_SHARED_MAX_PROCS) != size) {
        munmap(mem, size);
        close(fd);
        return -EPROTO;
    }
    mem = map_where_the_creator_did(mem, size, fd);
    h = mem;
    close(fd);
    ll_shared *sh = calloc(1, sizeof *sh);
    if (!sh) {
        munmap(mem, size);
        return -ENOMEM;
    }
    place(sh, mem, size);
    int rc = pthread_mutex_lock(&h->lock);
    if (rc == EOWNERDEAD) {
        recover(sh);
        pthread_mutex_consistent(&h->lock);
    } else if (rc != 0) {
        free(sh);
        munmap(mem, size);
        return -rc;
    }
    adopt(sh);
    int alive = 0;
    for (uint32_t r = 0; r < LL_SHARED_MAX_PROCS; r++)
        alive += proc_alive(&h->procs[r]);
    if (h->dead || !alive) {
        if (!h->dead) {  /* nobody alive has it: a leftover, replaced */
            h->dead = 1;
            shm_unlink(name);
        }
        rc = -EAGAIN;
    } else {
        rc = join(sh);
    }
    pthread_mutex_unlock(&h->lock);
    if (rc) {
        free(sh);
        munmap(mem, size);
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
    pthread_once(&atfork_once, install_atfork);
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
    munmap(sh->base, sh->size);
    free(sh);
}

int ll_shared_unlink(const char *name)
{
    int rc = name_ok(name);
    if (rc < 0)
        return rc;
    return shm_unlink(name) < 0 ? -errno : 0;
}
