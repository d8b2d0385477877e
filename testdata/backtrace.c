/* backtrace: glibc's backtrace() walks the stack with the unwinder, which
 * must find the real return addresses there, not a tracer's. */
#include <execinfo.h>
#include <stdio.h>

int walk(void)
{
	void *frames[64];
	return backtrace(frames, 64);
}
int two(void) { return walk(); }
int one(void) { return two(); }

int main(void)
{
	int n = one();
	printf("backtrace %d %d\n", n, walk());
	return 0;
}
