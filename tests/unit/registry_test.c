/*
 * registry_test.c: the buffer registry against real shm objects: the checks
 * before mapping (name, owner uid, type, size), ownership by connection,
 * reference counts that keep a released buffer mapped while in use, release
 * of everything a connection held, and the backend's pin/unpin hooks.
 */
#include "registry.h"

#include <gemm/gemm.h>

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static char name[64];

/* Creates a fresh shm object of size bytes and returns its name. */
static const char *make_shm(size_t size)
{
    static int n;
    snprintf(name, sizeof(name), "/gemm-regtest-%d-%d", (int)getpid(), n++);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    cr_assert(fd >= 0, "shm_open %s", name);
    cr_assert_eq(ftruncate(fd, (off_t)size), 0);
    close(fd);
    return name;
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

static int do_register(uint32_t owner, uint64_t uid, const char *nm,
                       uint64_t size, uint64_t *id)
{
    char msg[256] = "";
    int rv = reg_register(&reg, owner, uid, nm, size, id, msg, sizeof(msg));
    if (rv != GEMM_OK)
        cr_expect(msg[0] != '\0', "error without message");
    return rv;
}

Test(registry, names)
{
    cr_expect_eq(reg_check_name("/ok-name"), GEMM_OK);
    cr_expect_eq(reg_check_name("noslash"), GEMM_ERR_INVALID);
    cr_expect_eq(reg_check_name("/"), GEMM_ERR_INVALID);
    cr_expect_eq(reg_check_name("/a/b"), GEMM_ERR_INVALID);
    cr_expect_eq(reg_check_name(""), GEMM_ERR_INVALID);
    cr_expect_eq(reg_check_name(NULL), GEMM_ERR_INVALID);
    char longname[300];
    memset(longname, 'x', sizeof(longname));
    longname[0] = '/';
    longname[299] = '\0';
    cr_expect_eq(reg_check_name(longname), GEMM_ERR_INVALID);
}

Test(registry, register_lookup_release)
{
    const char *nm = make_shm(8192);
    uint64_t id = 0;
    cr_assert_eq(do_register(7, getuid(), nm, 8192, &id), GEMM_OK);
    shm_unlink(nm);
    cr_expect_neq(id, 0);
    cr_expect_eq(reg.count, 1);
    cr_expect_eq(reg.bytes, 8192);
    cr_expect_eq(pins, 1);
    reg_buffer *b = reg_lookup(&reg, 7, id);
    cr_assert_not_null(b);
    cr_expect_eq(b->size, 8192);
    /* the mapping is the object's memory */
    memset(b->base, 0x5a, 8192);
    /* another connection sees nothing */
    cr_expect_null(reg_lookup(&reg, 8, id));
    cr_expect_eq(reg_release(&reg, 8, id), GEMM_ERR_NO_BUFFER);
    cr_expect_not_null(reg_lookup(&reg, 7, id), "foreign release harmed");
    cr_expect_eq(reg_release(&reg, 7, id), GEMM_OK);
    cr_expect_null(reg_lookup(&reg, 7, id));
    cr_expect_eq(reg.count, 0);
    cr_expect_eq(reg.mapped, 0);
    cr_expect_eq(unpins, 1);
    cr_expect_eq(reg_release(&reg, 7, id), GEMM_ERR_NO_BUFFER);
}

Test(registry, references_outlive_release)
{
    const char *nm = make_shm(4096);
    uint64_t id;
    cr_assert_eq(do_register(1, getuid(), nm, 4096, &id), GEMM_OK);
    shm_unlink(nm);
    reg_buffer *b = reg_lookup(&reg, 1, id);
    reg_hold(b); /* a job in flight */
    cr_assert_eq(reg_release(&reg, 1, id), GEMM_OK);
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
    uint64_t ids[5];
    for (int i = 0; i < 5; i++) {
        const char *nm = make_shm(4096);
        cr_assert_eq(do_register(i < 3 ? 10 : 11, getuid(), nm, 4096, &ids[i]),
                     GEMM_OK);
        shm_unlink(nm);
    }
    cr_expect_eq(reg_release_owner(&reg, 10), 3);
    cr_expect_eq(reg.count, 2);
    cr_expect_null(reg_lookup(&reg, 10, ids[0]));
    cr_expect_not_null(reg_lookup(&reg, 11, ids[3]));
    cr_expect_eq(reg_release_owner(&reg, 10), 0);
}

Test(registry, many_buffers_grow_table)
{
    enum { N = 300 };
    static uint64_t ids[N];
    for (int i = 0; i < N; i++) {
        const char *nm = make_shm(4096);
        cr_assert_eq(do_register(3, getuid(), nm, 4096, &ids[i]), GEMM_OK);
        shm_unlink(nm);
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
    cr_expect_eq(do_register(1, getuid(), "/gemm-does-not-exist", 4096, &id),
                 GEMM_ERR_SHM);
    const char *nm = make_shm(4096);
    cr_expect_eq(do_register(1, getuid(), nm, 8192, &id), GEMM_ERR_SHM,
                 "object smaller than declared");
    cr_expect_eq(do_register(1, getuid(), nm, 0, &id), GEMM_ERR_INVALID);
    cr_expect_eq(do_register(1, getuid() + 1, nm, 4096, &id),
                 GEMM_ERR_PERMISSION, "owned by another uid");
    cr_expect_eq(do_register(1, getuid(), "bad/name", 4096, &id),
                 GEMM_ERR_INVALID);
    shm_unlink(nm);
    /* a FIFO where a regular file should be */
    char path[128];
    snprintf(path, sizeof(path), "/dev/shm/gemm-regtest-fifo-%d",
             (int)getpid());
    cr_assert_eq(mkfifo(path, 0600), 0);
    cr_expect_eq(do_register(1, getuid(), path + 8, 4096, &id), GEMM_ERR_SHM);
    unlink(path);
    /* a symlink is not followed */
    char target[128];
    snprintf(target, sizeof(target), "/dev/shm%s", make_shm(4096));
    snprintf(path, sizeof(path), "/dev/shm/gemm-regtest-link-%d",
             (int)getpid());
    cr_assert_eq(symlink(target, path), 0);
    cr_expect_eq(do_register(1, getuid(), path + 8, 4096, &id), GEMM_ERR_SHM);
    unlink(path);
    unlink(target);
    cr_expect_eq(reg.count, 0);
    cr_expect_eq(reg.mapped, 0);
    cr_expect_eq(pins, 0);
}

Test(registry, notices_a_shrunk_object)
{
    const char *nm = make_shm(8192);
    uint64_t id;
    cr_assert_eq(do_register(1, getuid(), nm, 8192, &id), GEMM_OK);
    reg_buffer *b = reg_lookup(&reg, 1, id);
    cr_expect_not(reg_faulted(b));
    int fd = shm_open(nm, O_RDWR, 0);
    cr_assert(fd >= 0);
    cr_assert_eq(ftruncate(fd, 4096), 0); /* the owner shrinks it */
    close(fd);
    shm_unlink(nm);
    cr_expect(reg_faulted(b), "a shrunk object must read as faulted");
    cr_expect(reg_faulted(b), "and stay so");
    cr_expect_eq(reg_release(&reg, 1, id), GEMM_OK);
}
