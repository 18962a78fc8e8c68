/* Owns `bulkhead spec` (a default config.json, as runc writes it, that
 * bulkhead runs unchanged) and `bulkhead features` (what this runtime
 * supports, in the runtime spec's features.md format). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "oci-internal.h"

static const char default_spec[] =
    "{\n"
    "  \"ociVersion\": \"" OCI_VERSION "\",\n"
    "  \"process\": {\n"
    "    \"terminal\": true,\n"
    "    \"user\": {\"uid\": 0, \"gid\": 0},\n"
    "    \"args\": [\"sh\"],\n"
    "    \"env\": [\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\", "
    "\"TERM=xterm\"],\n"
    "    \"cwd\": \"/\",\n"
    "    \"capabilities\": {\n"
    "      \"bounding\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"],\n"
    "      \"effective\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"],\n"
    "      \"permitted\": [\"CAP_AUDIT_WRITE\", \"CAP_KILL\", \"CAP_NET_BIND_SERVICE\"]\n"
    "    },\n"
    "    \"rlimits\": [{\"type\": \"RLIMIT_NOFILE\", \"hard\": 1024, \"soft\": 1024}],\n"
    "    \"noNewPrivileges\": true\n"
    "  },\n"
    "  \"root\": {\"path\": \"rootfs\", \"readonly\": true},\n"
    "  \"hostname\": \"bulkhead\",\n"
    "  \"mounts\": [\n"
    "    {\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"},\n"
    "    {\"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\",\n"
    "     \"options\": [\"nosuid\", \"strictatime\", \"mode=755\", \"size=65536k\"]},\n"
    "    {\"destination\": \"/dev/pts\", \"type\": \"devpts\", \"source\": \"devpts\",\n"
    "     \"options\": [\"nosuid\", \"noexec\", \"newinstance\", \"ptmxmode=0666\", "
    "\"mode=0620\", \"gid=5\"]},\n"
    "    {\"destination\": \"/dev/shm\", \"type\": \"tmpfs\", \"source\": \"shm\",\n"
    "     \"options\": [\"nosuid\", \"noexec\", \"nodev\", \"mode=1777\", \"size=65536k\"]},\n"
    "    {\"destination\": \"/dev/mqueue\", \"type\": \"mqueue\", \"source\": \"mqueue\",\n"
    "     \"options\": [\"nosuid\", \"noexec\", \"nodev\"]},\n"
    "    {\"destination\": \"/sys\", \"type\": \"sysfs\", \"source\": \"sysfs\",\n"
    "     \"options\": [\"nosuid\", \"noexec\", \"nodev\", \"ro\"]},\n"
    "    {\"destination\": \"/sys/fs/cgroup\", \"type\": \"cgroup\", \"source\": \"cgroup\",\n"
    "     \"options\": [\"nosuid\", \"noexec\", \"nodev\", \"relatime\", \"ro\"]}\n"
    "  ],\n"
    "  \"linux\": {\n"
    "    \"resources\": {\"devices\": [{\"allow\": false, \"access\": \"rwm\"}]},\n"
    "    \"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"network\"}, {\"type\": \"ipc\"},\n"
    "                   {\"type\": \"uts\"}, {\"type\": \"mount\"}%s],\n"
    "    \"maskedPaths\": [\"/proc/acpi\", \"/proc/asound\", \"/proc/kcore\", \"/proc/keys\",\n"
    "      \"/proc/latency_stats\", \"/proc/timer_list\", \"/proc/timer_stats\",\n"
    "      \"/proc/sched_debug\", \"/sys/firmware\", \"/proc/scsi\"],\n"
    "    \"readonlyPaths\": [\"/proc/bus\", \"/proc/fs\", \"/proc/irq\", \"/proc/sys\",\n"
    "      \"/proc/sysrq-trigger\"]\n"
    "  },\n"
    "  \"annotations\": {\"" OCI_ANNOTATION_TIER "\": \"%s\"}\n"
    "}\n";

int cmd_spec(const struct cli_globals *g, int argc, char **argv)
{
    const char *bundle = ".";
    bool rootless = false;
    const struct oci_opt opts[] = {
        {"bundle", 'b', OCI_OPT_STRING, &bundle},
        {"rootless", 0, OCI_OPT_BOOL, &rootless},
    };
    bool help = false;
    struct bh_error err = {0};
    int pos = oci_parse_args(argc, argv, opts, BH_ARRAY_SIZE(opts), &help, &err);
    if (pos < 0) {
        cli_report_error(g, "spec: %s", err.msg);
        return CLI_EXIT_REFUSED;
    }
    if (help) {
        printf("usage: bulkhead spec [--bundle DIR]\nWrites DIR/config.json (default: the "
               "current directory) for a rootfs at DIR/rootfs.\n");
        return 0;
    }
    cleanup_close int dfd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        cli_report_error(g, "spec: bundle `%s`: %s", bundle, strerror(errno));
        return 1;
    }
    cleanup_close int fd =
        openat(dfd, "config.json", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        if (errno == EEXIST)
            cli_report_error(g, "spec: `%s/config.json` exists; remove it first", bundle);
        else
            cli_report_error(g, "spec: create `%s/config.json`: %s", bundle, strerror(errno));
        return 1;
    }
    /* The tier --default-tier names (else kernel), so a config written by
     * `bulkhead --default-tier=container spec` runs at that tier. */
    const char *tier = getenv("BULKHEAD_DEFAULT_TIER");
    if (tier == NULL || (strcmp(tier, "container") != 0 && strcmp(tier, "kernel") != 0))
        tier = "kernel";
    cleanup_free char *text = NULL;
    /* runc lists the cgroup namespace only on a cgroup v2 host, and its
     * tests add it themselves elsewhere (a second entry is refused). */
    const char *cgroup_ns = bh_cgroup_detect() == BH_CGROUP_V2 ? ", {\"type\": \"cgroup\"}" : "";
    if (asprintf(&text, default_spec, cgroup_ns, tier) < 0) {
        cli_report_error(g, "spec: out of memory");
        unlinkat(dfd, "config.json", 0);
        return 1;
    }
    size_t len = strlen(text);
    if (write(fd, text, len) != (ssize_t)len) {
        cli_report_error(g, "spec: write `%s/config.json`: %s", bundle, strerror(errno));
        unlinkat(dfd, "config.json", 0);
        return 1;
    }
    return 0;
}

static json_t *strings(const char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

int cmd_features(const struct cli_globals *g, int argc, char **argv)
{
    const struct oci_opt opts[] = {};
    bool help = false;
    struct bh_error err = {0};
    if (oci_parse_args(argc, argv, opts, 0, &help, &err) < 0) {
        cli_report_error(g, "features: %s", err.msg);
        return CLI_EXIT_REFUSED;
    }
    if (help) {
        printf("usage: bulkhead features\nPrints what this runtime supports as JSON.\n");
        return 0;
    }
    static const char *const hooks[] = {"prestart",       "createRuntime", "createContainer",
                                        "startContainer", "poststart",     "poststop"};
    static const char *const mount_opts[] = {
        "async",      "atime",       "bind",      "dev",         "diratime",
        "dirsync",    "exec",        "mand",      "noatime",     "nodev",
        "nodiratime", "noexec",      "nomand",    "norelatime",  "nostrictatime",
        "nosuid",     "nosymfollow", "private",   "rbind",       "relatime",
        "ro",         "rprivate",    "rshared",   "rslave",      "runbindable",
        "rw",         "shared",      "slave",     "strictatime", "suid",
        "symfollow",  "sync",        "tmpcopyup", "unbindable"};
    static const char *const nss[] = {"cgroup", "ipc",  "mount", "network",
                                      "pid",    "time", "user",  "uts"};
    static const char *const actions[] = {
        "SCMP_ACT_ALLOW",       "SCMP_ACT_ERRNO", "SCMP_ACT_KILL", "SCMP_ACT_KILL_PROCESS",
        "SCMP_ACT_KILL_THREAD", "SCMP_ACT_LOG",   "SCMP_ACT_TRAP"};
    static const char *const ops[] = {"SCMP_CMP_EQ", "SCMP_CMP_GE", "SCMP_CMP_GT",
                                      "SCMP_CMP_LE", "SCMP_CMP_LT", "SCMP_CMP_MASKED_EQ",
                                      "SCMP_CMP_NE"};
    json_t *f = json_object();
    json_object_set_new(f, "ociVersionMin", json_string("1.0.0"));
    json_object_set_new(f, "ociVersionMax", json_string("1.3.0"));
    json_object_set_new(f, "hooks", strings(hooks, BH_ARRAY_SIZE(hooks)));
    json_object_set_new(f, "mountOptions", strings(mount_opts, BH_ARRAY_SIZE(mount_opts)));
    json_t *lx = json_object();
    json_object_set_new(lx, "namespaces", strings(nss, BH_ARRAY_SIZE(nss)));
    json_t *caps = json_array();
    for (int c = 0; c <= 40; c++) {
        static const char *const names[] = {"CAP_CHOWN",
                                            "CAP_DAC_OVERRIDE",
                                            "CAP_DAC_READ_SEARCH",
                                            "CAP_FOWNER",
                                            "CAP_FSETID",
                                            "CAP_KILL",
                                            "CAP_SETGID",
                                            "CAP_SETUID",
                                            "CAP_SETPCAP",
                                            "CAP_LINUX_IMMUTABLE",
                                            "CAP_NET_BIND_SERVICE",
                                            "CAP_NET_BROADCAST",
                                            "CAP_NET_ADMIN",
                                            "CAP_NET_RAW",
                                            "CAP_IPC_LOCK",
                                            "CAP_IPC_OWNER",
                                            "CAP_SYS_MODULE",
                                            "CAP_SYS_RAWIO",
                                            "CAP_SYS_CHROOT",
                                            "CAP_SYS_PTRACE",
                                            "CAP_SYS_PACCT",
                                            "CAP_SYS_ADMIN",
                                            "CAP_SYS_BOOT",
                                            "CAP_SYS_NICE",
                                            "CAP_SYS_RESOURCE",
                                            "CAP_SYS_TIME",
                                            "CAP_SYS_TTY_CONFIG",
                                            "CAP_MKNOD",
                                            "CAP_LEASE",
                                            "CAP_AUDIT_WRITE",
                                            "CAP_AUDIT_CONTROL",
                                            "CAP_SETFCAP",
                                            "CAP_MAC_OVERRIDE",
                                            "CAP_MAC_ADMIN",
                                            "CAP_SYSLOG",
                                            "CAP_WAKE_ALARM",
                                            "CAP_BLOCK_SUSPEND",
                                            "CAP_AUDIT_READ",
                                            "CAP_PERFMON",
                                            "CAP_BPF",
                                            "CAP_CHECKPOINT_RESTORE"};
        json_array_append_new(caps, json_string(names[c]));
    }
    json_object_set_new(lx, "capabilities", caps);
    json_t *cg = json_object();
    json_object_set_new(cg, "v1", json_true());
    json_object_set_new(cg, "v2", json_true());
    json_object_set_new(cg, "systemd", json_false());
    json_object_set_new(cg, "systemdUser", json_false());
    json_object_set_new(lx, "cgroup", cg);
    json_t *sc = json_object();
    json_object_set_new(sc, "enabled", json_true());
    json_object_set_new(sc, "actions", strings(actions, BH_ARRAY_SIZE(actions)));
    json_object_set_new(sc, "operators", strings(ops, BH_ARRAY_SIZE(ops)));
    static const char *const archs[] = {"SCMP_ARCH_X86_64"};
    json_object_set_new(sc, "archs", strings(archs, 1));
    json_object_set_new(lx, "seccomp", sc);
    json_t *aa = json_object();
    json_object_set_new(aa, "enabled", json_false());
    json_object_set_new(lx, "apparmor", aa);
    json_t *se = json_object();
    json_object_set_new(se, "enabled", json_false());
    json_object_set_new(lx, "selinux", se);
    json_t *ir = json_object();
    json_object_set_new(ir, "enabled", json_false());
    json_object_set_new(lx, "intelRdt", ir);
    json_object_set_new(f, "linux", lx);
    json_t *ann = json_object();
    json_object_set_new(ann, "org.opencontainers.runc.version", json_string("bulkhead 0.1.0"));
    json_object_set_new(ann, OCI_ANNOTATION_TIER, json_string("container|kernel (default kernel)"));
    json_object_set_new(ann, OCI_ANNOTATION_REPORT_SOCKET,
                        json_string("unix socket that receives the TierReport before start"));
    json_object_set_new(f, "annotations", ann);
    char *s = json_dumps(f, JSON_INDENT(4));
    printf("%s\n", s);
    free(s);
    json_decref(f);
    return 0;
}
