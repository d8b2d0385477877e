// leaky: 1000 allocations through three call paths; all but 17 are freed.
// It prints how many blocks it leaked and their total size, for the tests
// to compare with what rtrace reports.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef LEAKY_LIB
// Built as a shared library (-DLEAKY_LIB -shared -fPIC) for leakymain.c: the
// allocating frames then lie in a library.
#define main leaky_main
#endif

static void *blocks[1000];
static volatile int sink;

__attribute__((noinline)) static void *small_block(int i) {
	char *p = malloc(16 + i % 7); // LINE:small
	p[0] = (char)i;
	return p;
}

__attribute__((noinline)) static void *zeroed_block(int i) {
	int *p = calloc(4, 8 + i % 5); // LINE:zeroed
	sink += p[0];
	return p;
}

__attribute__((noinline)) static void *grown_block(int i) {
	char *p = malloc(100);
	p[0] = 1;
	char *q = realloc(p, 200 + i % 3); // LINE:grown
	q[1] = 2; // no tail call: grown_block stays in the backtrace
	return q;
}

__attribute__((noinline)) static void *make_block(int i) {
	switch (i % 3) {
	case 0:
		return small_block(i);
	case 1:
		return zeroed_block(i);
	default:
		return grown_block(i);
	}
}

__attribute__((noinline)) static size_t block_size(int i) {
	switch (i % 3) {
	case 0:
		return 16 + i % 7;
	case 1:
		return 4 * (8 + i % 5);
	default:
		return 200 + i % 3;
	}
}

int main(void) {
	size_t leaked = 0;
	int n = 0;
	for (int i = 0; i < 1000; i++)
		blocks[i] = make_block(i);
	for (int i = 0; i < 1000; i++) {
		if (i % 59 == 0) {
			leaked += block_size(i);
			n++;
			continue;
		}
		free(blocks[i]);
	}
	// snprintf and write: printf would malloc stdout's buffer, an 18th block.
	char line[64];
	int len = snprintf(line, sizeof line, "leaked %d blocks, %zu bytes\n", n, leaked);
	write(1, line, len);
	return 0;
}
