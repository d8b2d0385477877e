/* flood: calls work() more times than the fast engine's ring holds, at a
 * moment its test chooses. It prints "ready", waits for a line on stdin,
 * makes CALLS calls, prints "done <sum>", waits for another line and
 * exits. The test stops rtrace in between, so nothing drains the ring. */
#include <stdio.h>
#include <string.h>

#define CALLS (1L << 21) /* 2^22 records: four times the ring */

__attribute__((noinline)) long work(long i)
{
	return i * 2 + 1;
}

static void wait_line(void)
{
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		line[0] = 0;
}

int main(void)
{
	long sum = 0;
	puts("ready");
	fflush(stdout);
	wait_line();
	for (long i = 0; i < CALLS; i++)
		sum += work(i);
	printf("done %ld\n", sum);
	fflush(stdout);
	wait_line();
	return 0;
}
