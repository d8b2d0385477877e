/* fork: the child runs its own calls; with an argument, it execs that program. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int leaf(int x) { return x + 1; }
int in_child(int x) { return leaf(x) * 2; }

int spawn(const char *prog)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		if (prog) {
			execl(prog, prog, (char *)NULL);
			_exit(127);
		}
		in_child(1);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
	int r = spawn(argc > 1 ? argv[1] : NULL);
	leaf(r);
	printf("fork done %d\n", r);
	return 0;
}
