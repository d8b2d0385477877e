/* vfork: the child borrows the parent's memory and stack until it execs
 * (with an argument, that program) or calls _exit. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

volatile int sink; /* keeps -O2 from dropping the call to leaf */

int leaf(int x) { return x + 1; }

int spawn(const char *prog)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = vfork();
	if (pid == 0) {
		if (prog) {
			execl(prog, prog, (char *)NULL);
			_exit(127);
		}
		_exit(leaf(2));
	}
	waitpid(pid, &status, 0);
	return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
	int r = spawn(argc > 1 ? argv[1] : NULL);
	sink = leaf(r);
	printf("vfork done %d\n", r);
	return 0;
}
