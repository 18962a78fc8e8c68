/* Owns the per-container state directory ROOT/ID: its creation (which makes
 * ids unique), the lock every command takes on it (flock on the directory
 * itself), state.json written atomically, and the container's status as
 * computed from the live process, so a crash never leaves a stale status. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "oci-internal.h"

int oci_id_validate(const char *id, struct bh_error *err)
{
    size_t len = id ? strlen(id) : 0;
    if (len == 0)
        return bh_error_set(err, EINVAL, "a container id is required");
    if (len > 1024)
        return bh_error_set(err, EINVAL, "container id is longer than 1024 characters");
    if (strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
        return bh_error_set(err, EINVAL, "container id `%s` is not valid", id);
    for (const char *p = id; *p; p++) {
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '+' && *p != '-' && *p != '.')
            return bh_error_set(err, EINVAL,
                                "container id `%s` is not valid: use letters, digits, _ + - .", id);
    }
    return 0;
}

int oci_state_path(const char *root, const char *id, char *buf, size_t len, struct bh_error *err)
{
    if (oci_id_validate(id, err) < 0)
        return -1;
    if ((size_t)snprintf(buf, len, "%s/%s", root, id) >= len)
        return bh_error_set(err, ENAMETOOLONG, "state directory `%s/%s` is too long", root, id);
    return 0;
}

static int mkdir_p(const char *path, mode_t mode)
{
    char buf[4096];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* Bounded: a holder that never lets go (a stuck process) must not hang
 * every later command, delete --force included. */
#define LOCK_WAIT_MS 10000

static int lock_dir(int fd, const char *path, struct bh_error *err)
{
    for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; waited += 5) {
        if (errno != EINTR && errno != EWOULDBLOCK)
            return bh_error_errno(err, errno, "lock `%s`", path);
        if (waited >= LOCK_WAIT_MS)
            return bh_error_set(err, EBUSY,
                                "`%s` stayed locked by another bulkhead command for %d s (a "
                                "create or delete still running, or stuck): retry when it has "
                                "ended, or end it",
                                path, LOCK_WAIT_MS / 1000);
        usleep(5000);
    }
    return 0;
}

int oci_state_dir_create(const char *root, const char *id, int *dirfd, struct bh_error *err)
{
    char path[4096];
    if (oci_state_path(root, id, path, sizeof(path), err) < 0)
        return -1;
    if (mkdir_p(root, 0700) < 0)
        return bh_error_errno(err, errno, "make state root `%s`", root);
    if (mkdir(path, 0700) < 0) {
        if (errno == EEXIST)
            return bh_error_set(err, EEXIST, "container `%s` already exists", id);
        return bh_error_errno(err, errno, "make state directory `%s`", path);
    }
    cleanup_close int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return bh_error_errno(err, errno, "open `%s`", path);
    if (lock_dir(fd, path, err) < 0)
        return -1;
    *dirfd = steal_fd(&fd);
    return 0;
}

void oci_state_free(struct oci_state *st)
{
    free(st->id);
    free(st->bundle);
    free(st->rootfs);
    free(st->created);
    free(st->owner);
    free(st->cgroup_path);
    if (st->annotations)
        json_decref(st->annotations);
    if (st->hooks)
        json_decref(st->hooks);
    if (st->tier_report)
        json_decref(st->tier_report);
    memset(st, 0, sizeof(*st));
}

static char *dup_member(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? strdup(s) : NULL;
}

int oci_state_open(const char *root, const char *id, int *dirfd, struct oci_state *st,
                   struct bh_error *err)
{
    char path[4096];
    memset(st, 0, sizeof(*st));
    if (oci_state_path(root, id, path, sizeof(path), err) < 0)
        return -1;
    cleanup_close int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return bh_error_set(err, ENOENT, "container `%s` does not exist", id);
        return bh_error_errno(err, errno, "open `%s`", path);
    }
    if (lock_dir(fd, path, err) < 0)
        return -1;
    cleanup_close int sfd = openat(fd, "state.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (sfd < 0) {
        /* Removed while we waited for the lock, or a create that never finished. */
        if (errno == ENOENT)
            return bh_error_set(err, ENOENT, "container `%s` does not exist", id);
        return bh_error_errno(err, errno, "open `%s/state.json`", path);
    }
    json_error_t jerr;
    json_t *doc = json_loadfd(sfd, 0, &jerr);
    if (doc == NULL || !json_is_object(doc)) {
        if (doc)
            json_decref(doc);
        return bh_error_set(err, EINVAL, "`%s/state.json` is corrupt: %s", path, jerr.text);
    }
    st->id = dup_member(doc, "id");
    st->pid = (pid_t)json_integer_value(json_object_get(doc, "pid"));
    st->pid_start = (unsigned long long)json_integer_value(json_object_get(doc, "pid_start"));
    st->bundle = dup_member(doc, "bundle");
    st->rootfs = dup_member(doc, "rootfs");
    st->created = dup_member(doc, "created");
    st->owner = dup_member(doc, "owner");
    st->cgroup_path = dup_member(doc, "cgroup_path");
    st->started = json_is_true(json_object_get(doc, "started"));
    st->caps = (uint64_t)json_integer_value(json_object_get(doc, "caps"));
    st->paused = json_is_true(json_object_get(doc, "paused"));
    st->nnp_forced = json_is_true(json_object_get(doc, "nnp_forced"));
    const char *tier = json_string_value(json_object_get(doc, "tier"));
    st->tier = BH_TIER_KERNEL;
    if (tier)
        bh_tier_parse(tier, &st->tier, NULL);
    json_t *a = json_object_get(doc, "annotations");
    st->annotations = json_is_object(a) ? json_incref(a) : json_object();
    json_t *h = json_object_get(doc, "hooks");
    st->hooks = json_is_object(h) ? json_incref(h) : NULL;
    json_t *r = json_object_get(doc, "tier_report");
    st->tier_report = r && !json_is_null(r) ? json_incref(r) : NULL;
    json_decref(doc);
    if (st->id == NULL || st->bundle == NULL) {
        oci_state_free(st);
        return bh_error_set(err, EINVAL, "`%s/state.json` is missing id or bundle", path);
    }
    *dirfd = steal_fd(&fd);
    return 0;
}

const char *oci_cgroup_of(const struct oci_state *st, char *buf, size_t len)
{
    if (st->cgroup_path)
        return st->cgroup_path;
    snprintf(buf, len, "bulkhead/%s", st->id);
    return buf;
}

int oci_need_id(const struct cli_globals *g, const char *cmd, int argc, char **argv, int pos,
                const char **id)
{
    if (pos >= argc) {
        cli_report_error(g, "%s: a container id is required (`bulkhead %s --help`)", cmd, cmd);
        return -1;
    }
    *id = argv[pos];
    struct bh_error err = {0};
    if (oci_id_validate(*id, &err) < 0) {
        cli_report_error(g, "%s: %s", cmd, err.msg);
        return -1;
    }
    return 0;
}

int oci_open(const struct cli_globals *g, const char *cmd, const char *id, int *dirfd,
             struct oci_state *st)
{
    struct bh_error err = {0};
    if (oci_state_open(g->root, id, dirfd, st, &err) < 0) {
        cli_report_error(g, "%s: %s", cmd, err.msg);
        return -1;
    }
    return 0;
}

int oci_write_pid_file(const char *path, pid_t pid, struct bh_error *err)
{
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%d", pid);
    cleanup_free char *abs = NULL;
    if (path[0] != '/') {
        char cwd[4096];
        if (getcwd(cwd, sizeof(cwd)) == NULL || asprintf(&abs, "%s/%s", cwd, path) < 0)
            abs = NULL;
    }
    return oci_write_file_atomic(AT_FDCWD, abs ? abs : path, buf, (size_t)n, err);
}

int oci_write_file_atomic(int dirfd, const char *name, const char *data, size_t len,
                          struct bh_error *err)
{
    char tmp[512];
    snprintf(tmp, sizeof(tmp), ".%s.tmp.%d", name[0] == '/' ? "pidfile" : name, getpid());
    /* For absolute paths (pid files) the temp file goes beside the target. */
    char tmp_path[4096];
    const char *target = name;
    int at = dirfd;
    if (name[0] == '/') {
        const char *slash = strrchr(name, '/');
        snprintf(tmp_path, sizeof(tmp_path), "%.*s/%s", (int)(slash - name), name, tmp);
        at = AT_FDCWD;
    } else {
        snprintf(tmp_path, sizeof(tmp_path), "%s", tmp);
    }
    cleanup_close int fd =
        openat(at, tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return bh_error_errno(err, errno, "create `%s`", tmp_path);
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            int e = errno;
            unlinkat(at, tmp_path, 0);
            return bh_error_errno(err, e, "write `%s`", tmp_path);
        }
        off += (size_t)w;
    }
    if (renameat(at, tmp_path, at, target) < 0) {
        int e = errno;
        unlinkat(at, tmp_path, 0);
        return bh_error_errno(err, e, "rename `%s` to `%s`", tmp_path, target);
    }
    return 0;
}

int oci_state_write(int dirfd, const struct oci_state *st, struct bh_error *err)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "id", json_string(st->id));
    json_object_set_new(doc, "pid", json_integer(st->pid));
    json_object_set_new(doc, "pid_start", json_integer((json_int_t)st->pid_start));
    json_object_set_new(doc, "bundle", json_string(st->bundle));
    json_object_set_new(doc, "rootfs", json_string(st->rootfs ? st->rootfs : ""));
    json_object_set_new(doc, "created", json_string(st->created ? st->created : ""));
    json_object_set_new(doc, "owner", json_string(st->owner ? st->owner : ""));
    if (st->cgroup_path)
        json_object_set_new(doc, "cgroup_path", json_string(st->cgroup_path));
    json_object_set_new(doc, "started", json_boolean(st->started));
    json_object_set_new(doc, "caps", json_integer((json_int_t)st->caps));
    json_object_set_new(doc, "paused", json_boolean(st->paused));
    json_object_set_new(doc, "nnp_forced", json_boolean(st->nnp_forced));
    json_object_set_new(doc, "tier", json_string(bh_tier_name(st->tier)));
    json_object_set(doc, "annotations", st->annotations ? st->annotations : json_object());
    if (st->hooks)
        json_object_set(doc, "hooks", st->hooks);
    if (st->tier_report)
        json_object_set(doc, "tier_report", st->tier_report);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    if (text == NULL)
        return bh_error_set(err, ENOMEM, "serialise state.json");
    int rc = oci_write_file_atomic(dirfd, "state.json", text, strlen(text), err);
    free(text);
    return rc;
}

static int remove_tree_at(int dirfd)
{
    DIR *d = fdopendir(dirfd);
    if (d == NULL) {
        close(dirfd);
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (unlinkat(dirfd, de->d_name, 0) == 0)
            continue;
        if (errno == EISDIR || errno == EPERM) {
            int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                remove_tree_at(sub);
            unlinkat(dirfd, de->d_name, AT_REMOVEDIR);
        }
    }
    closedir(d);
    return 0;
}

int oci_state_remove(const char *root, const char *id, struct bh_error *err)
{
    char path[4096];
    if (oci_state_path(root, id, path, sizeof(path), err) < 0)
        return -1;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        return bh_error_errno(err, errno, "open `%s`", path);
    }
    remove_tree_at(fd);
    if (rmdir(path) < 0 && errno != ENOENT)
        return bh_error_errno(err, errno, "remove `%s`", path);
    return 0;
}

unsigned long long oci_pid_start_time(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    /* Fields after the comm: state is field 3, starttime field 22. */
    p += 2;
    char state = *p;
    if (state == 'Z' || state == 'X')
        return 0;
    int field = 3;
    while (*p && field < 22) {
        if (*p == ' ')
            field++;
        p++;
    }
    return strtoull(p, NULL, 10);
}

bool oci_pid_alive(pid_t pid, unsigned long long start)
{
    if (pid <= 0)
        return false;
    unsigned long long now = oci_pid_start_time(pid);
    return now != 0 && (start == 0 || now == start);
}

const char *oci_state_status(const struct oci_state *st)
{
    if (!oci_pid_alive(st->pid, st->pid_start))
        return "stopped";
    if (!st->started)
        return "created";
    return st->paused ? "paused" : "running";
}

json_t *oci_state_json(const struct oci_state *st, const char *status)
{
    json_t *o = json_object();
    json_object_set_new(o, "ociVersion", json_string(OCI_VERSION));
    json_object_set_new(o, "id", json_string(st->id));
    json_object_set_new(o, "pid", json_integer(strcmp(status, "stopped") == 0 ? 0 : st->pid));
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "bundle", json_string(st->bundle));
    json_object_set_new(o, "rootfs", json_string(st->rootfs ? st->rootfs : ""));
    json_object_set_new(o, "created", json_string(st->created ? st->created : ""));
    json_object_set_new(o, "owner", json_string(st->owner ? st->owner : ""));
    json_t *ann = json_deep_copy(st->annotations ? st->annotations : json_object());
    json_object_set_new(ann, "dev.bulkhead.tier.requested", json_string(bh_tier_name(st->tier)));
    if (st->nnp_forced)
        json_object_set_new(
            ann, "dev.bulkhead.no-new-privileges",
            json_string("set although process.noNewPrivileges is false: no_new_privs "
                        "is part of the kernel tier (the sentry's broker relies on ids "
                        "that no exec can change)"));
    if (st->tier_report) {
        char *r = json_dumps(st->tier_report, JSON_COMPACT);
        if (r) {
            json_object_set_new(ann, "dev.bulkhead.tier.report", json_string(r));
            free(r);
        }
        json_t *verified = json_object_get(st->tier_report, "tier");
        if (json_is_string(verified))
            json_object_set(ann, "dev.bulkhead.tier.verified", verified);
    }
    json_object_set_new(o, "annotations", ann);
    return o;
}

void oci_rfc3339_now(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char base[64];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%09ldZ", base, ts.tv_nsec);
}

const char *oci_sentry_dir(const char *root, const char *id, int dirfd, char *buf, size_t len)
{
    /* sun_path holds 108 bytes; docker's state dirs are longer, so then the
     * directory is named through an fd this process holds. */
    int n = snprintf(buf, len, "%s/%s", root, id);
    if ((n < 0 || (size_t)n + sizeof("/sentry.sock") > 108) && dirfd >= 0)
        snprintf(buf, len, "/proc/self/fd/%d", dirfd);
    return buf;
}
