// forkres: a process forks inside a call rtrace traces as a resource
// (spawn, named with --audit): the child returns from it through rtrace's
// exit code, with the shadow stack and the call being made its parent's.
// Each process then allocates and frees a block and says how it ended.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) int spawn(void) {
	int pid = fork();
	__asm__ volatile("" ::: "memory"); // no tail call: the frame stays
	return pid;
}

int main(void) {
	int pid = spawn();
	void *volatile p = malloc(pid == 0 ? 222 : 111);
	free(p);
	if (pid == 0)
		_exit(0);
	int st;
	waitpid(pid, &st, 0);
	printf("child %d %s %d\n", pid, WIFSIGNALED(st) ? "killed by signal" : "exited", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	return 0;
}
