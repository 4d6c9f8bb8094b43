/*
 * ll_hash.h - the hash family (internal): SOURCEIPHASH, DESTINATIONIPHASH,
 * SRCIPDESTIPHASH, SRCIPSRCPORTHASH, URLHASH, DOMAINHASH, CALLIDHASH, TOKEN.
 *
 * The caller hashes the request's key (XXH64 with the vserver's seed, over
 * the bytes src/leastload/hashing/rendezvous.py defines); the pick is weighted
 * rendezvous hashing over the eligible slots, in integers only (ll_hash.c).
 */
#ifndef LL_HASH_H
#define LL_HASH_H

#include "ll_internal.h"
#include "ll_xxh64.h"

#define LL_LOG_FRAC_BITS 20  /* fraction bits of ll_neg_log2's fixed point */

/* -log2((x / 2 + 1) / 2^63) in fixed point, truncated; never grows as x grows. */
uint32_t ll_neg_log2(uint64_t x);

/* A name hash as the vserver keeps it (column LL_COL_NAME_HASH): with the head of
 * XXH64's avalanche applied, which the pick would otherwise apply to every
 * slot's key ^ name on every pick (ll_xxh64.h). 0 stays 0. */
static inline uint64_t ll_hash_name_entry(uint64_t name_hash)
{
    return ll_xxh64_avalanche_head(name_hash);
}

/* Keeps vs->n_of_weight and vs->n_weights (the distinct weights among the
 * bound services): ll_bind counts its weight in (+1), ll_unbind out (-1),
 * ll_set_weight both. One weight: the pick need not read any weight. */
static inline void ll_hash_count_weight(ll_vserver *vs, uint32_t weight, int sign)
{
    if (sign > 0)
        vs->n_weights += vs->n_of_weight[weight]++ == 0;
    else
        vs->n_weights -= --vs->n_of_weight[weight] == 0;
}

/* Tests: which build of the packed scan picks. 0 (the default): the
 * processor's best; 1: SSE2 (on x86-64; elsewhere the scalar scan); 2:
 * AVX2; 3: AVX-512DQ/VL. -ENOTSUP when this processor or build has not
 * that one, -EINVAL out of range; the choice is the process's. */
int ll_hash_force_path(int path);

/* The eligible slot (finite tree key) that key hash `key_hash` maps to,
 * or -ENOENT. Changes nothing. */
int64_t ll_hash_pick(const ll_vserver *vs, uint64_t key_hash);

#endif /* LL_HASH_H */
