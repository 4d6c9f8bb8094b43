/*
 * methods/hash.h - the hash family (internal): SOURCEIPHASH ..  TOKEN. Its
 * ops table is ll_family_hash (methods/hash.c): a request key picks by
 * weighted rendezvous (the scan: ll_hash.c); without a key (DOMAINHASH
 * without a domain) the pick is the least-load family's, without the
 * startup round robin, on the live LEASTCONNECTION keys the rows keep.
 */
#ifndef LL_METHODS_HASH_H
#define LL_METHODS_HASH_H

#include "ll_internal.h"

extern const ll_family_ops ll_family_hash;

#endif /* LL_METHODS_HASH_H */
