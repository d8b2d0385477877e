/* busyexit: many calls (a trace larger than a small filesystem holds),
 * then exit status 7: what rtrace ends with when writing the trace fails. */
#include <stdlib.h>

__attribute__((noinline)) long step(long i) { return i * 3 + 1; }

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	volatile long sum = 0;
	for (long i = 0; i < n; i++)
		sum += step(i);
	return 7;
}
