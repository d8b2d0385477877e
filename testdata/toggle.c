// toggle: loops for a while, allocating and freeing one block per
// iteration; each block's size is 1000 + the iteration number, so a trace
// shows which iterations it covers. It prints its pid, then each
// iteration's number.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	printf("pid %d\n", getpid());
	fflush(stdout);
	struct timespec ts = {0, 2000000}; // 2 ms
	for (int i = 0; i < n; i++) {
		void *p = malloc(1000 + i);
		free(p);
		printf("%d\n", i);
		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	return 0;
}
