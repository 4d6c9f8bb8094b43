/*
 * ll_shared_win.c - a shared vserver on Windows (ll_shared_os.h): the segment
 * is a named file mapping backed by the paging file, the lock a named mutex
 * beside it. A mutex whose owner dies is "abandoned": the next wait returns
 * WAIT_ABANDONED and owns it, the owner-death signal the repair needs
 * (LL_OS_OWNER_DIED). The header's lock words stay unused.
 *
 * Names: "/leastload.web" becomes the mapping "Local\leastload-map/leastload.web"
 * and the mutex "Local\leastload-lock/leastload.web" (this session's
 * namespace; two prefixes, since a mapping and a mutex cannot share a name).
 * Windows removes a named object with its last handle: there is no unlink and
 * no leftover of a crash, and each process keeps its mapping's handle open
 * while it has the segment mapped.
 *
 * A Windows mutex is recursive for the thread that holds it, where the POSIX
 * locks are not: the callers never lock twice from one thread (leastload.h).
 */
#if defined(_WIN32)
#define WIN32_LEAN_AND_MEAN 1
#include <windows.h>

#include <stdio.h>
#include <string.h>

#include "ll_shared_os.h"

#define OS_NAME_MAX 260

static int from_win(DWORD e)
{
    switch (e) {
    case ERROR_ALREADY_EXISTS: return -EEXIST;
    case ERROR_FILE_NOT_FOUND: return -ENOENT;
    case ERROR_ACCESS_DENIED: return -EACCES;
    case ERROR_NOT_ENOUGH_MEMORY:
    case ERROR_OUTOFMEMORY:
    case ERROR_COMMITMENT_LIMIT: return -ENOMEM;
    case ERROR_FILENAME_EXCED_RANGE: return -ENAMETOOLONG;
    case ERROR_INVALID_NAME:
    case ERROR_INVALID_HANDLE:
    case ERROR_INVALID_PARAMETER: return -EINVAL;
    default: return -EIO;
    }
}

/* "Local\leastload-<what>" and the name; -EINVAL for a backslash (Windows
 * reserves it), -ENAMETOOLONG past MAX_PATH. */
static int os_name(const char *what, const char *name, char out[OS_NAME_MAX])
{
    if (strchr(name, '\\'))
        return -EINVAL;
    int n = snprintf(out, OS_NAME_MAX, "Local\\leastload-%s%s", what, name);
    return n < 0 || n >= OS_NAME_MAX ? -ENAMETOOLONG : 0;
}

/* ---- the segment ---- */

/* An empty map, and the mapping's name. */
static int map_begin(const char *name, ll_os_map *m, char wname[OS_NAME_MAX])
{
    m->base = NULL;
    m->size = 0;
    m->handle = 0;
    return os_name("map", name, wname);
}

int ll_os_create(const char *name, size_t size, ll_os_map *m)
{
    char wname[OS_NAME_MAX];
    int rc = map_begin(name, m, wname);
    if (rc)
        return rc;
    uint64_t s = size;
    HANDLE h = CreateFileMappingA(INVALID_HANDLE_VALUE, NULL, PAGE_READWRITE, (DWORD)(s >> 32), (DWORD)s, wname);
    if (!h)
        return from_win(GetLastError());
    if (GetLastError() == ERROR_ALREADY_EXISTS) {
        CloseHandle(h);
        return -EEXIST;
    }
    void *mem = MapViewOfFile(h, FILE_MAP_ALL_ACCESS, 0, 0, size);
    if (!mem) {
        rc = from_win(GetLastError());
        CloseHandle(h);
        return rc;
    }
    m->base = mem;
    m->size = size;
    m->handle = (intptr_t)h;
    return 0;
}

int ll_os_open(const char *name, ll_os_map *m)
{
    char wname[OS_NAME_MAX];
    int rc = map_begin(name, m, wname);
    if (rc)
        return rc;
    HANDLE h = OpenFileMappingA(FILE_MAP_ALL_ACCESS, FALSE, wname);
    if (!h)
        return from_win(GetLastError());
    m->handle = (intptr_t)h;
    return 0;
}

/* A view of the whole mapping, asked how long it is: whole pages. */
int ll_os_size(const ll_os_map *m, size_t *size)
{
    void *mem = MapViewOfFile((HANDLE)m->handle, FILE_MAP_READ, 0, 0, 0);
    if (!mem)
        return from_win(GetLastError());
    MEMORY_BASIC_INFORMATION info;
    SIZE_T got = VirtualQuery(mem, &info, sizeof info);
    UnmapViewOfFile(mem);
    if (got == 0)
        return from_win(GetLastError());
    *size = info.RegionSize;
    return 0;
}

/* The whole mapping: `size` may be ll_os_size's whole pages, past its end. */
int ll_os_view(ll_os_map *m, size_t size)
{
    void *mem = MapViewOfFile((HANDLE)m->handle, FILE_MAP_ALL_ACCESS, 0, 0, 0);
    if (!mem)
        return from_win(GetLastError());
    m->base = mem;
    m->size = size;
    return 0;
}

void ll_os_unview(ll_os_map *m)
{
    if (m->base)
        UnmapViewOfFile(m->base);
    m->base = NULL;
}

void ll_os_move_to(ll_os_map *m, void *want)
{
    if (!want || want == (void *)m->base)
        return;
    void *there = MapViewOfFileEx((HANDLE)m->handle, FILE_MAP_ALL_ACCESS, 0, 0, m->size, want);
    if (there == want) {  /* else NULL: the place is taken here */
        UnmapViewOfFile(m->base);
        m->base = there;
    } else if (there) {
        UnmapViewOfFile(there);
    }
}

void ll_os_opened(ll_os_map *m) { (void)m; }

void ll_os_close(ll_os_map *m)
{
    ll_os_unview(m);
    if (m->handle)
        CloseHandle((HANDLE)m->handle);
    m->handle = 0;
}

int ll_os_unlink(const char *name)
{
    char wname[OS_NAME_MAX];
    int rc = os_name("map", name, wname);
    if (rc)
        return rc;
    HANDLE h = OpenFileMappingA(FILE_MAP_READ, FALSE, wname);
    if (!h)
        return from_win(GetLastError());
    CloseHandle(h);
    return 0;
}

/* ---- the lock ---- */

static int open_mutex(void *words, const char *name, ll_os_lock *l)
{
    char wname[OS_NAME_MAX];
    int rc = os_name("lock", name, wname);
    l->words = words;
    l->handle = 0;
    l->me = 0;
    l->gen = 0;
    if (rc)
        return rc;
    HANDLE h = CreateMutexA(NULL, FALSE, wname);  /* opens it when it exists */
    if (!h)
        return from_win(GetLastError());
    l->handle = (intptr_t)h;
    return 0;
}

int ll_os_lock_init(void *words, const char *name, ll_os_lock *l) { return open_mutex(words, name, l); }
int ll_os_lock_open(void *words, const char *name, ll_os_lock *l) { return open_mutex(words, name, l); }

int ll_os_lock_take(ll_os_lock *l, int wait)
{
    switch (WaitForSingleObject((HANDLE)l->handle, wait ? INFINITE : 0)) {
    case WAIT_OBJECT_0: return 0;
    case WAIT_ABANDONED: return LL_OS_OWNER_DIED;
    case WAIT_TIMEOUT: return -EBUSY;
    default: return from_win(GetLastError());
    }
}

void ll_os_lock_consistent(ll_os_lock *l) { (void)l; }
void ll_os_lock_release(ll_os_lock *l) { ReleaseMutex((HANDLE)l->handle); }

void ll_os_lock_close(ll_os_lock *l)
{
    if (l->handle)
        CloseHandle((HANDLE)l->handle);
    l->handle = 0;
}

/* ---- processes and time ---- */

uint64_t ll_os_fork_gen; /* no fork on Windows: always 0 */

void ll_os_init(void) {}

static uint64_t creation_time(HANDLE p)
{
    FILETIME created, exited, kernel, user;
    if (!GetProcessTimes(p, &created, &exited, &kernel, &user))
        return 0;
    return (uint64_t)created.dwHighDateTime << 32 | created.dwLowDateTime;
}

void ll_os_self(int32_t *pid, uint64_t *started)
{
    *pid = (int32_t)GetCurrentProcessId();
    *started = creation_time(GetCurrentProcess());
}

int ll_os_proc(int32_t pid, uint64_t *started)
{
    *started = 0;
    if (pid <= 0)
        return 0;
    HANDLE p = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (!p)
        return GetLastError() == ERROR_INVALID_PARAMETER ? 0 : 1;  /* no such process; else another user's */
    DWORD code = 0;
    int alive = GetExitCodeProcess(p, &code) && code == STILL_ACTIVE;
    if (alive)
        *started = creation_time(p);
    CloseHandle(p);
    return alive;
}

int64_t ll_os_monotonic_ns(void)
{
    LARGE_INTEGER count, freq;
    if (!QueryPerformanceCounter(&count) || !QueryPerformanceFrequency(&freq) || freq.QuadPart <= 0)
        return 0;
    int64_t c = count.QuadPart, f = freq.QuadPart;
    return c / f * 1000000000LL + c % f * 1000000000LL / f;
}

void ll_os_sleep_ms(long ms) { Sleep((DWORD)ms); }

#else
typedef int ll_shared_win_unused; /* POSIX: ll_shared_posix.c */
#endif
