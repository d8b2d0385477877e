// shmend: System V segments that end at different calls, as sp-rtrace's
// shmsysv module reports them (src/modules/sp_rtrace_shmsysv.c): one
// removed (IPC_RMID) while attached twice, which ends at its last shmdt;
// one removed with nothing attached, at the shmctl; one a child attached
// and exited from, at the shmctl; one a thread attached and exited, at
// the main thread's shmdt. Prints its pid first.
#include <pthread.h>
#include <stdio.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

static int id4;
static void *at4;

static void *attach(void *arg) {
	(void)arg;
	at4 = shmat(id4, NULL, 0);
	return NULL;
}

int main(void) {
	printf("pid %d\n", getpid());
	fflush(stdout);
	int id = shmget(IPC_PRIVATE, 1024, IPC_CREAT | 0600);
	void *a = shmat(id, NULL, 0), *b = shmat(id, NULL, 0);
	shmctl(id, IPC_RMID, NULL);
	shmdt(a);
	shmdt(b);

	int id2 = shmget(IPC_PRIVATE, 2048, IPC_CREAT | 0600);
	shmctl(id2, IPC_RMID, NULL);

	int id3 = shmget(IPC_PRIVATE, 3072, IPC_CREAT | 0600);
	pid_t child = fork();
	if (child == 0) {
		shmat(id3, NULL, 0);
		_exit(0); // the kernel detaches it
	}
	waitpid(child, NULL, 0);
	shmctl(id3, IPC_RMID, NULL);

	id4 = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
	pthread_t th;
	pthread_create(&th, NULL, attach, NULL);
	pthread_join(th, NULL);
	shmctl(id4, IPC_RMID, NULL);
	shmdt(at4);
	return 0;
}
