/* Owns the help pages of the command line, in the layout runc's (urfave/cli)
 * pages have: tools and test suites written for runc read the NAME line
 * ("runc CMD - summary") and the exit status of `CMD -h`. The NAME line
 * says bulkhead's own name first, then the runc command it stands for. */
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "oci-internal.h"

struct help_page {
    const char *name;
    const char *summary;
    const char *usage; /* after "bulkhead NAME " */
    const char *options;
};

static const struct help_page pages[] = {
    {"create", "create a container from an OCI bundle; its process waits for start",
     "[command options] <container-id>",
     "   --bundle value, -b value  the bundle directory (default: the current directory)\n"
     "   --console-socket value    AF_UNIX socket that receives the pty master when\n"
     "                             process.terminal is true\n"
     "   --pid-file value          write the container's pid (the sentry's) to this file\n"
     "   --no-pivot                move the root over / and chroot (container tier only)\n"
     "   --no-new-keyring          accepted; keyrings are refused inside the sandbox\n"
     "   --preserve-fds value      pass N more fds (3 to 3+N-1) to the process (default: 0)\n"},
    {"run", "create and start a container, and wait for it unless detached",
     "[command options] <container-id>",
     "   --bundle value, -b value  the bundle directory (default: the current directory)\n"
     "   --console-socket value    AF_UNIX socket that receives the pty master (with --detach)\n"
     "   --detach, -d              return once the container runs\n"
     "   --keep                    keep the container's state after it exits\n"
     "   --pid-file value          write the container's pid to this file\n"
     "   --no-subreaper            accepted; bulkhead waits through its own subreaper\n"
     "   --no-pivot                move the root over / and chroot (container tier only)\n"
     "   --no-new-keyring          accepted; keyrings are refused inside the sandbox\n"
     "   --preserve-fds value      pass N more fds (3 to 3+N-1) to the process (default: 0)\n"},
    {"start", "start the process of a created container", "<container-id>", NULL},
    {"state", "print a container's state as JSON", "<container-id>", NULL},
    {"kill", "send a signal (default: SIGTERM) to a container's first process",
     "[command options] <container-id> [signal]",
     "   --all, -a  send the signal to every process of the container\n"},
    {"delete", "delete a stopped container and everything it holds",
     "[command options] <container-id>",
     "   --force, -f  kill a running container first (SIGKILL)\n"},
    {"exec", "run one more process inside a running container",
     "[command options] <container-id> <command> [args...]  || -p process.json "
     "<container-id>",
     "   --console-socket value             AF_UNIX socket for the pty master (with --detach)\n"
     "   --cwd value                        working directory inside the container\n"
     "   --env value, -e value              add an environment variable (KEY=VALUE)\n"
     "   --tty, -t                          give the process a pty\n"
     "   --user value, -u value             <uid>[:<gid>]\n"
     "   --additional-gids value, -g value  add a supplementary group\n"
     "   --process value, -p value          the process as an OCI process JSON file\n"
     "   --detach, -d                       return once the process runs\n"
     "   --pid-file value                   write the process's pid to this file\n"
     "   --process-label value              accepted; no SELinux label is set\n"
     "   --apparmor value                   accepted; no AppArmor profile is set\n"
     "   --no-new-privs                     set no_new_privs (always set at the kernel tier)\n"
     "   --cap value, -c value              add a capability to the process's sets\n"
     "   --preserve-fds value               pass N more fds (3 to 3+N-1) (default: 0)\n"
     "   --cgroup value                     run in a sub-cgroup of the container's: PATH or\n"
     "                                      CONTROLLER[,CONTROLLER]:PATH (repeatable)\n"
     "   --ignore-paused                    allow exec into a paused container\n"},
    {"ps", "list the processes of a container (not its sentry)",
     "[command options] <container-id> [ps options]",
     "   --format value, -f value  table (ps(1) with the given ps options) or json (pids)\n"},
    {"list", "list the containers under --root, oldest first", "[command options]",
     "   --format value, -f value  table or json (default: \"table\")\n"
     "   --quiet, -q               print only the container ids\n"},
    {"pause", "freeze every process of a container", "<container-id>", NULL},
    {"resume", "thaw a paused container", "<container-id>", NULL},
    {"update", "change a running container's resource limits", "[command options] <container-id>",
     "   --resources value, -r value  LinuxResources JSON from a file, or - for stdin\n"
     "   --blkio-weight value         block I/O weight, 10 to 1000\n"
     "   --cpu-period value           CFS period (microseconds)\n"
     "   --cpu-quota value            CFS quota per period (microseconds)\n"
     "   --cpu-share value            CPU shares\n"
     "   --cpu-rt-period value        realtime period (microseconds)\n"
     "   --cpu-rt-runtime value       realtime runtime per period (microseconds)\n"
     "   --cpuset-cpus value          CPUs to use\n"
     "   --cpuset-mems value          memory nodes to use\n"
     "   --memory value               memory limit (bytes)\n"
     "   --memory-reservation value   memory soft limit (bytes)\n"
     "   --memory-swap value          memory plus swap limit (bytes; -1: unlimited)\n"
     "   --pids-limit value           maximum number of processes\n"},
    {"events", "print a container's events (OOM) and statistics as JSON",
     "[command options] <container-id>",
     "   --interval value  time between statistics (default: 5s)\n"
     "   --stats           print the statistics once and exit\n"},
    {"features", "print the runtime's features as JSON", "", NULL},
    {"spec", "write a default config.json", "[command options]",
     "   --bundle value, -b value  the directory to write config.json in\n"
     "   --rootless                accepted; every bulkhead container is in a user namespace\n"},
    {"checkpoint", "checkpoint a running container (container tier, through CRIU)",
     "[command options] <container-id>", NULL},
    {"restore", "restore a container from a checkpoint (container tier, through CRIU)",
     "[command options] <container-id>", NULL},
    {"do", "run one command in a new sandbox over the host's system directories (no image)",
     "[--tier kernel|container] -- <command> [args...]", NULL},
    {"tier", "verify and print the isolation tier this host (or a container) provides",
     "[--json] [--container <container-id>]", NULL},
    {"session", "open, run, close or list bulkheadd sessions", "<open|run|close|list> ...", NULL},
    {"describe", "print what a bulkheadd serves", "--socket <path>", NULL},
};

static const struct help_page *find_page(const char *name)
{
    for (size_t i = 0; i < BH_ARRAY_SIZE(pages); i++)
        if (strcmp(pages[i].name, name) == 0)
            return &pages[i];
    return NULL;
}

bool oci_help_exists(const char *command)
{
    return find_page(command) != NULL;
}

int oci_help_print(FILE *out, const char *command)
{
    const struct help_page *p = find_page(command);
    if (p == NULL)
        return -1;
    fprintf(out, "NAME:\n   bulkhead %s (runc %s) - %s\n\nUSAGE:\n   bulkhead %s %s\n", p->name,
            p->name, p->summary, p->name, p->usage);
    if (p->options)
        fprintf(out, "\nOPTIONS:\n%s", p->options);
    return 0;
}

void oci_help_main(FILE *out, bool (*exists)(const char *command))
{
    fprintf(out,
            "NAME:\n"
            "   bulkhead, a drop-in runc - Open Container Initiative runtime whose containers\n"
            "   run behind a syscall-brokering sentry (kernel tier) or as plain containers\n"
            "\nUSAGE:\n   bulkhead [global options] command [command options] [arguments...]\n"
            "\nCOMMANDS:\n");
    /* Only what this build has (checkpoint and restore come with their own file). */
    for (size_t i = 0; i < BH_ARRAY_SIZE(pages); i++)
        if (exists(pages[i].name))
            fprintf(out, "   %-11s %s\n", pages[i].name, pages[i].summary);
    fprintf(out, "   %-11s %s\n", "help, h", "show the commands, or one command's help page");
    fprintf(out, "\nGLOBAL OPTIONS:\n"
                 "   --debug                 write debug lines (to --log when given, else stderr)\n"
                 "   --log value             the log file (default: stderr)\n"
                 "   --log-format value      text or json (default: \"text\")\n"
                 "   --root value            state directory (default: \"/run/bulkhead\")\n"
                 "   --systemd-cgroup        accepted; cgroupfs is used\n"
                 "   --default-tier value    kernel or container, for containers whose\n"
                 "                           dev.bulkhead.tier annotation does not say\n"
                 "   --help, -h              show help\n"
                 "   --version, -v           print the version\n");
}
