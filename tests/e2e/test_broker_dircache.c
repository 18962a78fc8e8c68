/* The broker's parent-directory cache and a tmpfs the host shares into a
 * kernel-tier container (as `docker run -v /dev/shm:/dev/shm` does): the
 * host renames there reach no broker, so the cache must not serve that
 * filesystem. A Python guest stats /shared/d/f until the cache would serve
 * /shared/d, then waits; the host renames d to e and makes a new d/f; the
 * guest's next stat of /shared/d/f must find the new file, not the renamed
 * one. On a broker that caches every whole tmpfs in the root, it finds the
 * old inode (under its old name). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "harness.h"

static const char shared_py[] = "import os, signal\n"
                                "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])\n"
                                /* The first stat sees /shared/d once, the second opens it, the rest
                                 * would come from the cache. */
                                "for _ in range(5): a = os.stat('/shared/d/f').st_ino\n"
                                "print('before', a, flush=True)\n"
                                "signal.sigwait([signal.SIGUSR1])\n"
                                "b = os.stat('/shared/d/f').st_ino\n"
                                "c = os.stat('/shared/e/f').st_ino\n"
                                "print('after', b, c, flush=True)\n";

static char dir[64], shm[128], id[64];

static void cleanup(void)
{
    if (id[0] != '\0') {
        struct run_result r;
        h_bulkhead_in(dir, (const char *const[]){"delete", "--force", id, NULL}, 60, &r);
        h_free(&r);
    }
    if (shm[0] != '\0')
        umount2(shm, MNT_DETACH);
    if (dir[0] != '\0')
        h_remove_tree(dir);
}

static json_t *bind_mount(const char *dest, const char *src, const char *mode)
{
    return json_pack("{s:s, s:s, s:s, s:[s, s, s]}", "destination", dest, "type", "bind", "source",
                     src, "options", "rbind", mode, "nosuid");
}

static void write_bundle(const char *bundle)
{
    json_t *c = h_spec_config(dir, bundle);
    json_t *proc = json_object_get(c, "process");
    json_object_set_new(proc, "args", json_pack("[s, s, s]", "/usr/bin/python3", "-c", shared_py));
    json_object_set_new(proc, "terminal", json_false());
    json_t *ann = json_object_get(c, "annotations");
    if (!json_is_object(ann))
        json_object_set_new(c, "annotations", ann = json_object());
    json_object_set_new(ann, "dev.bulkhead.tier", json_string("kernel"));
    json_t *mounts = json_object_get(c, "mounts");
    cr_assert(json_is_array(mounts), "config.json has no mounts");
    json_array_append_new(mounts, bind_mount("/usr", "/usr", "ro"));
    json_array_append_new(mounts, bind_mount("/shared", shm, "rw"));
    char config[160];
    snprintf(config, sizeof(config), "%s/config.json", bundle);
    cr_assert_eq(json_dump_file(c, config, JSON_INDENT(1)), 0);
    json_decref(c);
}

static ino_t make_file(const char *rel)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", shm, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0, "create %s: %s", p, strerror(errno));
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    close(fd);
    return st.st_ino;
}

TestSuite(broker_dircache, .timeout = 300);

Test(broker_dircache, a_host_rename_in_a_shared_tmpfs_is_seen_by_the_next_stat, .fini = cleanup)
{
    h_require_kernel_tier();
    /* The host's tmpfs lives in a mount namespace of this test process
     * only: nothing of it reaches the host's mount table. */
    cr_assert_eq(unshare(CLONE_NEWNS), 0, "unshare: %s", strerror(errno));
    cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "%s", strerror(errno));
    snprintf(dir, sizeof(dir), "/tmp/bh-e2e-dircache-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(chmod(dir, 0755), 0);
    h_bundle_skeleton(dir);
    char bundle[128], p[256];
    snprintf(bundle, sizeof(bundle), "%s/bundle", dir);
    snprintf(p, sizeof(p), "%s/rootfs/shared", bundle);
    cr_assert_eq(mkdir(p, 0755), 0);
    snprintf(shm, sizeof(shm), "%s/shm", dir);
    cr_assert_eq(mkdir(shm, 0755), 0);
    cr_assert_eq(mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m"), 0,
                 "mount a tmpfs on %s: %s", shm, strerror(errno));
    snprintf(p, sizeof(p), "%s/d", shm);
    cr_assert_eq(mkdir(p, 0755), 0);
    ino_t old_ino = make_file("d/f");
    write_bundle(bundle);

    snprintf(id, sizeof(id), "dircache-shared-%d", (int)getpid());
    char root[128], log[128];
    snprintf(root, sizeof(root), "%s/root", dir);
    snprintf(log, sizeof(log), "%s/log.json", dir);
    char *bh = h_path("bulkhead");
    struct h_job j = h_spawn(
        (char *const[]){bh, "--root", root, "--log", log, "run", "--bundle", bundle, id, NULL},
        NULL, NULL, NULL);
    free(bh);
    /* Until the guest says it stat'ed, or ended; the bound only stops a hang. */
    bool ready = false;
    for (int i = 0; i < 12000 && !ready; i++) {
        cleanup_free char *out = h_read_fd(j.out);
        ready = strstr(out, "before ") != NULL;
        if (!ready) {
            if (waitpid(j.pid, NULL, WNOHANG) != 0)
                break;
            usleep(10000);
        }
    }
    if (!ready) {
        char *out = NULL, *err = NULL;
        int st = h_finish(&j, 30, &out, &err);
        cr_assert_fail("the guest never said `before` (exit %d): %s %s", st, out, err);
    }

    char from[256], to[256];
    snprintf(from, sizeof(from), "%s/d", shm);
    snprintf(to, sizeof(to), "%s/e", shm);
    cr_assert_eq(rename(from, to), 0, "rename: %s", strerror(errno));
    cr_assert_eq(mkdir(from, 0755), 0);
    ino_t new_ino = make_file("d/f");
    cr_assert_neq(new_ino, old_ino);

    struct run_result k;
    h_bulkhead_in(dir, (const char *const[]){"kill", id, "USR1", NULL}, 60, &k);
    cr_expect_eq(k.status, 0, "kill: %s", k.err);
    h_free(&k);
    char *out = NULL, *err = NULL;
    int st = h_finish(&j, 120, &out, &err);
    cr_assert_eq(st, 0, "the guest failed (exit %d): %s %s", st, out, err);
    unsigned long before = 0, after_d = 0, after_e = 0;
    const char *b = strstr(out, "before "), *a = strstr(out, "after ");
    cr_assert(b != NULL && a != NULL && sscanf(b, "before %lu", &before) == 1 &&
                  sscanf(a, "after %lu %lu", &after_d, &after_e) == 2,
              "unexpected output: %s", out);
    cr_expect_eq(before, (unsigned long)old_ino, "before the rename: inode %lu, expected %lu",
                 before, (unsigned long)old_ino);
    cr_expect_eq(after_d, (unsigned long)new_ino,
                 "after the host's rename /shared/d/f is inode %lu, expected the new file's %lu "
                 "(the renamed one is %lu): a stale cached directory answered",
                 after_d, (unsigned long)new_ino, (unsigned long)old_ino);
    cr_expect_eq(after_e, (unsigned long)old_ino, "/shared/e/f is inode %lu, expected %lu", after_e,
                 (unsigned long)old_ino);
    free(out);
    free(err);
    id[0] = '\0'; /* run deleted it */
}
