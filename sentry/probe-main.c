/* Placeholder: replaced by its owner. */
#include <stdio.h>
int main(void)
{
    fprintf(stderr, "bulkhead-probe: not built yet\n");
    return 125;
}
