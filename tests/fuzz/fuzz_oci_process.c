/* Fuzz target: an OCI Process object (`exec --process FILE`) through
 * oci_process_parse, and a LinuxResources object (`update --resources`)
 * through oci_resources_parse; the same document goes to both, loaded as
 * exec and update load theirs (duplicate keys refused). Oracles: a refusal
 * says why; an accepted process has arguments; limits are never negative. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "oci-internal.h"

int bh_fuzz_oci_process(const uint8_t *data, size_t size)
{
    if (size > BH_FUZZ_MAX_INPUT)
        return 0;
    json_error_t jerr;
    json_t *doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL)
        return 0;
    struct bh_process p;
    bool nnp = false;
    struct bh_error err = {0};
    if (oci_process_parse(doc, "process", &p, &nnp, &err) < 0) {
        if (err.msg[0] == '\0')
            bh_fuzz_fail("process refused without a reason");
    } else {
        if (p.argv == NULL || p.argv[0] == NULL)
            bh_fuzz_fail("accepted a process without arguments");
        oci_process_free(&p);
    }
    struct bh_limits l = {0};
    bh_error_clear(&err);
    if (oci_resources_parse(doc, "resources", &l, &err) < 0) {
        if (err.msg[0] == '\0')
            bh_fuzz_fail("resources refused without a reason");
    } else if (l.memory_bytes < 0 || l.pids < 0 || l.cpu_quota_us < 0 || l.cpu_shares < 0) {
        bh_fuzz_fail("negative limit accepted");
    }
    json_decref(doc);
    return 0;
}

#ifdef BH_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return bh_fuzz_oci_process(data, size);
}
#endif
