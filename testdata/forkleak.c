// forkleak: the parent leaks malloc(100) and forks; the child frees its
// copy of the block, leaks a block of its own (malloc(200)) and exits. Each
// process has its own heap: memcheck with --trace-children=yes reports
// "100 bytes in 1 blocks are definitely lost" for the parent and 200 for
// the child. With an argument the child then execs that program, whose
// own calls belong to the new image. It prints the pids and addresses.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void *keep;          // the parent's block, freed by the child only
static void *volatile last; // no tail call: the allocating frame stays

__attribute__((noinline)) static void *parent_block(void) {
	last = malloc(100); // LINE:parent
	return last;
}

__attribute__((noinline)) static void *child_block(void) {
	last = malloc(200); // LINE:child
	return last;
}

// say writes a line without stdio: printf would malloc stdout's buffer, a
// block of each process the reports would show too.
static void say(const char *fmt, long a, void *p, void *q) {
	char line[128];
	int n = snprintf(line, sizeof line, fmt, a, p, q);
	write(1, line, n);
}

int main(int argc, char **argv) {
	keep = parent_block();
	pid_t pid = fork();
	if (pid == 0) {
		free(keep);
		void *own = child_block();
		say("child %ld %p %p\n", getpid(), keep, own);
		if (argc > 1) {
			execl(argv[1], argv[1], (char *)NULL);
			_exit(127);
		}
		_exit(0);
	}
	int status;
	waitpid(pid, &status, 0);
	say("parent %ld %p\n", getpid(), keep, 0);
	return WEXITSTATUS(status);
}
