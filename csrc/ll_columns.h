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
 * for it. A new per-service input: its entry here and in ll_columns.c, a
 * typed accessor below, and its method's code.
 */
#ifndef LL_COLUMNS_H
#define LL_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

enum {
    LL_COL_PROBE = 0,      /* uint32_t: LRTM's smoothed probe in us, plus one; 0: none */
    LL_COL_NAME_HASH = 1,  /* uint64_t: the hash family's name hashes (ll_hash_name_entry) */
    LL_COL_CUSTOM = 2,     /* uint64_t: CUSTOMLOAD's load | LL_CUSTOM_OVER */
    LL_COL_PEAK = 3,       /* ll_peak: PEAKEWMA's latency estimate */
    LL_COL_COUNT = 4
};

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
