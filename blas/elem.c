/*
 * elem.c: the element helpers of libgemmblas: the size of one element of
 * a gb_type and whether a scalar is 0 or 1. The lowest layer: gemm.c,
 * offload.c and wheel.c use them, they use nothing of ours.
 */
#include "gemmblas.h"

size_t gb_esize(gb_type t)
{
    static const size_t sz[] = {4, 8, 8, 16};
    return sz[t];
}

bool gb_is_zero(gb_type t, const void *s)
{
    switch (t) {
    case GB_S:
        return *(const float *)s == 0.0f;
    case GB_D:
        return *(const double *)s == 0.0;
    case GB_C:
        return ((const float *)s)[0] == 0.0f && ((const float *)s)[1] == 0.0f;
    default:
        return ((const double *)s)[0] == 0.0 && ((const double *)s)[1] == 0.0;
    }
}

bool gb_is_one(gb_type t, const void *s)
{
    switch (t) {
    case GB_S:
        return *(const float *)s == 1.0f;
    case GB_D:
        return *(const double *)s == 1.0;
    case GB_C:
        return ((const float *)s)[0] == 1.0f && ((const float *)s)[1] == 0.0f;
    default:
        return ((const double *)s)[0] == 1.0 && ((const double *)s)[1] == 0.0;
    }
}
