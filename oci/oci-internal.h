/* Shared between the runc-compatible commands of oci/: the parsed bundle
 * (config.json), the per-container state directory, hooks, and the small
 * argument parser every subcommand uses. */
#ifndef BH_OCI_INTERNAL_H
#define BH_OCI_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <termios.h>

#include "cli.h"
#include "error.h"
#include "sandbox.h"

#define OCI_VERSION "1.2.0"
#define OCI_ANNOTATION_TIER "dev.bulkhead.tier"
/* Set by bulkhead: the default limits applied where config.json set none. */
#define OCI_ANNOTATION_DEFAULT_LIMITS "dev.bulkhead.default-limits"
#define OCI_ANNOTATION_REPORT_SOCKET "dev.bulkhead.report-socket"

/* ---- config.json (oci/config.c) ----------------------------------------- */

enum oci_hook_kind {
    OCI_HOOK_PRESTART = 0,
    OCI_HOOK_CREATE_RUNTIME,
    OCI_HOOK_CREATE_CONTAINER,
    OCI_HOOK_START_CONTAINER,
    OCI_HOOK_POSTSTART,
    OCI_HOOK_POSTSTOP,
    OCI_HOOK_COUNT,
};

struct oci_config {
    struct bh_sandbox_spec spec;
    char *oci_version;
    char *bundle;        /* absolute, canonical */
    json_t *doc;         /* the whole document (owned) */
    json_t *annotations; /* borrowed from doc; an object, maybe empty */
    json_t *hooks;       /* borrowed from doc or NULL; validated */
    json_t *seccomp;     /* borrowed from doc or NULL */
    json_t *devices;     /* linux.devices, borrowed from doc or NULL; validated */
    bool no_new_privileges;
    bool ns_listed[BH_NS_COUNT]; /* in linux.namespaces (else inherited where the tier allows) */
    char *report_socket;         /* dev.bulkhead.report-socket or NULL */
    /* Things accepted but not enforced; each is logged as a warning. */
    char **warnings;
    size_t n_warnings;
};

/* Reads BUNDLE/config.json and validates every field bulkhead uses. Errors
 * name the field ("`process.args` must be ...") or the JSON line/column. */
int oci_config_load(const char *bundle, struct oci_config *cfg, struct bh_error *err);
/* Refuses a proc or sysfs mount point (the config's, or the base /proc and
 * /sys) that is a symlink in the rootfs, as runc does (it exits 1). */
int oci_mount_points_check(const struct bh_sandbox_spec *spec, struct bh_error *err);
/* Parses from text (tests, `run` from a given file); bundle must be absolute. */
int oci_config_parse(const char *text, const char *bundle, struct oci_config *cfg,
                     struct bh_error *err);
void oci_config_free(struct oci_config *cfg);
/* Puts back into l the default limits a container was created with (from
 * its state's OCI_ANNOTATION_DEFAULT_LIMITS). */
void oci_limits_as_created(json_t *annotations, struct bh_limits *l);

/* An OCI Process object (exec --process) into p (strings malloc'd). */
int oci_process_parse(json_t *obj, const char *where, struct bh_process *p, bool *nnp,
                      struct bh_error *err);
void oci_process_free(struct bh_process *p);
/* LinuxResources (update --resources) into limits (only fields set). */
int oci_resources_parse(json_t *obj, const char *where, struct bh_limits *limits,
                        struct bh_error *err);
/* linux.resources.blockIO (weights, per-device weights, throttles) into
 * limits; NULL is nothing asked. */
int oci_blockio_parse(json_t *bio, const char *where, struct bh_limits *l, struct bh_error *err);
/* Hooks object validation. */
int oci_hooks_validate(json_t *hooks, struct bh_error *err);
/* ociVersion accepted: 1.0.x to 1.3.0. */
int oci_version_check(const char *v, struct bh_error *err);
/* Translates an OCI LinuxSeccomp object into extra policy text (oci/seccomp-profile.c).
 * *text is malloc'd, or NULL when the profile adds nothing; *notifies says a
 * rule sends its syscall to the agent at listenerPath. */
int oci_seccomp_to_policy(json_t *seccomp, char **text, bool *notifies, struct bh_error *err);
/* Sends the listener of the profile's SCMP_ACT_NOTIFY rules to its agent at
 * listenerPath with the container's state (runc's seccomp agent protocol). */
int oci_seccomp_agent_send(json_t *seccomp, const char *state_json, pid_t pid, int listener,
                           struct bh_error *err);
/* With an agent (container tier), the spec's tmpfs mounts are made on the
 * host side (bh_mount.tree_fd), where the agent, host root, may write them;
 * closed with the bind trees (oci_close_bind_trees). */
int oci_seccomp_agent_tmpfs(struct bh_sandbox_spec *spec, struct bh_error *err);

/* Before create joins an existing cgroup (oci/resources.c): refuses a frozen
 * one (its processes would never run) and warns when processes are in it,
 * as runc does. */
int oci_cgroup_precheck(const struct cli_globals *g, const char *path, struct bh_error *err);

/* linux.devices (oci/devices.c): shape checked at parse; applied per tier
 * at create (own nodes accepted, host nodes bound at the container tier,
 * refused with the reason at the kernel tier). */
int oci_devices_validate(json_t *devs, struct bh_error *err);
int oci_devices_apply(struct oci_config *cfg, struct bh_error *err);
/* linux.resources.devices (the device cgroup) into l->device_rules, in
 * order, followed by the nodes every container needs (runc's defaults). */
int oci_device_rules_parse(json_t *rules, const char *where, struct bh_limits *l,
                           struct bh_error *err);

/* ---- state directory (oci/state.c) -------------------------------------- */

struct oci_state {
    char *id;
    pid_t pid;
    unsigned long long pid_start; /* /proc/PID/stat starttime: guards against pid reuse */
    char *bundle;
    char *rootfs;
    char *created; /* RFC 3339 */
    char *owner;
    json_t *annotations; /* object (owned) */
    json_t *hooks;       /* object or NULL (owned): poststop runs at delete */
    json_t *tier_report; /* verified report or NULL (owned) */
    char *cgroup_path;
    enum bh_tier tier;
    uint64_t caps; /* the guests' capability mask, for the live checks */
    bool started;
    bool paused;
    /* process.noNewPrivileges was false, yet no_new_privs is set (the
     * sandbox sets it at every tier): said in the state's annotations. */
    bool nnp_forced;
};

/* Container ids: [A-Za-z0-9_+.-]{1,1024}, not "." or "..". */
int oci_id_validate(const char *id, struct bh_error *err);
/* ROOT/ID into buf. */
int oci_state_path(const char *root, const char *id, char *buf, size_t len, struct bh_error *err);
/* Makes ROOT/ID (fails if it exists) and returns it locked. */
int oci_state_dir_create(const char *root, const char *id, int *dirfd, struct bh_error *err);
/* Opens and locks ROOT/ID and reads its state.json. errno ENOENT when the
 * container does not exist (message "container `ID` does not exist"). */
int oci_state_open(const char *root, const char *id, int *dirfd, struct oci_state *st,
                   struct bh_error *err);
int oci_state_write(int dirfd, const struct oci_state *st, struct bh_error *err);
void oci_state_free(struct oci_state *st);
/* Removes ROOT/ID and everything in it. */
int oci_state_remove(const char *root, const char *id, struct bh_error *err);
/* "created", "running", "paused" or "stopped", from the live process. */
const char *oci_state_status(const struct oci_state *st);
bool oci_pid_alive(pid_t pid, unsigned long long start);
unsigned long long oci_pid_start_time(pid_t pid);
/* runc's `state` JSON. */
json_t *oci_state_json(const struct oci_state *st, const char *status);
/* Atomic small file write (tmp + rename), no trailing newline added. */
int oci_write_file_atomic(int dirfd, const char *path, const char *data, size_t len,
                          struct bh_error *err);
/* The pid file of create, run and exec: relative paths are taken from our
 * working directory, as runc does; written atomically. */
int oci_write_pid_file(const char *path, pid_t pid, struct bh_error *err);
void oci_rfc3339_now(char *buf, size_t len);
/* The directory holding sentry.sock as a path short enough for a unix
 * socket: ROOT/ID, or /proc/self/fd/DIRFD when that is too long (dirfd must
 * stay open while the path is used). */
const char *oci_sentry_dir(const char *root, const char *id, int dirfd, char *buf, size_t len);

/* ---- host-side bind trees (oci/trees.c) -------------------------------- */

/* Clones every bind source as a detached tree with its flags set, so the
 * sandbox never needs to reach the host path itself. */
int oci_prepare_bind_trees(struct bh_sandbox_spec *spec, struct bh_error *err);
void oci_close_bind_trees(struct bh_sandbox_spec *spec);
/* Makes every missing mount point of the spec inside the rootfs (confined to
 * it with RESOLVE_IN_ROOT): directories, or empty files for file binds. */
int oci_make_mount_points(const struct bh_sandbox_spec *spec, struct bh_error *err);
/* After create, before the container's process runs: stacks an idmapped
 * copy (the sandbox's user namespace) of every writable bind on its
 * destination, so the container's root writes host-root files as under runc. */

/* ---- hooks (oci/hooks.c) ------------------------------------------------- */

/* Runs every hook of one kind with the state JSON on stdin. With
 * stop_on_error false (poststart, poststop) failures are only logged. */
int oci_hooks_run(const struct cli_globals *g, json_t *hooks, enum oci_hook_kind kind,
                  const char *state_json, pid_t ns_pid, const char *cgroup_path,
                  struct bh_error *err);
/* Whether the config has hooks that run before pivot_root (prestart,
 * createRuntime, createContainer): the create then pauses the sentry there. */
bool oci_hooks_at_create(json_t *hooks);
/* At that pause: prestart and createRuntime in the runtime's namespaces,
 * then createContainer in the container's cgroup (cgroup_path) and the
 * namespaces of ns_pid (the sentry) with root, the root's path in its mount
 * namespace, as cwd; what they left running is ended after them. */
int oci_hooks_run_at_create(const struct cli_globals *g, json_t *hooks, const char *state_json,
                            pid_t ns_pid, const char *root, const char *cgroup_path,
                            struct bh_error *err);
/* startContainer hooks at `start`: each a guest process the sentry (at
 * sentry_dir) spawns, with the bundle's process's ids and capabilities and
 * the container's confinement, as runc runs them in its init. */
int oci_hooks_run_start(const struct cli_globals *g, json_t *hooks, const char *state_json,
                        const char *sentry_dir, const char *bundle, struct bh_error *err);
/* The bundle's config.json `process` object (a new reference), for exec and
 * startContainer hooks. */
json_t *oci_bundle_process(const char *bundle, struct bh_error *err);

/* ---- argument parsing (oci/args.c) -------------------------------------- */

enum oci_opt_kind { OCI_OPT_BOOL, OCI_OPT_STRING, OCI_OPT_LIST };

struct oci_opt {
    const char *name; /* long name without "--" */
    char short_name;  /* 0: none */
    enum oci_opt_kind kind;
    void *value; /* bool *, const char **, or struct oci_list * */
};

struct oci_list {
    const char **items;
    size_t n;
};

/* Parses flags up to the first positional argument; returns the index of
 * that argument (argc when there is none), or -1 with err filled. "--help"
 * sets *help. */
int oci_parse_args(int argc, char **argv, const struct oci_opt *opts, size_t n_opts, bool *help,
                   struct bh_error *err);
void oci_list_free(struct oci_list *l);

/* ---- exec --cgroup (oci/exec-cgroup.c) --------------------------------- */

#define OCI_EXEC_MAX_CGROUPS 16
/* Where an exec'd process goes: sub-cgroup subs[i] of the container's
 * directory dirs[i], one per hierarchy. */
struct oci_exec_cgroups {
    char *dirs[OCI_EXEC_MAX_CGROUPS];
    char *subs[OCI_EXEC_MAX_CGROUPS];
    size_t n;
};
/* Checks every --cgroup [CONTROLLERS:]PATH against the container's cgroup
 * (nothing above it, known controllers only) before anything is spawned. */
int oci_exec_cgroups_resolve(const char *cgroup_path, const struct oci_list *args,
                             struct oci_exec_cgroups *t, struct bh_error *err);
/* Moves host pid into every target (the process is held before exec). */
int oci_exec_cgroups_join(const struct oci_exec_cgroups *t, pid_t pid, struct bh_error *err);
void oci_exec_cgroups_free(struct oci_exec_cgroups *t);

/* ---- shared by the commands (oci/runtime.c) ------------------------------ */

struct oci_create_args {
    const char *bundle;
    const char *pid_file;
    const char *console_socket;
    const char *preserve_fds;
    bool no_pivot; /* --no-pivot: move + chroot instead of pivot_root */
    /* Foreground run: with process.terminal and no console_socket, the pty
     * comes to this relay (listening once create returns). NULL: detached. */
    struct oci_tty *tty;
};

int oci_do_create(const struct cli_globals *g, const char *id, const struct oci_create_args *a,
                  pid_t *pid_out);
int oci_do_start(const struct cli_globals *g, const char *id);
int oci_do_delete(const struct cli_globals *g, const char *id, bool force);
/* The id at argv[pos], validated; reports and returns -1 otherwise. */
int oci_need_id(const struct cli_globals *g, const char *cmd, int argc, char **argv, int pos,
                const char **id);
/* Opens and locks a container's state, reporting errors. */
int oci_open(const struct cli_globals *g, const char *cmd, const char *id, int *dirfd,
             struct oci_state *st);
const char *oci_cgroup_of(const struct oci_state *st, char *buf, size_t len);
char *oci_state_text(const struct oci_state *st, const char *status);
int oci_parse_signal(const char *s, int *sig);

/* ---- help pages (oci/help.c) -------------------------------------------- */

/* runc's layout: "NAME:\n   bulkhead CMD (runc CMD) - summary\n\nUSAGE: ...". */
bool oci_help_exists(const char *command);
int oci_help_print(FILE *out, const char *command);
/* The command list names only commands for which exists() is true. */
void oci_help_main(FILE *out, bool (*exists)(const char *command));

/* ---- foreground terminal (oci/tty.c) ------------------------------------ */

/* process.terminal without --console-socket: bulkhead takes the pty master
 * itself on a private socket and relays it to its own stdio. */
struct oci_tty {
    char dir[64];
    char path[96]; /* the console socket to give create or exec */
    int listen_fd;
    int master;
    int host_fd; /* our own terminal, or -1 */
    struct termios saved;
    bool raw;
    int stop_pipe[2];
    pthread_t thread;
    bool running;
};

void oci_tty_init(struct oci_tty *t);
int oci_tty_listen(struct oci_tty *t, struct bh_error *err);
/* Receives the master (sent while the process is set up) and starts relaying. */
int oci_tty_attach(struct oci_tty *t, struct bh_error *err);
/* Copies our terminal's size to the container's (SIGWINCH). */
void oci_tty_resize(struct oci_tty *t);
/* Drains what the process wrote, restores our terminal, removes the socket. */
void oci_tty_finish(struct oci_tty *t);

#endif
