/*
 * ll_columns.h - the optional per-slot data (internal): one table of columns.
 *
 * Most per-slot data belongs to every vserver (ll_svc, the window's
 * counts). Some is the input of one method or family only: a monitor's
 * probe (LRTM), a reported load (CUSTOMLOAD), a name's hash (the hash
 * family), a latency estimate (PEAKEWMA). Each of those is one column of
 * ll_columns[] (ll_columns.c): its element size, the methods that need it
 * from the moment they are set (the others get it on its first input,
 * ll_column_need()), and its initial value. The vserver allocates, grows,
 * clears, compacts and counts every column by one loop over the table
 * (ll_vserver.c), and a vserver that never uses an input pays no memory
 * for it. A new per-service input: its line in LL_COLUMNS below, and its
 * method's code.
 */
#ifndef LL_COLUMNS_H
#define LL_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

/* The columns, one line each: X(NAME, name, element type, methods), where
 * methods has bit m set for a method m that needs the column from the moment
 * it is set (the others get it on its first input). Each line makes
 * LL_COL_<NAME>, the typed accessor ll_col_<name>() (ll_internal.h) and its
 * entry of ll_columns[] (ll_columns.c). */
#define LL_COLUMNS(X)                                                                    \
    X(PROBE, probe, uint32_t, 0)          /* LRTM's smoothed probe in us, plus one; 0: none */ \
    X(NAME_HASH, name_hash, uint64_t, 0)  /* the hash family's name hashes (ll_hash_name_entry) */ \
    X(CUSTOM, custom, uint64_t, 0)        /* CUSTOMLOAD's load | LL_CUSTOM_OVER */        \
    /* PEAKEWMA's latency estimate: its pick and its samples read it at once */          \
    X(PEAK, peak, ll_peak, (uint64_t)1 << LL_PEAKEWMA)                                   \
    /* the policy's state of each slot (ll_policy.h): from the first setting that needs it */ \
    X(POLICY, policy, ll_pol, 0)

#define LL_COLUMN_INDEX(NAME, name, type, methods) LL_COL_##NAME,
enum { LL_COLUMNS(LL_COLUMN_INDEX) LL_COL_COUNT };
#undef LL_COLUMN_INDEX

typedef struct {
    size_t elem;           /* bytes a slot                                       */
    uint64_t methods;      /* bit m: allocated when method m is set (kept after) */
    const void *init;      /* one element's initial bytes; NULL: all zero        */
} ll_column;

extern const ll_column ll_columns[LL_COL_COUNT];

/* A column's array for `capacity` slots, each element initial; NULL when
 * memory is short. */
void *ll_column_alloc(int c, uint32_t capacity);

/* Sets `slot` of column c's array to the initial value. */
void ll_column_reset(void *array, int c, uint32_t slot);

#endif /* LL_COLUMNS_H */
