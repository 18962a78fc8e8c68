/* Tests of the seccomp policy language and compiler (sentry/policy.c) and
 * of the shipped policies: grammar and errors, semantics checked on the
 * compiled BPF with a small interpreter, real loading in forked children,
 * the notification path, and a bounded seeded fuzz of the parser. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <seccomp.h>

#include "cleanup.h"
#include "broker-internal.h"
#include "policy.h"

#ifndef SECCOMP_RET_USER_NOTIF
#define SECCOMP_RET_USER_NOTIF 0x7fc00000U
#endif
#define RET_ERRNO(e) (SECCOMP_RET_ERRNO | (e))

/* ---- helpers ------------------------------------------------------------ */

static const char *policy_dir(void)
{
    static char dir[4096];
    /* The source tree when run from it (make unit), else the build's copy. */
    if (dir[0] == '\0') {
        const char *b = getenv("BULKHEAD_BUILD");
        snprintf(dir, sizeof(dir), "seccomp-policies");
        if (access("seccomp-policies/kernel.policy", R_OK) != 0 && b != NULL)
            snprintf(dir, sizeof(dir), "%s/seccomp-policies", b);
    }
    return dir;
}

static struct bh_policy *load_shipped(const char *name)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", policy_dir(), name);
    struct bh_error err = {0};
    struct bh_policy *p = NULL;
    if (bh_policy_load(path, &p, &err) < 0)
        cr_assert_fail("load %s: %s", path, err.msg);
    return p;
}

static void compile_shipped(const char *name, struct sock_fprog *prog)
{
    struct bh_policy *p = load_shipped(name);
    struct bh_error err = {0};
    if (bh_policy_compile(p, prog, &err) < 0)
        cr_assert_fail("compile %s: %s", name, err.msg);
    bh_policy_free(p);
}

static int parse(const char *text, const char *dir, struct bh_policy **out, struct bh_error *err)
{
    return bh_policy_parse(text, "t.policy", dir, out, err);
}

static void expect_ok(const char *text)
{
    struct bh_error err = {0};
    struct bh_policy *p = NULL;
    cr_assert_eq(parse(text, NULL, &p, &err), 0, "refused: %s\n%s", err.msg, text);
    struct sock_fprog prog;
    cr_assert_eq(bh_policy_compile(p, &prog, &err), 0, "compile: %s", err.msg);
    bh_policy_prog_free(&prog);
    bh_policy_free(p);
}

static void expect_error(const char *text, const char *needle)
{
    struct bh_error err = {0};
    struct bh_policy *p = NULL;
    int r = parse(text, NULL, &p, &err);
    cr_assert_eq(r, -1, "accepted:\n%s", text);
    cr_assert_null(p);
    cr_assert(strstr(err.msg, needle) != NULL, "error `%s` lacks `%s`", err.msg, needle);
}

/* A classic-BPF interpreter for what libseccomp emits, so semantics are
 * checked without loading anything. */
static uint32_t run_bpf(const struct sock_fprog *prog, const struct seccomp_data *d)
{
    uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};
    for (unsigned pc = 0; pc < prog->len; pc++) {
        const struct sock_filter *f = &prog->filter[pc];
        switch (f->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            cr_assert(f->k + 4 <= sizeof(*d) && f->k % 4 == 0);
            memcpy(&a, (const char *)d + f->k, 4);
            break;
        case BPF_LD | BPF_MEM:
            a = mem[f->k];
            break;
        case BPF_ST:
            mem[f->k] = a;
            break;
        case BPF_LDX | BPF_MEM:
            x = mem[f->k];
            break;
        case BPF_ALU | BPF_AND | BPF_K:
            a &= f->k;
            break;
        case BPF_ALU | BPF_OR | BPF_K:
            a |= f->k;
            break;
        case BPF_MISC | BPF_TAX:
            x = a;
            break;
        case BPF_MISC | BPF_TXA:
            a = x;
            break;
        case BPF_JMP | BPF_JA:
            pc += f->k;
            break;
        case BPF_JMP | BPF_JEQ | BPF_K:
            pc += a == f->k ? f->jt : f->jf;
            break;
        case BPF_JMP | BPF_JGT | BPF_K:
            pc += a > f->k ? f->jt : f->jf;
            break;
        case BPF_JMP | BPF_JGE | BPF_K:
            pc += a >= f->k ? f->jt : f->jf;
            break;
        case BPF_JMP | BPF_JSET | BPF_K:
            pc += (a & f->k) ? f->jt : f->jf;
            break;
        case BPF_RET | BPF_K:
            return f->k;
        case BPF_RET | BPF_A:
            return a;
        default:
            cr_assert_fail("BPF opcode %#x not interpreted", f->code);
        }
    }
    cr_assert_fail("BPF program fell off its end");
    return 0;
}

static uint32_t eval(const struct sock_fprog *prog, int nr, uint64_t a0, uint64_t a1, uint64_t a2,
                     uint64_t a3)
{
    struct seccomp_data d = {.nr = nr, .arch = AUDIT_ARCH_X86_64, .args = {a0, a1, a2, a3}};
    return run_bpf(prog, &d);
}

static void compile_text(const char *text, struct sock_fprog *prog)
{
    struct bh_error err = {0};
    struct bh_policy *p = NULL;
    cr_assert_eq(parse(text, NULL, &p, &err), 0, "refused: %s", err.msg);
    cr_assert_eq(bh_policy_compile(p, prog, &err), 0, "compile: %s", err.msg);
    bh_policy_free(p);
}

/* ---- grammar ------------------------------------------------------------ */

Test(policy, every_action_parses_and_compiles)
{
    expect_ok("@default errno EPERM\n"
              "read allow\n"
              "openat notify # brokered\n"
              "keyctl errno EACCES\n"
              "bpf errno 38\n"
              "ptrace kill\n"
              "kcmp trap\n"
              "getpid log\n");
    expect_ok("@default kill\nread allow\n");
    expect_ok("@default trap\nread allow\n");
}

Test(policy, actions_reach_the_filter)
{
    struct sock_fprog prog;
    compile_text("@default errno EPERM\n"
                 "read allow\nopenat notify\nkeyctl errno EACCES\nptrace kill\nkcmp trap\n"
                 "getpid log\n",
                 &prog);
    cr_assert_eq(eval(&prog, SYS_read, 0, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, SYS_openat, 0, 0, 0, 0), SECCOMP_RET_USER_NOTIF);
    cr_assert_eq(eval(&prog, SYS_keyctl, 0, 0, 0, 0), RET_ERRNO(EACCES));
    cr_assert_eq(eval(&prog, SYS_ptrace, 0, 0, 0, 0), SECCOMP_RET_KILL_PROCESS);
    cr_assert_eq(eval(&prog, SYS_kcmp, 0, 0, 0, 0), SECCOMP_RET_TRAP);
    cr_assert_eq(eval(&prog, SYS_getpid, 0, 0, 0, 0), SECCOMP_RET_LOG);
    cr_assert_eq(eval(&prog, SYS_write, 0, 0, 0, 0), RET_ERRNO(EPERM));
    bh_policy_prog_free(&prog);
}

Test(policy, conditions_or_and_masks)
{
    struct sock_fprog prog;
    compile_text("@default errno EPERM\n"
                 "mmap allow if prot & PROT_EXEC == 0 || prot & PROT_WRITE == 0\n"
                 "socket allow if domain == AF_INET && type & SOCK_TYPE_MASK == SOCK_STREAM\n"
                 "clone allow if flags & CLONE_NEWUSER|CLONE_NEWNET == 0\n"
                 "lseek allow if arg2 <= 2 && arg2 < 7\n",
                 &prog);
    int rwx = PROT_READ | PROT_WRITE | PROT_EXEC;
    cr_assert_eq(eval(&prog, SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, SYS_mmap, 0, 4096, PROT_READ | PROT_EXEC, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, SYS_mmap, 0, 4096, rwx, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&prog, SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0, 0),
                 SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, SYS_socket, AF_INET, SOCK_RAW, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&prog, SYS_socket, AF_INET6, SOCK_STREAM, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&prog, SYS_clone, CLONE_VM | CLONE_THREAD, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, SYS_clone, CLONE_NEWUSER, 0, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&prog, SYS_lseek, 3, 0, 2, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, SYS_lseek, 3, 0, 3, 0), RET_ERRNO(EPERM));
    bh_policy_prog_free(&prog);
}

Test(policy, first_line_decides_and_exceptions_work)
{
    struct sock_fprog prog;
    compile_text("@default errno ENOSYS\n"
                 "kill errno EPERM if pid == 1\n"
                 "kill allow\n"
                 "ioctl errno EPERM if request == TIOCSTI\n"
                 "ioctl allow if request == TCGETS || request == TIOCSTI\n"
                 "ioctl errno ENOTTY\n",
                 &prog);
    cr_assert_eq(eval(&prog, SYS_kill, 1, 0, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&prog, SYS_kill, 2, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, SYS_kill, (uint64_t)-1, 0, 0, 0), SECCOMP_RET_ALLOW);
    /* The kernel reads pid_t: upper bits must not hide pid 1. */
    cr_assert_eq(eval(&prog, SYS_kill, 0x100000001ULL, 0, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&prog, SYS_ioctl, 0, TCGETS, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, SYS_ioctl, 0, TIOCSTI, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&prog, SYS_ioctl, 0, (1ULL << 32) | TIOCSTI, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&prog, SYS_ioctl, 0, (1ULL << 32) | TCGETS, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, SYS_ioctl, 0, FIONREAD, 0, 0), RET_ERRNO(ENOTTY));
    cr_assert_eq(eval(&prog, SYS_getpid, 0, 0, 0, 0), RET_ERRNO(ENOSYS));
    bh_policy_prog_free(&prog);
}

Test(policy, includes_read_in_place)
{
    char dir[] = "/tmp/bh-policy-test-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/deny.policy", dir);
    FILE *f = fopen(path, "w");
    fputs("keyctl errno EACCES # keys\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/top.policy", dir);
    f = fopen(path, "w");
    fputs("@default errno EPERM\n@include deny.policy\nread allow\n", f);
    fclose(f);
    struct bh_error err = {0};
    struct bh_policy *p = NULL;
    int r = bh_policy_load(path, &p, &err);
    struct sock_fprog prog = {0};
    if (r == 0)
        r = bh_policy_compile(p, &prog, &err);
    /* a later allow of an included refusal is an error naming both lines */
    f = fopen(path, "w");
    fputs("@default errno EPERM\n@include deny.policy\nkeyctl allow\n", f);
    fclose(f);
    struct bh_error err2 = {0};
    struct bh_policy *p2 = NULL;
    int r2 = bh_policy_load(path, &p2, &err2);
    unlink(path);
    snprintf(path, sizeof(path), "%s/deny.policy", dir);
    unlink(path);
    rmdir(dir);
    cr_assert_eq(r, 0, "%s", err.msg);
    cr_assert_eq(eval(&prog, SYS_keyctl, 0, 0, 0, 0), RET_ERRNO(EACCES));
    cr_assert_eq(eval(&prog, SYS_read, 0, 0, 0, 0), SECCOMP_RET_ALLOW);
    bh_policy_prog_free(&prog);
    bh_policy_free(p);
    cr_assert_eq(r2, -1);
    cr_assert(strstr(err2.msg, "top.policy:3") && strstr(err2.msg, "deny.policy:1"), "%s",
              err2.msg);
}

Test(policy, include_cycle_and_bad_names_are_errors)
{
    char dir[] = "/tmp/bh-policy-test-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char a[256], b[256];
    snprintf(a, sizeof(a), "%s/a.policy", dir);
    snprintf(b, sizeof(b), "%s/b.policy", dir);
    FILE *f = fopen(a, "w");
    fputs("@default errno EPERM\n@include b.policy\n", f);
    fclose(f);
    f = fopen(b, "w");
    fputs("read allow\n@include a.policy\n", f);
    fclose(f);
    struct bh_error err = {0};
    struct bh_policy *p = NULL;
    int r = bh_policy_load(a, &p, &err);
    struct bh_error err2 = {0};
    int r2 = bh_policy_parse("@default errno EPERM\n@include ../etc/passwd\n", "t.policy", dir, &p,
                             &err2);
    struct bh_error err3 = {0};
    int r3 = bh_policy_parse("@default errno EPERM\n@include missing.policy\n", "t.policy", dir, &p,
                             &err3);
    unlink(a);
    unlink(b);
    rmdir(dir);
    cr_assert_eq(r, -1);
    cr_assert(strstr(err.msg, "b.policy:2") && strstr(err.msg, "cycle"), "%s", err.msg);
    cr_assert_eq(r2, -1);
    cr_assert(strstr(err2.msg, "t.policy:2"), "%s", err2.msg);
    cr_assert_eq(r3, -1);
    cr_assert(strstr(err3.msg, "t.policy:2") && strstr(err3.msg, "missing.policy"), "%s", err3.msg);
}

Test(policy, include_of_a_fifo_does_not_hang, .timeout = 10)
{
    char dir[] = "/tmp/bh-policy-test-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/fifo.policy", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    struct bh_error err = {0};
    struct bh_policy *p = NULL;
    int r =
        bh_policy_parse("@default errno EPERM\n@include fifo.policy\n", "t.policy", dir, &p, &err);
    unlink(path);
    rmdir(dir);
    cr_assert_eq(r, -1);
    cr_assert(strstr(err.msg, "t.policy:2") && strstr(err.msg, "not a regular file"), "%s",
              err.msg);
}

Test(policy, errors_name_file_and_line)
{
    expect_error("@default errno EPERM\nread allow\nwrite permit\n", "t.policy:3: unknown action");
    expect_error("@default errno EPERM\n\n# c\nfrobnicate allow\n",
                 "t.policy:4: unknown syscall `frobnicate`");
    expect_error("@default errno EPERM\nclone allow if flags & CLONE_NEWFOO == 0\n",
                 "t.policy:2: unknown constant `CLONE_NEWFOO`");
    expect_error("@default errno EPERM\nkill allow if victim == 1\n",
                 "t.policy:2: `kill` has no argument named `victim`");
    expect_error("@default errno EPERM\nread errno EWHATEVER\n", "unknown errno name");
    expect_error("@default errno EPERM\nread errno 0\n", "out of range");
    expect_error("read allow\n", "no `@default`");
    expect_error("@default errno EPERM\n@default errno ENOSYS\n", "t.policy:2: a second");
    expect_error("@default allow\n", "must refuse");
    expect_error("@default errno EPERM\n@frob x\n", "unknown directive");
    expect_error("@default errno EPERM\nread allow if\n", "t.policy:2");
    expect_error("@default errno EPERM\nread allow if arg0 ==\n", "missing value");
    expect_error("@default errno EPERM\nread allow if arg0 == 1 &&\n", "t.policy:2");
    expect_error("@default errno EPERM\nread allow when arg0 == 1\n", "expected `if`");
    expect_error("@default errno EPERM\nkill allow if pid > 1\n", "32 bits");
    expect_error("@default errno EPERM\nmmap allow if prot & PROT_READ == PROT_WRITE\n",
                 "outside the mask");
    expect_error("@default errno EPERM\nread allow if arg0 > 1 && arg0 != 7\n",
                 "libseccomp cannot express");
    expect_error("@default errno EPERM\nread allow if arg0 == 1 && arg0 == 2\n", "never be true");
    expect_error("@default errno EPERM\nread allow\nread errno EACCES if arg0 == 1\n",
                 "t.policy:3: this line is never reached: t.policy:2");
    expect_error("@default errno EPERM\nread errno EACCES if arg0 == 1\n"
                 "read allow if arg0 == 1\n",
                 "t.policy:3: this line never takes effect");
    expect_error("@default errno EPERM\n@include x.policy\n", "needs a policy directory");
    expect_error("@default errno EPERM\nread allow if arg0 == 0x1ffffffffffffffffff\n",
                 "bad number");
    expect_error("@default errno EPERM\nsocket allow if domain == 0x100000000\n", "32-bit");
    expect_error("@default errno EPERM\nread allow $\n", "unexpected character `$`");
}

Test(policy, optional_unknown_syscalls_and_new_syscalls)
{
    expect_ok("@default errno EPERM\nno_such_call? allow\nsocketcall? allow\n");
    struct sock_fprog prog;
    compile_text("@default errno EPERM\n"
                 "landlock_create_ruleset allow\nfutex_waitv allow\nmseal errno ENOSYS\n"
                 "fchmodat2 notify\nlistmount allow\nsetxattrat allow\n",
                 &prog);
    cr_assert_eq(eval(&prog, 444, 0, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, 449, 0, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, 462, 0, 0, 0, 0), RET_ERRNO(ENOSYS));
    cr_assert_eq(eval(&prog, 452, 0, 0, 0, 0), SECCOMP_RET_USER_NOTIF);
    cr_assert_eq(eval(&prog, 458, 0, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, 463, 0, 0, 0, 0), SECCOMP_RET_ALLOW);
    bh_policy_prog_free(&prog);
}

/* fuzz_policy found libseccomp 2.5.4 leaking when handed a rule that a wider
 * one of the same action covers; the compiler now never hands it one. */
Test(policy, covered_rules_are_not_handed_to_libseccomp)
{
    struct sock_fprog prog;
    compile_text("@default errno ENOSYS\n"
                 "socket allow if domain == AF_INET6 && type & SOCK_TYPE_MASK == SOCK_STREAM\n"
                 "socket errno EPERM if type & SOCK_TYPE_MASK == SOCK_RAW\n",
                 &prog);
    cr_assert_eq(eval(&prog, SYS_socket, AF_INET6, SOCK_STREAM, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, SYS_socket, AF_INET6, SOCK_RAW, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&prog, SYS_socket, AF_INET, SOCK_RAW, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&prog, SYS_socket, AF_INET, SOCK_STREAM, 0, 0), RET_ERRNO(ENOSYS));
    bh_policy_prog_free(&prog);
    struct bh_error err = {0};
    struct bh_policy *p = NULL;
    cr_assert_eq(parse("@default errno EPERM\nread allow if arg0 == 1 || arg0 == 1 || arg0 & 1 "
                       "== 1\n",
                       NULL, &p, &err),
                 0, "%s", err.msg);
    cr_assert_eq(bh_policy_rule_count(p), 1);
    bh_policy_free(p);
}

/* Exceptions multiply when negated: a crafted policy must end in a clear
 * error, quickly, not in minutes of expansion. */
Test(policy, expansion_is_bounded, .timeout = 20)
{
    size_t cap = 300 * 1100, n = 0;
    char *text = malloc(cap);
    n += (size_t)snprintf(text + n, cap - n, "@default errno EPERM\n");
    for (int k = 0; k < 255; k++) {
        n += (size_t)snprintf(text + n, cap - n, "ioctl %s if request == %d",
                              k % 2 ? "allow" : "errno EACCES", k * 40);
        for (int i = 1; i < 30; i++)
            n += (size_t)snprintf(text + n, cap - n, " || request == %d", k * 40 + i);
        n += (size_t)snprintf(text + n, cap - n, "\n");
    }
    expect_error(text, "too complex");
    free(text);
}

Test(policy, repeated_lines_with_the_deciding_action_are_redundant)
{
    expect_ok("@default errno EPERM\nread allow\nread allow\nread allow if arg0 == 1\n");
}

Test(policy, over_long_lines_and_binary_garbage_are_refused)
{
    size_t n = 5000;
    char *text = malloc(n + 64);
    strcpy(text, "@default errno EPERM\n# ");
    memset(text + strlen(text), 'x', n);
    text[n] = '\0';
    expect_error(text, "t.policy:2: line is longer than");
    free(text);
    expect_error("@default errno EPERM\n\x7f\x45\x4c\x46\x02\x01\x01\n", "t.policy:2");
    expect_error("\xff\xfe@default errno EPERM\n", "t.policy:1: unexpected byte 0xff");

    char dir[] = "/tmp/bh-policy-test-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/bin.policy", dir);
    FILE *f = fopen(path, "w");
    fwrite("@default errno EPERM\n\0\0\1", 1, 24, f);
    fclose(f);
    struct bh_error err = {0};
    struct bh_policy *p = NULL;
    int r = bh_policy_load(path, &p, &err);
    unlink(path);
    rmdir(dir);
    cr_assert_eq(r, -1);
    cr_assert(strstr(err.msg, "NUL"), "%s", err.msg);
}

Test(policy, install_refuses_without_no_new_privs)
{
    struct sock_fprog prog;
    compile_text("@default errno EPERM\nread allow\n", &prog);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct bh_error err = {0};
        if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
            _exit(3); /* cannot test: already set */
        int r = bh_policy_install(&prog, false, &err);
        _exit(r == -1 && strstr(err.msg, "no_new_privs") != NULL ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    bh_policy_prog_free(&prog);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 3)
        cr_skip_test("no_new_privs already set in the test runner");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
}

/* ---- shipped policies --------------------------------------------------- */

Test(shipped_policies, each_compiles)
{
    const char *names[] = {"container.policy", "kernel.policy", "sentry.policy"};
    for (size_t i = 0; i < BH_ARRAY_SIZE(names); i++) {
        struct bh_policy *p = load_shipped(names[i]);
        struct sock_fprog prog;
        struct bh_error err = {0};
        cr_assert_eq(bh_policy_compile(p, &prog, &err), 0, "%s: %s", names[i], err.msg);
        cr_assert_lt(prog.len, 4096);
        /* The kernel tier brokers; the container tier's notifies io_setup
         * (counted by sentry/aio-cap.c); the sentry's never notifies. */
        cr_assert_eq(bh_policy_has_notify(p), strcmp(names[i], "sentry.policy") != 0);
        bh_policy_prog_free(&prog);
        bh_policy_free(p);
    }
}

Test(shipped_policies, other_architectures_are_killed)
{
    const char *names[] = {"container.policy", "kernel.policy", "sentry.policy"};
    for (size_t i = 0; i < BH_ARRAY_SIZE(names); i++) {
        struct sock_fprog prog;
        compile_shipped(names[i], &prog);
        struct seccomp_data i386 = {.nr = 20 /* getpid */, .arch = AUDIT_ARCH_I386};
        cr_assert_eq(run_bpf(&prog, &i386), SECCOMP_RET_KILL_PROCESS, "%s i386", names[i]);
        struct seccomp_data x32 = {.nr = 0x40000000 | SYS_getpid, .arch = AUDIT_ARCH_X86_64};
        cr_assert_eq(run_bpf(&prog, &x32), SECCOMP_RET_KILL_PROCESS, "%s x32", names[i]);
        bh_policy_prog_free(&prog);
    }
}

/* Filters stack: whatever a guest policy allows or notifies, the sentry's
 * filter (under every guest's) must allow, else the guest call fails. */
Test(shipped_policies, sentry_allows_what_guests_may_do)
{
    struct sock_fprog sentry, kernel, container;
    compile_shipped("sentry.policy", &sentry);
    compile_shipped("kernel.policy", &kernel);
    compile_shipped("container.policy", &container);
    uint64_t samples[][4] = {
        {0, 0, 0, 0},
        {3, 0x5401, 0, 0},
        {AF_UNIX, SOCK_STREAM, 0, 0},
        {AF_INET, SOCK_DGRAM, 0, 0},
        {CLONE_VM | CLONE_THREAD | CLONE_SIGHAND, 0, 0, 0},
        {0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS},
        {PR_SET_NAME, 0, 0, 0},
        {2, 15, 0, 0},
    };
    for (int nr = 0; nr < 470; nr++)
        for (size_t s = 0; s < BH_ARRAY_SIZE(samples); s++) {
            uint64_t *a = samples[s];
            uint32_t k = eval(&kernel, nr, a[0], a[1], a[2], a[3]);
            uint32_t c = eval(&container, nr, a[0], a[1], a[2], a[3]);
            uint32_t se = eval(&sentry, nr, a[0], a[1], a[2], a[3]);
            bool guest_may =
                k == SECCOMP_RET_ALLOW || k == SECCOMP_RET_USER_NOTIF || c == SECCOMP_RET_ALLOW;
            cr_expect(!guest_may || se == SECCOMP_RET_ALLOW,
                      "syscall %d (args %#lx %#lx): guests may, sentry.policy gives %#x", nr,
                      (unsigned long)a[0], (unsigned long)a[1], se);
            cr_expect(se != SECCOMP_RET_USER_NOTIF, "sentry.policy notifies syscall %d", nr);
        }
    bh_policy_prog_free(&sentry);
    bh_policy_prog_free(&kernel);
    bh_policy_prog_free(&container);
}

/* The brokered list is a contract with sentry/broker.c (and is written out in
 * seccomp-policies/README.md): checked against the broker's own handler
 * table, so the policy and the code cannot drift apart. Every syscall the
 * policy notifies has a handler (else the guest gets ENOSYS for a call the
 * policy means to allow); every handler is notified, except the ones the
 * policy deliberately runs directly (README: "Decided with the broker"). */
Test(shipped_policies, kernel_notifies_exactly_what_the_broker_handles)
{
    static const char *const direct_with_handler[] = {
        "bind", /* the kernel keeps a unix socket's name as the guest wrote it */
    };
    bool direct[512] = {false};
    for (size_t i = 0; i < BH_ARRAY_SIZE(direct_with_handler); i++) {
        int nr = seccomp_syscall_resolve_name(direct_with_handler[i]);
        cr_assert(nr >= 0 && nr < 512, "%s", direct_with_handler[i]);
        direct[nr] = true;
    }
    struct sock_fprog k;
    compile_shipped("kernel.policy", &k);
    int notified = 0;
    for (int nr = 0; nr < 512; nr++) {
        struct seccomp_data d = {.nr = nr,
                                 .arch = AUDIT_ARCH_X86_64,
                                 .args = {3, 0x7fff0000, 0x7fff1000, 0, 0x7fff2000, 16}};
        bool notifies = run_bpf(&k, &d) == SECCOMP_RET_USER_NOTIF;
        bool handled = bh_broker_handles(nr);
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
        notified += notifies;
        if (notifies)
            cr_expect(handled, "kernel.policy notifies %s (%d), which the broker does not handle",
                      name ? name : "?", nr);
        else if (handled && !direct[nr])
            cr_expect(false, "the broker handles %s (%d), which kernel.policy does not notify",
                      name ? name : "?", nr);
        else if (handled)
            cr_expect_eq(run_bpf(&k, &d), SECCOMP_RET_ALLOW, "%s: direct, as decided",
                         name ? name : "?");
        free(name);
    }
    cr_expect_gt(notified, 40, "the brokered list shrank to %d: the table lookup is broken",
                 notified);
    bh_policy_prog_free(&k);
}

/* The prose lists of the brokered syscalls (broker.c's opening comment,
 * seccomp-policies/README.md's table) are checked against the handler table
 * too, so that a syscall added to (or dropped from) the broker fails here
 * until every list says so. Read from the source tree: run from it (make
 * unit does); a missing file is a failure, not a skip. */
static char *read_source(const char *path)
{
    FILE *f = fopen(path, "re");
    cr_assert_not_null(f, "open %s: %s (run the unit tests from the source tree)", path,
                       strerror(errno));
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    cr_assert_lt(n, sizeof(buf) - 1, "%s is larger than the test's buffer", path);
    buf[n] = '\0';
    return strdup(buf);
}

/* The text from the line holding `from` up to the one holding `to`, with
 * every parenthesised remark (nested, across lines) removed: remarks name
 * syscalls that are not on the list ("inotify_init* ... are direct"). */
static char *section_without_remarks(const char *text, const char *from, const char *to,
                                     const char *file)
{
    const char *a = strstr(text, from);
    cr_assert_not_null(a, "%s: no `%s`: the brokered list moved; update this test", file, from);
    const char *b = strstr(a, to);
    cr_assert_not_null(b, "%s: no `%s` after `%s`", file, to, from);
    char *out = calloc(1, (size_t)(b - a) + 1);
    size_t o = 0;
    int depth = 0;
    for (const char *p = a; p < b; p++) {
        if (*p == '(')
            depth++;
        else if (*p == ')' && depth > 0)
            depth--;
        else if (depth == 0)
            out[o++] = *p;
    }
    cr_assert_eq(depth, 0, "%s: unbalanced parentheses in the brokered list", file);
    return out;
}

/* Compares the names a prose list gives with the handler table. */
static void expect_list_is_the_table(const char *file, bool listed[512])
{
    for (int nr = 0; nr < 512; nr++) {
        const char *name = bh_broker_syscall_name(nr);
        if (name != NULL)
            cr_expect(listed[nr], "%s does not list %s, which the broker handles", file, name);
        else if (listed[nr]) {
            char *n = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
            cr_expect(false, "%s lists %s, which the broker does not handle", file, n ? n : "?");
            free(n);
        }
    }
}

static void mark_listed(const char *file, const char *word, bool listed[512])
{
    int nr = seccomp_syscall_resolve_name(word);
    cr_expect(nr >= 0 && nr < 512, "%s lists `%s`, which is no syscall", file, word);
    if (nr >= 0 && nr < 512)
        listed[nr] = true;
}

Test(shipped_policies, broker_comment_lists_exactly_the_handler_table)
{
    cleanup_free char *src = read_source("sentry/broker.c");
    cleanup_free char *sec = section_without_remarks(src, "Syscalls the broker answers",
                                                     "Not answerable", "sentry/broker.c");
    bool listed[512] = {false};
    int words = 0;
    /* List lines are indented four spaces or more after " *"; the group
     * headings ("files, emulated with ...:") two or three. */
    char *save = NULL;
    for (char *line = strtok_r(sec, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, " *    ", 6) != 0)
            continue;
        char *save2 = NULL;
        for (char *w = strtok_r(line + 2, " \t", &save2); w; w = strtok_r(NULL, " \t", &save2)) {
            mark_listed("sentry/broker.c", w, listed);
            words++;
        }
    }
    cr_expect_gt(words, 40, "sentry/broker.c: only %d names found: the list's layout changed",
                 words);
    expect_list_is_the_table("sentry/broker.c", listed);
}

Test(shipped_policies, policy_readme_lists_exactly_the_handler_table)
{
    cleanup_free char *src = read_source("seccomp-policies/README.md");
    cleanup_free char *sec = section_without_remarks(
        src, "## The brokered list", "Decided with the broker", "seccomp-policies/README.md");
    bool listed[512] = {false};
    int words = 0;
    char *save = NULL;
    for (char *line = strtok_r(sec, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        /* Table rows "| group | `a` `b` |", past the header and its rule. */
        if (line[0] != '|' || strncmp(line, "|-", 2) == 0 || strstr(line, "| syscalls |"))
            continue;
        char *cell = strchr(line + 1, '|');
        cr_assert_not_null(cell, "seccomp-policies/README.md: row without a syscalls cell: %s",
                           line);
        for (char *p = strchr(cell, '`'); p; p = strchr(p, '`')) {
            char *e = strchr(p + 1, '`');
            cr_assert_not_null(e, "seccomp-policies/README.md: unclosed ` in %s", line);
            *e = '\0';
            mark_listed("seccomp-policies/README.md", p + 1, listed);
            words++;
            p = e + 1;
        }
    }
    cr_expect_gt(words, 40,
                 "seccomp-policies/README.md: only %d names found: the table's "
                 "layout changed",
                 words);
    expect_list_is_the_table("seccomp-policies/README.md", listed);
}

/* The table's groups are what the tests build their filters from (fs_calls
 * in test_broker.c): each group holds what its name says. */
Test(shipped_policies, broker_groups_are_consistent)
{
    static const struct {
        const char *name;
        enum bh_broker_group g;
    } samples[] = {{"openat", BH_BROKER_FILES},    {"statx", BH_BROKER_FILES},
                   {"connect", BH_BROKER_SOCKETS}, {"sendmsg", BH_BROKER_SOCKETS},
                   {"setresuid", BH_BROKER_IDS},   {"setgroups", BH_BROKER_IDS},
                   {"getcwd", BH_BROKER_NONE},     {"read", BH_BROKER_NONE}};
    for (size_t i = 0; i < BH_ARRAY_SIZE(samples); i++) {
        int nr = seccomp_syscall_resolve_name(samples[i].name);
        cr_expect_eq(bh_broker_group_of(nr), samples[i].g, "%s: group %d, expected %d",
                     samples[i].name, bh_broker_group_of(nr), samples[i].g);
        if (samples[i].g != BH_BROKER_NONE)
            cr_expect_str_eq(bh_broker_syscall_name(nr), samples[i].name);
        else
            cr_expect_null(bh_broker_syscall_name(nr));
    }
    cr_expect_eq(bh_broker_group_of(-1), BH_BROKER_NONE);
    cr_expect_eq(bh_broker_group_of(100000), BH_BROKER_NONE);
}

/* fstat() of a held fd (glibc: newfstatat(fd, "", buf, AT_EMPTY_PATH)) runs
 * directly; a path relative to the cwd, or any other flag, stays brokered
 * (kernel.policy says why). */
Test(shipped_policies, kernel_fstat_of_a_held_fd_is_direct)
{
    struct sock_fprog k;
    compile_shipped("kernel.policy", &k);
    const uint32_t allow = SECCOMP_RET_ALLOW, notify = SECCOMP_RET_USER_NOTIF;
    const uint64_t ptr = 0x7fff0000, buf = 0x7fff1000;
    static const struct {
        uint64_t dirfd, flags;
        bool direct;
    } cases[] = {
        {3, AT_EMPTY_PATH, true},
        {0, AT_EMPTY_PATH, true},
        {0x7fffffff, AT_EMPTY_PATH, true},
        {(uint64_t)(int64_t)AT_FDCWD, AT_EMPTY_PATH, false},
        {(uint32_t)AT_FDCWD, AT_EMPTY_PATH, false},
        {(uint64_t)-1, AT_EMPTY_PATH, false},
        {3, 0, false},
        {3, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, false},
        {3, AT_SYMLINK_NOFOLLOW, false},
        {3, AT_EMPTY_PATH | 0x100000000ULL, true}, /* the kernel reads an int */
    };
    for (size_t i = 0; i < BH_ARRAY_SIZE(cases); i++) {
        struct seccomp_data nf = {.nr = SYS_newfstatat,
                                  .arch = AUDIT_ARCH_X86_64,
                                  .args = {cases[i].dirfd, ptr, buf, cases[i].flags}};
        struct seccomp_data sx = {.nr = SYS_statx,
                                  .arch = AUDIT_ARCH_X86_64,
                                  .args = {cases[i].dirfd, ptr, cases[i].flags, 0x7ff, buf}};
        uint32_t want = cases[i].direct ? allow : notify;
        cr_expect_eq(run_bpf(&k, &nf), want, "newfstatat(%#lx, path, buf, %#lx): %#x, want %#x",
                     (unsigned long)cases[i].dirfd, (unsigned long)cases[i].flags, run_bpf(&k, &nf),
                     want);
        cr_expect_eq(run_bpf(&k, &sx), want, "statx(%#lx, path, %#lx, ...): %#x, want %#x",
                     (unsigned long)cases[i].dirfd, (unsigned long)cases[i].flags, run_bpf(&k, &sx),
                     want);
    }
    /* stat, lstat and the other path calls stay brokered. */
    struct seccomp_data st = {.nr = SYS_stat, .arch = AUDIT_ARCH_X86_64, .args = {ptr, buf}};
    cr_expect_eq(run_bpf(&k, &st), notify);
    bh_policy_prog_free(&k);
}

/* Issue 10, finding 7: sockets by family, type and protocol; socket options
 * by an allowlist of level and name. */
Test(shipped_policies, kernel_socket_surface_on_bpf)
{
    struct sock_fprog k;
    compile_shipped("kernel.policy", &k);
    const uint32_t allow = SECCOMP_RET_ALLOW;
    cr_expect_eq(eval(&k, SYS_socket, AF_INET, SOCK_STREAM, 0, 0), allow);
    cr_expect_eq(eval(&k, SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP, 0), allow);
    cr_expect_eq(eval(&k, SYS_socket, AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, IPPROTO_UDP, 0), allow);
    cr_expect_eq(eval(&k, SYS_socket, AF_UNIX, SOCK_SEQPACKET, 0, 0), allow);
    cr_expect_eq(eval(&k, SYS_socket, AF_INET, SOCK_STREAM, IPPROTO_MPTCP, 0),
                 RET_ERRNO(EPROTONOSUPPORT));
    cr_expect_eq(eval(&k, SYS_socket, AF_INET6, SOCK_DGRAM, IPPROTO_UDPLITE, 0),
                 RET_ERRNO(EPROTONOSUPPORT));
    cr_expect_eq(eval(&k, SYS_socket, AF_INET, SOCK_STREAM, IPPROTO_SCTP, 0),
                 RET_ERRNO(EPROTONOSUPPORT));
    cr_expect_eq(eval(&k, SYS_socket, AF_INET, SOCK_DGRAM, IPPROTO_ICMP, 0), RET_ERRNO(ENOSYS));
    cr_expect_eq(eval(&k, SYS_socket, AF_INET, SOCK_STREAM, IPPROTO_UDP, 0), RET_ERRNO(ENOSYS));
    cr_expect_eq(eval(&k, SYS_socket, AF_UNIX, SOCK_STREAM, 1, 0), RET_ERRNO(ENOSYS));
    /* The kernel reads the protocol as an int: high bits change nothing. */
    cr_expect_eq(eval(&k, SYS_socket, AF_INET, SOCK_STREAM, IPPROTO_MPTCP | 1ULL << 32, 0),
                 RET_ERRNO(EPROTONOSUPPORT));
    cr_expect_eq(eval(&k, SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, 0), allow);
    cr_expect_eq(eval(&k, SYS_socketpair, AF_UNIX, SOCK_STREAM, 1, 0), RET_ERRNO(ENOSYS));

    cr_expect_eq(eval(&k, SYS_setsockopt, 3, SOL_SOCKET, SO_REUSEADDR, 0), allow);
    cr_expect_eq(eval(&k, SYS_setsockopt, 3, IPPROTO_TCP, TCP_NODELAY, 0), allow);
    cr_expect_eq(eval(&k, SYS_setsockopt, 3, IPPROTO_IPV6, IPV6_V6ONLY, 0), allow);
    static const int refused[][2] = {
        {SOL_SOCKET, SO_ATTACH_FILTER},
        {SOL_SOCKET, SO_ATTACH_BPF},
        {SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF},
        {SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF},
        {SOL_SOCKET, SO_BINDTODEVICE},
        {SOL_SOCKET, SO_MARK},
        {IPPROTO_TCP, TCP_ULP},
        {IPPROTO_TCP, TCP_REPAIR},
        {IPPROTO_IP, IP_OPTIONS},
        {IPPROTO_IP, IP_HDRINCL},
        {IPPROTO_IP, IP_ADD_MEMBERSHIP},
        {IPPROTO_UDP, UDP_ENCAP},
        {SOL_PACKET, 1},
    };
    for (size_t i = 0; i < BH_ARRAY_SIZE(refused); i++)
        cr_expect_neq(
            eval(&k, SYS_setsockopt, 3, (uint64_t)refused[i][0], (uint64_t)refused[i][1], 0), allow,
            "setsockopt level %d option %d", refused[i][0], refused[i][1]);
    /* The kernel reads level and name as ints: the filter judges the same
     * low 32 bits, whatever the high ones say. */
    cr_expect_eq(eval(&k, SYS_setsockopt, 3, SOL_SOCKET, SO_REUSEADDR | 1ULL << 32, 0), allow);
    cr_expect_neq(eval(&k, SYS_setsockopt, 3, SOL_SOCKET | 1ULL << 32, SO_ATTACH_FILTER, 0), allow);
    cr_expect_neq(eval(&k, SYS_setsockopt, 3, SOL_SOCKET, SO_ATTACH_FILTER | 1ULL << 32, 0), allow);
    cr_expect_eq(eval(&k, SYS_getsockopt, 3, SOL_SOCKET, SO_ERROR, 0), allow);
    cr_expect_eq(eval(&k, SYS_getsockopt, 3, SOL_SOCKET, 77 /* SO_PEERPIDFD */, 0),
                 RET_ERRNO(EPERM));
    cr_expect_eq(eval(&k, SYS_getsockopt, 3, IPPROTO_TCP, TCP_ZEROCOPY_RECEIVE, 0),
                 RET_ERRNO(EPERM));
    bh_policy_prog_free(&k);
}

Test(shipped_policies, kernel_semantics_on_bpf)
{
    struct sock_fprog k;
    compile_shipped("kernel.policy", &k);
    cr_assert_eq(eval(&k, SYS_openat, 0, 0, 0, 0), SECCOMP_RET_USER_NOTIF);
    cr_assert_eq(eval(&k, SYS_read, 0, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&k, SYS_execve, 0, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&k, SYS_sendto, 3, 0, 0, 0), SECCOMP_RET_ALLOW);
    struct seccomp_data d = {
        .nr = SYS_sendto, .arch = AUDIT_ARCH_X86_64, .args = {3, 0, 0, 0, 0x7fff0000, 16}};
    cr_assert_eq(run_bpf(&k, &d), SECCOMP_RET_USER_NOTIF);
    cr_assert_eq(eval(&k, SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&k, SYS_clone, SIGCHLD, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&k, SYS_clone3, 0, 0, 0, 0), RET_ERRNO(ENOSYS));
    cr_assert_eq(eval(&k, SYS_tgkill, 1, 1, 9, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&k, SYS_tgkill, 7, 8, 9, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&k, SYS_pidfd_open, 1, 0, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&k, SYS_prlimit64, 1, 0, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&k, SYS_prlimit64, 1 | 1ULL << 32, 0, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&k, SYS_prlimit64, 7, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&k, SYS_prctl, PR_SET_MM, 0, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&k, SYS_prctl, PR_SET_NAME, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&k, SYS_socket, AF_PACKET, SOCK_RAW, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&k, SYS_socket, AF_INET, SOCK_RAW, 0, 0), RET_ERRNO(EPERM));
    cr_assert_eq(eval(&k, SYS_socket, AF_BLUETOOTH, SOCK_STREAM, 0, 0), RET_ERRNO(ENOSYS));
    cr_assert_eq(eval(&k, SYS_ioctl, 0, 0x5401 /* TCGETS */, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&k, SYS_getxattr, 0, 0, 0, 0), RET_ERRNO(ENOTSUP));
    bh_policy_prog_free(&k);
}

/* ---- loading in forked children ----------------------------------------- */

struct child_ctx {
    char msg[512];
    int pty; /* a pty master opened before the filter (opening is brokered in kernel.policy) */
};

static int open_pty(void)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
        return -1;
    return m;
}

/* Runs fn in a child with no_new_privs and the policy installed; fn returns
 * 0 or writes why not into ctx.msg. */
static void run_confined(const char *policy, bool listener, int (*fn)(struct child_ctx *))
{
    struct sock_fprog prog;
    compile_shipped(policy, &prog);
    int pfd[2];
    cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        struct child_ctx ctx = {.pty = open_pty()};
        struct bh_error err = {0};
        alarm(20);
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        int r = bh_policy_install(&prog, listener, &err);
        if (r < 0)
            snprintf(ctx.msg, sizeof(ctx.msg), "install: %.400s", err.msg);
        else
            r = fn(&ctx);
        if (r != 0 && write(pfd[1], ctx.msg, strlen(ctx.msg)) < 0)
            _exit(2);
        _exit(r == 0 ? 0 : 1);
    }
    close(pfd[1]);
    char msg[512] = {0};
    ssize_t n = read(pfd[0], msg, sizeof(msg) - 1);
    (void)n;
    close(pfd[0]);
    int st;
    waitpid(pid, &st, 0);
    bh_policy_prog_free(&prog);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child status %#x: %s", policy, st, msg);
}

#define EXPECT_ERRNO(call, e)                                                                      \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long r_ = (long)(call);                                                                    \
        if (r_ != -1 || errno != (e)) {                                                            \
            snprintf(ctx->msg, sizeof(ctx->msg), "%s: got %ld errno %d (%s), want errno %s",       \
                     #call, r_, errno, strerror(errno), #e);                                       \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

#define EXPECT_OK(call)                                                                            \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long r_ = (long)(call);                                                                    \
        if (r_ < 0) {                                                                              \
            snprintf(ctx->msg, sizeof(ctx->msg), "%s: failed: %s", #call, strerror(errno));        \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

/* Huge pages come from the host's one pool, which no memory cgroup
 * charges (host-state.policy, every tier): each way in answers as an empty
 * pool would, and the same calls without the flag still work. */
static int hugetlb_checks(struct child_ctx *ctx)
{
    EXPECT_ERRNO(mmap(NULL, 2 << 20, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0),
                 ENOMEM);
    EXPECT_ERRNO(syscall(SYS_memfd_create, "bh", 4 /* MFD_HUGETLB */), EINVAL);
    EXPECT_ERRNO(syscall(SYS_shmget, 0 /* IPC_PRIVATE */, 2 << 20, 04000 /* SHM_HUGETLB */ | 0600),
                 ENOMEM);
    void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_OK(m == MAP_FAILED ? -1 : 0);
    munmap(m, 4096);
    cleanup_close int fd = (int)syscall(SYS_memfd_create, "bh", 1 /* MFD_CLOEXEC */);
    EXPECT_OK(fd);
    return 0;
}

static int container_checks(struct child_ctx *ctx)
{
    EXPECT_ERRNO(syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_add_key, "user", "x", "y", 1, -3), EPERM);
    EXPECT_ERRNO(syscall(SYS_bpf, 0, NULL, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
    EXPECT_ERRNO(unshare(CLONE_NEWUSER), EPERM);
    EXPECT_ERRNO(unshare(CLONE_NEWNS), EPERM);
    EXPECT_ERRNO(mount("none", "/tmp", "tmpfs", 0, NULL), EPERM);
    EXPECT_ERRNO(syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_io_uring_setup, 1, NULL), EPERM);
    EXPECT_ERRNO(syscall(SYS_userfaultfd, 0), EPERM);
    /* splits the host's direct map: as a kernel without secretmem */
    EXPECT_ERRNO(syscall(SYS_memfd_secret, 0), ENOSYS);
    EXPECT_ERRNO(syscall(SYS_setns, 0, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_clone3, NULL, 0), ENOSYS);
    /* A number no name resolves to: ENOSYS (@beyond), as runc answers. */
    EXPECT_ERRNO(syscall(1000, 0, 0, 0), ENOSYS);
    EXPECT_ERRNO(syscall(SYS_personality, 0x0400000 /* READ_IMPLIES_EXEC */), EPERM);
    EXPECT_ERRNO(socket(AF_PACKET, SOCK_RAW, 0), EPERM);
    EXPECT_ERRNO(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), EPERM);
    EXPECT_ERRNO(syscall(SYS_settimeofday, NULL, NULL), EPERM);
    /* pid 1 is the sentry in a sandbox; here (as root, where the kernel
     * would allow each) only the filter refuses. */
    struct rlimit lim;
    EXPECT_ERRNO(syscall(SYS_prlimit64, 1, RLIMIT_NOFILE, NULL, &lim), EPERM);
    EXPECT_ERRNO(syscall(SYS_pidfd_open, 1, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_setpriority, PRIO_PROCESS, 1, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 1, 0), EPERM);
    EXPECT_OK(syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &lim));
    EXPECT_OK(syscall(SYS_personality, 0xffffffffUL));
    EXPECT_OK(getpid());
    if (hugetlb_checks(ctx) < 0)
        return -1;
    cleanup_close int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_OK(s);
    /* socket(AF_NETLINK) goes to the sentry, which makes route sockets and
     * refuses every other family (sentry/socket-cap.c): no one answers this
     * child's listener, so tests/e2e/test_container_netlink.c checks it. */
    /* So do ICMP datagram ("ping") sockets: tests/e2e/test_container_ping.c. */
    /* TIOCSTI refused (also with bits above 32 the kernel ignores), TCGETS allowed. */
    int pty = ctx->pty;
    EXPECT_OK(pty);
    char c = 'x';
    EXPECT_ERRNO(ioctl(pty, TIOCSTI, &c), EPERM);
    EXPECT_ERRNO(syscall(SYS_ioctl, pty, (1UL << 32) | TIOCSTI, &c), EPERM);
    struct termios t;
    EXPECT_OK(ioctl(pty, TCGETS, &t));
    pid_t p = fork();
    EXPECT_OK(p);
    if (p == 0)
        _exit(7);
    int st;
    EXPECT_OK(waitpid(p, &st, 0));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 7) {
        snprintf(ctx->msg, sizeof(ctx->msg), "fork child status %#x", st);
        return -1;
    }
    return 0;
}

Test(shipped_policies, container_refuses_and_allows)
{
    run_confined("container.policy", true, container_checks);
}

static int kernel_checks(struct child_ctx *ctx)
{
    EXPECT_ERRNO(syscall(SYS_keyctl, 0, -3, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_bpf, 0, NULL, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0), EPERM);
    EXPECT_ERRNO(unshare(CLONE_NEWUSER), EPERM);
    EXPECT_ERRNO(mount("none", "/tmp", "tmpfs", 0, NULL), EPERM);
    EXPECT_ERRNO(syscall(SYS_ptrace, 0, 0, 0, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_process_vm_readv, 1, NULL, 0, NULL, 0, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_io_uring_setup, 1, NULL), EPERM);
    EXPECT_ERRNO(syscall(SYS_personality, 0xffffffffUL), EPERM);
    EXPECT_ERRNO(syscall(SYS_clone3, NULL, 0), ENOSYS);
    EXPECT_ERRNO(syscall(SYS_vmsplice, -1, NULL, 0, 0), ENOSYS);
    /* pid 1 is the sentry: never a target, also with upper bits set */
    EXPECT_ERRNO(kill(1, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_kill, 0x100000001UL, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_tgkill, 1, 1, 0), EPERM);
    EXPECT_ERRNO(syscall(SYS_pidfd_open, 1, 0), EPERM);
    EXPECT_OK(kill(getpid(), 0));
    EXPECT_OK(syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), 0));
    /* JITs need writable and executable pages (Node's V8): allowed */
    void *m =
        mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_OK(m == MAP_FAILED ? -1 : 0);
    EXPECT_OK(mprotect(m, 4096, PROT_READ | PROT_WRITE));
    EXPECT_OK(mprotect(m, 4096, PROT_READ | PROT_WRITE | PROT_EXEC));
    if (hugetlb_checks(ctx) < 0)
        return -1;
    /* sockets by register */
    EXPECT_ERRNO(socket(AF_NETLINK, SOCK_RAW, 0), EPERM);
    EXPECT_ERRNO(socket(AF_PACKET, SOCK_RAW, 0), EPERM);
    EXPECT_ERRNO(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), EPERM);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_OK(s);
    close(s);
    /* ioctl allowlist */
    int pty = ctx->pty;
    EXPECT_OK(pty);
    char c = 'x';
    EXPECT_ERRNO(ioctl(pty, TIOCSTI, &c), EPERM);
    EXPECT_ERRNO(syscall(SYS_ioctl, pty, (1UL << 32) | TIOCSTI, &c), EPERM);
    EXPECT_ERRNO(ioctl(pty, TIOCLINUX, &c), EPERM);
    struct termios t;
    EXPECT_OK(ioctl(pty, TCGETS, &t));
    int excl;
    EXPECT_OK(0);
    EXPECT_ERRNO(ioctl(pty, TIOCGEXCL, &excl), ENOTTY); /* works natively on a pty */
    /* prctl allowlist */
    EXPECT_OK(prctl(PR_SET_NAME, "bh-test", 0, 0, 0));
    EXPECT_ERRNO(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), EPERM);
    return 0;
}

Test(shipped_policies, kernel_refuses_and_allows)
{
    /* With a listener held by the child itself: no notified call is made. */
    run_confined("kernel.policy", true, kernel_checks);
}

/* A caller's seccomp agent holds the one listener a process may have: the
 * container tier's filter then goes in without one, and io_setup (which the
 * sentry would count, sentry/aio-cap.c) fails with ENOSYS, as on a kernel
 * without AIO, instead of reaching the host's pool uncounted. */
Test(shipped_policies, container_io_setup_without_the_sentry_is_enosys)
{
    struct sock_fprog prog;
    compile_shipped("container.policy", &prog);
    struct bh_error err = {0};
    cr_assert_eq(bh_policy_install(&prog, false, &err), -1, "a notifying policy needs a listener");
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if (bh_policy_install_unserved(&prog, false, &err) < 0)
            _exit(2);
        unsigned long ctx = 0;
        errno = 0;
        long r = syscall(SYS_io_setup, 1, &ctx);
        _exit(r == -1 && errno == ENOSYS ? 0 : 3);
    }
    int st;
    waitpid(pid, &st, 0);
    bh_policy_prog_free(&prog);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
}

static void expect_killed_by_sigsys(void (*fn)(void))
{
    struct sock_fprog prog;
    compile_shipped("container.policy", &prog);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct bh_error err = {0};
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if (bh_policy_install(&prog, true, &err) < 0)
            _exit(2);
        fn();
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    bh_policy_prog_free(&prog);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS, "status %#x", st);
}

static void x32_getpid(void)
{
    syscall(0x40000000 | SYS_getpid);
}

static void i386_getpid(void)
{
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20) : "memory");
    (void)ret;
}

Test(shipped_policies, x32_entry_kills)
{
    expect_killed_by_sigsys(x32_getpid);
}

/* Some kernels (ia32_emulation=0, or a hypervisor's own kernel) have no
 * int 0x80 entry at all: it faults with SIGSEGV before any filter runs. The
 * entry is then unreachable for guests too, which is what the policy wants. */
static bool i386_entry_exists(void)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler would turn it into an exit */
        i386_getpid();
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    return !(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
}

Test(shipped_policies, i386_entry_kills)
{
    if (i386_entry_exists()) {
        expect_killed_by_sigsys(i386_getpid);
        return;
    }
    struct sock_fprog prog;
    compile_shipped("container.policy", &prog);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct bh_error err = {0};
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        if (bh_policy_install(&prog, true, &err) < 0)
            _exit(2);
        signal(SIGSEGV, SIG_DFL);
        i386_getpid();
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    bh_policy_prog_free(&prog);
    cr_assert(WIFSIGNALED(st) && (WTERMSIG(st) == SIGSYS || WTERMSIG(st) == SIGSEGV),
              "the i386 entry ran under the filter: status %#x", st);
}

/* kernel.policy with a listener: a notified syscall blocks until answered. */
Test(shipped_policies, kernel_notify_blocks_until_answered)
{
    struct sock_fprog prog;
    compile_shipped("kernel.policy", &prog);
    int to_parent[2], to_child[2];
    cr_assert_eq(pipe2(to_parent, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(to_child, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        alarm(20);
        struct bh_error err = {0};
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        int fd = bh_policy_install(&prog, true, &err);
        if (write(to_parent[1], &fd, sizeof(fd)) != sizeof(fd) || fd < 0)
            _exit(2);
        char go;
        if (read(to_child[0], &go, 1) != 1)
            _exit(3);
        /* the parent holds a copy now; drop ours so only it can answer */
        close(fd);
        errno = 0;
        int r = openat(AT_FDCWD, "/nonexistent-bh-policy-test", O_RDONLY | O_CLOEXEC);
        if (r != -1 || errno != EXDEV)
            _exit(4);
        r = mkdir("/nonexistent-bh-policy-test-dir", 0700);
        _exit(r == 0 ? 0 : 5);
    }
    int child_fd = -1;
    cr_assert_eq(read(to_parent[0], &child_fd, sizeof(child_fd)), (ssize_t)sizeof(child_fd));
    cr_assert_geq(child_fd, 0, "child could not install with a listener");
    cleanup_close int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    cr_assert_geq(pidfd, 0);
    cleanup_close int listener = (int)syscall(SYS_pidfd_getfd, pidfd, child_fd, 0);
    cr_assert_geq(listener, 0, "pidfd_getfd: %s", strerror(errno));
    cr_assert_eq(write(to_child[1], "g", 1), 1);

    int expect_nr[] = {SYS_openat, SYS_mkdir};
    long answer[][2] = {{0, -EXDEV}, {0, 0}};
    for (int i = 0; i < 2; i++) {
        struct pollfd pfd = {.fd = listener, .events = POLLIN};
        cr_assert_eq(poll(&pfd, 1, 10000), 1, "no notification within 10 s");
        struct seccomp_notif req;
        memset(&req, 0, sizeof(req));
        cr_assert_eq(ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req), 0, "%s", strerror(errno));
        cr_assert(req.data.nr == expect_nr[i] || (i == 1 && req.data.nr == SYS_mkdirat),
                  "notified syscall %d", req.data.nr);
        cr_assert_eq(req.pid, (uint32_t)pid);
        /* still blocked: it has not returned (nor exited) */
        cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0);
        cr_assert_eq(ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id), 0);
        struct seccomp_notif_resp resp = {
            .id = req.id, .val = answer[i][0], .error = (int32_t)answer[i][1]};
        cr_assert_eq(ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp), 0, "%s", strerror(errno));
    }
    int st;
    waitpid(pid, &st, 0);
    bh_policy_prog_free(&prog);
    struct stat sb;
    cr_assert_neq(stat("/nonexistent-bh-policy-test-dir", &sb), 0, "mkdir ran: not brokered");
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
}

/* ---- fuzz: bounded, seeded; the parser must never crash ------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static char *read_text(const char *name)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", policy_dir(), name);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void feed(const char *text)
{
    struct bh_error err = {0};
    struct bh_policy *p = NULL;
    int r = bh_policy_parse(text, "fuzz.policy", policy_dir(), &p, &err);
    if (r == 0) {
        cr_assert_not_null(p);
        struct sock_fprog prog;
        if (bh_policy_compile(p, &prog, &err) == 0)
            bh_policy_prog_free(&prog);
        bh_policy_free(p);
    } else {
        cr_assert_eq(r, -1);
        cr_assert_neq(err.msg[0], '\0', "an error without a message");
    }
}

/* runc's -ENOSYS rule: numbers above every name get @beyond's answer;
 * named ones keep theirs, even the newest (bulkhead's own table), and x32
 * numbers and other architectures still die. */
Test(policy, beyond_answers_numbers_above_every_name)
{
    struct sock_fprog prog;
    compile_text("@default errno EPERM\n@beyond errno ENOSYS\ngetpid allow\n"
                 "setxattrat? errno EACCES\n",
                 &prog);
    cr_assert_eq(eval(&prog, 1000, 0, 0, 0, 0), SECCOMP_RET_ERRNO | ENOSYS);
    cr_assert_eq(eval(&prog, 0x3fffffff, 0, 0, 0, 0), SECCOMP_RET_ERRNO | ENOSYS);
    cr_assert_eq(eval(&prog, SYS_getpid, 0, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_assert_eq(eval(&prog, SYS_mkdir, 0, 0, 0, 0), SECCOMP_RET_ERRNO | EPERM);
    cr_assert_eq(eval(&prog, 463 /* setxattrat, newer than libseccomp 2.5.4 */, 0, 0, 0, 0),
                 SECCOMP_RET_ERRNO | EACCES);
    cr_assert_eq(eval(&prog, 0x40000000 | SYS_getpid, 0, 0, 0, 0), SECCOMP_RET_KILL_PROCESS);
    struct seccomp_data i386 = {.nr = 1000, .arch = AUDIT_ARCH_I386};
    cr_assert_eq(run_bpf(&prog, &i386), SECCOMP_RET_KILL_PROCESS);
    bh_policy_prog_free(&prog);
    /* Without @beyond such numbers get @default. */
    compile_text("@default errno EPERM\ngetpid allow\n", &prog);
    cr_assert_eq(eval(&prog, 1000, 0, 0, 0, 0), SECCOMP_RET_ERRNO | EPERM);
    bh_policy_prog_free(&prog);
    expect_error("@default errno EPERM\n@beyond allow\n", "`@beyond` must refuse");
    expect_error("@default errno EPERM\n@beyond errno ENOSYS\n@beyond errno EPERM\n",
                 "a second `@beyond`");
}

Test(policy, fuzz_random_bytes_and_mutated_lines, .timeout = 120)
{
    static const char *tokens[] = {"allow",
                                   "notify",
                                   "errno",
                                   "EPERM",
                                   "kill",
                                   "trap",
                                   "log",
                                   "if",
                                   "&&",
                                   "||",
                                   "==",
                                   "!=",
                                   "<",
                                   "<=",
                                   ">",
                                   ">=",
                                   "&",
                                   "|",
                                   "arg0",
                                   "arg5",
                                   "arg6",
                                   "pid",
                                   "flags",
                                   "prot",
                                   "0",
                                   "-1",
                                   "0xffffffff",
                                   "0x100000000",
                                   "CLONE_NEWUSER",
                                   "@include",
                                   "@default",
                                   "?",
                                   "#",
                                   "kill.policy",
                                   "host-state.policy",
                                   "kernel.policy",
                                   "read",
                                   "ioctl",
                                   "request",
                                   "TIOCSTI",
                                   "\n",
                                   " ",
                                   "\t",
                                   "\xff",
                                   "mmap",
                                   "PROT_EXEC"};
    char *shipped = read_text("kernel.policy");
    cr_assert_not_null(shipped);
    size_t shipped_len = strlen(shipped);
    char *buf = malloc(8192);
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = 0;
        switch (iter % 3) {
        case 0: /* random bytes */
            n = rng() % 600;
            for (size_t i = 0; i < n; i++)
                buf[i] = (char)(rng() % 255 + 1);
            break;
        case 1: /* random tokens */
            n = (size_t)snprintf(buf, 8192, "@default errno EPERM\n");
            for (int t = 0, m = (int)(rng() % 60); t < m && n < 8000; t++)
                n += (size_t)snprintf(buf + n, 8192 - n, "%s ",
                                      tokens[rng() % BH_ARRAY_SIZE(tokens)]);
            break;
        default: { /* a slice of a shipped policy with a few bytes changed */
            size_t off = rng() % shipped_len;
            n = rng() % 4000;
            if (off + n > shipped_len)
                n = shipped_len - off;
            n = (size_t)snprintf(buf, 8192, "@default errno EPERM\n%.*s", (int)n, shipped + off);
            for (int k = 0, m = (int)(rng() % 6); k < m && n > 0; k++)
                buf[rng() % n] = (char)(rng() % 255 + 1);
            break;
        }
        }
        buf[n] = '\0';
        feed(buf);
    }
    free(buf);
    free(shipped);
}

/* A caller's profile stacked on a tier's policy may allow by default and
 * may hold rules that never match (libseccomp's reading of an OCI profile);
 * a tier's own policy may do neither. */
Test(policy, stacked_profile_allows_by_default_and_drops_dead_rules)
{
    const char *text = "@default allow\n"
                       "mkdir errno 100\n"
                       "kill errno EPERM if arg1 == 10 || arg1 == 12\n"
                       "process_vm_readv allow if arg0 == 100 && arg0 == 9001\n"
                       "chdir errno ENXIO\n"
                       "chdir allow if arg0 == 1\n";
    expect_error("@default allow\nmkdir errno EPERM\n", "must refuse");
    struct bh_error err = {0};
    struct bh_policy *p = NULL;
    cr_assert_eq(bh_policy_parse_stacked(text, "profile", &p, &err), 0, "%s", err.msg);
    struct sock_fprog prog;
    cr_assert_eq(bh_policy_compile(p, &prog, &err), 0, "%s", err.msg);
    bh_policy_free(p);
    cr_expect_eq(eval(&prog, SYS_write, 0, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_expect_eq(eval(&prog, SYS_mkdir, 0, 0, 0, 0), RET_ERRNO(100));
    cr_expect_eq(eval(&prog, SYS_kill, 1, 10, 0, 0), RET_ERRNO(EPERM));
    cr_expect_eq(eval(&prog, SYS_kill, 1, 12, 0, 0), RET_ERRNO(EPERM));
    cr_expect_eq(eval(&prog, SYS_kill, 1, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_expect_eq(eval(&prog, SYS_process_vm_readv, 100, 0, 0, 0), SECCOMP_RET_ALLOW);
    cr_expect_eq(eval(&prog, SYS_chdir, 1, 0, 0, 0), RET_ERRNO(ENXIO));
    bh_policy_prog_free(&prog);
}
