/* Placeholder: replaced by its owner. */
#include <stdio.h>
#include "cli.h"
int cmd_create(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`create` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_start(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`start` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_run(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`run` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_state(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`state` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_kill(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`kill` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_delete(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`delete` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_exec(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`exec` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_ps(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`ps` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_pause(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`pause` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_resume(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`resume` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_update(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`update` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_events(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`events` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_features(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`features` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_spec(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`spec` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_list(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`list` is not built yet");
    return CLI_EXIT_REFUSED;
}
