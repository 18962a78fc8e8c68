/* The sentry's syscall broker: it receives seccomp user notifications from
 * guest processes, reads their pointer arguments once, decides by policy,
 * performs the operation itself and answers (or refuses with an errno). */
#ifndef BH_BROKER_H
#define BH_BROKER_H

#include <stdint.h>
#include <sys/types.h>

#include "error.h"

struct bh_broker_config {
    uint32_t guest_uid; /* file operations run with the guest's fs ids */
    uint32_t guest_gid;
    pid_t sentry_pid;   /* the sentry's pid as the guest sees it (1): never a target */
};

struct bh_broker;

int bh_broker_new(const struct bh_broker_config *cfg, struct bh_broker **out,
                  struct bh_error *err);
/* Starts the broker's threads. Signals must already be blocked in the caller
 * so that they stay with the thread that reads its signalfd. */
int bh_broker_start(struct bh_broker *broker, struct bh_error *err);
/* Hands a listener fd (from a guest's filter) to the broker, which owns it
 * from then on. Safe to call from any thread, before or after start. */
int bh_broker_add_listener(struct bh_broker *broker, int listener_fd, struct bh_error *err);
/* Stops the threads and closes every listener. */
void bh_broker_free(struct bh_broker *broker);

#endif
