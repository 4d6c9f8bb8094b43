/* ll_methods.c - the method table (ll_method.h): one row a method, from methods/list.h. */
#include "ll_method.h"
#include "ll_peakewma.h"
#include "methods/hash.h"
#include "methods/least.h"
#include "methods/roundrobin.h"
#include "methods/sampled.h"

/* One row a line of methods/list.h. */
#define LL_LEAST(ID, value, N, inputs_, counts_active_)                                          \
    [LL_##ID] = { .name = #ID, .supported = 1, .inputs = inputs_, .counts_active = counts_active_, \
                  .fam = &ll_family_least, .n = ll_least_n_##ID, .key = ll_least_key_##ID },
#define LL_ROW(ID, value, ...) [LL_##ID] = { .name = #ID, .supported = 1, __VA_ARGS__ },
const ll_method_ops ll_methods[LL_METHOD_COUNT] = {
#include "methods/list.h"
};
#undef LL_LEAST
#undef LL_ROW

const char *ll_method_name(int method)
{
    return method >= 0 && method < LL_METHOD_COUNT ? ll_methods[method].name : NULL;
}

int ll_method_supported(int method)
{
    return method >= 0 && method < LL_METHOD_COUNT && ll_methods[method].supported;
}
