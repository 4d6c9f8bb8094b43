/*
 * ll_key.h - the exact sort key of a service (internal).
 *
 * key = floor(N * 10000 / weight). Weights are 1..100, so two different
 * fractions N/w differ by at least 1/(100*100) and their keys by at least 1:
 * the integer key orders services exactly as the vendor's Nw does, ties
 * included. N is 64-bit, so the key needs up to 78 bits: an unsigned
 * __int128 where the compiler has one, a (hi, lo) pair elsewhere.
 */
#ifndef LL_KEY_H
#define LL_KEY_H

#include <stdint.h>

#if defined(__SIZEOF_INT128__) && !defined(LL_NO_INT128)
__extension__ typedef unsigned __int128 ll_key;
#define LL_KEY_INF (~(ll_key)0)
#define LL_KEY_MAX_FINITE (LL_KEY_INF - 1)  /* real keys stay below 2^78 */
static inline int ll_key_lt(ll_key a, ll_key b) { return a < b; }
static inline int ll_key_le(ll_key a, ll_key b) { return a <= b; }
static inline int ll_key_eq(ll_key a, ll_key b) { return a == b; }
static inline ll_key ll_key_small(uint64_t v) { return (ll_key)v; }
static inline uint64_t ll_key_low(ll_key k) { return (uint64_t)k; }
static inline uint64_t ll_key_high(ll_key k) { return (uint64_t)(k >> 64); }
static inline int ll_key_fits64(ll_key k) { return (k >> 64) == 0; }
static inline ll_key ll_key_from_parts(uint64_t hi, uint64_t lo) { return (ll_key)hi << 64 | lo; }
static inline ll_key ll_key_plus_one(ll_key k) { return k + 1; }  /* finite keys stay below 2^79 */
static inline ll_key ll_key_make(uint64_t n, uint32_t weight)
{
    if (n <= UINT64_MAX / 10000u) {  /* the usual case: one narrow division */
        uint64_t x = n * 10000u;
        if (weight == 1)
            return x;
        return x <= UINT32_MAX ? (uint32_t)x / weight : x / weight;
    }
    /* n = q*w + r: q*10000 + r*10000/w avoids a 128-bit division */
    uint64_t q = n / weight, r = n % weight;
    return (ll_key)q * 10000u + (r * 10000u) / weight;
}
#else
typedef struct { uint64_t hi, lo; } ll_key;
static const ll_key LL_KEY_INF_VALUE = { UINT64_MAX, UINT64_MAX };
#define LL_KEY_INF LL_KEY_INF_VALUE
static const ll_key LL_KEY_MAX_FINITE_VALUE = { UINT64_MAX, UINT64_MAX - 1 };
#define LL_KEY_MAX_FINITE LL_KEY_MAX_FINITE_VALUE
static inline int ll_key_lt(ll_key a, ll_key b) { return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo); }
static inline int ll_key_le(ll_key a, ll_key b) { return a.hi < b.hi || (a.hi == b.hi && a.lo <= b.lo); }
static inline int ll_key_eq(ll_key a, ll_key b) { return a.hi == b.hi && a.lo == b.lo; }
static inline ll_key ll_key_small(uint64_t v) { ll_key k = { 0, v }; return k; }
static inline uint64_t ll_key_low(ll_key k) { return k.lo; }
static inline uint64_t ll_key_high(ll_key k) { return k.hi; }
static inline int ll_key_fits64(ll_key k) { return k.hi == 0; }
static inline ll_key ll_key_from_parts(uint64_t hi, uint64_t lo) { ll_key k = { hi, lo }; return k; }
static inline ll_key ll_key_plus_one(ll_key k) { k.lo++; k.hi += k.lo == 0; return k; }
/* q * 10000 as a 128-bit (hi, lo) pair, from 32-bit halves. */
static inline ll_key ll_key_make(uint64_t n, uint32_t weight)
{
    uint64_t q = n / weight, r = n % weight;
    uint64_t lo_part = (q & 0xFFFFFFFFu) * 10000u;   /* < 2^46 */
    uint64_t hi_part = (q >> 32) * 10000u;           /* < 2^46 */
    ll_key k;
    k.lo = lo_part + (hi_part << 32);
    k.hi = (hi_part >> 32) + (k.lo < lo_part);
    uint64_t add = (r * 10000u) / weight;
    uint64_t lo = k.lo + add;
    k.hi += (lo < k.lo);
    k.lo = lo;
    return k;
}
#endif

#endif /* LL_KEY_H */
