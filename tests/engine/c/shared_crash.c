/*
 * shared_crash.c - the shared vserver's lock when its holder dies, through the
 * C API alone. tests/engine/test_shared.py builds it twice on Linux: with the
 * robust mutex, and with -DLL_SHARED_LOCK_PORTABLE (the owner word that
 * macOS takes), and runs both.
 *
 * Usage: shared_crash NAME   (the segment is "/leastload.NAME"; removed at the end)
 * First prints "lock: K", the header's lock_kind (LL_SHARED_LOCK_*).
 * A forked child attaches, picks twice (two open transactions in its ledger
 * row), takes the lock and says so on a pipe; while it holds the lock, a
 * trylock here is -EBUSY; then the child is killed (SIGKILL) and reaped, and
 * the next lock here must report the repair (1), find the child's two
 * transactions ended and the state whole, and the lock after it must be
 * plain (0). Prints one line per check; exit 0 when all held, 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L /* fork, kill, pipe, waitpid */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "leastload.h"

static int failures;

static uint32_t active(const ll_vserver *vs, uint32_t slot)
{
    ll_info info;
    return ll_service_info(vs, slot, &info) == 0 ? info.active : UINT32_MAX;
}

static void check(int ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAILED", what);
    failures += !ok;
}

static int child(const char *segment, int out)
{
    ll_shared *sh;
    ll_vserver *vs;
    if (ll_shared_open(segment, LL_LEASTCONNECTION, 0, 4, NULL, 0, &sh) != 0)
        return 1;
    if (ll_shared_lock(sh, &vs) < 0)
        return 1;
    int ok = ll_select(vs, 0) >= 0 && ll_select(vs, 0) >= 0;
    ll_shared_unlock(sh);
    if (!ok || ll_shared_lock(sh, &vs) < 0)  /* held until killed */
        return 1;
    if (write(out, "L", 1) != 1)
        return 1;
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s NAME\n", argv[0]);
        return 1;
    }
    char segment[256];
    snprintf(segment, sizeof segment, "/leastload.%s", argv[1]);
    ll_shared *sh;
    ll_vserver *vs;
    int rc = ll_shared_open(segment, LL_LEASTCONNECTION, 0, 4, NULL, 0, &sh);
    if (rc != 1) {
        fprintf(stderr, "ll_shared_open: %d (a fresh name was expected)\n", rc);
        return 1;
    }
    if (ll_shared_lock(sh, &vs) < 0 || ll_bind(vs, 1) < 0 || ll_bind(vs, 1) < 0
        || ll_shared_set_name(sh, 0, "a", 1) < 0 || ll_shared_set_name(sh, 1, "b", 1) < 0) {
        fprintf(stderr, "setting up the vserver failed\n");
        return 1;
    }
    printf("lock: %u\n", (unsigned)ll_shared_header_of(sh)->lock_kind);
    ll_shared_unlock(sh);
    int fds[2];
    if (pipe(fds) < 0)
        return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(fds[0]);
        _exit(child(segment, fds[1]));
    }
    close(fds[1]);
    char c = 0;
    int held = read(fds[0], &c, 1) == 1 && c == 'L';
    check(held, "the child holds the lock");
    if (held) {
        rc = ll_shared_trylock(sh, &vs);
        check(rc == -EBUSY, "a trylock meanwhile is -EBUSY");
        if (rc >= 0)
            ll_shared_unlock(sh);
    }
    kill(pid, SIGKILL);
    int status;
    check(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
          "the child was killed holding the lock");
    rc = held ? ll_shared_lock(sh, &vs) : -ECHILD;  /* else the checks below cannot hold */
    check(rc == 1, "the next lock reports the repair (1)");
    if (rc >= 0) {
        const ll_shared_header *h = ll_shared_header_of(sh);
        check(h->repairs == 1, "the header counts one repair");
        check(h->reclaimed == 2, "the child's two transactions were ended");
        check(active(vs, 0) == 0 && active(vs, 1) == 0, "no service keeps an open transaction");
        check(ll_select(vs, 0) >= 0, "the vserver still picks");
        ll_shared_unlock(sh);
        check(ll_shared_lock(sh, &vs) == 0, "the lock after is plain (0)");
        ll_shared_unlock(sh);
    }
    ll_shared_close(sh);
    ll_shared_unlink(segment);
    return failures ? 1 : 0;
}
