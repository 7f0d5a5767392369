/*
 * import_test.c: gemm_buffer_import, registering a memfd the caller made
 * and keeps mapped. A sealable memfd (sparse, partly written) is
 * registered and computed with in place; the buffer's data is the
 * caller's address and gemm_buffer_free leaves the mapping alone. A memfd
 * made without MFD_ALLOW_SEALING, a second import of a registered memfd,
 * a descriptor that is no memfd, a memfd shorter than the size and bad
 * arguments are refused with their error and a message naming the fix;
 * the daemon goes on serving.
 */
#include "util/daemon.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

TestSuite(import, .init = fixture_setup, .fini = fixture_teardown,
          .timeout = 60);

/* A memfd of size bytes (flags as memfd_create takes them), mapped at
 * *addr. */
static int make_memfd(size_t size, unsigned flags, void **addr)
{
    int fd = memfd_create("import-test", flags);
    cr_assert_geq(fd, 0, "memfd_create: %s", strerror(errno));
    cr_assert_eq(ftruncate(fd, (off_t)size), 0, "ftruncate: %s",
                 strerror(errno));
    *addr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(*addr, MAP_FAILED, "mmap: %s", strerror(errno));
    return fd;
}

Test(import, computes_in_place_and_keeps_the_mapping)
{
    const size_t n = 64, size = 1u << 20;
    void *addr;
    int fd = make_memfd(size, MFD_CLOEXEC | MFD_ALLOW_SEALING, &addr);
    double *a = addr, *b = a + n * n, *d = b + n * n;
    for (size_t i = 0; i < n * n; i++) {
        a[i] = (double)(i % 7) - 3;
        b[i] = (double)(i % 5) - 2;
    }
    /* the rest of the memfd is still a hole: the import allocates it */
    gemm_buffer *buf = NULL;
    int rv = gemm_buffer_import(g_client, fd, size, addr, &buf);
    cr_assert_eq(rv, GEMM_OK, "import: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    cr_assert_eq(gemm_buffer_data(buf), addr);
    cr_assert_eq(gemm_buffer_size(buf), size);
    int seals = fcntl(fd, F_GET_SEALS);
    cr_assert(seals & F_SEAL_SEAL, "the daemon sealed it (seals 0x%x)", seals);

    gemm_op op;
    gemm_op_init(&op, n, n, n, GEMM_FP64, GEMM_FP64);
    gemm_op_set_scalars(&op, 1, 0, 0, 0);
    op.a = (gemm_matrix){buf, 0, 0, 0};
    op.b = (gemm_matrix){buf, n * n * 8, 0, 0};
    op.d = (gemm_matrix){buf, 2 * n * n * 8, 0, 0};
    rv = gemm_run(g_client, &op, NULL);
    cr_assert_eq(rv, GEMM_OK, "gemm: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    for (size_t i = 0; i < n; i += 7)
        for (size_t j = 0; j < n; j += 5) {
            double ref = 0;
            for (size_t l = 0; l < n; l++)
                ref += a[i * n + l] * b[l * n + j];
            cr_assert_eq(d[i * n + j], ref, "D[%zu,%zu] %g, want %g", i, j,
                         d[i * n + j], ref);
        }

    /* a second import of the same memfd: sealed, refused */
    gemm_buffer *again = NULL;
    rv = gemm_buffer_import(g_client, fd, size, addr, &again);
    cr_assert_eq(rv, GEMM_ERR_SHM, "second import: %s", gemm_strerror(rv));
    cr_assert_null(again);
    cr_assert(strstr(gemm_last_error_message(), "registered at most once"),
              "message: %s", gemm_last_error_message());

    gemm_buffer_free(buf);
    /* still mapped and writable here */
    d[0] = 42;
    cr_assert_eq(d[0], 42);
    cr_assert_eq(munmap(addr, size), 0);
    close(fd);
    tu_assert_healthy(g_client);
}

Test(import, refuses_a_memfd_without_allow_sealing)
{
    void *addr;
    int fd = make_memfd(1u << 20, MFD_CLOEXEC, &addr);
    gemm_buffer *buf = NULL;
    int rv = gemm_buffer_import(g_client, fd, 1u << 20, addr, &buf);
    cr_assert_eq(rv, GEMM_ERR_SHM, "import: %s", gemm_strerror(rv));
    cr_assert_null(buf);
    cr_assert(strstr(gemm_last_error_message(), "MFD_ALLOW_SEALING"),
              "message: %s", gemm_last_error_message());
    munmap(addr, 1u << 20);
    close(fd);
    tu_assert_healthy(g_client);
}

Test(import, refuses_what_is_not_a_fitting_memfd)
{
    void *addr;
    int fd = make_memfd(1u << 20, MFD_CLOEXEC | MFD_ALLOW_SEALING, &addr);
    gemm_buffer *buf = NULL;
    /* more than the memfd holds */
    int rv = gemm_buffer_import(g_client, fd, 2u << 20, addr, &buf);
    cr_assert_eq(rv, GEMM_ERR_SHM, "too large: %s", gemm_strerror(rv));
    /* not page-aligned, size 0, NULL */
    rv = gemm_buffer_import(g_client, fd, 4096, (char *)addr + 8, &buf);
    cr_assert_eq(rv, GEMM_ERR_INVALID, "unaligned: %s", gemm_strerror(rv));
    rv = gemm_buffer_import(g_client, fd, 0, addr, &buf);
    cr_assert_eq(rv, GEMM_ERR_INVALID, "size 0: %s", gemm_strerror(rv));
    rv = gemm_buffer_import(NULL, fd, 4096, addr, &buf);
    cr_assert_eq(rv, GEMM_ERR_INVALID, "NULL client: %s", gemm_strerror(rv));
    /* a pipe is no memfd */
    int p[2];
    cr_assert_eq(pipe(p), 0);
    rv = gemm_buffer_import(g_client, p[0], 4096, addr, &buf);
    cr_assert_eq(rv, GEMM_ERR_SHM, "pipe: %s", gemm_strerror(rv));
    cr_assert(strstr(gemm_last_error_message(), "memfd_create"), "message: %s",
              gemm_last_error_message());
    cr_assert_null(buf);
    close(p[0]);
    close(p[1]);
    /* the memfd itself is still good */
    rv = gemm_buffer_import(g_client, fd, 1u << 20, addr, &buf);
    cr_assert_eq(rv, GEMM_OK, "import: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    gemm_buffer_free(buf);
    munmap(addr, 1u << 20);
    close(fd);
    tu_assert_healthy(g_client);
}
