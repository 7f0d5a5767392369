/*
 * registry_test.c: the buffer registry against real memfds: the checks and
 * seals before and after mapping (type, size, sealability, pages
 * allocated), the aliasing key of one object registered twice, ownership
 * by connection, reference counts that keep a released buffer mapped while
 * in use, release of everything a connection held (with tensor charges),
 * and the backend's pin/unpin hooks.
 */
#include "registry.h"

#include <gemm/types.h>

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A fresh memfd of size bytes, its pages allocated unless sparse. */
static int make_memfd(size_t size, bool sparse)
{
    int fd = memfd_create("regtest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    cr_assert(fd >= 0, "memfd_create");
    cr_assert_eq(ftruncate(fd, (off_t)size), 0);
    if (!sparse)
        cr_assert_eq(posix_fallocate(fd, 0, (off_t)size), 0);
    return fd;
}

static registry reg;
static int pins, unpins;

static int pin(void *arg, void *base, size_t size, void **h, char *msg,
               size_t len)
{
    (void)arg;
    (void)base;
    (void)msg;
    (void)len;
    pins++;
    *h = (void *)size;
    return GEMM_OK;
}

static void unpin(void *arg, void *base, void *h)
{
    (void)arg;
    (void)base;
    (void)h;
    unpins++;
}

static void setup(void)
{
    reg_hooks hooks = {.pin = pin, .unpin = unpin};
    pins = unpins = 0;
    cr_assert_eq(reg_init(&reg, &hooks), GEMM_OK);
}

static void teardown(void)
{
    reg_fini(&reg);
}

TestSuite(registry, .init = setup, .fini = teardown);

/* Registers a dup of fd (the registry takes and closes what it gets). */
static int do_register(uint32_t owner, int fd, uint64_t size, uint64_t *id)
{
    char msg[256] = "";
    int rv = reg_register_fd(&reg, owner, dup(fd), size, id, msg, sizeof(msg));
    if (rv != GEMM_OK)
        cr_expect(msg[0] != '\0', "error without message");
    return rv;
}

Test(registry, register_lookup_release)
{
    int fd = make_memfd(8192, false);
    uint64_t id = 0;
    cr_assert_eq(do_register(7, fd, 8192, &id), GEMM_OK);
    cr_expect_neq(id, 0);
    cr_expect_eq(reg.count, 1);
    cr_expect_eq(reg.bytes, 8192);
    cr_expect_eq(pins, 1);
    reg_buffer *b = reg_lookup(&reg, 7, id);
    cr_assert_not_null(b);
    cr_expect_eq(b->size, 8192);
    /* the mapping is the object's memory */
    memset(b->base, 0x5a, 8192);
    unsigned char c;
    cr_assert_eq(pread(fd, &c, 1, 4000), 1);
    cr_expect_eq(c, 0x5a);
    /* another connection sees nothing */
    cr_expect_null(reg_lookup(&reg, 8, id));
    cr_expect_eq(reg_release_kind(&reg, 8, id, REG_BUFFER), GEMM_ERR_NO_BUFFER);
    cr_expect_not_null(reg_lookup(&reg, 7, id), "foreign release harmed");
    cr_expect_eq(reg_release_kind(&reg, 7, id, REG_BUFFER), GEMM_OK);
    cr_expect_null(reg_lookup(&reg, 7, id));
    cr_expect_eq(reg.count, 0);
    cr_expect_eq(reg.mapped, 0);
    cr_expect_eq(unpins, 1);
    cr_expect_eq(reg_release_kind(&reg, 7, id, REG_BUFFER), GEMM_ERR_NO_BUFFER);
    close(fd);
}

Test(registry, seals_against_shrinking_and_hole_punching)
{
    int fd = make_memfd(1 << 16, false);
    uint64_t id;
    cr_assert_eq(do_register(1, fd, 1 << 16, &id), GEMM_OK);
    int seals = fcntl(fd, F_GET_SEALS);
    cr_expect(seals & F_SEAL_SHRINK, "no F_SEAL_SHRINK");
    cr_expect(seals & F_SEAL_GROW, "no F_SEAL_GROW");
    cr_expect(seals & F_SEAL_SEAL, "no F_SEAL_SEAL");
    cr_expect_neq(ftruncate(fd, 4096), 0, "shrunk after registration");
    cr_expect_neq(
        fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0,
        "hole punched after registration");
    /* the daemon's mapping stays writable */
    reg_buffer *b = reg_lookup(&reg, 1, id);
    memset(b->base, 1, 1 << 16);
    /* the same object again: sealed against new writable mappings, so a
     * second registration (which could alias D onto A) is refused */
    uint64_t id2;
    cr_expect_eq(do_register(1, fd, 1 << 16, &id2), GEMM_ERR_SHM,
                 "a registered memfd registered again");
    cr_expect_eq(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0),
                 MAP_FAILED, "a new writable mapping of a registered memfd");
    /* objects are told apart by the aliasing key */
    int other = make_memfd(1 << 16, false);
    uint64_t id3;
    cr_assert_eq(do_register(1, other, 1 << 16, &id3), GEMM_OK);
    cr_expect_neq(reg_lookup(&reg, 1, id3)->object, b->object);
    close(other);
    close(fd);
}

Test(registry, references_outlive_release)
{
    int fd = make_memfd(4096, false);
    uint64_t id;
    cr_assert_eq(do_register(1, fd, 4096, &id), GEMM_OK);
    close(fd);
    reg_buffer *b = reg_lookup(&reg, 1, id);
    reg_hold(b); /* a job in flight */
    cr_assert_eq(reg_release_kind(&reg, 1, id, REG_BUFFER), GEMM_OK);
    cr_expect_eq(reg.count, 0, "released from the table at once");
    cr_expect_eq(reg.mapped, 1, "but still mapped for the job");
    ((volatile char *)b->base)[100] = 1; /* still valid memory */
    cr_expect_eq(unpins, 0);
    reg_put(&reg, b);
    cr_expect_eq(reg.mapped, 0);
    cr_expect_eq(unpins, 1);
}

Test(registry, release_owner)
{
    uint64_t ids[5], charges;
    for (int i = 0; i < 5; i++) {
        int fd = make_memfd(4096, false);
        cr_assert_eq(do_register(i < 3 ? 10 : 11, fd, 4096, &ids[i]), GEMM_OK);
        close(fd);
    }
    reg_buffer *t = calloc(1, sizeof(*t));
    uint64_t tid;
    t->size = 1000;
    t->charge = 1000;
    cr_assert_eq(reg_add_tensor(&reg, 10, t, &tid), GEMM_OK);
    cr_expect_eq(reg_release_owner(&reg, 10, &charges), 4);
    cr_expect_eq(charges, 1000, "the tensor's charge");
    cr_expect_eq(reg.count, 2);
    cr_expect_null(reg_lookup(&reg, 10, ids[0]));
    cr_expect_not_null(reg_lookup(&reg, 11, ids[3]));
    cr_expect_eq(reg_release_owner(&reg, 10, &charges), 0);
    cr_expect_eq(charges, 0);
}

Test(registry, many_buffers_grow_table)
{
    enum { N = 300 };
    static uint64_t ids[N];
    for (int i = 0; i < N; i++) {
        int fd = make_memfd(4096, false);
        cr_assert_eq(do_register(3, fd, 4096, &ids[i]), GEMM_OK);
        close(fd);
    }
    cr_expect_gt(reg.nbuckets, 64);
    for (int i = 0; i < N; i++)
        cr_expect_not_null(reg_lookup(&reg, 3, ids[i]));
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            cr_assert_neq(ids[i], ids[j]);
}

Test(registry, refuses_bad_objects)
{
    uint64_t id;
    int fd = make_memfd(4096, false);
    cr_expect_eq(do_register(1, fd, 8192, &id), GEMM_ERR_SHM,
                 "object smaller than declared");
    cr_expect_eq(do_register(1, fd, 0, &id), GEMM_ERR_INVALID);
    close(fd);
    /* sparse: the daemon would pay for the client's pages */
    fd = make_memfd(1 << 20, true);
    cr_expect_eq(do_register(1, fd, 1 << 20, &id), GEMM_ERR_SHM, "sparse");
    close(fd);
    /* partly allocated */
    fd = make_memfd(1 << 20, true);
    cr_assert_eq(posix_fallocate(fd, 0, 1 << 19), 0);
    cr_expect_eq(do_register(1, fd, 1 << 20, &id), GEMM_ERR_SHM, "half");
    close(fd);
    /* sealed by its owner against more seals, without the ones we need */
    fd = make_memfd(4096, false);
    cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL), 0);
    cr_expect_eq(do_register(1, fd, 4096, &id), GEMM_ERR_SHM, "F_SEAL_SEAL");
    close(fd);
    /* a plain file cannot be sealed */
    char path[] = "/tmp/gemm-regtest-XXXXXX";
    fd = mkstemp(path);
    cr_assert(fd >= 0);
    unlink(path);
    cr_assert_eq(posix_fallocate(fd, 0, 4096), 0);
    cr_expect_eq(do_register(1, fd, 4096, &id), GEMM_ERR_SHM, "plain file");
    close(fd);
    /* a pipe is not a file at all */
    int p[2];
    cr_assert_eq(pipe(p), 0);
    cr_expect_eq(do_register(1, p[0], 4096, &id), GEMM_ERR_SHM, "a pipe");
    close(p[0]);
    close(p[1]);
    cr_expect_eq(reg.count, 0);
    cr_expect_eq(reg.mapped, 0);
    cr_expect_eq(pins, 0);
}
