/*
 * validate_batch.c: overlaps across the problems of a batch
 * (validate_batch.h). The spans are sorted by (object, lo); sweeping them
 * in that order, a span overlaps an earlier one of its object exactly when
 * the largest `hi` seen so far passes its `lo`. Two such maxima are kept,
 * one over the Ds and one over every span, each with the problem that set
 * it (and, for every span, the largest of a problem other than that one),
 * so the sweep finds a D over anything and anything over a D in one pass.
 */
#include "validate_batch.h"

#include <stdlib.h>

static int span_cmp(const void *x, const void *y)
{
    const val_span *a = x, *b = y;
    if (a->object != b->object)
        return a->object < b->object ? -1 : 1;
    if (a->lo != b->lo)
        return a->lo < b->lo ? -1 : 1;
    if (a->problem != b->problem)
        return a->problem < b->problem ? -1 : 1;
    return (a->what > b->what) - (a->what < b->what);
}

/* The largest hi seen in the sweep of one object: the span that holds it
 * and the largest among spans of any other problem than that span's
 * (so that a problem never conflicts with itself, yet another problem's
 * overlap is not hidden behind it). */
typedef struct sweep_max {
    const val_span *top;    /* largest hi; NULL when none */
    const val_span *second; /* largest hi of a problem != top's */
} sweep_max;

static void max_add(sweep_max *m, const val_span *s)
{
    if (m->top == NULL || s->hi > m->top->hi) {
        if (m->top != NULL && m->top->problem != s->problem)
            m->second = m->top;
        else if (m->second != NULL && m->second->problem == s->problem)
            m->second = NULL;
        m->top = s;
    } else if (s->problem != m->top->problem &&
               (m->second == NULL || s->hi > m->second->hi)) {
        m->second = s;
    }
}

/* The span of m reaching past lo of a problem other than `problem`, or
 * NULL. */
static const val_span *max_hit(const sweep_max *m, uint64_t lo,
                               uint64_t problem)
{
    const val_span *t = m->top;
    if (t != NULL && t->problem == problem)
        t = m->second;
    return t != NULL && t->hi > lo ? t : NULL;
}

size_t val_spans_conflicts(val_span *spans, size_t n,
                           void (*fn)(void *arg, const val_conflict *c),
                           void *arg)
{
    if (n < 2)
        return 0;
    qsort(spans, n, sizeof(*spans), span_cmp);
    size_t found = 0;
    sweep_max outs = {0}, all = {0};
    for (size_t i = 0; i < n; i++) {
        const val_span *s = &spans[i];
        if (i > 0 && spans[i - 1].object != s->object)
            outs = all = (sweep_max){0};
        const val_span *hit = s->what == 'D'
                                  ? max_hit(&all, s->lo, s->problem)
                                  : max_hit(&outs, s->lo, s->problem);
        if (hit != NULL) {
            val_conflict c;
            if (s->what == 'D' && hit->what == 'D') {
                bool later = s->problem > hit->problem;
                c.bad = later ? s->problem : hit->problem;
                c.other = later ? hit->problem : s->problem;
                c.what = 'D';
            } else if (s->what == 'D') {
                c.bad = s->problem;
                c.other = hit->problem;
                c.what = hit->what;
            } else {
                c.bad = hit->problem;
                c.other = s->problem;
                c.what = s->what;
            }
            fn(arg, &c);
            found++;
        }
        if (s->what == 'D')
            max_add(&outs, s);
        max_add(&all, s);
    }
    return found;
}
