/* ll_methods.c - the method table (ll_method.h): one row a method. */
#include "ll_method.h"

#define ROW(name_, supported_, family_, load_, counts_active_) \
    { name_, supported_, family_, load_, counts_active_ }

const ll_method_ops ll_methods[LL_METHOD_COUNT] = {
    [LL_ROUNDROBIN]        = ROW("ROUNDROBIN", 1, LL_FAMILY_ROUNDROBIN, LL_N_ACTIVE, 0),
    [LL_LEASTCONNECTION]   = ROW("LEASTCONNECTION", 1, LL_FAMILY_LEAST, LL_N_ACTIVE, 1),
    [LL_LEASTRESPONSETIME] = ROW("LEASTRESPONSETIME", 1, LL_FAMILY_LEAST, LL_N_ACTIVE_TTFB, 1),
    [LL_LEASTBANDWIDTH]    = ROW("LEASTBANDWIDTH", 1, LL_FAMILY_LEAST, LL_N_BYTES, 0),
    [LL_LEASTPACKETS]      = ROW("LEASTPACKETS", 1, LL_FAMILY_LEAST, LL_N_PACKETS, 0),
    [LL_LEASTREQUEST]      = ROW("LEASTREQUEST", 1, LL_FAMILY_LEAST, LL_N_ACTIVE, 1),
    [LL_LRTM]              = ROW("LRTM", 1, LL_FAMILY_LEAST, LL_N_ACTIVE_PROBE, 1),
    /* CUSTOMLOAD's key puts idle services first: it moves with activity */
    [LL_CUSTOMLOAD]        = ROW("CUSTOMLOAD", 1, LL_FAMILY_LEAST, LL_N_CUSTOM, 1),
    /* the hash family picks by rendezvous (ll_hash.c); DOMAINHASH keeps live
     * LEASTCONNECTION keys for its pick without a domain */
    [LL_SOURCEIPHASH]      = ROW("SOURCEIPHASH", 1, LL_FAMILY_HASH, LL_N_ACTIVE, 0),
    [LL_DESTINATIONIPHASH] = ROW("DESTINATIONIPHASH", 1, LL_FAMILY_HASH, LL_N_ACTIVE, 0),
    [LL_SRCIPDESTIPHASH]   = ROW("SRCIPDESTIPHASH", 1, LL_FAMILY_HASH, LL_N_ACTIVE, 0),
    [LL_SRCIPSRCPORTHASH]  = ROW("SRCIPSRCPORTHASH", 1, LL_FAMILY_HASH, LL_N_ACTIVE, 0),
    [LL_URLHASH]           = ROW("URLHASH", 1, LL_FAMILY_HASH, LL_N_ACTIVE, 0),
    [LL_DOMAINHASH]        = ROW("DOMAINHASH", 1, LL_FAMILY_HASH, LL_N_ACTIVE, 1),
    [LL_CALLIDHASH]        = ROW("CALLIDHASH", 1, LL_FAMILY_HASH, LL_N_ACTIVE, 0),
    [LL_TOKEN]             = ROW("TOKEN", 1, LL_FAMILY_HASH, LL_N_ACTIVE, 0),
    /* not the vendor's */
    [LL_P2C]               = ROW("P2C", 1, LL_FAMILY_SAMPLED, LL_N_ACTIVE, 1),
    /* its N moves with time: the pick computes it, the tree keeps eligibility only */
    [LL_PEAKEWMA]          = ROW("PEAKEWMA", 1, LL_FAMILY_SAMPLED, LL_N_PEAK, 0),
};

const char *ll_method_name(int method)
{
    return method >= 0 && method < LL_METHOD_COUNT ? ll_methods[method].name : NULL;
}

int ll_method_supported(int method)
{
    return method >= 0 && method < LL_METHOD_COUNT && ll_methods[method].supported;
}
