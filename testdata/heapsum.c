// heapsum: a heap whose summary is large enough that a peer's own
// start-up allocations (heaptrack's preloaded library brings libstdc++,
// whose emergency exception pool is one call of 72,704 bytes) weigh under
// 1% of every number the summary tests compare: 20,100 temporary
// allocations (each freed before the next allocation), a peak of about
// 16 MB in 4,000 blocks, a block grown by 1,000 reallocs, and 50 blocks
// never freed. Single-threaded, the same calls in every run.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// KEEP_EVERY: every how many blocks of peak() one stays (-DKEEP_EVERY=40:
// twice the leaks, for TestSummaryDiff).
#ifndef KEEP_EVERY
#define KEEP_EVERY 80
#endif

static void *volatile sink;

__attribute__((noinline)) static void temporaries(int n) {
	for (int i = 0; i < n; i++) {
		char *p = malloc(100 + i % 50); // LINE:temporary
		p[0] = 1;
		sink = p;
		free(p);
	}
}

__attribute__((noinline)) static void **peak(int n) {
	void **blocks = malloc(n * sizeof *blocks);
	for (int i = 0; i < n; i++) {
		blocks[i] = malloc(2048 + (i % 16) * 256); // LINE:peak
		memset(blocks[i], 1, 16);
	}
	return blocks;
}

__attribute__((noinline)) static void *grow(int steps) {
	char *p = NULL;
	for (int i = 1; i <= steps; i++) {
		p = realloc(p, i * 64);
		p[0] = 1;
	}
	return p;
}

int main(void) {
	temporaries(20000);
	void **b = peak(4000);
	for (int i = 0; i < 4000; i++)
		if (i % KEEP_EVERY)
			free(b[i]); // every 80th block stays: 50 leaked
	free(b);
	free(grow(1000));
	temporaries(100);
	printf("heapsum done\n");
	return 0;
}
