/* blocked: a thread whose only traced call blocks for good in system
 * calls made without the C library, while the process exits: rtrace
 * closes the call at the thread's end. Its readiness goes through a pipe
 * (written with a raw system call too: no traced call after its entry). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int ready[2];

static inline __attribute__((always_inline)) long raw3(long nr, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}

__attribute__((noinline)) void *worker(void *arg)
{
	char c = 1;
	raw3(1, ready[1], (long)&c, 1); /* write */
	for (;;)
		raw3(34, 0, 0, 0); /* pause */
	return arg;
}

__attribute__((noinline)) int helper(int x) { return x + 1; }

int main(void)
{
	pthread_t t;
	char c;
	if (pipe(ready) != 0 || pthread_create(&t, NULL, worker, NULL) != 0 || read(ready[0], &c, 1) != 1)
		return 1;
	printf("blocked %d\n", helper(2));
	fflush(stdout);
	exit(0);
}
