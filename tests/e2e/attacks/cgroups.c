/* Attacks on the global id pools behind cgroups, from an OCI container whose
 * root holds CAP_SYS_ADMIN and whose seccomp profile allows mount (docker
 * `--cap-add SYS_ADMIN --security-opt seccomp=unconfined`). Every cgroup made
 * takes a css id per controller and, with the memory controller, one of the
 * host's 65535 memcg ids, which a dying cgroup keeps while its page cache is
 * charged; nothing in v1 and only cgroup.max.descendants in v2 bounds them.
 * So a guest that can make cgroups at all can take the pool from the host.
 *   cgroup_mkdir          mkdir in each cgroup hierarchy the config shows
 *                         (a cgroup mount asked read-write)
 *   cgroup_remount_rw     remount that mount read-write, then mkdir in it
 *   cgroup2_mount_mkdir   a fresh cgroup2 mount (the cgroup namespace's root,
 *                         the container's own cgroup), then mkdir in it
 *   cgroup1_memory_mkdir  a fresh v1 memory hierarchy, then mkdir in it
 *   cgroup1_named_mkdir   a v1 hierarchy with no controller (name=), which
 *                         the kernel lets a namespace's root make, then mkdir
 * Each mkdir that works is undone at once (rmdir), and reported ESCAPED. A
 * control line says whether mount reaches the kernel at all (a tmpfs): at
 * the container tier the tier's filter stays beneath the OCI profile, so it
 * does not, and the fresh mounts meet that filter before the cgroup's own
 * ownership (host root's, never delegated). */
#include <dirent.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "attack.h"

static bool is_cgroupfs(const char *dir)
{
    struct statfs s;
    return statfs(dir, &s) == 0 &&
           (s.f_type == CGROUP_SUPER_MAGIC || s.f_type == CGROUP2_SUPER_MAGIC);
}

/* mkdir of a child cgroup in dir; 0 when it was made (and removed again),
 * else the errno. */
static int try_mkdir(const char *dir)
{
    char p[4200];
    snprintf(p, sizeof(p), "%s/bh-attack-%d", dir, (int)getpid());
    if (mkdir(p, 0755) < 0)
        return errno;
    rmdir(p);
    return 0;
}

/* The first cgroupfs directories under the config's cgroup mount (v2: the
 * mount itself; v1 and hybrid: one per hierarchy below it). */
static size_t cgroup_dirs(char dirs[][300], size_t max)
{
    size_t n = 0;
    if (is_cgroupfs("/sys/fs/cgroup")) {
        snprintf(dirs[n++], 300, "/sys/fs/cgroup");
        return n;
    }
    DIR *d = opendir("/sys/fs/cgroup");
    if (d == NULL)
        return 0;
    struct dirent *e;
    while (n < max && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[300];
        snprintf(p, sizeof(p), "/sys/fs/cgroup/%s", e->d_name);
        if (is_cgroupfs(p))
            snprintf(dirs[n++], 300, "%s", p);
    }
    closedir(d);
    return n;
}

/* Tries mkdir in every dir; the verdict names the first that worked, else
 * the last refusal. */
static void mkdir_each(const char *name, char dirs[][300], size_t n)
{
    if (n == 0) {
        attack_line(name, "inconclusive", "no cgroupfs under /sys/fs/cgroup");
        return;
    }
    int last = 0;
    for (size_t i = 0; i < n; i++) {
        int e = try_mkdir(dirs[i]);
        if (e == 0) {
            attack_line(name, "ESCAPED", "made a cgroup in %s", dirs[i]);
            return;
        }
        last = e;
    }
    attack_line(name, "refused", "%s (%zu hierarchies)", attack_errname(last), n);
}

static void remount_rw(void)
{
    char dirs[16][300];
    size_t n = cgroup_dirs(dirs, 16);
    int last = 0;
    for (size_t i = 0; i < n; i++)
        if (mount(NULL, dirs[i], NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  NULL) < 0)
            last = errno;
    if (n > 0 && last != 0) {
        attack_line("cgroup_remount_rw", "refused", "%s", attack_errname(last));
        return;
    }
    mkdir_each("cgroup_remount_rw", dirs, n);
}

/* A fresh mount of fstype with data at a new directory, then mkdir in it. */
static void fresh_mount(const char *name, const char *fstype, const char *data)
{
    char at[64];
    snprintf(at, sizeof(at), "/tmp/%s", name); /* made by the test: the root is read-only */
    struct stat st;
    if (stat(at, &st) < 0) {
        attack_line(name, "inconclusive", "no mount point %s: %s", at, attack_errname(errno));
        return;
    }
    if (mount("cgroup", at, fstype, MS_NOSUID | MS_NODEV | MS_NOEXEC, data) < 0) {
        attack_line(name, "refused", "mount: %s", attack_errname(errno));
        return;
    }
    char dirs[1][300];
    snprintf(dirs[0], 300, "%s", at);
    mkdir_each(name, dirs, 1);
    umount2(at, MNT_DETACH);
}

int main(void)
{
    attack_require_sandbox();
    char dirs[16][300];
    size_t n = cgroup_dirs(dirs, 16);
    mkdir_each("cgroup_mkdir", dirs, n);
    remount_rw();
    /* Whether mount reaches the kernel at all: tells a seccomp or capability
     * refusal from the cgroup's own below. */
    if (mount("tmpfs", "/tmp/cgroup2_mount_mkdir", "tmpfs", 0, "size=4k") == 0) {
        printf("control tmpfs_mount ok\n");
        umount2("/tmp/cgroup2_mount_mkdir", MNT_DETACH);
    } else {
        printf("control tmpfs_mount %s\n", attack_errname(errno));
    }
    fresh_mount("cgroup2_mount_mkdir", "cgroup2", NULL);
    fresh_mount("cgroup1_memory_mkdir", "cgroup", "memory");
    fresh_mount("cgroup1_named_mkdir", "cgroup", "none,name=bhattack");
    attack_done();
    return 0;
}
