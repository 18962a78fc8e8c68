/* The OCI container's tier report (oci/report.c). Separate from
 * oci-internal.h because it needs the generated protobuf header. */
#ifndef BH_OCI_REPORT_H
#define BH_OCI_REPORT_H

#include "oci-internal.h"

/* Checks the live sandbox whose sentry is pid (caps: the guests' expected
 * capability mask; limits: those it was created with, or NULL, which the
 * cgroup check compares against, a tasks cap accepting pids.max "max");
 * returns bh_tier_report_json's form as JSON. */
struct bh_limits;
json_t *oci_report_build(const char *id, pid_t pid, enum bh_tier requested, uint64_t caps,
                         const struct bh_limits *limits);
/* Sends it as one TierReport frame; fails when it cannot be delivered. */
int oci_report_send(const char *socket_path, json_t *report, struct bh_error *err);

#endif
