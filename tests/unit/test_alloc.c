#include <criterion/criterion.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../supervisor/alloc.h"

Test(alloc, a_copy_is_its_own_and_a_calloc_is_zeroed)
{
    const char *from = "session-7";
    char *copy = bhd_xstrdup(from);
    cr_assert_str_eq(copy, from);
    cr_assert_neq(copy, from);
    free(copy);

    unsigned char *z = bhd_xcalloc(64, 4);
    for (size_t i = 0; i < 256; i++)
        cr_assert_eq(z[i], 0);
    free(z);
}

Test(alloc, a_failed_allocation_ends_the_daemon_instead_of_a_partial_reply, .signal = SIGABRT)
{
    bhd_alloc_checked(NULL, 32);
}

Test(alloc, a_successful_allocation_passes_through)
{
    int x = 0;
    cr_assert_eq(bhd_alloc_checked(&x, sizeof(x)), &x);
}
