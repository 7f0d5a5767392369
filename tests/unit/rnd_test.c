/*
 * rnd_test.c: the random streams threads fill in parts (common/rnd.h):
 * rnd_at gives the draws of a sequential splitmix64, and rnd_parallel_on
 * covers every index once, in parts aligned to the unit, whatever the
 * length and the thread count.
 */
#include <rnd.h>

#include <criterion/criterion.h>

#include <stdlib.h>

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct cover {
    uint64_t seed;
    uint64_t *out;
    unsigned char *hits;
    size_t unit;
    int misaligned; /* a part began off the unit */
} cover;

static void part(void *arg, size_t lo, size_t hi)
{
    cover *c = arg;
    if (lo % c->unit != 0)
        __atomic_store_n(&c->misaligned, 1, __ATOMIC_RELAXED);
    for (size_t i = lo; i < hi; i++) {
        c->out[i] = rnd_at(c->seed, i);
        c->hits[i]++;
    }
}

Test(rnd, at_is_the_sequential_stream)
{
    uint64_t s = 42, seed = 42;
    for (uint64_t i = 0; i < 100000; i++)
        cr_assert_eq(rnd_at(seed, i), splitmix(&s), "draw %llu",
                     (unsigned long long)i);
}

Test(rnd, parallel_covers_every_index_once)
{
    const size_t lens[] = {
        0, 1, 5, RND_PART - 1, 2 * RND_PART + 5, 5 * RND_PART + 3};
    const size_t nthreads[] = {1, 2, 3, 8};
    for (size_t ti = 0; ti < 4; ti++) {
        const size_t threads = nthreads[ti];
        for (size_t u = 1; u <= 4; u += 3) {
            for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
                size_t n = lens[l];
                cover c = {.seed = 7, .unit = u};
                c.out = calloc(n + 1, sizeof(*c.out));
                c.hits = calloc(n + 1, 1);
                cr_assert(c.out && c.hits);
                rnd_parallel_on(n, u, threads, part, &c);
                uint64_t s = 7;
                for (size_t i = 0; i < n; i++) {
                    cr_assert_eq(
                        c.hits[i], 1,
                        "%zu threads, n %zu unit %zu: index %zu hit %d",
                        threads, n, u, i, c.hits[i]);
                    cr_assert_eq(c.out[i], splitmix(&s));
                }
                cr_assert_eq(c.misaligned, 0, "n %zu: a part off unit %zu", n,
                             u);
                free(c.out);
                free(c.hits);
            }
        }
    }
}
