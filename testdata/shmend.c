// shmend: a System V segment removed (IPC_RMID) while attached twice,
// which ends at its last shmdt, and one removed with nothing attached,
// which ends at the shmctl: sp-rtrace's shmsysv module reports each end
// there (src/modules/sp_rtrace_shmsysv.c).
#include <stdio.h>
#include <sys/ipc.h>
#include <sys/shm.h>
int main(void) {
	int id = shmget(IPC_PRIVATE, 1024, IPC_CREAT | 0600);
	void *a = shmat(id, NULL, 0), *b = shmat(id, NULL, 0);
	shmctl(id, IPC_RMID, NULL);
	shmdt(a);
	shmdt(b);
	int id2 = shmget(IPC_PRIVATE, 2048, IPC_CREAT | 0600);
	shmctl(id2, IPC_RMID, NULL);
	printf("%d %d\n", id, id2);
	return 0;
}
