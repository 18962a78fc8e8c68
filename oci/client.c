/* Placeholder: replaced by its owner. */
#include <stdio.h>
#include "cli.h"
int cmd_session(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`session` is not built yet");
    return CLI_EXIT_REFUSED;
}
int cmd_describe(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`describe` is not built yet");
    return CLI_EXIT_REFUSED;
}
