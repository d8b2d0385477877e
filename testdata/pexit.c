/* pexit: a thread leaves through pthread_exit() two traced frames deep.
 * Built with -fexceptions, work()'s cleanup variable runs only if the
 * forced unwind of pthread_exit gets past quit()'s return address. */
#include <pthread.h>
#include <stdio.h>

volatile int sink;

int leaf(int x) { return x + 1; }
void done(int *x) { printf("cleanup %d\n", *x); }
void quit(int x) { sink = leaf(x); pthread_exit(NULL); }
void work(int x)
{
	int guard __attribute__((cleanup(done))) = x;
	quit(x + 1);
	sink = 0;
}
void *start(void *arg) { work(1); return arg; }

int main(void)
{
	pthread_t t;
	pthread_create(&t, NULL, start, NULL);
	pthread_join(t, NULL);
	printf("pexit %d\n", leaf(sink));
	return 0;
}
