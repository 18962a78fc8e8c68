/* Fuzz target: config.json through oci_config_parse into a
 * bh_sandbox_spec, with the bundle a temporary directory holding a rootfs,
 * a file, a symlink out of the bundle and a nested directory, so path
 * resolution and the escape checks run on real paths (read only: parsing
 * writes nothing). Oracles: a refusal says why and leaves nothing to free;
 * an accepted config names an absolute rootfs that is not the host's `/`
 * and a process with at least one argument. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "oci-internal.h"

static const char *bundle(void)
{
    static char real[PATH_MAX];
    if (real[0])
        return real;
    char dir[256], path[300];
    snprintf(dir, sizeof(dir), "%s/bundle", bh_fuzz_tmpdir());
    const char *const dirs[] = {"", "/rootfs", "/rootfs/etc", "/sub", "/sub/deeper"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(path, sizeof(path), "%s%s", dir, dirs[i]);
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
            bh_fuzz_fail("mkdir %s: %s", path, strerror(errno));
    }
    snprintf(path, sizeof(path), "%s/file", dir);
    FILE *f = fopen(path, "we");
    if (f)
        fclose(f);
    snprintf(path, sizeof(path), "%s/escape", dir);
    if (symlink("/", path) < 0 && errno != EEXIST)
        bh_fuzz_fail("symlink: %s", strerror(errno));
    snprintf(path, sizeof(path), "%s/sub/up", dir);
    if (symlink("../..", path) < 0 && errno != EEXIST)
        bh_fuzz_fail("symlink: %s", strerror(errno));
    if (realpath(dir, real) == NULL)
        bh_fuzz_fail("realpath %s: %s", dir, strerror(errno));
    return real;
}

int bh_fuzz_oci_config(const uint8_t *data, size_t size)
{
    if (size > BH_FUZZ_MAX_INPUT)
        return 0;
    const char *b = bundle();
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct oci_config cfg;
    struct bh_error err = {0};
    int rc = oci_config_parse(text, b, &cfg, &err);
    free(text);
    if (rc < 0) {
        if (err.msg[0] == '\0')
            bh_fuzz_fail("config refused without a reason");
        if (cfg.doc != NULL || cfg.bundle != NULL)
            bh_fuzz_fail("a refused config left memory behind");
        return 0;
    }
    const struct bh_sandbox_spec *s = &cfg.spec;
    if (s->rootfs == NULL || s->rootfs[0] != '/' || strcmp(s->rootfs, "/") == 0)
        bh_fuzz_fail("accepted rootfs `%s`", s->rootfs ? s->rootfs : "(null)");
    if (s->process.argv == NULL || s->process.argv[0] == NULL)
        bh_fuzz_fail("accepted a process without arguments");
    oci_config_free(&cfg);
    return 0;
}

#ifdef BH_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return bh_fuzz_oci_config(data, size);
}
#endif
