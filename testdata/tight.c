/* tight: eight threads call work() in a tight loop until told to stop, so
 * that an attach or a detach finds threads inside rtrace's code. On stdin,
 * each line "p" prints the calls made so far ("calls N"); at the end of
 * stdin the threads stop, every result is checked against its closed form
 * ("sums ok"), and every executable mapping is compared
 * with its file ("text intact"). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 8

static atomic_int stop;
static atomic_ulong calls[THREADS];
static unsigned long sums[THREADS], iters[THREADS];

__attribute__((noinline)) unsigned long work(unsigned long i)
{
	return i * 3 + 1;
}

/* The sum of work(i) for i < n, modulo 2^64 as the loop computes it. */
static unsigned long sum_ref(unsigned long n)
{
	return n % 2 ? n * ((n - 1) / 2) * 3 + n : (n / 2) * (n - 1) * 3 + n;
}

static void *run(void *arg)
{
	long t = (long)arg;
	unsigned long s = 0, i = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		s += work(i++);
		atomic_store_explicit(&calls[t], i, memory_order_relaxed);
	}
	sums[t] = s;
	iters[t] = i;
	return NULL;
}

static int check_text(void)
{
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[512];
	int bad = 0;
	while (fgets(line, sizeof line, maps)) {
		unsigned long lo, hi, off;
		char perms[8], path[256] = "";
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %255s", &lo, &hi, perms, &off, path) < 4)
			continue;
		if (perms[2] != 'x' || path[0] != '/')
			continue;
		FILE *f = fopen(path, "rb");
		if (!f)
			continue;
		size_t len = hi - lo;
		char *buf = malloc(len);
		fseek(f, off, SEEK_SET);
		size_t got = fread(buf, 1, len, f);
		fclose(f);
		if (memcmp(buf, (void *)lo, got) != 0) {
			printf("text differs: %s\n", path);
			bad++;
		}
		free(buf);
	}
	fclose(maps);
	if (!bad)
		printf("text intact\n");
	return bad;
}

int main(void)
{
	pthread_t th[THREADS];
	char line[64];
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, run, (void *)t);
	printf("pid %d\n", getpid());
	fflush(stdout);
	while (fgets(line, sizeof line, stdin)) {
		unsigned long n = 0;
		for (int t = 0; t < THREADS; t++)
			n += atomic_load(&calls[t]);
		printf("calls %lu\n", n);
		fflush(stdout);
	}
	atomic_store(&stop, 1);
	int bad = 0;
	for (int t = 0; t < THREADS; t++) {
		pthread_join(th[t], NULL);
		bad += sum_ref(iters[t]) != sums[t];
	}
	printf(bad ? "sums differ\n" : "sums ok\n");
	return check_text() + bad;
}
