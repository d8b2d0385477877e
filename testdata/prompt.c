// prompt: writes a prompt without a newline, works a while, then answers
// on the same line and again on stderr: what a terminal must show intact
// under rtrace, with nothing erased or joined to it.
#include <stdio.h>

__attribute__((noinline)) long work(long i) { return i * 3 + 1; }

int main(void) {
	long sum = 0;
	printf("name? ");
	fflush(stdout);
	for (long i = 0; i < 2000; i++)
		sum += work(i);
	printf("%ld\n", sum);
	fflush(stdout);
	fprintf(stderr, "done\n");
	return 0;
}
