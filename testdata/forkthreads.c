// forkthreads: a forked child starts a thread that allocates and frees
// blocks of 12345 bytes without end, and exits (_exit) once the thread has
// made 1000 of them, the thread in the middle of its loop. Every call of
// the child is the child's: none may be in its parent's trace.
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static sem_t made;

static void *spin(void *arg) {
	for (int i = 0;; i++) {
		void *volatile p = malloc(12345);
		free(p);
		if (i == 1000)
			sem_post(&made);
	}
	return arg;
}

int main(void) {
	int pid = fork();
	if (pid == 0) {
		sem_init(&made, 0, 0);
		pthread_t t;
		pthread_create(&t, 0, spin, 0);
		sem_wait(&made);
		_exit(0);
	}
	waitpid(pid, 0, 0);
	printf("child %d\n", pid);
	return 0;
}
