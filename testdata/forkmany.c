// forkmany: allocates, then forks 50 children one after the other, each
// allocating the same way from the same function and exiting. A child's
// memory is a copy of its parent's, the in-process walker's unwind tables
// included: its walks need no stop of their own.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) static void work(void) {
	for (int i = 0; i < 10; i++) {
		void *volatile p = malloc(100);
		free(p);
	}
}

int main(void) {
	work();
	for (int k = 0; k < 50; k++) {
		pid_t c = fork();
		if (c == 0) {
			work();
			_exit(0);
		}
		waitpid(c, 0, 0);
	}
	return 0;
}
