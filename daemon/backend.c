/*
 * backend.c: the table of backends and the choice between them.
 */
#include "backend.h"

#include <gemm/types.h>

#include <stdio.h>
#include <string.h>

static const gemmd_backend_ops *const backends[] = {
#ifdef GEMM_HAVE_CUDA
    &gemmd_backend_cuda,
#endif
    &gemmd_backend_cpu,
};

int gemmd_backend_open(gemmd_backend *be, const gemmd_config *cfg, char *msg,
                       size_t len)
{
    size_t n = sizeof(backends) / sizeof(backends[0]);
    memset(be, 0, sizeof(*be));
    for (size_t i = 0; i < n; i++) {
        const gemmd_backend_ops *ops = backends[i];
        bool named = strcmp(cfg->backend, ops->name) == 0;
        if (!named && !(strcmp(cfg->backend, "auto") == 0 && ops->available()))
            continue;
        be->ops = ops;
        return ops->init(be, cfg, msg, len);
    }
    snprintf(msg, len, "backend '%s' is not available in this build",
             cfg->backend);
    return GEMM_ERR_UNSUPPORTED;
}
