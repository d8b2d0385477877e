// resflood: malloc/free pairs between two lines of input, for the test
// that stops rtrace meanwhile: "ready", then after a line N pairs (N =
// argv[1]) and "done N", then the end at the next line.
#include <stdio.h>
#include <stdlib.h>

static void *volatile last;

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 100000;
	char line[16];
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		return 1;
	for (long i = 0; i < n; i++) {
		last = malloc(16 + i % 100);
		free(last);
	}
	printf("done %ld\n", n);
	fflush(stdout);
	fgets(line, sizeof line, stdin);
	return 0;
}
