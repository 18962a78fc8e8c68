/* The bulkhead command line: global flags shared by every subcommand, and
 * the one place errors are reported (stderr, and the --log file in the
 * format containerd's shim reads). */
#ifndef BH_CLI_H
#define BH_CLI_H

#include <stdbool.h>

#include "error.h"

struct cli_globals {
    const char *root;     /* --root: state directory (runc default /run/bulkhead) */
    const char *log_path; /* --log */
    bool log_json;        /* --log-format json */
    bool debug;           /* --debug */
    bool systemd_cgroup;  /* --systemd-cgroup: accepted, cgroupfs is used */
};

/* Exit code for a refusal before anything started (as docker run uses). */
#define CLI_EXIT_REFUSED BH_EXIT_REFUSED
/* `exec` that could not run its process (runc's status for it, which
 * callers tell apart from the process's own exit codes). */
#define CLI_EXIT_EXEC_FAILED BH_EXIT_FAILED

typedef int (*cli_command_fn)(const struct cli_globals *g, int argc, char **argv);

struct cli_command {
    const char *name;
    cli_command_fn run;
    const char *summary;
};

/* Parses the global flags that come before the subcommand; returns the index
 * of the subcommand in argv, or -1 with err filled. */
int cli_parse_globals(int argc, char **argv, struct cli_globals *g, struct bh_error *err);

/* Reports an error once: "bulkhead: MSG" on stderr and a JSON line in --log. */
void cli_report_error(const struct cli_globals *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A debug or info line to --log (and stderr with --debug). */
void cli_log(const struct cli_globals *g, const char *level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Subcommands, one file each (oci/do.c, oci/runtime.c, oci/tier-verify.c, oci/client.c, ...). */
int cmd_do(const struct cli_globals *g, int argc, char **argv);
int cmd_tier(const struct cli_globals *g, int argc, char **argv);
int cmd_create(const struct cli_globals *g, int argc, char **argv);
int cmd_start(const struct cli_globals *g, int argc, char **argv);
int cmd_run(const struct cli_globals *g, int argc, char **argv);
int cmd_state(const struct cli_globals *g, int argc, char **argv);
int cmd_kill(const struct cli_globals *g, int argc, char **argv);
int cmd_delete(const struct cli_globals *g, int argc, char **argv);
int cmd_exec(const struct cli_globals *g, int argc, char **argv);
int cmd_ps(const struct cli_globals *g, int argc, char **argv);
int cmd_pause(const struct cli_globals *g, int argc, char **argv);
int cmd_resume(const struct cli_globals *g, int argc, char **argv);
int cmd_update(const struct cli_globals *g, int argc, char **argv);
int cmd_events(const struct cli_globals *g, int argc, char **argv);
int cmd_features(const struct cli_globals *g, int argc, char **argv);
int cmd_spec(const struct cli_globals *g, int argc, char **argv);
int cmd_list(const struct cli_globals *g, int argc, char **argv);
int cmd_checkpoint(const struct cli_globals *g, int argc, char **argv);
int cmd_restore(const struct cli_globals *g, int argc, char **argv);
int cmd_session(const struct cli_globals *g, int argc, char **argv);
int cmd_describe(const struct cli_globals *g, int argc, char **argv);

#endif
