/* spawn: posix_spawn runs this program again (its child on a stack of its
 * own, in the parent's memory until the exec), and waits for it. */
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

int leaf(int x) { return x + 1; }
int child_main(int x) { return leaf(x) * 3; }

int run(char *self)
{
	char *argv[] = {self, "child", NULL};
	pid_t pid;
	int status = 0;
	if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0)
		return -1;
	waitpid(pid, &status, 0);
	return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "child") == 0)
		return child_main(2) == 9 ? 3 : 1;
	printf("spawn %d\n", run(argv[0]) + leaf(0));
	return 0;
}
