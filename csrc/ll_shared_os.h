/*
 * ll_shared_os.h - what a shared vserver (ll_shared.c) needs of the operating
 * system: a named segment mapped by every process, one lock over it that
 * survives the death of its holder, and who is alive. One implementation per
 * platform, each .c file compiling to nothing on the others:
 *
 *   ll_shared_posix.c   Linux and macOS: shm_open + mmap, liveness, the clock
 *   ll_shared_robust.c  Linux: a robust process-shared pthread mutex
 *   ll_shared_owner.c   macOS (no robust mutexes): an owner word taken by CAS,
 *                       recovered when its owner is seen dead; also on Linux
 *                       with LL_SHARED_LOCK_PORTABLE, so that the tests run it
 *   ll_shared_win.c     Windows: a named file mapping and a named mutex
 *
 * Functions return 0 or a negative errno value, as the core's do.
 */
#ifndef LL_SHARED_OS_H
#define LL_SHARED_OS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "leastload.h"

#if defined(_WIN32)
#define LL_OS_WINDOWS 1
#define LL_OS_LOCK_KIND LL_SHARED_LOCK_WINDOWS
#elif defined(__APPLE__) || defined(LL_SHARED_LOCK_PORTABLE)
#define LL_OS_POSIX 1
#define LL_OS_LOCK_KIND LL_SHARED_LOCK_OWNER
#else
#define LL_OS_POSIX 1
#define LL_OS_LOCK_KIND LL_SHARED_LOCK_ROBUST
#endif

/* ---- the segment ---- */

/* One process's mapping of a segment. */
typedef struct {
    unsigned char *base; /* NULL: not mapped                                  */
    size_t size;
    intptr_t handle;     /* POSIX: the descriptor while opening (-1: closed);
                            Windows: the mapping's HANDLE, kept while mapped   */
} ll_os_map;

/* Creates the segment `name` (ll_shared.c checked it: "/" and more) of `size`
 * bytes, zero-filled, for this user only, and maps it. 0, -EEXIST, -errno;
 * on failure nothing is left behind. */
int ll_os_create(const char *name, size_t size, ll_os_map *m);
/* Opens the existing segment `name` without mapping it: 0, -ENOENT, -errno. */
int ll_os_open(const char *name, ll_os_map *m);
/* The segment's bytes as the system knows them now: exact on POSIX (0 while
 * its creator has not sized it yet), whole pages on Windows (see
 * LL_OS_SIZE_EXACT). 0 or -errno. */
int ll_os_size(const ll_os_map *m, size_t *size);
/* Maps `size` bytes of an opened segment (anywhere). 0 or -errno. */
int ll_os_view(ll_os_map *m, size_t size);
/* Unmaps the view; the segment stays open. */
void ll_os_unview(ll_os_map *m);
/* Moves the mapping to `want` when that place is free here (so that no lock
 * has to lay the vserver's pointers out again); else leaves it as it is. */
void ll_os_move_to(ll_os_map *m, void *want);
/* Opening is over: POSIX closes the descriptor (the mapping keeps the
 * segment); Windows keeps its handle (a named mapping lives while one is open). */
void ll_os_opened(ll_os_map *m);
/* Unmaps and closes what `m` holds. */
void ll_os_close(ll_os_map *m);
/* Removes the name: POSIX at once (mappings stay valid); Windows removes a
 * name with its last handle, so this only says whether it is there. 0, -ENOENT. */
int ll_os_unlink(const char *name);

#if defined(LL_OS_WINDOWS)
#define LL_OS_SIZE_EXACT 0
#else
#define LL_OS_SIZE_EXACT 1
#endif

/* ---- the lock ---- */

#define LL_OS_OWNER_DIED 1 /* ll_os_lock_take: taken from a holder that died */

/* One process's handle on the segment's lock, whose state lives in the
 * header's `lock` words (all of it, except Windows: a named mutex). */
typedef struct {
    void *words;     /* the header's lock[]                                 */
    intptr_t handle; /* Windows: the mutex's HANDLE                          */
    uint64_t me;     /* owner word: this process, as the lock writes it      */
    uint64_t gen;    /* the fork generation `me` was computed in             */
} ll_os_lock;

/* The creator: sets up the lock in the segment. 0 or -errno (-ENOTSUP). */
int ll_os_lock_init(void *words, const char *name, ll_os_lock *l);
/* Any other opener. 0 or -errno. */
int ll_os_lock_open(void *words, const char *name, ll_os_lock *l);
/* Takes the lock, waiting (wait != 0) or not: 0, LL_OS_OWNER_DIED (taken; the
 * holder before died holding it), -EBUSY (wait == 0 and held), -errno. */
int ll_os_lock_take(ll_os_lock *l, int wait);
/* After the repair that LL_OS_OWNER_DIED asked for, before the release. */
void ll_os_lock_consistent(ll_os_lock *l);
void ll_os_lock_release(ll_os_lock *l);
void ll_os_lock_close(ll_os_lock *l);

/* ---- processes and time ---- */

/* Once per process before anything else here (idempotent, thread-safe). */
void ll_os_init(void);
/* Moves in every child a fork makes (0 where there is no fork). */
extern uint64_t ll_os_fork_gen;
/* This process: its id and start time (0: unknown). */
void ll_os_self(int32_t *pid, uint64_t *started);
/* 1 with *started (0: unknown) when process `pid` runs, 0 when it is gone or a
 * zombie. A start time tells a reused pid from the process that had it. */
int ll_os_proc(int32_t pid, uint64_t *started);
/* A monotonic clock in nanoseconds (the liveness sweep's pace only). */
int64_t ll_os_monotonic_ns(void);
void ll_os_sleep_ms(long ms);

/* One pause of a spin-wait: tells the CPU (and a sibling hyperthread) that we wait. */
static inline void ll_os_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif /* LL_SHARED_OS_H */
