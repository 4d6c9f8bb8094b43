/*
 * ll_xxh64.c - XXH64 (see ll_xxh64.h). Four accumulators take 32-byte
 * stripes; the tail goes in by 8, 4 and 1 bytes; the avalanche ends it.
 */
#include "ll_xxh64.h"

static inline uint64_t rotl64(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64 - r));
}

static inline uint64_t read64le(const unsigned char *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24
         | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static inline uint64_t read32le(const unsigned char *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}

static inline uint64_t round64(uint64_t acc, uint64_t lane)
{
    acc += lane * LL_XXH_PRIME64_2;
    acc = rotl64(acc, 31);
    return acc * LL_XXH_PRIME64_1;
}

static inline uint64_t merge64(uint64_t acc, uint64_t v)
{
    acc ^= round64(0, v);
    return acc * LL_XXH_PRIME64_1 + LL_XXH_PRIME64_4;
}

uint64_t ll_xxh64(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    const unsigned char *end = p + len;
    uint64_t h;
    if (len >= 32) {
        uint64_t v1 = seed + LL_XXH_PRIME64_1 + LL_XXH_PRIME64_2;
        uint64_t v2 = seed + LL_XXH_PRIME64_2;
        uint64_t v3 = seed;
        uint64_t v4 = seed - LL_XXH_PRIME64_1;
        const unsigned char *last_stripe = end - 32;
        do {
            v1 = round64(v1, read64le(p));
            v2 = round64(v2, read64le(p + 8));
            v3 = round64(v3, read64le(p + 16));
            v4 = round64(v4, read64le(p + 24));
            p += 32;
        } while (p <= last_stripe);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = merge64(h, v1);
        h = merge64(h, v2);
        h = merge64(h, v3);
        h = merge64(h, v4);
    } else {
        h = seed + LL_XXH_PRIME64_5;
    }
    h += (uint64_t)len;
    while (end - p >= 8) {
        h ^= round64(0, read64le(p));
        h = rotl64(h, 27) * LL_XXH_PRIME64_1 + LL_XXH_PRIME64_4;
        p += 8;
    }
    if (end - p >= 4) {
        h ^= read32le(p) * LL_XXH_PRIME64_1;
        h = rotl64(h, 23) * LL_XXH_PRIME64_2 + LL_XXH_PRIME64_3;
        p += 4;
    }
    while (p < end) {
        h ^= (uint64_t)*p * LL_XXH_PRIME64_5;
        h = rotl64(h, 11) * LL_XXH_PRIME64_1;
        p++;
    }
    return ll_xxh64_avalanche(h);
}
