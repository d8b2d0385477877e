/* recover: a function that reads its caller's return address from the
 * stack itself (the frame-pointer chain), as uftrace's -T FUNC@recover is
 * for: under a tracer that hijacks returns it finds the tracer's address
 * unless the real ones are put back while it runs. */
#include <stdio.h>

/* Where check() returns to: main's code, or somewhere else. */
__attribute__((noinline)) void *callers_return(void)
{
	return __builtin_return_address(1);
}

__attribute__((noinline)) int inside(void *p, void *lo, void *hi)
{
	return (char *)p >= (char *)lo && (char *)p < (char *)hi;
}

__attribute__((noinline)) const char *check(void)
{
	void *r = callers_return();
	return inside(r, (void *)check, (char *)check + 0x1000) ? "in the program" : "elsewhere";
}

int main(void)
{
	printf("check returns %s\n", check());
	return 0;
}
