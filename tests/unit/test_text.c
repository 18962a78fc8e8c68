#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

Test(text, a_stream_is_read_whole_past_one_chunk_and_nul_terminated)
{
    size_t size = 3 * 8192 + 17;
    char *src = malloc(size);
    cr_assert_not_null(src);
    for (size_t i = 0; i < size; i++)
        src[i] = (char)('a' + i % 26);
    src[100] = '\0'; /* the length says where it ends, not the first NUL */
    FILE *f = fmemopen(src, size, "r");
    cr_assert_not_null(f);
    size_t len = 0;
    char *got = bh_read_stream(f, &len);
    fclose(f);
    cr_assert_not_null(got);
    cr_assert_eq(len, size);
    cr_assert_eq(memcmp(got, src, size), 0);
    cr_assert_eq(got[size], '\0');
    free(got);
    free(src);
}

Test(text, an_empty_stream_is_an_empty_string)
{
    FILE *f = fopen("/dev/null", "re");
    cr_assert_not_null(f);
    size_t len = 7;
    char *got = bh_read_stream(f, &len);
    fclose(f);
    cr_assert_not_null(got);
    cr_assert_eq(len, 0);
    cr_assert_str_eq(got, "");
    free(got);
}

Test(text, a_stream_that_cannot_be_read_is_an_error)
{
    FILE *f = fopen("/dev/null", "we"); /* write-only: reading it fails */
    cr_assert_not_null(f);
    char *got = bh_read_stream(f, NULL);
    fclose(f);
    cr_assert_null(got);
}
