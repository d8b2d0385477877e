// prodcons: a producer thread allocates blocks and a consumer thread frees
// them, through a queue; glibc hands the freed blocks back to the producer,
// so a block's malloc in one thread and its free in the other follow each
// other closely. Nothing leaks: a report whose calls are not in time order
// across the threads shows blocks freed before they were allocated, and
// reports them leaked. Argument: the number of blocks (default 20000).
#include <pthread.h>
#include <stdlib.h>

#define Q 64
static void *queue[Q];
static int head, tail, n;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void *consumer(void *arg) {
	for (int i = 0; i < n; i++) {
		pthread_mutex_lock(&mu);
		while (head == tail)
			pthread_cond_wait(&cv, &mu);
		void *p = queue[tail++ % Q];
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
		free(p);
	}
	return arg;
}

int main(int argc, char **argv) {
	n = argc > 1 ? atoi(argv[1]) : 20000;
	pthread_t t;
	pthread_create(&t, 0, consumer, 0);
	for (int i = 0; i < n; i++) {
		void *p = malloc(64);
		pthread_mutex_lock(&mu);
		while (head - tail == Q)
			pthread_cond_wait(&cv, &mu);
		queue[head++ % Q] = p;
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
	}
	pthread_join(t, 0);
	return 0;
}
