#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mountinfo.h"

/* Reads text as mountinfo: the number of lines read, or -1 with err. */
static int read_all(const char *text, size_t len, struct bh_mount_entry *last, struct bh_error *err)
{
    FILE *f = fmemopen((void *)text, len, "r");
    cr_assert_not_null(f);
    struct bh_mountinfo mi;
    bh_mountinfo_from(&mi, f);
    int n = 0, rc;
    struct bh_mount_entry e;
    while ((rc = bh_mountinfo_next(&mi, &e, err)) == 1) {
        n++;
        if (last != NULL) {
            /* The strings live in the reader's buffer: copy what the test reads. */
            *last = e;
            last->root = strdup(e.root);
            last->point = strdup(e.point);
            last->fstype = strdup(e.fstype);
            last->source = strdup(e.source);
            last->options = strdup(e.options);
            last->super_options = strdup(e.super_options);
            last->optional = NULL;
        }
    }
    bh_mountinfo_close(&mi);
    fclose(f);
    return rc < 0 ? -1 : n;
}

static int read_str(const char *text, struct bh_mount_entry *last, struct bh_error *err)
{
    return read_all(text, strlen(text), last, err);
}

/* Every field of e in one line, strings in brackets: one comparison shows
 * all that differs. */
static void describe(const struct bh_mount_entry *e, char *buf, size_t size)
{
    snprintf(buf, size,
             "%lu %lu %u:%u [%s] [%s] [%s] optional=%zu shared=%lu master=%lu [%s] [%s] [%s]",
             e->id, e->parent, e->major, e->minor, e->root, e->point, e->options, e->n_optional,
             e->shared, e->master, e->fstype, e->source, e->super_options);
}

Test(mountinfo, every_field_of_a_plain_line)
{
    struct bh_mount_entry e;
    struct bh_error err = {0};
    cr_assert_eq(read_str("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root "
                          "rw,errors=continue\n",
                          &e, &err),
                 1, "%s", err.msg);
    char got[512];
    describe(&e, got, sizeof(got));
    cr_assert_str_eq(got, "36 35 98:0 [/mnt1] [/mnt2] [rw,noatime] optional=1 shared=0 master=1 "
                          "[ext3] [/dev/root] [rw,errors=continue]");
}

Test(mountinfo, escapes_of_space_tab_newline_and_backslash_are_undone)
{
    struct bh_mount_entry e;
    struct bh_error err = {0};
    cr_assert_eq(
        read_str("40 1 0:50 /a\\040b /x\\011y\\012z\\134w rw - tmpfs my\\040src rw\n", &e, &err), 1,
        "%s", err.msg);
    cr_assert_str_eq(e.root, "/a b");
    cr_assert_str_eq(e.point, "/x\ty\nz\\w");
    cr_assert_str_eq(e.source, "my src");
}

Test(mountinfo, optional_fields_from_none_to_many)
{
    struct bh_error err = {0};
    const char *lines[] = {
        "1 0 0:1 / / rw - tmpfs none rw\n",
        "1 0 0:1 / / rw shared:7 - tmpfs none rw\n",
        "1 0 0:1 / / rw shared:7 master:3 propagate_from:2 unbindable - tmpfs none rw\n",
    };
    size_t want_n[] = {0, 1, 4};
    unsigned long want_shared[] = {0, 7, 7}, want_master[] = {0, 0, 3};
    for (size_t i = 0; i < 3; i++) {
        FILE *f = fmemopen((void *)lines[i], strlen(lines[i]), "r");
        struct bh_mountinfo mi;
        bh_mountinfo_from(&mi, f);
        struct bh_mount_entry e;
        cr_assert_eq(bh_mountinfo_next(&mi, &e, &err), 1, "%s", err.msg);
        cr_assert_eq(e.n_optional, want_n[i]);
        cr_assert_eq(e.shared, want_shared[i]);
        cr_assert_eq(e.master, want_master[i]);
        if (i == 2) {
            cr_assert_str_eq(e.optional[2], "propagate_from:2");
            cr_assert_str_eq(e.optional[3], "unbindable");
        }
        cr_assert_eq(bh_mountinfo_next(&mi, &e, &err), 0);
        bh_mountinfo_close(&mi);
        fclose(f);
    }
}

Test(mountinfo, a_line_longer_than_a_page_is_read_whole)
{
    /* A guest with CAP_SYS_ADMIN names its mount points: a long one must not
     * be cut, nor the line after it misread. */
    size_t deep = 3 * 4096;
    char *point = malloc(deep + 1);
    for (size_t i = 0; i < deep; i++)
        point[i] = i % 100 == 0 ? '/' : (i % 7 == 0 ? ' ' : 'a');
    point[deep] = '\0';
    size_t cap = 4 * deep + 256;
    char *text = malloc(cap);
    size_t off = (size_t)snprintf(text, cap, "50 1 0:5 / ");
    for (size_t i = 0; i < deep; i++)
        off += point[i] == ' ' ? (size_t)snprintf(text + off, cap - off, "\\040")
                               : (size_t)snprintf(text + off, cap - off, "%c", point[i]);
    off += (size_t)snprintf(text + off, cap - off, " rw - proc proc rw\n");
    off += (size_t)snprintf(text + off, cap - off, "51 50 0:6 / /next rw - sysfs sysfs ro\n");
    cr_assert_gt(off, 4096);
    FILE *f = fmemopen(text, off, "r");
    struct bh_mountinfo mi;
    bh_mountinfo_from(&mi, f);
    struct bh_mount_entry e;
    struct bh_error err = {0};
    cr_assert_eq(bh_mountinfo_next(&mi, &e, &err), 1, "%s", err.msg);
    cr_assert_str_eq(e.point, point);
    cr_assert_str_eq(e.fstype, "proc");
    cr_assert_eq(bh_mountinfo_next(&mi, &e, &err), 1, "%s", err.msg);
    cr_assert_str_eq(e.point, "/next");
    cr_assert_eq(bh_mountinfo_next(&mi, &e, &err), 0);
    bh_mountinfo_close(&mi);
    fclose(f);
    free(text);
    free(point);
}

Test(mountinfo, a_line_cut_short_is_an_error)
{
    struct bh_error err = {0};
    cr_assert_eq(read_str("1 0 0:1 / / rw - tmpfs none rw\n2 1 0:2 / /a rw - tmp", NULL, &err), -1);
    cr_assert(strstr(err.msg, "line 2") != NULL, "%s", err.msg);
    /* Even a whole-looking last line without its newline may have lost fields. */
    cr_assert_eq(read_str("1 0 0:1 / / rw - tmpfs none rw", NULL, &err), -1);
    cr_assert(strstr(err.msg, "cut short") != NULL, "%s", err.msg);
}

Test(mountinfo, lines_of_another_shape_are_errors_not_skipped)
{
    const char *bad[] = {
        "garbage\n",
        "\n",
        "x 0 0:1 / / rw - tmpfs none rw\n",            /* id not a number */
        "1 0 01 / / rw - tmpfs none rw\n",             /* no major:minor */
        "1 0 0:1 / / rw tmpfs none rw\n",              /* no separator */
        "1 0 0:1 / / rw - tmpfs none\n",               /* no super options */
        "1 0 0:1 / / rw - tmpfs none rw extra\n",      /* one field too many */
        "1 0 0:1 / /a\\9 rw - tmpfs none rw\n",        /* not an octal escape */
        "1 0 0:1 / /a\\ rw - tmpfs none rw\n",         /* a lone backslash */
        "1 0 0:1 / /a\\000b rw - tmpfs none rw\n",     /* a NUL in a path */
        "1 0 0:1 / a rw - tmpfs none rw\n",            /* a relative mount point */
        "1 0 0:1 / /  rw - tmpfs none rw\n",           /* an empty field */
        "1 0 0:1 / / rw shared:x - tmpfs none rw\n",   /* a peer group that is no number */
        "1 0 0:1 / / rw - tmpfs none rw,a\\q\n",       /* a bad escape in the options */
        "1 0 0:1 / / rw - tmpfs none rw\n1 0 0:1 /\n", /* a good line, then a bad one */
        "99999999999999999999999 0 0:1 / / rw - tmpfs none rw\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct bh_error err = {0};
        cr_assert_eq(read_str(bad[i], NULL, &err), -1, "accepted: %s", bad[i]);
        cr_assert_neq(err.msg[0], '\0');
    }
}

Test(mountinfo, a_nul_byte_in_a_line_is_an_error)
{
    static const char text[] = "1 0 0:1 / /a\0b rw - tmpfs none rw\n";
    struct bh_error err = {0};
    cr_assert_eq(read_all(text, sizeof(text) - 1, NULL, &err), -1);
    cr_assert(strstr(err.msg, "NUL") != NULL, "%s", err.msg);
}

/* A bind of a namespace file (ip netns, a pod's netns): its root is no path. */
Test(mountinfo, a_namespace_files_root_is_no_path)
{
    static const char line[] = "612 29 0:4 net:[4026532281] /run/netns/pod rw - nsfs nsfs rw\n";
    struct bh_mount_entry e = {0};
    struct bh_error err = {0};
    char got[512];
    int n = read_str(line, &e, &err);
    describe(&e, got, sizeof(got));
    cr_assert(n == 1 && strstr(got, " [net:[4026532281]] [/run/netns/pod] ") != NULL, "%d %s %s", n,
              got, err.msg);
}

Test(mountinfo, an_empty_source_is_a_field_of_its_own)
{
    struct bh_mount_entry e;
    struct bh_error err = {0};
    cr_assert_eq(read_str("1 0 0:1 / /a rw - tmpfs  rw\n", &e, &err), 1, "%s", err.msg);
    cr_assert(e.source[0] == '\0' && strcmp(e.super_options, "rw") == 0,
              "source `%s`, super options `%s`", e.source, e.super_options);
}

Test(mountinfo, options_keep_their_escapes_so_items_split_right)
{
    struct bh_mount_entry e;
    struct bh_error err = {0};
    cr_assert_eq(
        read_str("1 0 0:1 / /a rw - overlay overlay rw,lowerdir=/l\\054x,upperdir=/u\n", &e, &err),
        1, "%s", err.msg);
    cr_assert_str_eq(e.super_options, "rw,lowerdir=/l\\054x,upperdir=/u");
    cr_assert(bh_mountinfo_has_option(e.super_options, "rw"));
    cr_assert(bh_mountinfo_has_option(e.super_options, "upperdir=/u"));
    cr_assert_not(bh_mountinfo_has_option(e.super_options, "x"));
    cr_assert_not(bh_mountinfo_has_option(e.super_options, "r"));
}

Test(mountinfo, this_process_s_own_table_reads_whole)
{
    struct bh_mountinfo mi;
    struct bh_error err = {0};
    cr_assert_eq(bh_mountinfo_open(&mi, &err), 0, "%s", err.msg);
    struct bh_mount_entry e;
    int rc, n = 0;
    bool root = false;
    while ((rc = bh_mountinfo_next(&mi, &e, &err)) == 1) {
        n++;
        root |= strcmp(e.point, "/") == 0;
    }
    bh_mountinfo_close(&mi);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_gt(n, 0);
    cr_assert(root);
}
