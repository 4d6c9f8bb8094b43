/*
 * ll_xxh64.h - XXH64, the 64-bit xxHash, written from its published
 * specification (the xxHash repository's doc/xxhash_spec.md). Byte order
 * is fixed (input words read little-endian), so a result is the same on
 * every platform; tests/hashing/test_hash_function.py checks the published vectors.
 */
#ifndef LL_XXH64_H
#define LL_XXH64_H

#include <stddef.h>
#include <stdint.h>

#define LL_XXH_PRIME64_1 0x9E3779B185EBCA87ull
#define LL_XXH_PRIME64_2 0xC2B2AE3D27D4EB4Full
#define LL_XXH_PRIME64_3 0x165667B19E3779F9ull
#define LL_XXH_PRIME64_4 0x85EBCA77C2B2AE63ull
#define LL_XXH_PRIME64_5 0x27D4EB2F165667C5ull

/* XXH64 of `len` bytes at `data` (NULL is fine when len is 0). */
uint64_t ll_xxh64(const void *data, size_t len, uint64_t seed);

/* XXH64's final avalanche, in two parts: head, an XOR with a shift of
 * itself, which distributes over XOR (head(a ^ b) = head(a) ^ head(b)),
 * then tail, the rest. The hash methods' pick keeps its name hashes with
 * the head applied, so a score costs one XOR and the tail. */
static inline uint64_t ll_xxh64_avalanche_head(uint64_t h)
{
    return h ^ (h >> 33);
}

static inline uint64_t ll_xxh64_avalanche_tail(uint64_t h)
{
    h *= LL_XXH_PRIME64_2;
    h ^= h >> 29;
    h *= LL_XXH_PRIME64_3;
    h ^= h >> 32;
    return h;
}

/* The whole avalanche: a bijection of 64-bit words in which every input
 * bit moves about half of the output bits. */
static inline uint64_t ll_xxh64_avalanche(uint64_t h)
{
    return ll_xxh64_avalanche_tail(ll_xxh64_avalanche_head(h));
}

#endif /* LL_XXH64_H */
