/*
 * ll_fixed.c - a vserver laid out in memory its caller provides: the struct,
 * then every array at an offset that depends only on the capacity, each
 * aligned to 64 bytes. Every column and the longest window's buckets are
 * there from the start, so nothing is ever reallocated: a shared-memory
 * segment (ll_shared.c) can hold it, and a process that maps the segment
 * at another address lays the pointers out again (ll_fixed_rebase) instead
 * of the segment keeping offsets the hot path would have to add.
 */
#include <stdint.h>
#include <string.h>

#include "ll_fixed.h"
#include "ll_internal.h"

#define LL_ALIGN 64

typedef struct {
    size_t cell, arg, svc, bytes, packets, bytes_bkt, packets_bkt, live, ledger, end;
    size_t col[LL_COL_COUNT];
} layout;

static size_t up(size_t x) { return (x + LL_ALIGN - 1) & ~(size_t)(LL_ALIGN - 1); }

static uint32_t leaves(uint32_t capacity)
{
    uint32_t P = 1;
    while (P < capacity)
        P *= 2;
    return P;
}

/* Every offset from the struct's address; capacity <= LL_FIXED_MAX_CAPACITY
 * and rows <= LL_FIXED_MAX_ROWS keep every product far inside size_t. */
static void lay_out(uint32_t capacity, uint32_t rows, layout *L)
{
    size_t C = capacity, P = leaves(capacity), at = up(sizeof(ll_vserver));
#define PLACE(field, bytes) (L->field = at, at = up(at + (bytes)))
    PLACE(cell, 2 * P * sizeof(uint64_t));
    PLACE(arg, 2 * P * sizeof(uint32_t));
    PLACE(svc, C * sizeof(ll_svc));
    PLACE(bytes, C * sizeof(uint64_t));
    PLACE(packets, C * sizeof(uint64_t));
    PLACE(bytes_bkt, (size_t)LL_MAX_WINDOW_SECONDS * C * sizeof(uint64_t));
    PLACE(packets_bkt, (size_t)LL_MAX_WINDOW_SECONDS * C * sizeof(uint64_t));
    PLACE(live, C * sizeof(uint32_t));
    PLACE(ledger, (size_t)rows * C * sizeof(uint32_t));
    for (int c = 0; c < LL_COL_COUNT; c++)
        PLACE(col[c], C * ll_columns[c].elem);
#undef PLACE
    L->end = at;
}

size_t ll_fixed_size(uint32_t capacity, uint32_t ledger_rows)
{
    if (capacity < 1 || capacity > LL_FIXED_MAX_CAPACITY || ledger_rows > LL_FIXED_MAX_ROWS)
        return 0;
    layout L;
    lay_out(capacity, ledger_rows, &L);
    return L.end;
}

void ll_fixed_rebase(ll_vserver *vs)
{
    if (vs->self == (void *)vs)
        return;
    layout L;
    unsigned char *base = (unsigned char *)vs;
    lay_out(vs->capacity, vs->ledger_rows, &L);
    vs->tree.cell = (uint64_t *)(void *)(base + L.cell);
    vs->tree.arg = (uint32_t *)(void *)(base + L.arg);
    vs->svc = (ll_svc *)(void *)(base + L.svc);
    vs->bytes = (uint64_t *)(void *)(base + L.bytes);
    vs->packets = (uint64_t *)(void *)(base + L.packets);
    vs->bytes_bkt = (uint64_t *)(void *)(base + L.bytes_bkt);
    vs->packets_bkt = (uint64_t *)(void *)(base + L.packets_bkt);
    vs->live = (uint32_t *)(void *)(base + L.live);
    vs->ledger = vs->ledger_rows ? (uint32_t *)(void *)(base + L.ledger) : NULL;
    vs->ledger_row = NULL;
    for (int c = 0; c < LL_COL_COUNT; c++)
        vs->col[c] = base + L.col[c];
    vs->ops = &ll_methods[vs->method];  /* this process's copy of the table */
    vs->self = vs;
}

ll_vserver *ll_fixed_create(void *mem, size_t size, ll_method method, int64_t sec, uint32_t capacity,
                            uint32_t ledger_rows)
{
    size_t need = ll_fixed_size(capacity, ledger_rows);
    if (!mem || need == 0 || size < need || (uintptr_t)mem % LL_ALIGN
        || (unsigned)method >= LL_METHOD_COUNT || !ll_methods[method].supported)
        return NULL;
    memset(mem, 0, need);
    ll_vserver *vs = mem;
    ll_init_fields(vs, method, sec);
    vs->fixed = need;
    vs->capacity = capacity;
    vs->ledger_rows = ledger_rows;
    ll_fixed_rebase(vs);
    /* the arrays have leaves(capacity); the tree spans the slots bound so far (ll_bind grows it) */
    ll_tree_init(&vs->tree, 1, vs->tree.cell, vs->tree.arg);
    for (int c = 0; c < LL_COL_COUNT; c++)  /* every column, each element initial */
        for (uint32_t i = 0; i < capacity; i++)
            ll_column_reset(vs->col[c], c, i);
    return vs;
}
