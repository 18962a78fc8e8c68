/* Shared between the probe (a static guest program) and its readers. */
#ifndef BH_PROBE_REPORT_H
#define BH_PROBE_REPORT_H
#endif
