/* bulkhead: the runc-compatible runtime, `bulkhead do`, and the clients of
 * the tier report and of bulkheadd. main parses global flags and dispatches. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "oci-internal.h"

#define BH_OCI_VERSION "0.1.0"
/* The runc release whose command line and integration suite this follows. */
#define BH_RUNC_COMPAT_VERSION "1.1.5"
#ifndef BH_GIT_COMMIT
#define BH_GIT_COMMIT "unknown"
#endif

static const struct cli_command commands[] = {
    {"do", cmd_do, "run one command in a new sandbox (no image needed)"},
    {"tier", cmd_tier, "verify and print the isolation tier this host provides"},
    {"create", cmd_create, "create a container from an OCI bundle"},
    {"start", cmd_start, "start a created container"},
    {"run", cmd_run, "create and start a container"},
    {"state", cmd_state, "print a container's state as JSON"},
    {"kill", cmd_kill, "send a signal to a container's process"},
    {"delete", cmd_delete, "delete a container and everything it holds"},
    {"exec", cmd_exec, "run a new process in a running container"},
    {"ps", cmd_ps, "list a container's processes"},
    {"pause", cmd_pause, "freeze every process of a container"},
    {"resume", cmd_resume, "thaw a paused container"},
    {"update", cmd_update, "change a container's resource limits"},
    {"events", cmd_events, "print a container's events and statistics"},
    {"features", cmd_features, "print the runtime's features as JSON"},
    {"spec", cmd_spec, "write a default config.json"},
    {"list", cmd_list, "list containers"},
    {"checkpoint", cmd_checkpoint, "checkpoint a container (refused: names the layer CRIU loses)"},
    {"restore", cmd_restore, "restore a container from a checkpoint (refused, as checkpoint)"},
    {"session", cmd_session, "open, run, close or list bulkheadd sessions"},
    {"describe", cmd_describe, "print what a bulkheadd serves"},
};

static bool command_exists(const char *name)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0)
            return true;
    return false;
}

/* Front ends of bulkhead's own (not runc's) with richer help of their own. */
static bool is_own_help(const char *name)
{
    return strcmp(name, "do") == 0 || strcmp(name, "tier") == 0 || strcmp(name, "session") == 0 ||
           strcmp(name, "describe") == 0;
}

static int commands_run_help(const struct cli_globals *g, const char *name)
{
    char *args[] = {(char *)name, "--help", NULL};
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0)
            return commands[i].run(g, 2, args);
    return CLI_EXIT_REFUSED;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: bulkhead [--root DIR] [--log FILE] [--log-format text|json] [--debug]\n"
                 "                [--systemd-cgroup] [--default-tier kernel|container]\n"
                 "                [--default-memory SIZE] [--default-pids N] [--default-nofile N]\n"
                 "                [--default-file-size SIZE] COMMAND [ARGS...]\n"
                 "\n"
                 "--default-*: limits for containers whose config.json sets none (defaults:\n"
                 "memory 2g without swap, pids 1024, nofile 1024/4096, file size 2g); usable\n"
                 "in daemon.json runtimeArgs, and listed in the state's annotation\n"
                 "dev.bulkhead.default-limits (the pids default as tasks=N: a ceiling on the\n"
                 "container's user namespace, with pids.max left at max)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n`bulkhead COMMAND --help` describes one command.\n");
}

int main(int argc, char **argv)
{
    struct cli_globals g;
    struct bh_error err = {0};
    int idx = cli_parse_globals(argc, argv, &g, &err);
    if (idx < 0) {
        cli_report_error(&g, "%s", err.msg);
        usage(stderr);
        return CLI_EXIT_REFUSED;
    }
    if (idx >= argc) {
        usage(stderr);
        return CLI_EXIT_REFUSED;
    }
    const char *name = argv[idx];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        oci_help_main(stdout, command_exists);
        return 0;
    }
    /* `help CMD`, `h CMD` and `CMD -h` in runc's format and with its exit
     * status (a topic that does not exist is an error). */
    bool help_cmd = strcmp(name, "help") == 0 || strcmp(name, "h") == 0;
    if (help_cmd && idx + 1 >= argc) {
        oci_help_main(stdout, command_exists);
        return 0;
    }
    const char *topic = help_cmd ? argv[idx + 1] : name;
    bool want_help = help_cmd || (idx + 1 < argc && (strcmp(argv[idx + 1], "-h") == 0 ||
                                                     strcmp(argv[idx + 1], "--help") == 0));
    if (want_help && command_exists(topic) && oci_help_exists(topic) && !is_own_help(topic)) {
        oci_help_print(stdout, topic);
        return 0;
    }
    if (want_help && !command_exists(topic)) {
        cli_report_error(&g, "No help topic for '%s'", topic);
        return CLI_EXIT_REFUSED;
    }
    if (help_cmd)
        return commands_run_help(&g, topic);
    if (strcmp(name, "--version") == 0 || strcmp(name, "-v") == 0 || strcmp(name, "version") == 0) {
        /* runc's three lines, which scripts parse; the first names both. */
        printf("bulkhead version %s (runc version %s command line)\ncommit: %s\nspec: %s\n",
               BH_OCI_VERSION, BH_RUNC_COMPAT_VERSION, BH_GIT_COMMIT, OCI_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(commands[i].name, name) == 0)
            return commands[i].run(&g, argc - idx, argv + idx);
    }
    cli_report_error(&g, "unknown command `%s`; `bulkhead --help` lists them", name);
    return CLI_EXIT_REFUSED;
}
