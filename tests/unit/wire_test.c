/*
 * wire_test.c: common/wire.h and common/scm.c, the bytes the daemon and
 * its clients exchange: the greetings, SP frame heads and request ids,
 * descriptor-channel messages and answers against their byte layouts, and
 * a descriptor passed with SCM_RIGHTS over a socketpair (received, or
 * refused when no room was given for it).
 */
#include "scm.h"
#include "wire.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

Test(wire, greetings)
{
    static const uint8_t req[8] = {0, 'S', 'P', 0, 0, 0x30, 0, 0};
    static const uint8_t rep[8] = {0, 'S', 'P', 0, 0, 0x31, 0, 0};
    static const uint8_t fd[8] = {0, 'G', 'F', 'D', 0, 1, 0, 0};
    cr_assert_arr_eq(wire_sp_req_hdr, req, WIRE_HDR_LEN);
    cr_assert_arr_eq(wire_sp_rep_hdr, rep, WIRE_HDR_LEN);
    cr_assert_arr_eq(wire_fd_hdr, fd, WIRE_HDR_LEN);
}

Test(wire, sp_frame_head)
{
    static const uint8_t want[9] = {1, 0, 0, 0, 0, 0, 0, 0xea, 0x60};
    uint8_t h[WIRE_SP_FRAME_HEAD];
    uint64_t len = 0;
    wire_sp_frame_put(h, 60000);
    cr_assert_arr_eq(h, want, sizeof(want));
    cr_assert(wire_sp_frame_get(h, &len));
    cr_assert_eq(len, 60000);
    h[0] = 2;
    cr_assert_not(wire_sp_frame_get(h, &len), "type 2 is not a frame");
    wire_sp_frame_put(h, UINT64_MAX);
    cr_assert(wire_sp_frame_get(h, &len));
    cr_assert_eq(len, UINT64_MAX);
}

Test(wire, request_id)
{
    uint8_t b[4];
    wire_put_be32(b, 7 | WIRE_SP_ID_FLAG);
    cr_assert_eq(b[0], 0x80);
    cr_assert_eq(b[3], 7);
    cr_assert_eq(wire_get_be32(b), 7 | WIRE_SP_ID_FLAG);
}

Test(wire, fd_messages)
{
    static const uint8_t pass[8] = {1, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t ans[16] = {5, 0, 0, 0, 0, 0, 0, 0,
                                    8, 7, 6, 5, 4, 3, 2, 1};
    uint8_t m[WIRE_FD_MSG_LEN], a[WIRE_FD_ANSWER_LEN];
    uint64_t ticket = 0;
    wire_fd_msg_put(m, WIRE_FD_OP_PASS, 0);
    cr_assert_arr_eq(m, pass, sizeof(pass));
    cr_assert_eq(wire_fd_msg_op(m), WIRE_FD_OP_PASS);
    wire_fd_answer_put(a, 5, 0x0102030405060708ull);
    cr_assert_arr_eq(a, ans, sizeof(ans));
    cr_assert_eq(wire_fd_answer_get(a, &ticket), 5);
    cr_assert_eq(ticket, 0x0102030405060708ull);
    wire_fd_answer_put(a, -1, 0);
    cr_assert_eq(wire_fd_answer_get(a, &ticket), -1);
    static const uint8_t lend[8] = {2, 0, 0, 0, 0x80, 0x01, 0, 0};
    wire_fd_msg_put(m, WIRE_FD_OP_LEND, 384);
    cr_assert_arr_eq(m, lend, sizeof(lend));
    cr_assert_eq(wire_fd_msg_op(m), WIRE_FD_OP_LEND);
    cr_assert_eq(wire_fd_msg_arg(m), 384);
}

/* Whether a and b name the same open file. */
static bool same_file(int a, int b)
{
    struct stat sa, sb;
    return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

Test(scm, passes_a_descriptor)
{
    int sv[2], p[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(pipe(p), 0);
    cr_assert_eq(scm_send(sv[0], "ab", 2, p[0], 0), 2);
    cr_assert_eq(scm_send(sv[0], "c", 1, -1, 0), 1);
    char buf[4];
    int fds[2];
    size_t n = 9;
    bool trunc = true;
    cr_assert_eq(scm_recv(sv[1], buf, 2, fds, 2, &n, &trunc, 0), 2);
    cr_assert_eq(n, 1);
    cr_assert_not(trunc);
    cr_assert(same_file(fds[0], p[0]), "the descriptor that came is ours");
    cr_assert_eq(fcntl(fds[0], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
    close(fds[0]);
    cr_assert_eq(scm_recv(sv[1], buf, sizeof(buf), fds, 2, &n, &trunc, 0), 1);
    cr_assert_eq(n, 0);
    cr_assert_eq(buf[0], 'c');
    close(sv[0]);
    cr_assert_eq(scm_recv(sv[1], buf, sizeof(buf), fds, 2, &n, &trunc, 0), 0,
                 "EOF");
    close(sv[1]);
    close(p[0]);
    close(p[1]);
}

Test(scm, no_room_is_truncation)
{
    int sv[2], p[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(pipe(p), 0);
    cr_assert_eq(scm_send(sv[0], "x", 1, p[1], 0), 1);
    char c;
    int fd = -1;
    size_t n = 9;
    bool trunc = false;
    cr_assert_eq(scm_recv(sv[1], &c, 1, &fd, 0, &n, &trunc, 0), 1);
    cr_assert_eq(n, 0);
    cr_assert(trunc, "a descriptor with no room for it is reported");
    close(sv[0]);
    close(sv[1]);
    close(p[0]);
    close(p[1]);
}
