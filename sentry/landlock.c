/* Owns Landlock: the ruleset that confines what the guest may read, write
 * and execute, plus (ABI 6) the scoping of abstract unix sockets and
 * signals, through the raw syscalls. Network ports are left alone so
 * loopback stays usable inside the sandbox's own netns. */
#include "landlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "kernel-compat.h"

/* The 6.1 headers stop at ABI 2: everything is defined here. */
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1

/* ABI 1 */
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_MAKE_SOCK (1ULL << 9)
#define LL_FS_MAKE_FIFO (1ULL << 10)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_MAKE_SYM (1ULL << 12)
/* ABI 2 */
#define LL_FS_REFER (1ULL << 13)
/* ABI 3 */
#define LL_FS_TRUNCATE (1ULL << 14)
/* ABI 4: network rights exist (bind/connect TCP); deliberately not handled. */
/* ABI 5 */
#define LL_FS_IOCTL_DEV (1ULL << 15)
/* ABI 6 */
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)
/* ABI 7: audit logging flags of landlock_restrict_self; the defaults (log
 * denials of this exec) are what we want, so none is passed. */
#define LL_RESTRICT_SELF_LOG_SAME_EXEC_OFF (1U << 0)
#define LL_RESTRICT_SELF_LOG_NEW_EXEC_ON (1U << 1)
#define LL_RESTRICT_SELF_LOG_SUBDOMAINS_OFF (1U << 2)

#define LL_FS_ABI1 ((1ULL << 13) - 1)

/* Rights that apply to a file (not a directory) in a path_beneath rule. */
#define LL_FS_FILE_RIGHTS                                                                          \
    (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)

struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net; /* ABI 4 */
    uint64_t scoped;             /* ABI 6 */
};

struct ll_path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

int bh_landlock_abi(void)
{
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
    return abi < 0 ? 0 : (int)abi;
}

static uint64_t handled_fs(int abi)
{
    uint64_t h = LL_FS_ABI1;
    if (abi >= 2)
        h |= LL_FS_REFER;
    if (abi >= 3)
        h |= LL_FS_TRUNCATE;
    if (abi >= 5)
        h |= LL_FS_IOCTL_DEV;
    return h;
}

static uint64_t rights_of(unsigned access)
{
    uint64_t r = 0;
    if (access & BH_LL_READ)
        r |= LL_FS_READ_FILE | LL_FS_READ_DIR;
    /* MAKE_CHAR/MAKE_BLOCK stay useless without CAP_MKNOD, which the guest
     * never has. */
    if (access & BH_LL_WRITE)
        r |= LL_FS_WRITE_FILE | LL_FS_REMOVE_DIR | LL_FS_REMOVE_FILE | LL_FS_MAKE_CHAR |
             LL_FS_MAKE_DIR | LL_FS_MAKE_REG | LL_FS_MAKE_SOCK | LL_FS_MAKE_FIFO |
             LL_FS_MAKE_BLOCK | LL_FS_MAKE_SYM | LL_FS_REFER | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV;
    if (access & BH_LL_EXECUTE)
        r |= LL_FS_EXECUTE;
    return r;
}

static int add_rule(int ruleset, const struct bh_landlock_rule *rule, uint64_t handled,
                    struct bh_error *err)
{
    const char *name = rule->path != NULL ? rule->path : "(fd)";
    cleanup_close int own = -1;
    int fd = rule->fd;
    if (fd < 0) {
        if (rule->path == NULL)
            return bh_error_set(err, EINVAL, "landlock rule has neither a path nor an fd");
        own = open(rule->path, O_PATH | O_CLOEXEC);
        if (own < 0)
            return bh_error_errno(err, errno, "landlock rule: open `%s`", rule->path);
        fd = own;
    }
    if (rule->access & ~(unsigned)(BH_LL_READ | BH_LL_WRITE | BH_LL_EXECUTE))
        return bh_error_set(err, EINVAL, "landlock rule for `%s`: unknown access bits %#x", name,
                            rule->access);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return bh_error_errno(err, errno, "landlock rule: stat `%s`", name);
    uint64_t allowed = rights_of(rule->access) & handled;
    if (!S_ISDIR(st.st_mode))
        allowed &= LL_FS_FILE_RIGHTS;
    if (allowed == 0)
        return 0; /* nothing to grant: the kernel would refuse an empty rule */
    struct ll_path_beneath_attr pb = {.allowed_access = allowed, .parent_fd = fd};
    if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &pb, 0) < 0)
        return bh_error_errno(err, errno, "landlock: add the rule for `%s`", name);
    return 0;
}

static int restrict_self(const struct bh_landlock_rule *rules, size_t n, bool set_nnp,
                         struct bh_error *err);

int bh_landlock_restrict(const struct bh_landlock_rule *rules, size_t n, struct bh_error *err)
{
    return restrict_self(rules, n, true, err);
}

int bh_landlock_restrict_privileged(const struct bh_landlock_rule *rules, size_t n,
                                    struct bh_error *err)
{
    return restrict_self(rules, n, false, err);
}

static int restrict_self(const struct bh_landlock_rule *rules, size_t n, bool set_nnp,
                         struct bh_error *err)
{
    int abi = bh_landlock_abi();
    if (abi < 1) {
        int e = errno;
        return bh_error_set(err, e == ENOSYS || e == EOPNOTSUPP ? e : ENOTSUP,
                            "Landlock is not available on this kernel (%s); the container and "
                            "kernel tiers need it: use a kernel built with CONFIG_SECURITY_"
                            "LANDLOCK and `landlock` in its lsm= list",
                            strerror(e));
    }
    /* Unprivileged callers must have no_new_privs; a sandbox sets it anyway,
     * so set it here rather than depend on the caller's order. */
    if (set_nnp && prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1 &&
        prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return bh_error_errno(err, errno, "landlock: set no_new_privs");

    uint64_t handled = handled_fs(abi);
    struct ll_ruleset_attr attr = {.handled_access_fs = handled};
    size_t attr_size = sizeof(attr.handled_access_fs);
    if (abi >= 6) {
        attr.scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL;
        attr_size = sizeof(attr);
    }
    cleanup_close int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
    if (ruleset < 0)
        return bh_error_errno(err, errno, "landlock: create a ruleset (ABI %d)", abi);
    for (size_t i = 0; i < n; i++)
        if (add_rule(ruleset, &rules[i], handled, err) < 0)
            return -1;
    if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
        return bh_error_errno(err, errno, "landlock: restrict this thread (ABI %d)", abi);
    return 0;
}
