/* nestlib: a shared library that calls libc through its own PLT, and a
 * function it exports itself through it too (interposable: -fPIC). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int nest_helper(int n) { return n > 0 ? 0 : 1; }

int nest_work(const char *s)
{
	char *p = malloc(strlen(s) + 1);
	strcpy(p, s);
	int n = (int)strlen(p) + (getpid() > 0) + nest_helper(1);
	free(p);
	return n;
}
