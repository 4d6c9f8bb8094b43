/*
 * ll_shared_owner.c - the shared vserver's lock where there are no robust
 * mutexes (macOS; on Linux too with LL_SHARED_LOCK_PORTABLE, so that the
 * tests run it): one 64-bit owner word in the header, 0 when free, else the
 * holder's pid (high half) and the low half of its start time.
 *
 * Why an owner word and not flock(): a lock that recovers from a dead holder
 * needs to know *that* it was handed over by a death, since the state may be
 * half-changed then. flock() is released silently when its holder dies, so
 * the next holder cannot tell; a macOS pthread mutex without the robust
 * attribute stays locked forever. The owner word says who holds the lock, and
 * a waiter that finds that process gone (kill(pid, 0) says ESRCH, or the pid
 * now belongs to a process started at another time, or it is a zombie) takes
 * the word over with a compare-and-swap on exactly the dead holder's value:
 * of several waiters one wins, and it alone repairs (LL_OS_OWNER_DIED).
 *
 * Costs and limits: taking a free lock is one CAS, releasing one store. A
 * waiter spins briefly, then sleeps 50 us doubling to 1 ms between tries and
 * asks about the holder's liveness before each sleep; trylock never asks
 * (a dead holder is seen by the next waiting lock). A pid reused by a process
 * whose start time's low 32 bits are the dead holder's, within that window,
 * would keep the lock held: not a practical case. No fairness: a released
 * lock goes to whichever waiter tries first.
 */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L /* nanosleep, sched_yield */
#endif
#include "ll_shared_os.h"

#if defined(LL_OS_POSIX) && LL_OS_LOCK_KIND == LL_SHARED_LOCK_OWNER
#include <sched.h>
#include <time.h>

#define SPINS 64
#define SLEEP_FIRST_NS 50000L
#define SLEEP_MAX_NS 1000000L

static uint64_t *word(const ll_os_lock *l) { return (uint64_t *)l->words; }

static uint64_t identity(int32_t pid, uint64_t started)
{
    return (uint64_t)(uint32_t)pid << 32 | (uint32_t)started;
}

/* This process's owner word, computed again in a forked child. */
static uint64_t me(ll_os_lock *l)
{
    if (l->gen != ll_os_fork_gen || !l->me) {
        int32_t pid;
        uint64_t started;
        ll_os_self(&pid, &started);
        l->me = identity(pid, started);
        l->gen = ll_os_fork_gen;
    }
    return l->me;
}

/* 1 when the process that wrote `owner` is gone. */
static int owner_dead(uint64_t owner)
{
    uint64_t started;
    if (!ll_os_proc((int32_t)(owner >> 32), &started))
        return 1;
    uint32_t then = (uint32_t)owner;
    return then && started && (uint32_t)started != then;  /* the pid is another process's now */
}

static int try_once(ll_os_lock *l, uint64_t mine, uint64_t *owner)
{
    *owner = 0;
    return __atomic_compare_exchange_n(word(l), owner, mine, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static void nap(long ns)
{
    /* ll_os_sleep_ms is too coarse here */
    struct timespec ts = { 0, ns };
    nanosleep(&ts, NULL);
}

int ll_os_lock_init(void *words, const char *name, ll_os_lock *l)
{
    (void)name;
    l->words = words;
    l->handle = 0;
    l->me = 0;
    __atomic_store_n(word(l), 0, __ATOMIC_RELEASE);
    return 0;
}

int ll_os_lock_open(void *words, const char *name, ll_os_lock *l)
{
    (void)name;
    l->words = words;
    l->handle = 0;
    l->me = 0;
    return 0;
}

int ll_os_lock_take(ll_os_lock *l, int wait)
{
    uint64_t mine = me(l), owner;
    if (try_once(l, mine, &owner))
        return 0;
    if (!wait)
        return -EBUSY;
    for (int i = 0; i < SPINS; i++) {
        ll_os_cpu_relax();
        if (!__atomic_load_n(word(l), __ATOMIC_RELAXED) && try_once(l, mine, &owner))
            return 0;
    }
    for (long ns = SLEEP_FIRST_NS;; ns = ns * 2 > SLEEP_MAX_NS ? SLEEP_MAX_NS : ns * 2) {
        if (try_once(l, mine, &owner))
            return 0;
        if (owner_dead(owner)) {
            /* only a waiter that replaces exactly the dead holder's word repairs */
            if (__atomic_compare_exchange_n(word(l), &owner, mine, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                return LL_OS_OWNER_DIED;
            continue;
        }
        if (ns == SLEEP_FIRST_NS)
            sched_yield();
        nap(ns);
    }
}

void ll_os_lock_consistent(ll_os_lock *l) { (void)l; }
void ll_os_lock_release(ll_os_lock *l) { __atomic_store_n(word(l), 0, __ATOMIC_RELEASE); }
void ll_os_lock_close(ll_os_lock *l) { (void)l; }

#else
typedef int ll_shared_owner_unused; /* another platform's lock is built */
#endif
