// spchain: sp-rtrace's launcher test program (tests/sp-rtrace.rtrace/
// trace_test.c in github.com/mer-tools/sp-rtrace: five() calls four()...
// down to zero(), which allocates and frees a block a byte larger each
// time), driven as a stepper instead of by sleep(1): it prints its pid,
// then each line "N" on stdin runs the next N rounds, each printed as
// "i step", so a test toggles tracing between rounds it chose. It ends
// at the end of stdin. An argument N makes each round N calls deeper
// (round() calling itself), for backtraces longer than 10 frames.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((noinline)) void zero(int size) { free(malloc(size)); }
__attribute__((noinline)) void one(int size) { zero(size); }
__attribute__((noinline)) void two(int size) { one(size); }
__attribute__((noinline)) void three(int size) { two(size); }
__attribute__((noinline)) void four(int size) { three(size); }
__attribute__((noinline)) void five(int size) { four(size); }

__attribute__((noinline)) void round_(int size, int deeper) {
	if (deeper > 0)
		round_(size, deeper - 1);
	else
		five(size);
	__asm__ volatile("" ::: "memory"); // no tail call: each level a frame
}

int main(int argc, char **argv) {
	char line[32];
	int size = 1000, i = 0, deeper = argc > 1 ? atoi(argv[1]) : 0;
	printf("pid %d\n", getpid());
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		for (int n = atoi(line); n > 0; n--) {
			round_(size++, deeper);
			printf("%d step\n", i++);
			fflush(stdout);
		}
	}
	return 0;
}
