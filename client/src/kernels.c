/*
 * kernels.c: the kernel listing. ListKernels returns the backend's catalog
 * (name, ladder rung, types, precisions, transposes, summary); it is
 * copied into a plain array so the caller needs nothing of protobuf.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

GEMM_API int gemm_list_kernels(gemm_client *c, gemm_kernel_info **out,
                               size_t *n)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__ListKernelsRequest lk = GEMM__LIST_KERNELS_REQUEST__INIT;
    Gemm__Reply *rep;
    int rv;

    cli_clear_error();
    if (c == NULL || out == NULL || n == NULL)
        return cli_error(GEMM_ERR_INVALID, "list kernels: NULL argument");
    req.body_case = GEMM__REQUEST__BODY_LIST_KERNELS;
    req.list_kernels = &lk;
    if ((rv = cli_call(c, &req, "list kernels", &rep, NULL)) != GEMM_OK)
        return rv;
    if (rep->body_case != GEMM__REPLY__BODY_LIST_KERNELS) {
        gemm__reply__free_unpacked(rep, NULL);
        return cli_error(GEMM_ERR_PROTOCOL,
                         "list kernels: reply has no list_kernels body");
    }
    const Gemm__ListKernelsReply *l = rep->list_kernels;
    gemm_kernel_info *k = calloc(l->n_kernels ? l->n_kernels : 1, sizeof(*k));
    if (k == NULL) {
        gemm__reply__free_unpacked(rep, NULL);
        return cli_error(GEMM_ERR_NOMEM, "list kernels: out of memory");
    }
    for (size_t i = 0; i < l->n_kernels; i++) {
        const Gemm__KernelInfo *w = l->kernels[i];
        snprintf(k[i].name, sizeof(k[i].name), "%s",
                 w->name != NULL ? w->name : "");
        snprintf(k[i].summary, sizeof(k[i].summary), "%s",
                 w->summary != NULL ? w->summary : "");
        k[i].ladder = w->ladder;
        k[i].reference = w->reference;
        k[i].ab_types = w->ab_types;
        k[i].cd_types = w->cd_types;
        k[i].precisions = w->precisions;
        k[i].transposes = w->transposes;
    }
    *n = l->n_kernels;
    *out = k;
    gemm__reply__free_unpacked(rep, NULL);
    return GEMM_OK;
}

GEMM_API void gemm_kernel_info_free(gemm_kernel_info *k)
{
    free(k);
}
