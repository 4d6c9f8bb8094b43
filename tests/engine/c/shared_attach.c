/*
 * shared_attach.c - a C program that attaches to a shared vserver made from
 * Python (VirtualServer(shared="NAME")) and picks from it, through the C API
 * alone: leastload.h's ll_shared_* calls and the vserver calls between a lock
 * and an unlock. tests/engine/test_shared.py builds and runs it.
 *
 * Usage: shared_attach NAME PICKS [wait]   (the segment is "/leastload.NAME")
 * Prints one line per pick: the service's name. With "wait", then prints
 * "attached" and keeps its handle open, taking no lock, until its standard
 * input ends. Exit 0; 2 when there was no such segment; 1 on any other error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "leastload.h"

int main(int argc, char **argv)
{
    if (argc != 3 && !(argc == 4 && strcmp(argv[3], "wait") == 0)) {
        fprintf(stderr, "usage: %s NAME PICKS [wait]\n", argv[0]);
        return 1;
    }
    char segment[256];
    snprintf(segment, sizeof segment, "/leastload.%s", argv[1]);
    int picks = atoi(argv[2]);
    ll_shared *sh;
    /* method, second, capacity and settings only matter to a creator */
    int rc = ll_shared_open(segment, LL_LEASTCONNECTION, 0, 1, NULL, 0, &sh);
    if (rc < 0) {
        fprintf(stderr, "ll_shared_open: %s\n", strerror(-rc));
        return 1;
    }
    if (rc == 1) {  /* it made a new one: there was none to attach to */
        ll_shared_close(sh);
        ll_shared_unlink(segment);
        fprintf(stderr, "no shared vserver %s\n", argv[1]);
        return 2;
    }
    for (int i = 0; i < picks; i++) {
        ll_vserver *vs;
        if ((rc = ll_shared_lock(sh, &vs)) < 0) {
            fprintf(stderr, "ll_shared_lock: %s\n", strerror(-rc));
            return 1;
        }
        int64_t slot = ll_select(vs, (int64_t)time(NULL));
        if (slot >= 0) {
            const ll_shared_label *l = &ll_shared_labels(sh)[slot];
            printf("%.*s\n", (int)l->len, l->name);
        } else {
            printf("(none: %s)\n", strerror((int)-slot));
        }
        ll_shared_unlock(sh);
    }
    if (argc == 4) {
        printf("attached\n");
        fflush(stdout);
        while (getchar() != EOF) {
        }
    }
    fflush(stdout);
    ll_shared_close(sh);  /* its picks were transactions of this process: they end here */
    return 0;
}
