/* Host side shared by the end-to-end suites: running a built binary with a
 * timeout and capturing its output, the build directory from BULKHEAD_BUILD,
 * removing a test's files, and a bulkheadd on a temporary socket with the
 * control-protocol requests the suites send it. Criterion-aware: helpers
 * skip or fail the running test themselves. */
#ifndef BH_E2E_SHARED_HARNESS_H
#define BH_E2E_SHARED_HARNESS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/file.h>
#include <sys/types.h>

#include "control.pb-c.h"
#include "error.h"

/* The suites drive the test hooks (BULKHEAD_TEST_BREAK): only the test build
 * has them. */
#ifndef BH_TEST_HOOKS
#error                                                                                             \
    "the tests are built by make test, test-run, unit or e2e (into build/test, with BH_TEST_HOOKS)"
#endif

struct run_result {
    int status; /* exit code, 128+signal, or -1 when it timed out */
    char *out;
    char *err;
    double seconds;
};

/* A started program whose output goes to memfds (a chatty child never
 * blocks); ended by h_finish. */
struct h_job {
    pid_t pid;
    int out, err;
};

double h_now(void);
/* BULKHEAD_BUILD; skips the test when it is not set. */
const char *h_build(void);
/* BULKHEAD_BUILD/name, malloc'd. */
char *h_path(const char *name);
/* All of a memfd, malloc'd and NUL-terminated. */
char *h_read_fd(int fd);
/* Removes path and everything under it (symlinks are not followed). */
void h_remove_tree(const char *path);
/* Whether a and b sit in different pid namespaces (false if either is gone):
 * the sentry is in one of its own, the start-up's first child is not. */
bool h_pidns_differs(pid_t a, pid_t b);
/* out = the cgroup rel (e.g. "bulkhead/ID") in controller's hierarchy (NULL:
 * the unified one), where the core puts it (bh_cgroup_hierarchy), so a
 * leftover check holds on v1, hybrid and v2 hosts. Fails the test when the
 * layout has no such hierarchy. */
void h_cgroup_dir(const char *controller, const char *rel, char *out, size_t size);
/* DIR/bundle/rootfs with the mount points an OCI config names (usr, etc,
 * proc, dev, tmp, sys, root) and merged-/usr links (bin, sbin, lib, lib64),
 * so a config can bind the host's /usr read-only. */
void h_bundle_skeleton(const char *dir);
/* Writes TEXT to DIR/REL (the test fails if it cannot). */
void h_write_file(const char *dir, const char *rel, const char *text);
/* Makes a FIFO at path and opens it read-write (so neither side's open
 * blocks): a job given it as stdin waits for a byte or for its last writer,
 * this fd, to close. The test fails if it cannot. */
int h_held_fifo(const char *path);

/* Forks argv with extra environment entries (NULL-terminated, may be NULL),
 * stdin from stdin_path (NULL: /dev/null) and cwd (NULL: ours). */
struct h_job h_spawn(char *const argv[], char *const extra_env[], const char *stdin_path,
                     const char *cwd);
/* Exit code, 128+signal, or -1 after timeout_s (the job, ours, is then
 * killed); out and err (may be NULL) get its output. */
int h_finish(struct h_job *j, int timeout_s, char **out, char **err);
struct run_result h_run(char *const argv[], char *const extra_env[], const char *stdin_path,
                        int timeout_s);
void h_free(struct run_result *r);
/* Runs `bulkhead --root DIR/root --log DIR/log.json ARGS...` (args
 * NULL-terminated, at most 26) into *r. */
void h_bulkhead_in(const char *dir, const char *const *args, int timeout_s, struct run_result *r);

/* `bulkhead spec --bundle BUNDLE` run in DIR, then BUNDLE/config.json
 * loaded (a json_t *, the caller's to json_dump_file and json_decref; void *
 * so that this header needs no jansson). The test fails if either fails. */
void *h_spec_config(const char *dir, const char *bundle);

/* bulkhead do --tier TIER [pre...] [args from ap...]: pre is NULL-terminated
 * (may be NULL), ap ends with NULL. */
struct run_result h_do_va(const char *tier, char *const extra_env[], int timeout_s,
                          const char *const *pre, va_list ap);
/* h_do_va with no extra environment and no pre-arguments. */
struct run_result h_do(const char *tier, int timeout_s, ...);
/* BULKHEAD_REQUIRE_KERNEL=1 (CI exports it): a test that cannot get the
 * kernel tier fails instead of skipping, so a regression that breaks only
 * the kernel tier cannot hide as a skip. */
bool h_kernel_required(void);
/* Skips the running test with the message, or fails it with the same
 * message when h_kernel_required(). For every skip whose cause is a missing
 * kernel tier (or a bulkhead that does not run at all). */
#define h_skip_kernel(...)                                                                         \
    do {                                                                                           \
        if (h_kernel_required())                                                                   \
            cr_assert_fail(                                                                        \
                "BULKHEAD_REQUIRE_KERNEL=1, and the kernel tier is not there: " __VA_ARGS__);      \
        cr_skip_test(__VA_ARGS__);                                                                 \
    } while (0)
/* Skips (with the reason bulkhead gave) unless the kernel tier runs here;
 * fails instead under BULKHEAD_REQUIRE_KERNEL=1. */
void h_require_kernel_tier(void);

/* ---- bulkheadd ----------------------------------------------------------- */

/* Held shared by every bulkheadd test, exclusively by the one that measures
 * latency alone (Criterion runs tests in parallel). */
#define H_SUPERVISOR_TEST_LOCK "/tmp/bulkhead-e2e-supervisor.lock"

struct h_daemon {
    pid_t pid;
    char sock[108];
    char tmp[64];
    char tier[16]; /* the tier the running daemon serves */
    int lock;      /* H_SUPERVISOR_TEST_LOCK while a daemon of ours runs */
    int lock_op;   /* LOCK_SH or LOCK_EX */
    int stop_ms;   /* how long a SIGTERM'd daemon gets before SIGKILL */
};
#define H_DAEMON_INIT(stop)                                                                        \
    {                                                                                              \
        .pid = -1, .lock = -1, .lock_op = LOCK_SH, .stop_ms = (stop)                               \
    }

int h_connect(const char *sock_path);
/* Waits until the daemon pid (our child) accepts a connection on sock_path:
 * 0; -1 once it has exited (it is reaped). Only a hang is bounded: start-up
 * at the kernel tier runs the tier's probe sandboxes, which under ASan at
 * load 30+ took longer than the 30 s the suites used to allow; past
 * H_LISTEN_BOUND_S it is killed and the test fails. */
#define H_LISTEN_BOUND_S 180
int h_wait_listening(pid_t pid, const char *sock_path);
/* Ends the daemon (SIGTERM, then SIGKILL), removes its temp dir and drops
 * the lock. */
void h_daemon_stop(struct h_daemon *d);
/* Starts bulkheadd at tier in a new temp dir made from tmp_template with
 * `extra` args; 0 when it listens, -1 (its stderr in msg) when it refused
 * to start; fails the test when it does not listen within 30 s. */
int h_daemon_launch(struct h_daemon *d, const char *tmp_template, const char *tier,
                    const char *extra, char *msg, size_t msg_size);
/* The tier BULKHEADD_TEST_TIER, else kernel, else container (said on
 * stderr, prefixed with who); skips when it starts at none. */
void h_daemon_start(struct h_daemon *d, const char *who, const char *tmp_template,
                    const char *extra);

/* Sends req (version 1 unless set); 0 or -1. */
int h_send(int fd, Bulkhead__Control__Request *req);
/* The answer, or NULL (err filled when not NULL) when the connection ended
 * or timed out. */
Bulkhead__Control__Response *h_recv(int fd, int timeout_ms, struct bh_error *err);

void h_open_req(Bulkhead__Control__Request *req, Bulkhead__Control__OpenSession *o,
                const char *owner);
void h_cell_req(Bulkhead__Control__Request *req, Bulkhead__Control__RunCell *c, const char *id,
                const char *lang, const char *code, uint64_t timeout_ms,
                Bulkhead__Control__File **files, size_t n_files);
void h_close_req(Bulkhead__Control__Request *req, Bulkhead__Control__CloseSession *c,
                 const char *id);

/* The session id of an OpenSession answer (malloc'd); fails the test on
 * any other answer. */
char *h_session_id(const Bulkhead__Control__Response *r);

#endif
