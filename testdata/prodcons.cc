// prodcons: a producer thread allocates blocks and a consumer thread
// releases them, through a queue; the allocator hands the released blocks
// back to the producer, so a block's allocation in one thread and its
// release in the other follow each other closely. Nothing leaks: a report
// whose calls are not in time order across the threads shows blocks
// released before they were allocated, and reports them leaked.
// Arguments: the number of blocks (default 20000), and how they are made
// and released: free (malloc, free; the default), delete (operator new,
// operator delete) or realloc0 (malloc, realloc(p, 0)).
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <new>

#define Q 64
static void *queue[Q];
static int head, tail, n;
static const char *how = "free";
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void *make() {
	if (strcmp(how, "delete") == 0)
		return ::operator new(64);
	return malloc(64);
}

static void release(void *p) {
	if (strcmp(how, "delete") == 0)
		::operator delete(p);
	else if (strcmp(how, "realloc0") == 0)
		p = realloc(p, 0); // frees p, returns NULL (glibc)
	else
		free(p);
}

static void *consumer(void *arg) {
	for (int i = 0; i < n; i++) {
		pthread_mutex_lock(&mu);
		while (head == tail)
			pthread_cond_wait(&cv, &mu);
		void *p = queue[tail++ % Q];
		pthread_cond_broadcast(&cv);
		pthread_mutex_unlock(&mu);
		release(p);
	}
	return arg;
}

int main(int argc, char **argv) {
	n = argc > 1 ? atoi(argv[1]) : 20000;
	if (argc > 2)
		how = argv[2];
	pthread_t t;
	pthread_create(&t, 0, consumer, 0);
	for (int i = 0; i < n; i++) {
		void *p = make();
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
