/* bulkheadd's internal interfaces: configuration, the per-session sandbox
 * ("box": a keeper process, the sandbox it owns and the session agent inside),
 * sessions and the request dispatcher. Private to supervisor/. */
#ifndef BULKHEADD_H
#define BULKHEADD_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "control.pb-c.h"
#include "error.h"
#include "sandbox.h"

struct bh_cgroup;

#define BHD_VERSION "0.1.0"
/* 2: OpenSession.reuse; version 1 requests are still served */
#define BHD_PROTOCOL 2
/* What a keeper and a daemon say to each other (see box.c): a daemon adopts
 * only keepers of this version. */
#define BHD_KEEPER_PROTOCOL 1
#define BHD_STATE_ROOT "/run/bulkhead/sessions"

struct bhd_config {
    const char *socket_path;
    const char *socket_group; /* NULL: mode 0600 */
    enum bh_tier tier;
    const char *rootfs;
    const char *audit_path; /* NULL: stderr; "-" too */
    const char *runners_dir;
    const char *prestart; /* "python", "python,javascript", ""; NULL: "python" */
    int64_t idle_ms;
    int64_t lifetime_ms;
    int64_t per_owner;
    int64_t max_sessions;
    int64_t evict_min_idle_ms; /* crowding evicts no session used more recently */
    int64_t owner_calls;
    int64_t disk_bytes;
    int64_t memory_bytes;
    int64_t pids;
    int64_t cpu_millis;
    int64_t output_bytes;
    int64_t max_timeout_ms;
    int64_t default_timeout_ms;
    int64_t max_frame;
    int64_t frame_timeout_ms;
    int64_t max_connections;
    int64_t warm;
    int64_t grace_ms;         /* keepers without a daemon wait this long */
    int64_t handover_wait_ms; /* a hand-over waits this long for calls */
    const char *state_dir;    /* keepers' sockets and records, root only */
    bool keep_sessions;       /* SIGTERM hands sessions over */
    bool state_dir_default;   /* state_dir is derived from the socket path */
    bool debug;
};

/* Sources the agent gets at start, read once from the runners directory. */
struct bhd_runners {
    char *agent;
    char *python;
    char *javascript;
};

/* One sandbox with its session agent, owned by a keeper process: the keeper
 * creates, waits for and destroys the sandbox, and destroys it as soon as its
 * control socket to us ends, so a bulkheadd killed with -9 leaves nothing. */
struct bhd_box {
    pid_t keeper;
    char name[64]; /* the sandbox's id, and so its cgroup under bulkhead/ */
    int keeper_fd; /* closing it tells the keeper to destroy the sandbox */
    int chan;      /* frames to and from the agent */
    pid_t sentry;  /* host pid of the sandbox's pid 1 (tier none: the agent) */
    enum bh_tier tier;
    int64_t created_ms;
    int64_t create_ms; /* how long creation took */
    bool dead;
    bool adopted;              /* its keeper is another daemon's child */
    int pidfd;                 /* adopted: the keeper's pidfd; else -1 */
    pthread_mutex_t tell_lock; /* guards keeper_fd between threads */
    struct bh_cgroup *cg;      /* the sandbox's cgroup, read only; NULL: none */
};

/* What a box's cgroup counted so far; a call compares before and after. */
struct bhd_box_counters {
    uint64_t oom_kills;
    uint64_t pids_max_hits;
    uint64_t memory_max_usage;
    uint64_t cpu_usage_ns;
};

struct bhd_cell_out {
    int exit_code;
    bool timed_out, has_value, fresh_interpreter, state_kept, files_persist;
    char *value;
    char *out, *err;
    size_t out_len, err_len;
    uint64_t out_total, err_total;
    uint8_t **images;
    size_t *image_lens;
    size_t n_images;
    uint64_t run_ms;
    uint64_t disk_used;
    bool disk_known;
    char *files_error; /* files could not be written: nothing ran */
    bool box_died;     /* the agent did not answer properly: the sandbox is gone */
    /* the sandbox was gone before the cell reached it: nothing ran */
    bool not_dispatched;
};

/* daemon.c: shared by every part of the daemon, so none depends on another
 * for it. The log and the audit stream write under bhd_output_lock. */
extern struct bhd_config bhd_cfg;
extern struct bhd_runners bhd_runners;
extern pthread_mutex_t bhd_output_lock;
/* Connections accepted and not yet ended (each holds a thread), counted from
 * the accept on: the end of a hand-over waits for those whose thread has not
 * started serving yet, or their callers' requests would be lost. */
extern atomic_long bhd_open_connections;
void bhd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int64_t bhd_unix_ms(void);

/* box.c */
int bhd_runners_load(const char *dir, struct bhd_runners *r, struct bh_error *err);
int bhd_box_create(const char *prestart, struct bhd_box **out, struct bh_error *err);
void bhd_box_destroy(struct bhd_box *box);
/* Frees our side only: the keeper keeps the sandbox for the next daemon. */
void bhd_box_release(struct bhd_box *box);
/* Sends the keeper one frame: op, then record as JSON (NULL: none). */
int bhd_box_tell(struct bhd_box *box, char op, json_t *record);
/* Sends op ('X' or 'R') and closes the keeper socket. */
void bhd_box_end_keeper(struct bhd_box *box, char op);
/* Adopts the keeper listening at STATE/<fp>.sock (dirfd: STATE): 1 with the
 * box and the keeper's record, 0 when no keeper listens there, -1 (err)
 * when it was refused (then told to end its sandbox) or failed. */
int bhd_box_adopt(int dirfd, const char *fp, struct bhd_box **out, json_t **record,
                  struct bh_error *err);
/* Waits (bounded: tries of ~10 ms) for the keeper to end; true when it did. */
bool bhd_box_wait_keeper(struct bhd_box *box, int tries);
/* Removes the cgroup a keeper that is gone left behind. */
void bhd_box_remove_remains(enum bh_tier tier, const char *name);
/* -1 when the box has no cgroup (tier none) or it cannot be read. */
int bhd_box_counters(struct bhd_box *box, struct bhd_box_counters *c);
int bhd_box_run(struct bhd_box *box, Bulkhead__Control__RunCell *req, uint64_t timeout_ms,
                struct bhd_cell_out *out, struct bh_error *err);
void bhd_cell_out_free(struct bhd_cell_out *o);
/* Outside checks of a live box; fills report (a TierReport) and returns the tier. */
enum bh_tier bhd_box_verify(struct bhd_box *box, Bulkhead__Control__TierReport *report);
void bhd_tier_report_free(Bulkhead__Control__TierReport *r);
/* Bytes used in the box's working directory, or -1. */
int64_t bhd_box_disk_used(struct bhd_box *box);
/* Replaces invalid UTF-8 with U+FFFD; returns a malloc'd NUL-terminated string. */
char *bhd_utf8_sanitize(const char *s, size_t len, size_t *out_len);
bool bhd_utf8_valid(const char *s, size_t len);

/* server.c */
int bhd_server_init(struct bh_error *err);
void bhd_serve_connection(int fd);

/* The daemon's own command line (a keeper re-executes it) and, in a keeper,
 * its --internal-keeper argument "CTL,CHAN,NAME,WORKDIR". */
extern int bhd_argc;
extern char **bhd_argv;
extern const char *bhd_keeper_args;
/* Runs the keeper of one session sandbox; never returns. */
__attribute__((noreturn)) void bhd_keeper_exec_main(const char *args);
/* Answers at_capacity and closes: more connections than --max-connections. */
void bhd_refuse_connection(int fd);
/* Counts a new connection in (bhd_open_connections) if --max-connections
 * allows, or if another uid holding two more than the caller's uid gives up
 * its longest idle one; false: refuse it. */
bool bhd_admit_connection(int fd);
void *bhd_maintenance_thread(void *arg);
void bhd_shutdown_sessions(void);
/* Lets calls in flight finish (--handover-wait), answers what is still
 * running "may have run", and leaves every session to its keeper. */
void bhd_handover_sessions(void);
/* From now on no call starts (they are answered "retry"): the first step of
 * a hand-over. */
void bhd_handover_begin(void);
/* Makes or checks the state directory and adopts every session a previous
 * daemon left there; -1 when the directory cannot be trusted. */
int bhd_adopt_sessions(struct bh_error *err);

#endif
