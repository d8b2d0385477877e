/* int3loop: the ptrace floor. Executes int3 argv[1] times; a tracer that
 * only waits and continues measures the bare cost of one breakpoint stop. */
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	for (long i = 0; i < n; i++)
		__asm__ volatile("int3");
	return 0;
}
