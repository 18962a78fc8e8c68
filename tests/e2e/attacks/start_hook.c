/* A guest that plants the container's startContainer hook (branch redteam8).
 * The hook's path is resolved in the container's mount namespace, so it is a
 * file of the image, and a process exec'd into the created container may
 * replace it before `start`. Whatever runs there must hold no more than the
 * container's own process: runc runs these hooks in its init after the
 * process's ids, capabilities, no_new_privs and filter are in place.
 *   start_hook wait     the container's process: waits to be killed
 *   start_hook plant    (exec'd, before start) copies itself to /hook
 *   start_hook report   (as the hook) tries what a guest may not, writes the
 *                       verdicts to /evidence, leaves a child that lingers
 *   start_hook show     (exec'd, after start) prints /evidence and judges the
 *                       lingering child, then "done" */
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attack.h"

#define EVIDENCE "/evidence"
#define LINGER_ARG "linger"

/* The value of "Key:" in /proc/PID/status, or "" */
static void status_field(const char *pid, const char *key, char *out, size_t size)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%s/status", pid);
    out[0] = '\0';
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    size_t kl = strlen(key);
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            const char *v = line + kl + 1;
            v += strspn(v, " \t");
            snprintf(out, size, "%.*s", (int)strcspn(v, "\n"), v);
            break;
        }
    }
    fclose(f);
}

/* What a guest of this bundle holds: no CAP_SYS_ADMIN, no_new_privs, a filter. */
static void judge_credentials(const char *who, const char *pid)
{
    char cap[64], nnp[16], sec[16], name[64];
    status_field(pid, "CapEff", cap, sizeof(cap));
    status_field(pid, "NoNewPrivs", nnp, sizeof(nnp));
    status_field(pid, "Seccomp", sec, sizeof(sec));
    /* CAP_SYS_ADMIN (21): the container's process (Docker's set) never has it */
    unsigned long long eff = strtoull(cap, NULL, 16);
    snprintf(name, sizeof(name), "%s_cap_sys_admin", who);
    attack_line(name, cap[0] && !(eff & (1ULL << 21)) ? "refused" : "ESCAPED", "CapEff %s", cap);
    snprintf(name, sizeof(name), "%s_no_new_privs", who);
    attack_line(name, strcmp(nnp, "1") == 0 ? "refused" : "ESCAPED", "NoNewPrivs %s", nnp);
    snprintf(name, sizeof(name), "%s_filter", who);
    attack_line(name, strcmp(sec, "2") == 0 ? "refused" : "ESCAPED", "Seccomp %s", sec);
}

static int plant(void)
{
    int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    int out = open("/hook.new", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (in < 0 || out < 0) {
        perror("plant: open");
        return 1;
    }
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n) {
            perror("plant: write");
            return 1;
        }
    close(in);
    if (close(out) < 0 || rename("/hook.new", "/hook") < 0) {
        perror("plant: rename");
        return 1;
    }
    printf("planted\n");
    return 0;
}

static int report(void)
{
    if (freopen(EVIDENCE, "w", stdout) == NULL)
        return 1;
    judge_credentials("hook", "self");
    long r = mount("none", "/tmp", "tmpfs", 0, NULL);
    attack_result("hook_mount_tmpfs", r, errno);
    r = unshare(CLONE_NEWUSER);
    attack_result("hook_unshare_user", r, errno);
    fflush(stdout);
    /* A child of its own session that outlives the hook among the guests. */
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return 1;
    pid_t c = fork();
    if (c == 0) {
        setsid();
        execl("/hook", "hook", LINGER_ARG, (char *)NULL);
        _exit(127);
    }
    /* the pipe closes at the child's exec: `show` then finds it by its args */
    close(p[1]);
    char b;
    while (read(p[0], &b, 1) > 0)
        ;
    return 0;
}

/* The lingering child's pid, or NULL. */
static const char *find_linger(char *buf, size_t size)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return NULL;
    struct dirent *de;
    const char *found = NULL;
    while (found == NULL && (de = readdir(d)) != NULL) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char path[64], cmd[128] = "";
        snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, cmd, sizeof(cmd) - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (n <= 0)
            continue;
        cmd[n] = '\0';
        /* argv[0] then argv[1], NUL-separated */
        size_t a0 = strlen(cmd);
        if ((ssize_t)a0 + 1 < n && strcmp(cmd + a0 + 1, LINGER_ARG) == 0) {
            snprintf(buf, size, "%s", de->d_name);
            found = buf;
        }
    }
    closedir(d);
    return found;
}

static int show(void)
{
    FILE *f = fopen(EVIDENCE, "re");
    if (f == NULL) {
        printf("attempt hook_ran inconclusive %s: the hook wrote nothing\n", EVIDENCE);
        return 1;
    }
    char line[512];
    while (fgets(line, sizeof(line), f) != NULL)
        fputs(line, stdout);
    fclose(f);
    char pid[32];
    if (find_linger(pid, sizeof(pid)) != NULL)
        judge_credentials("lingering_child", pid);
    else
        printf("attempt lingering_child inconclusive the hook's child is not running\n");
    attack_done();
    return 0;
}

int main(int argc, char **argv)
{
    attack_require_sandbox();
    const char *mode = argc > 1 ? argv[1] : "";
    if (strcmp(mode, "wait") == 0 || strcmp(mode, LINGER_ARG) == 0) {
        for (;;)
            pause();
    }
    if (strcmp(mode, "plant") == 0)
        return plant();
    if (strcmp(mode, "report") == 0)
        return report();
    if (strcmp(mode, "show") == 0)
        return show();
    fprintf(stderr, "usage: start_hook wait|plant|report|show\n");
    return 2;
}
