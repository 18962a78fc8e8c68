/* `bulkhead checkpoint` and `bulkhead restore`: runc's command lines (what
 * containerd's shim and `docker checkpoint` send), answered with a refusal
 * that names the layer CRIU would lose, at either tier. The container is
 * left exactly as it was (running, or paused), and restore makes nothing.
 *
 * Why no checkpoint is taken:
 * - kernel tier: the guests' seccomp filters send their syscalls to the
 *   sentry through notification listeners (SECCOMP_RET_USER_NOTIF). CRIU
 *   can neither dump a listener nor re-create one bound to a restored
 *   filter, so restored guests would have no broker: every brokered syscall
 *   would fail, or the filter would have to be dropped.
 * - container tier: every guest runs in a Landlock domain (part of the
 *   tier, see the README's table). Measured with CRIU 4.1.1 (Debian
 *   trixie's, tests/deps-criu; its `criu check` passes on kernel 6.18):
 *   - dump: CRIU injects its parasite code into the guest, which must then
 *     connect to CRIU's abstract unix socket. The guest's domain scopes
 *     abstract sockets (LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, ABI 6): a
 *     connect from inside to a socket made outside is refused, so the dump
 *     stops at "Unable to connect a transport socket: Operation not
 *     permitted" and the guest runs on untouched. The scope is the wall
 *     that keeps guests off the host's abstract sockets; lifting it for
 *     CRIU would lift it for every guest.
 *   - restore: CRIU 4.1.1 has no Landlock support at all (its images carry
 *     no Landlock state; the kernel cannot report a process's rules), so a
 *     restored guest would run without that layer.
 *   Its filter also sends io_setup to the sentry (the per-sandbox AIO cap,
 *   sentry/aio-cap.c) through a notification listener, which CRIU can
 *   neither dump nor re-create (a restored notify filter has no listener).
 *   A restore that loses a layer is a restore to a lower tier, which
 *   bulkhead never does; it refuses instead (fail closed).
 * Running CRIU inside the sandbox instead does not help: to trace a
 * filtered task it must suspend the task's filter (PTRACE_O_SUSPEND_SECCOMP),
 * which the kernel grants only to a tracer holding CAP_SYS_ADMIN in the
 * initial user namespace and under no filter, which nothing in a sandbox is.
 * What would work (measured, not built; tests/README.md "Branch criu"): a
 * host-root, unfiltered keeper in the guests' very domain, from which the
 * guests and later CRIU descend, with CRIU's kernel probe cached on a tmpfs
 * (Landlock refuses mount(2), which CRIU's probe needs). It asks the sentry
 * to share the guests' domain, a keeper process per container, and CRIU run
 * in the sandbox's pid namespace; a restored container-tier filter comes
 * back without its listener, so io_setup and the other brokered calls would
 * answer ENOSYS.
 * Session 10 measured the runc way (tests/README.md, "Branch criu10"): a
 * host-root CRIU in no domain, entered into every namespace of the sandbox
 * but its user namespace, running as the sandbox root's host uid with its
 * capabilities kept, dumps a container-tier guest once the guests' domains
 * lose the abstract-socket scope, and restores it into a fresh sandbox's
 * namespaces under its two filters, if the image's user namespace id is
 * rewritten (CRIU 4.1.1 otherwise clones a user namespace of its own and
 * cannot setns out of it). The restored guest lacks its Landlock domain,
 * its cgroup (unless CRIU runs in it) and the AIO listener, and the sentry
 * does not adopt it; until all of that is built, the refusal stands.
 * Facts of this machine that bear on any CRIU here, runc's too: criu waits
 * forever for a hardware breakpoint a PVM guest never fires (CRIU_FAULT=130
 * turns them off: tests/deps-criu's wrapper sets it), and the kernel has no
 * soft-dirty tracking (`criu check --feature mem_dirty_track` fails), so no
 * --pre-dump works. Bookworm's CRIU 3.17.1 does not start at all on 6.18
 * ("Unexpected rt vDSO area bounds": [vvar], [vvar_vclock], [vdso]). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cleanup.h"
#include "cli.h"
#include "oci-internal.h"

static const char *const lost_layer[] = {
    [BH_TIER_CONTAINER] =
        "its guests' Landlock domains (CRIU 4.1.1 cannot dump a guest: the domain's "
        "abstract-socket scope refuses its parasite's connection to CRIU, EPERM; nor restore "
        "one: CRIU has no Landlock support, so restored guests would run without that layer of "
        "the container tier), and the sentry's notification listener that caps the sandbox's "
        "Linux AIO contexts (CRIU can neither dump nor re-create it)",
    [BH_TIER_KERNEL] = "the sentry's seccomp notification listeners (CRIU can neither dump nor "
                       "re-create them, so the restored guests would have no syscall broker), "
                       "and its guests' Landlock domains (as at the container tier)",
};

/* runc's checks of --parent-path, made before anything else (scripts and
 * runc's own tests match the flag's name in the message): relative to the
 * image directory, and there. */
static int check_parent_path(const struct cli_globals *g, const char *image, const char *parent)
{
    if (parent == NULL)
        return 0;
    if (parent[0] == '/') {
        cli_report_error(g,
                         "checkpoint: --parent-path `%s` must be relative (to --image-path, "
                         "where the pre-dump's images are)",
                         parent);
        return -1;
    }
    char path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", image ? image : "checkpoint", parent);
    const char *why_not = stat(path, &st) < 0    ? strerror(errno)
                          : !S_ISDIR(st.st_mode) ? "not a directory"
                                                 : NULL;
    if (why_not == NULL)
        return 0;
    cli_report_error(g, "checkpoint: invalid --parent-path `%s`: `%s`: %s", parent, path, why_not);
    return -1;
}

static const char *why(enum bh_tier t)
{
    if ((t == BH_TIER_CONTAINER || t == BH_TIER_KERNEL) && lost_layer[t] != NULL)
        return lost_layer[t];
    return "a layer of its tier";
}

int cmd_checkpoint(const struct cli_globals *g, int argc, char **argv)
{
    const char *image = NULL, *work = NULL, *parent = NULL, *status_fd = NULL, *page_server = NULL,
               *cg_mode = NULL;
    bool leave = false, tcp = false, ext_unix = false, shell = false, lazy = false, locks = false,
         pre_dump = false, auto_dedup = false;
    struct oci_list empty_ns = {0};
    const struct oci_opt opts[] = {
        {"image-path", 0, OCI_OPT_STRING, &image},
        {"work-path", 0, OCI_OPT_STRING, &work},
        {"parent-path", 0, OCI_OPT_STRING, &parent},
        {"leave-running", 0, OCI_OPT_BOOL, &leave},
        {"tcp-established", 0, OCI_OPT_BOOL, &tcp},
        {"ext-unix-sk", 0, OCI_OPT_BOOL, &ext_unix},
        {"shell-job", 0, OCI_OPT_BOOL, &shell},
        {"lazy-pages", 0, OCI_OPT_BOOL, &lazy},
        {"status-fd", 0, OCI_OPT_STRING, &status_fd},
        {"page-server", 0, OCI_OPT_STRING, &page_server},
        {"file-locks", 0, OCI_OPT_BOOL, &locks},
        {"pre-dump", 0, OCI_OPT_BOOL, &pre_dump},
        {"manage-cgroups-mode", 0, OCI_OPT_STRING, &cg_mode},
        {"empty-ns", 0, OCI_OPT_LIST, &empty_ns},
        {"auto-dedup", 0, OCI_OPT_BOOL, &auto_dedup},
    };
    bool help = false;
    struct bh_error err = {0};
    int pos = oci_parse_args(argc, argv, opts, BH_ARRAY_SIZE(opts), &help, &err);
    oci_list_free(&empty_ns);
    if (pos < 0) {
        cli_report_error(g, "checkpoint: %s", err.msg);
        return CLI_EXIT_REFUSED;
    }
    if (help) {
        printf("usage: bulkhead checkpoint [--image-path DIR] [--work-path DIR] "
               "[--leave-running] [runc's other checkpoint flags] ID\n\n"
               "Refused at both tiers, naming the layer a CRIU checkpoint would lose; the\n"
               "container is left as it was.\n");
        return 0;
    }
    const char *id;
    if (oci_need_id(g, "checkpoint", argc, argv, pos, &id) < 0)
        return CLI_EXIT_REFUSED;
    if (check_parent_path(g, image, parent) < 0)
        return CLI_EXIT_REFUSED;
    cleanup_close int dirfd = -1;
    struct oci_state st;
    if (oci_open(g, "checkpoint", id, &dirfd, &st) < 0)
        return 1;
    const char *status = oci_state_status(&st);
    if (strcmp(status, "running") != 0 && strcmp(status, "paused") != 0)
        cli_report_error(g,
                         "checkpoint: container `%s` is %s: only a running container can be "
                         "checkpointed",
                         id, status);
    else
        cli_report_error(g,
                         "checkpoint: container `%s` runs at the %s tier: refused, a CRIU "
                         "checkpoint would lose %s; the container keeps running as it was",
                         id, bh_tier_name(st.tier), why(st.tier));
    oci_state_free(&st);
    return CLI_EXIT_REFUSED;
}

int cmd_restore(const struct cli_globals *g, int argc, char **argv)
{
    const char *image = NULL, *work = NULL, *bundle = NULL, *pid_file = NULL, *console = NULL,
               *cg_mode = NULL, *lsm = NULL, *lsm_mount = NULL;
    bool tcp = false, ext_unix = false, shell = false, locks = false, detach = false,
         no_subreaper = false, no_pivot = false, auto_dedup = false, lazy = false;
    struct oci_list empty_ns = {0};
    const struct oci_opt opts[] = {
        {"image-path", 0, OCI_OPT_STRING, &image},
        {"work-path", 0, OCI_OPT_STRING, &work},
        {"bundle", 'b', OCI_OPT_STRING, &bundle},
        {"pid-file", 0, OCI_OPT_STRING, &pid_file},
        {"console-socket", 0, OCI_OPT_STRING, &console},
        {"detach", 'd', OCI_OPT_BOOL, &detach},
        {"tcp-established", 0, OCI_OPT_BOOL, &tcp},
        {"ext-unix-sk", 0, OCI_OPT_BOOL, &ext_unix},
        {"shell-job", 0, OCI_OPT_BOOL, &shell},
        {"file-locks", 0, OCI_OPT_BOOL, &locks},
        {"manage-cgroups-mode", 0, OCI_OPT_STRING, &cg_mode},
        {"no-subreaper", 0, OCI_OPT_BOOL, &no_subreaper},
        {"no-pivot", 0, OCI_OPT_BOOL, &no_pivot},
        {"empty-ns", 0, OCI_OPT_LIST, &empty_ns},
        {"auto-dedup", 0, OCI_OPT_BOOL, &auto_dedup},
        {"lazy-pages", 0, OCI_OPT_BOOL, &lazy},
        {"lsm-profile", 0, OCI_OPT_STRING, &lsm},
        {"lsm-mount-context", 0, OCI_OPT_STRING, &lsm_mount},
    };
    bool help = false;
    struct bh_error err = {0};
    int pos = oci_parse_args(argc, argv, opts, BH_ARRAY_SIZE(opts), &help, &err);
    oci_list_free(&empty_ns);
    if (pos < 0) {
        cli_report_error(g, "restore: %s", err.msg);
        return CLI_EXIT_REFUSED;
    }
    if (help) {
        printf("usage: bulkhead restore [--image-path DIR] [--bundle DIR] [--detach] "
               "[runc's other restore flags] ID\n\n"
               "Refused: bulkhead takes no CRIU checkpoint (see `bulkhead checkpoint --help`),\n"
               "and a CRIU image restored by bulkhead would lack the same layers.\n");
        return 0;
    }
    const char *id;
    if (oci_need_id(g, "restore", argc, argv, pos, &id) < 0)
        return CLI_EXIT_REFUSED;
    cli_report_error(g,
                     "restore: container `%s` from `%s`: refused, nothing was created: CRIU "
                     "cannot restore %s at the kernel tier, nor %s at the container tier",
                     id, image ? image : "(no --image-path)", why(BH_TIER_KERNEL),
                     why(BH_TIER_CONTAINER));
    return CLI_EXIT_REFUSED;
}
