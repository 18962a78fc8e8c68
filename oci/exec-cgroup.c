/* Owns `bulkhead exec --cgroup [CONTROLLERS:]PATH` (as runc): the new
 * process joins a sub-cgroup of its container's, in the named v1
 * controllers or in every hierarchy the container has. Checked before the
 * process is spawned; joined while it is held before exec, by the front
 * end as host root (the sandbox's ids own no cgroup file). Never above the
 * container's own cgroup: ".." is refused outright. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "oci-internal.h"

/* The controllers bh_cgroup_dir knows; NULL stands for the v2 hierarchy. */
static const char *const known_controllers[] = {"pids",   "memory",  "cpu", "cpuacct",
                                                "cpuset", "freezer", NULL};

/* Adds dir/sub to the targets unless dir is there already ("cpu,cpuacct"
 * is one directory; on v2 every controller is the same one). */
static int add_target(struct oci_exec_cgroups *t, const char *dir, const char *sub,
                      struct bh_error *err)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->dirs[i], dir) == 0) {
            if (strcmp(t->subs[i], sub) != 0)
                return bh_error_set(err, EINVAL,
                                    "--cgroup names two sub-cgroups (`%s`, `%s`) for the one "
                                    "hierarchy at `%s`",
                                    t->subs[i], sub, dir);
            return 0;
        }
    if (t->n >= OCI_EXEC_MAX_CGROUPS)
        return bh_error_set(err, E2BIG, "--cgroup: more than %d hierarchies", OCI_EXEC_MAX_CGROUPS);
    t->dirs[t->n] = strdup(dir);
    t->subs[t->n] = strdup(sub);
    if (t->dirs[t->n] == NULL || t->subs[t->n] == NULL)
        return bh_error_set(err, ENOMEM, "--cgroup: out of memory");
    t->n++;
    return 0;
}

/* sub without leading, trailing or doubled slashes; -1 when a component is
 * ".." (or "."), which could name something that is not below. */
static int clean_sub(const char *path, char *out, size_t size, struct bh_error *err)
{
    size_t n = 0;
    const char *p = path;
    out[0] = '\0';
    while (*p != '\0') {
        while (*p == '/')
            p++;
        size_t len = strcspn(p, "/");
        if (len == 0)
            break;
        if ((len == 2 && strncmp(p, "..", 2) == 0) || (len == 1 && p[0] == '.'))
            return bh_error_set(err, EINVAL,
                                "--cgroup: %s is not a sub cgroup path: a process of the "
                                "container may join only cgroups below the container's own",
                                path);
        if (n + len + 2 > size)
            return bh_error_set(err, ENAMETOOLONG, "--cgroup: `%s` is too long", path);
        if (n > 0)
            out[n++] = '/';
        memcpy(out + n, p, len);
        n += len;
        out[n] = '\0';
        p += len;
    }
    return 0;
}

static int resolve_one(struct bh_cgroup *cg, const char *arg, struct oci_exec_cgroups *t,
                       struct bh_error *err)
{
    const char *colon = strchr(arg, ':');
    char sub[1024];
    if (clean_sub(colon ? colon + 1 : arg, sub, sizeof(sub), err) < 0)
        return -1;
    if (colon == NULL) {
        for (size_t i = 0; i < BH_ARRAY_SIZE(known_controllers); i++) {
            const char *dir = bh_cgroup_dir(cg, known_controllers[i]);
            if (dir != NULL && add_target(t, dir, sub, err) < 0)
                return -1;
        }
        return 0;
    }
    char names[256];
    if ((size_t)(colon - arg) >= sizeof(names) || colon == arg)
        return bh_error_set(err, EINVAL, "--cgroup `%s`: name controllers before `:`", arg);
    memcpy(names, arg, (size_t)(colon - arg));
    names[colon - arg] = '\0';
    for (char *save = NULL, *c = strtok_r(names, ",", &save); c != NULL;
         c = strtok_r(NULL, ",", &save)) {
        const char *dir = NULL;
        for (size_t i = 0; i + 1 < BH_ARRAY_SIZE(known_controllers); i++)
            if (strcmp(c, known_controllers[i]) == 0)
                dir = bh_cgroup_dir(cg, c);
        if (dir == NULL)
            return bh_error_set(err, EINVAL,
                                "--cgroup `%s`: unknown controller `%s`: the container has "
                                "cgroups for pids, memory, cpu, cpuacct, cpuset and freezer "
                                "(those this host has as v1 hierarchies)",
                                arg, c);
        if (add_target(t, dir, sub, err) < 0)
            return -1;
    }
    return 0;
}

int oci_exec_cgroups_resolve(const char *cgroup_path, const struct oci_list *args,
                             struct oci_exec_cgroups *t, struct bh_error *err)
{
    memset(t, 0, sizeof(*t));
    if (args->n == 0)
        return 0;
    struct bh_cgroup *cg = NULL;
    if (bh_cgroup_open(cgroup_path, &cg, err) < 0)
        return bh_error_prefix(err, "--cgroup: the container's cgroup `%s`", cgroup_path);
    int rc = 0;
    for (size_t i = 0; i < args->n && rc == 0; i++)
        rc = resolve_one(cg, args->items[i], t, err);
    bh_cgroup_free(cg);
    if (rc < 0)
        oci_exec_cgroups_free(t);
    return rc;
}

int oci_exec_cgroups_join(const struct oci_exec_cgroups *t, pid_t pid, struct bh_error *err)
{
    for (size_t i = 0; i < t->n; i++) {
        cleanup_close int dirfd = open(t->dirs[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
        char rel[1200];
        snprintf(rel, sizeof(rel), "%s%scgroup.procs", t->subs[i], t->subs[i][0] ? "/" : "");
        /* Below the container's directory only, whatever the tree holds. */
        struct open_how how = {.flags = O_WRONLY | O_CLOEXEC,
                               .resolve =
                                   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
        cleanup_close int fd =
            dirfd < 0 ? -1 : (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
        char line[32];
        int len = snprintf(line, sizeof(line), "%d\n", (int)pid);
        if (fd < 0 || write(fd, line, (size_t)len) != len) {
            /* runc's words, which its users and tests look for. */
            char why[128];
            snprintf(why, sizeof(why), "%s", strerror(errno));
            why[0] = (char)tolower((unsigned char)why[0]);
            return bh_error_set(err, errno, "adding pid %d to cgroups: %s %s/%s: %s", (int)pid,
                                fd < 0 ? "open" : "write", t->dirs[i], rel, why);
        }
    }
    return 0;
}

void oci_exec_cgroups_free(struct oci_exec_cgroups *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->dirs[i]);
        free(t->subs[i]);
    }
    t->n = 0;
}
