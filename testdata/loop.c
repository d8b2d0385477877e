/* loop: calls work() forever (until killed), printing a tick now and then. */
#include <stdio.h>
#include <unistd.h>

volatile long total;

long work(long i) { return i * 2; }

int main(void)
{
	long i;
	printf("started\n");
	fflush(stdout);
	for (i = 0;; i++) {
		total += work(i);
		if (i % 1000 == 0)
			usleep(1000);
	}
	return 0;
}
