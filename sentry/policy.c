/* Owns the seccomp policy language: parsing the text files in
 * seccomp-policies/ (grammar in seccomp-policies/README.md), turning their
 * first-match-wins lines into rules libseccomp can express, exporting the
 * BPF once, and loading it with seccomp(2).
 *
 * Policy files are outside input: the parser bounds line length, file size,
 * include depth and count, refuses include cycles, never recurses on input,
 * and reports every problem as "file:line: what is wrong". */
#include "policy.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>

#include "cleanup.h"
#include "kernel-compat.h"

/* Bounds on outside input. */
#define MAX_LINE 1024 /* characters per line, without the newline */
#define MAX_FILE_BYTES (1 << 20)
#define MAX_INCLUDE_DEPTH 8
#define MAX_INCLUDES 64
#define MAX_LINES 20000 /* syscall lines in one policy, includes counted */
#define MAX_TOKENS 256
#define MAX_LINES_PER_SYSCALL 256
#define MAX_CMPS 24           /* comparisons ANDed in one conjunction before merging */
#define MAX_CONJ 1024         /* alternatives in one condition after expansion */
#define MAX_PRODUCT (1 << 16) /* pairs tried when ANDing two conditions */
#define MAX_WORK (1 << 20)    /* pairs tried in one whole parse: bounds time, not only memory */
#define MAX_RULES 4096        /* libseccomp rules in one policy */
#define MAX_BPF_INSNS 4096    /* BPF_MAXINSNS: the kernel refuses longer programs */

enum cmp_op { OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_MEQ };

struct cmp {
    uint8_t arg;
    uint8_t op;
    uint64_t mask; /* OP_MEQ only */
    uint64_t datum;
};

/* A conjunction of comparisons; n == 0 is "always true". */
struct conj {
    uint8_t n;
    struct cmp c[MAX_CMPS];
};

/* A disjunction of conjunctions; n == 0 is "never true". */
struct dnf {
    size_t n, cap;
    struct conj *v;
};

struct line {
    int nr;
    uint32_t action;
    struct dnf cond;
    unsigned file; /* index into policy->files */
    unsigned lineno;
};

struct rule {
    int nr;
    uint32_t action;
    unsigned n;
    struct scmp_arg_cmp cmp[6];
    struct conj c; /* the same, for subsumption checks while rules are collected */
};

struct bh_policy {
    uint32_t default_action;
    bool has_default;
    /* @beyond: what syscall numbers above every name this compiler knows get
     * (runc's rule: ENOSYS, so libc and language runtimes fall back from a
     * syscall newer than the policy, where @default would say EPERM). */
    uint32_t beyond_action;
    bool has_beyond;
    /* A caller's profile stacked on a tier's policy (bh_policy_parse_stacked). */
    bool stacked;
    bool has_notify;
    char **files;
    size_t n_files;
    struct line *lines;
    size_t n_lines, cap_lines;
    struct rule *rules;
    size_t n_rules, cap_rules;
};

/* ---- tables ------------------------------------------------------------ */

struct named {
    const char *name;
    uint64_t value;
};

#define C(x)                                                                                       \
    {                                                                                              \
#x, (uint64_t)(x)                                                                          \
    }
static const struct named constants[] = {
    /* clone / unshare / setns */
    C(CSIGNAL),
    C(CLONE_VM),
    C(CLONE_FS),
    C(CLONE_FILES),
    C(CLONE_SIGHAND),
    C(CLONE_PIDFD),
    C(CLONE_PTRACE),
    C(CLONE_VFORK),
    C(CLONE_PARENT),
    C(CLONE_THREAD),
    C(CLONE_NEWNS),
    C(CLONE_SYSVSEM),
    C(CLONE_SETTLS),
    C(CLONE_PARENT_SETTID),
    C(CLONE_CHILD_CLEARTID),
    C(CLONE_DETACHED),
    C(CLONE_UNTRACED),
    C(CLONE_CHILD_SETTID),
    C(CLONE_NEWCGROUP),
    C(CLONE_NEWUTS),
    C(CLONE_NEWIPC),
    C(CLONE_NEWUSER),
    C(CLONE_NEWPID),
    C(CLONE_NEWNET),
    C(CLONE_IO),
    C(CLONE_NEWTIME),
    C(CLONE_CLEAR_SIGHAND),
    C(CLONE_INTO_CGROUP),
    {"CLONE_NS_FLAGS", CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
                           CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME},
    C(SIGCHLD),
    /* sockets */
    C(AF_UNSPEC),
    C(AF_UNIX),
    C(AF_LOCAL),
    C(AF_INET),
    C(AF_INET6),
    C(AF_NETLINK),
    C(AF_PACKET),
    C(AF_KEY),
    C(AF_BLUETOOTH),
    C(AF_VSOCK),
    C(AF_ALG),
    C(AF_XDP),
    C(SOCK_STREAM),
    C(SOCK_DGRAM),
    C(SOCK_RAW),
    C(SOCK_RDM),
    C(SOCK_SEQPACKET),
    C(SOCK_PACKET),
    C(SOCK_NONBLOCK),
    C(SOCK_CLOEXEC),
    {"SOCK_TYPE_MASK", 0xf},
    C(NETLINK_ROUTE),
    C(NETLINK_AUDIT),
    C(NETLINK_KOBJECT_UEVENT),
    C(NETLINK_SOCK_DIAG),
    /* socket protocols and options (kernel.policy: socket, setsockopt, getsockopt) */
    C(IPPROTO_IP),
    C(IPPROTO_ICMP),
    C(IPPROTO_ICMPV6),
    C(IPPROTO_IPV6),
    C(IPPROTO_TCP),
    C(IPPROTO_UDP),
    C(IPPROTO_UDPLITE),
    C(IPPROTO_SCTP),
    C(IPPROTO_MPTCP),
    C(SOL_SOCKET),
    C(SO_REUSEADDR),
    C(SO_TYPE),
    C(SO_ERROR),
    C(SO_BROADCAST),
    C(SO_SNDBUF),
    C(SO_RCVBUF),
    C(SO_KEEPALIVE),
    C(SO_OOBINLINE),
    C(SO_PRIORITY),
    C(SO_LINGER),
    C(SO_REUSEPORT),
    C(SO_PASSCRED),
    C(SO_PEERCRED),
    C(SO_RCVLOWAT),
    C(SO_SNDLOWAT),
    {"SO_RCVTIMEO_OLD", 20},
    {"SO_SNDTIMEO_OLD", 21},
    {"SO_RCVTIMEO_NEW", 66},
    {"SO_SNDTIMEO_NEW", 67},
    C(SO_BINDTODEVICE),
    C(SO_ATTACH_FILTER),
    C(SO_DETACH_FILTER),
    C(SO_LOCK_FILTER),
    C(SO_ATTACH_BPF),
    C(SO_ATTACH_REUSEPORT_CBPF),
    C(SO_ATTACH_REUSEPORT_EBPF),
    {"SO_DETACH_REUSEPORT_BPF", 68},
    C(SO_BINDTOIFINDEX),
    C(SO_MARK),
    {"SO_TIMESTAMP_OLD", 29},
    {"SO_TIMESTAMPNS_OLD", 35},
    {"SO_TIMESTAMP_NEW", 63},
    {"SO_TIMESTAMPNS_NEW", 64},
    C(SO_PEEK_OFF),
    {"SO_PASSPIDFD", 76},
    {"SO_PEERPIDFD", 77},
    C(TCP_NODELAY),
    C(TCP_MAXSEG),
    C(TCP_CORK),
    C(TCP_KEEPIDLE),
    C(TCP_KEEPINTVL),
    C(TCP_KEEPCNT),
    C(TCP_SYNCNT),
    C(TCP_LINGER2),
    C(TCP_DEFER_ACCEPT),
    C(TCP_WINDOW_CLAMP),
    C(TCP_QUICKACK),
    C(TCP_CONGESTION),
    C(TCP_USER_TIMEOUT),
    C(TCP_FASTOPEN),
    C(TCP_NOTSENT_LOWAT),
    C(TCP_FASTOPEN_CONNECT),
    C(TCP_ULP),
    C(TCP_REPAIR),
    C(TCP_ZEROCOPY_RECEIVE),
    C(IP_TOS),
    C(IP_TTL),
    C(IP_HDRINCL),
    C(IP_OPTIONS),
    C(IP_PKTINFO),
    C(IP_MTU_DISCOVER),
    C(IP_RECVERR),
    C(IP_RECVTOS),
    C(IP_MULTICAST_TTL),
    C(IP_MULTICAST_LOOP),
    C(IP_BIND_ADDRESS_NO_PORT),
    C(IPV6_V6ONLY),
    C(IPV6_UNICAST_HOPS),
    C(IPV6_MULTICAST_HOPS),
    C(IPV6_MULTICAST_LOOP),
    C(IPV6_RECVERR),
    C(IPV6_RECVPKTINFO),
    C(IPV6_MTU_DISCOVER),
    C(IPV6_TCLASS),
    C(UDP_CORK),
    C(UDP_SEGMENT),
    C(UDP_GRO),
    C(UDP_ENCAP),
    /* memory */
    C(PROT_NONE),
    C(PROT_READ),
    C(PROT_WRITE),
    C(PROT_EXEC),
    C(PROT_GROWSDOWN),
    C(PROT_GROWSUP),
    C(MAP_SHARED),
    C(MAP_PRIVATE),
    C(MAP_FIXED),
    C(MAP_ANONYMOUS),
    C(MAP_GROWSDOWN),
    C(MAP_HUGETLB),
    C(MAP_NORESERVE),
    C(MAP_POPULATE),
    C(MAP_STACK),
    /* terminals and fds */
    C(TCGETS),
    C(TCSETS),
    C(TCSETSW),
    C(TCSETSF),
    C(TCGETA),
    C(TCSETA),
    C(TCSETAW),
    C(TCSETAF),
    C(TCSBRK),
    C(TCXONC),
    C(TCFLSH),
    C(TIOCSCTTY),
    C(TIOCGPGRP),
    C(TIOCSPGRP),
    C(TIOCOUTQ),
    C(TIOCSTI),
    C(TIOCGWINSZ),
    C(TIOCSWINSZ),
    C(TIOCMGET),
    C(TIOCINQ),
    C(TIOCLINUX),
    C(TIOCNOTTY),
    C(TIOCGPTN),
    C(TIOCSPTLCK),
    C(TIOCGPTPEER),
    C(TIOCGSID),
    C(TIOCGETD),
    C(TIOCSETD),
    C(TIOCEXCL),
    C(TIOCNXCL),
    C(TIOCCONS),
    C(TIOCPKT),
    C(TIOCGEXCL),
    C(TIOCGDEV),
    C(TIOCGLCKTRMIOS),
    C(TIOCSLCKTRMIOS),
    C(TIOCSBRK),
    C(TIOCCBRK),
    C(TIOCGSERIAL),
    C(TIOCSSERIAL),
    C(TIOCGPKT),
    C(TIOCVHANGUP),
    C(FIONREAD),
    C(FIONBIO),
    C(FIOCLEX),
    C(FIONCLEX),
    C(FIOASYNC),
    C(FIOQSIZE),
    /* prctl options */
    C(PR_SET_PDEATHSIG),
    C(PR_GET_PDEATHSIG),
    C(PR_GET_DUMPABLE),
    C(PR_SET_DUMPABLE),
    C(PR_GET_KEEPCAPS),
    C(PR_SET_KEEPCAPS),
    C(PR_SET_NAME),
    C(PR_GET_NAME),
    C(PR_GET_SECCOMP),
    C(PR_SET_SECCOMP),
    C(PR_CAPBSET_READ),
    C(PR_CAPBSET_DROP),
    C(PR_GET_TSC),
    C(PR_SET_TSC),
    C(PR_GET_SECUREBITS),
    C(PR_SET_SECUREBITS),
    C(PR_GET_TIMERSLACK),
    C(PR_SET_TIMERSLACK),
    C(PR_SET_MM),
    C(PR_SET_PTRACER),
    C(PR_SET_CHILD_SUBREAPER),
    C(PR_GET_CHILD_SUBREAPER),
    C(PR_SET_NO_NEW_PRIVS),
    C(PR_GET_NO_NEW_PRIVS),
    C(PR_GET_TID_ADDRESS),
    C(PR_SET_THP_DISABLE),
    C(PR_GET_THP_DISABLE),
    C(PR_CAP_AMBIENT),
    C(PR_SET_SPECULATION_CTRL),
    C(PR_GET_SPECULATION_CTRL),
    C(PR_SET_IO_FLUSHER),
    C(PR_GET_IO_FLUSHER),
    C(PR_SET_SYSCALL_USER_DISPATCH),
    C(PR_SCHED_CORE),
    C(PR_SET_VMA),
    C(PR_SET_MDWE),
    C(PR_GET_MDWE),
    C(PR_GET_AUXV),
    C(PR_SET_MEMORY_MERGE),
    C(PR_MCE_KILL),
    C(PR_MCE_KILL_GET),
    C(PR_SET_FPEMU),
    C(PR_GET_FPEMU),
    C(PR_SET_UNALIGN),
    C(PR_GET_UNALIGN),
    C(PR_SET_ENDIAN),
    C(PR_GET_ENDIAN),
    C(PR_SET_TIMING),
    C(PR_GET_TIMING),
    C(PR_TASK_PERF_EVENTS_DISABLE),
    C(PR_TASK_PERF_EVENTS_ENABLE),
    C(PR_SET_FP_MODE),
    C(PR_GET_FP_MODE),
    C(PR_SET_TAGGED_ADDR_CTRL),
    C(PR_GET_TAGGED_ADDR_CTRL),
    /* personality */
    C(PER_LINUX),
    C(PER_LINUX32),
    C(UNAME26),
    C(ADDR_NO_RANDOMIZE),
    {"PER_QUERY", 0xffffffffULL},
};
#undef C

#define E(x)                                                                                       \
    {                                                                                              \
#x, x                                                                                      \
    }
static const struct named errnos[] = {
    E(EPERM),        E(ENOENT),          E(ESRCH),           E(EINTR),         E(EIO),
    E(ENXIO),        E(E2BIG),           E(ENOEXEC),         E(EBADF),         E(ECHILD),
    E(EAGAIN),       E(ENOMEM),          E(EACCES),          E(EFAULT),        E(EBUSY),
    E(EEXIST),       E(EXDEV),           E(ENODEV),          E(ENOTDIR),       E(EISDIR),
    E(EINVAL),       E(ENFILE),          E(EMFILE),          E(ENOTTY),        E(ETXTBSY),
    E(EFBIG),        E(ENOSPC),          E(ESPIPE),          E(EROFS),         E(EMLINK),
    E(EPIPE),        E(ERANGE),          E(ENOSYS),          E(ENOTSUP),       E(EOPNOTSUPP),
    E(ENOPROTOOPT),  E(ELOOP),           E(ENOTSOCK),        E(EAFNOSUPPORT),  E(ENOTEMPTY),
    E(ENAMETOOLONG), E(EPROTONOSUPPORT), E(ESOCKTNOSUPPORT), E(EADDRNOTAVAIL), E(ENETUNREACH),
    E(ECONNREFUSED), E(EDQUOT),          E(ENODATA),         E(ENOPKG),
};
#undef E

/* x86_64 syscalls newer than libseccomp 2.5.4's table, so policies can name them. */
static const struct named new_syscalls_x86_64[] = {
    {"landlock_create_ruleset", 444},
    {"landlock_add_rule", 445},
    {"landlock_restrict_self", 446},
    {"memfd_secret", 447},
    {"process_mrelease", 448},
    {"futex_waitv", 449},
    {"set_mempolicy_home_node", 450},
    {"cachestat", 451},
    {"fchmodat2", 452},
    {"map_shadow_stack", 453},
    {"futex_wake", 454},
    {"futex_wait", 455},
    {"futex_requeue", 456},
    {"statmount", 457},
    {"listmount", 458},
    {"lsm_get_self_attr", 459},
    {"lsm_set_self_attr", 460},
    {"lsm_list_modules", 461},
    {"mseal", 462},
    {"setxattrat", 463},
    {"getxattrat", 464},
    {"listxattrat", 465},
    {"removexattrat", 466},
    {"open_tree_attr", 467},
    {"file_getattr", 468},
    {"file_setattr", 469},
};

/* Argument names per syscall. A bit in narrow marks an argument the kernel
 * reads as 32 bits: a filter sees all 64, so an equality must ignore the
 * upper half (else 0x100000001 passes "!= 1" and the kernel acts on 1). */
struct sys_args {
    const char *sys;
    const char *args[6];
    uint8_t narrow;
};

#define N(i) (1u << (i))
static const struct sys_args arg_names[] = {
    {"clone", {"flags", "newsp", "parent_tid", "child_tid", "tls"}, N(0)},
    {"unshare", {"flags"}, 0},
    {"setns", {"fd", "nstype"}, N(0) | N(1)},
    {"socket", {"domain", "type", "protocol"}, N(0) | N(1) | N(2)},
    {"socketpair", {"domain", "type", "protocol", "sv"}, N(0) | N(1) | N(2)},
    {"ioctl", {"fd", "request", "arg"}, N(0) | N(1)},
    {"kill", {"pid", "sig"}, N(0) | N(1)},
    {"tkill", {"tid", "sig"}, N(0) | N(1)},
    {"tgkill", {"tgid", "tid", "sig"}, N(0) | N(1) | N(2)},
    {"rt_sigqueueinfo", {"tgid", "sig", "uinfo"}, N(0) | N(1)},
    {"rt_tgsigqueueinfo", {"tgid", "tid", "sig", "uinfo"}, N(0) | N(1) | N(2)},
    {"pidfd_open", {"pid", "flags"}, N(0) | N(1)},
    {"pidfd_send_signal", {"pidfd", "sig", "info", "flags"}, N(0) | N(1) | N(3)},
    {"pidfd_getfd", {"pidfd", "targetfd", "flags"}, N(0) | N(1) | N(2)},
    {"prctl", {"option", "arg2", "arg3", "arg4", "arg5"}, N(0)},
    {"personality", {"persona"}, N(0)},
    {"mmap", {"addr", "len", "prot", "flags", "fd", "offset"}, 0},
    {"mprotect", {"addr", "len", "prot"}, 0},
    {"pkey_mprotect", {"addr", "len", "prot", "pkey"}, N(3)},
    {"madvise", {"addr", "len", "advice"}, N(2)},
    {"fcntl", {"fd", "cmd", "arg"}, N(0) | N(1)},
    {"open", {"path", "flags", "mode"}, N(1) | N(2)},
    {"openat", {"dirfd", "path", "flags", "mode"}, N(0) | N(2) | N(3)},
    {"setsockopt", {"fd", "level", "optname", "optval", "optlen"}, N(0) | N(1) | N(2)},
    {"getsockopt", {"fd", "level", "optname", "optval", "optlen"}, N(0) | N(1) | N(2)},
    {"futex", {"uaddr", "op", "val", "timeout", "uaddr2", "val3"}, N(1) | N(2) | N(5)},
    {"mount", {"source", "target", "fstype", "flags", "data"}, 0},
    {"umount2", {"target", "flags"}, N(1)},
    {"wait4", {"pid", "status", "options", "rusage"}, N(0) | N(2)},
    {"waitid", {"idtype", "id", "infop", "options", "rusage"}, N(0) | N(1) | N(3)},
    {"sched_setscheduler", {"pid", "policy", "param"}, N(0) | N(1)},
    {"socketcall", {"call", "args"}, N(0)},
    {"ptrace", {"request", "pid", "addr", "data"}, N(1)},
    {"arch_prctl", {"code", "addr"}, N(0)},
    {"kcmp", {"pid1", "pid2", "type", "idx1", "idx2"}, N(0) | N(1) | N(2)},
    {"process_vm_readv", {"pid"}, N(0)},
    {"process_vm_writev", {"pid"}, N(0)},
    {"sched_setaffinity", {"pid", "len", "mask"}, N(0) | N(1)},
    {"setpriority", {"which", "who", "prio"}, N(0) | N(1) | N(2)},
    {"prlimit64", {"pid", "resource", "new_limit", "old_limit"}, N(0) | N(1)},
    {"sendto", {"fd", "buf", "len", "flags", "dest_addr", "addrlen"}, N(0) | N(3) | N(5)},
    {"utimensat", {"dirfd", "path", "times", "flags"}, N(0) | N(3)},
    {"newfstatat", {"dirfd", "path", "statbuf", "flags"}, N(0) | N(3)},
    {"statx", {"dirfd", "path", "flags", "mask", "statxbuf"}, N(0) | N(2) | N(3)},
    {"execveat", {"dirfd", "path", "argv", "envp", "flags"}, N(0) | N(4)},
    {"sched_getaffinity", {"pid", "len", "mask"}, N(0) | N(1)},
    {"sched_setparam", {"pid", "param"}, N(0)},
    {"sched_setattr", {"pid", "attr", "flags"}, N(0) | N(2)},
    {"getpriority", {"which", "who"}, N(0) | N(1)},
    {"ioprio_set", {"which", "who", "ioprio"}, N(0) | N(1) | N(2)},
    {"seccomp", {"op", "flags", "args"}, N(0) | N(1)},
};
#undef N

static const struct sys_args *find_args(const char *sys)
{
    for (size_t i = 0; i < BH_ARRAY_SIZE(arg_names); i++)
        if (strcmp(arg_names[i].sys, sys) == 0)
            return &arg_names[i];
    return NULL;
}

static int lookup(const struct named *t, size_t n, const char *name, uint64_t *out)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) {
            *out = t[i].value;
            return 0;
        }
    return -1;
}

/* Resolves a syscall name for x86_64 (the only architecture the policies are
 * written for); -1 when the name is unknown. */
static int resolve_syscall(const char *name)
{
    int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);
    if (nr >= 0)
        return nr;
    uint64_t v;
    if (lookup(new_syscalls_x86_64, BH_ARRAY_SIZE(new_syscalls_x86_64), name, &v) == 0)
        return (int)v;
    return -1;
}

/* The highest x86_64 syscall number a name resolves to (libseccomp's table
 * or new_syscalls_x86_64): @beyond applies above it. */
static int highest_named_syscall(void)
{
    static int highest = -1;
    if (highest >= 0)
        return highest;
    int h = 0;
    for (size_t i = 0; i < BH_ARRAY_SIZE(new_syscalls_x86_64); i++)
        if ((int)new_syscalls_x86_64[i].value > h)
            h = (int)new_syscalls_x86_64[i].value;
    /* Downwards from well above any table: the first number libseccomp
     * names is its highest. */
    for (int nr = 1023; nr > h; nr--) {
        char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
        free(name);
        if (name != NULL) {
            h = nr;
            break;
        }
    }
    highest = h;
    return h;
}

/* ---- conditions in disjunctive normal form ----------------------------- */

static int dnf_push(struct dnf *d, const struct conj *c)
{
    if (d->n >= MAX_CONJ)
        return -1;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        struct conj *v = realloc(d->v, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        d->v = v;
        d->cap = cap;
    }
    d->v[d->n++] = *c;
    return 0;
}

static void dnf_free(struct dnf *d)
{
    free(d->v);
    d->v = NULL;
    d->n = d->cap = 0;
}

static int dnf_true(struct dnf *d)
{
    struct conj empty = {0};
    return dnf_push(d, &empty);
}

static bool cmp_holds(const struct cmp *c, uint64_t v)
{
    switch (c->op) {
    case OP_EQ:
        return v == c->datum;
    case OP_NE:
        return v != c->datum;
    case OP_LT:
        return v < c->datum;
    case OP_LE:
        return v <= c->datum;
    case OP_GT:
        return v > c->datum;
    case OP_GE:
        return v >= c->datum;
    default:
        return (v & c->mask) == c->datum;
    }
}

static const char *op_text(int op)
{
    static const char *t[] = {"==", "!=", "<", "<=", ">", ">=", "& MASK =="};
    return t[op];
}

/* Rewrites a conjunction so each argument has at most one comparison, as
 * libseccomp requires. Returns 1 when satisfiable, 0 when it can never hold,
 * -1 (why in msg) when libseccomp cannot express it. */
static int conj_simplify(struct conj *c, char *msg, size_t msglen)
{
    struct conj out = {0};
    for (unsigned arg = 0; arg < 6; arg++) {
        bool has_eq = false, has_meq = false;
        uint64_t eq = 0, mask = 0, val = 0;
        const struct cmp *other = NULL;
        /* Equalities and masked equalities merge; anything else must be alone. */
        for (unsigned i = 0; i < c->n; i++) {
            const struct cmp *x = &c->c[i];
            if (x->arg != arg)
                continue;
            if (x->op == OP_EQ || (x->op == OP_MEQ && x->mask == UINT64_MAX)) {
                if (has_eq && eq != x->datum)
                    return 0;
                has_eq = true;
                eq = x->datum;
            } else if (x->op == OP_MEQ) {
                uint64_t both = mask & x->mask;
                if ((val & both) != (x->datum & both))
                    return 0;
                mask |= x->mask;
                val |= x->datum;
                has_meq = true;
            } else if (other == NULL) {
                other = x;
            } else if (other->op == x->op && other->datum == x->datum) {
                continue;
            } else {
                /* Two bounds of the same direction: keep the tighter one. */
                bool up_a = other->op == OP_LT || other->op == OP_LE;
                bool up_b = x->op == OP_LT || x->op == OP_LE;
                bool down_a = other->op == OP_GT || other->op == OP_GE;
                bool down_b = x->op == OP_GT || x->op == OP_GE;
                if ((up_a && up_b) || (down_a && down_b)) {
                    /* x's bound implies other's when every value passing x passes other. */
                    uint64_t edge = x->datum;
                    bool x_tighter =
                        up_b ? (x->op == OP_LT ? edge == 0 || cmp_holds(other, edge - 1)
                                               : cmp_holds(other, edge))
                             : (x->op == OP_GT ? edge == UINT64_MAX || cmp_holds(other, edge + 1)
                                               : cmp_holds(other, edge));
                    if (x_tighter)
                        other = x;
                    continue;
                }
                snprintf(msg, msglen,
                         "argument %u is compared twice (%s %#" PRIx64 " and %s %#" PRIx64
                         ") in one alternative, which libseccomp cannot express; "
                         "split the line or use one masked comparison",
                         arg, op_text(other->op), other->datum, op_text(x->op), x->datum);
                return -1;
            }
        }
        if (has_eq) {
            if (has_meq && (eq & mask) != val)
                return 0;
            if (other != NULL && !cmp_holds(other, eq))
                return 0;
            out.c[out.n++] = (struct cmp){.arg = arg, .op = OP_EQ, .datum = eq};
            continue;
        }
        if (has_meq && other != NULL) {
            snprintf(msg, msglen,
                     "argument %u has both a masked comparison and %s %#" PRIx64
                     " in one alternative, which libseccomp cannot express; split the line",
                     arg, op_text(other->op), other->datum);
            return -1;
        }
        if (has_meq)
            out.c[out.n++] = (struct cmp){.arg = arg, .op = OP_MEQ, .mask = mask, .datum = val};
        else if (other != NULL)
            out.c[out.n++] = *other;
    }
    *c = out;
    return 1;
}

/* Pairs dnf_and may still try in the current parse (one parse per thread). */
static __thread size_t work_left;

/* a AND b, distributed, into out (which starts empty). */
static int dnf_and(const struct dnf *a, const struct dnf *b, struct dnf *out, char *msg,
                   size_t msglen)
{
    if (a->n * b->n > MAX_PRODUCT || a->n * b->n > work_left) {
        snprintf(msg, msglen, "condition is too complex to expand (%zu x %zu alternatives)", a->n,
                 b->n);
        return -1;
    }
    work_left -= a->n * b->n;
    for (size_t i = 0; i < a->n; i++)
        for (size_t j = 0; j < b->n; j++) {
            struct conj c = a->v[i];
            const struct conj *y = &b->v[j];
            if (c.n + y->n > MAX_CMPS) {
                snprintf(msg, msglen, "too many comparisons in one alternative (more than %d)",
                         MAX_CMPS);
                return -1;
            }
            memcpy(&c.c[c.n], y->c, y->n * sizeof(y->c[0]));
            c.n += y->n;
            int r = conj_simplify(&c, msg, msglen);
            if (r < 0)
                return -1;
            if (r == 0)
                continue;
            if (dnf_push(out, &c) < 0) {
                snprintf(msg, msglen, "condition expands to more than %d alternatives; simplify it",
                         MAX_CONJ);
                return -1;
            }
        }
    return 0;
}

/* NOT c, as a disjunction of single comparisons. A masked equality is false
 * exactly when some bit differs; taking bits from the top, alternative k says
 * "the bits above k match and bit k differs", so alternatives are disjoint
 * and ANDing two such negations cancels most pairs instead of multiplying. */
static int cmp_negate(const struct cmp *c, struct dnf *out)
{
    static const uint8_t inverse[] = {OP_NE, OP_EQ, OP_GE, OP_GT, OP_LE, OP_LT};
    if (c->op != OP_MEQ) {
        struct conj one = {.n = 1, .c = {*c}};
        one.c[0].op = inverse[c->op];
        return dnf_push(out, &one);
    }
    uint64_t above = 0;
    for (int b = 63; b >= 0; b--) {
        uint64_t bit = 1ULL << b;
        if (!(c->mask & bit))
            continue;
        struct conj one = {.n = 1,
                           .c = {{.arg = c->arg,
                                  .op = OP_MEQ,
                                  .mask = above | bit,
                                  .datum = (c->datum & above) | (~c->datum & bit)}}};
        if (dnf_push(out, &one) < 0)
            return -1;
        above |= bit;
    }
    return 0;
}

/* NOT d = AND over its alternatives of (OR over each one's negated comparisons). */
static int dnf_negate(const struct dnf *d, struct dnf *out, char *msg, size_t msglen)
{
    if (dnf_true(out) < 0)
        goto too_big;
    for (size_t i = 0; i < d->n; i++) {
        struct dnf alt = {0};
        for (unsigned k = 0; k < d->v[i].n; k++)
            if (cmp_negate(&d->v[i].c[k], &alt) < 0) {
                dnf_free(&alt);
                goto too_big;
            }
        struct dnf next = {0};
        int r = dnf_and(out, &alt, &next, msg, msglen);
        dnf_free(&alt);
        dnf_free(out);
        *out = next;
        if (r < 0)
            return -1;
    }
    return 0;
too_big:
    snprintf(msg, msglen, "condition expands to more than %d alternatives; simplify it", MAX_CONJ);
    return -1;
}

/* ---- lexer ------------------------------------------------------------- */

enum tok_kind { T_WORD, T_NUM, T_OP };

struct tok {
    enum tok_kind kind;
    uint64_t num;
    bool negative;
    char text[64];
};

static int lex(const char *s, struct tok *toks, size_t *n, char *msg, size_t msglen)
{
    size_t k = 0;
    while (*s) {
        if (*s == ' ' || *s == '\t' || *s == '\r') {
            s++;
            continue;
        }
        if (*s == '#')
            break;
        if (k == MAX_TOKENS) {
            snprintf(msg, msglen, "too many tokens (more than %d)", MAX_TOKENS);
            return -1;
        }
        struct tok *t = &toks[k];
        memset(t, 0, sizeof(*t));
        const char *start = s;
        if (isalpha((unsigned char)*s) || *s == '_' || *s == '@') {
            s++;
            while (isalnum((unsigned char)*s) || *s == '_' || *s == '.' || *s == '-')
                s++;
            t->kind = T_WORD;
        } else if (isdigit((unsigned char)*s) || (*s == '-' && isdigit((unsigned char)s[1]))) {
            bool neg = *s == '-';
            if (neg)
                s++;
            errno = 0;
            char *end;
            unsigned long long v = strtoull(s, &end, 0);
            if (errno != 0 || isalnum((unsigned char)*end) || *end == '_') {
                snprintf(msg, msglen, "bad number `%.*s`", (int)strcspn(start, " \t#"), start);
                return -1;
            }
            if (neg && v > (1ULL << 63)) {
                snprintf(msg, msglen, "number `%.*s` is out of range", (int)(end - start), start);
                return -1;
            }
            t->kind = T_NUM;
            t->negative = neg;
            t->num = neg ? (uint64_t)0 - v : v;
            s = end;
        } else {
            static const char *ops[] = {
                "&&", "||", "==", "!=", "<=", ">=", "<", ">", "&", "|", "?"};
            size_t i;
            for (i = 0; i < BH_ARRAY_SIZE(ops); i++)
                if (strncmp(s, ops[i], strlen(ops[i])) == 0)
                    break;
            if (i == BH_ARRAY_SIZE(ops)) {
                if (isprint((unsigned char)*s))
                    snprintf(msg, msglen, "unexpected character `%c`", *s);
                else
                    snprintf(msg, msglen, "unexpected byte 0x%02x", (unsigned char)*s);
                return -1;
            }
            s += strlen(ops[i]);
            t->kind = T_OP;
        }
        size_t len = (size_t)(s - start);
        if (len >= sizeof(t->text)) {
            snprintf(msg, msglen, "token `%.20s...` is too long", start);
            return -1;
        }
        memcpy(t->text, start, len);
        t->text[len] = '\0';
        k++;
    }
    *n = k;
    return 0;
}

/* ---- parser ------------------------------------------------------------ */

struct parser {
    struct bh_policy *p;
    unsigned file;
    unsigned lineno;
    struct tok toks[MAX_TOKENS];
    size_t n, at;
    char msg[512];
};

static bool tok_is(const struct parser *ps, const char *text)
{
    return ps->at < ps->n && strcmp(ps->toks[ps->at].text, text) == 0;
}

static int fail(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct parser *ps, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->msg, sizeof(ps->msg), fmt, ap);
    va_end(ap);
    return -1;
}

static int parse_action(struct parser *ps, uint32_t *action)
{
    if (ps->at >= ps->n)
        return fail(ps, "missing action (allow, notify, errno NAME, kill, trap or log)");
    const struct tok *t = &ps->toks[ps->at++];
    if (strcmp(t->text, "allow") == 0)
        *action = SCMP_ACT_ALLOW;
    else if (strcmp(t->text, "notify") == 0)
        *action = SCMP_ACT_NOTIFY;
    else if (strcmp(t->text, "kill") == 0)
        *action = SCMP_ACT_KILL_PROCESS;
    else if (strcmp(t->text, "trap") == 0)
        *action = SCMP_ACT_TRAP;
    else if (strcmp(t->text, "log") == 0)
        *action = SCMP_ACT_LOG;
    else if (strcmp(t->text, "errno") == 0) {
        if (ps->at >= ps->n)
            return fail(ps, "`errno` needs a name such as EPERM or a number 1..4095");
        const struct tok *e = &ps->toks[ps->at++];
        uint64_t v;
        if (e->kind == T_NUM) {
            if (e->negative || e->num < 1 || e->num > 4095)
                return fail(ps, "errno `%s` is out of range (1..4095)", e->text);
            v = e->num;
        } else if (lookup(errnos, BH_ARRAY_SIZE(errnos), e->text, &v) < 0) {
            return fail(ps, "unknown errno name `%s`", e->text);
        }
        *action = SCMP_ACT_ERRNO((uint32_t)v);
    } else {
        return fail(ps,
                    "unknown action `%s` (expected allow, notify, errno NAME, kill, trap or "
                    "log)",
                    t->text);
    }
    return 0;
}

/* value := atom ('|' atom)* ; atom := NUMBER | CONSTANT */
static int parse_value(struct parser *ps, bool narrow, uint64_t *out)
{
    uint64_t v = 0;
    for (;;) {
        if (ps->at >= ps->n)
            return fail(ps, "missing value after `%s`", ps->toks[ps->at - 1].text);
        const struct tok *t = &ps->toks[ps->at++];
        uint64_t x;
        if (t->kind == T_NUM) {
            x = t->num;
            if (narrow && t->negative) {
                if ((int64_t)x < INT32_MIN)
                    return fail(ps, "value `%s` does not fit in 32 bits", t->text);
                x &= 0xffffffffULL;
            }
        } else if (t->kind == T_WORD) {
            if (lookup(constants, BH_ARRAY_SIZE(constants), t->text, &x) < 0)
                return fail(ps, "unknown constant `%s`", t->text);
        } else {
            return fail(ps, "expected a number or a constant, found `%s`", t->text);
        }
        if (narrow && x > 0xffffffffULL)
            return fail(ps, "value `%s` does not fit in this 32-bit argument", t->text);
        v |= x;
        if (!tok_is(ps, "|"))
            break;
        ps->at++;
    }
    *out = v;
    return 0;
}

/* cmp := ARG ['&' value] OP value, as a disjunction (a 32-bit != expands). */
static int parse_cmp(struct parser *ps, const char *sys, struct dnf *out)
{
    if (ps->at >= ps->n || ps->toks[ps->at].kind != T_WORD)
        return fail(ps, "expected an argument name after `%s`", ps->toks[ps->at - 1].text);
    const char *name = ps->toks[ps->at++].text;
    const struct sys_args *sa = find_args(sys);
    int arg = -1;
    if (strlen(name) == 4 && strncmp(name, "arg", 3) == 0 && name[3] >= '0' && name[3] <= '5')
        arg = name[3] - '0';
    for (int i = 0; sa != NULL && arg < 0 && i < 6; i++)
        if (sa->args[i] != NULL && strcmp(sa->args[i], name) == 0)
            arg = i;
    if (arg < 0)
        return fail(ps, "`%s` has no argument named `%s` (use arg0..arg5)", sys, name);
    bool narrow = sa != NULL && (sa->narrow & (1u << arg));
    uint64_t width = narrow ? 0xffffffffULL : UINT64_MAX;

    bool masked = false;
    uint64_t mask = width;
    if (tok_is(ps, "&")) {
        ps->at++;
        if (parse_value(ps, narrow, &mask) < 0)
            return -1;
        masked = true;
    }
    if (ps->at >= ps->n)
        return fail(ps, "missing comparison after `%s`", name);
    const char *op = ps->toks[ps->at++].text;
    static const char *ops[] = {"==", "!=", "<", "<=", ">", ">="};
    int o;
    for (o = 0; o < 6; o++)
        if (strcmp(op, ops[o]) == 0)
            break;
    if (o == 6)
        return fail(ps, "expected a comparison (== != < <= > >=) after `%s`, found `%s`", name, op);
    uint64_t v;
    if (parse_value(ps, narrow, &v) < 0)
        return -1;
    if ((masked || narrow) && o != OP_EQ && o != OP_NE)
        return fail(ps,
                    masked ? "a masked comparison of `%s` takes only == or !="
                           : "`%s` is read by the kernel as 32 bits, so an ordering comparison "
                             "cannot be checked safely (the filter sees all 64); use == or != "
                             "(or & MASK ==)",
                    name);
    if (masked && (v & ~mask) != 0)
        return fail(ps,
                    "value %#" PRIx64 " has bits outside the mask %#" PRIx64
                    ": `%s & ...` can never equal it",
                    v, mask, name);
    struct cmp c = {.arg = (uint8_t)arg, .op = (uint8_t)o, .datum = v};
    if (masked || narrow) {
        c.op = OP_MEQ;
        c.mask = mask;
        if (mask == 0)
            return fail(ps, "mask of `%s` is 0: the comparison says nothing", name);
    }
    if (o == OP_NE && c.op == OP_MEQ)
        return cmp_negate(&c, out) < 0 ? fail(ps, "condition too large") : 0;
    struct conj one = {.n = 1, .c = {c}};
    return dnf_push(out, &one) < 0 ? fail(ps, "condition too large") : 0;
}

/* cond := conj ('||' conj)* ; conj := cmp ('&&' cmp)*  — no parentheses,
 * && binds tighter, so the result is already a disjunction of conjunctions. */
static int parse_cond(struct parser *ps, const char *sys, struct dnf *out)
{
    for (;;) {
        struct dnf conj = {0};
        if (dnf_true(&conj) < 0)
            return fail(ps, "out of memory");
        for (;;) {
            struct dnf term = {0}, next = {0};
            if (parse_cmp(ps, sys, &term) < 0) {
                dnf_free(&term);
                dnf_free(&conj);
                return -1;
            }
            int r = dnf_and(&conj, &term, &next, ps->msg, sizeof(ps->msg));
            dnf_free(&term);
            dnf_free(&conj);
            conj = next;
            if (r < 0) {
                dnf_free(&conj);
                return -1;
            }
            if (!tok_is(ps, "&&"))
                break;
            ps->at++;
        }
        for (size_t i = 0; i < conj.n; i++)
            if (dnf_push(out, &conj.v[i]) < 0) {
                dnf_free(&conj);
                return fail(ps, "condition expands to more than %d alternatives", MAX_CONJ);
            }
        dnf_free(&conj);
        if (ps->at >= ps->n)
            return 0;
        if (!tok_is(ps, "||"))
            return fail(ps, "expected `&&`, `||` or the end of the line, found `%s`",
                        ps->toks[ps->at].text);
        ps->at++;
    }
}

static bool valid_include_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 128 || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

/* One input being read: the include stack holds these, never the C stack. */
struct frame {
    char *text; /* owned */
    const char *pos;
    unsigned file;
    unsigned lineno;
    unsigned from_line; /* line of the @include in the parent, for messages */
};

static int read_policy_file(const char *dir, const char *name, char **out, struct bh_error *err)
{
    char path[PATH_MAX];
    if (dir != NULL && name[0] != '/')
        snprintf(path, sizeof(path), "%s/%s", dir, name);
    else
        snprintf(path, sizeof(path), "%s", name);
    /* O_NONBLOCK: a fifo planted under a policy name must not hang the reader. */
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return bh_error_errno(err, errno, "open policy `%s`", path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return bh_error_errno(err, errno, "stat policy `%s`", path);
    if (!S_ISREG(st.st_mode))
        return bh_error_set(err, EINVAL, "policy `%s` is not a regular file", path);
    if (st.st_size > MAX_FILE_BYTES)
        return bh_error_set(err, EFBIG, "policy `%s` is larger than %d bytes", path,
                            MAX_FILE_BYTES);
    cleanup_free char *buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL)
        return bh_error_errno(err, ENOMEM, "read policy `%s`", path);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return bh_error_errno(err, errno, "read policy `%s`", path);
        if (r == 0)
            break;
        got += (size_t)r;
    }
    if (memchr(buf, '\0', got) != NULL)
        return bh_error_set(err, EINVAL, "policy `%s` contains a NUL byte: not a text file", path);
    buf[got] = '\0';
    *out = steal_pointer(&buf);
    return 0;
}

static int add_file(struct bh_policy *p, const char *name)
{
    char **v = realloc(p->files, (p->n_files + 1) * sizeof(*v));
    if (v == NULL)
        return -1;
    p->files = v;
    p->files[p->n_files] = strdup(name);
    if (p->files[p->n_files] == NULL)
        return -1;
    p->n_files++;
    return 0;
}

static int add_line(struct bh_policy *p, const struct line *l)
{
    if (p->n_lines == p->cap_lines) {
        size_t cap = p->cap_lines ? p->cap_lines * 2 : 64;
        struct line *v = realloc(p->lines, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        p->lines = v;
        p->cap_lines = cap;
    }
    p->lines[p->n_lines++] = *l;
    return 0;
}

/* Parses one line already lexed. Returns 0, -1 with ps->msg, or 1 for an
 * @include (its name left in *include). */
static int parse_line(struct parser *ps, const char **include)
{
    struct bh_policy *p = ps->p;
    ps->at = 0;
    if (ps->n == 0)
        return 0;
    const struct tok *first = &ps->toks[0];
    if (first->kind != T_WORD)
        return fail(ps, "expected a syscall name or a directive, found `%s`", first->text);
    if (strcmp(first->text, "@include") == 0) {
        if (ps->n != 2 || ps->toks[1].kind != T_WORD)
            return fail(ps, "`@include` takes one file name");
        if (!valid_include_name(ps->toks[1].text))
            return fail(ps,
                        "include name `%s` must be a file in the same directory (letters, "
                        "digits, - _ .; no / and no leading dot)",
                        ps->toks[1].text);
        *include = ps->toks[1].text;
        return 1;
    }
    if (strcmp(first->text, "@default") == 0 || strcmp(first->text, "@beyond") == 0) {
        bool beyond = first->text[1] == 'b';
        ps->at = 1;
        uint32_t action;
        if (parse_action(ps, &action) < 0)
            return -1;
        if (ps->at != ps->n)
            return fail(ps, "unexpected `%s` after the action of `%s`", ps->toks[ps->at].text,
                        first->text);
        if (beyond ? p->has_beyond : p->has_default)
            return fail(ps, "a second `%s`: a policy has %s one", first->text,
                        beyond ? "at most" : "exactly");
        bool allows = action == SCMP_ACT_ALLOW || action == SCMP_ACT_LOG;
        if (beyond && (allows || action == SCMP_ACT_NOTIFY))
            return fail(ps, "`@beyond` must refuse (errno, kill or trap): numbers no name "
                            "resolves to are syscalls no one reviewed");
        /* A stacked profile may allow by default: the tier's own filter still
         * decides every call it lets through (filters intersect). */
        if (allows && !p->stacked)
            return fail(ps, "`@default` must refuse (errno, kill or trap): a policy is an "
                            "allowlist");
        if (action == SCMP_ACT_NOTIFY)
            return fail(ps, "`@default notify` would send every unknown syscall to the "
                            "sentry; name them instead");
        *(beyond ? &p->beyond_action : &p->default_action) = action;
        *(beyond ? &p->has_beyond : &p->has_default) = true;
        return 0;
    }
    if (first->text[0] == '@')
        return fail(ps, "unknown directive `%s` (expected @default, @beyond or @include)",
                    first->text);

    bool optional = false;
    ps->at = 1;
    if (tok_is(ps, "?")) {
        optional = true;
        ps->at++;
    }
    int nr = resolve_syscall(first->text);
    if (nr < 0 && !optional)
        return fail(ps, "unknown syscall `%s` on x86_64 (mark it `%s?` if it may be absent)",
                    first->text, first->text);
    struct line l = {.nr = nr, .file = ps->file, .lineno = ps->lineno};
    if (parse_action(ps, &l.action) < 0)
        return -1;
    if (ps->at < ps->n) {
        if (!tok_is(ps, "if"))
            return fail(ps, "expected `if` or the end of the line, found `%s`",
                        ps->toks[ps->at].text);
        ps->at++;
        if (parse_cond(ps, first->text, &l.cond) < 0) {
            dnf_free(&l.cond);
            return -1;
        }
        if (l.cond.n == 0 && p->stacked) {
            dnf_free(&l.cond);
            return 0; /* a profile's rule that never matches: nothing to filter */
        }
        if (l.cond.n == 0) {
            dnf_free(&l.cond);
            return fail(ps, "the condition can never be true");
        }
    } else if (dnf_true(&l.cond) < 0) {
        return fail(ps, "out of memory");
    }
    if (nr < 0) {
        dnf_free(&l.cond);
        return 0;
    }
    if (l.action == SCMP_ACT_NOTIFY)
        p->has_notify = true;
    if (p->n_lines >= MAX_LINES || add_line(p, &l) < 0) {
        dnf_free(&l.cond);
        return fail(ps, "too many lines (more than %d)", MAX_LINES);
    }
    return 0;
}

/* True when every call matching a also matches b (a is the narrower rule). */
static bool conj_implies(const struct conj *a, const struct conj *b)
{
    for (unsigned i = 0; i < b->n; i++) {
        const struct cmp *y = &b->c[i];
        const struct cmp *x = NULL;
        for (unsigned j = 0; j < a->n; j++)
            if (a->c[j].arg == y->arg)
                x = &a->c[j];
        if (x == NULL)
            return false;
        if (x->op == OP_EQ) {
            if (!cmp_holds(y, x->datum))
                return false;
        } else if (x->op == OP_MEQ && y->op == OP_MEQ) {
            if ((x->mask & y->mask) != y->mask || (x->datum & y->mask) != y->datum)
                return false;
        } else if (x->op != y->op || x->datum != y->datum) {
            return false;
        }
    }
    return true;
}

static void rule_set(struct rule *r, int nr, uint32_t action, const struct conj *c)
{
    static const enum scmp_compare ops[] = {SCMP_CMP_EQ,       SCMP_CMP_NE, SCMP_CMP_LT,
                                            SCMP_CMP_LE,       SCMP_CMP_GT, SCMP_CMP_GE,
                                            SCMP_CMP_MASKED_EQ};
    memset(r, 0, sizeof(*r));
    r->nr = nr;
    r->action = action;
    r->n = c->n;
    r->c = *c;
    for (unsigned i = 0; i < c->n; i++) {
        const struct cmp *x = &c->c[i];
        r->cmp[i] = (struct scmp_arg_cmp){.arg = x->arg, .op = ops[x->op]};
        if (x->op == OP_MEQ) {
            r->cmp[i].datum_a = x->mask;
            r->cmp[i].datum_b = x->datum;
        } else {
            r->cmp[i].datum_a = x->datum;
        }
    }
}

/* Adds a rule for one syscall, keeping its rules of one action free of
 * repeats and of rules a wider one already covers: libseccomp 2.5.4 leaks
 * memory when it prunes those itself. Rules from first is this syscall's. */
static int add_rule(struct bh_policy *p, size_t first, int nr, uint32_t action,
                    const struct conj *c)
{
    for (size_t i = first; i < p->n_rules; i++)
        if (p->rules[i].action == action && conj_implies(c, &p->rules[i].c))
            return 0;
    /* Drop narrower rules the new one covers. */
    for (size_t i = first; i < p->n_rules;)
        if (p->rules[i].action == action && conj_implies(&p->rules[i].c, c))
            p->rules[i] = p->rules[--p->n_rules];
        else
            i++;
    if (p->n_rules >= MAX_RULES)
        return -1;
    if (p->n_rules == p->cap_rules) {
        size_t cap = p->cap_rules ? p->cap_rules * 2 : 64;
        struct rule *v = realloc(p->rules, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        p->rules = v;
        p->cap_rules = cap;
    }
    rule_set(&p->rules[p->n_rules++], nr, action, c);
    return 0;
}

static int by_syscall(const void *a, const void *b, void *arg)
{
    const struct line *lines = arg;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (lines[x].nr != lines[y].nr)
        return lines[x].nr < lines[y].nr ? -1 : 1;
    return x < y ? -1 : x > y;
}

static bool always(const struct dnf *d)
{
    return d->n == 1 && d->v[0].n == 0;
}

/* Lines for one syscall are read top to bottom and the first whose condition
 * holds decides. libseccomp has no order among rules, so each line becomes
 * "its condition AND NOT every earlier line with another action" (an earlier
 * line with the same action decides the same way, so overlap with it is
 * harmless); lines with the default action then need no rule at all. */
static int finalize(struct bh_policy *p, struct bh_error *err)
{
    char msg[512];
    size_t *order = calloc(p->n_lines + 1, sizeof(*order));
    if (order == NULL)
        return bh_error_errno(err, ENOMEM, "compile policy");
    for (size_t i = 0; i < p->n_lines; i++)
        order[i] = i;
    qsort_r(order, p->n_lines, sizeof(*order), by_syscall, p->lines);
    int ret = 0;
    size_t start = 0, first_rule = 0;
    for (size_t k = 0; k < p->n_lines && ret == 0; k++) {
        const struct line *l = &p->lines[order[k]];
        if (k > 0 && p->lines[order[k - 1]].nr != l->nr) {
            start = k;
            first_rule = p->n_rules;
        }
        const char *fname = p->files[l->file];
        bool redundant = false;
        if (k - start >= MAX_LINES_PER_SYSCALL) {
            ret = bh_error_set(err, E2BIG, "%s:%u: more than %d lines for one syscall", fname,
                               l->lineno, MAX_LINES_PER_SYSCALL);
            break;
        }
        struct dnf eff = {0};
        for (size_t c = 0; c < l->cond.n && ret == 0; c++)
            if (dnf_push(&eff, &l->cond.v[c]) < 0) /* a lost alternative could open a hole */
                ret = bh_error_errno(err, ENOMEM, "%s:%u: compile", fname, l->lineno);
        for (size_t j = start; j < k && ret == 0; j++) {
            const struct line *prior = &p->lines[order[j]];
            if (always(&prior->cond) && prior->action == l->action) {
                redundant = true; /* repeats what already decides: nothing to add */
                break;
            }
            if (always(&prior->cond) && p->stacked) {
                redundant = true; /* a profile's dead rule changes nothing, as in libseccomp */
                break;
            }
            if (always(&prior->cond)) {
                ret = bh_error_set(err, EINVAL,
                                   "%s:%u: this line is never reached: %s:%u already decides "
                                   "every call of this syscall",
                                   fname, l->lineno, p->files[prior->file], prior->lineno);
                break;
            }
            if (prior->action == l->action)
                continue;
            struct dnf neg = {0}, next = {0};
            if (dnf_negate(&prior->cond, &neg, msg, sizeof(msg)) < 0 ||
                dnf_and(&eff, &neg, &next, msg, sizeof(msg)) < 0)
                ret = bh_error_set(err, EINVAL, "%s:%u: %s", fname, l->lineno, msg);
            dnf_free(&neg);
            dnf_free(&eff);
            eff = next;
        }
        if (redundant) {
            dnf_free(&eff);
            continue;
        }
        if (ret == 0 && eff.n == 0 && p->stacked) {
            dnf_free(&eff);
            continue;
        }
        if (ret == 0 && eff.n == 0)
            ret = bh_error_set(err, EINVAL,
                               "%s:%u: this line never takes effect: earlier lines for the same "
                               "syscall already decide every call it matches",
                               fname, l->lineno);
        if (ret == 0 && l->action != p->default_action)
            for (size_t c = 0; c < eff.n && ret == 0; c++)
                if (add_rule(p, first_rule, l->nr, l->action, &eff.v[c]) < 0)
                    ret = bh_error_set(err, E2BIG,
                                       "%s:%u: the policy needs more than %d rules; simplify it",
                                       fname, l->lineno, MAX_RULES);
        dnf_free(&eff);
    }
    free(order);
    return ret;
}

static void free_lines(struct bh_policy *p)
{
    for (size_t i = 0; i < p->n_lines; i++)
        dnf_free(&p->lines[i].cond);
    free(p->lines);
    p->lines = NULL;
    p->n_lines = p->cap_lines = 0;
}

void bh_policy_free(struct bh_policy *policy)
{
    if (policy == NULL)
        return;
    free_lines(policy);
    for (size_t i = 0; i < policy->n_files; i++)
        free(policy->files[i]);
    free(policy->files);
    free(policy->rules);
    free(policy);
}

static void policy_freep(struct bh_policy **p)
{
    bh_policy_free(*p);
}

static void frames_free(struct frame *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(f[i].text);
}

static int parse_policy(const char *text, const char *name, const char *include_dir, bool stacked,
                        struct bh_policy **out, struct bh_error *err);

int bh_policy_parse(const char *text, const char *name, const char *include_dir,
                    struct bh_policy **out, struct bh_error *err)
{
    return parse_policy(text, name, include_dir, false, out, err);
}

int bh_policy_parse_stacked(const char *text, const char *name, struct bh_policy **out,
                            struct bh_error *err)
{
    return parse_policy(text, name, NULL, true, out, err);
}

static int parse_policy(const char *text, const char *name, const char *include_dir, bool stacked,
                        struct bh_policy **out, struct bh_error *err)
{
    if (text == NULL || out == NULL)
        return bh_error_set(err, EINVAL, "parse policy: no text given");
    if (name == NULL)
        name = "<policy>";
    __attribute__((cleanup(policy_freep))) struct bh_policy *p = calloc(1, sizeof(*p));
    if (p == NULL || add_file(p, name) < 0)
        return bh_error_errno(err, ENOMEM, "parse policy `%s`", name);
    p->stacked = stacked;
    cleanup_free struct parser *ps = calloc(1, sizeof(*ps));
    if (ps == NULL)
        return bh_error_errno(err, ENOMEM, "parse policy `%s`", name);
    ps->p = p;
    work_left = MAX_WORK;

    struct frame stack[MAX_INCLUDE_DEPTH + 1];
    size_t depth = 1;
    unsigned includes = 0;
    stack[0] = (struct frame){.text = NULL, .pos = text, .file = 0};
    char buf[MAX_LINE + 2];
    int ret = 0;

    while (depth > 0 && ret == 0) {
        struct frame *f = &stack[depth - 1];
        if (*f->pos == '\0') {
            free(f->text);
            depth--;
            continue;
        }
        const char *nl = strchr(f->pos, '\n');
        size_t len = nl ? (size_t)(nl - f->pos) : strlen(f->pos);
        f->lineno++;
        ps->file = f->file;
        ps->lineno = f->lineno;
        const char *fname = p->files[f->file];
        if (len > MAX_LINE) {
            ret = bh_error_set(err, EINVAL, "%s:%u: line is longer than %d characters", fname,
                               f->lineno, MAX_LINE);
            break;
        }
        memcpy(buf, f->pos, len);
        buf[len] = '\0';
        f->pos += len + (nl ? 1 : 0);

        const char *include = NULL;
        int r = lex(buf, ps->toks, &ps->n, ps->msg, sizeof(ps->msg));
        if (r == 0)
            r = parse_line(ps, &include);
        if (r < 0) {
            ret = bh_error_set(err, EINVAL, "%s:%u: %s", fname, f->lineno, ps->msg);
            break;
        }
        if (r == 0)
            continue;

        /* @include */
        if (include_dir == NULL) {
            ret = bh_error_set(err, EINVAL, "%s:%u: `@include %s` needs a policy directory", fname,
                               f->lineno, include);
            break;
        }
        if (depth > MAX_INCLUDE_DEPTH) {
            ret = bh_error_set(err, ELOOP, "%s:%u: includes nest deeper than %d", fname, f->lineno,
                               MAX_INCLUDE_DEPTH);
            break;
        }
        if (++includes > MAX_INCLUDES) {
            ret = bh_error_set(err, E2BIG, "%s:%u: more than %d includes", fname, f->lineno,
                               MAX_INCLUDES);
            break;
        }
        for (size_t k = 0; k < depth; k++)
            if (strcmp(p->files[stack[k].file], include) == 0) {
                ret = bh_error_set(err, ELOOP, "%s:%u: include cycle: `%s` is already being read",
                                   fname, f->lineno, include);
                break;
            }
        if (ret != 0)
            break;
        char *child = NULL;
        if (read_policy_file(include_dir, include, &child, err) < 0) {
            ret = bh_error_prefix(err, "%s:%u", fname, f->lineno);
            break;
        }
        if (add_file(p, include) < 0) {
            free(child);
            ret = bh_error_errno(err, ENOMEM, "%s:%u", fname, f->lineno);
            break;
        }
        stack[depth++] = (struct frame){.text = child,
                                        .pos = child,
                                        .file = (unsigned)(p->n_files - 1),
                                        .from_line = f->lineno};
    }
    if (ret != 0) {
        frames_free(stack, depth);
        return -1;
    }
    if (!p->has_default)
        return bh_error_set(err, EINVAL,
                            "%s: no `@default` line: say what happens to unlisted syscalls "
                            "(e.g. `@default errno EPERM`)",
                            name);
    if (finalize(p, err) < 0)
        return -1;
    free_lines(p);
    *out = steal_pointer(&p);
    return 0;
}

int bh_policy_load(const char *path, struct bh_policy **out, struct bh_error *err)
{
    if (path == NULL)
        return bh_error_set(err, EINVAL, "load policy: no path given");
    cleanup_free char *text = NULL;
    if (read_policy_file(NULL, path, &text, err) < 0)
        return -1;
    cleanup_free char *dir = strdup(path);
    if (dir == NULL)
        return bh_error_errno(err, ENOMEM, "load policy `%s`", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    const char *base = slash ? strrchr(path, '/') + 1 : path;
    return bh_policy_parse(text, base, dir, out, err);
}

bool bh_policy_has_notify(const struct bh_policy *policy)
{
    return policy != NULL && policy->has_notify;
}

static void ctx_releasep(scmp_filter_ctx *ctx)
{
    if (*ctx != NULL)
        seccomp_release(*ctx);
}

/* Builds the libseccomp filter for the policy; NULL with err filled on failure. */
static scmp_filter_ctx build_ctx(const struct bh_policy *policy, struct bh_error *err)
{
    scmp_filter_ctx ctx = seccomp_init(policy->default_action);
    if (ctx == NULL) {
        bh_error_set(err, EINVAL, "compile policy: libseccomp refused the default action");
        return NULL;
    }
    /* Another architecture's syscall entry (i386 int 0x80, x32 numbers) would
     * read a different table: the process dies instead. libseccomp also
     * routes x32 numbers on the x86_64 audit arch to this action. */
    int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r == 0)
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
    if (r == 0)
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    if (r < 0) {
        bh_error_errno(err, -r, "compile policy: set filter attributes");
        seccomp_release(ctx);
        return NULL;
    }
    for (size_t i = 0; i < policy->n_rules; i++) {
        const struct rule *ru = &policy->rules[i];
        r = seccomp_rule_add_array(ctx, ru->action, ru->nr, ru->n, ru->cmp);
        if (r < 0) {
            char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, ru->nr);
            bh_error_errno(err, -r, "compile policy: libseccomp refused a rule for `%s` (%d)",
                           name ? name : "?", ru->nr);
            free(name);
            seccomp_release(ctx);
            return NULL;
        }
    }
    return ctx;
}

int bh_policy_export_pfc(const struct bh_policy *policy, int fd, struct bh_error *err)
{
    if (policy == NULL)
        return bh_error_set(err, EINVAL, "export policy: nothing to export");
    __attribute__((cleanup(ctx_releasep))) scmp_filter_ctx ctx = build_ctx(policy, err);
    if (ctx == NULL)
        return -1;
    int r = seccomp_export_pfc(ctx, fd);
    if (r < 0)
        return bh_error_errno(err, -r, "export policy as pseudo-code");
    return 0;
}

size_t bh_policy_rule_count(const struct bh_policy *policy)
{
    return policy ? policy->n_rules : 0;
}

int bh_policy_compile(const struct bh_policy *policy, struct sock_fprog *prog, struct bh_error *err)
{
#if !defined(__x86_64__)
    (void)policy;
    (void)prog;
    return bh_error_set(err, ENOTSUP, "seccomp policies are written for x86_64 only");
#else
    if (policy == NULL || prog == NULL)
        return bh_error_set(err, EINVAL, "compile policy: nothing to compile");
    prog->len = 0;
    prog->filter = NULL;
    __attribute__((cleanup(ctx_releasep))) scmp_filter_ctx ctx = build_ctx(policy, err);
    if (ctx == NULL)
        return -1;
    int r;
    cleanup_close int fd = memfd_create("bh-policy", MFD_CLOEXEC);
    if (fd < 0)
        return bh_error_errno(err, errno, "compile policy: memfd_create");
    r = seccomp_export_bpf(ctx, fd);
    if (r < 0)
        return bh_error_errno(err, -r, "compile policy: export BPF");
    struct stat st;
    if (fstat(fd, &st) < 0)
        return bh_error_errno(err, errno, "compile policy: stat exported BPF");
    size_t size = (size_t)st.st_size;
    if (size == 0 || size % sizeof(struct sock_filter) != 0)
        return bh_error_set(err, EINVAL, "compile policy: exported BPF has odd size %zu", size);
    /* @beyond: a prologue ahead of libseccomp's program, for the x86_64
     * entry only (other architectures and x32 numbers, at or above bit 30,
     * go on to the program, which kills them). */
    const unsigned beyond = policy->has_beyond ? 6 : 0;
    size_t insns = size / sizeof(struct sock_filter) + beyond;
    if (insns > MAX_BPF_INSNS)
        return bh_error_set(err, E2BIG,
                            "compile policy: filter has %zu instructions, the kernel takes at "
                            "most %d; simplify the policy",
                            insns, MAX_BPF_INSNS);
    struct sock_filter *filter = malloc(insns * sizeof(struct sock_filter));
    if (filter == NULL)
        return bh_error_errno(err, ENOMEM, "compile policy");
    if (beyond) {
        const struct sock_filter pro[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 4),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000 /* __X32_SYSCALL_BIT */, 2, 0),
            BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, (uint32_t)highest_named_syscall(), 0, 1),
            BPF_STMT(BPF_RET | BPF_K, policy->beyond_action),
        };
        _Static_assert(sizeof(pro) / sizeof(pro[0]) == 6, "the prologue's length");
        memcpy(filter, pro, sizeof(pro));
    }
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, (char *)(filter + beyond) + got, size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            free(filter);
            return bh_error_errno(err, e, "compile policy: read back exported BPF");
        }
        got += (size_t)n;
    }
    prog->len = (unsigned short)insns;
    prog->filter = filter;
    return 0;
#endif
}

void bh_policy_prog_free(struct sock_fprog *prog)
{
    if (prog == NULL)
        return;
    free(prog->filter);
    prog->filter = NULL;
    prog->len = 0;
}

static bool prog_notifies(const struct sock_fprog *prog)
{
    for (unsigned i = 0; i < prog->len; i++) {
        const struct sock_filter *f = &prog->filter[i];
        if (f->code == (BPF_RET | BPF_K) &&
            (f->k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_USER_NOTIF)
            return true;
    }
    return false;
}

static int install(const struct sock_fprog *prog, bool want_listener, struct bh_error *err);

int bh_policy_install(const struct sock_fprog *prog, bool want_listener, struct bh_error *err)
{
    if (prog == NULL || prog->filter == NULL || prog->len == 0)
        return bh_error_set(err, EINVAL, "install seccomp filter: no compiled filter");
    int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
    if (nnp != 1)
        return bh_error_set(err, EPERM,
                            "install seccomp filter: no_new_privs is not set; set it with "
                            "prctl(PR_SET_NO_NEW_PRIVS, 1) first so the filter cannot be shed "
                            "through a setuid exec");
    return install(prog, want_listener, err);
}

int bh_policy_install_privileged(const struct sock_fprog *prog, bool want_listener,
                                 struct bh_error *err)
{
    if (prog == NULL || prog->filter == NULL || prog->len == 0)
        return bh_error_set(err, EINVAL, "install seccomp filter: no compiled filter");
    return install(prog, want_listener, err);
}

int bh_policy_install_unserved(const struct sock_fprog *prog, bool privileged, struct bh_error *err)
{
    if (prog == NULL || prog->filter == NULL || prog->len == 0)
        return bh_error_set(err, EINVAL, "install seccomp filter: no compiled filter");
    if (!privileged && prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
        return bh_error_set(err, EPERM, "install seccomp filter: no_new_privs is not set");
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) < 0)
        return bh_error_errno(err, errno, "install seccomp filter");
    return 0;
}

static int install(const struct sock_fprog *prog, bool want_listener, struct bh_error *err)
{
    if (prog_notifies(prog) && !want_listener)
        return bh_error_set(err, EINVAL,
                            "install seccomp filter: the policy sends syscalls to the sentry "
                            "(notify) but no listener was asked for; they would all fail");
    if (!want_listener) {
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) < 0)
            return bh_error_errno(err, errno, "install seccomp filter");
        return 0;
    }
    /* A guest killed while the sentry has not yet received its notification
     * must die, not wait: WAIT_KILLABLE_RECV (Linux 6.0) makes the wait
     * killable; older kernels get the plain listener. */
    unsigned long flags = SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
    long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, prog);
    if (fd < 0 && errno == EINVAL)
        fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, prog);
    if (fd < 0) {
        if (errno == EBUSY)
            return bh_error_errno(err, errno,
                                  "install seccomp filter with a listener: a filter already on "
                                  "this process has one (only one per process)");
        return bh_error_errno(err, errno, "install seccomp filter with a listener");
    }
    return (int)fd;
}
