/* roundtrip: a -pg fixture for the uftrace reader/writer round trip.
 * Arguments of several kinds, recursion, two threads and a fork. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct pair { int a, b; };

int add(int a, int b) { return a + b; }
char upper(char c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }
double scale(double x, float f) { return x * f; }
const char *greet(const char *name) { return name ? name : "nobody"; }
long many(long a, long b, long c, long d, long e, long f, long g, long h) { return a + b + c + d + e + f + g + h; }
int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
unsigned char small(unsigned char x, short y) { return (unsigned char)(x + y); }

void *worker(void *arg)
{
	int id = *(int *)arg;
	fib(5 + id);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[2];
	int ids[2] = {0, 1};
	int i;

	printf("%d %c %.2f %s %s %ld %d %u\n", add(2, 3), upper('q'), scale(1.5, 2.0f),
	       greet("world"), greet(NULL), many(1, 2, 3, 4, 5, 6, 7, 8), fib(6), small(250, 10));
	for (i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, worker, &ids[i]);
	for (i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		add(40, 2);
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	return argc > 5 ? 1 : 0;
}
