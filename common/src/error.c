/*
 * error.c: gemm_strerror() and the version string, generated from the one
 * error table in gemm/types.h so codes and messages cannot drift. Compiled
 * into the client library (which exports them) and the daemon.
 */
#include <gemm/types.h>

GEMM_API const char *gemm_strerror(int err)
{
    switch (err) {
#define GEMM_X_CASE(name, num, msg)                                            \
    case num:                                                                  \
        return msg;
        GEMM_ERROR_MAP(GEMM_X_CASE)
#undef GEMM_X_CASE
    default:
        return "unknown error";
    }
}

GEMM_API const char *gemm_version_string(void)
{
    return GEMM_VERSION_STRING;
}
