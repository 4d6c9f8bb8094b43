/* ll_methods.c - the method table (ll_method.h): one row a method. */
#include "ll_method.h"
#include "ll_peakewma.h"
#include "methods/hash.h"
#include "methods/least.h"
#include "methods/roundrobin.h"
#include "methods/sampled.h"

/* A least-load method: its N and key (methods/least.c), the inputs its key reads. */
#define LEAST(name_, x_, inputs_, counts_active_)                                              \
    { .name = name_, .supported = 1, .inputs = inputs_, .counts_active = counts_active_,       \
      .fam = &ll_family_least, .n = ll_least_n_##x_, .key = ll_least_key_##x_ }
/* The other families report activity as N; their keys: */
#define ROW(name_, fam_, key_, counts_active_)                                                 \
    { .name = name_, .supported = 1, .counts_active = counts_active_, .fam = &fam_,             \
      .n = ll_least_n_active, .key = key_ }

const ll_method_ops ll_methods[LL_METHOD_COUNT] = {
    [LL_ROUNDROBIN]        = ROW("ROUNDROBIN", ll_family_roundrobin, ll_roundrobin_key, 0),
    [LL_LEASTCONNECTION]   = LEAST("LEASTCONNECTION", active, 0, 1),
    [LL_LEASTRESPONSETIME] = LEAST("LEASTRESPONSETIME", active_ttfb, 0, 1),
    [LL_LEASTBANDWIDTH]    = LEAST("LEASTBANDWIDTH", bytes, LL_IN_BYTES, 0),
    [LL_LEASTPACKETS]      = LEAST("LEASTPACKETS", packets, LL_IN_PACKETS, 0),
    [LL_LEASTREQUEST]      = LEAST("LEASTREQUEST", active, 0, 1),
    [LL_LRTM]              = LEAST("LRTM", active_probe, LL_IN_PROBE, 1),
    /* CUSTOMLOAD's key puts idle services first: it moves with activity */
    [LL_CUSTOMLOAD]        = LEAST("CUSTOMLOAD", custom, LL_IN_CUSTOM, 1),
    /* the hash family picks by rendezvous (ll_hash.c); it keeps LEASTCONNECTION
     * keys, live for DOMAINHASH only, for its pick without a key */
    [LL_SOURCEIPHASH]      = ROW("SOURCEIPHASH", ll_family_hash, ll_least_key_active, 0),
    [LL_DESTINATIONIPHASH] = ROW("DESTINATIONIPHASH", ll_family_hash, ll_least_key_active, 0),
    [LL_SRCIPDESTIPHASH]   = ROW("SRCIPDESTIPHASH", ll_family_hash, ll_least_key_active, 0),
    [LL_SRCIPSRCPORTHASH]  = ROW("SRCIPSRCPORTHASH", ll_family_hash, ll_least_key_active, 0),
    [LL_URLHASH]           = ROW("URLHASH", ll_family_hash, ll_least_key_active, 0),
    [LL_DOMAINHASH]        = ROW("DOMAINHASH", ll_family_hash, ll_least_key_active, 1),
    [LL_CALLIDHASH]        = ROW("CALLIDHASH", ll_family_hash, ll_least_key_active, 0),
    [LL_TOKEN]             = ROW("TOKEN", ll_family_hash, ll_least_key_active, 0),
    /* not the vendor's */
    [LL_P2C]               = ROW("P2C", ll_family_sampled, ll_least_key_active, 1),
    /* its N moves with time: the pick computes it, the tree keeps eligibility only */
    [LL_PEAKEWMA]          = { .name = "PEAKEWMA", .supported = 1, .timed = 1, .fam = &ll_family_sampled,
                               .n = ll_peak_n, .key = ll_sampled_key_eligible, .on_end = ll_sampled_peak_end },
};

const char *ll_method_name(int method)
{
    return method >= 0 && method < LL_METHOD_COUNT ? ll_methods[method].name : NULL;
}

int ll_method_supported(int method)
{
    return method >= 0 && method < LL_METHOD_COUNT && ll_methods[method].supported;
}
