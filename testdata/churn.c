// churn: N malloc/free pairs (N = argv[1], default 20000) of sizes from 16
// to 4111 bytes, through two noinline functions, for bench/churn_test.go.
// Each block is written in one function and read and freed in the other,
// and the sum printed at the end, so -O2 keeps every malloc and free.
// With argv[2] = L, every L-th block (i % L == 0) is leaked instead of
// freed: L = 100 leaks 1%, the benchmark's leak workload.
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static size_t churn_size(int i) {
	return 16 + (size_t)i * 37 % 4096;
}

__attribute__((noinline)) static unsigned char *churn_alloc(int i) {
	size_t size = churn_size(i);
	unsigned char *p = malloc(size);
	if (p == NULL)
		abort();
	p[0] = (unsigned char)i;
	p[size - 1] = (unsigned char)(i >> 8);
	return p;
}

static unsigned char *leaked; // the last leaked block: not lost until replaced

__attribute__((noinline)) static unsigned long churn_free(unsigned char *p, int i, int leak) {
	unsigned long sum = p[0] + p[churn_size(i) - 1];
	if (leak)
		leaked = p;
	else
		free(p);
	return sum;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	int every = argc > 2 ? atoi(argv[2]) : 0;
	unsigned long sum = 0;
	for (int i = 0; i < n; i++)
		sum += churn_free(churn_alloc(i), i, every > 0 && i % every == 0);
	leaked = NULL; // the last leak is lost too
	printf("churn %d: checksum %lu\n", n, sum);
	return 0;
}
