/*
 * methods/list.h - every method, one line each: the one place in csrc that
 * names a method. No include guard: each reader defines the two macros
 * below, includes this file and undefines them again.
 *
 *   leastload.h        the public enum ll_method (the value) and LL_METHOD_COUNT
 *   methods/least.h/.c a least-load method's N and key, inline and out of line
 *   ll_methods.c       the method table's row
 *   ll_replay.c        a replay loop specialised for each least-load method
 *
 * LL_LEAST(ID, value, N, inputs, counts_active): a least-load method whose
 *   key is floor(N * 10000 / weight) (ll_key.h; equal Nw tie). N is an
 *   expression of `vs` (const ll_vserver *) and `slot`, below 2^64;
 *   inputs are the LL_IN_* bits of the per-service inputs it reads
 *   (ll_method.h); counts_active: N moves when a transaction starts or ends.
 * LL_ROW(ID, value, ...): any other method; the rest is its row's
 *   designated initializers (ll_method_ops, ll_method.h) after its name.
 *
 * Values are the public API's: never renumber one. They run 0..count-1 (a
 * value out of that range does not compile: the table is indexed by it).
 * Adding a least-X method is one LL_LEAST line here, its rule in the
 * reference (src/leastload/engine/rules.py) and its registry row
 * (src/leastload/engine/methods.py), which checks itself against this list
 * when the engine is imported.
 */

/*       ID                   value  N                                                      inputs         counts_active */
LL_ROW(  ROUNDROBIN,           0,    .fam = &ll_family_roundrobin, .n = ll_least_n_LEASTCONNECTION,
                                     .key = ll_roundrobin_key)
LL_LEAST(LEASTCONNECTION,      1,    vs->svc[slot].active,                                  0,             1)
LL_LEAST(LEASTRESPONSETIME,    2,    (uint64_t)vs->svc[slot].active * vs->svc[slot].ttfb_us, 0,            1)
LL_LEAST(LEASTBANDWIDTH,       3,    vs->bytes[slot],                                       LL_IN_BYTES,   0)
LL_LEAST(LEASTPACKETS,         4,    vs->packets[slot],                                     LL_IN_PACKETS, 0)
LL_LEAST(LEASTREQUEST,         5,    vs->svc[slot].active,                                  0,             1)
LL_LEAST(LRTM,                 6,    (uint64_t)vs->svc[slot].active * ll_probe_us(vs, slot), LL_IN_PROBE,  1)
/* its key is not floor(Nw) (methods/least.c); it puts idle services first, so it moves with activity */
LL_ROW(  CUSTOMLOAD,           7,    .inputs = LL_IN_CUSTOM, .counts_active = 1, .fam = &ll_family_least,
                                     .n = ll_least_n_custom, .key = ll_least_key_custom)
/* the hash family picks by rendezvous (ll_hash.c); it keeps LEASTCONNECTION's
 * keys, live for DOMAINHASH only, for its pick without a request key */
LL_ROW(  SOURCEIPHASH,         8,    .fam = &ll_family_hash, .n = ll_least_n_LEASTCONNECTION, .key = ll_least_key_LEASTCONNECTION)
LL_ROW(  DESTINATIONIPHASH,    9,    .fam = &ll_family_hash, .n = ll_least_n_LEASTCONNECTION, .key = ll_least_key_LEASTCONNECTION)
LL_ROW(  SRCIPDESTIPHASH,     10,    .fam = &ll_family_hash, .n = ll_least_n_LEASTCONNECTION, .key = ll_least_key_LEASTCONNECTION)
LL_ROW(  SRCIPSRCPORTHASH,    11,    .fam = &ll_family_hash, .n = ll_least_n_LEASTCONNECTION, .key = ll_least_key_LEASTCONNECTION)
LL_ROW(  URLHASH,             12,    .fam = &ll_family_hash, .n = ll_least_n_LEASTCONNECTION, .key = ll_least_key_LEASTCONNECTION)
LL_ROW(  DOMAINHASH,          13,    .fam = &ll_family_hash, .n = ll_least_n_LEASTCONNECTION, .key = ll_least_key_LEASTCONNECTION,
                                     .counts_active = 1)
LL_ROW(  CALLIDHASH,          14,    .fam = &ll_family_hash, .n = ll_least_n_LEASTCONNECTION, .key = ll_least_key_LEASTCONNECTION)
LL_ROW(  TOKEN,               15,    .fam = &ll_family_hash, .n = ll_least_n_LEASTCONNECTION, .key = ll_least_key_LEASTCONNECTION)
/* not the vendor's: two random eligible services, the lower N */
LL_ROW(  P2C,                 16,    .fam = &ll_family_sampled, .n = ll_least_n_LEASTCONNECTION,
                                     .key = ll_least_key_LEASTCONNECTION, .counts_active = 1)
/* its N moves with time: the pick computes it, the tree keeps eligibility only */
LL_ROW(  PEAKEWMA,            17,    .fam = &ll_family_sampled, .timed = 1, .n = ll_peak_n,
                                     .key = ll_sampled_key_eligible, .on_end = ll_sampled_peak_end)
