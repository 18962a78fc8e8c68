/* Fuzz target: seccomp policy text (the files in seccomp-policies/ and the
 * policy docker's profile becomes) through bh_policy_parse, and, when it
 * parses, bh_policy_compile into BPF (in memory: nothing is installed).
 * @include resolves against a temporary copy of a small policy set, so the
 * include stack, depth and cycle checks run too. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "policy.h"

static const char *include_dir(void)
{
    static char dir[128];
    if (dir[0])
        return dir;
    snprintf(dir, sizeof(dir), "%s/policies", bh_fuzz_tmpdir());
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        bh_fuzz_fail("mkdir %s: %s", dir, strerror(errno));
    static const struct {
        const char *name, *text;
    } files[] = {
        {"base.policy", "# shared\nread allow\nwrite allow\nexit_group allow\n"},
        {"cycle.policy", "@include cycle.policy\n"},
        {"nested.policy", "@include base.policy\nopenat notify\n"},
        {"args.policy", "mmap allow if prot & PROT_EXEC == 0 || prot & PROT_WRITE == 0\n"
                        "keyctl errno EPERM\n"},
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
        FILE *f = fopen(path, "we");
        if (f == NULL)
            bh_fuzz_fail("write %s: %s", path, strerror(errno));
        fputs(files[i].text, f);
        fclose(f);
    }
    /* the shared part the real tier policies include, when run from the tree */
    FILE *in = fopen("seccomp-policies/host-state.policy", "re");
    if (in != NULL) {
        char path[256], chunk[4096];
        snprintf(path, sizeof(path), "%s/host-state.policy", dir);
        FILE *out = fopen(path, "we");
        size_t n;
        while (out != NULL && (n = fread(chunk, 1, sizeof(chunk), in)) > 0)
            fwrite(chunk, 1, n, out);
        if (out != NULL)
            fclose(out);
        fclose(in);
    }
    return dir;
}

int bh_fuzz_policy(const uint8_t *data, size_t size)
{
    if (size > BH_FUZZ_MAX_INPUT)
        return 0;
    const char *dir = include_dir();
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct bh_policy *pol = NULL;
    struct bh_error err = {0};
    int rc = bh_policy_parse(text, "fuzz.policy", dir, &pol, &err);
    free(text);
    if (rc < 0) {
        if (pol != NULL)
            bh_fuzz_fail("a failed parse returned a policy");
        if (err.msg[0] == '\0')
            bh_fuzz_fail("a refused policy without a reason");
        return 0;
    }
    if (pol == NULL)
        bh_fuzz_fail("a successful parse returned no policy");
    (void)bh_policy_has_notify(pol);
    (void)bh_policy_rule_count(pol);
    struct sock_fprog prog = {0};
    if (bh_policy_compile(pol, &prog, &err) == 0) {
        if (prog.len == 0 || prog.filter == NULL)
            bh_fuzz_fail("compiled to an empty program");
        bh_policy_prog_free(&prog);
    } else if (err.msg[0] == '\0') {
        bh_fuzz_fail("compile failed without a reason");
    }
    bh_policy_free(pol);
    return 0;
}

#ifdef BH_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return bh_fuzz_policy(data, size);
}
#endif
