/* fibthreads: fib(N) split over 4 threads, the same work as fib.c's fib(N)
 * but its top three calls: fib(N) = fib(N-2) + 2 fib(N-3) + fib(N-4). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static void *worker(void *arg)
{
	long n = (long)arg;
	return (void *)(long)fib((int)n);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;
	long parts[4] = {n - 2, n - 3, n - 3, n - 4}, sum = 0;
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, worker, (void *)parts[i]);
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(th[i], &r);
		sum += (long)r;
	}
	printf("fib(%d) = %ld\n", n, sum);
	return 0;
}
