/* threads: 8 threads, each with its own small call tree. */
#include <pthread.h>
#include <stdio.h>

int leaf(int x) { return x + 1; }
int mid(int x) { return leaf(x) + leaf(x + 1); }

void *worker(void *arg)
{
	long id = (long)arg;
	mid((int)id);
	return NULL;
}

int main(void)
{
	pthread_t th[8];
	long i;
	for (i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);
	for (i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	printf("threads done\n");
	return 0;
}
