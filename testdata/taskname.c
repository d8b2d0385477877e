/* taskname: a process renames itself (prctl, pthread_setname_np), and a
 * thread it starts renames itself: the task name changes uftrace records
 * with -E linux:task-name. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/prctl.h>

void name1(const char *n) { prctl(PR_SET_NAME, n, 0, 0, 0); }
void name2(const char *n) { pthread_setname_np(pthread_self(), n); }
void *worker(void *arg) { name2("worker"); return arg; }

int main(void)
{
	pthread_t t;
	name1("foo");
	pthread_create(&t, NULL, worker, NULL);
	pthread_join(t, NULL);
	name2("bar");
	return 0;
}
