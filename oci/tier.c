/* Placeholder: replaced by its owner. */
#include <stdio.h>
#include "cli.h"
int cmd_tier(const struct cli_globals *g, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    cli_report_error(g, "`tier` is not built yet");
    return CLI_EXIT_REFUSED;
}
