/* ll_columns.c - the table of optional per-slot columns (ll_columns.h). */
#include <stdlib.h>
#include <string.h>

#include "ll_internal.h"

#define LL_COLUMN_ENTRY(NAME, name, type, methods) [LL_COL_##NAME] = { sizeof(type), (methods), NULL },
const ll_column ll_columns[LL_COL_COUNT] = { LL_COLUMNS(LL_COLUMN_ENTRY) };
#undef LL_COLUMN_ENTRY

void *ll_column_alloc(int c, uint32_t capacity)
{
    const ll_column *col = &ll_columns[c];
    size_t n = capacity ? capacity : 1;  /* a valid pointer even for no slot */
    if (!col->init)
        return calloc(n, col->elem);
    if (n > SIZE_MAX / col->elem)
        return NULL;
    unsigned char *a = malloc(n * col->elem);
    if (a)
        for (size_t i = 0; i < n; i++)
            memcpy(a + i * col->elem, col->init, col->elem);
    return a;
}

void ll_column_reset(void *array, int c, uint32_t slot)
{
    const ll_column *col = &ll_columns[c];
    unsigned char *at = (unsigned char *)array + (size_t)slot * col->elem;
    if (col->init)
        memcpy(at, col->init, col->elem);
    else
        memset(at, 0, col->elem);
}
