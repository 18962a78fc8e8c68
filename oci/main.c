/* bulkhead: the runc-compatible runtime, `bulkhead do`, and the clients of
 * the tier report and of bulkheadd. main parses global flags and dispatches. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

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
                 "dev.bulkhead.default-limits\n\ncommands:\n");
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
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-v") == 0 || strcmp(name, "version") == 0) {
        printf("bulkhead version 0.1.0\nspec: 1.2.0\n");
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(commands[i].name, name) == 0)
            return commands[i].run(&g, argc - idx, argv + idx);
    }
    cli_report_error(&g, "unknown command `%s`; `bulkhead --help` lists them", name);
    return CLI_EXIT_REFUSED;
}
