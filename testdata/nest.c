/* nest: calls a library function that calls libc (nestlib.c). */
#include <stdio.h>

int nest_work(const char *s);

int main(void)
{
	printf("nest %d\n", nest_work("nested"));
	return 0;
}
