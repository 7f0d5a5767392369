/*
 * proto_util.h: helpers the fuzz targets share over decoded requests.
 */
#ifndef GEMM_FUZZ_PROTO_UTIL_H
#define GEMM_FUZZ_PROTO_UTIL_H

#include "gemm.pb-c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether field f of m holds a value (a set oneof member, a non-NULL
 * message); for repeated fields, how many. */
static inline size_t pu_count(const ProtobufCMessage *m,
                              const ProtobufCFieldDescriptor *f)
{
    const char *base = (const char *)m;
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
        return *(const size_t *)(base + f->quantifier_offset);
    if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0 &&
        *(const uint32_t *)(base + f->quantifier_offset) != f->id)
        return 0;
    return *(void *const *)(base + f->offset) != NULL;
}

/* Unknown fields anywhere in a message, its sub-messages walked through
 * the descriptors (protobuf-c keeps unknown fields as read, even an
 * overlong tag 0, and packs them back in a form it may refuse). */
static inline bool pu_has_unknown(const ProtobufCMessage *m)
{
    if (m->n_unknown_fields != 0)
        return true;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        size_t n = pu_count(m, f);
        if (n == 0)
            continue;
        const char *slot = (const char *)m + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            ProtobufCMessage *const *v =
                *(ProtobufCMessage *const *const *)slot;
            for (size_t j = 0; j < n; j++)
                if (pu_has_unknown(v[j]))
                    return true;
        } else if (pu_has_unknown(*(const ProtobufCMessage *const *)slot)) {
            return true;
        }
    }
    return false;
}

static inline bool has_unknown(const Gemm__Request *rq)
{
    return pu_has_unknown(&rq->base);
}

#endif
