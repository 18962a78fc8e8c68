/* Private to the core: the sandbox description's serialisation to JSON and
 * its validation (sandbox-spec.c), which is how a spec travels from the front
 * end to the sentry program and a process to an exec. */
#ifndef BH_SPEC_JSON_INTERNAL_H
#define BH_SPEC_JSON_INTERNAL_H

#include <jansson.h>

#include "error.h"
#include "sandbox-spec.h"

json_t *bh_spec_to_json(const struct bh_sandbox_spec *spec);
int bh_spec_from_json(json_t *obj, struct bh_sandbox_spec *spec, struct bh_error *err);
json_t *bh_process_to_json(const struct bh_process *proc);
int bh_process_from_json(json_t *obj, struct bh_process *proc, struct bh_error *err);
void bh_process_free(struct bh_process *proc);
/* Validates what every front end must give (argv, tier, paths absolute). */
int bh_spec_validate(const struct bh_sandbox_spec *spec, struct bh_error *err);

#endif
