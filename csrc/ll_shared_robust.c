/*
 * ll_shared_robust.c - the shared vserver's lock on Linux (ll_shared_os.h): a
 * robust process-shared pthread mutex in the header's lock words. When its
 * holder dies the kernel hands it to the next locker with EOWNERDEAD, which
 * repairs the state and marks the mutex consistent again.
 */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L /* robust mutexes */
#endif
#include "ll_shared_os.h"

#if defined(LL_OS_POSIX) && LL_OS_LOCK_KIND == LL_SHARED_LOCK_ROBUST
#include <pthread.h>

_Static_assert(sizeof(pthread_mutex_t) <= LL_SHARED_LOCK_WORDS * sizeof(uint64_t),
               "the header's lock words hold a pthread mutex");
_Static_assert(_Alignof(pthread_mutex_t) <= _Alignof(uint64_t), "the header's lock words align a pthread mutex");

static pthread_mutex_t *mutex(const ll_os_lock *l) { return (pthread_mutex_t *)l->words; }

int ll_os_lock_init(void *words, const char *name, ll_os_lock *l)
{
    (void)name;
    l->words = words;
    l->handle = 0;
    pthread_mutexattr_t attr;
    if (pthread_mutexattr_init(&attr) != 0)
        return -ENOMEM;
    int rc = 0;
    if (pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) != 0
        || pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) != 0 || pthread_mutex_init(mutex(l), &attr) != 0)
        rc = -ENOTSUP;
    pthread_mutexattr_destroy(&attr);
    return rc;
}

int ll_os_lock_open(void *words, const char *name, ll_os_lock *l)
{
    (void)name;
    l->words = words;
    l->handle = 0;
    return 0;
}

int ll_os_lock_take(ll_os_lock *l, int wait)
{
    int rc = wait ? pthread_mutex_lock(mutex(l)) : pthread_mutex_trylock(mutex(l));
    if (rc == EOWNERDEAD)
        return LL_OS_OWNER_DIED;
    return -rc;  /* 0, -EBUSY, -ENOTRECOVERABLE, ... */
}

void ll_os_lock_consistent(ll_os_lock *l) { pthread_mutex_consistent(mutex(l)); }
void ll_os_lock_release(ll_os_lock *l) { pthread_mutex_unlock(mutex(l)); }
void ll_os_lock_close(ll_os_lock *l) { (void)l; }

#else
typedef int ll_shared_robust_unused; /* another platform's lock is built */
#endif
