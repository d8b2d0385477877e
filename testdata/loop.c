/* loop: calls work() forever (until killed); says "looped" once it has
 * called it 1000 times, so that a test knows the trace holds that many. */
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
		if (i == 1000) {
			printf("looped\n");
			fflush(stdout);
		}
		if (i % 1000 == 0)
			usleep(1000);
	}
	return 0;
}
