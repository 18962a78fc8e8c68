/* The device cgroup on v2: cgroup v2 has no devices.allow/devices.deny, only
 * a BPF_PROG_TYPE_CGROUP_DEVICE program attached to the cgroup, which the
 * kernel runs on every open and mknod of a device node by a member (and by
 * members of its descendants). This file turns the OCI rule list into such
 * a program and attaches it.
 *
 * The program decides as the v1 list reads: the last rule that matches the
 * device decides; an allow rule matches only when it grants every access
 * asked (read, write, mknod), a deny rule as soon as it names one of them;
 * no match: denied (runc's default, and the v1 backend's first `a`). */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgroup-internal.h"
#include "cleanup.h"

/* The largest rule takes 8 instructions; the prologue 6 (two loads and the
 * split of the first word, two more loads), the default 2. */
#define INSNS_PER_RULE 8
#define INSNS_PROLOGUE 6
#define INSNS_FIXED (INSNS_PROLOGUE + 2)

static struct bpf_insn insn(uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm)
{
    return (struct bpf_insn){.code = code, .dst_reg = dst, .src_reg = src, .off = off, .imm = imm};
}

static int access_bits(const char *access)
{
    int bits = 0;
    for (const char *c = access; *c != '\0'; c++) {
        if (*c == 'm')
            bits |= BPF_DEVCG_ACC_MKNOD;
        else if (*c == 'r')
            bits |= BPF_DEVCG_ACC_READ;
        else if (*c == 'w')
            bits |= BPF_DEVCG_ACC_WRITE;
        else
            return -1;
    }
    return bits;
}

size_t bh_cgroup_device_program_max(size_t n_rules)
{
    return INSNS_FIXED + INSNS_PER_RULE * n_rules;
}

ssize_t bh_cgroup_device_program(const struct bh_device_rule *rules, size_t n, struct bpf_insn *out,
                                 size_t max)
{
    if (max < bh_cgroup_device_program_max(n))
        return -1;
    size_t k = 0;
    /* r2 = access (BPF_DEVCG_ACC_*), r3 = type (BPF_DEVCG_DEV_*),
     * r4 = major, r5 = minor; the context is three u32. */
    out[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_2, BPF_REG_1, 0, 0);
    out[k++] = insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_3, BPF_REG_2, 0, 0);
    out[k++] = insn(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_3, 0, 0, 0xffff);
    out[k++] = insn(BPF_ALU64 | BPF_RSH | BPF_K, BPF_REG_2, 0, 0, 16);
    out[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_4, BPF_REG_1, 4, 0);
    out[k++] = insn(BPF_LDX | BPF_MEM | BPF_W, BPF_REG_5, BPF_REG_1, 8, 0);
    _Static_assert(INSNS_PROLOGUE == 6, "the prologue above is 6 instructions");
    /* Last rule first: the first match found is the last in the list. */
    for (size_t i = n; i-- > 0;) {
        const struct bh_device_rule *r = &rules[i];
        int bits = access_bits(r->access);
        if (bits <= 0 || (r->type != 'a' && r->type != 'c' && r->type != 'b') || r->major < -1 ||
            r->minor < -1)
            return -1;
        size_t skips[4], ns = 0; /* jumps to the next rule, patched below */
        if (r->type != 'a') {
            skips[ns++] = k;
            out[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_3, 0, 0,
                            r->type == 'c' ? BPF_DEVCG_DEV_CHAR : BPF_DEVCG_DEV_BLOCK);
        }
        if (r->major >= 0) {
            skips[ns++] = k;
            out[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_4, 0, 0, r->major);
        }
        if (r->minor >= 0) {
            skips[ns++] = k;
            out[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_5, 0, 0, r->minor);
        }
        out[k++] = insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_0, BPF_REG_2, 0, 0);
        if (r->allow) {
            /* Asked for anything the rule does not grant: not this rule. */
            out[k++] = insn(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_0, 0, 0, ~bits & 0xffff);
            skips[ns++] = k;
            out[k++] = insn(BPF_JMP | BPF_JNE | BPF_K, BPF_REG_0, 0, 0, 0);
        } else {
            out[k++] = insn(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_0, 0, 0, bits);
            skips[ns++] = k;
            out[k++] = insn(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 0, 0);
        }
        out[k++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, r->allow ? 1 : 0);
        out[k++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
        for (size_t j = 0; j < ns; j++)
            out[skips[j]].off = (int16_t)(k - skips[j] - 1);
    }
    out[k++] = insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);
    out[k++] = insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);
    return (ssize_t)k;
}

int bh_cgroup_device_program_load(const struct bh_device_rule *rules, size_t n,
                                  struct bh_error *err)
{
    size_t max = bh_cgroup_device_program_max(n);
    cleanup_free struct bpf_insn *prog = calloc(max, sizeof(*prog));
    if (prog == NULL)
        return bh_error_errno(err, ENOMEM, "device cgroup program");
    ssize_t len = bh_cgroup_device_program(rules, n, prog, max);
    if (len < 0)
        return bh_error_set(err, EINVAL, "device cgroup program: a rule is malformed");
    char log[4096] = "";
    union bpf_attr a;
    memset(&a, 0, sizeof(a));
    a.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
    a.insns = (uint64_t)(uintptr_t)prog;
    a.insn_cnt = (uint32_t)len;
    a.license = (uint64_t)(uintptr_t) "Apache-2.0";
    int fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
    int e = errno;
    if (fd < 0 && e != EPERM) {
        /* Again with the verifier's log, only to say why. */
        a.log_buf = (uint64_t)(uintptr_t)log;
        a.log_size = sizeof(log);
        a.log_level = 1;
        fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
        if (fd >= 0)
            return fd;
    }
    if (fd < 0)
        return bh_error_errno(err, e,
                              "device rules refused: the kernel did not load their "
                              "BPF_PROG_TYPE_CGROUP_DEVICE program (needs CAP_BPF or "
                              "CAP_SYS_ADMIN and CONFIG_CGROUP_BPF)%s%.300s",
                              log[0] ? "; verifier: " : "", log);
    return fd;
}

int bh_cgroup_device_attach(const char *dir, const struct bh_device_rule *rules, size_t n,
                            struct bh_error *err)
{
    cleanup_close int cg = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cg < 0)
        return bh_error_errno(err, errno, "device rules: open the cgroup `%s`", dir);
    cleanup_close int prog = bh_cgroup_device_program_load(rules, n, err);
    if (prog < 0)
        return -1;
    union bpf_attr a;
    memset(&a, 0, sizeof(a));
    a.target_fd = (uint32_t)cg;
    a.attach_bpf_fd = (uint32_t)prog;
    a.attach_type = BPF_CGROUP_DEVICE;
    /* Multi: a program of a parent cgroup (systemd's, docker's) still
     * applies; both must allow. */
    a.attach_flags = BPF_F_ALLOW_MULTI;
    if (syscall(SYS_bpf, BPF_PROG_ATTACH, &a, sizeof(a)) < 0)
        return bh_error_errno(err, errno,
                              "device rules refused: their program could not be attached to "
                              "the cgroup `%s` (not a cgroup v2 directory?), so they could not "
                              "be enforced",
                              dir);
    return 0;
}

int cg_v2_devices(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    if (l->n_device_rules == 0)
        return 0;
    if (cg->unified_h < 0)
        return bh_error_set(err, ENOTSUP,
                            "device rules refused: the sandbox has no cgroup v2 directory to "
                            "attach their program to");
    return bh_cgroup_device_attach(
        cg->h[cg->unified_h].dir, l->device_rules,
        l->n_device_rules < BH_MAX_DEVICE_RULES ? l->n_device_rules : BH_MAX_DEVICE_RULES, err);
}
