/* Frame I/O, fd passing and SHA-256: the pure helpers bulkheadd relies on. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "sha256.h"

Test(frame, header_round_trips_big_endian)
{
    uint8_t h[4];
    bh_frame_header_encode(h, 0x01020304);
    cr_assert_eq(h[0], 1);
    cr_assert_eq(h[3], 4);
    cr_assert_eq(bh_frame_header_decode(h), 0x01020304u);
}

Test(frame, write_then_read_small_and_large)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct bh_error err = {0};
    cr_assert_eq(bh_frame_write(sv[0], "hello", 5, &err), 0);
    void *buf;
    size_t len;
    cr_assert_eq(bh_frame_read(sv[1], 100, -1, &buf, &len, &err), 1);
    cr_assert_eq(len, 5);
    cr_assert_str_eq(buf, "hello");
    free(buf);
    /* larger than the socket buffer: needs a writer thread-free path, so fork */
    size_t big = 300 * 1024;
    char *data = malloc(big);
    memset(data, 'x', big);
    pid_t pid = fork();
    if (pid == 0) {
        _exit(bh_frame_write(sv[0], data, big, NULL) == 0 ? 0 : 1);
    }
    cr_assert_eq(bh_frame_read(sv[1], big, -1, &buf, &len, &err), 1, "%s", err.msg);
    cr_assert_eq(len, big);
    cr_assert_eq(memcmp(buf, data, big), 0);
    free(buf);
    free(data);
    close(sv[0]);
    cr_assert_eq(bh_frame_read(sv[1], 100, -1, &buf, &len, &err), 0);
    close(sv[1]);
}

Test(frame, oversized_is_refused_before_reading)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct bh_error err = {0};
    uint8_t h[4];
    bh_frame_header_encode(h, 0xffffffff);
    cr_assert_eq(write(sv[0], h, 4), 4);
    void *buf;
    size_t len;
    cr_assert_eq(bh_frame_read(sv[1], 1024, -1, &buf, &len, &err), -1);
    cr_assert_eq(err.code, EMSGSIZE);
    cr_assert_null(buf);
    close(sv[0]);
    close(sv[1]);
}

Test(frame, cut_short_and_deadline)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct bh_error err = {0};
    void *buf;
    size_t len;
    uint8_t h[6];
    bh_frame_header_encode(h, 10);
    h[4] = 'a';
    h[5] = 'b';
    cr_assert_eq(write(sv[0], h, 6), 6);
    cr_assert_eq(bh_frame_read(sv[1], 1024, bh_now_ms() + 50, &buf, &len, &err), -1);
    cr_assert_eq(err.code, ETIMEDOUT);
    close(sv[0]);
    close(sv[1]);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    cr_assert_eq(write(sv[0], h, 2), 2);
    close(sv[0]);
    cr_assert_eq(bh_frame_read(sv[1], 1024, -1, &buf, &len, &err), -1);
    cr_assert_eq(err.code, EPROTO);
    close(sv[1]);
}

Test(frame, fds_travel_and_arrive_cloexec)
{
    int sv[2], p[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    struct bh_error err = {0};
    cr_assert_eq(bh_send_fds(sv[0], "x", 1, p, 2, &err), 0);
    char c;
    int fds[1];
    size_t n;
    /* room for one: the second is closed, not leaked */
    cr_assert_eq(bh_recv_fds(sv[1], &c, 1, fds, 1, &n, &err), 1);
    cr_assert_eq(n, 1);
    cr_assert_eq(c, 'x');
    cr_assert(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
    cr_assert_eq(write(p[1], "z", 1), 1);
    cr_assert_eq(read(fds[0], &c, 1), 1);
    cr_assert_eq(c, 'z');
    close(fds[0]);
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
}

Test(sha256, known_vectors)
{
    char hex[BH_SHA256_HEX];
    bh_sha256_hex("", 0, hex);
    cr_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    bh_sha256_hex("abc", 3, hex);
    cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    bh_sha256_hex(two, strlen(two), hex);
    cr_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* incremental, across block boundaries */
    char *m = malloc(1000000);
    memset(m, 'a', 1000000);
    struct bh_sha256 s;
    uint8_t d[32];
    bh_sha256_init(&s);
    for (size_t off = 0; off < 1000000; off += 777)
        bh_sha256_update(&s, m + off, off + 777 > 1000000 ? 1000000 - off : 777);
    bh_sha256_final(&s, d);
    bh_hex(d, 32, hex);
    cr_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(m);
}

Test(sha256, hex_digest_check_takes_only_what_bh_sha256_hex_writes)
{
    char d[BH_SHA256_HEX];
    bh_sha256_hex("abc", 3, d);
    cr_assert(bh_sha256_hex_valid(d));
    cr_assert_not(bh_sha256_hex_valid(NULL));
    cr_assert_not(bh_sha256_hex_valid(""));
    char bad[BH_SHA256_HEX];
    memcpy(bad, d, sizeof(bad));
    bad[10] = 'A'; /* upper case is not what we write */
    cr_assert_not(bh_sha256_hex_valid(bad));
    bad[10] = '/';
    cr_assert_not(bh_sha256_hex_valid(bad));
    bad[BH_SHA256_HEX - 2] = '\0'; /* one digit short */
    memcpy(bad, d, BH_SHA256_HEX - 2);
    cr_assert_not(bh_sha256_hex_valid(bad));
}
