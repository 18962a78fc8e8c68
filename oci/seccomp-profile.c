/* Owns turning the OCI LinuxSeccomp object (docker's profile) into extra
 * policy text that the sandbox loads as one more filter on top of the tier's
 * own: filters stack, so the guest gets the intersection. Each OCI rule
 * becomes one line "NAME? ACTION if argN OP V && ..." of the policy grammar
 * (seccomp-policies/README.md), in the profile's order. A profile that
 * allows by default (a deny list) is parsed as a stacked policy
 * (bh_policy_parse_stacked): the tier's filter still applies beneath it.
 * Also owns handing the listener of SCMP_ACT_NOTIFY rules to the profile's
 * seccomp agent (listenerPath), as runc 1.1 does, and what such an agent
 * needs of the container's tmpfs mounts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "oci-internal.h"
#include "policy.h"

struct action_map {
    const char *oci;
    const char *policy; /* NULL: errno with errnoRet */
};

static const struct action_map actions[] = {
    {"SCMP_ACT_KILL", "kill"}, {"SCMP_ACT_KILL_PROCESS", "kill"}, {"SCMP_ACT_KILL_THREAD", "kill"},
    {"SCMP_ACT_TRAP", "trap"}, {"SCMP_ACT_ERRNO", NULL},          {"SCMP_ACT_ALLOW", "allow"},
    {"SCMP_ACT_LOG", "log"},   {"SCMP_ACT_NOTIFY", "notify"},
};

static const struct action_map *find_action(const char *a)
{
    for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
        if (a != NULL && strcmp(a, actions[i].oci) == 0)
            return &actions[i];
    return NULL;
}

/* "allow", "errno 1", ... for one OCI action. */
static int action_text(json_t *obj, const char *key, json_t *errno_default, const char *where,
                       char *out, size_t len, struct bh_error *err)
{
    const char *a = json_string_value(json_object_get(obj, key));
    const struct action_map *m = find_action(a);
    if (m == NULL) {
        if (a != NULL && strcmp(a, "SCMP_ACT_TRACE") == 0)
            return bh_error_set(err, ENOTSUP,
                                "`%s` %s is not supported: a bulkhead guest has no tracer "
                                "(ptrace is refused at both tiers)",
                                where, a);
        return bh_error_set(err, EINVAL, "`%s` `%s` is not a seccomp action", where,
                            a ? a : "(none)");
    }
    if (m->policy != NULL) {
        snprintf(out, len, "%s", m->policy);
        return 0;
    }
    json_t *e = json_object_get(obj, "errnoRet");
    if (e == NULL || json_is_null(e))
        e = errno_default;
    long long v = 1; /* EPERM, as runc uses when no errnoRet is given */
    if (e != NULL && !json_is_null(e)) {
        if (!json_is_integer(e) || json_integer_value(e) < 1 || json_integer_value(e) > 4095)
            return bh_error_set(err, EINVAL, "`%s`: errnoRet must be 1..4095", where);
        v = json_integer_value(e);
    }
    snprintf(out, len, "errno %lld", v);
    return 0;
}

static const struct {
    const char *oci;
    const char *op;
} ops[] = {
    {"SCMP_CMP_EQ", "=="},        {"SCMP_CMP_NE", "!="}, {"SCMP_CMP_LT", "<"},
    {"SCMP_CMP_LE", "<="},        {"SCMP_CMP_GT", ">"},  {"SCMP_CMP_GE", ">="},
    {"SCMP_CMP_MASKED_EQ", NULL},
};

static int valid_name(const char *n)
{
    if (n == NULL || n[0] == '\0' || strlen(n) > 64)
        return 0;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return 0;
    return 1;
}

/* Syscalls a profile may not send to its agent: the guest makes them after
 * its filters are in place and before the agent holds the listener, so it
 * would wait for an answer no one can give (runc refuses write for the same
 * reason and in these words). */
static const char *const notify_refused[] = {"write", "sendto"};

static int check_notify_name(const char *name, struct bh_error *err)
{
    for (size_t i = 0; i < sizeof(notify_refused) / sizeof(notify_refused[0]); i++)
        if (strcmp(name, notify_refused[i]) == 0)
            return bh_error_set(err, EINVAL,
                                "SCMP_ACT_NOTIFY cannot be used for the %s syscall: the "
                                "container's process makes it before the seccomp agent holds "
                                "the listener, and would wait forever",
                                name);
    return 0;
}

/* listenerPath: an absolute path of a unix socket, needed exactly when a
 * rule notifies. */
static int check_listener(json_t *sc, bool notifies, struct bh_error *err)
{
    json_t *lp = json_object_get(sc, "listenerPath");
    if (lp != NULL && !json_is_null(lp) && !json_is_string(lp))
        return bh_error_set(err, EINVAL, "`listenerPath` must be a string");
    const char *path = json_string_value(lp);
    json_t *md = json_object_get(sc, "listenerMetadata");
    if (md != NULL && !json_is_null(md) && !json_is_string(md))
        return bh_error_set(err, EINVAL, "`listenerMetadata` must be a string");
    if (!notifies)
        return 0; /* as runc: an agent with nothing to answer is not called */
    if (path == NULL || path[0] == '\0')
        return bh_error_set(err, EINVAL,
                            "SCMP_ACT_NOTIFY needs `listenerPath`, the unix socket of the "
                            "seccomp agent that answers the notified syscalls");
    if (path[0] != '/' || strlen(path) >= 108)
        return bh_error_set(err, EINVAL,
                            "`listenerPath` `%s` must be an absolute path of a unix socket, "
                            "shorter than 108 bytes (abstract sockets are not accepted)",
                            path);
    return 0;
}

int oci_seccomp_to_policy(json_t *sc, char **text, bool *notifies, struct bh_error *err)
{
    *text = NULL;
    *notifies = false;
    json_t *errno_default = json_object_get(sc, "defaultErrnoRet");
    char def[64];
    if (action_text(sc, "defaultAction", errno_default, "defaultAction", def, sizeof(def), err) < 0)
        return -1;
    if (strcmp(def, "notify") == 0)
        return bh_error_set(err, EINVAL,
                            "SCMP_ACT_NOTIFY cannot be used as the default action: the "
                            "container's process could not report to bulkhead before its agent "
                            "holds the listener");
    json_t *calls = json_object_get(sc, "syscalls");
    if (calls != NULL && !json_is_null(calls) && !json_is_array(calls))
        return bh_error_set(err, EINVAL, "`syscalls` must be an array");
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (f == NULL)
        return bh_error_errno(err, errno, "seccomp profile");
    bool default_allows = strcmp(def, "allow") == 0 || strcmp(def, "log") == 0;
    bool restricts = !default_allows;
    fprintf(f, "# from the container's OCI seccomp profile (loaded as one more filter)\n");
    fprintf(f, "@default %s\n", def);
    /* runc's -ENOSYS rule: numbers above every syscall the profile's
     * architectures know fail with ENOSYS, not the default errno, so libc
     * falls back from a syscall newer than the profile. Newest filter wins
     * among equal actions, and the tier's filter says ENOSYS there too. */
    fprintf(f, "@beyond errno ENOSYS\n");
    size_t i;
    json_t *r;
    int rc = 0;
    json_array_foreach(calls, i, r)
    {
        char where[64];
        snprintf(where, sizeof(where), "syscalls[%zu]", i);
        json_t *names = json_object_get(r, "names");
        if (!json_is_object(r) || !json_is_array(names)) {
            rc = bh_error_set(err, EINVAL, "`%s` needs an array `names`", where);
            break;
        }
        char act[64];
        char awhere[80];
        snprintf(awhere, sizeof(awhere), "%s.action", where);
        if (action_text(r, "action", errno_default, awhere, act, sizeof(act), err) < 0) {
            rc = -1;
            break;
        }
        if (strcmp(act, "allow") != 0 && strcmp(act, "log") != 0)
            restricts = true;
        bool notify = strcmp(act, "notify") == 0;
        /* The condition: every arg comparison must hold; but when one
         * argument is compared more than once, each comparison is a rule of
         * its own (either may hold), as runc hands them to libseccomp. */
        char cond[1024] = "";
        int per_index[6] = {0};
        bool any_of = false;
        size_t k0;
        json_t *a0;
        json_array_foreach(json_object_get(r, "args"), k0, a0)
        {
            json_t *idx = json_object_get(a0, "index");
            if (json_is_integer(idx) && json_integer_value(idx) >= 0 &&
                json_integer_value(idx) <= 5 && ++per_index[json_integer_value(idx)] > 1)
                any_of = true;
        }
        json_t *args = json_object_get(r, "args");
        size_t k;
        json_t *a;
        json_array_foreach(args, k, a)
        {
            json_t *idx = json_object_get(a, "index");
            json_t *val = json_object_get(a, "value");
            json_t *two = json_object_get(a, "valueTwo");
            const char *op = json_string_value(json_object_get(a, "op"));
            if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
                json_integer_value(idx) > 5 || !json_is_integer(val)) {
                rc = bh_error_set(err, EINVAL, "`%s.args[%zu]` needs index 0..5 and a value", where,
                                  k);
                break;
            }
            const char *sym = NULL;
            bool found = false;
            for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
                if (op && strcmp(op, ops[o].oci) == 0) {
                    sym = ops[o].op;
                    found = true;
                }
            if (!found) {
                rc = bh_error_set(err, EINVAL, "`%s.args[%zu].op` `%s` is not known", where, k,
                                  op ? op : "(none)");
                break;
            }
            size_t cl = strlen(cond);
            unsigned long long v = (unsigned long long)json_integer_value(val);
            const char *join = cl == 0 ? "" : any_of ? " || " : " && ";
            if (sym != NULL)
                snprintf(cond + cl, sizeof(cond) - cl, "%sarg%lld %s %llu", join,
                         (long long)json_integer_value(idx), sym, v);
            else
                snprintf(cond + cl, sizeof(cond) - cl, "%sarg%lld & %llu == %llu", join,
                         (long long)json_integer_value(idx), v,
                         (unsigned long long)json_integer_value(two));
        }
        if (rc < 0)
            break;
        json_t *n;
        json_array_foreach(names, k, n)
        {
            const char *name = json_string_value(n);
            if (!valid_name(name)) {
                rc = bh_error_set(err, EINVAL, "`%s.names[%zu]` is not a syscall name", where, k);
                break;
            }
            if (notify && (rc = check_notify_name(name, err)) < 0)
                break;
            *notifies = *notifies || notify;
            /* `?`: names of other architectures or newer kernels are skipped. */
            fprintf(f, "%s? %s%s%s\n", name, act, cond[0] ? " if " : "", cond);
        }
        if (rc < 0)
            break;
    }
    fclose(f);
    if (rc == 0)
        rc = check_listener(sc, *notifies, err);
    if (rc < 0) {
        free(buf);
        return -1;
    }
    if (!restricts) {
        /* Allows everything: nothing to stack on the tier's filter. */
        free(buf);
        return 0;
    }
    *text = buf;
    return 0;
}

/* The agent's protocol (runc 1.1, the OCI ContainerProcessState): one
 * message on a fresh stream connection, the JSON state as data and the
 * listener as SCM_RIGHTS, named by "fds": ["seccompFd"]. Then we close our
 * copy: the agent alone holds the listener, and when it goes the notified
 * syscalls fail with ENOSYS instead of waiting. */
int oci_seccomp_agent_send(json_t *seccomp, const char *state_json, pid_t pid, int listener,
                           struct bh_error *err)
{
    const char *path = json_string_value(json_object_get(seccomp, "listenerPath"));
    const char *meta = json_string_value(json_object_get(seccomp, "listenerMetadata"));
    json_t *state = json_loads(state_json, 0, NULL);
    json_t *msg =
        json_pack("{s:s,s:[s],s:I,s:s,s:o?}", "ociVersion", OCI_VERSION, "fds", "seccompFd", "pid",
                  (json_int_t)pid, "metadata", meta ? meta : "", "state", state);
    cleanup_free char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    if (text == NULL)
        return bh_error_errno(err, ENOMEM, "seccomp agent message");
    if (path == NULL || strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return bh_error_set(err, EINVAL, "`listenerPath` is not a usable socket path");
    /* Non-blocking: an agent whose backlog is full (or that never reads)
     * makes create fail with a reason instead of hang. */
    cleanup_close int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return bh_error_errno(err, errno,
                              "failed to connect with seccomp agent specified in the seccomp "
                              "profile (listenerPath `%s`)",
                              path);
    struct iovec iov = {.iov_base = text, .iov_len = strlen(text)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm = {0};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof(cm.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &listener, sizeof(int));
    ssize_t n = sendmsg(s, &mh, MSG_NOSIGNAL);
    if (n < 0)
        return bh_error_errno(err, errno, "send the seccomp listener to the agent at `%s`", path);
    if ((size_t)n != iov.iov_len)
        return bh_error_set(err, EIO, "send the seccomp listener to the agent at `%s`: short write",
                            path);
    return 0;
}

/* One tmpfs as the host makes it: options (m->data, "mode=1777,size=64k")
 * one by one, flags as mount attributes, detached. */
static int host_tmpfs(const struct bh_mount *m, struct bh_error *err)
{
    cleanup_close int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0)
        return bh_error_errno(err, errno, "tmpfs on `%s`: fsopen", m->destination);
    cleanup_free char *data = m->data ? strdup(m->data) : NULL;
    char *save = NULL;
    for (char *opt = data ? strtok_r(data, ",", &save) : NULL; opt != NULL;
         opt = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(opt, '=');
        if (eq != NULL)
            *eq = '\0';
        if (fsconfig(fs, eq ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, opt, eq ? eq + 1 : NULL, 0) <
            0)
            return bh_error_errno(err, errno, "tmpfs on `%s`: option `%s`", m->destination, opt);
    }
    if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return bh_error_errno(err, errno, "tmpfs on `%s`: create", m->destination);
    unsigned attr = ((m->flags & MS_RDONLY) ? MOUNT_ATTR_RDONLY : 0) |
                    ((m->flags & MS_NOSUID) ? MOUNT_ATTR_NOSUID : 0) |
                    ((m->flags & MS_NODEV) ? MOUNT_ATTR_NODEV : 0) |
                    ((m->flags & MS_NOEXEC) ? MOUNT_ATTR_NOEXEC : 0) |
                    ((m->flags & MS_NOATIME) ? MOUNT_ATTR_NOATIME : 0) |
                    ((m->flags & MS_NODIRATIME) ? MOUNT_ATTR_NODIRATIME : 0);
    int fd = fsmount(fs, FSMOUNT_CLOEXEC, attr);
    if (fd < 0)
        return bh_error_errno(err, errno, "tmpfs on `%s`: fsmount", m->destination);
    return fd;
}

/* An agent acts on the container's files from the host as host root (runc's
 * example agent makes the directories it is asked for through
 * /proc/PID/root): runc's containers have no user namespace, bulkhead's
 * always have one, and a tmpfs the sandbox mounts belongs to it, where host
 * root is unmapped, so every file the agent made there failed with
 * EOVERFLOW. With an agent, each tmpfs (but /dev, whose nodes the sandbox
 * makes) is made on the host side instead and moved into place: the
 * container's root still writes it (as its mapped id, the tmpfs's mode
 * permitting), the agent too, and the container cannot remount it. Not
 * idmapped: host root would be unmapped through the idmap as well. */
int oci_seccomp_agent_tmpfs(struct bh_sandbox_spec *spec, struct bh_error *err)
{
    if (!spec->extra_policy_listener || spec->tier >= BH_TIER_KERNEL)
        return 0;
    for (size_t i = 0; i < spec->n_mounts; i++) {
        struct bh_mount *m = &spec->mounts[i];
        if (m->has_tree_fd || (m->flags & MS_BIND) || m->type == NULL ||
            strcmp(m->type, "tmpfs") != 0 || m->destination == NULL ||
            strcmp(m->destination, "/dev") == 0)
            continue;
        int fd = host_tmpfs(m, err);
        if (fd < 0)
            return bh_error_prefix(err, "for the seccomp agent");
        m->has_tree_fd = true;
        m->tree_fd = fd;
        m->idmap = false;
    }
    return 0;
}
