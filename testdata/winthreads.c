// winthreads: four threads allocate blocks of 24 bytes without end, each
// kept in a global array (still reachable, every one), while the main
// thread, once each has made 2,000, sends itself the toggle signal
// (SIGUSR1: `rtrace sp-rtrace -s` closes its window), then lets them make
// 2,000 more and stops them. Whatever the window holds is reachable.
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define NT 4
#define NS (1 << 20)

void *volatile slot[NT][NS];
static atomic_int made[NT];
static atomic_int stop;

static void *run(void *a) {
	long i = (long)a;
	for (int k = 0; k < NS && !atomic_load(&stop); k++) {
		slot[i][k] = malloc(24);
		atomic_store(&made[i], k + 1);
	}
	return NULL;
}

// waitAll waits until every thread has made n blocks (or ran out).
static void waitAll(int n) {
	for (int i = 0; i < NT; i++)
		while (atomic_load(&made[i]) < n && atomic_load(&made[i]) < NS)
			sched_yield();
}

int main(void) {
	pthread_t t[NT];
	for (long i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, run, (void *)i);
	waitAll(2000);
	raise(SIGUSR1);
	int after[NT];
	for (int i = 0; i < NT; i++)
		after[i] = atomic_load(&made[i]);
	for (int i = 0; i < NT; i++)
		while (atomic_load(&made[i]) < after[i] + 2000 && atomic_load(&made[i]) < NS)
			sched_yield();
	atomic_store(&stop, 1);
	for (int i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	printf("winthreads done\n");
	return 0;
}
