/*
 * ll_fixed.h - a vserver in memory its caller provides (ll_fixed.c); the
 * core's own, used by ll_shared.c.
 */
#ifndef LL_FIXED_H
#define LL_FIXED_H

#include <stddef.h>
#include <stdint.h>

#include "leastload.h"

#define LL_FIXED_MAX_CAPACITY (1u << 20)  /* slots, holes included */
#define LL_FIXED_MAX_ROWS 1024u           /* ledger rows (processes) */

/* Bytes a fixed vserver of `capacity` slots and `ledger_rows` ledger rows
 * takes; 0 when either is out of range. */
size_t ll_fixed_size(uint32_t capacity, uint32_t ledger_rows);
/* Lays an empty vserver out in `mem` (64-byte aligned, `size` bytes, zeroed
 * here): as ll_create(), with room for `capacity` slots, never more
 * (ll_bind then returns -ENOSPC), and every window length. NULL when an
 * argument is out of range. ll_destroy() of it frees nothing. */
ll_vserver *ll_fixed_create(void *mem, size_t size, ll_method method, int64_t sec, uint32_t capacity,
                            uint32_t ledger_rows);
/* Lays the pointers out for the address the vserver is at now (the same
 * memory mapped elsewhere): one compare when it has not moved. */
void ll_fixed_rebase(ll_vserver *vs);

#endif /* LL_FIXED_H */
