// resflood: malloc/free pairs between two lines of input, for the test
// that stops rtrace meanwhile: "ready", then after a line N pairs (N =
// argv[1]) and "done N", then the end at the next line. argv[2]: blocks
// to allocate before the pairs (kept), from one call site: each after the
// first takes 2 ring slots, so the ring fills at another call of a pair.
#include <stdio.h>
#include <stdlib.h>

static void *volatile last;
static void *volatile kept[8];

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 100000;
	char line[16];
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		return 1;
	for (long i = argc > 2 ? atol(argv[2]) : 0; i > 0; i--)
		kept[i % 8] = malloc(8);
	for (long i = 0; i < n; i++) {
		last = malloc(16 + i % 100);
		free(last);
	}
	printf("done %ld\n", n);
	fflush(stdout);
	fgets(line, sizeof line, stdin);
	return 0;
}
