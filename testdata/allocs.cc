// allocs: allocations from the places a stack walker finds hard, for the
// tests that compare rtrace's in-process backtraces with its remote ones:
// C++ new and delete (operator delete tail-calls free), vectors that
// grow, an exception thrown through frames that allocated, allocations
// inside libc (strdup) and under a libc frame (qsort's comparison), deep
// recursion, posix_memalign, calloc and realloc, threads, and a signal
// handler that allocates on an alternate stack. It prints a checksum.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

static volatile unsigned long sink;
static void *volatile escape; // keeps malloc/free pairs the compiler would drop

__attribute__((noinline)) static void *deep(int n) {
	if (n == 0)
		return malloc(24);
	void *p = deep(n - 1);
	sink += (unsigned long)p & 1;
	return p;
}

__attribute__((noinline)) static void throws(int i) {
	std::string *s = new std::string(100 + i, 'x');
	sink += s->size();
	delete s;
	if (i % 3 == 0)
		throw std::runtime_error("thrown through an allocation");
}

static int compare(const void *a, const void *b) {
	void *p = malloc(8); // under qsort: libc frames in the middle of the stack
	escape = p;
	free(p);
	return *(const int *)a - *(const int *)b;
}

static void on_alarm(int) {
	void *p = malloc(40); // on the alternate stack
	escape = p;
	free(p);
}

static void *worker(void *arg) {
	long id = (long)arg;
	std::vector<int> v;
	for (int i = 0; i < 200; i++)
		v.push_back(i * (int)id); // grows: new and delete
	for (int i = 0; i < 50; i++) {
		char *s = strdup("an allocation inside libc");
		sink += strlen(s);
		free(s);
	}
	return nullptr;
}

int main() {
	stack_t ss = {};
	ss.ss_size = 1 << 16;
	ss.ss_sp = malloc(ss.ss_size);
	sigaltstack(&ss, nullptr);
	struct sigaction sa = {};
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR2, &sa, nullptr);

	for (int i = 0; i < 20; i++)
		free(deep(i * 3));
	for (int i = 0; i < 9; i++) {
		try {
			throws(i);
		} catch (const std::exception &e) {
			sink += strlen(e.what());
		}
	}
	int a[64];
	for (int i = 0; i < 64; i++)
		a[i] = (i * 37) % 64;
	qsort(a, 64, sizeof a[0], compare);
	for (int i = 0; i < 5; i++)
		raise(SIGUSR2);
	void *m = nullptr;
	if (posix_memalign(&m, 64, 1000) == 0)
		free(m);
	char *c = (char *)calloc(10, 10);
	c = (char *)realloc(c, 5000);
	free(c);
	pthread_t th[3];
	for (long i = 0; i < 3; i++)
		pthread_create(&th[i], nullptr, worker, (void *)(i + 1));
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], nullptr);
	void *leak = malloc(77); // one leak
	char line[64];
	int n = snprintf(line, sizeof line, "allocs %lu %p\n", sink, leak);
	write(1, line, n);
	return 0;
}
