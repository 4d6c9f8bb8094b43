/*
 * ll_hash.h - the hash family (internal): SOURCEIPHASH, DESTINATIONIPHASH,
 * SRCIPDESTIPHASH, SRCIPSRCPORTHASH, URLHASH, DOMAINHASH, CALLIDHASH, TOKEN.
 *
 * The caller hashes the request's key (XXH64 with the vserver's seed, over
 * the bytes src/leastload/_hash.py defines); the pick is weighted
 * rendezvous hashing over the eligible slots, in integers only (ll_hash.c).
 */
#ifndef LL_HASH_H
#define LL_HASH_H

#include "ll_internal.h"

#define LL_LOG_FRAC_BITS 20  /* fraction bits of ll_neg_log2's fixed point */

/* -log2((x / 2 + 1) / 2^63) in fixed point, truncated; never grows as x grows. */
uint32_t ll_neg_log2(uint64_t x);

/* The eligible slot (finite tree key) that key hash `key_hash` maps to,
 * or -ENOENT. Notes in vs->hash_mixed whether the eligible weights
 * differed (the next pick's choice of pass); nothing else changes. */
int64_t ll_hash_pick(ll_vserver *vs, uint64_t key_hash);

#endif /* LL_HASH_H */
