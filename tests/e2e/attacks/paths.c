/* Escape attempts through path resolution: a host file (argv[1], content
 * argv[2]) must not be read through "..", magic links (/proc/self/root,
 * /proc/1/root, /proc/1/cwd) or symlinks planted in /tmp; writes to /proc/sys
 * and /sys must fail. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attack.h"

static const char dots[] = "../../../../../../../../../../../../../../../../../..";

static void try_read(const char *name, const char *path, const char *token)
{
    errno = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        attack_result(name, -1, errno);
        return;
    }
    char buf[256] = "";
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    if (strstr(buf, token) != NULL)
        attack_line(name, "ESCAPED", "read the host secret through %s", path);
    else
        attack_line(name, "refused", "opened something else, not the secret");
}

/* Opening for writing is the gate; nothing is ever written, so a failed
 * confinement still leaves the host's settings as they were. */
static void try_write(const char *name, const char *path)
{
    errno = 0;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        attack_result(name, -1, errno);
        return;
    }
    close(fd);
    attack_line(name, "ESCAPED", "%s opened for writing", path);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: paths SECRET_PATH TOKEN\n");
        return 2;
    }
    attack_require_sandbox();
    const char *sp = argv[1], *tok = argv[2];
    char p[1024];

    try_read("direct", sp, tok);
    snprintf(p, sizeof(p), "%s%s", dots, sp);
    try_read("dotdot_relative", p, tok);
    snprintf(p, sizeof(p), "/%s%s", dots, sp);
    try_read("dotdot_absolute", p, tok);
    snprintf(p, sizeof(p), "/proc/self/root%s", sp);
    try_read("magic_proc_self_root", p, tok);
    snprintf(p, sizeof(p), "/proc/1/root%s", sp);
    try_read("magic_proc1_root", p, tok);
    snprintf(p, sizeof(p), "/proc/1/cwd/%s%s", dots, sp);
    try_read("magic_proc1_cwd", p, tok);
    snprintf(p, sizeof(p), "/proc/self/cwd/%s%s", dots, sp);
    try_read("magic_proc_self_cwd", p, tok);

    snprintf(p, sizeof(p), "%s%s", dots, sp);
    unlink("/tmp/bh-link-dots");
    if (symlink(p, "/tmp/bh-link-dots") == 0)
        try_read("symlink_tmp_dotdot", "/tmp/bh-link-dots", tok);
    else
        attack_line("symlink_tmp_dotdot", "inconclusive", "symlink: %s", attack_errname(errno));
    snprintf(p, sizeof(p), "/proc/1/root%s", sp);
    unlink("/tmp/bh-link-magic");
    if (symlink(p, "/tmp/bh-link-magic") == 0)
        try_read("symlink_tmp_magic", "/tmp/bh-link-magic", tok);
    else
        attack_line("symlink_tmp_magic", "inconclusive", "symlink: %s", attack_errname(errno));
    /* A directory symlink in the middle of the path. */
    unlink("/tmp/bh-link-root");
    if (symlink("/proc/1/root", "/tmp/bh-link-root") == 0) {
        snprintf(p, sizeof(p), "/tmp/bh-link-root%s", sp);
        try_read("symlink_tmp_dir", p, tok);
    } else {
        attack_line("symlink_tmp_dir", "inconclusive", "symlink: %s", attack_errname(errno));
    }
    unlink("/tmp/bh-link-dots");
    unlink("/tmp/bh-link-magic");
    unlink("/tmp/bh-link-root");

    try_write("write_proc_sys_hostname", "/proc/sys/kernel/hostname");
    try_write("write_proc_sys_core_pattern", "/proc/sys/kernel/core_pattern");
    try_write("write_proc_sysrq", "/proc/sysrq-trigger");
    try_write("write_sys_uevent_helper", "/sys/kernel/uevent_helper");
    try_write("write_sys_lo_mtu", "/sys/class/net/lo/mtu");
    attack_done();
    return 0;
}
