/*
 * ll_shared_posix.c - the segment, liveness and time of a shared vserver on
 * Linux and macOS (ll_shared_os.h): POSIX shared memory (shm_open + mmap),
 * a process's start time from /proc (Linux) or sysctl (macOS). The lock is
 * in ll_shared_robust.c or ll_shared_owner.c.
 */
#if !defined(_WIN32)
#define _GNU_SOURCE 1        /* Linux: MAP_FIXED_NOREPLACE; the rest is POSIX.1-2008 */
#define _DARWIN_C_SOURCE 1   /* macOS: sysctl's kinfo_proc */

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
#if defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

#include "ll_shared_os.h"
#include "ll_xxh64.h"

/* ---- names ---- */

/* macOS keeps at most PSHMNAMLEN (31) bytes of a shm name and refuses longer
 * ones: a longer name is replaced by "/ll." and its 64-bit hash in hex (20
 * bytes), the same in every process. Linux takes the name as it is. */
#define SHM_NAME_MAX 31

static const char *shm_name(const char *name, char out[SHM_NAME_MAX + 1])
{
#if defined(__APPLE__)
    size_t n = strlen(name);
    if (n > SHM_NAME_MAX) {
        snprintf(out, SHM_NAME_MAX + 1, "/ll.%016llx", (unsigned long long)ll_xxh64(name, n, 0));
        return out;
    }
#else
    (void)out;
#endif
    return name;
}

/* ---- the segment ---- */

int ll_os_create(const char *name, size_t size, ll_os_map *m)
{
    char buf[SHM_NAME_MAX + 1];
    const char *os_name = shm_name(name, buf);
    m->base = NULL;
    m->size = 0;
    m->handle = -1;
    int fd = shm_open(os_name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        return -errno;
    int rc = 0;
    void *mem = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) < 0)
        rc = -errno;
    else if ((mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
        rc = -errno;
    close(fd);
    if (rc) {
        shm_unlink(os_name);
        return rc;
    }
    m->base = mem;
    m->size = size;
    return 0;
}

int ll_os_open(const char *name, ll_os_map *m)
{
    char buf[SHM_NAME_MAX + 1];
    m->base = NULL;
    m->size = 0;
    int fd = shm_open(shm_name(name, buf), O_RDWR, 0);
    m->handle = fd;
    return fd < 0 ? -errno : 0;
}

int ll_os_size(const ll_os_map *m, size_t *size)
{
    struct stat st;
    if (fstat((int)m->handle, &st) < 0)
        return -errno;
    *size = (size_t)st.st_size;
    return 0;
}

int ll_os_view(ll_os_map *m, size_t size)
{
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, (int)m->handle, 0);
    if (mem == MAP_FAILED)
        return -errno;
    m->base = mem;
    m->size = size;
    return 0;
}

void ll_os_unview(ll_os_map *m)
{
    if (m->base)
        munmap(m->base, m->size);
    m->base = NULL;
}

void ll_os_move_to(ll_os_map *m, void *want)
{
    if (!want || want == (void *)m->base || m->handle < 0)
        return;
    int flags = MAP_SHARED;
#ifdef MAP_FIXED_NOREPLACE
    flags |= MAP_FIXED_NOREPLACE;  /* Linux: there or nowhere, never over another mapping */
#endif
    void *there = mmap(want, m->size, PROT_READ | PROT_WRITE, flags, (int)m->handle, 0);
    if (there == want) {
        munmap(m->base, m->size);
        m->base = there;
    } else if (there != MAP_FAILED) {  /* taken as a hint and placed elsewhere */
        munmap(there, m->size);
    }
}

void ll_os_opened(ll_os_map *m)
{
    if (m->handle >= 0)
        close((int)m->handle);
    m->handle = -1;
}

void ll_os_close(ll_os_map *m)
{
    ll_os_unview(m);
    ll_os_opened(m);
}

int ll_os_unlink(const char *name)
{
    char buf[SHM_NAME_MAX + 1];
    return shm_unlink(shm_name(name, buf)) < 0 ? -errno : 0;
}

/* ---- processes and time ---- */

uint64_t ll_os_fork_gen;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void on_fork_child(void) { ll_os_fork_gen++; }
static void install_atfork(void) { pthread_atfork(NULL, NULL, on_fork_child); }

void ll_os_init(void) { pthread_once(&init_once, install_atfork); }

#if defined(__linux__)
/* /proc/<pid>/stat's state and start time (clock ticks since boot): 0,
 * -ENOENT (no such process) or -1 (no /proc to ask). */
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
#elif defined(__APPLE__)
/* sysctl's record of the process: its state and start time (microseconds since
 * the epoch): 0, -ENOENT (no such process) or -1. */
static int read_stat(int pid, char *state, uint64_t *started)
{
    int mib[4] = { CTL_KERN, KERN_PROC, KERN_PROC_PID, pid };
    struct kinfo_proc info;
    size_t len = sizeof info;
    memset(&info, 0, sizeof info);
    if (sysctl(mib, 4, &info, &len, NULL, 0) < 0)
        return -1;
    if (len == 0)
        return -ENOENT;
    *state = info.kp_proc.p_stat == SZOMB ? 'Z' : 'R';
    *started = (uint64_t)info.kp_proc.p_starttime.tv_sec * 1000000u + (uint64_t)info.kp_proc.p_starttime.tv_usec;
    return 0;
}
#else
static int read_stat(int pid, char *state, uint64_t *started)
{
    (void)pid, (void)state, (void)started;
    return -1;  /* nothing to ask: kill's answer only */
}
#endif

void ll_os_self(int32_t *pid, uint64_t *started)
{
    char state;
    *pid = (int32_t)getpid();
    if (read_stat((int)*pid, &state, started) < 0)
        *started = 0;
}

int ll_os_proc(int32_t pid, uint64_t *started)
{
    *started = 0;
    if (pid <= 0)
        return 0;
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return 0;
    char state;
    int rc = read_stat(pid, &state, started);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0) {
        *started = 0;
        return 1;  /* kill's answer: it exists (EPERM: another user's) */
    }
    return !(state == 'Z' || state == 'X' || state == 'x');
}

int64_t ll_os_monotonic_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void ll_os_sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

#else
typedef int ll_shared_posix_unused; /* Windows: ll_shared_win.c */
#endif
