/* The report format of bulkhead-probe, shared by the probe (a static guest
 * program) and its readers (sentry/probe.c). Header-only on purpose: the
 * probe is built alone with -static and links nothing of libsentry.
 *
 * The probe writes plain text lines on stdout, one record per line, with
 * single spaces between the fields; the last field runs to the end of line:
 *
 *   bulkhead-probe 1                      first line: format version
 *   check NAME RESULT DETAIL              RESULT is pass, fail or skip
 *   fact KEY VALUE                        data the host judges (ns inodes...)
 *   end                                   the report is complete
 *
 * A report without "end" is truncated (the probe died): its reader treats
 * every missing check as failed. After "end" the probe blocks reading stdin
 * until EOF, so the host can inspect the live guest from outside.
 *
 * Command line of the probe:
 *   bulkhead-probe [--tier container|kernel] [--errno N] [--secret PATH TOKEN]
 *                  [--caps HEX]
 * --errno: the errno the tier policy gives refused syscalls (default EPERM);
 * --secret: a host file outside the sandbox and its content, which no path
 * trick from inside may read; --caps: the capabilities CapEff/CapPrm/CapBnd/
 * CapAmb may hold (default none). */
#ifndef BH_PROBE_REPORT_H
#define BH_PROBE_REPORT_H

#define BH_PROBE_MAGIC "bulkhead-probe"
#define BH_PROBE_VERSION 1
#define BH_PROBE_END "end"
#define BH_PROBE_LINE_MAX 1024

/* Names of the checks the probe makes from inside (stable: they appear in
 * JSON, in BULKHEAD_TEST_BREAK and in tests). */
#define BH_CHECK_SECCOMP "seccomp"                  /* Seccomp: 2, Seccomp_filters >= 1 */
#define BH_CHECK_NO_NEW_PRIVS "no_new_privs"        /* NoNewPrivs: 1 */
#define BH_CHECK_CAPS "capabilities"                /* CapEff/Prm/Bnd/Amb as expected */
#define BH_CHECK_REFUSED "refused_syscalls"         /* keyctl, bpf, unshare(NEWUSER) */
#define BH_CHECK_BROKER_REFUSED "broker_refused"    /* a call only the broker refuses */
#define BH_CHECK_CONFINED_OPEN "confined_open"      /* no path trick reaches the secret */
#define BH_CHECK_NET_LO_ONLY "net_lo_only"          /* /proc/net/dev lists only lo */
#define BH_CHECK_LANDLOCK "landlock"                /* writes outside allowed trees: EACCES */
#define BH_CHECK_SENTRY_INSIDE "sentry_pid1_inside" /* /proc/1 is the sentry, unreadable */
#define BH_CHECK_CGROUP_INSIDE "cgroup_inside"      /* limits visible inside (informational) */

/* Facts: "ns.<type>" with the inode of /proc/self/ns/<type>; "cgroup.<file>"
 * with the content of a limit file visible inside. */
#define BH_FACT_NS_PREFIX "ns."
#define BH_FACT_CGROUP_PREFIX "cgroup."

/* The sentry's comm as /proc/PID/comm shows it (TASK_COMM_LEN - 1 chars). */
#define BH_SENTRY_COMM "bulkhead-sentry"

/* Where the probe sandbox makes the probe binary visible (read-only bind). */
#define BH_PROBE_GUEST_PATH "/.bulkhead/probe"

#endif
