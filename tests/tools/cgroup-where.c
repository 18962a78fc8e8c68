/* cgroup-where [CONTROLLER | -u]: prints where bulkhead's cgroups live, as
 * the core finds it (bh_cgroup_hierarchy), so shell tests such as
 * tests/leakcheck work on v1-only, hybrid and v2-only hosts alike. Without an
 * argument: every hierarchy a sandbox gets a directory in, one per line;
 * with a controller: that controller's hierarchy; -u: the unified one. Exits
 * 1 with the reason when the layout has none. */
#include <stdio.h>
#include <string.h>

#include "cgroup.h"

static void print_dir(const char *dir, void *arg)
{
    (void)arg;
    printf("%s\n", dir);
}

int main(int argc, char **argv)
{
    struct bh_error err = {0};
    if (argc > 2 || (argc == 2 && argv[1][0] == '-' && strcmp(argv[1], "-u") != 0)) {
        fprintf(stderr, "usage: cgroup-where [CONTROLLER | -u]\n");
        return 2;
    }
    if (argc == 1) {
        if (bh_cgroup_each_hierarchy(print_dir, NULL, &err) < 0) {
            fprintf(stderr, "cgroup-where: %s\n", err.msg);
            return 1;
        }
        return 0;
    }
    char dir[4096];
    if (bh_cgroup_hierarchy(strcmp(argv[1], "-u") == 0 ? NULL : argv[1], dir, sizeof(dir), &err) <
        0) {
        fprintf(stderr, "cgroup-where: %s\n", err.msg);
        return 1;
    }
    printf("%s\n", dir);
    return 0;
}
