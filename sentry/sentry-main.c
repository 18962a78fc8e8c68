/* Placeholder: replaced by its owner. */
#include <stdio.h>
int main(void)
{
    fprintf(stderr, "bulkhead-sentry: not built yet\n");
    return 125;
}
